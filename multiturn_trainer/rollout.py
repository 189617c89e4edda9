"""The episode loop, once: lockstep painting turns with any policy (training, eval, replay, pool build).

``EpisodeRunner.run(policy, rows)`` resets the environments, then for turn = 1..turns generates
every episode's turn in one batch, renders all of them in parallel, and opens the next turn of
each episode with its own painting and the environment's feedback (the feedback alone for a
text-only policy, and in the blind ablation, ``show_painting: false``); after the last turn it
scores the turns the reward needs. The policy is passed in (``agent.policies``):

* token policies continue each episode's exact token sequence (``EpisodeTokens``): the
  trainer's own generation, a local checkpoint. The loss later scores those very tokens.
* message policies answer chat conversations built with ``agent.messages`` (a served model
  behind an OpenAI-compatible endpoint). A reply that never came is an infrastructure
  failure: the episode's later turns are not asked for and its reward is None.

Nothing here renders or scores by itself: the environments and the scorer are passed in.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable

from agent.messages import append_turn, observation_content
from env.turn import TurnObservation, infrastructure_outcome, turn_observation
from multiturn_trainer.config import TrainConfig
from multiturn_trainer.env_backends import EpisodeEnvironments
from multiturn_trainer.episodes import EpisodeTokens, environment_turn, generation_fields, reply_ids
from multiturn_trainer.store import EpisodeRecord, TurnRecord
from rewards.mixer import COMPONENTS, PaintingToScore, ScoreResult


@dataclass
class Episode:
    """One trajectory, as verl's ``AgentLoopOutput``: the row it started from, what the policy
    wrote each turn, what the environment answered, and what the scored turns earned."""

    row: dict[str, Any]  # {"prompt": turn-1 messages, "subject", "seed"}
    replies: list[str] = field(default_factory=list)
    observations: list[TurnObservation] = field(default_factory=list)
    tokens: EpisodeTokens | None = None  # token policies only: the exact sequence the loss scores
    # The sampler's log-prob of every completion token, environment tokens NaN; None when any
    # turn's policy returned none (HF generate, recorded replies, message policies).
    sampling_logps: list[float] | None = None
    completion_tokens: int = 0  # generated, not replayed
    turn_tokens: list[int] = field(default_factory=list)  # generated tokens of each turn (0: replayed)
    policy_error: str | None = None  # why a message policy gave no reply
    turn_scores: dict[int, ScoreResult | None] = field(default_factory=dict)
    reward: float | None = None
    rewarded_turn: int | None = None


@dataclass
class EpisodeBatch:
    episodes: list[Episode]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def rewards(self) -> list[float | None]:
        return [episode.reward for episode in self.episodes]


class EpisodeRunner:
    """``turns``, ``scored_turns`` and ``episode_reward`` follow the TrainConfig (one rule for
    training, ``--continue-from`` and eval); ``turns`` alone (pool build) makes the last turn
    the episode's. ``scorer`` None renders without scoring (rewards None)."""

    def __init__(self, config, environments: EpisodeEnvironments, scorer=None, turns: int | None = None):
        # Without a config the defaults' rule holds: the last turn's painting is the episode's.
        self.config = config if config is not None else TrainConfig(turns=turns or 1, revision_format="full")
        self.environments = environments
        self.scorer = scorer

    def run(self, policy, rows: list[dict[str, Any]], recorded_replies: list[list[str]] | None = None,
            scored_turns: list[int] | None = None) -> EpisodeBatch:
        """``rows``: {"prompt": turn-1 messages, "subject", "seed"} per episode.
        ``recorded_replies``: replay these as the first turns instead of generating them
        (``replay --continue-from``); they are rendered again like generated ones.
        ``scored_turns``: score these turns instead of the config's (eval wants every turn)."""
        turns = self.config.turns
        revision_format = self.config.revision_format
        # The one place that decides whether a revision turn shows the painting: the policy must
        # see images (a text-only model never does) and the config must not be the blind ablation
        # (show_painting false). Either way the message says when there is no image.
        shows_painting = getattr(policy, "sees_images", True) and self.config.show_painting
        if policy.works_on == "tokens":
            state = _TokenEpisodes(policy, rows, revision_format, shows_painting)
        elif policy.works_on == "messages":
            state = _MessageEpisodes(policy, rows, revision_format, shows_painting)
        else:
            raise TypeError(f"a policy works on 'tokens' or 'messages', not {policy.works_on!r}")
        subjects = [row["subject"] for row in rows]
        seeds = [int(row["seed"]) for row in rows]
        episodes = [Episode(row) for row in rows]
        timings: dict[str, float] = defaultdict(float)

        self.environments.reset(subjects, seeds, turns, revision_format)
        for turn in range(1, turns + 1):
            started = time.perf_counter()
            if recorded_replies is not None and turn <= min(len(r) for r in recorded_replies):
                texts = state.recorded([r[turn - 1] for r in recorded_replies])
            else:
                texts = state.generate()
            for episode, text in zip(episodes, texts):
                episode.replies.append(text)
            timings["generate"] += time.perf_counter() - started

            started = time.perf_counter()
            turn_observations = [state.mark_failed(i, o) for i, o in enumerate(self.environments.step(texts, turn))]
            for episode, observation in zip(episodes, turn_observations):
                episode.observations.append(observation)
            timings["render"] += time.perf_counter() - started

            if turn < turns:
                started = time.perf_counter()
                state.open_turn(turn_observations, texts, turn + 1, turns)
                timings["generate"] += time.perf_counter() - started

        started = time.perf_counter()
        self._score(episodes, scored_turns or self.config.scored_turns())
        for i, episode in enumerate(episodes):
            episode.tokens = state.episodes[i] if state.episodes is not None else None
            episode.sampling_logps = state.sampling_logps[i] if state.sampling_logps is not None else None
            episode.turn_tokens = list(state.tokens[i])
            episode.completion_tokens = sum(episode.turn_tokens)
            episode.policy_error = state.errors[i]
            reward, episode.rewarded_turn = self.config.episode_reward(
                {t: None if r is None else r.total for t, r in episode.turn_scores.items()})
            # A policy that never answered is no evidence about its painting.
            episode.reward = None if episode.policy_error is not None or self.scorer is None else reward
        timings["score"] += time.perf_counter() - started
        return EpisodeBatch(episodes, dict(timings))

    def _score(self, episodes: list[Episode], wanted: list[int]) -> None:
        """Score the paintings of the ``wanted`` turns; infrastructure failures are never judged."""
        keys, paintings = [], []
        for episode in episodes:
            episode.turn_scores = {turn: None for turn in wanted}
            seen = episode.observations
            for turn in wanted:
                if turn > len(seen) or seen[turn - 1].infrastructure_failed:
                    continue
                observation = seen[turn - 1]
                keys.append((episode, turn))
                paintings.append(PaintingToScore(
                    png=observation.png, code=observation.code or episode.replies[turn - 1],
                    passed=observation.passed, subject=episode.row["subject"], group_seed=int(episode.row["seed"]),
                ))
        results = self.scorer.score_many_sync(paintings) if paintings and self.scorer is not None else []
        for (episode, turn), result in zip(keys, results):
            episode.turn_scores[turn] = result


class _TokenEpisodes:
    """Episodes as growing token sequences (see multiturn_trainer.episodes)."""

    def __init__(self, policy, rows, revision_format: str = "full", shows_painting: bool = True):
        self.policy = policy
        self.revision_format = revision_format
        self.shows_painting = shows_painting
        self.episodes = [EpisodeTokens(list(ids)) for ids in policy.prompt_ids([row["prompt"] for row in rows])]
        self.sampling_logps: list[list[float]] | None = [[] for _ in rows]
        self.tokens: list[list[int]] = [[] for _ in rows]  # generated tokens per turn
        self.errors: list[str | None] = [None] * len(rows)
        self._last_ids: list[list[int]] = []

    def recorded(self, texts: list[str]) -> list[str]:
        self._add([reply_ids(self.policy.processor, text) for text in texts], None, generated=False)
        return texts

    def generate(self) -> list[str]:
        fields = generation_fields(self.episodes, self.policy.image_pad_token_id)
        ids, logps = self.policy.generate([e.context() for e in self.episodes],
                                          [e.images or None for e in self.episodes], fields)
        self._add(ids, logps, generated=True)
        return self.policy.processor.batch_decode(ids, skip_special_tokens=True)

    def _add(self, completion_ids, turn_logps, generated: bool) -> None:
        if turn_logps is None:
            self.sampling_logps = None
        for i, (episode, ids) in enumerate(zip(self.episodes, completion_ids)):
            episode.add_policy(list(ids))
            self.tokens[i].append(len(ids) if generated else 0)
            if self.sampling_logps is not None:
                self.sampling_logps[i].extend(float("nan") if x is None else float(x) for x in turn_logps[i])
        self._last_ids = [list(ids) for ids in completion_ids]

    def mark_failed(self, index: int, observation: TurnObservation) -> TurnObservation:
        return observation

    def open_turn(self, observations, texts, turn: int, turns: int) -> None:
        policy = self.policy
        for i, (episode, ids, observation) in enumerate(zip(self.episodes, self._last_ids, observations)):
            content = observation_content(observation, turn, turns, self.revision_format, self.shows_painting)
            ended = bool(ids) and ids[-1] in policy.eos_token_ids
            environment = environment_turn(policy.processor, content, ended, policy.chat_template_kwargs)
            episode.add_environment(environment)
            if self.sampling_logps is not None:
                self.sampling_logps[i].extend([float("nan")] * len(environment.ids))


class _MessageEpisodes:
    """Episodes as chat conversations (agent.messages), for policies behind a chat API."""

    episodes = None
    sampling_logps = None

    def __init__(self, policy, rows, revision_format: str = "full", shows_painting: bool = True):
        self.policy = policy
        self.revision_format = revision_format
        self.shows_painting = shows_painting
        self.conversations = [list(row["prompt"]) for row in rows]
        self.tokens: list[list[int]] = [[] for _ in rows]  # generated tokens per turn
        self.errors: list[str | None] = [None] * len(rows)

    def recorded(self, texts: list[str]) -> list[str]:
        for counts in self.tokens:
            counts.append(0)
        return texts

    def generate(self) -> list[str]:
        asking = [i for i, error in enumerate(self.errors) if error is None]
        texts = [""] * len(self.conversations)
        answers = self.policy.reply([self.conversations[i] for i in asking]) if asking else []
        for counts in self.tokens:
            counts.append(0)
        for i, answer in zip(asking, answers):
            if answer.text is None:
                self.errors[i] = answer.error or "the policy gave no reply"
            else:
                texts[i] = answer.text
                self.tokens[i][-1] = answer.completion_tokens
        return texts

    def mark_failed(self, index: int, observation: TurnObservation) -> TurnObservation:
        """The render of an empty stand-in reply is no painting of the policy's: an infrastructure turn."""
        if self.errors[index] is None:
            return observation
        failure = infrastructure_outcome(f"policy: {self.errors[index]}")
        return turn_observation(failure, observation.turn, observation.turns)

    def open_turn(self, observations, texts, turn: int, turns: int) -> None:
        self.conversations = [
            append_turn(conversation, text, observation.png, observation.feedback, turn, turns, self.revision_format,
                        observation.code if observation.show_code else None, self.shows_painting)
            for conversation, text, observation in zip(self.conversations, texts, observations)]


def episode_records(batch: EpisodeBatch, places: list[tuple[int, int, int]], store, mix) -> list[EpisodeRecord]:
    """The episodes.jsonl lines of a batch; ``places``: (step, group, index) of each episode;
    ``mix``: the reward mix that scored it (None: unscored). Saves the paintings into the run
    directory (``store``, a RunStore) on the way."""
    records = []
    for episode, (step, group, index) in zip(batch.episodes, places):
        turns: list[TurnRecord] = []
        for position, observation in enumerate(episode.observations):
            turn = position + 1
            score = episode.turn_scores.get(turn)
            turns.append(TurnRecord(
                turn=turn,
                code=observation.code,
                png=store.save_render(step, group, index, turn, observation.png),
                passed=observation.passed,
                violations=observation.violations,
                errors=observation.errors,
                paint_fraction=observation.paint_fraction,
                render_ms=observation.render_ms,
                reply=episode.replies[position],
                completion_tokens=episode.turn_tokens[position] if position < len(episode.turn_tokens) else 0,
                feedback=observation.feedback,
                infrastructure_failed=observation.infrastructure_failed,
                stats=observation.stats,
                reward=None if score is None else score.total,
                components=None if score is None else score.components,
            ))
        rewarded = episode.rewarded_turn
        final = episode.turn_scores.get(rewarded) if rewarded else None
        records.append(EpisodeRecord(
            run=store.run,
            episode_id=f"{step}-{group}-{index}",
            step=step,
            group=group,
            index=index,
            subject=episode.row["subject"],
            seed=int(episode.row["seed"]),
            turns=turns,
            reward=episode.reward,
            rewarded_turn=rewarded,
            components=dict(final.components) if final else {name: None for name in COMPONENTS},
            references=list(final.references) if final else [],
            weights=dict(mix.weights) if mix is not None else {},
            preset=mix.name if mix is not None else None,
            completion_tokens=episode.completion_tokens,
        ))
    return records


def run_into_store(runner: EpisodeRunner, policy, rows: list[dict[str, Any]], places: list[tuple[int, int, int]],
                   store, extra: Callable[[int, Episode], dict[str, Any]] | None = None,
                   **run_options) -> tuple[EpisodeBatch, list[EpisodeRecord]]:
    """Run one batch and append its records to the run directory (``store``, whose run name they
    carry): training, eval, ``--continue-from`` and pool build all go through here. The records
    name the runner's reward mix. ``extra(i, episode)``: fields added to episode i's record
    (eval's arm, slot and policy error; a continuation's origin); ``run_options`` go to ``runner.run``."""
    batch = runner.run(policy, rows, **run_options)
    records = episode_records(batch, places, store, runner.scorer.mix if runner.scorer is not None else None)
    if extra is not None:
        for i, (record, episode) in enumerate(zip(records, batch.episodes)):
            record.update(extra(i, episode))
    store.append_episodes(records)
    return batch, records
