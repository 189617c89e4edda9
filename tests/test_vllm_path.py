"""``use_vllm: true`` driven through ``trainer.train()`` against the vLLM stand-in.

vLLM does not install on a CPU machine, so ``tests/vllm_standin.py`` implements the exact
surface TRL's colocate path calls and checks what it receives. Before the fix this path died
on its first step: the rollout returned no log-probs and TRL's importance-sampling correction
subtracted None.
"""

from __future__ import annotations

import torch

import vllm_standin
from helpers import tiny_config
from multiturn_trainer.store import RunStore
from multiturn_trainer.train import train
from test_microbatch import ForcedPaintings


def test_vllm_colocate_multi_turn_step_with_images_and_sleep_mode(monkeypatch, dense_policy, environments, tmp_path):
    standin = vllm_standin.install(monkeypatch)
    # Every turn paints, so every turn-2 prompt carries an image for vLLM.
    envs = ForcedPaintings(environments, [[True, True]] * 2)
    # top_k/top_p off: vLLM's "processed" log-probs are then exactly TRL's temperature-scaled ones.
    config = tiny_config(dense_policy, tmp_path / "run", use_vllm=True, steps=2, save_steps=10, top_k=0, top_p=1.0,
                         micro_batch_size=1)
    summary = train(config, environments=envs)
    assert summary.steps == 2

    [llm] = standin.instances
    # The engine is sized from the episode budget, not the model's 262k context, and sleeps.
    assert llm.engine_kwargs["max_model_len"] == config.episode_token_budget()
    assert llm.engine_kwargs["enable_sleep_mode"] is True
    assert llm.engine_kwargs["gpu_memory_utilization"] == config.vllm_gpu_memory_utilization
    # Weights reach vLLM under the model's own names (LoRA merged), after every level-2 sleep.
    assert llm.loaded and all(".lora_" not in name for name in llm.loaded)
    assert ("sleep", 2) in llm.events and ("wake_up", ("weights",)) in llm.events
    # Two steps x two turns x two episodes; turn-2 prompts carry the painting as an image.
    assert [r["images"] for r in llm.requests] == [0, 0, 1, 1] * 2
    assert all(r["max_tokens"] == config.max_completion_length for r in llm.requests)

    metrics = RunStore(summary.run_dir, "run").read_metrics()
    for record in metrics:
        # The ratio the loss uses is computed with the images, from log-probs stitched per turn
        # (environment tokens masked): the sampler's and the trainer's log-probs agree.
        assert record["sampling/with_images/logp_difference_max"] < 1e-3
        assert abs(record["sampling/with_images/importance_sampling_ratio_mean"] - 1.0) < 1e-3
        # TRL's own figure (log-probs without the images) is what the recomputation replaced.
        assert record["sampling/sampling_logp_difference/max"] > record["sampling/with_images/logp_difference_max"]
    assert torch.isfinite(torch.tensor([r["loss"] for r in metrics])).all()
