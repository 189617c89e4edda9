"""`watercolour report` and `bench learn`'s figures on run directories with known episodes.

The run directories are written here the way `train` writes them (episodes.jsonl, metrics.jsonl,
config.yaml, a contact sheet per step), with rewards chosen so the answers are known: one run
whose reward and gate pass rise, one flat run. Real training runs go through the same reader
(`bench learn` calls it on every arm)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
import yaml
from PIL import Image

from multiturn_trainer.bench_learn import arm_lines
from multiturn_trainer.report import curves, run_figures
from multiturn_trainer.evaluation_stats import format_tokens
from watercolour.cli import main


def write_run(root: Path, turns: int, rising: bool, steps: int = 6, per_step: int = 12, seed: int = 0) -> Path:
    rng = random.Random(seed)
    root.mkdir(parents=True)
    (root / "config.yaml").write_text(yaml.safe_dump({"turns": turns, "reward_preset": "gate-led"}))
    episodes, metrics = [], []
    for step in range(1, steps + 1):
        pass_rate = (0.2 + 0.6 * (step - 1) / (steps - 1)) if rising else 0.4
        for index in range(per_step):
            record_turns = []
            for turn in range(1, turns + 1):
                # Exactly round(pass_rate * per_step) of a step's episodes pass, so the rates are known.
                passed = (index + turn) % per_step < round(pass_rate * per_step)
                blank = not passed and index % 2 == 0
                record_turns.append({"turn": turn, "passed": passed, "paint_fraction": 0.1 if passed else 0.0,
                                     "violations": ["blank_canvas"] if blank else (["render_error"] if not passed else []),
                                     "reward": (0.6 + 0.4 * rng.random()) if passed else 0.0, "png": None})
            final = record_turns[-1]
            episodes.append({"step": step, "group": index // 6, "index": index % 6, "turns": record_turns,
                             "reward": final["reward"], "completion_tokens": 300 * turns,
                             "components": {"gate": float(final["passed"]), "length": None,
                                            "style": 0.5 if final["passed"] else None}})
        metrics.append({"step": step, "loss": 0.0, "time/generate": 20.0, "time/render": 25.0, "time/score": 1.0,
                        "time/train": 8.0})
        sheet = root / "renders" / f"step-{step:05d}" / "contact_sheet.png"
        sheet.parent.mkdir(parents=True)
        Image.new("RGB", (64, 32), (200, 80, 60) if step == 1 else (60, 80, 200)).save(sheet)
    (root / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
    (root / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    return root


def interval_of(line: str, key: str) -> tuple[float, float, float]:
    match = re.search(rf"{key}=([+-][0-9.]+)\(([+-][0-9.]+)\.\.([+-][0-9.]+)\)", line)
    assert match, (key, line)
    return tuple(float(x) for x in match.groups())


def test_learn_figures_find_a_rise_and_no_rise(tmp_path):
    rising = [json.loads(l) for l in (write_run(tmp_path / "up", 2, True) / "episodes.jsonl").read_text().splitlines()]
    flat = [json.loads(l) for l in (write_run(tmp_path / "flat", 2, False) / "episodes.jsonl").read_text().splitlines()]
    up, level = run_figures(rising), run_figures(flat)
    assert up["steps"] == 6 and up["episodes"] == 72 and up["tokens"] == 72 * 600
    assert up["reward"]["rise"]["low"] > 0 and up["gate"]["rise"]["low"] > 0
    assert level["gate"]["rise"]["low"] < 0 < level["gate"]["rise"]["high"]
    # The printed verdict line carries the same numbers in the fixed format.
    [*_, verdict] = arm_lines("multi", 3, up, None, None)
    assert verdict.startswith("learn: arm=multi seed=3 steps=6 reward_rise=")
    estimate, low, high = interval_of(verdict, "gate_rise")
    assert estimate == pytest.approx(up["gate"]["rise"]["estimate"], abs=5e-4) and low > 0
    assert "eval_final_minus_best_of_k=nan eval_turn_gain=nan eval_final_minus_best_at_equal_tokens=nan" in verdict
    # With the held-out evals: the trained adapter against its warm start, slot by slot.
    point = lambda e: {"estimate": e, "low": e - 0.1, "high": e + 0.1, "n": 12}  # noqa: E731
    held_out = lambda against: {"reward_final": point(0.6), "final_minus_first": point(0.01),  # noqa: E731
                                "final_minus_best_of_k": point(-0.02), "gate_pass_final": point(1.0),
                                "final_minus_best_at_equal_tokens": point(0.05), "tokens_by_turn": [400, 80],
                                "final_minus_warm_start": against}
    lines = arm_lines("multi", 3, up, held_out(point(0.3)), held_out(None))
    assert "trained - warm start (paired by slot) +0.300(+0.200..+0.400)" in lines[-2]
    assert "eval_final_minus_best_of_k=-0.020(-0.120..+0.080) eval_turn_gain=+0.010(-0.090..+0.110) " \
           "eval_final_minus_best_at_equal_tokens=+0.050(-0.050..+0.150)" in lines[-1]
    assert lines[-1].endswith(f"tokens_by_turn={format_tokens(up['tokens_by_turn'])}")
    rows = curves(rising)
    assert [r["tokens"] for r in rows] == [12 * 600 * s for s in range(1, 7)]


def test_report_draws_runs_and_evals_side_by_side(tmp_path, capsys):
    multi = write_run(tmp_path / "multi", 2, True)
    single = write_run(tmp_path / "single", 1, False, seed=1)
    point = lambda e: {"estimate": e, "low": e - 0.1, "high": e + 0.1, "n": 12}  # noqa: E731
    evaluation = tmp_path / "eval"
    evaluation.mkdir()
    (evaluation / "eval.json").write_text(json.dumps({
        "policy": "trained", "refine": {"reward_by_turn": [point(0.3), point(0.4)]},
        "independent": {"best_of_k": [point(0.3), point(0.35)]}, "final_minus_first": point(0.1),
        "final_minus_best_of_k": point(0.05), "final_minus_mean_of_k": point(0.08)}))
    out = tmp_path / "report"
    assert main(["report", str(multi), str(single), str(evaluation), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "multi (turns 2, gate-led)" in printed and "single (turns 1, gate-led)" in printed
    for name in ("reward.png", "turns.png", "turn_gain.png", "eval.png", "index.html", "report.json"):
        assert (out / name).is_file(), name
    for name in ("reward.png", "turns.png", "turn_gain.png", "eval.png"):
        assert Image.open(out / name).size[0] > 600
    numbers = json.loads((out / "report.json").read_text())
    [up, flat] = numbers["runs"]
    assert up["summary"]["gate"]["rise"]["low"] > 0 and flat["turns"] == 1
    # Wall time and tokens accumulate per step: 54 s and 12 episodes x 600 tokens a step.
    assert [r["wall_s"] for r in up["rows"]] == [54.0 * s for s in range(1, 7)]
    assert [r["tokens"] for r in up["rows"]][-1] == 6 * 12 * 600
    assert {"gate_turn_1", "gate_turn_2", "coverage_turn_2", "style", "gate"} <= set(up["rows"][0])
    page = (out / "index.html").read_text()
    # Self-contained: the plots and both runs' first and last contact sheets are embedded.
    assert page.count("data:image/png;base64,") == 4 + 2 * 2
    assert "step 1" in page and "step 6" in page
    with pytest.raises(SystemExit, match="neither a run directory"):
        main(["report", str(tmp_path), "--out", str(out)])


def test_report_tells_runs_of_the_same_name_apart(tmp_path, capsys):
    """Two demo runs are both called run/: their labels widen to the folder above."""
    seed_0 = write_run(tmp_path / "seed-0" / "run", 2, True)
    seed_1 = write_run(tmp_path / "seed-1" / "run", 2, False, seed=1)
    other = write_run(tmp_path / "other", 2, False, seed=2)
    config = yaml.safe_load((other / "config.yaml").read_text())
    (other / "config.yaml").write_text(yaml.safe_dump({**config, "credit": "reward_to_go"}))
    out = tmp_path / "report"
    assert main(["report", str(seed_0), str(seed_1), str(other), "--out", str(out)]) == 0
    labels = [run["label"] for run in json.loads((out / "report.json").read_text())["runs"]]
    assert labels == ["seed-0/run (turns 2, gate-led)", "seed-1/run (turns 2, gate-led)",
                      "other (turns 2, gate-led, credit reward_to_go)"]
    printed = capsys.readouterr().out
    assert all(label in printed for label in labels)


def test_bench_learn_arms_run_the_demos_train_and_held_out_eval(tmp_path, monkeypatch):
    """Each arm goes through `train` and `held_out_eval`, the demo's own path; the single-turn arm
    gets the multi-turn arm's generated tokens as its budget."""
    from types import SimpleNamespace

    import multiturn_trainer.evaluation as evaluation
    import multiturn_trainer.resources as resources
    import multiturn_trainer.train as training
    from multiturn_trainer.bench_learn import run_bench
    from multiturn_trainer.config import TrainConfig

    trained, evaluated = [], []

    def fake_train(config, token_budget=None):
        trained.append((config.turns, token_budget))
        write_run(Path(config.output_dir), config.turns, rising=True)
        return SimpleNamespace(adapter=Path(config.output_dir) / "adapter")

    def fake_eval(config, checkpoint, out, label, progress=True):
        evaluated.append((Path(checkpoint).name, label))
        point = {"estimate": 0.1, "low": 0.0, "high": 0.2, "n": 2}
        return {"subjects": ["a pear"], "episodes_per_subject": 2, "seed": config.seed,
                "final_minus_first": point, "final_minus_best_of_k": point,
                "refine": {"reward_by_turn": [point, point], "final_by_slot": [0.5, 0.6],
                           "final_minus_best_at_equal_tokens": point, "tokens_by_turn": [point, point],
                           "gate_pass_by_turn": [point, point]}}

    monkeypatch.setattr(training, "train", fake_train)
    monkeypatch.setattr(evaluation, "held_out_eval", fake_eval)
    monkeypatch.setattr(resources, "ensure_model", lambda config: None)
    config = TrainConfig(model=str(tmp_path / "warm"), turns=2, steps=6)
    report = run_bench(config, [0], ["multi", "single"], tmp_path / "bench")
    assert trained == [(2, None), (1, 72 * 600)]  # write_run: 72 episodes of 300 tokens per turn
    assert evaluated == [("warm", "warm start"), ("adapter", "multi seed 0"), ("adapter", "single seed 0")]
    assert [r["arm"] for r in report["results"]] == ["multi", "single"]
