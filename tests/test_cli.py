"""The `watercolour` command as a user runs it (a real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import RECORD_KEYS, ROOT, SMALL_SKETCH, run_cli



def test_render_json_contract(tmp_path):
    good = tmp_path / "good.js"
    good.write_text(SMALL_SKETCH)
    reply = tmp_path / "reply.md"
    reply.write_text("Here you go:\n```js\n" + SMALL_SKETCH + "```\n")
    hostile = tmp_path / "hostile.js"
    hostile.write_text(SMALL_SKETCH.replace("brush.noStroke();", "fetch('http://127.0.0.1:9/x');"))
    blank = tmp_path / "blank.txt"
    blank.write_bytes(b"\xff\xfe not utf-8 \x80")
    out_dir = tmp_path / "out"
    proc = run_cli("render", str(good), str(reply), str(hostile), str(blank), "--json", "--seed", "5",
                   "--out-dir", str(out_dir), "--deadline", "30")
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert [r["file"] for r in records] == [str(good), str(reply), str(hostile), str(blank)]
    for record in records:
        assert set(record) == RECORD_KEYS
    assert records[0]["passed"] and records[1]["passed"]
    assert records[0]["png"] and (out_dir / records[0]["png"].split("/")[-1]).exists()
    assert 0.005 < records[0]["paint_fraction"] < 1
    assert not records[2]["passed"] and "external_access" in records[2]["violations"]
    assert records[2]["png"] is None
    assert records[3]["violations"] == ["not_utf8"]
    assert (out_dir / "contact_sheet.png").read_bytes().startswith(b"\x89PNG")


def test_render_missing_file_is_a_usage_error(tmp_path):
    proc = run_cli("render", str(tmp_path / "nope.js"), "--json")
    assert proc.returncode == 2
    assert "no such file" in proc.stderr


def test_help_lists_the_subcommands():
    proc = run_cli("--help", timeout=60)
    assert proc.returncode == 0
    for verb in ("render", "serve", "bench", "demo"):
        assert verb in proc.stdout


def test_score_json_on_pool_paintings():
    proc = run_cli("score", "pools/starter/love/poppies.png", "pools/starter/okay/two_apples.png", "--json",
                   "--preset", "style-offline", timeout=120)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["image"] for r in records] == ["pools/starter/love/poppies.png", "pools/starter/okay/two_apples.png"]
    for record in records:
        assert set(record) == {"image", "total", "components"}
        assert set(record["components"]) == {"gate", "length", "style"}
        assert 0.0 < record["total"] <= 1.0
    assert records[0]["total"] > records[1]["total"]


def test_score_explains_a_missing_scorer():
    proc = run_cli("score", "pools/starter/love/poppies.png", "--preset", "hps-only", timeout=60)
    assert proc.returncode != 0
    assert "--hps-url" in proc.stderr


def test_pool_stats_json():
    proc = run_cli("pool", "stats", "--json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert stats["tiers"]["love"] >= 4


# --- a new user's first hour: fast help that says what the README says ---------------------------

HELP_SECONDS = 3.0  # measured 0.25-0.5 s (1.3-3 s with four test runs sharing 2 cores); was 9-23 s


def test_building_the_parser_imports_no_torch_transformers_or_browser():
    probe = ("import sys; from watercolour.cli import build_parser; build_parser(); "
             "print(sorted(m for m in ('torch', 'transformers', 'playwright', 'trl', 'openenv') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_every_help_answers_fast_and_matches_the_readme():
    import time

    readme = (ROOT / "README.md").read_text()
    helps = {}
    for command in ([], ["train"], ["demo"], ["hps-serve"], ["score"], ["pool", "build"], ["render"], ["serve"],
                    ["replay"], ["sft"], ["build-tiny"], ["build-pretrained"], ["bench", "render"], ["bench", "serve"], ["bench", "learn"], ["report"],
                    ["pool", "stats"]):
        elapsed = []
        for _ in range(2):  # the better of two: one try can land on a busy moment of a shared machine
            started = time.perf_counter()
            proc = run_cli(*command, "--help", timeout=60)
            elapsed.append(time.perf_counter() - started)
            assert proc.returncode == 0, (command, proc.stderr)
            if elapsed[-1] < HELP_SECONDS:
                break
        assert min(elapsed) < HELP_SECONDS, (command, elapsed)
        helps[" ".join(command)] = " ".join(proc.stdout.split())
    assert helps["hps-serve"].startswith("usage: watercolour hps-serve [-h] --checkpoint CHECKPOINT --base-model")
    assert "watercolour pool build --subject S (--from DIR|RUN_DIR | --policy MODEL | --endpoint URL)" in readme
    assert helps["pool build"].startswith(
        "usage: watercolour pool build --subject S (--from DIR|RUN_DIR | --policy MODEL | --endpoint URL)")
    assert "(default: style-offline" in helps["score"]
    assert "(default configs/learn.yaml)" in helps["bench learn"] and "RUN_DIR [RUN_DIR ...]" in helps["report"]
    # train and demo list every TrainConfig field with its help (the field's metadata, which TRL's
    # parser shows as it is), defaults from their preset.
    from dataclasses import fields

    from multiturn_trainer.config import TrainConfig

    docs = {f.name: f.metadata.get("help") for f in fields(TrainConfig)}
    assert all(docs.values()), [name for name, doc in docs.items() if not doc]
    for command, preset in (("train", "configs/smoke.yaml"), ("demo", "configs/demo.yaml")):
        text = helps[command]
        assert text.startswith(f"usage: watercolour {command} [-h] [--config FILE] [--resume] [--key value ...]")
        dense = "".join(text.split())  # argparse wraps lines, also at hyphens
        for name, doc in docs.items():
            assert f"--{name.replace('_', '-')} " in text and "".join(doc.split()) in dense, (command, name)
        assert f"(default: {preset})" in text
    assert "Per-turn completion budget in tokens. (default: 700)" in helps["train"]  # smoke.yaml's value
    assert "Per-turn completion budget in tokens. (default: 640)" in helps["demo"]  # demo.yaml's value


def test_renderers_option_keeps_the_old_pool_size_name():
    from watercolour.cli import build_parser

    parser = build_parser()
    for command in (["render", "a.js"], ["serve"], ["bench", "serve"]):
        assert parser.parse_args([*command, "--renderers", "3"]).renderers == 3
        assert parser.parse_args([*command, "--pool-size", "2"]).renderers == 2  # the old name
        assert parser.parse_args(command).renderers is None


def test_train_rejects_unknown_keys_in_one_line(tmp_path):
    proc = run_cli("train", "--stepz", "3", timeout=60)
    assert proc.returncode != 0 and "watercolour train: unknown option --stepz" in proc.stderr
    config = tmp_path / "bad.yaml"
    config.write_text("steps: 2\nstepz: 3\n")
    proc = run_cli("demo", "--config", str(config), timeout=60)
    assert proc.returncode != 0 and "watercolour demo: unknown config keys: stepz" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow  # 7 s
def test_score_finds_the_sketches_render_wrote_beside_its_paintings(tmp_path):
    out = tmp_path / "out"
    proc = run_cli("render", "examples/sketches/poppies.js", "examples/simple/two_apples.js", "--out-dir", str(out),
                   "--json")
    assert proc.returncode == 0, proc.stderr
    pngs = sorted(out.glob("0*.png"))
    assert [p.name for p in pngs] == ["000-poppies.png", "001-two_apples.png"]
    assert (out / "000-poppies.js").read_text().strip() == (ROOT / "examples/sketches/poppies.js").read_text().strip()
    scored = run_cli("score", *map(str, pngs), "--json", timeout=120)
    assert scored.returncode == 0, scored.stderr
    assert "no sketch source" not in scored.stderr
    records = [json.loads(line) for line in scored.stdout.splitlines()]
    assert records[0]["components"]["length"] > 0  # ~475 tokens: inside the length reward's ramp
