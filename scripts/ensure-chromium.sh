#!/usr/bin/env bash
# Find a Chromium for the renderer: one on PATH; else Debian's package when we are root;
# else Playwright's own download (works without root on a user's machine).
set -euo pipefail
PY=${PY:-.venv/bin/python}
for name in chromium chromium-browser google-chrome; do
  if command -v "$name" >/dev/null 2>&1; then
    exit 0
  fi
done
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian chromium (apt-get)..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  exit 0
fi
echo "no system Chromium and not root: installing Playwright's Chromium"
"$PY" -m playwright install chromium
