"""Training: model, environment, scorer and GRPO trainer built from one TrainConfig, then run."""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from env.errors import UsageError
from multiturn_trainer.config import GRPO_FIELDS, TrainConfig
from multiturn_trainer.evaluation_stats import difference_of_means, mean
from multiturn_trainer.families import family_of
from multiturn_trainer.kernels import announce_kernels
from multiturn_trainer.resources import scorer_for, episode_row, has_gpu, load_model, quiet_renamed_checkpointing_warning
from multiturn_trainer.store import RunStore, checkpoint_step, tokens_by_turn, turn_gains

# Fused MoE expert weights (3-D parameters, not nn.Linear): reachable only via target_parameters.
EXPERT_PARAMETERS = ("mlp.experts.gate_up_proj", "mlp.experts.down_proj")


@dataclass
class TrainSummary:
    run_dir: Path
    steps: int
    episodes: int
    reward_first_third: float | None
    reward_last_third: float | None
    turn_gain: float | None
    gallery: Path | None
    adapter: Path | None
    # Last third minus first third with its bootstrap 95 % interval: is the rise more than noise?
    reward_rise: dict | None = None
    # Mean generated tokens of each turn over the run's episodes.
    tokens_by_turn: list[float | None] | None = None


def peft_config(config: TrainConfig, model):
    if not config.lora:
        return None
    from peft import LoraConfig

    kwargs: dict[str, Any] = {}
    vision = family_of(model).lora_exclude  # None: a text-only model has no vision tower to leave out
    if not config.lora_vision and vision is not None:
        kwargs["exclude_modules"] = vision
    if config.lora_experts:
        names = [n for n, _ in model.named_parameters()]
        present = [p for p in EXPERT_PARAMETERS if any(n.endswith(p) for n in names)]
        if not present:
            raise ValueError("lora_experts: the model has no fused expert parameters (a dense model?)")
        kwargs["target_parameters"] = present
    return LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules=config.lora_target_modules, task_type="CAUSAL_LM", **kwargs)


def episode_dataset(config: TrainConfig):
    """One row per GRPO group and step: subject (cycled in a seeded order), render seed, turn-1 prompt."""
    from datasets import Dataset

    rng = random.Random(f"subjects\x00{config.seed}")
    order: list[str] = []
    rows = []
    # Under `accelerate launch` every process runs prompts_per_step groups of its own.
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    for position in range(config.steps * config.prompts_per_step * processes):
        if not order:
            order = list(config.subjects)
            rng.shuffle(order)
        rows.append(episode_row(config, order.pop(), config.seed * 1_000_003 + position))
    return Dataset.from_list(rows)


def report_to(config: TrainConfig) -> str | list[str]:
    if config.report_to != "auto":
        return config.report_to
    import importlib.util

    # find_spec, not import: trackio reads TRACKIO_DIR when imported, and grpo_args sets it.
    return "trackio" if importlib.util.find_spec("trackio") is not None else "none"


def use_run_trackio_dir(config: TrainConfig, store: RunStore) -> None:
    """trackio keeps the run's metrics in RUN_DIR/trackio, so a run carries its own metrics
    (`TRACKIO_DIR=RUN_DIR/trackio trackio show`). trackio reads TRACKIO_DIR once, when
    `trackio.utils` is first imported, and TRL imports it with its trainer: so this sets the
    variable before that import. A TRACKIO_DIR the user set wins."""
    import sys

    reporters = report_to(config)
    if "trackio" not in (reporters if isinstance(reporters, list) else [reporters]):
        return
    wanted = os.environ.setdefault("TRACKIO_DIR", str(store.root / "trackio"))
    imported = sys.modules.get("trackio.utils")
    if imported is not None and Path(imported.TRACKIO_DIR) != Path(wanted):
        # Only when this process imported trackio before the run began (e.g. a second run in
        # one Python process): say where the metrics really go.
        print(f"train: trackio was imported before this run chose its directory; metrics go to "
              f"{imported.TRACKIO_DIR}", flush=True)


def grpo_args(config: TrainConfig, store: RunStore):
    from trl import GRPOConfig

    quiet_renamed_checkpointing_warning()

    gpu = has_gpu()
    episodes = config.episodes_per_step
    micro = config.micro_batch_size or episodes
    bf16 = gpu if config.bf16 is None else config.bf16
    checkpointing = gpu if config.gradient_checkpointing is None else config.gradient_checkpointing
    kwargs: dict[str, Any] = dict(
        {name: getattr(config, name) for name in GRPO_FIELDS},  # the same name and meaning in both
        output_dir=str(store.checkpoints_dir),
        run_name=config.name,
        project="watercolour",
        max_steps=config.steps,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=episodes // micro,
        bf16=bf16,
        **checkpointing_argument(checkpointing),
        chat_template_kwargs={"enable_thinking": config.enable_thinking},
        logging_steps=1,
        save_strategy="steps",
        report_to=report_to(config),
        data_seed=config.seed,
        use_cpu=not gpu,
        dataloader_num_workers=0,
        remove_unused_columns=False,
        log_completions=False,
        disable_tqdm=False,
    )
    if config.use_vllm:
        kwargs.update(
            vllm_max_model_length=config.vllm_max_model_length or config.episode_token_budget(),
            vllm_enable_sleep_mode=config.vllm_enable_sleep_mode and config.vllm_mode == "colocate",
        )
    return GRPOConfig(**kwargs)


def checkpointing_argument(enabled: bool) -> dict[str, bool]:
    """TrainingArguments renamed ``gradient_checkpointing`` to ``activation_checkpointing`` in
    transformers 5.24 (the old name still works there, with a FutureWarning every run); vLLM 0.31
    and the lent GPU image hold transformers 5.17, which knows only the old name."""
    import dataclasses

    from transformers import TrainingArguments

    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    return {"activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing": enabled}


def prepare_run(config: TrainConfig) -> tuple[RunStore, Path | None]:
    """The run directory, and the checkpoint to resume from (truncating later episodes)."""
    store = RunStore(config.output_dir, config.name)
    checkpoint = None
    if config.resume:
        checkpoint = store.latest_checkpoint()
        step = checkpoint_step(checkpoint) if checkpoint else 0
        dropped = store.truncate_after(step)
        where = f"checkpoint step {step}" if checkpoint else "the start (no checkpoint yet)"
        print(f"resume: continuing {store.root} from {where}; {dropped} episodes of unfinished steps removed")
    elif store.read_episodes():
        raise UsageError(f"{store.root} already holds a run; pass --resume to continue it "
                         "or choose another --output-dir")
    store.write_config(config.to_yaml())
    return store, checkpoint


def _template_args(args, processor):
    """TRL's chat_template_kwargs, cut to what the model's chat template reads."""
    from agent.messages import template_variables

    args.chat_template_kwargs = template_variables(processor, args.chat_template_kwargs or {})
    return args


def build_trainer(config: TrainConfig, store: RunStore, environments=None, scorer=None, model_and_processor=None):
    """``model_and_processor``: already loaded, e.g. random-weight shapes for the GPU check."""
    use_run_trackio_dir(config, store)  # before the imports below: TRL's trainer imports trackio
    from multiturn_trainer.callbacks import RunCallback
    # Here too, not at the top: the GPU check imports this module (peft_config) on an image
    # without TRL, tree-sitter or a browser.
    from multiturn_trainer.env_backends import make_environments
    from multiturn_trainer.grpo import MultiTurnGRPOTrainer, check_trl_pin

    check_trl_pin()
    model, processor = model_and_processor if model_and_processor is not None else load_model(config)
    kernels = announce_kernels(model, has_gpu())
    if kernels:
        print(kernels, flush=True)
    if config.use_vllm:
        from trl.generation import vllm_generation

        if not vllm_generation.is_vllm_available():
            raise UsageError("use_vllm is on but vLLM is not installed (docs/design/vllm-and-memory.md); "
                             "install it, or pass --use-vllm false for HF generate (slower)")
    trainer = MultiTurnGRPOTrainer(
        model=model,
        args=_template_args(grpo_args(config, store), processor),
        train_dataset=episode_dataset(config),
        processing_class=processor,
        peft_config=peft_config(config, model),
        run_config=config,
        environments=environments or make_environments(config),
        scorer=scorer or scorer_for(config),
        store=store,
    )
    RunCallback.install(trainer)
    return trainer


def train(config: TrainConfig, environments=None, scorer=None, model_and_processor=None,
          token_budget: int | None = None) -> TrainSummary:
    """`watercolour train`, the demo and every `bench learn` arm. ``token_budget``: stop once the
    run has generated this many tokens."""
    store, checkpoint = prepare_run(config)
    trainer = build_trainer(config, store, environments, scorer, model_and_processor)
    if token_budget is not None:
        from multiturn_trainer.callbacks import TokenBudget

        trainer.add_callback(TokenBudget(store, token_budget))
    started = time.perf_counter()
    try:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        adapter = store.root / "adapter"
        trainer.save_model(str(adapter))
    finally:
        trainer.painting_envs.close()
    summary = summarise_run(store, adapter)
    if trainer.accelerator.is_main_process:
        dashboard = ""
        if "trackio" in trainer.args.report_to:
            from trackio.utils import TRACKIO_DIR  # where trackio really wrote (see use_run_trackio_dir)

            dashboard = f"; dashboard: TRACKIO_DIR={TRACKIO_DIR} trackio show"
        print(f"train: {summary.steps} steps, {summary.episodes} episodes in {time.perf_counter() - started:.0f} s; "
              f"run directory {store.root}{dashboard}")
    if config.push_adapter_to and trainer.accelerator.is_main_process:
        push_adapter(trainer, config.push_adapter_to, adapter)
    return summary


def summarise_run(store: RunStore, adapter: Path | None = None) -> TrainSummary:
    episodes = store.read_episodes()
    steps = sorted({e["step"] for e in episodes})
    third = max(1, len(steps) // 3)

    def rewards(chosen_steps: list[int]) -> list[float]:
        chosen = set(chosen_steps)
        return [e["reward"] for e in episodes if e["step"] in chosen and e["reward"] is not None]

    first_third, last_third = rewards(steps[:third]), rewards(steps[-third:])
    gallery = store.write_gallery(episodes) if episodes else None
    return TrainSummary(
        run_dir=store.root,
        steps=len(steps),
        episodes=len(episodes),
        reward_first_third=mean(first_third),
        reward_last_third=mean(last_third),
        turn_gain=mean(turn_gains(episodes)),
        gallery=gallery,
        adapter=adapter,
        reward_rise=difference_of_means(last_third, first_third),
        tokens_by_turn=tokens_by_turn(episodes),
    )


class PushError(UsageError):
    pass


def push_adapter(trainer, repo_id: str, adapter: Path) -> None:
    """Push the saved adapter; an unreachable Hub is a clear message, not a traceback."""
    try:
        trainer.model.push_to_hub(repo_id, private=True)
        trainer.processing_class.push_to_hub(repo_id, private=True)
    except Exception as exc:  # noqa: BLE001 - every failure here has the same remedy
        raise PushError(
            f"could not push the adapter to the Hub repo {repo_id!r} "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no detail'}). "
            f"Is this machine offline or not logged in (`hf auth login`)? The adapter is saved in {adapter}; "
            f"push it later with `hf upload {repo_id} {adapter}`."
        ) from None
    print(f"train: pushed the adapter to https://huggingface.co/{repo_id}")
