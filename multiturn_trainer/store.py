"""The run directory (ARCHITECTURE.md): config, episodes, renders, metrics, checkpoints.

Episodes are appended one step at a time, flushed and fsynced, so a killed run loses at
most the step in flight. On ``--resume`` the lines of steps after the checkpoint are cut
away before training continues, so every step's episodes appear exactly once.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from env.contact_sheet import SheetItem, contact_sheet
from env.files import write_atomically
from multiturn_trainer.evaluation_stats import mean

EPISODES = "episodes.jsonl"
METRICS = "metrics.jsonl"
CONFIG = "config.yaml"
RENDERS = "renders"
CHECKPOINTS = "checkpoints"
GALLERY = "gallery.png"
CHECKPOINT_PATTERN = re.compile(r"^step-(\d+)$")


class TurnRecord(TypedDict):
    """One turn of an episode in episodes.jsonl (ARCHITECTURE.md, the run directory)."""

    turn: int
    code: str | None  # the episode's sketch after this turn: the reply's full sketch, or the sketch its edits made
    png: str | None  # the painting, relative to the run directory
    passed: bool
    violations: list[str]
    errors: list[str]
    paint_fraction: float
    render_ms: int
    reply: str  # the policy's whole reply
    completion_tokens: NotRequired[int]  # tokens the policy generated this turn (0: replayed); absent in older runs
    feedback: str  # what the policy was told before its next turn
    infrastructure_failed: bool
    stats: dict[str, Any]
    reward: float | None  # None when the turn was not scored
    components: dict[str, float | None] | None


class EpisodeRecord(TypedDict):
    """One line of episodes.jsonl: a whole episode, its turns and its reward."""

    run: str
    episode_id: str  # "step-group-index"
    step: int
    group: int
    index: int
    subject: str
    seed: int
    turns: list[TurnRecord]
    reward: float | None  # None: dropped (an infrastructure failure), never a made-up score
    rewarded_turn: int | None
    components: dict[str, float | None]
    references: list[str]
    weights: dict[str, float]
    preset: str | None
    completion_tokens: int
    # `watercolour eval`'s episodes: which arm, slot and sample, and why a policy gave no reply.
    arm: NotRequired[str]
    slot: NotRequired[int]
    sample: NotRequired[int]
    policy_error: NotRequired[str | None]
    # `replay --continue-from`'s episodes: the recorded episode they continue.
    continued_from: NotRequired[dict[str, Any]]


class RunStore:
    def __init__(self, root: str | Path, run: str):
        self.root = Path(root)
        self.run = run
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / RENDERS).mkdir(exist_ok=True)

    # --- paths ---------------------------------------------------------------------------
    @property
    def episodes_path(self) -> Path:
        return self.root / EPISODES

    @property
    def metrics_path(self) -> Path:
        return self.root / METRICS

    @property
    def checkpoints_dir(self) -> Path:
        return self.root / CHECKPOINTS

    def step_dir(self, step: int) -> Path:
        return self.root / RENDERS / f"step-{step:05d}"

    # --- writing -------------------------------------------------------------------------
    def write_config(self, text: str) -> None:
        write_atomically(self.root / CONFIG, text)

    def save_render(self, step: int, group: int, index: int, turn: int, png: bytes | None) -> str | None:
        """Store one turn's painting; returns its path relative to the run directory."""
        if png is None:
            return None
        folder = self.step_dir(step)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"g{group:02d}-e{index:02d}-t{turn}.png"
        path.write_bytes(png)
        return str(path.relative_to(self.root))

    def append_episodes(self, records: list[dict[str, Any]]) -> None:
        _append_lines(self.episodes_path, records)

    def append_metrics(self, record: dict[str, Any]) -> None:
        _append_lines(self.metrics_path, [record])

    def write_step_sheet(self, step: int, records: list[dict[str, Any]], part: int = 0) -> Path:
        """One row per episode, one column per turn, captioned with the reward."""
        items = []
        turns = max((len(r["turns"]) for r in records), default=1)
        for record in records:
            for position in range(turns):
                turn = record["turns"][position] if position < len(record["turns"]) else None
                png = (self.root / turn["png"]).read_bytes() if turn and turn.get("png") else None
                caption = f"g{record['group']} e{record['index']} t{position + 1}"
                last = position == len(record["turns"]) - 1
                sub = f"reward {_fmt(record['reward'])}" if last else f"turn reward {_fmt(turn.get('reward') if turn else None)}"
                items.append(SheetItem(caption=caption, png=png, subcaption=sub))
        path = self.step_dir(step) / ("contact_sheet.png" if part == 0 else f"contact_sheet-{part}.png")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(contact_sheet(items, columns=turns, title=f"{self.run} step {step}"))
        return path

    def write_gallery(self, episodes: list[dict[str, Any]]) -> Path:
        """Final paintings of the first, middle and last steps: does the policy improve?"""
        steps = sorted({e["step"] for e in episodes})
        chosen = sorted({steps[0], steps[len(steps) // 2], steps[-1]}) if steps else []
        items = []
        for step in chosen:
            for record in (e for e in episodes if e["step"] == step):
                last = record["turns"][-1] if record["turns"] else {}
                png = (self.root / last["png"]).read_bytes() if last.get("png") else None
                items.append(SheetItem(caption=f"step {step} g{record['group']} e{record['index']}", png=png,
                                       subcaption=f"reward {_fmt(record['reward'])}"))
        per_step = max(1, len(items) // max(1, len(chosen)))
        path = self.root / GALLERY
        path.write_bytes(contact_sheet(items, columns=min(per_step, 8), title=f"{self.run}: first, middle and last step"))
        return path

    # --- reading and resuming ------------------------------------------------------------
    def read_episodes(self) -> list[dict[str, Any]]:
        return _read_lines(self.episodes_path)

    def read_metrics(self) -> list[dict[str, Any]]:
        return _read_lines(self.metrics_path)

    def latest_checkpoint(self) -> Path | None:
        if not self.checkpoints_dir.is_dir():
            return None
        found = [(int(m.group(1)), p) for p in self.checkpoints_dir.iterdir()
                 if (m := CHECKPOINT_PATTERN.match(p.name)) and (p / "trainer_state.json").is_file()]
        return max(found)[1] if found else None

    def truncate_after(self, step: int) -> int:
        """Drop episode and metric lines of steps after ``step``; returns how many episodes went."""
        dropped = 0
        for path in (self.episodes_path, self.metrics_path):
            lines = _read_lines(path)
            kept = [line for line in lines if line.get("step", 0) <= step]
            if path == self.episodes_path:
                dropped = len(lines) - len(kept)
            write_atomically(path, "".join(json.dumps(line) + "\n" for line in kept))
        return dropped


def turn_gains(records: list[dict[str, Any]]) -> list[float]:
    """Final-turn minus turn-1 reward of every episode where both were scored."""
    return [r["turns"][-1]["reward"] - r["turns"][0]["reward"] for r in records
            if r["turns"] and r["turns"][0].get("reward") is not None and r["turns"][-1].get("reward") is not None]


def turn_statistics(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per turn index: episodes, mean reward (where scored), gate pass rate, coverage, shapes, fills."""
    by_turn: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        for turn in record["turns"]:
            by_turn[turn["turn"]].append(turn)
    rows = []
    for index in sorted(by_turn):
        turns = by_turn[index]
        stats = [t.get("stats") or {} for t in turns]
        rows.append({
            "turn": index,
            "episodes": len(turns),
            "reward": mean([t["reward"] for t in turns if t.get("reward") is not None]),
            "gate_pass_rate": mean([float(t["passed"]) for t in turns]),
            "coverage": mean([t["paint_fraction"] for t in turns]),
            "shapes": mean([s["n_shapes"] for s in stats if "n_shapes" in s]),
            "fill_calls": mean([s["n_fill_calls"] for s in stats if "n_fill_calls" in s]),
            # Generated tokens (replayed turns and runs recorded before tokens were kept left out).
            "tokens": mean([t["completion_tokens"] for t in turns if t.get("completion_tokens")]),
        })
    return rows


def tokens_by_turn(records: list[dict[str, Any]]) -> list[float | None]:
    """Mean generated tokens of turn 1, 2, ... over ``records``: what a revision costs against a first draft."""
    return [row["tokens"] for row in turn_statistics(records)]


def checkpoint_step(path: str | Path) -> int:
    match = CHECKPOINT_PATTERN.match(Path(path).name)
    if not match:
        raise ValueError(f"{path} is not a checkpoints/step-N folder")
    return int(match.group(1))


def _fmt(value: float | None) -> str:
    return "none" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def _append_lines(path: Path, records: list[dict[str, Any]]) -> None:
    if not records:
        return
    with path.open("a", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            # A line cut short by a kill mid-write: everything before it is intact.
            break
    return records
