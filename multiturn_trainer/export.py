"""`watercolour replay RUN_DIR --export DIR`: a run as a Hugging Face dataset, one row per turn.

Parquet, not imagefolder: a turn whose sketch failed the gate before rendering has no
painting, and imagefolder cannot hold a row without an image file. The columns are those of
the public rollouts datasets (``file_name, source_file, run, step, position_in_group, reward,
code, code_chars, n_shapes, n_fill_calls, brush_methods_used``) plus the multi-turn ones
(``turn, episode_id, final``) and what a researcher filters on (gate result, coverage,
feedback, reward components). ``datasets.load_dataset(DIR)`` loads it; so does pandas.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from multiturn_trainer.store import RunStore
from rewards.mixer import COMPONENTS

DATA_FILE = "data/train-00000-of-00001.parquet"


def features():
    from datasets import Features, Image, List, Value

    columns = {
        "image": Image(),
        "file_name": Value("string"),
        "source_file": Value("string"),
        "run": Value("string"),
        "step": Value("int64"),
        "group": Value("int64"),
        "position_in_group": Value("int64"),
        "episode_id": Value("string"),
        "turn": Value("int64"),
        "final": Value("bool"),
        "rewarded": Value("bool"),
        "subject": Value("string"),
        "seed": Value("int64"),
        "reward": Value("float64"),
        "episode_reward": Value("float64"),
        "preset": Value("string"),
        **{f"reward_{name}": Value("float64") for name in COMPONENTS},
        "passed": Value("bool"),
        "violations": List(Value("string")),
        "paint_fraction": Value("float64"),
        "render_ms": Value("int64"),
        "code": Value("string"),
        "code_chars": Value("int64"),
        "n_shapes": Value("int64"),
        "n_fill_calls": Value("int64"),
        "n_brush_calls": Value("int64"),
        "brush_methods_used": List(Value("string")),
        "reply": Value("string"),
        "feedback": Value("string"),
    }
    return Features(columns)


def turn_rows(store: RunStore, episodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for episode in episodes:
        last = len(episode["turns"])
        for turn in episode["turns"]:
            stats = turn.get("stats") or {}
            components = turn.get("components") or {}
            png_path = store.root / turn["png"] if turn.get("png") else None
            code = turn.get("code") or ""
            stem = f"{episode['run']}/step-{episode['step']:05d}/g{episode['group']:02d}-e{episode['index']:02d}-t{turn['turn']}"
            rows.append({
                "image": {"bytes": png_path.read_bytes(), "path": None} if png_path and png_path.is_file() else None,
                "file_name": f"{stem}.png" if png_path else None,
                "source_file": f"{stem}.js",
                "run": episode["run"],
                "step": episode["step"],
                "group": episode["group"],
                "position_in_group": episode["index"],
                "episode_id": episode["episode_id"],
                "turn": turn["turn"],
                "final": turn["turn"] == last,
                "rewarded": turn["turn"] == episode.get("rewarded_turn"),
                "subject": episode["subject"],
                "seed": int(episode["seed"]),
                "reward": turn.get("reward"),
                "episode_reward": episode["reward"],
                "preset": episode.get("preset"),
                **{f"reward_{name}": components.get(name) for name in COMPONENTS},
                "passed": bool(turn["passed"]),
                "violations": list(turn.get("violations") or []),
                "paint_fraction": turn.get("paint_fraction"),
                "render_ms": turn.get("render_ms"),
                "code": code,
                "code_chars": stats.get("code_chars", len(code)),
                "n_shapes": stats.get("n_shapes"),
                "n_fill_calls": stats.get("n_fill_calls"),
                "n_brush_calls": stats.get("n_brush_calls"),
                "brush_methods_used": list(stats.get("brush_methods_used") or []),
                "reply": turn.get("reply"),
                "feedback": turn.get("feedback"),
            })
    return rows


def export_dataset(store: RunStore, episodes: list[dict[str, Any]], out: str | Path) -> Path:
    """Write ``OUT/data/*.parquet`` and a dataset card; returns OUT."""
    from datasets import Dataset

    out = Path(out)
    rows = turn_rows(store, episodes)
    dataset = Dataset.from_list(rows, features=features())
    target = out / DATA_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    dataset.to_parquet(str(target))
    steps = sorted({e["step"] for e in episodes})
    painted = sum(1 for r in rows if r["image"] is not None)
    (out / "README.md").write_text(
        # No `configs: data_files` block: with one, datasets 5.2 keyed its cache on the relative
        # path and served a different export's rows from the cache (288 rows for a 40-row
        # export). The data/train-* layout is found without it.
        f"---\npretty_name: watercolour episodes {store.run}\ntags: [watercolour, p5.brush, grpo]\n---\n\n"
        f"# Watercolour episodes: run `{store.run}`\n\n"
        f"{len(episodes)} episodes over steps {steps[0]}–{steps[-1]}, {len(rows)} turns ({painted} with a painting), "
        "one row per episode turn. `final` marks an episode's last turn, `rewarded` the turn its reward came "
        "from; `reward` is that turn's mixed reward (null where the turn was not scored) and `reward_*` its "
        "components. Exported by `watercolour replay RUN_DIR --export DIR`.\n\n"
        "```python\nfrom datasets import load_dataset\nrows = load_dataset(\"DIR\", split=\"train\")\n```\n",
        encoding="utf-8",
    )
    return out
