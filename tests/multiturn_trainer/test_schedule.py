"""Warm-up trains on step 1, and the frozen router carries no aux loss."""

from __future__ import annotations

import pytest
from safetensors.torch import load_file

from helpers import tiny_config
from multiturn_trainer.config import TrainConfig
from multiturn_trainer.store import RunStore
from multiturn_trainer.train import train


@pytest.mark.slow  # warm-started tiny policy
def test_warm_up_trains_on_the_first_step(moe_policy, environments, tmp_path):
    config = tiny_config(moe_policy, tmp_path / "run", steps=1, lr_scheduler_type="constant_with_warmup",
                         warmup_steps=5, learning_rate=1e-3, turns=1)
    summary = train(config, environments=environments)
    [metrics] = RunStore(summary.run_dir, "run").read_metrics()
    # HF's warm-up gave step 1 a learning rate of 0; counted from 1 it is lr / warmup.
    assert abs(metrics["learning_rate"] - 1e-3 / 5) < 1e-9
    adapter = load_file(str(summary.adapter / "adapter_model.safetensors"))
    lora_b = [t for name, t in adapter.items() if "lora_B" in name]
    assert lora_b and any(float(t.abs().max()) > 0 for t in lora_b)


def test_router_aux_loss_is_off_by_default_while_the_router_is_frozen():
    assert TrainConfig().router_aux_loss_coef == 0.0
