"""Sanity checks a trainer owes its users, each through ``trainer.train()`` (`watercolour train`'s
own path): GRPO moves the policy towards the reward and only there.

* a reward that prefers one fixed sketch feature raises it in a handful of steps, above where the
  same reward with its sign flipped takes it, in every one of several seeds (a seeded run repeats
  on one machine only, so what is asserted must hold over seeds and CPUs);
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

import contextlib
import dataclasses
import functools
import inspect
import json
from pathlib import Path

import pytest
import torch
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

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


@functools.cache
def _spaces_and_lengths(tokenizer, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Whitespace characters and characters of every token's text (decoded once per tokenizer)."""
    texts = [tokenizer.decode([i]) for i in range(vocab)]
    return (torch.tensor([float(sum(c.isspace() for c in text)) for text in texts]),
            torch.tensor([float(len(text)) for text in texts]))


@torch.no_grad()
def expected_space_share(trainer, sequences: list[tuple[list[int], int]], adapter: bool = True) -> float:
    """The feature as the policy itself expects it, teacher-forced on fixed ``sequences`` (full ids,
    reply length): the expected whitespace characters of the next token over its expected
    characters, summed over every reply position, under the distribution replies are sampled
    from. Nothing is sampled, so none of the noise of a few dozen replies. ``adapter=False``
    reads the untrained start (the LoRA switched off)."""
    tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
    model = trainer.model
    spaces, lengths = _spaces_and_lengths(tokenizer, model.get_output_embeddings().weight.size(0))
    # The distribution replies are drawn from: the run's temperature, top-k and top-p.
    sampling = LogitsProcessorList([TemperatureLogitsWarper(trainer.args.temperature),
                                    TopKLogitsWarper(trainer.args.top_k), TopPLogitsWarper(trainer.args.top_p)])
    expected_spaces = expected_length = 0.0
    with (contextlib.nullcontext() if adapter else model.disable_adapter()):
        for ids, reply in sequences:
            logits = model(input_ids=torch.tensor([ids])).logits[0, -reply - 1:-1].float()
            probs = sampling(None, logits).softmax(-1)
            expected_spaces += float((probs @ spaces).sum())
            expected_length += float((probs @ lengths).sum())
    return expected_spaces / expected_length


def adapter_weights(trainer) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in trainer.model.named_parameters() if p.requires_grad}


def after_each_call(trainer, method: str, record) -> None:
    """Wrap ``trainer.<method>`` so that ``record(inputs, result)`` sees every call, ``inputs`` being
    the argument of that name (the batch: TRL's compute_loss and _generate_and_score_completions)."""
    original = getattr(trainer, method)
    signature = inspect.signature(original)

    def wrapped(*args, **kwargs):
        result = original(*args, **kwargs)
        record(signature.bind(*args, **kwargs).arguments["inputs"], result)
        return result

    setattr(trainer, method, wrapped)


# Seeds of the learning test. A seeded run repeats on one machine, not across CPUs (float kernels
# differ by instruction set and thread count, the sampled tokens part, and the run takes another
# path), so the test asserts over several seeds and on a statistic that drift cannot flip.
LEARNING_SEEDS = (1, 3)


@pytest.mark.slow  # 4 runs of 6 steps of 24 replies (576 replies; the 8-of-32 pair it replaced had 512 in 117 s)
def test_a_reward_preferring_a_sketch_feature_raises_it_above_where_its_negative_takes_it(
        untrained_policy, environments, tmp_path):
    # What moves is the policy's own expected share of whitespace on a fixed set of replies
    # (teacher-forced under the sampling distribution, nothing sampled), per seed after a run on
    # the reward and one on its negative. Updates of this size (learning rate 5e-2) also move the
    # untrained policy's share by themselves: each seed's two runs share a drift, (up + down) / 2,
    # of -0.020..+0.044 below, +0.031 for seed 5 at 8 steps of 32 on an AMD EPYC with AVX2 and no
    # AVX-512 (issue 42), where that seed's negative run moved only -0.008 (the tuning machine,
    # AVX-512: -0.076) and the +-0.02 then asserted per run failed. So a margin on one run
    # measures the drift too; the gap between the two runs of one seed cancels it.
    # Measured at 6 steps of 24 (AMD EPYC with AVX-512, 2 cores under load, one torch thread),
    # up / down / gap: ATEN_CPU_CAPABILITY=avx2 seed 1 +0.051 / -0.023 / 0.074, seed 2 +0.051 /
    # -0.081 / 0.131; ATEN_CPU_CAPABILITY=default seed 3 +0.088 / +0.000 / 0.088, seed 4 +0.028 /
    # -0.069 / 0.097. Seed 5 at 8 steps of 32: gap 0.079 (AVX2 machine), 0.157 (tuning machine).
    # 4 steps of 16 were too weak (seed 1: gaps 0.002 and 0.025 under avx2 and default), and so
    # was a LoRA on the last layer's MLP only (TRL refuses one on lm_head).
    gaps, rises, sampled_gaps = [], [], []
    for seed in LEARNING_SEEDS:
        config = dict(steps=6, num_generations=24, seed=seed)
        up_trainer, up = run_training(sanity_config(untrained_policy, tmp_path / f"up-{seed}", **config),
                                      environments, FeatureReward(+1))
        down_trainer, down = run_training(sanity_config(untrained_policy, tmp_path / f"down-{seed}", **config),
                                          environments, FeatureReward(-1))
        # Same seed, same start, one machine: both runs' first step sampled the same replies.
        assert rewards_by_step(up)[1] == [-r for r in rewards_by_step(down)[1]]
        sequences = [(e.tokens.prompt_ids + e.tokens.completion_ids, len(e.tokens.completion_ids))
                     for trainer in (up_trainer, down_trainer) for e in trainer.last_episode_batch.episodes
                     if e.tokens.completion_ids]
        start = expected_space_share(up_trainer, sequences, adapter=False)
        assert expected_space_share(down_trainer, sequences, adapter=False) == pytest.approx(start)
        raised, lowered = expected_space_share(up_trainer, sequences), expected_space_share(down_trainer, sequences)
        gaps.append(raised - lowered)
        rises.append(raised - start)
        # What the runs sampled, in share (the negative run's rewards are minus the share): the
        # last two steps' mean against the first two's, the reward's run minus its negative's.
        (up_first, up_last), (down_first, down_last) = first_and_last(up), first_and_last(down)
        sampled_gaps.append((up_last - up_first) - (down_first - down_last))
        # The run directory tells the same: metrics.jsonl's reward is the mean of the step's
        # episodes, and every step's group varied (a signal to learn from).
        metrics = [json.loads(line) for line in (tmp_path / f"up-{seed}" / "metrics.jsonl").read_text().splitlines()]
        by_step = rewards_by_step(up)
        assert [m["step"] for m in metrics] == sorted(by_step) == list(range(1, config["steps"] + 1))
        for m in metrics:
            assert m["frac_reward_zero_std"] == 0
            assert m["episode/reward_mean"] == pytest.approx(sum(by_step[m["step"]]) / len(by_step[m["step"]]))
    # Over the seeds the reward's run ends above its negative's by more than 0.04 on average
    # (0.074-0.131 per seed above; any two of them average >= 0.081) and above it in every seed,
    # and the reward's run rises by more than 0.02 on average (+0.028..+0.088; any two >= +0.040).
    assert sum(gaps) / len(gaps) > 0.04 and all(gap > 0 for gap in gaps), (gaps, rises)
    assert sum(rises) / len(rises) > 0.02, (gaps, rises)
    # Sampled, so only the direction, over the seeds (measured +0.025, +0.076, +0.062, +0.068).
    assert sum(sampled_gaps) > 0, sampled_gaps


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
        after_each_call(trainer, "_generate_and_score_completions", lambda inputs, output: captured.append(
            (list(inputs), output["advantages"].detach().clone())))

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

        def logps(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
            result = logps_of(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
            if result[0].requires_grad:  # the loss pass, not the no-grad old/ref log-probs
                result[0].register_hook(lambda grad: grads.append(grad.detach().clone()))
            return result

        trainer._get_per_token_logps_and_entropies = logps
        after_each_call(trainer, "compute_loss",
                        lambda inputs, _: completions.append(inputs["completion_ids"].detach().clone()))

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


@pytest.mark.parametrize("credit", ["reward_to_go", "turn", "turn_then_to_go"])
def test_per_turn_credit_reaches_the_loss_token_by_token(untrained_policy, environments, tmp_path, credit):
    """``credit: reward_to_go``: turn 1's tokens carry the final reward against its group's mean,
    turn 2's the final minus turn 1's reward. ``credit: turn``: turn k's tokens carry turn k's own
    score against its group's turn-k mean. ``credit: turn_then_to_go``: turn 1 as ``turn``,
    turn 2 as ``reward_to_go``. The loss (micro-batched as a preset would) receives those
    per-token advantages."""
    config = sanity_config(untrained_policy, tmp_path / credit, turns=2, num_generations=4, prompts_per_step=2,
                           steps=1, credit=credit, micro_batch_size=2)
    assert config.scored_turns() == [1, 2]
    produced, received = [], []

    def capture(trainer):
        after_each_call(trainer, "_generate_and_score_completions",
                        lambda _, output: produced.append(output["advantages"].detach().clone()))
        after_each_call(trainer, "compute_loss",
                        lambda inputs, _: received.append(inputs["advantages"].detach().clone()))

    trainer, _ = run_training(config, environments, FeatureReward(+1), before_train=capture)
    [advantages] = produced
    episodes = trainer.last_episode_batch.episodes
    assert advantages.shape == (8, advantages.size(1)) and advantages.dim() == 2
    assert len(received) == 4 and all(a.shape == (2, advantages.size(1)) for a in received)
    assert sorted(map(tuple, torch.cat(received).tolist())) == sorted(map(tuple, advantages.tolist()))
    for group in (episodes[:4], episodes[4:]):
        firsts = [e.turn_scores[1].total for e in group]
        finals = [e.reward for e in group]
        gains = [final - first for first, final in zip(firsts, finals)]
        assert len(set(gains)) > 1, "the test reward must vary the turn gain within a group"
        for episode, first, final, gain in zip(group, firsts, finals, gains):
            expected_first = {"reward_to_go": final - sum(finals) / 4}.get(credit, first - sum(firsts) / 4)
            expected_revision = {"turn": final - sum(finals) / 4}.get(credit, gain)
            row = advantages[episodes.index(episode)]
            mask = episode.tokens.env_mask
            environment_seen = False
            for j, value in enumerate(mask):
                environment_seen = environment_seen or not value
                if not value:
                    assert row[j] == 0
                    continue
                expected = expected_revision if environment_seen else expected_first
                assert float(row[j]) == pytest.approx(expected, abs=1e-6)
            assert torch.all(row[len(mask):] == 0)


@pytest.mark.parametrize("credit", ["reward_to_go", "turn", "turn_then_to_go"])
def test_per_turn_credit_on_one_turn_is_grpos_own_advantage(untrained_policy, environments, tmp_path, credit,
                                                             monkeypatch):
    """The single-turn arm of ``bench learn`` (and any ``turns: 1`` run) keeps the preset's credit:
    on one turn every per-turn scheme must hand each reply the advantage TRL's GRPO computed for it
    (reward minus its group's mean over the group's spread), on every one of its tokens."""
    from trl import GRPOTrainer

    config = sanity_config(untrained_policy, tmp_path / credit, num_generations=4, prompts_per_step=2, steps=1,
                           credit=credit, micro_batch_size=2)
    grpo_own, ours = [], []
    original = GRPOTrainer._generate_and_score_completions

    def record_trl(self, inputs):
        output = original(self, inputs)
        grpo_own.append(output["advantages"].detach().clone())
        return output

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", record_trl)

    def capture(trainer):
        after_each_call(trainer, "_generate_and_score_completions",
                        lambda _, output: ours.append(output["advantages"].detach().clone()))

    trainer, _ = run_training(config, environments, FeatureReward(+1), before_train=capture)
    [expected], [advantages] = grpo_own, ours
    assert expected.shape == (8,) and advantages.dim() == 2 and expected.abs().sum() > 0
    for row, episode in enumerate(trainer.last_episode_batch.episodes):
        width = len(episode.tokens.env_mask)
        assert all(episode.tokens.env_mask), "one turn: every completion token is the policy's"
        assert advantages[row, :width] == pytest.approx(torch.full((width,), float(expected[row])), abs=1e-5)
        assert torch.all(advantages[row, width:] == 0)


def test_reward_to_go_leaves_out_what_has_no_score():
    """A dropped episode (reward None) and a turn whose previous painting has no score (an
    infrastructure failure) get no credit, and stay out of their group's mean."""
    from multiturn_trainer.episodes import EpisodeTokens
    from multiturn_trainer.grpo import turn_advantages, turn_of_each_token
    from multiturn_trainer.rollout import Episode

    assert turn_of_each_token([1, 1, 0, 0, 1, 1, 1, 0, 1]) == [1, 1, 0, 0, 2, 2, 2, 0, 3]

    def episode(first, final):
        mask = [1, 1, 0, 0, 1, 1]
        made = Episode(row={}, observations=[None, None], reward=final,
                       tokens=EpisodeTokens(prompt_ids=[], completion_ids=[0] * len(mask), env_mask=mask))
        made.turn_scores = {1: None if first is None else ScoreResult(total=first, components={}),
                            2: None if final is None else ScoreResult(total=final, components={})}
        return made

    group = [episode(0.0, 0.6), episode(0.6, 0.6), episode(0.6, 0.0), episode(None, 0.6), episode(0.6, None),
             episode(0.5, 0.6)]
    advantages = turn_advantages(group * 2, 6, 8, "none")[:6]
    assert advantages.shape == (6, 8)
    turn_1 = [0.12, 0.12, -0.48, 0.12, 0.0, 0.12]  # final minus the mean final of the five scored
    turn_2 = [0.6, 0.0, -0.6, 0.0, 0.0, 0.1]  # final minus turn 1: a repair, a keep, a break, ..., a gain
    for row, first, second in zip(advantages.tolist(), turn_1, turn_2):
        assert row == pytest.approx([first, first, 0, 0, second, second, 0, 0], abs=1e-6)
    # credit: turn, the same group: each turn's own score against the group's mean for that turn
    # (turn 1: 0.0, 0.6, 0.6, 0.5 of the kept episodes with a turn-1 score, mean 0.425; turn 2: 0.6,
    # 0.6, 0.0, 0.6, 0.6, mean 0.48). The failed turn 1 of the repaired episode is pushed down.
    own = turn_advantages(group * 2, 6, 8, "none", credit="turn")[:6]
    turn_1 = [-0.425, 0.175, 0.175, 0.0, 0.0, 0.075]
    turn_2 = [0.12, 0.12, -0.48, 0.12, 0.0, 0.12]
    for row, first, second in zip(own.tolist(), turn_1, turn_2):
        assert row == pytest.approx([first, first, 0, 0, second, second, 0, 0], abs=1e-6)
    # credit: turn_then_to_go: turn 1 as turn (its own score), turn 2 as reward_to_go (its gain).
    mixed = turn_advantages(group * 2, 6, 8, "none", credit="turn_then_to_go")[:6]
    turn_2 = [0.6, 0.0, -0.6, 0.0, 0.0, 0.1]
    for row, first, second in zip(mixed.tolist(), turn_1, turn_2):
        assert row == pytest.approx([first, first, 0, 0, second, second, 0, 0], abs=1e-6)
    # Scaled by the spread of every scored painting of the group's kept episodes, all turns.
    scored = [0.0, 0.6, 0.6, 0.6, 0.6, 0.0, 0.6, 0.5, 0.6]
    spread = torch.tensor(scored, dtype=torch.float64).std().item()
    for scale in ("group", "batch"):
        scaled = turn_advantages(group, 6, 8, scale)
        assert scaled == pytest.approx(advantages / (spread + 1e-4), rel=1e-4)


def test_reward_to_go_scaling_stays_in_the_rewards_units():
    """Revisions that all gained alike are divided by the spread of the paintings' rewards, not by
    the spread of the gains (0 here): the advantages stay the size of the gains over that spread."""
    from multiturn_trainer.episodes import EpisodeTokens
    from multiturn_trainer.grpo import turn_advantages
    from multiturn_trainer.rollout import Episode

    def episode(first, final):
        made = Episode(row={}, observations=[None, None], reward=final,
                       tokens=EpisodeTokens(prompt_ids=[], completion_ids=[0] * 4, env_mask=[1, 0, 1, 0]))
        made.turn_scores = {1: ScoreResult(total=first, components={}), 2: ScoreResult(total=final, components={})}
        return made

    group = [episode(0.60 + 0.01 * i, 0.65 + 0.01 * i) for i in range(6)]
    scaled = turn_advantages(group, 6, 4, "group")
    assert scaled.abs().max() < 10
    spread = torch.tensor([e.turn_scores[t].total for e in group for t in (1, 2)], dtype=torch.float64).std()
    assert scaled[:, 2].tolist() == pytest.approx([0.05 / (spread.item() + 1e-4)] * 6, rel=1e-4)
    # All paintings alike: every value is 0, scaled or not.
    same = [episode(0.6, 0.6) for _ in range(6)]
    assert torch.all(turn_advantages(same, 6, 4, "group") == 0)
