"""The episode loop, once: lockstep painting turns with any policy (training, eval, replay, pool build).

``EpisodeRunner.run(policy, rows)`` resets the environments, then for turn k = 1..K generates
every episode's turn k in one batch, renders all of them in parallel, and opens turn k+1 of
each episode with its own painting and the environment's feedback; after the last turn it
scores the turns the reward needs. The policy is passed in (``agent.policies``):

* token policies continue each episode's exact token sequence (``EpisodeTokens``): the
  trainer's own generation, a local checkpoint. The loss later scores those very tokens.
* message policies answer chat conversations built with ``agent.messages`` (a served model
  behind an OpenAI-compatible endpoint). A reply that never came is an infrastructure
  failure: the episode's later turns are not asked for and its reward is None.

Nothing here renders or scores by itself: the environments and the scorer are passed in.
"""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from agent.messages import append_turn, revision_content
from multiturn_trainer.environments import EpisodeEnvironments, TurnObservation
from multiturn_trainer.episodes import EpisodeTokens, environment_turn, generation_fields, reply_ids
from rewards.mixer import COMPONENTS, PaintingToScore, ScoreResult


@dataclass
class EpisodeBatch:
    rows: list[dict[str, Any]]
    episodes: list[EpisodeTokens] | None  # token policies only
    replies: list[list[str]]
    observations: list[list[TurnObservation]]
    turn_scores: list[dict[int, ScoreResult | None]]
    rewards: list[float | None]
    rewarded_turn: list[int | None]
    timings: dict[str, float] = field(default_factory=dict)
    # The sampler's log-prob of every completion token, environment tokens NaN; None when any
    # turn's policy returned none (HF generate, recorded replies, message policies).
    sampling_logps: list[list[float]] | None = None
    completion_tokens: list[int] = field(default_factory=list)  # generated tokens per episode
    policy_errors: list[str | None] = field(default_factory=list)  # why a message policy gave no reply


class EpisodeRunner:
    """``turns``, ``scored_turns`` and ``episode_reward`` follow the TrainConfig (one rule for
    training, ``--continue-from`` and eval); ``turns`` alone (pool build) makes the last turn
    the episode's. ``scorer`` None renders without scoring (rewards None)."""

    def __init__(self, config, environments: EpisodeEnvironments, scorer=None, turns: int | None = None):
        self.config = config if config is not None else _LastTurn(turns or 1)
        self.environments = environments
        self.scorer = scorer

    def run(self, policy, rows: list[dict[str, Any]], recorded_replies: list[list[str]] | None = None,
            scored_turns: list[int] | None = None) -> EpisodeBatch:
        """``rows``: {"prompt": turn-1 messages, "subject", "seed"} per episode.
        ``recorded_replies``: replay these as the first turns instead of generating them
        (``replay --continue-from``); they are rendered again like generated ones.
        ``scored_turns``: score these turns instead of the config's (eval wants every turn)."""
        turns = self.config.turns
        if policy.works_on == "tokens":
            state = _TokenEpisodes(policy, rows)
        elif policy.works_on == "messages":
            state = _MessageEpisodes(policy, rows)
        else:
            raise TypeError(f"a policy works on 'tokens' or 'messages', not {policy.works_on!r}")
        subjects = [row["subject"] for row in rows]
        seeds = [int(row["seed"]) for row in rows]
        replies: list[list[str]] = [[] for _ in rows]
        observations: list[list[TurnObservation]] = [[] for _ in rows]
        timings: dict[str, float] = defaultdict(float)

        self.environments.reset(subjects, seeds, turns)
        for turn in range(1, turns + 1):
            started = time.perf_counter()
            if recorded_replies is not None and turn <= min(len(r) for r in recorded_replies):
                texts = state.recorded([r[turn - 1] for r in recorded_replies])
            else:
                texts = state.generate()
            for said, text in zip(replies, texts):
                said.append(text)
            timings["generate"] += time.perf_counter() - started

            started = time.perf_counter()
            turn_observations = [state.mark_failed(i, o) for i, o in enumerate(self.environments.step(texts, turn))]
            for seen, observation in zip(observations, turn_observations):
                seen.append(observation)
            timings["render"] += time.perf_counter() - started

            if turn < turns:
                started = time.perf_counter()
                state.open_turn(turn_observations, texts, turn + 1, turns)
                timings["generate"] += time.perf_counter() - started

        started = time.perf_counter()
        wanted = scored_turns or self.config.scored_turns()
        turn_scores = self._score(observations, replies, subjects, seeds, wanted)
        rewards, rewarded_turn = [], []
        for scores, error in zip(turn_scores, state.errors):
            reward, rewarded = self.config.episode_reward({t: None if r is None else r.total for t, r in scores.items()})
            if error is not None or self.scorer is None:
                reward = None  # a policy that never answered is no evidence about its painting
            rewards.append(reward)
            rewarded_turn.append(rewarded)
        timings["score"] += time.perf_counter() - started
        return EpisodeBatch(rows, state.episodes, replies, observations, turn_scores, rewards, rewarded_turn,
                            dict(timings), state.sampling_logps, state.tokens, state.errors)

    def _score(self, observations, replies, subjects, seeds, wanted) -> list[dict[int, ScoreResult | None]]:
        """Score the paintings of the ``wanted`` turns; infrastructure failures are never judged."""
        keys, paintings = [], []
        for i, seen in enumerate(observations):
            for turn in wanted:
                if turn > len(seen) or seen[turn - 1].infrastructure_failed:
                    continue
                observation = seen[turn - 1]
                keys.append((i, turn))
                paintings.append(PaintingToScore(
                    png=observation.png, code=observation.code or replies[i][turn - 1],
                    passed=observation.passed, subject=subjects[i], group_seed=seeds[i],
                ))
        results = self.scorer.score_many_sync(paintings) if paintings and self.scorer is not None else []
        turn_scores: list[dict[int, ScoreResult | None]] = [{t: None for t in wanted} for _ in observations]
        for (i, turn), result in zip(keys, results):
            turn_scores[i][turn] = result
        return turn_scores


@dataclass
class _LastTurn:
    """The reward rule without a TrainConfig: the last turn's painting is the episode's."""

    turns: int

    def scored_turns(self) -> list[int]:
        return [self.turns]

    def episode_reward(self, turn_rewards: dict[int, float | None]) -> tuple[float | None, int | None]:
        return turn_rewards.get(self.turns), self.turns


class _TokenEpisodes:
    """Episodes as growing token sequences (see multiturn_trainer.episodes)."""

    def __init__(self, policy, rows):
        self.policy = policy
        self.episodes = [EpisodeTokens(list(ids)) for ids in policy.prompt_ids([row["prompt"] for row in rows])]
        self.sampling_logps: list[list[float]] | None = [[] for _ in rows]
        self.tokens = [0] * len(rows)
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
            if generated:
                self.tokens[i] += len(ids)
            if self.sampling_logps is not None:
                self.sampling_logps[i].extend(float("nan") if x is None else float(x) for x in turn_logps[i])
        self._last_ids = [list(ids) for ids in completion_ids]

    def mark_failed(self, index: int, observation: TurnObservation) -> TurnObservation:
        return observation

    def open_turn(self, observations, texts, turn: int, turns: int) -> None:
        policy = self.policy
        for i, (episode, ids, observation) in enumerate(zip(self.episodes, self._last_ids, observations)):
            content = revision_content(observation.png, observation.feedback, turn, turns)
            ended = bool(ids) and ids[-1] in policy.eos_token_ids
            environment = environment_turn(policy.processor, content, ended, policy.chat_template_kwargs)
            episode.add_environment(environment)
            if self.sampling_logps is not None:
                self.sampling_logps[i].extend([float("nan")] * len(environment.ids))


class _MessageEpisodes:
    """Episodes as chat conversations (agent.messages), for policies behind a chat API."""

    episodes = None
    sampling_logps = None

    def __init__(self, policy, rows):
        self.policy = policy
        self.conversations = [list(row["prompt"]) for row in rows]
        self.tokens = [0] * len(rows)
        self.errors: list[str | None] = [None] * len(rows)

    def recorded(self, texts: list[str]) -> list[str]:
        return texts

    def generate(self) -> list[str]:
        asking = [i for i, error in enumerate(self.errors) if error is None]
        texts = [""] * len(self.conversations)
        answers = self.policy.reply([self.conversations[i] for i in asking]) if asking else []
        for i, answer in zip(asking, answers):
            if answer.text is None:
                self.errors[i] = answer.error or "the policy gave no reply"
            else:
                texts[i] = answer.text
                self.tokens[i] += answer.completion_tokens
        return texts

    def mark_failed(self, index: int, observation: TurnObservation) -> TurnObservation:
        """The render of an empty stand-in reply is no painting of the policy's: mark it infrastructure."""
        if self.errors[index] is None:
            return observation
        return dataclasses.replace(observation, infrastructure_failed=True, passed=False, png=None,
                                   violations=["infrastructure_error"], errors=[f"policy: {self.errors[index]}"])

    def open_turn(self, observations, texts, turn: int, turns: int) -> None:
        self.conversations = [append_turn(conversation, text, observation.png, observation.feedback, turn, turns)
                              for conversation, text, observation in zip(self.conversations, texts, observations)]


def episode_records(batch: EpisodeBatch, places: list[tuple[int, int, int]], store, run_name: str,
                    mix) -> list[dict[str, Any]]:
    """The episodes.jsonl lines of a batch; ``places``: (step, group, index) of each episode.
    Saves the paintings into the run directory on the way."""
    records = []
    for i, (row, (step, group, index)) in enumerate(zip(batch.rows, places)):
        turns = []
        for position, observation in enumerate(batch.observations[i]):
            turn = position + 1
            score = batch.turn_scores[i].get(turn)
            turns.append({
                "turn": turn,
                "code": observation.code,
                "png": store.save_render(step, group, index, turn, observation.png),
                "passed": observation.passed,
                "violations": observation.violations,
                "errors": observation.errors,
                "paint_fraction": observation.paint_fraction,
                "render_ms": observation.render_ms,
                "reply": batch.replies[i][position],
                "feedback": observation.feedback,
                "infrastructure_failed": observation.infrastructure_failed,
                "stats": observation.stats,
                "reward": None if score is None else score.total,
                "components": None if score is None else score.components,
            })
        rewarded = batch.rewarded_turn[i]
        final = batch.turn_scores[i].get(rewarded) if rewarded else None
        records.append({
            "run": run_name,
            "episode_id": f"{step}-{group}-{index}",
            "step": step,
            "group": group,
            "index": index,
            "subject": row["subject"],
            "seed": int(row["seed"]),
            "turns": turns,
            "reward": batch.rewards[i],
            "rewarded_turn": rewarded,
            "components": dict(final.components) if final else {name: None for name in COMPONENTS},
            "references": list(final.references) if final else [],
            "weights": dict(mix.weights) if mix is not None else {},
            "preset": mix.name if mix is not None else None,
            "completion_tokens": batch.completion_tokens[i] if batch.completion_tokens else None,
        })
    return records
