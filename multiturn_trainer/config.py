"""One dataclass for a training run, loaded from YAML and overridable on the command line.

As in TRL's example scripts, parsed by TRL's ``TrlParser``:
``watercolour train --config configs/smoke.yaml --steps 3 --turns 2``.
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

from multiturn_trainer.procedural import SUBJECTS
from env.files import data_file


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
    tiny_warm_start_revisions: int = 64
    """Two-turn revision examples in that warm start (each rendered once by the real renderer): half
    add a layer, half repair a gate failure. With 64 the warm start's held-out eval went from turn
    gain ~0 (32, layer additions only) to +0.10 (2026-12-01)."""
    dtype: str = "auto"
    """"auto" = the checkpoint's own dtype on CPU, bfloat16 on a GPU."""
    attn_implementation: str | None = None
    """Attention kernel passed to set_attn_implementation (e.g. sdpa, flash_attention_2); None = the model's default."""

    # --- episodes ------------------------------------------------------------------------
    turns: int = 2
    """K: the policy writes K sketches, seeing its own painting before each revision. 1 = single-turn baseline."""
    reward_turn: str = "last"
    """"last" rewards the final painting; "best" the best-scoring turn (scores every turn)."""
    subjects: list[str] = field(default_factory=lambda: list(SUBJECTS))
    """What the episodes paint, one subject per GRPO group, cycled in a seeded order."""
    prompts_per_step: int = 1
    """GRPO groups per step (B); each step generates B x num_generations episodes."""
    num_generations: int = 8
    """G: episodes per group; GRPO compares the rewards within a group."""
    max_completion_length: int = 4096
    """Per-turn completion budget in tokens."""
    enable_thinking: bool = False
    """Let the model think (<think> blocks) before each sketch (chat template switch)."""
    temperature: float = 1.0
    """Sampling temperature of every turn."""
    top_p: float = 0.95
    """Nucleus sampling threshold."""
    top_k: int = 20
    """Top-k sampling cut-off."""
    seed: int = 0
    """Seeds subject order, render seeds, sampling and the trainer."""

    # --- environment ---------------------------------------------------------------------
    env_urls: list[str] = field(default_factory=list)
    """Remote ``watercolour serve`` URLs; sessions are spread across them. Empty = in-process renderer."""
    render_backend: str | None = None
    """Renderer backend (watercolour render --help lists them); None = the default, llvmpipe-f16."""
    render_deadline_s: float = 90.0
    """Seconds one painting may take to render before it fails with render_timeout."""
    renderers: int | None = None
    """Browser processes for the in-process renderer (default: one per core)."""

    # --- rewards -------------------------------------------------------------------------
    reward_preset: str = "style-offline"
    """Reward mix: a name in configs/rewards/ or a YAML file (see README, Rewards)."""
    pool: str = "pools/starter"
    """Reference pool folder for the judge's references and the style reward."""
    judge_url: str | None = None
    """OpenAI-compatible base URL of the pairwise judge (presets with a judge need it)."""
    judge_model: str | None = None
    """Model name sent to the judge server."""
    judge_probability: bool = False
    """Judge: a soft P(A) from the verdict token's log-probabilities instead of the hard verdict
    (the server must return logprobs; without them it falls back to the verdict)."""
    hps_url: str | None = None
    """URL of a `watercolour hps-serve` HPSv3 scorer (presets with hpsv3 need it)."""

    # --- GRPO (defaults from the public single-turn recipe) ------------------------------
    steps: int = 110
    """GRPO steps (optimizer updates); alias --max-steps."""
    learning_rate: float = 5e-5
    """Peak learning rate of the LoRA (or full) update."""
    lr_scheduler_type: str = "constant_with_warmup"
    """Transformers learning-rate schedule name."""
    warmup_steps: int = 5
    """Steps of linear learning-rate warm-up."""
    scale_rewards: str = "none"
    """TRL's advantage scaling; none keeps raw reward differences within a group (the recipe)."""
    beta: float = 0.0
    """KL penalty weight against the reference policy (0 = none, no reference model kept)."""
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
    """Gradient clipping norm."""

    # --- LoRA ----------------------------------------------------------------------------
    lora: bool = True
    """Train a LoRA adapter (false = full fine-tuning)."""
    lora_r: int = 16
    """LoRA rank."""
    lora_alpha: int = 32
    """LoRA scaling alpha."""
    lora_dropout: float = 0.0
    """LoRA dropout."""
    lora_target_modules: str = "all-linear"
    """PEFT target_modules (all-linear = every linear layer outside the vision tower)."""
    lora_vision: bool = False
    """Also adapt the vision tower (excluded by default, as in the recipe)."""
    lora_experts: bool = False
    """Also adapt the fused MoE expert weights (PEFT target_parameters)."""

    # --- generation backend --------------------------------------------------------------
    use_vllm: bool = False
    """Generate with vLLM (installed on its own, see README "Generation on one H200") instead of HF generate."""
    vllm_mode: str = "colocate"
    """"colocate": a vLLM engine on the training GPU; "server": ``trl vllm-serve`` on another GPU."""
    vllm_gpu_memory_utilization: float = 0.5
    """Colocate: the card's share vLLM may take (weights + KV cache) beside the training model."""
    vllm_max_model_length: int | None = None
    """vLLM's context; None = the episode budget (``episode_token_budget``), not the model's 262k."""
    vllm_enable_sleep_mode: bool = True
    """Colocate: vLLM frees its weights and KV cache while the loss pass runs."""
    vllm_importance_sampling_correction: bool = True
    """Correct for vLLM's sampling distribution differing from the training model's (TRL's TIS).
    vLLM reports log-probs after top-k/top-p and the trainer's are over the full distribution, so
    with the correction on, sampling must not truncate (top_k 0, top_p 1)."""
    vllm_importance_sampling_mode: str = "token_truncate"
    """TRL's ratio: token_truncate (each token's ratio capped at the clip maximum) or TRL's
    sequence_mask, token_mask, sequence_truncate. A sequence ratio multiplies one small kernel
    mismatch per token over an episode's thousands of tokens; a token ratio does not."""
    vllm_importance_sampling_clip_max: float = 3.0
    """The cap (truncate modes) or upper mask bound (mask modes) of the ratio (TRL's default)."""
    vllm_server_base_url: str | None = None
    """Server mode: the ``trl vllm-serve`` URL (default http://localhost:8000 on the trainer's side)."""

    # --- held-out evaluation during training -----------------------------------------------
    eval_steps: int = 0
    """Every N steps and after the last, evaluate the policy (no gradients) on the held-out
    subjects like `watercolour eval`: K-turn refinement vs K independent samples; ``eval/*``
    metrics in metrics.jsonl and trackio, reports in RUN_DIR/eval/step-N/. 0 = off."""
    eval_episodes: int = 2
    """Episode slots per held-out subject in each evaluation."""
    eval_subjects: str = "eval"
    """The configs/subjects.yaml split evaluated ("eval" = held out), or subjects separated by ';'."""
    eval_batch_size: int | None = None
    """Episodes an evaluation generates together (default: a training step's episodes). A batch
    lasts as long as its longest reply, so fewer, larger batches finish sooner; memory bounds it."""

    # --- run directory -------------------------------------------------------------------
    output_dir: str = "out/runs/run"
    """The run directory (config.yaml, episodes.jsonl, renders/, metrics.jsonl, trackio/, checkpoints/); alias --out."""
    save_steps: int = 10
    """Save a resumable checkpoint every N steps."""
    save_total_limit: int | None = None
    """Keep at most this many checkpoints (None = all)."""
    resume: bool = False
    """Continue output_dir from its last checkpoint (later episodes are removed first)."""
    report_to: str = "auto"
    """"auto" = trackio when installed, else none; or any value TRL's report_to accepts."""
    push_to_hub: str | None = None
    """Hub repo id to push the final adapter to."""
    run_name: str | None = None
    """Name of the run in episodes and trackio (default: the output_dir folder name)."""

    def __post_init__(self):
        if self.turns < 1:
            raise ValueError(f"turns must be >= 1, got {self.turns}")
        if self.reward_turn not in ("last", "best"):
            raise ValueError(f"reward_turn must be 'last' or 'best', got {self.reward_turn!r}")
        if self.num_generations < 2:
            raise ValueError("num_generations must be >= 2: GRPO compares episodes within a group")
        if not self.subjects:
            raise ValueError("subjects is empty")
        if self.eval_steps < 0 or self.eval_episodes < 1:
            raise ValueError("eval_steps must be >= 0 and eval_episodes >= 1")
        if self.eval_batch_size is not None and self.eval_batch_size < 1:
            raise ValueError("eval_batch_size must be >= 1")
        if self.steps < 1 or self.prompts_per_step < 1:
            raise ValueError("steps and prompts_per_step must be >= 1")
        if self.use_vllm and self.vllm_importance_sampling_correction and (
                self.top_k not in (0, -1) or self.top_p < 1.0):
            # vLLM's sampler log-probs are "processed" (after temperature, top-k and top-p; TRL
            # asks for that), the trainer's apply temperature only: every token's ratio would be
            # off by the probability mass top-k/top-p kept, a product toward 0 over a sequence.
            raise ValueError(
                f"use_vllm with vllm_importance_sampling_correction needs untruncated sampling (top_k 0, top_p 1; "
                f"got top_k {self.top_k}, top_p {self.top_p}): vLLM's sampling log-probs are taken after top-k/top-p, "
                "the trainer's over the full distribution. Set --top-k 0 --top-p 1, or turn the correction off "
                "(--vllm-importance-sampling-correction false)")
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
# Older spellings kept working (ARCHITECTURE.md's contract names `--steps N --turns K
# --output-dir DIR`, which are the fields themselves).
ALIASES = {"max_steps": "steps", "out": "output_dir"}


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """The config in YAML file ``path`` (e.g. a run's recorded config.yaml) with ``overrides``
    (typed values, or strings as typed on a command line) on top."""
    values: dict[str, Any] = {}
    if path is not None:
        loaded = yaml.safe_load(resolve_config_path(path).read_text()) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: a config is a YAML mapping, got {type(loaded).__name__}")
        values.update(loaded)
    values.update(overrides or {})
    unknown = sorted(set(values) - set(_FIELDS))
    if unknown:
        raise ValueError(f"unknown config keys: {', '.join(unknown)} (known: {', '.join(_FIELDS)})")
    return TrainConfig(**{key: _coerce(key, value) for key, value in values.items()})


def parse_overrides(tokens: list[str]) -> dict[str, Any]:
    """``--key value`` / ``--key=value`` pairs (``--flag`` alone = true) into a dict of typed
    values, parsed by the same TRL parser as `watercolour train` (only the keys given)."""
    parser = config_parser()
    for action in parser._actions:
        action.default = argparse.SUPPRESS  # so the namespace holds only what the tokens set
    namespace, unknown = parser.parse_known_args(_normalise(tokens))
    _reject_unknown_options(unknown)
    return {key: value for key, value in vars(namespace).items() if key in _FIELDS}


def parse_config(argv: list[str], *, prog: str = "watercolour train",
                 default_config: str = "configs/smoke.yaml") -> TrainConfig:
    """`watercolour train|demo [--config FILE] [--key value ...]`: TRL's parser (``TrlParser``,
    as in TRL's own scripts) over ``TrainConfig``: the YAML sets the defaults, ``--key value``
    overrides them, ``--help`` lists every field with its docstring and its value under the
    chosen config. Unknown YAML keys and unknown options are errors (ValueError)."""
    argv = _normalise(argv)
    if "--config" not in argv:
        argv = ["--config", default_config, *argv]
    at = argv.index("--config") + 1
    if at < len(argv):
        argv[at] = str(resolve_config_path(argv[at]))
    parser = config_parser(prog, default_config)
    config, *_rest, from_file, from_args = parser.parse_args_and_config(
        argv, return_remaining_strings=True, separate_remaining_strings=True)
    if from_file:
        keys = sorted(item[2:] for item in from_file[::2])
        raise ValueError(f"unknown config keys: {', '.join(keys)} (known: {', '.join(_FIELDS)})")
    _reject_unknown_options(from_args)
    return config


def config_parser(prog: str = "watercolour train", default_config: str | None = None):
    """TRL's ``TrlParser`` over ``TrainConfig``, with this project's value semantics."""
    # TRL 1.16's parser module ships its own copy of HfArgumentParser and imports no torch or
    # transformers (0.3 s), so `watercolour train --help` stays fast. Imported here rather than
    # at the top because every module that only reads a TrainConfig imports this one.
    from trl import TrlParser

    parser = TrlParser([TrainConfig], prog=prog, allow_abbrev=False,
                       usage=f"{prog} [-h] [--config FILE] [--resume] [--key value ...]", description=(
        "Every TrainConfig field is a YAML key in --config and a --key value (or --key-name value) "
        "option on top of it; the defaults shown are those of the chosen config. Lists are comma-separated "
        "(--subjects 'a pear,a plum'); none/null clears an optional value; a flag alone means true."))
    parser.add_argument("--config", default=default_config, metavar="FILE",
                        help="YAML preset (a run's RUN_DIR/config.yaml repeats or, with --resume, continues it)")
    docs = field_docs(TrainConfig)
    for action in parser._actions:
        key = action.dest
        if key not in _FIELDS:
            continue
        if f"--{key}" not in action.option_strings:  # TRL's --no-KEY complement of a true flag
            action.help = f"set {key} to false"
            continue
        action.help = docs.get(key, "")
        # One meaning for a value whether it comes from YAML or the command line: the field's
        # type via _coerce, which also reads "none" as None for optional strings and splits
        # comma-separated lists (TRL's own parser takes space-separated lists instead).
        action.type = _typed(key)
        hint = _base_type(key)
        if hint is list:
            action.nargs = None
        elif hint is bool:
            action.nargs, action.const = "?", True
    return parser


def field_docs(cls) -> dict[str, str]:
    """Each field's docstring (the string literal under it), the help text of its option."""
    import ast
    import inspect

    body = ast.parse(inspect.getsource(cls)).body[0].body
    docs = {}
    for node, following in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant) and isinstance(following.value.value, str)):
            docs[node.target.id] = " ".join(following.value.value.split())
    return docs


def _normalise(tokens: list[str]) -> list[str]:
    """``--config=FILE`` as ``--config FILE`` (TrlParser looks for the bare flag) and the aliases."""
    result = []
    for token in tokens:
        flag, eq, value = token.partition("=")
        if flag.startswith("--"):
            key = flag[2:].replace("-", "_")
            if key in ALIASES:
                flag = "--" + ALIASES[key]
        if flag == "--config" and eq:
            result += [flag, value]
        else:
            result.append(flag + eq + value)
    return result


def _reject_unknown_options(unknown: list[str]) -> None:
    options = [token for token in unknown if token.startswith("--")]
    if options or unknown:
        first = (options or unknown)[0]
        what = f"unknown option {first.split('=')[0]}" if options else f"unexpected argument {first!r}"
        raise ValueError(f"{what} (known: {', '.join(_FIELDS)})")


def resolve_config_path(value: str | Path) -> Path:
    """A --config value: the file as typed (relative to the working directory) when it exists;
    else the project's preset of that name (``configs/smoke.yaml``, ``smoke.yaml`` or ``smoke``),
    from the checkout or the installed package (env.files.data_root), so presets work from any
    directory. Anything else comes back as typed, for the caller's file-not-found error."""
    path = Path(value)
    if path.is_file() or path.is_absolute():
        return path
    name = str(value) if str(value).endswith((".yaml", ".yml")) else f"{value}.yaml"
    for candidate in (path, Path("configs") / name):
        found = data_file(candidate)
        if found is not None and found.is_file():
            return found
    return path


def _typed(key: str):
    def convert(value: str) -> Any:
        return _coerce(key, value)

    convert.__name__ = getattr(_base_type(key), "__name__", "value")  # argparse names it in errors
    return convert


def _base_type(key: str):
    hint = _HINTS[key]
    if typing.get_origin(hint) is list:
        return list
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if args else hint


def _coerce(key: str, value: Any) -> Any:
    """YAML values pass through; command-line strings become the field's type."""
    hint = _HINTS[key]
    if not isinstance(value, str):
        return value
    args = typing.get_args(hint)
    optional = type(None) in args
    base = _base_type(key)
    if optional and value.lower() in ("none", "null", ""):
        return None
    if base is list:
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
    """`train`, `demo` and `sft`. train and demo parse their own options with TRL's parser
    (``parse_config``), built only when one of them runs."""
    from multiturn_trainer.train import cmd_demo, cmd_train

    train = sub.add_parser("train", add_help=False, help="multi-turn GRPO (turns: 1 = single-turn baseline); "
                           "`watercolour train --help` lists every config key")
    train.set_defaults(func=cmd_train, own_options=True)
    demo = sub.add_parser("demo", add_help=False, help="the embedded default: tiny model, warm start, multi-turn "
                          "GRPO on CPU (configs/demo.yaml; any config key as --key value)")
    demo.set_defaults(func=cmd_demo, own_options=True)

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
    sft.set_defaults(func=cmd_sft)


def cmd_sft(args: argparse.Namespace) -> int:
    # multiturn_trainer.sft imports torch: only once the command runs, so `--help` stays fast.
    from multiturn_trainer.sft import cmd_sft as run_sft_command

    return run_sft_command(args)
