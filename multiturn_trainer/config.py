"""One dataclass for a training run, loaded from YAML and overridable on the command line.

As in TRL's example scripts, parsed by TRL's ``TrlParser`` over ``TrainConfig``, whose fields
carry their help in ``metadata["help"]``:
``watercolour train --config configs/smoke.yaml --steps 3 --turns 2``.
Every field is a YAML key (``snake_case``); on the command line ``--key value`` or
``--key-name value``. `watercolour train|demo|bench learn` (``parse_config``) and
eval, replay, continuation and rescore (``load_config``, a run's recorded config) go through
the same parser. The resolved config is written to ``RUN_DIR/config.yaml`` so a run can be
repeated or resumed exactly. ``GRPO_FIELDS`` names the fields passed to TRL's ``GRPOConfig`` as
they are.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent.subjects import subjects as subject_split
from env.files import data_file
from env.prompts import check_revision_format
from rewards.mixer import DEFAULT_PRESET


# Token budgets for the parts of an episode the policy does not write (measured on the Qwen3.5
# tokenizer: the turn-1 prompt is ~1.3k tokens; a revision turn is 361 image tokens + ~300 of
# feedback), rounded up so the vLLM context never cuts an episode short.
PROMPT_TOKEN_BUDGET = 2048
REVISION_TOKEN_BUDGET = 1024


# Each field's help is its metadata["help"], shown by `watercolour train --help` (TrlParser's
# ArgumentDefaultsHelpFormatter adds the value under the chosen --config). "aliases" are extra
# option strings; "nargs"/"const" on the two bool | None fields let a flag alone mean true
# (TRL's parser does that by itself only for bools with a True/False default).
@dataclass
class TrainConfig:
    # --- model ---------------------------------------------------------------------------
    model: str = field(default="out/tiny-dense", metadata={"help": (
        "A local checkpoint folder or a Hub id, loaded through its family (multiturn_trainer/families.py): "
        "a Qwen3.5 VLM with AutoModelForImageTextToText/AutoProcessor, any other causal LM text-only "
        "(AutoModelForCausalLM/AutoTokenizer, e.g. build-pretrained's SmolLM2).")})
    tiny_model: str | None = field(default=None, metadata={"help": (
        '"dense" or "moe" (tiny Qwen3.5 VLMs) or "text" (a tiny text-only Llama), or a pretrained base: '
        '"smollm2" (build-pretrained) or "smollm2-vlm" (build-pretrained --vlm): build the offline model at '
        '``model`` first when the folder is missing.')})
    tiny_warm_start_steps: int = field(default=0, metadata={"help": (
        "With tiny_model: SFT steps on compact procedural sketches before saving it (0 = the base as built).")})
    tiny_warm_start_revisions: int = field(default=64, metadata={"help": (
        "Two-turn revision examples in that warm start (each rendered once by the real renderer): half add a layer, "
        "half repair a gate failure. With 64 the warm start's held-out eval went from turn gain ~0 (32, layer "
        "additions only) to +0.10.")})
    dtype: str = field(default="auto", metadata={"help": (
        "\"auto\" = the checkpoint's own dtype on CPU, bfloat16 on a GPU.")})
    attn_implementation: str | None = field(default=None, metadata={"help": (
        "Attention kernel passed to set_attn_implementation (e.g. sdpa, flash_attention_2); None = the model's "
        "default.")})

    # --- episodes ------------------------------------------------------------------------
    turns: int = field(default=2, metadata={"help": (
        "K: the policy writes K sketches, seeing its own painting (see show_painting) and the feedback before each "
        "revision. 1 = single-turn baseline.")})
    reward_turn: str = field(default="last", metadata={"help": (
        '"last" rewards the final painting; "best" the best-scoring turn (scores every turn).')})
    credit: str = field(default="episode", metadata={"help": (
        '"episode": every turn\'s tokens share the episode\'s advantage (its reward against its group\'s). '
        '"reward_to_go": a revision (turn k > 1) is credited with the final reward minus turn k-1\'s, what it '
        'earned over the painting it started from; turn 1 with the final reward against its group\'s mean. The '
        'same objective, the final reward, with a baseline per turn. Scores every turn; needs reward_turn last. '
        '"turn": turn k is credited with its own painting\'s score against its group\'s turn-k mean (each turn its '
        'own GRPO problem; a failed turn 1 is not credited with its revision\'s repair). Scores every turn. '
        '"turn_then_to_go": turn 1 as "turn", each revision as "reward_to_go"; needs reward_turn last. '
        'scale_rewards group/batch divides every turn by the spread of all the group\'s/batch\'s painting rewards.')})
    revision_format: str = field(default="edit", metadata={"help": (
        '"edit": revision turns ask for SEARCH/REPLACE edit blocks applied to the sketch the environment holds '
        '(a revision keeps its draft and costs only the tokens of its changes); "full": they ask for the whole '
        'sketch again. Either way the environment accepts both forms.')})
    show_painting: bool = field(default=True, metadata={"help": (
        "False: the revision turn carries the feedback and the sketch but not the painting (the blind ablation: "
        "does seeing its painting add anything to the diagnostics?); the message says there is no image, as a "
        "text-only model's does. A text-only model never sees the painting either way.")})
    subjects: list[str] = field(default_factory=lambda: list(subject_split("train")), metadata={"help": (
        "What the episodes paint, one subject per GRPO group, cycled in a seeded order.")})
    prompts_per_step: int = field(default=1, metadata={"help": (
        "GRPO groups per step (B); each step generates B x num_generations episodes.")})
    num_generations: int = field(default=8, metadata={"help": (
        "G: episodes per group; GRPO compares the rewards within a group.")})
    max_completion_length: int = field(default=4096, metadata={"help": "Per-turn completion budget in tokens."})
    enable_thinking: bool = field(default=False, metadata={"help": (
        "Let the model think (<think> blocks) before each sketch (chat template switch).")})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature of every turn."})
    top_p: float = field(default=0.95, metadata={"help": "Nucleus sampling threshold."})
    top_k: int = field(default=20, metadata={"help": "Top-k sampling cut-off."})
    seed: int = field(default=0, metadata={"help": "Seeds subject order, render seeds, sampling and the trainer."})

    # --- environment ---------------------------------------------------------------------
    env_urls: list[str] = field(default_factory=list, metadata={"help": (
        "Remote ``watercolour serve`` URLs; sessions are spread across them. Empty = in-process renderer.")})
    render_backend: str | None = field(default=None, metadata={"help": (
        "Renderer backend (watercolour render --help lists them); None = the default, llvmpipe-f16.")})
    render_deadline_s: float = field(default=90.0, metadata={"help": (
        "Seconds one painting may take to render before it fails with render_timeout.")})
    renderers: int | None = field(default=None, metadata={"help": (
        "Browser processes for the in-process renderer (default: one per core).")})

    # --- rewards -------------------------------------------------------------------------
    reward_preset: str = field(default=DEFAULT_PRESET, metadata={"help": (
        "Reward mix: a name in configs/rewards/ or a YAML file (docs/design/rewards.md).")})
    pool: str = field(default="pools/starter", metadata={"help": (
        "Reference pool folder for the judge's references and the style reward.")})
    judge_url: str | None = field(default=None, metadata={"help": (
        "OpenAI-compatible base URL of the pairwise judge (presets with a judge need it).")})
    judge_model: str | None = field(default=None, metadata={"help": "Model name sent to the judge server."})
    judge_probability: bool = field(default=False, metadata={"help": (
        "Judge: a soft P(A) from the verdict token's log-probabilities instead of the hard verdict (the server must "
        "return logprobs; without them it falls back to the verdict).")})
    hps_url: str | None = field(default=None, metadata={"help": (
        "URL of a `watercolour hps-serve` HPSv3 scorer (presets with hpsv3 need it).")})

    # --- GRPO (defaults from the public single-turn recipe) ------------------------------
    steps: int = field(default=110, metadata={"help": (
        "GRPO steps (optimizer updates); alias --max-steps."), "aliases": ["--max-steps", "--max_steps"]})
    learning_rate: float = field(default=5e-5, metadata={"help": "Peak learning rate of the LoRA (or full) update."})
    lr_scheduler_type: str = field(default="constant_with_warmup", metadata={"help": (
        "Transformers learning-rate schedule name.")})
    warmup_steps: int = field(default=5, metadata={"help": "Steps of linear learning-rate warm-up."})
    scale_rewards: str = field(default="none", metadata={"help": (
        "TRL's advantage scaling; none keeps raw reward differences within a group (the recipe).")})
    beta: float = field(default=0.0, metadata={"help": (
        "KL penalty weight against the reference policy (0 = none, no reference model kept).")})
    micro_batch_size: int | None = field(default=None, metadata={"help": (
        "Sequences per forward/backward; default: the whole step's episodes at once.")})
    gradient_checkpointing: bool | None = field(default=None, metadata={"help": (
        "None = on when a GPU is present."), "nargs": "?", "const": True})
    bf16: bool | None = field(default=None, metadata={"help": (
        "None = on when a GPU is present."), "nargs": "?", "const": True})
    router_aux_loss_coef: float = field(default=0.0, metadata={"help": (
        "MoE load-balancing loss weight. 0: LoRA leaves the router frozen, so the aux loss has no router to balance "
        "and its gradient only nudged attention LoRA, while the logged loss was almost all aux term (0.0020006 = "
        "0.001 x 2.0006 on 35B-A3B shapes).")})
    max_grad_norm: float = field(default=1.0, metadata={"help": "Gradient clipping norm."})

    # --- LoRA ----------------------------------------------------------------------------
    lora: bool = field(default=True, metadata={"help": "Train a LoRA adapter (false = full fine-tuning)."})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA scaling alpha."})
    lora_dropout: float = field(default=0.0, metadata={"help": "LoRA dropout."})
    lora_target_modules: str = field(default="all-linear", metadata={"help": (
        "PEFT target_modules (all-linear = every linear layer outside the vision tower).")})
    lora_vision: bool = field(default=False, metadata={"help": (
        "Also adapt the vision tower (excluded by default, as in the recipe).")})
    lora_experts: bool = field(default=False, metadata={"help": (
        "Also adapt the fused MoE expert weights (PEFT target_parameters).")})

    # --- generation backend --------------------------------------------------------------
    use_vllm: bool = field(default=False, metadata={"help": (
        'Generate with vLLM (installed on its own, see docs/design/vllm-and-memory.md) instead of HF generate.')})
    vllm_mode: str = field(default="colocate", metadata={"help": (
        '"colocate": a vLLM engine on the training GPU; "server": ``trl vllm-serve`` on another GPU.')})
    vllm_gpu_memory_utilization: float = field(default=0.5, metadata={"help": (
        "Colocate: the GPU's share vLLM may take (weights + KV cache) beside the training model.")})
    vllm_max_model_length: int | None = field(default=None, metadata={"help": (
        "vLLM's context; None = the episode budget (``episode_token_budget``), not the model's 262k.")})
    vllm_enable_sleep_mode: bool = field(default=True, metadata={"help": (
        "Colocate: vLLM frees its weights and KV cache while the loss pass runs.")})
    vllm_importance_sampling_correction: bool = field(default=True, metadata={"help": (
        "Correct for vLLM's sampling distribution differing from the training model's (TRL's TIS). vLLM reports "
        "log-probs after top-k/top-p and the trainer's are over the full distribution, so with the correction on, "
        "sampling must not truncate (top_k 0, top_p 1).")})
    vllm_importance_sampling_mode: str = field(default="token_truncate", metadata={"help": (
        "TRL's ratio: token_truncate (each token's ratio capped at the clip maximum) or TRL's sequence_mask, "
        "token_mask, sequence_truncate. A sequence ratio multiplies one small kernel mismatch per token over an "
        "episode's thousands of tokens; a token ratio does not.")})
    vllm_importance_sampling_clip_max: float = field(default=3.0, metadata={"help": (
        "The cap (truncate modes) or upper mask bound (mask modes) of the ratio (TRL's default).")})
    vllm_server_base_url: str | None = field(default=None, metadata={"help": (
        "Server mode: the ``trl vllm-serve`` URL (default http://localhost:8000 on the trainer's side).")})

    # --- held-out evaluation during training -----------------------------------------------
    held_out_eval_steps: int = field(default=0, metadata={"help": (
        "Every N steps and after the last, evaluate the policy (no gradients) on the held-out subjects like "
        "`watercolour eval`: K-turn refinement vs K independent samples; ``eval/*`` metrics in metrics.jsonl and "
        "trackio, reports in RUN_DIR/eval/step-N/. 0 = off.")})
    eval_episodes: int = field(default=2, metadata={"help": "Episode slots per held-out subject in each evaluation."})
    eval_subjects: str = field(default="eval", metadata={"help": (
        "The configs/subjects.yaml split evaluated (\"eval\" = held out), or subjects separated by ';'.")})
    eval_batch_size: int | None = field(default=None, metadata={"help": (
        "Episodes an evaluation generates together (default: a training step's episodes). A batch lasts as long as "
        "its longest reply, so fewer, larger batches finish sooner; memory bounds it.")})

    # --- run directory -------------------------------------------------------------------
    output_dir: str = field(default="out/runs/run", metadata={"help": (
        "The run directory (config.yaml, episodes.jsonl, renders/, metrics.jsonl, trackio/, checkpoints/); alias "
        "--out."), "aliases": ["--out"]})
    save_steps: int = field(default=10, metadata={"help": "Save a resumable checkpoint every N steps."})
    save_total_limit: int | None = field(default=None, metadata={"help": (
        "Keep at most this many checkpoints (None = all).")})
    resume: bool = field(default=False, metadata={"help": (
        "Continue output_dir from its last checkpoint (later episodes are removed first).")})
    report_to: str = field(default="auto", metadata={"help": (
        "\"auto\" = trackio when installed, else none; or any value TRL's report_to accepts.")})
    push_adapter_to: str | None = field(default=None, metadata={"help": "Hub repo id to push the final adapter to."})
    run_name: str | None = field(default=None, metadata={"help": (
        "Name of the run in episodes and trackio (default: the output_dir folder name).")})

    def __post_init__(self):
        for name in (*_LIST_FIELDS, *_OPTIONAL_STR_FIELDS):
            setattr(self, name, _normal_value(name, getattr(self, name)))
        if self.turns < 1:
            raise ValueError(f"turns must be >= 1, got {self.turns}")
        if self.reward_turn not in ("last", "best"):
            raise ValueError(f"reward_turn must be 'last' or 'best', got {self.reward_turn!r}")
        if self.credit not in ("episode", "reward_to_go", "turn", "turn_then_to_go"):
            raise ValueError(
                f"credit must be 'episode', 'reward_to_go', 'turn' or 'turn_then_to_go', got {self.credit!r}")
        check_revision_format(self.revision_format)
        if self.credit in ("reward_to_go", "turn_then_to_go") and self.reward_turn != "last":
            raise ValueError(f"credit {self.credit} telescopes to the final painting's reward: it needs reward_turn last")
        if self.num_generations < 2:
            raise ValueError("num_generations must be >= 2: GRPO compares episodes within a group")
        if not self.subjects:
            raise ValueError("subjects is empty")
        if self.held_out_eval_steps < 0 or self.eval_episodes < 1:
            raise ValueError("held_out_eval_steps must be >= 0 and eval_episodes >= 1")
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
        turns (a 600x600 painting is 361 image tokens at patch 16 / merge 2, plus the feedback).
        With edit revisions an environment turn may also show the current sketch (about one
        completion long), but the revisions it follows are edits, a fraction of a completion, so
        the K completions' share holds both."""
        return PROMPT_TOKEN_BUDGET + self.turns * self.max_completion_length + (self.turns - 1) * REVISION_TOKEN_BUDGET

    @property
    def episodes_per_step(self) -> int:
        return self.prompts_per_step * self.num_generations

    def scored_turns(self) -> list[int]:
        """The turns whose paintings are scored: all of them when the best is rewarded or each turn
        is credited with its reward to go or its own score, else the first and the last (the turn-gain metric needs turn 1)."""
        if self.reward_turn == "best" or self.credit != "episode":
            return list(range(1, self.turns + 1))
        return sorted({1, self.turns})

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

_FIELDS = tuple(f.name for f in dataclasses.fields(TrainConfig))
_HINTS = typing.get_type_hints(TrainConfig)  # the declared types (TRL's parser rewrites each Field.type)
_LIST_FIELDS = tuple(name for name, hint in _HINTS.items() if typing.get_origin(hint) is list)
_OPTIONAL_STR_FIELDS = tuple(name for name, hint in _HINTS.items() if set(typing.get_args(hint)) == {str, type(None)})
# bf16 and gradient_checkpointing: None = on when a GPU is present. TRL's bool type has no
# none, so `--bf16 none` is taken out of the command line and applied after parsing.
_AUTO_BOOL_FIELDS = tuple(name for name, hint in _HINTS.items() if set(typing.get_args(hint)) == {bool, type(None)})

# The fields whose name and meaning are GRPOConfig's own: train.grpo_args passes them as they are.
# GRPOConfig also has, with another meaning here: output_dir (ours is the run directory, TRL's
# its checkpoints/), run_name and report_to (defaults TRL lacks: the folder name, "auto"),
# bf16 and gradient_checkpointing (None = on with a GPU), vllm_max_model_length (None = the
# episode budget), vllm_enable_sleep_mode (colocate only) and save_total_limit (the trainer
# applies it to its step-N checkpoint folders, which TRL's rotation does not see).
GRPO_FIELDS = (
    "num_generations", "max_completion_length", "temperature", "top_p", "top_k", "seed",
    "learning_rate", "lr_scheduler_type", "warmup_steps", "scale_rewards", "beta", "router_aux_loss_coef",
    "max_grad_norm", "save_steps", "use_vllm", "vllm_mode", "vllm_gpu_memory_utilization",
    "vllm_importance_sampling_correction", "vllm_importance_sampling_mode", "vllm_importance_sampling_clip_max",
    "vllm_server_base_url",
)

# Fields renamed because TrainingArguments (so GRPOConfig, and a TRL user's habit) has the old
# names with other meanings: old key -> (new key, the old default, why). An old key is an error
# naming the new one rather than a silent translation: `push_to_hub: true` written for TRL would
# otherwise become a repo named "True". Only in a YAML file, the old key with its default value
# loads (and means nothing): every RUN_DIR/config.yaml recorded before the rename holds
# `eval_steps: 0` and `push_to_hub: null` unless the feature was used, and eval, replay and
# continuation must still read those runs.
RENAMED = {
    "eval_steps": ("held_out_eval_steps", 0,
                   "TrainingArguments' eval_steps evaluates an eval_dataset; this one the held-out subjects"),
    "push_to_hub": ("push_adapter_to", None, "TrainingArguments' push_to_hub is a bool; this one a Hub repo id"),
}


def _normal_value(name: str, value: Any) -> Any:
    """One meaning for a value whether it came from YAML, the command line or Python (TRL's
    parser types strings by the field and hands YAML lists and nulls over as they are)."""
    if name in _LIST_FIELDS:
        # Space-separated values (TRL's nargs="+") or one comma-separated value, the project's
        # form (--subjects 'a pear,a plum'); a YAML list's items are split too. Safe because no
        # subject in configs/subjects.yaml contains a comma, nor does a `watercolour serve` URL.
        items = [value] if isinstance(value, str) else list(value)
        return [part.strip() for item in items for part in str(item).split(",") if part.strip()]
    if name in _OPTIONAL_STR_FIELDS and isinstance(value, str) and value.strip().lower() in ("none", "null", ""):
        # TRL reads none/null as None only for non-str types ("none" can be a real string, as
        # for report_to); for these fields None is the only sensible reading.
        return None
    return value


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """The config in YAML file ``path`` (e.g. a run's recorded config.yaml) with ``overrides``
    (typed values, or strings as typed on a command line) on top: parsed as the command line
    ``--config PATH --key=value ...`` by the same parser as `watercolour train`."""
    overrides = dict(overrides or {})
    _check_keys(list(overrides))
    argv = ["--config", str(path)] if path is not None else []
    return _parse(argv + _option_tokens(overrides))


def parse_overrides(tokens: list[str]) -> dict[str, Any]:
    """``--key value`` / ``--key=value`` pairs (``--flag`` alone = true) into a dict of typed
    values, parsed by the same TRL parser as `watercolour train` (only the keys given)."""
    argv, cleared = _normalise(tokens)
    # argparse fills in a default only for a name the namespace lacks: what is still _UNSET
    # afterwards was not given.
    given = argparse.Namespace(**dict.fromkeys(_FIELDS, _UNSET))
    try:
        namespace, unknown = config_parser().parse_known_args(argv, namespace=given)
    except argparse.ArgumentError as exc:
        raise ValueError(str(exc)) from None
    _reject_unknown_options(unknown)
    values = {key: _normal_value(key, value) for key, value in vars(namespace).items()
              if key in _FIELDS and value is not _UNSET}
    return {**values, **dict.fromkeys(cleared)}


def parse_config(argv: list[str], *, prog: str = "watercolour train",
                 default_config: str = "configs/smoke.yaml") -> TrainConfig:
    """`watercolour train|demo [--config FILE] [--key value ...]`: TRL's parser (``TrlParser``,
    as in TRL's own scripts) over ``TrainConfig``: the YAML sets the defaults, ``--key value``
    overrides them, ``--help`` lists every field with its help and its value under the chosen
    config. Unknown YAML keys and unknown options are errors (ValueError)."""
    return _parse(argv, prog=prog, default_config=default_config)


def config_parser(prog: str = "watercolour train", default_config: str | None = None):
    """TRL's ``TrlParser`` over ``TrainConfig``, plus the ``--config`` option it reads."""
    # TRL 1.16's parser module ships its own copy of HfArgumentParser and imports no torch or
    # transformers (0.3 s), so `watercolour train --help` stays fast. Imported here rather than
    # at the top because every module that only reads a TrainConfig imports this one.
    from trl import TrlParser

    parser = TrlParser([TrainConfig], prog=prog, allow_abbrev=False, exit_on_error=False,
                       usage=f"{prog} [-h] [--config FILE] [--resume] [--key value ...]", description=(
        "Every TrainConfig field is a YAML key in --config and a --key value (or --key-name value) "
        "option on top of it; the defaults shown are those of the chosen config. Lists take "
        "space-separated values or one comma-separated value (--subjects 'a pear,a plum'); none/null "
        "clears an optional value; a flag alone means true, --no-FLAG false."))
    parser.add_argument("--config", default=default_config, metavar="FILE",
                        help="YAML preset (a run's RUN_DIR/config.yaml repeats or, with --resume, continues it)")
    return parser


_UNSET = object()


def _parse(argv: list[str], prog: str = "watercolour train", default_config: str | None = None) -> TrainConfig:
    """The one way a TrainConfig is read: TrlParser's parse_args_and_config over ``argv``."""
    argv, cleared = _normalise(argv)
    if default_config is not None and "--config" not in argv:
        argv = ["--config", default_config, *argv]
    if "--config" in argv:
        at = argv.index("--config") + 1
        if at == len(argv):
            raise ValueError("--config needs a FILE")
        argv[at] = str(resolve_config_path(argv[at]))
    try:
        config, *_namespace, from_file, from_args = config_parser(prog, default_config).parse_args_and_config(
            argv, return_remaining_strings=True, separate_remaining_strings=True)
    except argparse.ArgumentError as exc:  # exit_on_error=False: a bad value is a ValueError, like a bad key
        raise ValueError(str(exc)) from None
    # TrlParser hands back the YAML keys no field took as `--key str(value)` pairs.
    _check_keys([option[2:] for option, value in zip(from_file[::2], from_file[1::2])
                 if not (option[2:] in RENAMED and value == str(RENAMED[option[2:]][1]))])
    _reject_unknown_options(from_args)
    return dataclasses.replace(config, **dict.fromkeys(cleared)) if cleared else config


def _normalise(tokens: list[str]) -> tuple[list[str], set[str]]:
    """What TrlParser does not do itself: ``--config=FILE`` as ``--config FILE`` (it looks for
    the bare flag), and ``none`` for a bool | None field taken out (TRL's bool type has no none)
    and returned as a key to clear; a later value for that key wins, as on any command line."""
    tokens, result, cleared = list(tokens), [], set()
    at = 0
    while at < len(tokens):
        flag, eq, value = tokens[at].partition("=")
        key = flag[2:].replace("-", "_") if flag.startswith("--") else None
        taken = tokens[at:at + 1]
        if key in _AUTO_BOOL_FIELDS:
            if not eq and at + 1 < len(tokens) and not tokens[at + 1].startswith("-"):
                value, taken = tokens[at + 1], tokens[at:at + 2]
            if value.lower() in ("none", "null"):
                cleared.add(key)
            else:
                cleared.discard(key)
                result += taken
        else:
            result += [flag, value] if flag == "--config" and eq else taken
        at += len(taken)
    return result, cleared


def _option_tokens(values: dict[str, Any]) -> list[str]:
    """Typed values as the command line ``--key=value`` (``=`` so a value may start with '-')."""
    tokens = []
    for key, value in values.items():
        if isinstance(value, (list, tuple)):
            value = ",".join(map(str, value))  # one comma-separated value (see __post_init__)
        elif value is None or isinstance(value, bool):
            value = str(value).lower()
        tokens.append(f"--{key}={value}")
    return tokens


def _check_keys(keys: list[str]) -> None:
    for key in keys:
        if key in RENAMED:
            new, _, why = RENAMED[key]
            raise ValueError(f"config key {key} was renamed {new} ({why})")
    unknown = sorted(set(keys) - set(_FIELDS))
    if unknown:
        raise ValueError(f"unknown config keys: {', '.join(unknown)} (known: {', '.join(_FIELDS)})")


def _reject_unknown_options(unknown: list[str]) -> None:
    options = [token for token in unknown if token.startswith("--")]
    if options or unknown:
        first = (options or unknown)[0]
        key = first.split("=")[0][2:].replace("-", "_")
        if key in RENAMED:
            new, _, why = RENAMED[key]
            raise ValueError(f"option {first.split('=')[0]} was renamed --{new.replace('_', '-')} ({why})")
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
