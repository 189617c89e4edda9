"""Pool statistics, export as an imagefolder dataset, and the judge-consistency check against a
real OpenAI-compatible server on loopback."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest
from PIL import Image

from rewards.http_retry import FatalScorerError
from rewards.judge import JudgeConfig
from rewards.pool import ReferencePool, import_imagefolder
from rewards.ranking import spearman
from curation.tools import (coverage_histogram, export_pool, format_consistency, format_statistics,
                                judge_consistency, pool_statistics)
from rewards.pool import STARTER_POOL_DIR

from fake_openai_server import FakeOpenAIServer, FakeReply, RecordedRequest, always, sha256_hex

ROOT = Path(__file__).resolve().parents[2]
STARTER = ReferencePool.load(STARTER_POOL_DIR)


@lru_cache(maxsize=None)
def thumbnail(png: bytes, size: int = 48) -> bytes:
    """The starter painting, small: every judge request carries two images, and the check asks
    hundreds of questions."""
    image = Image.open(io.BytesIO(png)).convert("RGB").resize((size, size), Image.LANCZOS)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def starter_copy(root: Path, size: int | None = 48) -> ReferencePool:
    """The starter pool rebuilt in ``root`` with ReferencePool.add: its tiers, subjects,
    sketches and coverage, its paintings as thumbnails (or full size with ``size=None``)."""
    pool = ReferencePool(root, [])
    for entry in STARTER.entries():
        png = STARTER.png(entry)
        pool.add(png if size is None else thumbnail(png, size), entry.tier, entry.id, subject=entry.subject,
                 source=STARTER.source(entry), generator=entry.generator, paint_coverage=entry.paint_coverage,
                 **entry.extra)
    pool.save()
    return pool


def mixed_pool(root: Path) -> ReferencePool:
    """The starter pool plus what a pool being built has: a subject with a full draw of its own,
    a reject, an HPSv3 score, and staged candidates (one without a known coverage)."""
    pool = starter_copy(root)
    harbour = STARTER.png(STARTER.entries(subject="harbour at dusk")[0])
    pool.add(thumbnail(harbour, 40), "love", "harbour_two", subject="harbour at dusk", source="function setup() {}",
             generator="model-x", paint_coverage=0.5, hpsv3_score=0.71)
    pool.add(thumbnail(harbour, 36), "okay", "harbour_three", subject="harbour at dusk", generator="model-x",
             paint_coverage=0.25)
    pool.add(thumbnail(harbour, 32), "okay", "harbour_four", subject="harbour at dusk", generator="model-x",
             paint_coverage=0.3)
    pool.add(thumbnail(harbour, 28), "reject", "harbour_smudge", subject="harbour at dusk", paint_coverage=0.05)
    pool.add(thumbnail(harbour, 24), "candidate", "staged_one", subject="harbour at dusk", paint_coverage=1.0)
    pool.add(thumbnail(harbour, 20), "candidate", "staged_two", subject="a new subject")
    pool.save()
    return pool


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "watercolour.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


def test_statistics_count_candidates_coverage_and_judge_draws(tmp_path):
    pool = mixed_pool(tmp_path / "pool")
    stats = pool_statistics(ReferencePool.load(pool.root))

    assert stats["tiers"] == {"love": 7, "okay": 5, "reject": 1, "candidate": 2}
    assert stats["paintings"] == 15
    assert stats["subjects"]["harbour at dusk"] == {"love": 2, "okay": 2, "reject": 1, "candidate": 1}
    assert stats["subjects"]["a new subject"] == {"love": 0, "okay": 0, "reject": 0, "candidate": 1}

    cover = stats["coverage_summary"]
    known = [e.paint_coverage for e in pool.entries() if e.paint_coverage is not None]
    assert stats["coverage"] == known  # the key earlier `pool stats --json` readers used
    assert (cover["count"], cover["missing"]) == (14, 1)
    assert (cover["min"], cover["max"]) == (min(known), 1.0)
    middle = sorted(known)[6:8]  # 14 values: the median is the mean of the middle two
    assert cover["median"] == pytest.approx(sum(middle) / 2)
    assert sum(cover["histogram"]["counts"]) == 14
    assert cover["histogram"]["counts"][9] == 1  # coverage 1.0 lands in the last bin
    assert cover["by_tier"]["candidate"]["count"] == 1

    refs = stats["judge_references"]
    assert refs["per_draw"] == {"love": 2, "okay": 2}
    assert (refs["love"], refs["okay"], refs["full_draw"]) == (7, 5, True)
    assert refs["subjects"]["harbour at dusk"] == {"love": 2, "okay": 2, "own_full_draw": True,
                                                   "full_draw_with_top_up": True}
    assert refs["subjects"]["mountain lake"]["own_full_draw"] is False
    assert refs["subjects"]["mountain lake"]["full_draw_with_top_up"] is True
    assert refs["subjects_with_own_full_draw"] == 1

    text = format_statistics(stats)
    assert "candidate 2" in text and "1 of 10 subjects draw fully" in text


def test_statistics_say_when_a_tier_is_too_small_to_draw_from(tmp_path):
    pool = ReferencePool(tmp_path / "pool", [])
    love = STARTER.entries("love")[0]
    pool.add(thumbnail(STARTER.png(love)), "love", "only", subject="s", paint_coverage=0.4)
    stats = pool_statistics(pool)
    assert stats["judge_references"]["full_draw"] is False
    assert stats["judge_references"]["subjects"]["s"]["full_draw_with_top_up"] is False
    assert "NOT ENOUGH" in format_statistics(stats)


def test_coverage_histogram_bins_and_spearman():
    assert coverage_histogram([0.0, 0.05, 0.1, 0.99, 1.0])["counts"] == [2, 1, 0, 0, 0, 0, 0, 0, 0, 2]
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([0.5, 0.5, 0.5], [1, 2, 3]) is None  # no spread, no correlation
    # Ranks [1, 2.5, 2.5, 4] and [1, 3, 2, 4]: covariance 4.5, spreads 4.5 and 5.
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / (4.5 * 5) ** 0.5)


# --------------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------------


def test_export_loads_with_datasets_and_round_trips_through_import(tmp_path):
    import datasets

    pool = mixed_pool(tmp_path / "pool")
    out = export_pool(pool, tmp_path / "export")

    rows = [json.loads(line) for line in (out / "metadata.jsonl").read_text().splitlines()]
    assert {row["tier"] for row in rows} == {"love", "okay"}  # no reject by default, never candidates
    assert len(rows) == 12
    assert set(rows[0]) == {"file_name", "id", "tier", "subject", "generator_model", "paint_coverage",
                            "source_file", "hpsv3_score"}
    scored = next(row for row in rows if row["id"] == "harbour_two")
    assert scored["hpsv3_score"] == 0.71 and scored["file_name"] == "love/harbour_two.png"
    assert (out / scored["source_file"]).read_text() == "function setup() {}"
    assert next(row for row in rows if row["id"] == "harbour_three")["source_file"] is None
    assert not (out / "candidate").exists() and not (out / "reject").exists()

    dataset = datasets.load_dataset("imagefolder", data_dir=str(out), split="train",
                                    cache_dir=str(tmp_path / "hf-cache"))
    assert len(dataset) == 12
    assert Counter(dataset["tier"]) == {"love": 7, "okay": 5}
    assert sorted(dataset["id"]) == sorted(row["id"] for row in rows)
    assert dataset[0]["image"].size[0] > 0

    imported = import_imagefolder(out, tmp_path / "reimported")
    reloaded = ReferencePool.load(imported.root)
    assert reloaded.counts() == {"love": 7, "okay": 5, "reject": 0, "candidate": 0}

    def signature(p: ReferencePool) -> list[tuple]:
        return sorted((e.id, e.tier, e.subject, e.generator, e.paint_coverage, p.png(e), p.source(e))
                      for e in p.entries() if e.tier in ("love", "okay"))

    assert signature(reloaded) == signature(pool)
    assert next(e for e in reloaded.entries() if e.id == "harbour_two").extra["hpsv3_score"] == 0.71


def test_export_refuses_a_non_empty_folder_and_candidate_tiers(tmp_path):
    pool = starter_copy(tmp_path / "pool")
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not empty"):
        export_pool(pool, occupied)
    assert [p.name for p in occupied.iterdir()] == ["notes.txt"]
    with pytest.raises(ValueError, match="never exported"):
        export_pool(pool, tmp_path / "new", tiers=("love", "candidate"))
    with pytest.raises(ValueError, match="nothing to export"):
        export_pool(pool, tmp_path / "new", tiers=("reject",))
    assert not (tmp_path / "new").exists()

    empty = tmp_path / "empty"
    empty.mkdir()
    assert len((export_pool(pool, empty, tiers=("okay",)) / "metadata.jsonl").read_text().splitlines()) == 3


# --------------------------------------------------------------------------------------------
# Judge consistency
# --------------------------------------------------------------------------------------------


def ranked(order: list[bytes]):
    """A perfectly consistent judge: the painting earlier in ``order`` wins, whatever its position."""
    rank = {sha256_hex(png): i for i, png in enumerate(order)}

    def rule(request: RecordedRequest) -> FakeReply:
        first, second = (rank[digest] for digest in request.image_hashes[:2])
        return FakeReply.verdict("A" if first < second else "B")

    return rule


def judge_config(server: FakeOpenAIServer, **overrides) -> JudgeConfig:
    settings = dict(base_url=server.base_url, model="fake-judge", token="t0ken", timeout_s=5.0,
                    max_concurrency=4, max_attempts=2, base_delay_s=0.001, max_delay_s=0.002)
    settings.update(overrides)
    return JudgeConfig(**settings)


def questions_in(report: dict) -> int:
    """Ordered questions the check asks: both orders, draw 1 twice, draw 2 once."""
    return sum(2 * (2 * len(c["references_first"]) + len(c["references_second"])) for c in report["candidates"])


def test_consistent_judge_agrees_with_itself_in_both_orders_and_the_cache_is_bypassed(tmp_path):
    pool = starter_copy(tmp_path / "pool")
    order = sorted(pool.entries(), key=lambda e: e.id)
    rank = {e.id: i for i, e in enumerate(order)}
    with FakeOpenAIServer(ranked([pool.png(e) for e in order])) as server:
        report = judge_consistency(pool, judge_config(server), samples=4, seed=3)
        asked = len(server.chat_requests())

    assert report["samples"] == 4 and report["unresolved"] == 0
    assert asked == report["queries"] == questions_in(report)  # the repeat really reached the server
    assert report["repeat_agreement"]["fraction"] == 1.0
    assert report["repeat_agreement"]["compared"] == sum(2 * len(c["references_first"]) for c in report["candidates"])
    assert report["order_consistency"]["fraction"] == 1.0
    assert report["order_consistency"]["position_a_share"] == 0.5
    for candidate in report["candidates"]:
        first, second = candidate["references_first"], candidate["references_second"]
        assert candidate["id"] not in first + second and not set(first) & set(second)
        assert len(first) == 4  # 2 love + 2 okay: the starter pool has enough of both
        # The score is the share of references ranked below the candidate.
        below = sum(rank[r] > rank[candidate["id"]] for r in first) / len(first)
        assert candidate["score_first"] == candidate["score_repeat"] == pytest.approx(below)
    stability = report["reference_stability"]
    differences = [abs(c["score_first"] - c["score_second"]) for c in report["candidates"]]
    assert stability["mean_abs_difference"] == pytest.approx(sum(differences) / 4)
    assert stability["candidates"] == 4
    assert "repeat agreement     1.000" in format_consistency(report)


def test_position_biased_judge_scores_zero_order_consistency(tmp_path):
    pool = starter_copy(tmp_path / "pool")
    with FakeOpenAIServer(always("A")) as server:
        report = judge_consistency(pool, judge_config(server), samples=3, seed=0)
    assert report["repeat_agreement"]["fraction"] == 1.0
    assert report["order_consistency"]["fraction"] == 0.0
    assert report["order_consistency"]["position_a_share"] == 1.0
    # Every pair splits: 0.5 against any references, so the draws agree and nothing ranks.
    assert {c["score_first"] for c in report["candidates"]} == {0.5}
    assert report["reference_stability"]["mean_abs_difference"] == 0.0
    assert report["reference_stability"]["spearman"] is None


def test_a_judge_that_changes_its_mind_on_repeats_scores_zero_repeat_agreement(tmp_path):
    pool = starter_copy(tmp_path / "pool")
    consistent = ranked([pool.png(e) for e in pool.entries()])
    times_asked: Counter = Counter()

    def fickle(request: RecordedRequest) -> FakeReply:
        question = tuple(request.image_hashes[:2])
        times_asked[question] += 1
        verdict = json.loads(consistent(request).body)["choices"][0]["message"]["content"]
        winner = json.loads(verdict)["winner"]
        flipped = {"A": "B", "B": "A"}[winner]
        return FakeReply.verdict(winner if times_asked[question] % 2 else flipped)

    with FakeOpenAIServer(fickle) as server:
        report = judge_consistency(pool, judge_config(server, max_concurrency=1), samples=2, seed=1)
    assert report["repeat_agreement"]["fraction"] == 0.0
    # Draw 1's first asking and draw 2 are each a first asking: the same painting wins both orders.
    assert report["order_consistency"]["fraction"] == 1.0


def test_judge_errors_and_unreadable_answers_are_unresolved_not_verdicts(tmp_path):
    pool = starter_copy(tmp_path / "pool")
    troublesome = pool.entries("love")[0]
    troublesome_hash = sha256_hex(pool.png(troublesome))
    consistent = ranked([pool.png(e) for e in pool.entries()])

    def rule(request: RecordedRequest) -> FakeReply:
        # Whenever the troublesome painting is shown: unreadable as A, a server error as B.
        if request.image_hashes[0] == troublesome_hash:
            return FakeReply.content("Both are lovely watercolours.")
        if request.image_hashes[1] == troublesome_hash:
            return FakeReply.error(500)
        return consistent(request)

    with FakeOpenAIServer(rule) as server:
        report = judge_consistency(pool, judge_config(server), samples=9, seed=0)

    def involving(candidate: dict, references: list[str]) -> int:
        return sum(candidate["id"] == troublesome.id or r == troublesome.id for r in references)

    failing_pairs = sum(2 * involving(c, c["references_first"]) + involving(c, c["references_second"])
                        for c in report["candidates"])
    assert failing_pairs > 0
    assert report["unresolved"] == 2 * failing_pairs
    assert report["queries"] == questions_in(report)
    assert report["repeat_agreement"]["unresolved"] == sum(2 * involving(c, c["references_first"])
                                                           for c in report["candidates"])
    assert report["order_consistency"]["unresolved"] == sum(
        involving(c, c["references_first"]) + involving(c, c["references_second"]) for c in report["candidates"])
    # What resolved is still the consistent judge's.
    assert report["repeat_agreement"]["fraction"] == 1.0
    assert report["order_consistency"]["fraction"] == 1.0
    alone = next(c for c in report["candidates"] if c["id"] == troublesome.id)
    assert alone["score_first"] is None  # no reference resolved: no score, never a 0
    assert report["reference_stability"]["unresolved"] >= 1


def test_a_judge_that_only_answers_garbage_leaves_every_measure_undefined(tmp_path):
    pool = starter_copy(tmp_path / "pool")
    with FakeOpenAIServer(lambda request: FakeReply.content("no idea")) as server:
        report = judge_consistency(pool, judge_config(server), samples=2, seed=0)
    assert report["unresolved"] == report["queries"] > 0
    assert report["repeat_agreement"]["fraction"] is None
    assert report["order_consistency"]["fraction"] is None
    assert report["reference_stability"]["mean_abs_difference"] is None
    assert "–" in format_consistency(report)


def test_a_refused_token_stops_the_check(tmp_path):
    pool = starter_copy(tmp_path / "pool")
    with FakeOpenAIServer(lambda request: FakeReply.error(401)) as server:
        with pytest.raises(FatalScorerError):
            judge_consistency(pool, judge_config(server), samples=1)


# --------------------------------------------------------------------------------------------
# The CLI
# --------------------------------------------------------------------------------------------


def test_cli_stats_and_export_in_a_real_process(tmp_path):
    pool = mixed_pool(tmp_path / "pool")

    text = cli("pool", "stats", str(pool.root))
    assert text.returncode == 0, text.stderr
    assert "15 paintings" in text.stdout and "candidate 2" in text.stdout

    out = tmp_path / "export"
    exported = cli("pool", "export", str(pool.root), str(out), "--tiers", "love,okay,reject")
    assert exported.returncode == 0, exported.stderr
    assert len((out / "metadata.jsonl").read_text().splitlines()) == 13
    again = cli("pool", "export", str(pool.root), str(out))
    assert again.returncode != 0 and "not empty" in again.stderr


def test_cli_stats_json_and_judge_check(tmp_path, capsys):
    # In-process: the same parser and dispatch as the command, without a second interpreter start.
    from watercolour.cli import main

    pool = mixed_pool(tmp_path / "pool")
    assert main(["pool", "stats", str(pool.root), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert {"pool", "tiers", "subjects", "coverage", "coverage_summary", "judge_references"} <= set(stats)

    with FakeOpenAIServer(always("B")) as server:
        assert main(["pool", "judge-check", str(pool.root), "--judge-url", server.base_url,
                     "--judge-model", "fake-judge", "--samples", "2", "--seed", "5", "--json"]) == 0
        models = {r.model for r in server.chat_requests()}
    report = json.loads(capsys.readouterr().out)
    assert report["samples"] == 2 and report["order_consistency"]["fraction"] == 0.0
    assert models == {"fake-judge"}

    with FakeOpenAIServer(lambda request: FakeReply.error(403)) as server:
        with pytest.raises(SystemExit, match="judge-check: .*403"):
            main(["pool", "judge-check", str(pool.root), "--judge-url", server.base_url, "--samples", "1"])
