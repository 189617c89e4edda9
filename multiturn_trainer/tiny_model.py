"""A tiny, offline Qwen3.5 vision-language policy built through the same code path as the real ones.

Tests and the CPU demo need a model that loads with ``AutoModelForImageTextToText`` and
``AutoProcessor`` exactly like Qwen/Qwen3.5-4B (``Qwen3_5ForConditionalGeneration``) and
Qwen/Qwen3.5-35B-A3B (``Qwen3_5MoeForConditionalGeneration``), but that is built here from
nothing: no Hub access, no downloaded weights. ``build_tiny_model`` writes such a checkpoint
(random weights from a fixed seed, a byte-level BPE tokenizer trained on the project's own
sketches, the real processor classes and the real chat template); ``load_pretrained`` is the one
loader the trainer uses for tiny and real checkpoints alike.

Where the chat template comes from: ``QWEN3_5_CHAT_TEMPLATE`` is the official Qwen3.5 template,
reproduced verbatim as data (``multiturn_trainer/data/qwen3_5_chat_template.jinja``). The text was taken from two independent public copies that agree:
the ``chat_template`` of Qwen/Qwen3.5-27B's ``tokenizer_config.json`` (quoted in a public
GitHub project) and ``mlx-community/Qwen3.5-35B-A3B-4bit/chat_template.jinja`` (quoted in a
public regression fixture together with its SHA-256). Our copy hashes to that recorded
SHA-256, ``QWEN3_5_CHAT_TEMPLATE_SHA256``, so it is byte-for-byte the released file.

Special tokens follow the Qwen3-VL lineage in released order so their ids keep the real
layout relative to ``<|endoftext|>`` (Qwen3.5's config defaults place ``<|vision_start|>``,
``<|image_pad|>`` and ``<|video_pad|>`` at +9, +12 and +13 from ``<|endoftext|>`` = 248044).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from env.files import DATA_ROOT

# torch is imported where it is used: `watercolour --help` builds this module's parser, and
# importing torch there costs 1.5 s warm, over 10 s from a cold disk.
if TYPE_CHECKING:
    import torch


# Where the default tokenizer corpus comes from: the sketches the policy is trained to write.
DEFAULT_CORPUS_GLOBS: tuple[str, ...] = (
    "examples/sketches/*.js",
    "examples/simple/*.js",
)

QWEN3_5_CHAT_TEMPLATE_SHA256 = "a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715"

# The template is shipped as a data file (package data), byte-for-byte the released file.
QWEN3_5_CHAT_TEMPLATE = (files("multiturn_trainer") / "data" / "qwen3_5_chat_template.jinja").read_bytes().decode("utf-8")

# (content, special) in the released order, so ids sit at the same offsets from <|endoftext|>
# as in the real vocabulary. ``special=False`` matches the released tokenizer: tool and
# thinking tags survive ``decode(skip_special_tokens=True)``, which the trainer relies on to
# split reasoning from the sketch.
QWEN3_5_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", True),
    ("<|fim_middle|>", True),
    ("<|fim_suffix|>", True),
    ("<|fim_pad|>", True),
    ("<|repo_name|>", True),
    ("<|file_sep|>", True),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)

# Prompt-like English for the tokenizer corpus: the words the environment's feedback, the
# task prompts and the model's own reasoning use, so a turn of chat does not shatter into
# single bytes.
PROMPT_LIKE_ENGLISH: tuple[str, ...] = (
    "You are a watercolour painter who writes p5.brush sketches. Reply with the complete sketch in one ```js block.",
    "Paint a still life of three lemons on a blue-grey cloth with warm shadows and soft edges.",
    "Paint a harbour at dusk: boats on calm water, a pale orange sky and the lights of the town.",
    "Paint a koi pond seen from above, with lily pads, ripples and two orange fish.",
    "Paint a mountain lake at morning, the peaks reflected in still water, mist over the pines.",
    "Paint a field of red poppies under a summer sky, loose washes and a few sharp petals.",
    "Paint tulips in a glass vase on a wooden table by a window.",
    "Paint a blue vase with a single flower, a simple background and one shadow.",
    "Paint the sun over rolling green hills with a winding path.",
    "Paint two apples side by side, one wash each, no shadow or ground.",
    "Turn 1 of 4: your sketch passed the gate. The painting covers most of the canvas.",
    "Turn 2 of 4: your sketch did not pass the gate. Problems: unknown_brush_method, no paint reached the canvas.",
    "Fix these problems and reply with the complete sketch in one ```js block.",
    "Look at your painting, decide what to change, and reply with the complete sketch.",
    "The renderer failed for reasons unrelated to your sketch, so this turn was not judged. Send the sketch again.",
    "JavaScript threw an error: ReferenceError: x is not defined at draw.",
    "The water is too dark and the sky is flat. I will lighten the blue, add a second glaze near the horizon "
    "and let the edges bleed outwards so the reflection looks wet.",
    "The lemons look like flat circles. I should give each one a tilted blob shape, a warmer shadow on the "
    "cloth, and a lighter highlight where the light from the window falls.",
    "Use brush.fill with a colour and an opacity, brush.fillBleed for soft edges and brush.fillTexture for "
    "paper grain. Build shapes with brush.beginShape, brush.vertex and brush.endShape, or use brush.circle.",
    "Layer transparent washes from light to dark. Leave the white of the paper for highlights. Keep the "
    "composition simple: background, middle ground, subject, then small accents.",
    "The painting is a watercolour on warm paper, six hundred by six hundred pixels, drawn once with noLoop.",
    "Picture 1 shows the previous attempt. Compare it with the subject and improve colour, shape and depth.",
)


@dataclass(frozen=True)
class TinyTextSizes:
    """Text decoder sizes; ratios follow the released checkpoints where it is cheap to do so."""

    hidden_size: int = 64
    intermediate_size: int = 128
    # Three GatedDeltaNet layers then one full-attention layer: the released 3:1 interleave.
    num_hidden_layers: int = 4
    full_attention_interval: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 32
    linear_num_key_heads: int = 2
    linear_num_value_heads: int = 4
    linear_key_head_dim: int = 16
    linear_value_head_dim: int = 16
    linear_conv_kernel_dim: int = 4
    # Only a quarter of each head is rotated (as released); 32 * 0.25 = 8 rotary dims = 4
    # frequencies, split over (temporal, height, width) like the real [11, 11, 10].
    partial_rotary_factor: float = 0.25
    mrope_section: tuple[int, int, int] = (2, 1, 1)
    rope_theta: float = 10_000_000.0
    max_position_embeddings: int = 262_144
    # MoE only: the released model routes each token to 8 of 256 experts plus a shared one.
    num_experts: int = 4
    num_experts_per_tok: int = 2
    moe_intermediate_size: int = 32
    shared_expert_intermediate_size: int = 32


@dataclass(frozen=True)
class TinyVisionSizes:
    """Vision tower sizes. Patch, temporal patch and merge sizes must equal the processor's."""

    depth: int = 2
    hidden_size: int = 32
    intermediate_size: int = 64
    num_heads: int = 2
    patch_size: int = 16
    temporal_patch_size: int = 2
    spatial_merge_size: int = 2
    # A 16 x 16 learned position grid, resampled to each image's grid (released: 48 x 48).
    num_position_embeddings: int = 256


# The released processor lets an image keep millions of pixels; the tiny one caps a 600x600
# painting at 192x192 = 12x12 patches = 36 image tokens after the 2x2 merge, so a multi-turn
# episode with several paintings stays cheap on CPU.
TINY_MIN_PIXELS = 64 * 64
TINY_MAX_PIXELS = 192 * 192

# An upper bound: the default corpus runs out of merges at about 1.4k tokens, and a larger
# vocabulary only means more unused rows.
DEFAULT_VOCAB_SIZE = 2048
# The released embedding (248320 rows) is larger than the tokenizer; the tiny one is padded
# the same way, so the model never meets an id without a row and sometimes samples one with
# no token (it decodes to nothing), as the real model can.
EMBEDDING_ROW_MULTIPLE = 64

# dense, moe: tiny Qwen3.5 VLMs; text: a tiny text-only LlamaForCausalLM (the `text` family of
# multiturn_trainer/families.py, whose entries name these kinds).
MODEL_KINDS = ("dense", "moe", "text")


def default_corpus(data_root: Path = DATA_ROOT) -> list[str]:
    """The project's sketches (deduplicated, in path order) followed by prompt-like English."""
    documents: list[str] = []
    seen: set[str] = set()
    for pattern in DEFAULT_CORPUS_GLOBS:
        for path in sorted(data_root.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            # A sketch in both folders counts once; counting it twice would skew merges.
            if text not in seen:
                seen.add(text)
                documents.append(text)
    documents.extend(PROMPT_LIKE_ENGLISH)
    documents.extend(_policy_texts())
    return documents


def _policy_texts() -> list[str]:
    """What the policy reads and writes most: the system prompt and compact procedural sketches.

    Measured: with them in the corpus the turn-1 prompt is 1143 tokens instead of 1853 and a
    compact sketch 595 instead of 632, so the CPU warm start and demo run ~35 % faster.
    """
    # Here, not at the top: `watercolour --help` imports this module (MODEL_KINDS), and the
    # generator reads configs/subjects.yaml, which must not be able to break --help.
    from env.prompts import system_prompt
    from multiturn_trainer.procedural import SUBJECTS, generate_sketch

    return [system_prompt(), *(generate_sketch(subject, seed, 3) for subject in SUBJECTS for seed in range(3))]


def corpus_sha256(documents: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for document in documents:
        encoded = document.encode("utf-8")
        # Length-prefixed so that ["ab", "c"] and ["a", "bc"] hash differently.
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return digest.hexdigest()


def train_tokenizer(corpus: list[str], vocab_size: int):
    """A ``Qwen3_5Tokenizer`` whose byte-level BPE is trained on ``corpus``, plus the added tokens.

    The BPE uses the released tokenizer's normaliser and pre-tokeniser (NFC, Qwen's split
    regex, byte-level without prefix space), so text splits the way it does for the real
    model; only the merges differ. ``vocab_size`` caps BPE tokens plus added tokens; a small
    corpus may run out of merges first.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import AddedToken
    from transformers.models.qwen3_5.tokenization_qwen3_5 import PRETOKENIZE_REGEX, Qwen3_5Tokenizer

    bpe_budget = vocab_size - len(QWEN3_5_ADDED_TOKENS)
    byte_alphabet = pre_tokenizers.ByteLevel.alphabet()
    if bpe_budget < len(byte_alphabet):
        raise ValueError(
            f"vocab_size={vocab_size} leaves {bpe_budget} BPE tokens; byte-level BPE needs at least "
            f"{len(byte_alphabet)} plus {len(QWEN3_5_ADDED_TOKENS)} added tokens"
        )
    trainer_tokenizer = Tokenizer(models.BPE())
    trainer_tokenizer.normalizer = normalizers.NFC()
    trainer_tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer_tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=bpe_budget,
        # Every byte gets a token even if the corpus lacks it, so any text encodes (no <unk>).
        initial_alphabet=byte_alphabet,
        show_progress=False,
    )
    trainer_tokenizer.train_from_iterator(corpus, trainer)
    trained_model = json.loads(trainer_tokenizer.to_str())["model"]

    tokenizer = Qwen3_5Tokenizer(
        vocab=trained_model["vocab"],
        merges=[tuple(merge) for merge in trained_model["merges"]],
        # Passing the named tokens here would add them out of order; they are set below.
        unk_token=None,
        eos_token=None,
        pad_token=None,
        model_max_length=262_144,
    )
    tokenizer.add_tokens(
        [AddedToken(content, special=special, normalized=False) for content, special in QWEN3_5_ADDED_TOKENS]
    )
    # As released: a turn ends at <|im_end|>, padding uses <|endoftext|>, there is no BOS.
    tokenizer.eos_token = "<|im_end|>"
    tokenizer.pad_token = "<|endoftext|>"
    tokenizer.chat_template = QWEN3_5_CHAT_TEMPLATE
    return tokenizer


# TinyTextSizes fields that only the MoE model uses, and the dense MLP width it does not.
MOE_ONLY_FIELDS = ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size")
DENSE_ONLY_FIELDS = ("intermediate_size",)


def _text_sizes_for(kind: str, text: TinyTextSizes) -> dict[str, Any]:
    unused = DENSE_ONLY_FIELDS if kind == "moe" else MOE_ONLY_FIELDS
    return {name: value for name, value in asdict(text).items() if name not in unused}


def _rounded_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _model_config(kind: str, tokenizer, text: TinyTextSizes, vision: TinyVisionSizes):
    from transformers import Qwen3_5Config, Qwen3_5MoeConfig

    token_id = tokenizer.convert_tokens_to_ids
    text_config: dict[str, Any] = {
        "vocab_size": _rounded_up(len(tokenizer), EMBEDDING_ROW_MULTIPLE),
        "hidden_size": text.hidden_size,
        "num_hidden_layers": text.num_hidden_layers,
        "full_attention_interval": text.full_attention_interval,
        "num_attention_heads": text.num_attention_heads,
        "num_key_value_heads": text.num_key_value_heads,
        "head_dim": text.head_dim,
        "linear_num_key_heads": text.linear_num_key_heads,
        "linear_num_value_heads": text.linear_num_value_heads,
        "linear_key_head_dim": text.linear_key_head_dim,
        "linear_value_head_dim": text.linear_value_head_dim,
        "linear_conv_kernel_dim": text.linear_conv_kernel_dim,
        "max_position_embeddings": text.max_position_embeddings,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": text.rope_theta,
            "partial_rotary_factor": text.partial_rotary_factor,
            "mrope_section": list(text.mrope_section),
            "mrope_interleaved": True,
        },
        "eos_token_id": token_id("<|im_end|>"),
        "pad_token_id": token_id("<|endoftext|>"),
        "bos_token_id": None,
        "dtype": "float32",
    }
    feed_forward_fields = MOE_ONLY_FIELDS if kind == "moe" else DENSE_ONLY_FIELDS
    text_config.update({name: getattr(text, name) for name in feed_forward_fields})
    vision_config = {
        "depth": vision.depth,
        "hidden_size": vision.hidden_size,
        "intermediate_size": vision.intermediate_size,
        "num_heads": vision.num_heads,
        "patch_size": vision.patch_size,
        "temporal_patch_size": vision.temporal_patch_size,
        "spatial_merge_size": vision.spatial_merge_size,
        "out_hidden_size": text.hidden_size,
        "num_position_embeddings": vision.num_position_embeddings,
    }
    config_class = Qwen3_5MoeConfig if kind == "moe" else Qwen3_5Config
    return config_class(
        text_config=text_config,
        vision_config=vision_config,
        image_token_id=token_id("<|image_pad|>"),
        video_token_id=token_id("<|video_pad|>"),
        vision_start_token_id=token_id("<|vision_start|>"),
        vision_end_token_id=token_id("<|vision_end|>"),
        dtype="float32",
    )


def _processor(tokenizer, vision: TinyVisionSizes):
    """The released processor stack (Qwen3VLProcessor over Qwen2VL image / Qwen3VL video
    processors, mean and std 0.5) with pixel budgets scaled down for the tiny model."""
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor

    shared = {
        "patch_size": vision.patch_size,
        "temporal_patch_size": vision.temporal_patch_size,
        "merge_size": vision.spatial_merge_size,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
    }
    image_processor = Qwen2VLImageProcessor(
        size={"shortest_edge": TINY_MIN_PIXELS, "longest_edge": TINY_MAX_PIXELS}, **shared
    )
    video_processor = Qwen3VLVideoProcessor(
        size={"shortest_edge": TINY_MIN_PIXELS, "longest_edge": TINY_MAX_PIXELS * vision.temporal_patch_size},
        **shared,
    )
    return Qwen3VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=QWEN3_5_CHAT_TEMPLATE,
    )


def build_tiny_model(
    out_dir: str | Path,
    kind: str = "dense",
    seed: int = 0,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    corpus: list[str] | None = None,
    text_sizes: TinyTextSizes | None = None,
) -> Path:
    """Write a tiny Qwen3.5 checkpoint (model, processor, tokenizer, chat template) to ``out_dir``
    (``kind="text"``: a tiny text-only Llama instead, ``build_tiny_text_model``).

    The same ``seed`` (and corpus) gives identical weights and tokenizer. Loads with
    ``AutoModelForImageTextToText`` / ``AutoProcessor`` like the released models; see
    ``tiny_model.json`` in the directory for what was built.
    """
    from transformers import GenerationConfig, Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration

    if kind not in MODEL_KINDS:
        raise ValueError(f"kind must be one of {MODEL_KINDS}, got {kind!r}")
    if kind == "text":
        return build_tiny_text_model(out_dir, seed=seed, vocab_size=vocab_size, corpus=corpus)
    out_dir = Path(out_dir)
    documents = list(corpus) if corpus is not None else default_corpus()
    if not documents:
        raise ValueError("the tokenizer corpus is empty")
    text_sizes, vision_sizes = text_sizes or TinyTextSizes(), TinyVisionSizes()

    tokenizer = train_tokenizer(documents, vocab_size)
    processor = _processor(tokenizer, vision_sizes)
    config = _model_config(kind, tokenizer, text_sizes, vision_sizes)
    model_class = Qwen3_5MoeForConditionalGeneration if kind == "moe" else Qwen3_5ForConditionalGeneration
    # A private RNG stream: the weights depend on ``seed`` alone, and the caller's global
    # RNG state is left as it was.
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_class(config)
    model.generation_config = GenerationConfig(
        eos_token_id=[tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>")],
        pad_token_id=tokenizer.pad_token_id,
    )

    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)

    text_config = config.text_config
    description = {
        "kind": kind,
        "seed": seed,
        "model_class": model_class.__name__,
        "parameters": sum(parameter.numel() for parameter in model.parameters()),
        "layer_types": list(text_config.layer_types),
        "text": _text_sizes_for(kind, text_sizes) | {"vocab_size": text_config.vocab_size},
        "vision": asdict(vision_sizes) | {"out_hidden_size": config.vision_config.out_hidden_size},
        "tokenizer": {
            "requested_vocab_size": vocab_size,
            "tokens": len(tokenizer),
            "added_tokens": len(QWEN3_5_ADDED_TOKENS),
            "corpus_documents": len(documents),
            "corpus_sha256": corpus_sha256(documents),
            "default_corpus": corpus is None,
        },
        "image_processor": {"min_pixels": TINY_MIN_PIXELS, "max_pixels": TINY_MAX_PIXELS},
        "chat_template_sha256": hashlib.sha256(QWEN3_5_CHAT_TEMPLATE.encode("utf-8")).hexdigest(),
    }
    (out_dir / "tiny_model.json").write_text(json.dumps(description, indent=2) + "\n", encoding="utf-8")
    return out_dir


# SmolLM2-135M-Instruct's chat template (Apache-2.0), as build-pretrained's model carries it: a
# string-content ChatML template, the shape most text-only models' templates have.
SMOLLM2_CHAT_TEMPLATE = (files("multiturn_trainer") / "data" / "smollm2_chat_template.jinja").read_bytes().decode("utf-8")
# SmolLM2's special tokens at its ids (0, 1, 2).
TEXT_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


@dataclass(frozen=True)
class TinyLlamaSizes:
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 16
    max_position_embeddings: int = 8192


def train_text_tokenizer(corpus: list[str], vocab_size: int):
    """A byte-level BPE tokenizer trained on ``corpus`` with SmolLM2's special tokens and chat
    template: a plain ``PreTrainedTokenizerFast``, as a text-only model ships."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(TEXT_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        model_max_length=8192)
    tokenizer.chat_template = SMOLLM2_CHAT_TEMPLATE
    return tokenizer


def build_tiny_text_model(out_dir: str | Path, seed: int = 0, vocab_size: int = DEFAULT_VOCAB_SIZE,
                          corpus: list[str] | None = None, sizes: TinyLlamaSizes | None = None) -> Path:
    """Write a tiny random text-only ``LlamaForCausalLM`` (SmolLM2's architecture, shrunk) with a
    trained tokenizer and SmolLM2's chat template to ``out_dir``: the `text` family offline."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    out_dir = Path(out_dir)
    documents = list(corpus) if corpus is not None else default_corpus()
    sizes = sizes or TinyLlamaSizes()
    tokenizer = train_text_tokenizer(documents, vocab_size)
    end, pad = tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.pad_token_id
    config = LlamaConfig(vocab_size=_rounded_up(len(tokenizer), EMBEDDING_ROW_MULTIPLE), tie_word_embeddings=True,
                         bos_token_id=tokenizer.convert_tokens_to_ids("<|im_start|>"), eos_token_id=end,
                         pad_token_id=pad, dtype="float32", **asdict(sizes))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=[end], pad_token_id=pad)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    description = {
        "kind": "text", "seed": seed, "model_class": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "layer_types": ["full_attention"] * sizes.num_hidden_layers,
        "text": asdict(sizes) | {"vocab_size": config.vocab_size},
        "tokenizer": {"requested_vocab_size": vocab_size, "tokens": len(tokenizer),
                      "corpus_documents": len(documents), "corpus_sha256": corpus_sha256(documents),
                      "default_corpus": corpus is None},
        "chat_template_sha256": hashlib.sha256(SMOLLM2_CHAT_TEMPLATE.encode("utf-8")).hexdigest(),
    }
    (out_dir / "tiny_model.json").write_text(json.dumps(description, indent=2) + "\n", encoding="utf-8")
    return out_dir


def load_pretrained(path: str | Path, dtype: str | torch.dtype | None = None, device: str | torch.device | None = None):
    """(model, processing class) for a checkpoint directory, tiny or real, through its family's
    Auto classes (``multiturn_trainer.families``): a Qwen3.5 VLM with its processor, a text-only
    causal LM with its tokenizer.

    ``dtype=None`` keeps the checkpoint's own dtype (float32 for the tiny model, bfloat16 for
    the released ones). With ``device`` the weights are placed there while loading rather
    than first materialised on the CPU, which matters for the 35B MoE.
    """
    from multiturn_trainer.families import family_at

    return family_at(path).load(path, dtype=dtype, device=device)
