"""Loading the policies the episode runner drives outside training (eval, replay, pool build).

The backends themselves live in ``agent.policies``; this module knows the run configuration
and the checkpoint layout: a LoRA adapter folder (``adapter_config.json``) is merged onto the
base it names, a full model folder is loaded as it is.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from agent.policies import EndpointPolicy, LocalModelPolicy
from multiturn_trainer.config import TrainConfig


def load_checkpoint_policy(config: TrainConfig, checkpoint: Path):
    """(model, processor) for a LoRA checkpoint (merged into its base) or a full model folder."""
    from multiturn_trainer.train import load_model

    checkpoint = Path(checkpoint)
    adapter_config = checkpoint / "adapter_config.json"
    if adapter_config.is_file():
        from peft import PeftModel

        base = json.loads(adapter_config.read_text()).get("base_model_name_or_path") or config.model
        model, processor = load_model(dataclasses.replace(config, model=base, tiny_model=None))
        return PeftModel.from_pretrained(model, str(checkpoint)).merge_and_unload(), processor
    if (checkpoint / "config.json").is_file():
        return load_model(dataclasses.replace(config, model=str(checkpoint), tiny_model=None))
    raise SystemExit(f"watercolour: {checkpoint} holds neither a LoRA adapter (adapter_config.json) "
                     "nor a model (config.json)")


def local_policy(config: TrainConfig, checkpoint: Path, model=None, processor=None) -> LocalModelPolicy:
    """A checkpoint (or an already-loaded model) sampling with the config's generation settings."""
    if model is None:
        model, processor = load_checkpoint_policy(config, checkpoint)
    model.eval()
    return LocalModelPolicy(model, processor, max_new_tokens=config.max_completion_length,
                            temperature=config.temperature, top_p=config.top_p, top_k=config.top_k,
                            seed=config.seed, enable_thinking=config.enable_thinking)


def endpoint_policy(config: TrainConfig, url: str, model: str, token: str | None = None,
                    concurrency: int = 8) -> EndpointPolicy:
    """A served model with the config's generation settings (token: argument, else the env vars)."""
    return EndpointPolicy(url, model, max_tokens=config.max_completion_length, temperature=config.temperature,
                          top_p=config.top_p, token=token, concurrency=concurrency, seed=config.seed)
