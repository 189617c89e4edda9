"""Which GatedDeltaNet kernels Qwen3.5 runs with, said once at start-up.

Qwen3.5's linear-attention layers (three in four) call four kernels that transformers 5.24
takes from ``flash-linear-attention`` (``fla``) and ``causal-conv1d`` when they import, and
otherwise from a reference PyTorch path that is correct but much slower. On a CPU that is
the only path and not worth a word; on a GPU the delta-rule kernels decide the speed, so a GPU
run on their reference path warns loudly (``pip install '.[kernels]'`` brings
flash-linear-attention). causal-conv1d is no extra of ours (source-only, it needs nvcc and the
network to build); without it the layer's short depthwise convolution runs as torch's conv1d,
which is named in the start-up line but not warned about.
"""

from __future__ import annotations

import importlib
import logging
import warnings

# kernel -> (package, module inside it), as transformers' hub_kernels resolves them.
GATED_DELTA_NET_KERNELS = {
    "chunk_gated_delta_rule": ("fla", "fla.ops.gated_delta_rule"),
    "fused_recurrent_gated_delta_rule": ("fla", "fla.ops.gated_delta_rule"),
    "causal_conv1d_fn": ("causal_conv1d", "causal_conv1d"),
    "causal_conv1d_update": ("causal_conv1d", "causal_conv1d"),
}
REFERENCE = "reference PyTorch"


def gated_delta_net_path() -> dict[str, str]:
    """kernel name -> the package that provides it, or ``REFERENCE``."""
    path = {}
    for kernel, (package, module_name) in GATED_DELTA_NET_KERNELS.items():
        try:
            found = getattr(importlib.import_module(module_name), kernel, None)
        except Exception:  # noqa: BLE001 - a broken install is as good as none here
            found = None
        path[kernel] = package if found is not None else REFERENCE
    return path


class _ReferenceKernelFilter:
    """Drops transformers' "falling back to its reference PyTorch implementation ... install
    causal_conv1d / flash-linear-attention" lines."""

    def filter(self, record) -> bool:
        return "falling back to its reference PyTorch implementation" not in record.getMessage()


def quiet_cpu_kernel_warnings() -> None:
    """On a CPU those kernels (CUDA-only) cannot be installed and the reference path is the only
    one, so the four lines are noise there; on a GPU they stay, next to ``announce_kernels``'s."""
    hub_kernels = logging.getLogger("transformers.integrations.hub_kernels")
    if not any(isinstance(f, _ReferenceKernelFilter) for f in hub_kernels.filters):
        hub_kernels.addFilter(_ReferenceKernelFilter())


def uses_gated_delta_net(model) -> bool:
    config = getattr(model, "config", None)
    text = getattr(config, "text_config", config)
    return "linear_attention" in (getattr(text, "layer_types", None) or [])


def announce_kernels(model, gpu: bool) -> str | None:
    """One line naming the GatedDeltaNet path; a loud warning when a GPU run is on the reference one.

    On a CPU, where there is nothing to install that would help, transformers' four per-kernel
    "falling back" lines are silenced instead."""
    if not uses_gated_delta_net(model):
        return None
    path = gated_delta_net_path()
    slow = sorted(k for k, v in path.items() if v == REFERENCE and GATED_DELTA_NET_KERNELS[k][0] == "fla")
    line = "kernels: GatedDeltaNet " + ", ".join(f"{k}={v}" for k, v in path.items())
    if not gpu:
        quiet_cpu_kernel_warnings()
        return line
    if slow:
        warnings.warn(
            f"GPU run on the reference PyTorch GatedDeltaNet kernels ({', '.join(slow)}): generation and the loss "
            "pass are several times slower. Install the fast kernels with `pip install '.[kernels]'` "
            "(flash-linear-attention; part of '.[gpu]').", RuntimeWarning, stacklevel=2)
    return line
