# The watercolour OpenEnv server: sandboxed headless Chromium renders p5.brush sketches
# sent over WebSocket sessions (see openenv.yaml and env/server.py).
#
#   docker build -t watercolour-env .
#   docker run --rm -p 8000:8000 watercolour-env
# Pinned to Debian 12, the release the renderer was measured on (Chromium, Mesa llvmpipe).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DEBIAN_FRONTEND=noninteractive

# Debian's Chromium instead of Playwright's download: it comes from the package mirror like
# everything else and gets security updates. Mesa (EGL + llvmpipe) backs the default
# "llvmpipe-f16" GL backend; node/npm are only for the pinned install of p5 and p5.brush.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        chromium \
        libegl1 \
        libegl-mesa0 \
        libgl1-mesa-dri \
        nodejs \
        npm \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/watercolour

# Library layer first: it changes far less often than the Python code.
COPY package.json package-lock.json ./
RUN npm ci --no-bin-links --no-audit --no-fund --loglevel=error \
    && npm cache clean --force

COPY pyproject.toml README.md ./
COPY agent ./agent
COPY curation ./curation
COPY env ./env
COPY multiturn_trainer ./multiturn_trainer
COPY rewards ./rewards
COPY watercolour ./watercolour
# Presets, example sketches and the starter pool ship inside the package (watercolour/_data).
COPY configs ./configs
COPY examples ./examples
COPY pools/starter ./pools/starter
# The OpenEnv server needs the `serve` extra (openenv); the CPU stack's versions from its lock.
COPY locks ./locks
RUN pip install --no-cache-dir -c locks/cpu.txt '.[serve]'

# The installed packages live in site-packages, away from node_modules, so the renderer is
# told where the pinned libraries and the browser are.
ENV WATERCOLOUR_NODE_MODULES=/opt/watercolour/node_modules \
    WATERCOLOUR_CHROMIUM=/usr/bin/chromium

# The server renders untrusted code: run it without root.
RUN useradd --create-home --uid 1000 painter
USER painter

EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=4)"

# Inside a container the port has to be reachable from outside it, hence 0.0.0.0 here
# while the CLI's own default stays 127.0.0.1. Off loopback `serve` requires a token: run
# with `-e WATERCOLOUR_TOKEN=...` (a secret, on a Space) and give clients the same token.
CMD ["watercolour", "serve", "--host", "0.0.0.0", "--port", "8000"]
