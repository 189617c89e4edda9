"""`watercolour replay RUN_DIR --rescore PRESET`: the same paintings under another reward.

Every turn the run scored (first and last, or all of them for ``reward_turn: best``) is scored
again from its recorded PNG and code with another mix or scorer, e.g. a run trained on
``hps-only`` re-scored with ``judge-led``. The new components are written next to the old
ones in ``RUN_DIR/rescored/<preset>.jsonl`` (one line per episode; ``episodes.jsonl`` is never
rewritten), and the agreement is printed: Spearman rank correlation of the episode rewards,
per-step means, and the episodes whose rank moved most.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from env.files import write_atomically
from multiturn_trainer.config import TrainConfig
from multiturn_trainer.evaluation_stats import mean
from multiturn_trainer.store import RunStore
from rewards.mixer import PaintingToScore
from rewards.ranking import ranks, spearman

RESCORED = "rescored"


def build_rescorer(config: TrainConfig, preset: str, pool: str | None = None, hps_url: str | None = None,
                   judge_url: str | None = None, judge_model: str | None = None):
    from rewards.mixer import build_scorer
    from rewards.pool import ReferencePool

    """``preset``'s scorer with the run's pool and services (``config``: its TrainConfig); a
    given argument replaces the run's."""
    return build_scorer(preset, ReferencePool.load(pool or config.pool),
                        judge_url=judge_url or config.judge_url,
                        judge_model=judge_model or config.judge_model,
                        hps_url=hps_url or config.hps_url,
                        judge_probability=config.judge_probability)


def rescore(store: RunStore, run: TrainConfig, episodes: list[dict[str, Any]], scorer) -> list[dict[str, Any]]:
    """One record per episode with the new and the old reward of every scored turn.

    The turns scored and the episode's reward follow the run's own rule (``run``, its
    ``TrainConfig``: ``scored_turns`` and ``episode_reward``, as in training)."""
    from tqdm import tqdm

    wanted = set(run.scored_turns())

    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for episode in episodes:
        by_step[episode["step"]].append(episode)
    records = []
    # One step at a time: a judge endpoint sees at most one step's paintings in flight.
    for step in tqdm(sorted(by_step), desc=f"rescore {scorer.mix.name}", unit="step"):
        jobs = [(episode, turn) for episode in by_step[step] for turn in episode["turns"]
                if turn["turn"] in wanted and not turn.get("infrastructure_failed")]
        paintings = [PaintingToScore(
            png=(store.root / turn["png"]).read_bytes() if turn.get("png") else None,
            code=turn.get("code") or turn.get("reply"), passed=bool(turn["passed"]),
            subject=episode["subject"], group_seed=int(episode["seed"]),
        ) for episode, turn in jobs]
        results = scorer.score_many_sync(paintings) if paintings else []
        new_scores: dict[str, dict[int, Any]] = defaultdict(dict)
        for (episode, turn), result in zip(jobs, results):
            new_scores[episode["episode_id"]][turn["turn"]] = result
        for episode in by_step[step]:
            scores = new_scores.get(episode["episode_id"], {})
            reward, rewarded_turn = run.episode_reward({t: r.total for t, r in scores.items()})
            records.append({
                "episode_id": episode["episode_id"], "step": step, "group": episode["group"],
                "index": episode["index"], "subject": episode["subject"],
                "preset": scorer.mix.name, "reward": reward, "rewarded_turn": rewarded_turn,
                "old_preset": episode.get("preset"), "old_reward": episode["reward"],
                "turns": [{
                    "turn": turn["turn"],
                    "reward": scores[turn["turn"]].total if turn["turn"] in scores else None,
                    "components": scores[turn["turn"]].components if turn["turn"] in scores else None,
                    "old_reward": turn.get("reward"), "old_components": turn.get("components"),
                } for turn in episode["turns"]],
            })
    return records


def write_rescored(store: RunStore, preset_name: str, records: list[dict[str, Any]]) -> Path:
    folder = store.root / RESCORED
    folder.mkdir(exist_ok=True)
    path = folder / f"{Path(preset_name).stem}.jsonl"
    write_atomically(path, "".join(json.dumps(r) + "\n" for r in records))
    return path


def agreement(records: list[dict[str, Any]], top: int = 5) -> dict[str, Any]:
    """Rank correlation, per-step means and the episodes that moved most (by rank percentile)."""
    both = [r for r in records if r["reward"] is not None and r["old_reward"] is not None]
    old = [r["old_reward"] for r in both]
    new = [r["reward"] for r in both]
    moved = []
    if both:
        old_ranks, new_ranks = ranks(old), ranks(new)
        scale = max(1, len(both) - 1)
        for record, was, now in zip(both, old_ranks, new_ranks):
            moved.append({**record, "old_rank": was, "new_rank": now, "rank_shift": (now - was) / scale})
        moved.sort(key=lambda r: -abs(r["rank_shift"]))
    steps = []
    for step in sorted({r["step"] for r in records}):
        chosen = [r for r in records if r["step"] == step]
        steps.append({
            "step": step,
            "old": mean([r["old_reward"] for r in chosen if r["old_reward"] is not None]),
            "new": mean([r["reward"] for r in chosen if r["reward"] is not None]),
            "dropped": sum(1 for r in chosen if r["reward"] is None),
        })
    return {"episodes": len(records), "compared": len(both), "spearman": spearman(old, new),
            "steps": steps, "moved": moved[:top]}


def print_agreement(summary: dict[str, Any], old_name: str, new_name: str) -> None:
    def f(value):
        return "-" if value is None else f"{value:.3f}"

    rho = summary["spearman"]
    print(f"rescore: {summary['compared']}/{summary['episodes']} episodes scored by both; "
          f"spearman({old_name}, {new_name}) = {f(rho)}")
    print(f"step  {old_name:>14}  {new_name:>14}  unscored")
    for row in summary["steps"]:
        print(f"{row['step']:>4}  {f(row['old']):>14}  {f(row['new']):>14}  {row['dropped']:>8}")
    if summary["moved"]:
        print("moved most (rank among compared episodes, old -> new):")
        for r in summary["moved"]:
            print(f"  {r['episode_id']:>10}  {r['subject'][:32]:<32}  {f(r['old_reward'])} (#{r['old_rank']:g})"
                  f" -> {f(r['reward'])} (#{r['new_rank']:g})")
