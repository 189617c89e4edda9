"""`watercolour train`: build model, environment, scorer and trainer from one TrainConfig, and run."""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.messages import first_turn_messages
from multiturn_trainer.config import TrainConfig
from multiturn_trainer.evaluation_stats import difference_of_means
from multiturn_trainer.store import RunStore, checkpoint_step, mean, turn_gains

VISION_MODULES = r".*\.visual\..*"
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


def has_gpu() -> bool:
    # Imported here: `watercolour train --help` loads this module and must not wait for torch.
    import torch

    return torch.cuda.is_available()


def ensure_model(config: TrainConfig) -> str:
    """The model path, building the tiny offline model there first when asked to."""
    path = Path(config.model)
    if config.tiny_model and not (path / "config.json").is_file():
        from multiturn_trainer.tiny_model import build_tiny_model

        print(first_run_announcement(config), flush=True)
        if config.tiny_warm_start_steps <= 0:
            build_tiny_model(path, kind=config.tiny_model, seed=config.seed)
        else:
            from multiturn_trainer.sft import warm_start_tiny

            warm_start_tiny(path, config.tiny_model, config.tiny_warm_start_steps, seed=config.seed,
                            revisions=config.tiny_warm_start_revisions, backend=config.render_backend,
                            subjects=config.subjects)
    return config.model


# Measured on a quiet 2-core machine (2026-12-01, length-grouped SFT batches): rendering the
# 64 revision drafts took 78 s, 180 SFT steps 210 s (README, "The demo with its eval, measured").
WARM_START_SECONDS_PER_REVISION_2_CORES = 78 / 64
WARM_START_SECONDS_PER_STEP_2_CORES = 210 / 180


def first_run_announcement(config: TrainConfig) -> str:
    """One line before the tiny model is built: what, why, how long, where it is cached, how to skip."""
    if config.tiny_warm_start_steps <= 0:
        return (f"train: building the tiny offline {config.tiny_model} model in {config.model} (seconds; "
                "untrained, it writes gibberish until warm-started)")
    seconds = (config.tiny_warm_start_revisions * WARM_START_SECONDS_PER_REVISION_2_CORES
               + config.tiny_warm_start_steps * WARM_START_SECONDS_PER_STEP_2_CORES)
    minutes = max(1, round(seconds / 60))
    return (f"train: first run: building the tiny offline {config.tiny_model} model and warm-starting it "
            f"({config.tiny_warm_start_steps} SFT steps on compact procedural sketches, "
            f"{config.tiny_warm_start_revisions} rendered revision examples) so that its sketches render; "
            f"about {minutes} min on 2 CPU cores, once: it is cached in {config.model} and reused by later runs "
            "(to skip it, pass --model with a model folder you already have)")


def peft_config(config: TrainConfig, model):
    if not config.lora:
        return None
    from peft import LoraConfig

    kwargs: dict[str, Any] = {}
    if not config.lora_vision:
        kwargs["exclude_modules"] = VISION_MODULES
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


def episode_row(config: TrainConfig, subject: str, seed: int) -> dict[str, Any]:
    """What an episode starts from: the turn-1 prompt, the subject and the render seed."""
    return {"prompt": first_turn_messages(subject, enable_thinking=config.enable_thinking),
            "subject": subject, "seed": seed}


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
        output_dir=str(store.checkpoints_dir),
        run_name=config.name,
        project="watercolour",
        max_steps=config.steps,
        num_generations=config.num_generations,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=episodes // micro,
        max_completion_length=config.max_completion_length,
        temperature=config.temperature,
        top_p=config.top_p,
        top_k=config.top_k,
        learning_rate=config.learning_rate,
        lr_scheduler_type=config.lr_scheduler_type,
        warmup_steps=config.warmup_steps,
        scale_rewards=config.scale_rewards,
        beta=config.beta,
        max_grad_norm=config.max_grad_norm,
        bf16=bf16,
        **checkpointing_argument(checkpointing),
        router_aux_loss_coef=config.router_aux_loss_coef,
        chat_template_kwargs={"enable_thinking": config.enable_thinking},
        logging_steps=1,
        save_strategy="steps",
        save_steps=config.save_steps,
        report_to=report_to(config),
        seed=config.seed,
        data_seed=config.seed,
        use_cpu=not gpu,
        dataloader_num_workers=0,
        remove_unused_columns=False,
        log_completions=False,
        disable_tqdm=False,
        use_vllm=config.use_vllm,
    )
    if config.use_vllm:
        kwargs.update(
            vllm_mode=config.vllm_mode,
            vllm_gpu_memory_utilization=config.vllm_gpu_memory_utilization,
            vllm_max_model_length=config.vllm_max_model_length or config.episode_token_budget(),
            vllm_enable_sleep_mode=config.vllm_enable_sleep_mode and config.vllm_mode == "colocate",
            vllm_importance_sampling_correction=config.vllm_importance_sampling_correction,
            vllm_importance_sampling_mode=config.vllm_importance_sampling_mode,
            vllm_importance_sampling_clip_max=config.vllm_importance_sampling_clip_max,
        )
        if config.vllm_server_base_url:
            kwargs["vllm_server_base_url"] = config.vllm_server_base_url
    return GRPOConfig(**kwargs)


def checkpointing_argument(enabled: bool) -> dict[str, bool]:
    """TrainingArguments renamed ``gradient_checkpointing`` to ``activation_checkpointing`` in
    transformers 5.24 (the old name still works there, with a FutureWarning every run); vLLM 0.31
    and the lent GPU image hold transformers 5.17, which knows only the old name."""
    import dataclasses

    from transformers import TrainingArguments

    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    return {"activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing": enabled}


def build_scorer(config: TrainConfig):
    from rewards.mixer import build_scorer as build_reward_scorer
    from rewards.pool import ReferencePool

    return build_reward_scorer(config.reward_preset, ReferencePool.load(config.pool), judge_url=config.judge_url,
                               judge_model=config.judge_model, hps_url=config.hps_url,
                               judge_probability=config.judge_probability)


def quiet_renamed_checkpointing_warning() -> None:
    """TRL 1.16 and PEFT read the model's old ``is_gradient_checkpointing`` name (every
    generation, every adapter load); transformers 5.24 answers each time with a FutureWarning
    that says nothing our users can act on."""
    import warnings

    warnings.filterwarnings("ignore", message=r"`is_gradient_checkpointing` is deprecated", category=FutureWarning)


def load_model(config: TrainConfig):
    quiet_renamed_checkpointing_warning()
    from multiturn_trainer.tiny_model import load_policy

    if not has_gpu():
        from multiturn_trainer.kernels import quiet_cpu_kernel_warnings

        quiet_cpu_kernel_warnings()
    dtype = None if config.dtype == "auto" and not has_gpu() else ("bfloat16" if config.dtype == "auto" else config.dtype)
    model, processor = load_policy(ensure_model(config), dtype=dtype, device="cuda" if has_gpu() else None)
    if config.attn_implementation:
        model.set_attn_implementation(config.attn_implementation)
    return model, processor


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
        raise SystemExit(f"watercolour train: {store.root} already holds a run; pass --resume to continue it "
                         "or choose another --output-dir")
    store.write_config(config.to_yaml())
    return store, checkpoint


def build_trainer(config: TrainConfig, store: RunStore, environments=None, scorer=None, policy=None):
    """``policy``: an already-loaded (model, processor), e.g. random-weight shapes for the GPU check."""
    use_run_trackio_dir(config, store)  # before the imports below: TRL's trainer imports trackio
    from multiturn_trainer.callbacks import RunCallback
    from multiturn_trainer.environments import make_environments
    from multiturn_trainer.grpo import MultiTurnGRPOTrainer, check_trl_pin

    check_trl_pin()
    model, processor = policy if policy is not None else load_model(config)
    from multiturn_trainer.kernels import announce_kernels

    kernels = announce_kernels(model, has_gpu())
    if kernels:
        print(kernels, flush=True)
    if config.use_vllm:
        from trl.generation import vllm_generation

        if not vllm_generation.is_vllm_available():
            raise SystemExit("watercolour train: use_vllm is on but vLLM is not installed (see README, "
                             "'Generation on one H200'); install it, or pass --use-vllm false for HF generate "
                             "(about 2.6x slower per 35B step)")
    trainer = MultiTurnGRPOTrainer(
        model=model,
        args=grpo_args(config, store),
        train_dataset=episode_dataset(config),
        processing_class=processor,
        peft_config=peft_config(config, model),
        run_config=config,
        environments=environments or make_environments(config),
        scorer=scorer or build_scorer(config),
        store=store,
    )
    RunCallback.install(trainer)
    return trainer


def train(config: TrainConfig, environments=None, scorer=None, policy=None) -> TrainSummary:
    store, checkpoint = prepare_run(config)
    trainer = build_trainer(config, store, environments, scorer, policy)
    started = time.perf_counter()
    try:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        adapter = store.root / "adapter"
        trainer.save_model(str(adapter))
    finally:
        trainer.painting_envs.close()
    summary = summarise(store, adapter)
    if trainer.accelerator.is_main_process:
        dashboard = ""
        if "trackio" in trainer.args.report_to:
            from trackio.utils import TRACKIO_DIR  # where trackio really wrote (see use_run_trackio_dir)

            dashboard = f"; dashboard: TRACKIO_DIR={TRACKIO_DIR} trackio show"
        print(f"train: {summary.steps} steps, {summary.episodes} episodes in {time.perf_counter() - started:.0f} s; "
              f"run directory {store.root}{dashboard}")
    if config.push_to_hub and trainer.accelerator.is_main_process:
        push_adapter(trainer, config.push_to_hub, adapter)
    return summary


def summarise(store: RunStore, adapter: Path | None = None) -> TrainSummary:
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
    )


class PushError(SystemExit):
    pass


def push_adapter(trainer, repo_id: str, adapter: Path) -> None:
    """Push the saved adapter; an unreachable Hub is a clear message, not a traceback."""
    try:
        trainer.model.push_to_hub(repo_id, private=True)
        trainer.processing_class.push_to_hub(repo_id, private=True)
    except Exception as exc:  # noqa: BLE001 - every failure here has the same remedy
        raise PushError(
            f"watercolour train: could not push the adapter to the Hub repo {repo_id!r} "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no detail'}). "
            f"Is this machine offline or not logged in (`hf auth login`)? The adapter is saved in {adapter}; "
            f"push it later with `hf upload {repo_id} {adapter}`."
        ) from None
    print(f"train: pushed the adapter to https://huggingface.co/{repo_id}")


def cmd_train(args) -> int:
    from multiturn_trainer.config import parse_config

    train(_config_or_exit("train", lambda: parse_config(args.argv, prog="watercolour train",
                                                        default_config="configs/smoke.yaml")))
    return 0


def _config_or_exit(command: str, load) -> TrainConfig:
    """A bad config key or value is a one-line message, not a traceback."""
    try:
        return load()
    except ValueError as exc:
        raise SystemExit(f"watercolour {command}: {exc}") from None


def demo_line(summary: TrainSummary) -> str:
    """The line ARCHITECTURE.md fixes for `make demo`."""

    def number(value: float | None, sign: str = "") -> str:
        return "nan" if value is None else format(value, f"{sign}.3f")

    return (f"demo: steps={summary.steps} reward_first_third={number(summary.reward_first_third)} "
            f"reward_last_third={number(summary.reward_last_third)} turn_gain={number(summary.turn_gain, '+')} "
            f"gallery={summary.gallery}")


def demo_eval(config: TrainConfig, summary: TrainSummary) -> dict[str, dict[str, Any]]:
    """The trained policy and its warm start on the held-out subjects, the same slots for both
    (`watercolour eval`'s two arms), each report in RUN_DIR/eval/<name>/."""
    import dataclasses

    from agent.subjects import resolve
    from multiturn_trainer.environments import make_environments
    from multiturn_trainer.evaluation import run_eval, table
    from multiturn_trainer.policies import local_policy

    eval_config = dataclasses.replace(config, report_to="none")
    held_out = resolve(config.eval_subjects)
    environments, scorer = make_environments(eval_config), build_scorer(eval_config)
    reports = {}
    try:
        for name, checkpoint in (("warm_start", Path(config.model)), ("trained", summary.adapter)):
            policy = local_policy(eval_config, checkpoint)
            reports[name] = run_eval(eval_config, policy, held_out, config.eval_episodes,
                                     summary.run_dir / "eval" / name, environments=environments, scorer=scorer,
                                     label=name)
            print(table(reports[name]), flush=True)
    finally:
        environments.close()
    return reports


def format_interval(summary: dict | None) -> str:
    """estimate(low..high), as the demo line prints a bootstrap 95 % interval."""
    if summary is None or summary["estimate"] is None:
        return "nan"
    return f"{summary['estimate']:+.3f}({summary['low']:+.3f}..{summary['high']:+.3f})"


def eval_fields(reports: dict[str, dict[str, Any]]) -> str:
    """The eval's headline numbers for the demo line: estimate(low..high), 95 % bootstrap."""
    from multiturn_trainer.evaluation import final_difference

    fields = []
    for name, report in reports.items():
        prefix = "eval" if name == "trained" else f"eval_{name}"
        fields += [f"{prefix}_turn_gain={format_interval(report['final_minus_first'])}",
                   f"{prefix}_final_minus_best_of_k={format_interval(report['final_minus_best_of_k'])}"]
    if {"trained", "warm_start"} <= reports.keys():
        # What training bought on subjects it never saw: the final painting, slot by slot.
        fields.append("eval_trained_minus_warm_start="
                      + format_interval(final_difference(reports["trained"], reports["warm_start"])))
    return " ".join(fields)


def cmd_demo(args) -> int:
    """A fresh demo run every time (the warm-started tiny model is cached between runs), then
    the trained policy against its warm start on the held-out subjects."""
    import shutil

    from multiturn_trainer.config import parse_config

    config = _config_or_exit("demo", lambda: parse_config(args.argv, prog="watercolour demo",
                                                          default_config="configs/demo.yaml"))
    if Path(config.output_dir).exists():
        shutil.rmtree(config.output_dir)
    summary = train(config)
    reports = demo_eval(config, summary)
    print(f"{demo_line(summary)} reward_rise={format_interval(summary.reward_rise)} {eval_fields(reports)}",
          flush=True)
    return 0
