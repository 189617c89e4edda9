#!/usr/bin/env bash
# Writes the wheel folder that scripts/gpu_check.py needs on the lent GPU machine, whose image
# (Python 3.12, torch 2.11.0+cu130, transformers 5.17.0, accelerate 1.15.0, peft, numpy,
# pillow, pyyaml, einops, triton 3.6.0, ...) has no network: only what that image lacks, one
# version of each, for CPython 3.12 on x86-64 Linux.
#
#   scripts/device_wheels.sh DIR
#
# What goes in, and why only this:
# - flash-linear-attention + fla-core 0.6.0 (pure Python + Triton; the project's `.[gpu]` pin):
#   the fast GatedDeltaNet kernels. Without them transformers runs Qwen3.5's linear attention
#   on its reference PyTorch path, and generation and the loss pass measure that path instead.
#   Their one other need, einops, is on the image.
# Left out on purpose: causal-conv1d (a source build against the installed torch; transformers
# falls back to its PyTorch conv), vLLM (a 336 MB wheel: over the 64 MiB a call may carry),
# TRL, datasets and pydantic (only the real train() step needs them; gpu_check skips it).
#
# On the machine, before the check (as the device notes say):
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#       --target /tmp/site DIR/*.whl && export PYTHONPATH=/tmp/site
set -euo pipefail
dir=${1:?usage: scripts/device_wheels.sh DIR}
python=${PYTHON:-python3}
mkdir -p "$dir"
wheels=(flash-linear-attention==0.6.0 fla-core==0.6.0)
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$dir" "${wheels[@]}"
# One version of each: two copies of a package stop the whole install there.
names=$(for w in "$dir"/*.whl; do basename "$w" | cut -d- -f1 | tr 'A-Z-' 'a-z_'; done | sort)
if [ -n "$(uniq -d <<<"$names")" ]; then
    echo "device_wheels: more than one version of: $(uniq -d <<<"$names" | tr '\n' ' ')" >&2
    exit 1
fi
du -ch "$dir"/*.whl | tail -1 | sed 's/total/device_wheels: wheel folder/'
