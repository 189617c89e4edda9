"""What every command builds before it runs episodes: the model, the scorer, the policies, the rows.

Training, the held-out eval, replay's continuation and the demo all start here, so a model is
loaded, a checkpoint merged and a reward mix built the same way everywhere. Policy backends
themselves live in ``agent.policies``; this module knows the run configuration and the
checkpoint layout: a LoRA adapter folder (``adapter_config.json``) is merged onto the base it
names, a full model folder is loaded as it is.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch

from agent.messages import first_turn_messages
from agent.policies import EndpointPolicy, LocalModelPolicy
from env.errors import UsageError
from env.backends import DEFAULT_BACKEND
from multiturn_trainer.config import TrainConfig
from multiturn_trainer.families import family_of
from multiturn_trainer.kernels import quiet_cpu_kernel_warnings
from multiturn_trainer.sft import base_model, warm_start_learning_rate, warm_start_tiny
from multiturn_trainer.tiny_model import load_pretrained


def has_gpu() -> bool:
    return torch.cuda.is_available()


# Beside the built model: the recipe that built it (warm_start_recipe).
WARM_START_STAMP = "warm_start.json"


def warm_start_recipe(config: TrainConfig) -> dict[str, Any]:
    """What the tiny model at ``config.model`` is built from; a folder built otherwise is rebuilt.
    The seed is left out: `bench learn`'s seeds share one warm start."""
    recipe: dict[str, Any] = {"tiny_model": config.tiny_model, "steps": max(0, config.tiny_warm_start_steps)}
    if recipe["steps"]:
        recipe.update(revisions=config.tiny_warm_start_revisions, subjects=list(config.subjects),
                      revision_format=config.revision_format, render_backend=config.render_backend or DEFAULT_BACKEND,
                      learning_rate=warm_start_learning_rate(config.tiny_model))
    return recipe


def recorded_recipe(path: Path) -> dict[str, Any] | None:
    """The recipe recorded beside a model built here; None without a record (a model of the
    user's own, or one built before records were kept)."""
    try:
        return json.loads((path / WARM_START_STAMP).read_text())
    except (OSError, ValueError):
        return None


def ensure_model(config: TrainConfig) -> str:
    """The model path, building the tiny offline model there first when asked to, and again when
    the folder's recorded recipe differs (another preset's warm-start steps, say)."""
    path = Path(config.model)
    if not config.tiny_model:
        return config.model
    recipe = warm_start_recipe(config)
    if (path / "config.json").is_file():
        recorded = recorded_recipe(path)
        if recorded is None or recorded == recipe:  # unrecorded: not ours to replace
            return config.model
        changed = ", ".join(f"{key} {recorded.get(key)!r} -> {value!r}" for key, value in recipe.items()
                            if recorded.get(key) != value)
        print(f"train: {path} was built from another recipe ({changed}); rebuilding it", flush=True)
    print(first_run_announcement(config), flush=True)
    build_tiny(config, path)
    (path / WARM_START_STAMP).write_text(json.dumps(recipe, indent=1) + "\n")
    return config.model


def build_tiny(config: TrainConfig, path: Path) -> None:
    """The config's tiny model at ``path``: its base, warm-started when it asks for SFT steps."""
    if config.tiny_warm_start_steps > 0:
        result = warm_start_tiny(path, config.tiny_model, config.tiny_warm_start_steps, seed=config.seed,
                                 revisions=config.tiny_warm_start_revisions, backend=config.render_backend,
                                 subjects=config.subjects, revision_format=config.revision_format)
        cut = [n for n in result.reply_tokens if n > config.max_completion_length]
        if cut:
            print(f"train: {len(cut)} of {len(result.reply_tokens)} warm-start replies (the longest {max(cut)} tokens) "
                  f"are longer than max_completion_length {config.max_completion_length}: a sketch that long is "
                  "cut mid-line (syntax_error) unless the policy learns shorter ones (--max-completion-length)", flush=True)
        return
    import shutil

    if path.exists():
        shutil.rmtree(path)
    base = base_model(config.tiny_model, path, seed=config.seed)
    if base != path:  # a pretrained kind's cached build: a copy of it is the model at ``path``
        shutil.copytree(base, path)


# Seconds per rendered revision draft and per SFT step on a quiet 2-core machine, for the
# announced wait (measured: docs/experiments/demo-preset.md).
WARM_START_SECONDS_PER_REVISION_2_CORES = 78 / 64
WARM_START_SECONDS_PER_STEP_2_CORES = 210 / 180
# A pretrained kind's step is a 135M model on ~2k-token examples, not a tiny one
# (docs/experiments/pretrained-policy.md).
PRETRAINED_WARM_START_SECONDS_PER_STEP_2_CORES = 50


def first_run_announcement(config: TrainConfig) -> str:
    """One line before the tiny model is built: what, why, how long, where it is cached, how to skip."""
    if config.tiny_warm_start_steps <= 0:
        return (f"train: building the tiny offline {config.tiny_model} model in {config.model} (seconds; "
                "untrained, it writes gibberish until warm-started)")
    from multiturn_trainer.pretrained import PRETRAINED_KINDS

    per_step = (PRETRAINED_WARM_START_SECONDS_PER_STEP_2_CORES if config.tiny_model in PRETRAINED_KINDS
                else WARM_START_SECONDS_PER_STEP_2_CORES)
    seconds = (config.tiny_warm_start_revisions * WARM_START_SECONDS_PER_REVISION_2_CORES
               + config.tiny_warm_start_steps * per_step)
    minutes = max(1, round(seconds / 60))
    return (f"train: first run: building the offline {config.tiny_model} model and warm-starting it "
            f"({config.tiny_warm_start_steps} SFT steps on compact procedural sketches, "
            f"{config.tiny_warm_start_revisions} rendered revision examples) so that its sketches render; "
            f"about {minutes} min on 2 CPU cores, once: it is cached in {config.model} and reused by later runs "
            "(to skip it, pass --model with a model folder you already have)")


def quiet_renamed_checkpointing_warning() -> None:
    """TRL 1.16 and PEFT read the model's old ``is_gradient_checkpointing`` name (every
    generation, every adapter load); transformers 5.24 answers each time with a FutureWarning
    that says nothing our users can act on."""
    import warnings

    warnings.filterwarnings("ignore", message=r"`is_gradient_checkpointing` is deprecated", category=FutureWarning)


def load_model(config: TrainConfig):
    """(model, processor) of ``config.model`` in the config's dtype, on the GPU when there is one."""
    quiet_renamed_checkpointing_warning()
    if not has_gpu():
        quiet_cpu_kernel_warnings()
    dtype = None if config.dtype == "auto" and not has_gpu() else ("bfloat16" if config.dtype == "auto" else config.dtype)
    model, processor = load_pretrained(ensure_model(config), dtype=dtype, device="cuda" if has_gpu() else None)
    if config.attn_implementation:
        model.set_attn_implementation(config.attn_implementation)
    return model, processor


def scorer_for(config: TrainConfig):
    """The config's reward mix with its pool, judge and HPSv3 server."""
    from rewards.mixer import build_scorer
    from rewards.pool import ReferencePool

    return build_scorer(config.reward_preset, ReferencePool.load(config.pool), judge_url=config.judge_url,
                        judge_model=config.judge_model, hps_url=config.hps_url,
                        judge_probability=config.judge_probability)


def episode_row(config: TrainConfig, subject: str, seed: int) -> dict[str, Any]:
    """What an episode starts from: the turn-1 prompt, the subject and the render seed."""
    return {"prompt": first_turn_messages(subject, enable_thinking=config.enable_thinking,
                                          revision_format=config.revision_format),
            "subject": subject, "seed": seed}


def load_checkpoint(config: TrainConfig, checkpoint: Path):
    """(model, processor) for a LoRA checkpoint (merged into its base) or a full model folder."""
    checkpoint = Path(checkpoint)
    adapter_config = checkpoint / "adapter_config.json"
    if adapter_config.is_file():
        from peft import PeftModel

        base = json.loads(adapter_config.read_text()).get("base_model_name_or_path") or config.model
        model, processor = load_model(dataclasses.replace(config, model=base, tiny_model=None))
        return PeftModel.from_pretrained(model, str(checkpoint)).merge_and_unload(), processor
    if (checkpoint / "config.json").is_file():
        return load_model(dataclasses.replace(config, model=str(checkpoint), tiny_model=None))
    raise UsageError(f"{checkpoint} holds neither a LoRA adapter (adapter_config.json) "
                     "nor a model (config.json)")


def local_policy(config: TrainConfig, checkpoint: Path, model=None, processor=None) -> LocalModelPolicy:
    """A checkpoint (or an already-loaded model) sampling with the config's generation settings."""
    if model is None:
        model, processor = load_checkpoint(config, checkpoint)
    model.eval()
    family = family_of(model)
    return LocalModelPolicy(model, processor, max_new_tokens=config.max_completion_length,
                            temperature=config.temperature, top_p=config.top_p, top_k=config.top_k,
                            seed=config.seed, enable_thinking=config.enable_thinking,
                            sees_images=family.sees_images, image_pad_token=family.image_pad_token)


def endpoint_policy(config: TrainConfig, url: str, model: str, token: str | None = None,
                    concurrency: int = 8) -> EndpointPolicy:
    """A served model with the config's generation settings (token: argument, else the env vars)."""
    return EndpointPolicy(url, model, max_tokens=config.max_completion_length, temperature=config.temperature,
                          top_p=config.top_p, token=token, concurrency=concurrency, seed=config.seed)
