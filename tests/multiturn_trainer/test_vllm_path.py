"""``use_vllm: true`` driven through ``trainer.train()`` against the vLLM stand-in.

The stand-in (``tests/multiturn_trainer/vllm_standin.py``) implements the surface TRL's colocate path calls and
rejects what vLLM 0.31 rejects; it covers what needs a GPU (sleep mode, TRL's in-place weight
push). The real engine, where a CPU build of vLLM is installed, is in tests/multiturn_trainer/test_vllm_real.py.
Before the fix this path died on its first step: the rollout returned no log-probs and TRL's
importance-sampling correction subtracted None.
"""

from __future__ import annotations

import pytest
import torch

import vllm_standin
from helpers import tiny_config
from multiturn_trainer.config import TrainConfig
from multiturn_trainer.grpo import collapse_image_pads
from multiturn_trainer.store import RunStore
from multiturn_trainer.train import train
from test_microbatch import ForcedPaintings


@pytest.mark.slow  # warm-started tiny policy
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
    # Two steps x two turns x two episodes; turn-2 prompts carry the painting as an image, as
    # one <|image_pad|> per image (the stand-in refuses expanded runs, like vLLM's rendering).
    assert [r["images"] for r in llm.requests] == [0, 0, 1, 1] * 2
    assert [r["prompt_token_ids"].count(llm.image_pad_id) for r in llm.requests] == [0, 0, 1, 1] * 2
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


def test_each_image_pad_run_collapses_to_one_pad_and_other_tokens_stay():
    pad = 7
    ids = [1, 5, pad, pad, pad, 6, 2, 5, pad, pad, 6, 3]
    assert collapse_image_pads(ids, pad) == [1, 5, pad, 6, 2, 5, pad, 6, 3]
    assert collapse_image_pads([1, 2, 3], pad) == [1, 2, 3]


def test_standin_sampling_params_refuse_keywords_vllm_does_not_know():
    vllm_standin.SamplingParams(n=1, temperature=1.0, top_k=0, top_p=1.0, max_tokens=8, logprobs=0)
    with pytest.raises(TypeError, match="top_kk"):
        vllm_standin.SamplingParams(top_kk=0)


def test_vllm_with_importance_sampling_refuses_truncated_sampling(tmp_path):
    """vLLM's sampling log-probs come after top-k/top-p; the trainer's over the full distribution."""
    base = dict(model="m", output_dir=str(tmp_path), subjects=["a red apple"], use_vllm=True)
    with pytest.raises(ValueError, match="top_k 0, top_p 1"):
        TrainConfig(**base, top_k=20, top_p=0.95)
    with pytest.raises(ValueError, match="top_k 0, top_p 1"):
        TrainConfig(**base, top_k=0, top_p=0.95)
    TrainConfig(**base, top_k=0, top_p=1.0)
    TrainConfig(**base, top_k=20, top_p=0.95, vllm_importance_sampling_correction=False)
    TrainConfig(**dict(base, use_vllm=False), top_k=20, top_p=0.95)
