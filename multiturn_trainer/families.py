"""Model families: everything the trainer does differently for one kind of model, in one table.

The episode loop, the trainer, the SFT warm start, eval, replay and pool build are written once;
where a model family needs something of its own they ask its entry here (``family_of(model)`` or
``family_at(folder)``). A new family is one more ``ModelFamily`` in ``FAMILIES``.

* ``qwen3_5``: Qwen3.5 (dense and MoE), natively multimodal. Loaded with
  ``AutoModelForImageTextToText`` + ``AutoProcessor``; the policy sees its paintings: a revision
  turn carries the image, expanded to one ``<|image_pad|>`` per image feature (collapsed to one
  per image for a colocated vLLM, ``grpo.collapse_image_pads``), with ``pixel_values``,
  ``image_grid_thw`` and the per-token ``mm_token_type_ids`` its 3-D rotary positions are
  computed from (``episodes.generation_fields`` / ``loss_image_inputs``, 2x2 patch merge). LoRA
  leaves the vision tower alone. ``build-tiny --kind dense|moe`` builds a tiny offline one.
* ``llava``: a LLaVA-shaped VLM (``LlavaForConditionalGeneration``: a vision tower, a projector,
  any causal LM), such as the one ``build-pretrained --vlm`` assembles around SmolLM2. Its
  processor expands each image to a fixed number of ``<|image|>`` tokens (the name TRL's GRPO
  trainer looks for) and its ``pixel_values`` hold one row per image; no grid, no per-token
  type ids. LoRA leaves the vision tower and the projector alone (the vision warm start trains
  them).
* ``text``: any transformers causal LM (``AutoModelForCausalLM`` + ``AutoTokenizer``), e.g. the
  SmolLM2 of ``build-pretrained``. It reads no images: chat messages are rendered with plain
  string contents (most text-only chat templates concatenate ``content`` as a string), a
  revision turn carries the feedback and, when the environment says to show it, the current
  sketch, and says in words that there is no image. ``build-tiny --kind text`` builds a tiny
  random ``LlamaForCausalLM`` with a trained tokenizer and SmolLM2's chat template.

A model whose ``model_type`` no entry names is taken as ``text`` unless its config has a vision
side: a VLM without an entry would otherwise be trained blind without anyone noticing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from env.errors import UsageError


@dataclass(frozen=True)
class ModelFamily:
    name: str
    model_types: tuple[str, ...]  # config.json model_type values this entry claims
    sees_images: bool  # revision turns show the painting (else: text that says there is none)
    auto_model: str  # the transformers Auto class that loads a checkpoint folder
    auto_processor: str  # ... and its processing class (a processor for VLMs, a tokenizer for text)
    image_pad_token: str | None = None  # repeated once per image feature in the token sequence
    lora_exclude: str | None = None  # modules LoRA leaves alone (regex, PEFT's exclude_modules)
    tiny_kinds: tuple[str, ...] = ()  # `build-tiny --kind` values that build a tiny model of this family

    def image_pad_token_id(self, tokenizer) -> int | None:
        if self.image_pad_token is None:
            return None
        token_id = tokenizer.convert_tokens_to_ids(self.image_pad_token)
        return None if token_id is None or token_id == tokenizer.unk_token_id else token_id

    def chat_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` as this family's chat template takes them."""
        if self.sees_images:
            return messages
        from agent.messages import text_only_messages

        return text_only_messages(messages)

    def load(self, path: str | Path, dtype=None, device=None):
        """(model, processing class) of a checkpoint folder (or Hub id) of this family.

        ``dtype=None`` keeps the checkpoint's own dtype; with ``device`` the weights are placed
        there while loading rather than first materialised on the CPU (the 35B MoE)."""
        import torch
        import transformers

        if isinstance(dtype, str) and dtype != "auto":
            dtype = getattr(torch, dtype)
        model = getattr(transformers, self.auto_model).from_pretrained(
            str(path), dtype="auto" if dtype is None else dtype,
            device_map=None if device is None else {"": str(device)})
        processing_class = getattr(transformers, self.auto_processor).from_pretrained(str(path))
        return model, processing_class


FAMILIES: dict[str, ModelFamily] = {
    family.name: family for family in (
        ModelFamily(name="qwen3_5", model_types=("qwen3_5", "qwen3_5_moe"), sees_images=True,
                    auto_model="AutoModelForImageTextToText", auto_processor="AutoProcessor",
                    image_pad_token="<|image_pad|>", lora_exclude=r".*\.visual\..*", tiny_kinds=("dense", "moe")),
        ModelFamily(name="llava", model_types=("llava",), sees_images=True,
                    auto_model="AutoModelForImageTextToText", auto_processor="AutoProcessor",
                    image_pad_token="<|image|>", lora_exclude=r".*(vision_tower|multi_modal_projector).*"),
        ModelFamily(name="text", model_types=(), sees_images=False, auto_model="AutoModelForCausalLM",
                    auto_processor="AutoTokenizer", tiny_kinds=("text",)),
    )
}
TEXT = FAMILIES["text"]


def family_for_config(config: dict[str, Any]) -> ModelFamily:
    """The family of a model config (config.json's contents)."""
    model_type = config.get("model_type")
    for family in FAMILIES.values():
        if model_type in family.model_types:
            return family
    if config.get("vision_config") is not None:
        raise UsageError(f"model_type {model_type!r} has a vision side, and no entry of "
                         "multiturn_trainer/families.py says how to show it images; add one there")
    return TEXT


def family_at(path: str | Path) -> ModelFamily:
    """The family of a checkpoint folder (read from its config.json; no torch import)."""
    config = Path(path) / "config.json"
    if not config.is_file():
        raise UsageError(f"{path} holds no model (config.json)")
    return family_for_config(json.loads(config.read_text(encoding="utf-8")))


def family_of(model) -> ModelFamily:
    """The family of a loaded transformers model (a PEFT wrapper's base model too)."""
    return family_for_config(model.config.to_dict())


def family_of_kind(kind: str) -> ModelFamily:
    """The family whose tiny builder ``build-tiny --kind KIND`` runs."""
    for family in FAMILIES.values():
        if kind in family.tiny_kinds:
            return family
    raise ValueError(f"no family builds a tiny {kind!r} model")


def tiny_kinds() -> tuple[str, ...]:
    return tuple(kind for family in FAMILIES.values() for kind in family.tiny_kinds)
