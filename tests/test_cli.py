"""The `watercolour` command as a user runs it (a real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT, SMALL_SKETCH

RECORD_KEYS = {"file", "passed", "violations", "errors", "paint_fraction", "elapsed_ms", "png"}


def run_cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "watercolour.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


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
