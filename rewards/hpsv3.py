"""HPSv3, ported to transformers 5.x: Qwen2-VL-7B-Instruct plus a small MLP head.

The released ``hpsv3`` 1.0.0 package pins transformers 4.45.2, and its model class (a subclass of
``Qwen2VLForConditionalGeneration`` that reaches into 4.45 internals) breaks on 5.x. This module
re-implements the scoring path against the 5.x ``Qwen2VLModel`` and keeps every input detail the
reward head was trained on, because a reward model scores only the distribution it saw:

* Prompt: the official instruction text (``hpsv3/dataset/data_collator_qwen.py`` in the 1.0.0
  wheel) followed by ``"\\nPlease provide the overall ratings of this image: <|Reward|>\\n\\nEND\\n"``,
  inside one user turn ``[image, text]`` rendered with the base model's chat template and
  ``add_generation_prompt=True``. So ``<|Reward|>`` sits near the end of the user turn, not last.
* Image: flattened onto white (the official code calls ``convert("RGB")``, which turns
  transparent pixels black; our paintings come as RGBA, so we flatten deliberately), then resized
  with PIL bicubic to 28-aligned sides, aspect kept, with an area near 448x448 pixels
  (``min_pixels = max_pixels = 256*28*28`` upstream; ``smart_resize_dims``). Each 28x28 block
  is one visual token, so the count depends on the shape: 256 for 448x448, 225 for a 600x600
  painting (420x420), 266 for 512x384 (532x392).
* Positions: the official forward calls the 4.45 text model directly with ``position_ids=None``,
  which there means plain 1-D positions 0..L-1, identical for the three M-RoPE sections. In 5.x the
  multimodal ``Qwen2VLModel`` builds 3-D M-RoPE positions itself when none are given, which moves
  every token after the image and changes scores. ``position_mode="1d"`` (the default) therefore
  passes the 1-D positions explicitly; ``"mrope"`` is there to measure the difference.
* Head: hidden state at the ``<|Reward|>`` token -> Linear(H,1024) ReLU Dropout Linear(1024,16) ReLU
  Linear(16,2), run in float32; output ``[mu, log_sigma]``; the score is ``sigmoid((mu - offset) / T)``.

Checkpoint layout (``MizzenAI/HPSv3``, ``HPSv3.safetensors``): the ``state_dict()`` of the 4.45
reward class, i.e. ``visual.*`` (vision tower), ``model.*`` (text decoder), ``lm_head.weight`` and
``rm_head.{0,3,5}.{weight,bias}`` (indices of the ``nn.Sequential`` above; 1, 2 and 4 are ReLU and
Dropout and own no weights). The embedding and ``lm_head`` have ``len(tokenizer)`` rows (the base
tokenizer plus ``<|Reward|>``) because upstream resized them, not the config's 152064. The layout
was read from the public training code (``Qwen2VLRewardModelBT`` with ``rm_head_type="ranknet"``
and no ``rm_head_kwargs``); the first load of the real file re-checks it: loading is strict and
reports any missing or unexpected key. ``lm_head`` is not needed for a reward and is skipped.
"""

from __future__ import annotations

import contextlib
import copy
import math
import re
import threading
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import torch
from PIL import Image
from torch import nn

from env.pigment import open_on_white

REWARD_TOKEN = "<|Reward|>"
CHECKPOINT_FILENAME = "HPSv3.safetensors"
HEAD_HIDDEN_SIZES = (1024, 16)
HEAD_DROPOUT = 0.05
OUTPUT_DIM = 2  # [mu, log_sigma]
IMAGE_FACTOR = 28  # patch 14 x spatial merge 2: image sides must be multiples of this
MAX_ASPECT_RATIO = 200
POSITION_MODES = ("1d", "mrope")

# The official instruction, byte for byte: trailing spaces and blank lines are part of the model input.
HPSV3_INSTRUCTION = (
    "\n"
    "You are tasked with evaluating a generated image based on Visual Quality and Text Alignment and give a "
    "overall score to estimate the human preference. Please provide a rating from 0 to 10, with 0 being the "
    "worst and 10 being the best. \n"
    "\n"
    "**Visual Quality:**  \n"
    "Evaluate the overall visual quality of the image. The following sub-dimensions should be considered:\n"
    "- **Reasonableness:** The image should not contain any significant biological or logical errors, such as "
    "abnormal body structures or nonsensical environmental setups.\n"
    "- **Clarity:** Evaluate the sharpness and visibility of the image. The image should be clear and easy to "
    "interpret, with no blurring or indistinct areas.\n"
    "- **Detail Richness:** Consider the level of detail in textures, materials, lighting, and other visual "
    "elements (e.g., hair, clothing, shadows).\n"
    "- **Aesthetic and Creativity:** Assess the artistic aspects of the image, including the color scheme, "
    "composition, atmosphere, depth of field, and the overall creative appeal. The scene should convey a sense "
    "of harmony and balance.\n"
    "- **Safety:** The image should not contain harmful or inappropriate content, such as political, violent, "
    "or adult material. If such content is present, the image quality and satisfaction score should be the "
    "lowest possible. \n"
    "\n"
    "**Text Alignment:**  \n"
    "Assess how well the image matches the textual prompt across the following sub-dimensions:\n"
    "- **Subject Relevance** Evaluate how accurately the subject(s) in the image (e.g., person, animal, "
    "object) align with the textual description. The subject should match the description in terms of number, "
    "appearance, and behavior.\n"
    "- **Style Relevance:** If the prompt specifies a particular artistic or stylistic style, evaluate how well "
    "the image adheres to this style.\n"
    "- **Contextual Consistency**: Assess whether the background, setting, and surrounding elements in the "
    "image logically fit the scenario described in the prompt. The environment should support and enhance the "
    "subject without contradictions.\n"
    "- **Attribute Fidelity**: Check if specific attributes mentioned in the prompt (e.g., colors, clothing, "
    "accessories, expressions, actions) are faithfully represented in the image. Minor deviations may be "
    "acceptable, but critical attributes should be preserved.\n"
    "- **Semantic Coherence**: Evaluate whether the overall meaning and intent of the prompt are captured in "
    "the image. The generated content should not introduce elements that conflict with or distort the original "
    "description.\n"
    "Textual prompt - {text_prompt}\n"
    "\n"
    "\n"
)
HPSV3_REWARD_SUFFIX = f"\nPlease provide the overall ratings of this image: {REWARD_TOKEN}\n\nEND\n"

# Anything shaped like a chat control token is removed from user prompts: a stray "<|Reward|>" or
# "<|image_pad|>" in a subject would add a second reward position or break the image placeholders.
_CONTROL_TOKEN_PATTERN = re.compile(r"<\|[^<>|]*\|>")


class InvalidImageError(ValueError):
    """The bytes are not a usable image (undecodable, empty, extreme aspect ratio): the caller's fault."""


@dataclass
class HPSv3Config:
    # File or directory (then ``HPSv3.safetensors`` inside it) with the official weights, legacy layout.
    checkpoint_path: str | None = None
    # Directory with the Qwen2-VL-7B-Instruct ``config.json`` and processor/tokenizer files.
    base_model_path: str | None = None
    device: str = "auto"  # "auto": cuda when available, else cpu
    dtype: str = "bfloat16"  # the dtype HPSv3 was trained in; the head always runs in float32
    batch_size: int = 8
    position_mode: str = "1d"  # "1d": as trained; "mrope": transformers 5.x's 3-D default, for comparison
    # score = sigmoid((mu - score_offset) / score_temperature); with the defaults the public reference
    # pool's "meh" paintings land near 0.13 and its "love" ones near 0.70.
    score_temperature: float = 4.0
    score_offset: float = 0.0
    max_pixels: int = 448 * 448
    # None pins min to max as upstream does, so every image is resized to ~448x448 pixels.
    min_pixels: int | None = None
    prompt_template: str = "a watercolour painting of {subject}"
    default_prompt: str = "a watercolour painting"
    attn_implementation: str = "sdpa"

    def __post_init__(self):
        if self.position_mode not in POSITION_MODES:
            raise ValueError(f"position_mode must be one of {POSITION_MODES}, got {self.position_mode!r}")
        if not self.score_temperature > 0:
            raise ValueError(f"score_temperature must be positive, got {self.score_temperature}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}")
        if self.max_pixels < IMAGE_FACTOR * IMAGE_FACTOR:
            raise ValueError(f"max_pixels must be at least {IMAGE_FACTOR * IMAGE_FACTOR}, got {self.max_pixels}")
        if self.min_pixels is not None and not 0 < self.min_pixels <= self.max_pixels:
            raise ValueError(f"min_pixels must be in (0, max_pixels], got {self.min_pixels}")
        resolve_dtype(self.dtype)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "HPSv3Config":
        """Build from a YAML/JSON mapping; unknown keys are an error so typos do not pass silently."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown HPSv3 config keys: {unknown}")
        return cls(**dict(values))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def prompt_for_subject(self, subject: str | None) -> str:
        return self.prompt_template.format(subject=subject) if subject else self.default_prompt


@dataclass(frozen=True)
class HPSv3Score:
    mu: float
    log_sigma: float
    score: float


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def resolve_dtype(name: str) -> torch.dtype:
    dtypes = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
    if name not in dtypes:
        raise ValueError(f"dtype must be one of {sorted(dtypes)}, got {name!r}")
    return dtypes[name]


def score_from_mu(mu: float, temperature: float = 4.0, offset: float = 0.0) -> float:
    """sigmoid((mu - offset) / temperature), written to stay finite for any mu."""
    z = (mu - offset) / temperature
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


# ----------------------------------------------------------------------------------------------
# Images
# ----------------------------------------------------------------------------------------------


def flatten_rgba_on_white(png_bytes: bytes) -> Image.Image:
    """Decode an image and composite any transparency over white; always returns RGB.

    Raises InvalidImageError (a ValueError) for bytes that are not a decodable image.
    """
    try:
        return open_on_white(png_bytes)
    except Exception as exc:  # PIL raises several unrelated types for bad data
        raise InvalidImageError(f"not a decodable image: {exc}") from exc


def smart_resize_dims(height: int, width: int, min_pixels: int, max_pixels: int, factor: int = IMAGE_FACTOR) -> tuple[int, int]:
    """Qwen2-VL's sizing rule: sides multiples of ``factor``, area within [min, max], aspect kept."""
    if min(height, width) <= 0:
        raise InvalidImageError(f"image has no pixels: {width}x{height}")
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise InvalidImageError(f"aspect ratio above {MAX_ASPECT_RATIO}: {width}x{height}")
    resized_h = max(factor, round(height / factor) * factor)
    resized_w = max(factor, round(width / factor) * factor)
    if resized_h * resized_w > max_pixels:
        shrink = math.sqrt(height * width / max_pixels)
        resized_h = max(factor, math.floor(height / shrink / factor) * factor)
        resized_w = max(factor, math.floor(width / shrink / factor) * factor)
    elif resized_h * resized_w < min_pixels:
        grow = math.sqrt(min_pixels / (height * width))
        resized_h = math.ceil(height * grow / factor) * factor
        resized_w = math.ceil(width * grow / factor) * factor
    return resized_h, resized_w


def prepare_image(png_bytes: bytes, max_pixels: int = 448 * 448, min_pixels: int | None = None) -> Image.Image:
    """Flatten on white and resize (PIL bicubic, as upstream) to the 28-aligned scoring size."""
    image = flatten_rgba_on_white(png_bytes)
    height, width = smart_resize_dims(
        image.height, image.width, min_pixels=max_pixels if min_pixels is None else min_pixels, max_pixels=max_pixels
    )
    if (width, height) != image.size:
        image = image.resize((width, height), Image.BICUBIC)
    return image


# ----------------------------------------------------------------------------------------------
# Checkpoint layout
# ----------------------------------------------------------------------------------------------

_LEGACY_VISION = "visual."
_LEGACY_TEXT = "model."
_NATIVE_VISION = "model.visual."
_NATIVE_TEXT = "model.language_model."


def remap_legacy_key(key: str) -> str:
    """One 4.45 key to its 5.x name. Already-native keys pass through unchanged (idempotent)."""
    if key.startswith((_NATIVE_VISION, _NATIVE_TEXT)):
        return key
    if key.startswith(_LEGACY_VISION):
        return _NATIVE_VISION + key[len(_LEGACY_VISION):]
    if key.startswith(_LEGACY_TEXT):
        return _NATIVE_TEXT + key[len(_LEGACY_TEXT):]
    return key  # lm_head.*, rm_head.*


def legacy_key(key: str) -> str:
    """Inverse of ``remap_legacy_key`` (5.x name to the 4.45 name the official file uses)."""
    if key.startswith(_NATIVE_VISION):
        return _LEGACY_VISION + key[len(_NATIVE_VISION):]
    if key.startswith(_NATIVE_TEXT):
        return _LEGACY_TEXT + key[len(_NATIVE_TEXT):]
    return key


def _unwrap_state_dict(state_dict: Mapping[str, Any]) -> Mapping[str, Any]:
    # Training checkpoints are sometimes saved as {"model": state_dict}; the official loader unwraps it too.
    inner = state_dict.get("model") if isinstance(state_dict, Mapping) else None
    return inner if isinstance(inner, Mapping) else state_dict


def remap_legacy_state_dict(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """4.45 layout (``visual.*``, ``model.*``) to 5.x (``model.visual.*``, ``model.language_model.*``)."""
    remapped: dict[str, torch.Tensor] = {}
    for key, value in _unwrap_state_dict(state_dict).items():
        new_key = remap_legacy_key(key)
        if new_key in remapped:
            raise ValueError(f"checkpoint holds {key!r} in both legacy and native layout")
        remapped[new_key] = value
    return remapped


def to_legacy_state_dict(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {legacy_key(key): value for key, value in state_dict.items()}


class _CheckpointReader:
    """Tensors by name from a .safetensors or torch file, read one at a time to keep host memory low
    (the official file is ~16 GB). Use as a context manager so the file is closed after loading."""

    def __init__(self, path: Path):
        self.path = path
        self._safe = None
        self._tensors: Mapping[str, torch.Tensor] | None = None
        if path.suffix == ".safetensors":
            from safetensors import safe_open

            self._safe = safe_open(str(path), framework="pt", device="cpu")
        else:
            loaded = torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)
            self._tensors = _unwrap_state_dict(loaded)

    def __enter__(self) -> "_CheckpointReader":
        return self

    def __exit__(self, *exc_info) -> None:
        if self._safe is not None:
            self._safe.__exit__(*exc_info)
        self._safe = None
        self._tensors = None

    def keys(self) -> list[str]:
        return list(self._safe.keys()) if self._safe is not None else list(self._tensors.keys())

    def shape(self, key: str) -> tuple[int, ...]:
        if self._safe is not None:
            return tuple(self._safe.get_slice(key).get_shape())
        return tuple(self._tensors[key].shape)

    def get(self, key: str) -> torch.Tensor:
        return self._safe.get_tensor(key) if self._safe is not None else self._tensors[key]


def resolve_checkpoint_file(path: str | Path) -> Path:
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_FILENAME
    if not path.is_file():
        raise FileNotFoundError(f"HPSv3 checkpoint not found: {path}")
    return path


# ----------------------------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------------------------


def build_reward_head(hidden_size: int) -> nn.Sequential:
    """Same module order as the official head so its keys (rm_head.0/.3/.5) load unchanged."""
    first, second = HEAD_HIDDEN_SIZES
    return nn.Sequential(
        nn.Linear(hidden_size, first),
        nn.ReLU(),
        nn.Dropout(HEAD_DROPOUT),
        nn.Linear(first, second),
        nn.ReLU(),
        nn.Linear(second, OUTPUT_DIM),
    )


def plain_position_ids(attention_mask: torch.Tensor | None, input_ids: torch.Tensor) -> torch.Tensor:
    """The 1-D positions HPSv3 was trained with, as (3, batch, length) for the three M-RoPE sections.

    Counting only attended tokens gives 0..L-1 for every real token whatever the padding side, so a
    sample scores the same alone or in a batch; with right padding (what we use) this equals arange(L).
    """
    if attention_mask is None:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).expand(input_ids.shape[0], -1)
    else:
        positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    return positions.unsqueeze(0).expand(3, -1, -1)


def reward_token_positions(input_ids: torch.Tensor, reward_token_id: int) -> torch.Tensor:
    """Index of the single reward token in each row (rows may be padded differently)."""
    is_reward = input_ids == reward_token_id
    counts = is_reward.sum(dim=1)
    if not bool((counts == 1).all()):
        raise ValueError(f"every sample needs exactly one {REWARD_TOKEN} token, found counts {counts.tolist()}")
    return is_reward.int().argmax(dim=1)


class HPSv3RewardModel(nn.Module):
    """Qwen2-VL backbone (5.x ``Qwen2VLModel``) + the HPSv3 head; forward returns [B, 2] = [mu, log_sigma]."""

    def __init__(
        self,
        backbone_config,
        reward_token_id: int,
        position_mode: str = "1d",
        dtype: torch.dtype | None = None,
        attn_implementation: str = "sdpa",
    ):
        super().__init__()
        from transformers import Qwen2VLModel

        if position_mode not in POSITION_MODES:
            raise ValueError(f"position_mode must be one of {POSITION_MODES}, got {position_mode!r}")
        config = copy.deepcopy(backbone_config)
        self.model = Qwen2VLModel._from_config(config, dtype=dtype, attn_implementation=attn_implementation)
        # float32 head as upstream (it casts the hidden state up before the head).
        self.rm_head = build_reward_head(config.text_config.hidden_size).float()
        self.reward_token_id = int(reward_token_id)
        self.position_mode = position_mode

    @property
    def backbone_dtype(self) -> torch.dtype:
        return self.model.language_model.embed_tokens.weight.dtype

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        pixel_values: torch.Tensor | None = None,
        image_grid_thw: torch.Tensor | None = None,
        mm_token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        position_mode: str | None = None,
        **unused_processor_outputs,
    ) -> torch.Tensor:
        mode = position_mode or self.position_mode
        if mode not in POSITION_MODES:
            raise ValueError(f"position_mode must be one of {POSITION_MODES}, got {mode!r}")
        if position_ids is None and mode == "1d":
            position_ids = plain_position_ids(attention_mask, input_ids)
        if position_ids is None and mm_token_type_ids is None:
            # M-RoPE needs to know which tokens are image tokens; derive it when the caller did not pass it.
            mm_token_type_ids = (input_ids == self.model.config.image_token_id).long()
        if pixel_values is not None:
            pixel_values = pixel_values.to(self.backbone_dtype)
        try:
            outputs = self.model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                pixel_values=pixel_values,
                image_grid_thw=image_grid_thw,
                mm_token_type_ids=mm_token_type_ids,
                use_cache=False,
            )
        finally:
            # Qwen2VLModel caches M-RoPE deltas for generation; a scorer must not carry them between calls.
            self.model.rope_deltas = None
        hidden = outputs.last_hidden_state
        rows = torch.arange(hidden.shape[0], device=hidden.device)
        pooled = hidden[rows, reward_token_positions(input_ids, self.reward_token_id).to(hidden.device)]
        return self.rm_head(pooled.float())


@contextlib.contextmanager
def _skip_weight_init():
    # Random init of 8B parameters that are overwritten right away costs minutes on CPU; skip it.
    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # older layouts: initialising is only slower, never wrong
        yield
        return
    with no_init_weights():
        yield


def ensure_reward_token(tokenizer) -> int:
    """Id of ``<|Reward|>``, adding it as a special token when the base tokenizer lacks it (as upstream)."""
    from tokenizers import AddedToken

    if REWARD_TOKEN not in tokenizer.get_vocab():
        tokenizer.add_tokens([AddedToken(REWARD_TOKEN, special=True, normalized=False)], special_tokens=True)
    return int(tokenizer.convert_tokens_to_ids(REWARD_TOKEN))


def load_processor(base_model_path: str | Path):
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(str(base_model_path))
    # Right padding as upstream: real tokens keep positions 0..n-1 and the reward token is found per row.
    processor.tokenizer.padding_side = "right"
    ensure_reward_token(processor.tokenizer)
    return processor


def load_hpsv3_model(config: HPSv3Config, tokenizer) -> HPSv3RewardModel:
    """Build the 5.x model on the target device and fill it from the legacy checkpoint, strictly."""
    if not config.checkpoint_path or not config.base_model_path:
        raise ValueError("HPSv3Config needs checkpoint_path and base_model_path to load weights")
    with _CheckpointReader(resolve_checkpoint_file(config.checkpoint_path)) as reader:
        return _load_from_reader(config, tokenizer, reader)


def _load_from_reader(config: HPSv3Config, tokenizer, reader: _CheckpointReader) -> HPSv3RewardModel:
    from transformers import AutoConfig

    native_to_file = {}
    for key in reader.keys():
        native = remap_legacy_key(key)
        if native in native_to_file:
            raise ValueError(f"checkpoint holds {key!r} in both legacy and native layout")
        native_to_file[native] = key

    backbone_config = AutoConfig.from_pretrained(str(config.base_model_path))
    embed_key = _NATIVE_TEXT + "embed_tokens.weight"
    if embed_key not in native_to_file:
        raise ValueError(f"checkpoint has no text embedding ({legacy_key(embed_key)}); is this an HPSv3 file?")
    # Upstream resized the embedding to len(tokenizer); the base config still says 152064.
    embedding_rows = reader.shape(native_to_file[embed_key])[0]
    backbone_config.text_config.vocab_size = embedding_rows
    reward_token_id = ensure_reward_token(tokenizer)
    # Upstream added <|Reward|> as the newest token and then resized to len(tokenizer), so its learned
    # embedding is the last row. Any other id means this tokenizer numbers tokens differently from the
    # one HPSv3 was trained with, and every score would be silently wrong.
    if reward_token_id != embedding_rows - 1:
        raise ValueError(
            f"{REWARD_TOKEN} has id {reward_token_id} but the checkpoint's embedding has {embedding_rows} rows "
            f"(expected id {embedding_rows - 1}): the processor at base_model_path does not match the checkpoint"
        )

    device = resolve_device(config.device)
    with _skip_weight_init(), torch.device(device):
        model = HPSv3RewardModel(
            backbone_config,
            reward_token_id=reward_token_id,
            position_mode=config.position_mode,
            dtype=resolve_dtype(config.dtype),
            attn_implementation=config.attn_implementation,
        )
    targets = model.state_dict()
    expected = set(targets)
    available = set(native_to_file)
    # lm_head is in the file (upstream subclassed the generation model) but plays no part in the reward.
    ignored = {key for key in available if key.startswith("lm_head.")}
    missing = sorted(expected - available)
    unexpected = sorted(available - expected - ignored)
    if missing or unexpected:
        raise ValueError(f"HPSv3 checkpoint does not match the model: missing {missing[:8]}, unexpected {unexpected[:8]}")
    with torch.no_grad():
        for name, target in targets.items():
            source = reader.get(native_to_file[name])
            if tuple(source.shape) != tuple(target.shape):
                raise ValueError(f"shape mismatch for {name}: checkpoint {tuple(source.shape)}, model {tuple(target.shape)}")
            target.copy_(source)
    return model.eval()


def load_hpsv3(config: HPSv3Config) -> tuple[HPSv3RewardModel, Any]:
    """(model, processor) from the config's checkpoint and base model directory."""
    if not config.checkpoint_path or not config.base_model_path:
        raise ValueError("HPSv3Config needs checkpoint_path and base_model_path to load weights")
    processor = load_processor(config.base_model_path)
    return load_hpsv3_model(config, processor.tokenizer), processor


# ----------------------------------------------------------------------------------------------
# Scorer
# ----------------------------------------------------------------------------------------------


def hpsv3_user_text(prompt: str) -> str:
    """The text part of the user turn: official instruction with the prompt, then the reward line."""
    return HPSV3_INSTRUCTION.format(text_prompt=_CONTROL_TOKEN_PATTERN.sub("", prompt)) + HPSV3_REWARD_SUFFIX


def hpsv3_conversation(prompt: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": hpsv3_user_text(prompt)}]}]


def _batches(items: Sequence[Any], size: int) -> Iterator[range]:
    for start in range(0, len(items), size):
        yield range(start, min(start + size, len(items)))


class HPSv3Scorer:
    """Scores PNGs with HPSv3, batched. ``HPSv3Scorer(config)`` loads weights from the config's paths;
    ``HPSv3Scorer(config, model=..., processor=...)`` wraps an already-built pair (config may be None
    then, for default scoring settings)."""

    def __init__(self, config: HPSv3Config | None = None, model: HPSv3RewardModel | None = None, processor=None):
        if (model is None) != (processor is None):
            raise ValueError("pass both model and processor, or neither")
        self.config = config or HPSv3Config()
        if model is None:
            model, processor = load_hpsv3(self.config)
        processor.tokenizer.padding_side = "right"
        self.model = model.eval()
        self.processor = processor
        # One GPU, one forward at a time: the server calls us from several threads.
        self._lock = threading.Lock()

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def chat_text(self, prompt: str) -> str:
        return self.processor.apply_chat_template(hpsv3_conversation(prompt), tokenize=False, add_generation_prompt=True)

    def prepare_batch(self, pngs: Sequence[bytes], prompts: Sequence[str]):
        images = [prepare_image(png, self.config.max_pixels, self.config.min_pixels) for png in pngs]
        texts = [self.chat_text(prompt) for prompt in prompts]
        # Images are already at a valid 28-aligned size; letting the processor resize again could only drift.
        batch = self.processor(text=texts, images=images, padding=True, return_tensors="pt", do_resize=False)
        return batch.to(self.device)

    def _resolve_prompts(self, count: int, prompts: Sequence[str | None] | None) -> list[str]:
        if prompts is None:
            return [self.config.default_prompt] * count
        if len(prompts) != count:
            raise ValueError(f"{count} images but {len(prompts)} prompts")
        return [prompt if prompt else self.config.default_prompt for prompt in prompts]

    def to_score(self, mu: float, log_sigma: float) -> HPSv3Score:
        return HPSv3Score(
            mu=mu,
            log_sigma=log_sigma,
            score=score_from_mu(mu, self.config.score_temperature, self.config.score_offset),
        )

    @torch.inference_mode()
    def raw(self, pngs: Sequence[bytes], prompts: Sequence[str | None] | None = None, **forward_kwargs) -> torch.Tensor:
        """[N, 2] float32 tensor of [mu, log_sigma] on CPU; ``forward_kwargs`` go to the model (tests, probes)."""
        resolved = self._resolve_prompts(len(pngs), prompts)
        # The config is the one source of truth for the position mode, also for a model passed in.
        forward_kwargs.setdefault("position_mode", self.config.position_mode)
        outputs = []
        with self._lock:
            for rows in _batches(pngs, self.config.batch_size):
                batch = self.prepare_batch([pngs[i] for i in rows], [resolved[i] for i in rows])
                outputs.append(self.model(**batch, **forward_kwargs).float().cpu())
        return torch.cat(outputs) if outputs else torch.empty(0, OUTPUT_DIM)

    def score(self, pngs: Sequence[bytes], prompts: Sequence[str | None] | None = None) -> list[HPSv3Score]:
        return [self.to_score(float(mu), float(log_sigma)) for mu, log_sigma in self.raw(pngs, prompts).tolist()]

    def score_subject(self, pngs: Sequence[bytes], subject: str | None) -> list[HPSv3Score]:
        return self.score(pngs, [self.config.prompt_for_subject(subject)] * len(pngs))


__all__ = [
    "CHECKPOINT_FILENAME",
    "HPSV3_INSTRUCTION",
    "HPSV3_REWARD_SUFFIX",
    "REWARD_TOKEN",
    "HPSv3Config",
    "HPSv3RewardModel",
    "InvalidImageError",
    "HPSv3Score",
    "HPSv3Scorer",
    "ensure_reward_token",
    "flatten_rgba_on_white",
    "hpsv3_user_text",
    "legacy_key",
    "load_hpsv3",
    "load_hpsv3_model",
    "load_processor",
    "plain_position_ids",
    "prepare_image",
    "remap_legacy_key",
    "remap_legacy_state_dict",
    "score_from_mu",
    "smart_resize_dims",
    "to_legacy_state_dict",
]
