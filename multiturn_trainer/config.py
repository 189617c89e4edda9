"""One dataclass for a training run, loaded from YAML and overridable on the command line.

Like TRL's example scripts: ``watercolour train --config configs/smoke.yaml --steps 3 --turns 2``.
Every field is a YAML key (``snake_case``); on the command line ``--key value`` or
``--key-name value``. The resolved config is written to ``RUN_DIR/config.yaml`` so a run can
be repeated or resumed exactly.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent.procedural import SUBJECTS


# Token budgets for the parts of an episode the policy does not write (measured on the Qwen3.5
# tokenizer: the turn-1 prompt is ~1.3k tokens; a revision turn is 361 image tokens + ~300 of
# feedback), rounded up so the vLLM context never cuts an episode short.
PROMPT_TOKEN_BUDGET = 2048
REVISION_TOKEN_BUDGET = 1024


@dataclass
class TrainConfig:
    # --- model ---------------------------------------------------------------------------
    model: str = "out/tiny-dense"
    """A local checkpoint folder or a Hub id, loaded with AutoModelForImageTextToText/AutoProcessor."""
    tiny_model: str | None = None
    """"dense" or "moe": build the tiny offline model at ``model`` first when the folder is missing."""
    tiny_warm_start_steps: int = 0
    """With tiny_model: SFT steps on compact procedural sketches before saving it (0 = untrained)."""
    tiny_warm_start_revisions: int = 32
    """Two-turn revision examples in that warm start (each rendered once by the real renderer)."""
    dtype: str = "auto"
    """"auto" = the checkpoint's own dtype on CPU, bfloat16 on a GPU."""
    attn_implementation: str | None = None

    # --- episodes ------------------------------------------------------------------------
    turns: int = 2
    """K: the policy writes K sketches, seeing its own painting before each revision. 1 = single-turn baseline."""
    reward_turn: str = "last"
    """"last" rewards the final painting; "best" the best-scoring turn (scores every turn)."""
    subjects: list[str] = field(default_factory=lambda: list(SUBJECTS))
    prompts_per_step: int = 1
    """GRPO groups per step (B); each step generates B x num_generations episodes."""
    num_generations: int = 8
    max_completion_length: int = 4096
    """Per-turn completion budget in tokens."""
    enable_thinking: bool = False
    temperature: float = 1.0
    top_p: float = 0.95
    top_k: int = 20
    seed: int = 0

    # --- environment ---------------------------------------------------------------------
    env_urls: list[str] = field(default_factory=list)
    """Remote ``watercolour serve`` URLs; sessions are spread across them. Empty = in-process renderer."""
    render_backend: str | None = None
    render_deadline_s: float = 90.0
    renderers: int | None = None
    """Browser processes for the in-process renderer (default: one per core)."""

    # --- rewards -------------------------------------------------------------------------
    reward_preset: str = "style-offline"
    pool: str = "pools/starter"
    judge_url: str | None = None
    judge_model: str | None = None
    hps_url: str | None = None

    # --- GRPO (defaults from the public single-turn recipe) ------------------------------
    steps: int = 110
    learning_rate: float = 5e-5
    lr_scheduler_type: str = "constant_with_warmup"
    warmup_steps: int = 5
    scale_rewards: str = "none"
    beta: float = 0.0
    micro_batch_size: int | None = None
    """Sequences per forward/backward; default: the whole step's episodes at once."""
    gradient_checkpointing: bool | None = None
    """None = on when a GPU is present."""
    bf16: bool | None = None
    """None = on when a GPU is present."""
    router_aux_loss_coef: float = 0.0
    """MoE load-balancing loss weight. 0: LoRA leaves the router frozen, so the aux loss has no
    router to balance and its gradient only nudged attention LoRA, while the logged loss was
    almost all aux term (0.0020006 = 0.001 x 2.0006 on 35B-A3B shapes)."""
    max_grad_norm: float = 1.0

    # --- LoRA ----------------------------------------------------------------------------
    lora: bool = True
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_target_modules: str = "all-linear"
    lora_vision: bool = False
    """Also adapt the vision tower (excluded by default, as in the recipe)."""
    lora_experts: bool = False
    """Also adapt the fused MoE expert weights (PEFT target_parameters)."""

    # --- generation backend --------------------------------------------------------------
    use_vllm: bool = False
    """Generate with vLLM (``pip install '.[gpu]'``) instead of HF generate; see README, "Generation"."""
    vllm_mode: str = "colocate"
    """"colocate": a vLLM engine on the training GPU; "server": ``trl vllm-serve`` on another GPU."""
    vllm_gpu_memory_utilization: float = 0.5
    """Colocate: the card's share vLLM may take (weights + KV cache) beside the training model."""
    vllm_max_model_length: int | None = None
    """vLLM's context; None = the episode budget (``episode_token_budget``), not the model's 262k."""
    vllm_enable_sleep_mode: bool = True
    """Colocate: vLLM frees its weights and KV cache while the loss pass runs."""
    vllm_importance_sampling_correction: bool = True
    """Correct for vLLM's sampling distribution differing from the training model's (TRL's TIS)."""
    vllm_server_base_url: str | None = None
    """Server mode: the ``trl vllm-serve`` URL (default http://localhost:8000 on the trainer's side)."""

    # --- run directory -------------------------------------------------------------------
    output_dir: str = "out/runs/run"
    save_steps: int = 10
    save_total_limit: int | None = None
    resume: bool = False
    report_to: str = "auto"
    """"auto" = trackio when installed, else none; or any value TRL's report_to accepts."""
    push_to_hub: str | None = None
    """Hub repo id to push the final adapter to."""
    run_name: str | None = None

    def __post_init__(self):
        if self.turns < 1:
            raise ValueError(f"turns must be >= 1, got {self.turns}")
        if self.reward_turn not in ("last", "best"):
            raise ValueError(f"reward_turn must be 'last' or 'best', got {self.reward_turn!r}")
        if self.num_generations < 2:
            raise ValueError("num_generations must be >= 2: GRPO compares episodes within a group")
        if not self.subjects:
            raise ValueError("subjects is empty")
        if self.steps < 1 or self.prompts_per_step < 1:
            raise ValueError("steps and prompts_per_step must be >= 1")
        episodes = self.episodes_per_step
        if self.micro_batch_size is not None and (self.micro_batch_size < 1 or episodes % self.micro_batch_size):
            raise ValueError(
                f"micro_batch_size {self.micro_batch_size} must divide the {episodes} episodes of a step"
            )

    def episode_token_budget(self) -> int:
        """The longest episode in tokens: the turn-1 prompt, K completions, and K-1 environment
        turns (a 600x600 painting is 361 image tokens at patch 16 / merge 2, plus the feedback)."""
        return PROMPT_TOKEN_BUDGET + self.turns * self.max_completion_length + (self.turns - 1) * REVISION_TOKEN_BUDGET

    @property
    def episodes_per_step(self) -> int:
        return self.prompts_per_step * self.num_generations

    def scored_turns(self) -> list[int]:
        """The turns whose paintings are scored: all of them when the best is rewarded, else the
        first and the last (the turn-gain metric needs turn 1)."""
        return list(range(1, self.turns + 1)) if self.reward_turn == "best" else sorted({1, self.turns})

    def episode_reward(self, turn_rewards: dict[int, float | None]) -> tuple[float | None, int | None]:
        """(reward, the turn it came from) of one episode, given its scored turns' totals."""
        if self.reward_turn == "best":
            candidates = [(reward, turn) for turn, reward in turn_rewards.items() if reward is not None]
            return max(candidates) if candidates else (None, None)
        return turn_rewards.get(self.turns), self.turns

    @property
    def name(self) -> str:
        return self.run_name or Path(self.output_dir).name

    def to_yaml(self) -> str:
        return yaml.safe_dump(dataclasses.asdict(self), sort_keys=False)


_FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}
_HINTS = typing.get_type_hints(TrainConfig)
# The CLI contract's short names (ARCHITECTURE.md: `--steps N --turns K --output-dir DIR`).
ALIASES = {"max_steps": "steps", "out": "output_dir"}


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> TrainConfig:
    values: dict[str, Any] = {}
    if path is not None:
        loaded = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: a config is a YAML mapping, got {type(loaded).__name__}")
        values.update(loaded)
    values.update(overrides or {})
    unknown = sorted(set(values) - set(_FIELDS))
    if unknown:
        raise ValueError(f"unknown config keys: {', '.join(unknown)} (known: {', '.join(_FIELDS)})")
    return TrainConfig(**{key: _coerce(key, value) for key, value in values.items()})


def parse_overrides(tokens: list[str]) -> dict[str, Any]:
    """``--key value`` / ``--key=value`` pairs (``--flag`` alone = true) into a dict of strings."""
    overrides: dict[str, Any] = {}
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if not token.startswith("--"):
            raise ValueError(f"expected --key value, got {token!r}")
        key, eq, value = token[2:].partition("=")
        key = key.replace("-", "_")
        key = ALIASES.get(key, key)
        if key not in _FIELDS:
            raise ValueError(f"unknown option --{key.replace('_', '-')} (known: {', '.join(_FIELDS)})")
        if not eq:
            following = tokens[index + 1] if index + 1 < len(tokens) else None
            if following is None or following.startswith("--"):
                value = "true"
            else:
                value = following
                index += 1
        overrides[key] = value
        index += 1
    return overrides


def _coerce(key: str, value: Any) -> Any:
    """YAML values pass through; command-line strings become the field's type."""
    hint = _HINTS[key]
    if not isinstance(value, str):
        return value
    args = typing.get_args(hint)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), hint) if args and typing.get_origin(hint) is not list else hint
    if optional and value.lower() in ("none", "null", ""):
        return None
    if typing.get_origin(base) is list or base is list:
        return [item.strip() for item in value.split(",") if item.strip()]
    if base is bool:
        if value.lower() in ("1", "true", "yes", "on"):
            return True
        if value.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"--{key}: expected true/false, got {value!r}")
    if base is int:
        return int(value)
    if base is float:
        return float(value)
    return value


def add_parser(sub) -> None:
    train = sub.add_parser(
        "train",
        help="multi-turn GRPO (turns: 1 = single-turn baseline)",
        description="Any config key works as --key value (e.g. --steps 3 --turns 2 --output-dir out/runs/x).",
    )
    train.add_argument("--config", default="configs/smoke.yaml")
    train.add_argument("--resume", action="store_true", help="continue RUN_DIR from its last checkpoint")

    sft = sub.add_parser("sft", help="supervised warm start on sketch sources")
    sft.add_argument("--model", default="out/tiny-dense")
    sft.add_argument("--tiny-model", choices=("dense", "moe"), default=None,
                     help="build the tiny offline model at --model first when it is missing")
    sft.add_argument("--out", required=True, metavar="DIR", help="where the fine-tuned model is saved")
    sft.add_argument("--source", default="procedural",
                     help="'procedural' (built-in generator), 'compact' (short procedural sketches) or a pool folder")
    sft.add_argument("--examples", type=int, default=64, help="first-turn examples")
    sft.add_argument("--revisions", type=int, default=0,
                     help="two-turn revision examples (rendered with the real renderer; procedural sources only)")
    sft.add_argument("--epochs", type=float, default=1.0)
    sft.add_argument("--learning-rate", type=float, default=2e-3)
    sft.add_argument("--batch-size", type=int, default=4)
    sft.add_argument("--lora", action="store_true", help="train a LoRA and merge it (large models)")
    sft.add_argument("--seed", type=int, default=0)


def config_from_args(args: argparse.Namespace, extra: list[str]) -> TrainConfig:
    overrides = parse_overrides(extra)
    if args.resume:
        overrides["resume"] = True
    return load_config(args.config, overrides)
