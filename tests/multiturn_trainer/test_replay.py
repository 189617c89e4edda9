"""`watercolour replay` on a run directory recorded by the tiny trainer: rescore, export, continue."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from env.errors import UsageError
from helpers import ROOT, tiny_config
from fake_openai_server import FakeOpenAIServer, prefer_image
from multiturn_trainer.continuation import continue_run
from multiturn_trainer.export import export_dataset
from multiturn_trainer.replay import load_run
from multiturn_trainer.rescore import agreement, build_rescorer, rescore, write_rescored
from rewards.ranking import ranks, spearman
from multiturn_trainer.train import train


@pytest.fixture(scope="module")
def recorded_run(dense_policy, environments, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("recorded") / "run"
    summary = train(tiny_config(dense_policy, out, steps=2, save_steps=1), environments=environments)
    assert summary.episodes == 4
    return out


def painted(episodes) -> list[tuple[dict, dict]]:
    return [(e, t) for e in episodes for t in e["turns"] if t["png"]]


def test_a_run_recorded_before_newer_keys_loads_with_trainconfigs_defaults(tmp_path):
    from multiturn_trainer.config import TrainConfig

    run = tmp_path / "old-run"
    run.mkdir()
    (run / "config.yaml").write_text("turns: 3\nreward_preset: gate-led\neval_steps: 0\n")  # an old run's keys
    (run / "episodes.jsonl").write_text(json.dumps({"episode_id": "s1-g0-e0", "step": 1, "turns": []}) + "\n")
    store, config, episodes = load_run(run)
    assert (config.turns, config.reward_preset) == (3, "gate-led") and len(episodes) == 1
    defaults = TrainConfig()
    assert (config.render_deadline_s, config.pool, config.credit) == (
        defaults.render_deadline_s, defaults.pool, defaults.credit)
    assert store.run == "old-run"


def test_the_episode_sheet_shows_the_largest_gain_and_bounds_what_the_model_wrote(tmp_path):
    import io

    from PIL import Image

    run = tmp_path / "run"
    (run / "renders").mkdir(parents=True)
    (run / "config.yaml").write_text("turns: 2\n")
    for name, colour in (("a.png", (200, 40, 40)), ("b.png", (40, 40, 200))):
        buffer = io.BytesIO()
        Image.new("RGB", (64, 64), colour).save(buffer, format="PNG")
        (run / "renders" / name).write_bytes(buffer.getvalue())

    def episode(episode_id, first, last, code):
        turns = [{"turn": k + 1, "code": code, "png": f"renders/{png}" if png else None, "passed": True,
                  "violations": [], "errors": [], "paint_fraction": 0.2, "render_ms": 10, "stats": {},
                  "feedback": "Turn 1 of 2: " + "paint more. " * 10_000, "reward": reward}
                 for k, (png, reward) in enumerate((("a.png", first), (None, last)))]
        return {"episode_id": episode_id, "step": 1, "group": 0, "index": 0, "subject": "a jellyfish",
                "reward": last, "turns": turns}

    huge = "brush.fill('#ff0000', 80);\n" * 400_000  # ~10 MB of model-written code
    lines = [episode("1-0-0", 0.5, 0.4, "x"), episode("1-0-1", 0.1, 0.6, huge), episode("1-0-2", None, 0.9, "y")]
    (run / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    completed = subprocess.run([sys.executable, "-m", "watercolour.cli", "replay", str(run), "--sheet",
                                str(tmp_path / "sheet.png")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "episode 1-0-1" in completed.stdout and "largest gain" in completed.stdout
    sheet = Image.open(tmp_path / "sheet.png")
    assert sheet.width > 2 * 320 and sheet.height < 1000  # two turns side by side; the text is cut, not the sheet grown
    asked = subprocess.run([sys.executable, "-m", "watercolour.cli", "replay", str(run), "--sheet",
                            str(tmp_path / "other.png"), "--episode", "1-0-2"], cwd=ROOT, capture_output=True,
                           text=True, timeout=120)
    assert asked.returncode == 0 and "episode 1-0-2" in asked.stdout, asked.stderr[-2000:]
    missing = subprocess.run([sys.executable, "-m", "watercolour.cli", "replay", str(run), "--sheet",
                              str(tmp_path / "none.png"), "--episode", "9-9-9"], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
    assert missing.returncode != 0 and "no episode '9-9-9'" in missing.stderr


def test_rank_correlation_handles_ties_and_constant_inputs():
    assert ranks([3.0, 1.0, 3.0, 2.0]) == [3.5, 1.0, 3.5, 2.0]
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 1], [1, 2, 3]) is None and spearman([1], [2]) is None


@pytest.mark.slow  # warm-started tiny policy (via recorded_run)
def test_rescore_with_a_judge_writes_new_components_next_to_the_old(recorded_run):
    store, config, episodes = load_run(recorded_run)
    # A real HTTP judge on 127.0.0.1 that prefers the run's first painted final turn to any
    # reference, and is position-biased (a split, 0.5) on everything else.
    favourite = next(((e, t) for e, t in painted(episodes) if t["turn"] == 2 and t["passed"]), None)
    favourite_png = (store.root / favourite[1]["png"]).read_bytes() if favourite else b"none"
    with FakeOpenAIServer(rule=prefer_image(favourite_png)) as server:
        scorer = build_rescorer(config, "style-judge", judge_url=server.base_url, judge_model="judge-model")
        records = rescore(store, config, episodes, scorer)
        judged = len(server.chat_requests())
    path = write_rescored(store, scorer.mix.name, records)
    assert path == recorded_run / "rescored" / "style-judge.jsonl"
    assert [json.loads(line) for line in path.read_text().splitlines()] == records
    assert (recorded_run / "episodes.jsonl").read_text().count("\n") == 4  # the record is never rewritten
    by_id = {e["episode_id"]: e for e in episodes}
    passing_final = 0
    for record in records:
        episode = by_id[record["episode_id"]]
        assert record["old_reward"] == episode["reward"] and record["preset"] == "style-judge"
        for new, old in zip(record["turns"], episode["turns"]):
            assert new["old_components"] == old["components"] and new["old_reward"] == old["reward"]
            if old["components"] is None:
                assert new["components"] is None  # a turn the run never scored stays unscored
                continue
            assert set(new["components"]) >= {"gate", "length"}
            if old["passed"] and old["png"]:
                # Same bytes, same verdict: the over-fitted test policy often repeats a painting.
                expected = 1.0 if (store.root / old["png"]).read_bytes() == favourite_png else 0.5
                assert new["components"]["judge"] == pytest.approx(expected)
                assert new["components"]["style"] == pytest.approx(old["components"]["style"])
                passing_final += old["turn"] == 2
            else:
                assert new["reward"] == 0.0  # the gate zeroes the mix, judge never asked
        assert record["reward"] == record["turns"][-1]["reward"]
    assert judged >= 2 * 2 * passing_final  # two references, both orders
    summary = agreement(records)
    assert summary["episodes"] == 4 and len(summary["steps"]) == 2
    assert summary["moved"] and all("rank_shift" in r for r in summary["moved"])


@pytest.mark.slow  # warm-started tiny policy (via recorded_run)
def test_export_is_a_dataset_that_load_dataset_reads(recorded_run, tmp_path):
    from datasets import load_dataset

    store, _, episodes = load_run(recorded_run)
    out = export_dataset(store, episodes, tmp_path / "export")
    rows = load_dataset(str(out), split="train")
    assert rows.num_rows == sum(len(e["turns"]) for e in episodes)
    public = {"file_name", "source_file", "run", "step", "position_in_group", "reward", "code", "code_chars",
              "n_shapes", "n_fill_calls", "brush_methods_used"}
    assert public | {"turn", "episode_id", "final", "image"} <= set(rows.column_names)
    recorded = {(e["episode_id"], t["turn"]): (e, t) for e in episodes for t in e["turns"]}
    for row in rows:
        episode, turn = recorded[(row["episode_id"], row["turn"])]
        assert row["final"] == (turn["turn"] == len(episode["turns"]))
        assert row["code"] == (turn["code"] or "") and row["step"] == episode["step"]
        assert row["position_in_group"] == episode["index"] and row["reward"] == turn["reward"]
        if turn["png"]:
            image = row["image"]
            assert image is not None and image.size == (200, 200)
            assert row["file_name"].endswith(f"t{turn['turn']}.png")
        else:
            assert row["image"] is None and row["file_name"] is None


@pytest.mark.slow  # warm-started tiny policy (via recorded_run)
def test_continue_from_turn_two_keeps_the_recorded_first_turn(recorded_run, environments, tmp_path):
    store, config, episodes = load_run(recorded_run)
    ordered = sorted(episodes, key=lambda e: (e["step"], e["group"], e["index"]))
    out = tmp_path / "continued"
    summary = continue_run(recorded_run, ordered, 2, recorded_run / "checkpoints" / "step-1", out,
                           environments=environments)
    assert summary["episodes"] == 4 and summary["gallery"].is_file()
    # The new policy saw byte-identical starting paintings.
    assert summary["prefix_identical"] == summary["prefix_paintings"] == sum(1 for e in episodes if e["turns"][0]["png"])
    _, new_config, continued = load_run(out)
    assert new_config.turns == 2
    by_id = {e["episode_id"]: e for e in episodes}
    for record in continued:
        old = by_id[record["continued_from"]["episode_id"]]
        assert record["episode_id"] == old["episode_id"] and record["continued_from"]["turn"] == 2
        assert record["turns"][0]["reply"] == old["turns"][0]["reply"]
        assert record["turns"][0]["passed"] == old["turns"][0]["passed"]
        assert len(record["turns"]) == 2 and record["turns"][1]["reply"]
        assert record["reward"] is not None or record["turns"][1]["infrastructure_failed"]
    for step in (1, 2):
        assert (out / "renders" / f"step-{step:05d}" / "contact_sheet.png").is_file()
    with pytest.raises(UsageError, match="already holds episodes"):
        continue_run(recorded_run, ordered, 2, recorded_run / "checkpoints" / "step-1", out, environments=environments)
    with pytest.raises(UsageError, match="between 1 and 2"):
        continue_run(recorded_run, ordered, 3, recorded_run / "checkpoints" / "step-1", tmp_path / "x",
                     environments=environments)


@pytest.mark.slow  # warm-started tiny policy (via recorded_run)
def test_replay_command_line_prints_statistics_gallery_and_export(recorded_run, tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "watercolour.cli", "replay", str(recorded_run), "--gallery", str(tmp_path / "g.html"),
         "--export", str(tmp_path / "dataset"), "--sheet", str(tmp_path / "episode.png")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "turn  episodes  reward" in completed.stdout and "export:" in completed.stdout
    assert (tmp_path / "g.html").is_file() and (tmp_path / "dataset" / "README.md").is_file()
    assert "sheet:" in completed.stdout and (tmp_path / "episode.png").read_bytes().startswith(b"\x89PNG")
    bad = subprocess.run([sys.executable, "-m", "watercolour.cli", "replay", str(recorded_run), "--continue-from", "2"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "go together" in bad.stderr
