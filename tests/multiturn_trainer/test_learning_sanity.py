"""Sanity checks a trainer owes its users, each through ``trainer.train()`` (`watercolour train`'s
own path): GRPO moves the policy towards the reward and only there.

* a reward that prefers one fixed sketch feature rises in a handful of steps;
* with the reward's sign flipped it falls;
* with a zero learning rate nothing moves (weights and rewards);
* a group whose episodes all score the same gets zero advantages (and a group that varies does not);
* environment tokens (the user turns between the policy's turns) never receive gradient.

The policy is the untrained tiny model (seconds to build, no warm start): its replies are
sketch-vocabulary gibberish, which is all these checks need. The feature is how much of a reply
is whitespace (how many separate words it writes: each token either starts a word or not, so
every token carries the signal), measured on the reply text by a test scorer; gibberish fails the static gate before any browser is asked, so the
checks cost generation and loss passes only.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from helpers import SUBJECTS
from multiturn_trainer.config import TrainConfig
from multiturn_trainer.store import RunStore
from multiturn_trainer.tiny_model import build_tiny_model
from multiturn_trainer.train import build_trainer, prepare_run
from rewards.mixer import RewardMix, ScoreResult


def space_share(text: str | None) -> float:
    text = text or ""
    return sum(c.isspace() for c in text) / max(1, len(text))


class FeatureReward:
    """A test reward: the share of the reply's characters that are whitespace, times ``sign``;
    or one constant value for every episode of the groups listed in ``constant_subjects``."""

    def __init__(self, sign: float = 1.0, constant_subjects: tuple[str, ...] = ()):
        self.sign = sign
        self.constant_subjects = constant_subjects
        self.mix = RewardMix(name="space-share", weights={})

    def score_many_sync(self, paintings):
        results = []
        for painting in paintings:
            value = 0.25 if painting.subject in self.constant_subjects else self.sign * space_share(painting.code)
            results.append(ScoreResult(total=value, components={"gate": float(painting.passed)}))
        return results


@pytest.fixture(scope="module")
def untrained_policy(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-untrained"), kind="dense", seed=0)


def sanity_config(model: Path, out: Path, **overrides) -> TrainConfig:
    values = dict(model=str(model), turns=1, num_generations=16, prompts_per_step=1, max_completion_length=24,
                  steps=6, subjects=SUBJECTS, learning_rate=5e-2, warmup_steps=0, save_steps=100,
                  output_dir=str(out), report_to="none", seed=5, render_backend="llvmpipe-f16", temperature=1.0)
    values.update(overrides)
    return TrainConfig(**values)


def run_training(config: TrainConfig, environments, scorer, before_train=None):
    store, _ = prepare_run(config)
    trainer = build_trainer(config, store, environments=environments, scorer=scorer)
    if before_train is not None:
        before_train(trainer)
    trainer.train()
    return trainer, store


def rewards_by_step(store: RunStore) -> dict[int, list[float]]:
    steps: dict[int, list[float]] = {}
    for record in store.read_episodes():
        steps.setdefault(record["step"], []).append(record["reward"])
    return steps


def first_and_last(store: RunStore, steps: int = 2) -> tuple[float, float]:
    by_step = rewards_by_step(store)
    ordered = [by_step[s] for s in sorted(by_step)]
    first = [r for rewards in ordered[:steps] for r in rewards]
    last = [r for rewards in ordered[-steps:] for r in rewards]
    return sum(first) / len(first), sum(last) / len(last)


def adapter_weights(trainer) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in trainer.model.named_parameters() if p.requires_grad}


@pytest.mark.slow  # 537 s: 2 runs of 6 steps
def test_a_reward_preferring_a_sketch_feature_rises_and_its_negative_falls(untrained_policy, environments, tmp_path):
    up_trainer, up = run_training(sanity_config(untrained_policy, tmp_path / "up"), environments, FeatureReward(+1))
    down_trainer, down = run_training(sanity_config(untrained_policy, tmp_path / "down"), environments,
                                      FeatureReward(-1))
    up_first, up_last = first_and_last(up)
    down_first, down_last = first_and_last(down)
    # Same seed, same start: both runs' first step sampled the same replies.
    assert rewards_by_step(up)[1] == [-r for r in rewards_by_step(down)[1]]
    # The feature (whitespace share), first two steps against the last two. Measured on 2 cores:
    # 0.105 -> 0.172 with the reward, 0.110 -> 0.068 with its negative.
    assert up_last > up_first + 0.03, (up_first, up_last)
    assert -down_last < -down_first - 0.02, (-down_first, -down_last)
    # The run directory shows the same: metrics.jsonl's reward and frac_reward_zero_std.
    metrics = [json.loads(line) for line in (tmp_path / "up" / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 6 and all(m["frac_reward_zero_std"] == 0 for m in metrics)
    assert metrics[-1]["episode/reward_mean"] > metrics[0]["episode/reward_mean"]


@pytest.mark.slow  # 84 s at 3 steps of 16; now 2 steps of 8
def test_zero_learning_rate_moves_nothing(untrained_policy, environments, tmp_path):
    config = sanity_config(untrained_policy, tmp_path / "still", learning_rate=0.0, steps=2, num_generations=8)
    started = {}
    trainer, store = run_training(config, environments, FeatureReward(+1),
                                  before_train=lambda t: started.update(adapter_weights(t)))
    ended = adapter_weights(trainer)
    assert started and started.keys() == ended.keys()
    assert all(torch.equal(started[name], ended[name]) for name in started)
    # And the policy did see a signal to ignore: the rewards varied within each step.
    assert all(len(set(rewards)) > 1 for rewards in rewards_by_step(store).values())


@pytest.mark.slow  # 13 s
def test_a_group_with_one_reward_gets_zero_advantages(untrained_policy, environments, tmp_path):
    config = sanity_config(untrained_policy, tmp_path / "groups", prompts_per_step=2, num_generations=4, steps=1,
                           subjects=SUBJECTS)
    captured = []

    def capture(trainer):
        original = trainer._generate_and_score_completions

        def wrapped(inputs):
            output = original(inputs)
            captured.append((list(inputs), output["advantages"].detach().clone()))
            return output

        trainer._generate_and_score_completions = wrapped

    run_training(config, environments, FeatureReward(+1, constant_subjects=(SUBJECTS[0],)), before_train=capture)
    [(rows, advantages)] = captured
    constant = [i for i, row in enumerate(rows) if row["subject"] == SUBJECTS[0]]
    varying = [i for i, row in enumerate(rows) if row["subject"] != SUBJECTS[0]]
    assert len(constant) == 4 and len(varying) == 4
    assert all(advantages[i] == 0 for i in constant)
    assert any(advantages[i] != 0 for i in varying)
    assert advantages[varying].sum().abs() < 1e-5  # a group's advantages are centred on its own mean


def test_environment_tokens_never_receive_gradient(untrained_policy, environments, tmp_path):
    config = sanity_config(untrained_policy, tmp_path / "turns", turns=2, num_generations=2, steps=1)
    grads: list[torch.Tensor] = []
    completions: list[torch.Tensor] = []

    def capture(trainer):
        logps_of = trainer._get_per_token_logps_and_entropies
        compute_loss = trainer.compute_loss

        def logps(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
            result = logps_of(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
            if result[0].requires_grad:  # the loss pass, not the no-grad old/ref log-probs
                result[0].register_hook(lambda grad: grads.append(grad.detach().clone()))
            return result

        def loss(model, inputs, *args, **kwargs):
            completions.append(inputs["completion_ids"].detach().clone())
            return compute_loss(model, inputs, *args, **kwargs)

        trainer._get_per_token_logps_and_entropies = logps
        trainer.compute_loss = loss

    trainer, _ = run_training(config, environments, FeatureReward(+1), before_train=capture)
    episodes = [e.tokens for e in trainer.last_episode_batch.episodes]
    assert grads and len(grads) == len(completions)
    checked_env = checked_policy = 0
    for grad, completion in zip(grads, completions):
        for row in range(completion.size(0)):
            ids = completion[row].tolist()
            [episode] = [e for e in episodes if ids[:len(e.completion_ids)] == e.completion_ids]
            mask = torch.tensor(episode.env_mask, dtype=torch.bool)
            row_grad = grad[row, :len(mask)]
            assert (~mask).any(), "a two-turn episode has an environment turn"
            assert torch.all(row_grad[~mask] == 0), "an environment token received gradient"
            assert torch.all(grad[row, len(mask):] == 0), "a padding token received gradient"
            checked_env += int((~mask).sum())
            checked_policy += int((row_grad[mask] != 0).sum())
    assert checked_env > 0 and checked_policy > 0
