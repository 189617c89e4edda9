"""A tiny, random-weight HPSv3 look-alike built offline, for the HPSv3 tests.

Written in the official checkpoint's legacy layout (``base/`` config + processor and
``HPSv3.safetensors``), so loading it exercises the product's real loading path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from rewards.hpsv3 import (
    CHECKPOINT_FILENAME,
    HPSV3_INSTRUCTION,
    HPSV3_REWARD_SUFFIX,
    REWARD_TOKEN,
    HPSv3Config,
    HPSv3RewardModel,
    to_legacy_state_dict,
)

QWEN2VL_SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)

# Renders the same layout as Qwen2-VL-Instruct's template: a default system turn, image placeholders
# in place inside user turns, and "<|im_start|>assistant\n" as the generation prompt.
TINY_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if loop.first and message['role'] != 'system' -%}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' or 'image' in part -%}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif part['type'] == 'video' or 'video' in part -%}{{ '<|vision_start|><|video_pad|><|vision_end|>' }}"
    "{%- elif 'text' in part -%}{{ part['text'] }}"
    "{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{ '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)


def _tiny_tokenizer():
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1024, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    # Training on the instruction keeps its token count (and so test time) small.
    corpus = [HPSV3_INSTRUCTION, HPSV3_REWARD_SUFFIX, "You are a helpful assistant.", "a watercolour painting of a fox"]
    backend.train_from_iterator(corpus * 4, trainer)
    # Qwen2-VL's specials first, then <|Reward|> last: the id layout upstream ends up with after adding it.
    specials = [*QWEN2VL_SPECIAL_TOKENS, REWARD_TOKEN]
    backend.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in specials])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>", padding_side="right"
    )


def _tiny_legacy_config(tokenizer, hidden_size: int, extra_vocab: int) -> dict[str, Any]:
    """A 4.45-style (flat) Qwen2-VL config.json, like the one shipped with Qwen2-VL-7B-Instruct."""
    ids = tokenizer.convert_tokens_to_ids
    return {
        "architectures": ["Qwen2VLForConditionalGeneration"],
        "model_type": "qwen2_vl",
        "attention_dropout": 0.0,
        "bos_token_id": ids("<|endoftext|>"),
        "eos_token_id": ids("<|im_end|>"),
        "vision_start_token_id": ids("<|vision_start|>"),
        "vision_end_token_id": ids("<|vision_end|>"),
        "vision_token_id": ids("<|vision_pad|>"),
        "image_token_id": ids("<|image_pad|>"),
        "video_token_id": ids("<|video_pad|>"),
        "hidden_act": "silu",
        "hidden_size": hidden_size,
        # Far above Qwen's 0.02 so that the random model's attention is sharp: with near-uniform
        # attention, token positions (and so the position-mode switch) would barely matter.
        "initializer_range": 0.25,
        "intermediate_size": 2 * hidden_size,
        "max_position_embeddings": 4096,
        "max_window_layers": 2,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "sliding_window": 4096,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "use_cache": True,
        "use_sliding_window": False,
        # The base config is larger than the tokenizer, as Qwen2-VL-7B's 152064 is.
        "vocab_size": len(tokenizer) + extra_vocab,
        "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
        "vision_config": {
            "depth": 2,
            "embed_dim": 32,
            "mlp_ratio": 2,
            "num_heads": 2,
            "in_chans": 3,
            "hidden_size": hidden_size,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "spatial_patch_size": 14,
            "temporal_patch_size": 2,
        },
    }


def build_tiny_hpsv3(out_dir: str | Path, seed: int = 0, hidden_size: int = 64) -> HPSv3Config:
    """Write a random-weight HPSv3 look-alike: ``base/`` (config + processor) and ``HPSv3.safetensors``
    in the official legacy key layout, so loading exercises the real path. Returns a CPU/float32 config."""
    from safetensors.torch import save_file
    from transformers import AutoConfig, Qwen2VLImageProcessor, Qwen2VLProcessor, Qwen2VLVideoProcessor

    out_dir = Path(out_dir)
    base_dir = out_dir / "base"
    base_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = _tiny_tokenizer()
    processor = Qwen2VLProcessor(
        image_processor=Qwen2VLImageProcessor(),
        tokenizer=tokenizer,
        video_processor=Qwen2VLVideoProcessor(),
        chat_template=TINY_CHAT_TEMPLATE,
    )
    processor.save_pretrained(str(base_dir))
    (base_dir / "config.json").write_text(json.dumps(_tiny_legacy_config(tokenizer, hidden_size, extra_vocab=16), indent=2))

    backbone_config = AutoConfig.from_pretrained(str(base_dir))
    # The checkpoint embeds exactly len(tokenizer) rows: upstream resized after adding <|Reward|>.
    backbone_config.text_config.vocab_size = len(tokenizer)
    torch.manual_seed(seed)
    model = HPSv3RewardModel(
        backbone_config,
        reward_token_id=tokenizer.convert_tokens_to_ids(REWARD_TOKEN),
        dtype=torch.float32,
    )
    state = {key: value.detach().clone().contiguous() for key, value in model.state_dict().items()}
    state["lm_head.weight"] = torch.randn(len(tokenizer), hidden_size) * 0.02
    checkpoint_path = out_dir / CHECKPOINT_FILENAME
    save_file(to_legacy_state_dict(state), str(checkpoint_path))
    return HPSv3Config(
        checkpoint_path=str(checkpoint_path),
        base_model_path=str(base_dir),
        device="cpu",
        dtype="float32",
        batch_size=4,
    )
