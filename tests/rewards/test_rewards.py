"""Gate, length, style, pool and the mixer (the judge and HPSv3 have their own files)."""

from __future__ import annotations

import asyncio
import io
import json

import pytest
from PIL import Image, ImageDraw

from rewards.components import LengthRamp, gate_score
from rewards.mixer import (COMPONENTS, PaintingToScore, RewardMix, RewardScorer, load_preset, mix_total,
                           preset_names, style_image_scorer)
from rewards.pool import ReferencePool, import_imagefolder
from rewards.pool import STARTER_POOL_DIR
from rewards.style import StyleProfile, StyleScorer, style_score


def png_of(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


PAPER = (248, 241, 228)


def weak_paintings() -> dict[str, bytes]:
    flat = Image.new("RGB", (600, 600), PAPER)
    draw = ImageDraw.Draw(flat)
    draw.rectangle([100, 100, 300, 300], fill=(255, 0, 0))
    draw.ellipse([320, 300, 520, 500], fill=(0, 0, 255))
    dot = Image.new("RGB", (600, 600), PAPER)
    ImageDraw.Draw(dot).ellipse([280, 280, 320, 320], fill=(30, 30, 30))
    return {
        "blank": png_of(Image.new("RGB", (600, 600), PAPER)),
        "flat_vector_shapes": png_of(flat),
        "single_dot": png_of(dot),
        "noise": png_of(Image.effect_noise((600, 600), 120).convert("RGB")),
    }


# --- gate and length -------------------------------------------------------------------

def test_gate_score():
    assert gate_score(True) == 1.0 and gate_score(False) == 0.0


@pytest.mark.parametrize("chars, expected", [
    (0, 0.0), (599, 0.0), (600, 0.0), (4 * 1575, 0.5), (12_000, 1.0), (24_000, 1.0), (24_004, 0.0),
])
def test_length_ramp_edges(chars, expected):
    assert LengthRamp().score("x" * chars) == pytest.approx(expected)


def test_length_uses_the_real_tokenizer_when_given():
    ramp = LengthRamp(start=2, full=4, cliff=10)
    assert ramp.score("a b c", tokenizer=str.split) == pytest.approx(0.5)
    assert ramp.score(None) == 0.0


def test_length_ramp_rejects_bad_shapes():
    with pytest.raises(ValueError):
        LengthRamp(start=10, full=5, cliff=20)


# --- presets and the mixer -----------------------------------------------------------------

def test_presets_match_the_published_numbers():
    expected = {
        "judge-led": {"judge": 0.60, "hpsv3": 0.30, "gate": 0.05, "length": 0.05, "style": 0.0},
        "hps-led": {"judge": 0.30, "hpsv3": 0.60, "gate": 0.05, "length": 0.05, "style": 0.0},
        "hps-only": {"judge": 0.0, "hpsv3": 0.90, "gate": 0.05, "length": 0.05, "style": 0.0},
    }
    for name, weights in expected.items():
        mix = load_preset(name)
        assert {c: mix.weight(c) for c in COMPONENTS} == pytest.approx(weights)
        assert mix.gate_zeroes_total
    assert {"style-offline", "style-judge"} <= set(preset_names())
    offline = load_preset("style-offline")
    assert offline.uses("style") and not offline.uses("judge") and not offline.uses("hpsv3")


def test_mix_total_formula_and_none_rules():
    mix = load_preset("judge-led")
    parts = {"gate": 1.0, "length": 0.5, "judge": 0.75, "hpsv3": 0.4}
    assert mix_total(parts, mix) == pytest.approx(0.05 + 0.05 * 0.5 + 0.60 * 0.75 + 0.30 * 0.4)
    assert mix_total({**parts, "judge": None}, mix) is None
    assert mix_total({**parts, "hpsv3": None}, mix) is None
    # a failed gate is the policy's fault: 0, whatever else failed
    assert mix_total({"gate": 0.0, "length": 1.0, "judge": None}, mix) == 0.0
    # an unused component may be None without touching the total
    assert mix_total({**parts, "style": None}, mix) is not None
    keep_going = RewardMix("soft-gate", {"gate": 0.5, "length": 0.5}, gate_zeroes_total=False)
    assert mix_total({"gate": 0.0, "length": 1.0}, keep_going) == pytest.approx(0.5)


def test_unknown_component_and_missing_preset_are_errors():
    with pytest.raises(ValueError, match="unknown reward components"):
        RewardMix("bad", {"aesthetics": 1.0})
    with pytest.raises(ValueError, match="no reward preset"):
        load_preset("no-such-preset")


def test_scorer_refuses_a_mix_it_cannot_compute():
    with pytest.raises(ValueError, match="needs: judge"):
        RewardScorer(load_preset("judge-led"), hps=style_image_scorer(None))


# --- pool -----------------------------------------------------------------------------------

def test_starter_pool_loads_and_is_labelled_as_a_starter():
    pool = ReferencePool.load(STARTER_POOL_DIR)
    counts = pool.counts()
    assert counts["love"] >= 4 and counts["okay"] >= 2
    assert "not a curated taste" in pool.description
    for entry in pool.entries():
        assert pool.png(entry).startswith(b"\x89PNG")
        assert "brush." in pool.source(entry)
        assert entry.paint_coverage and entry.paint_coverage > 0.005
        assert entry.extra["curation"] == "starter"


def test_reference_draw_is_seeded_per_group():
    pool = ReferencePool.load(STARTER_POOL_DIR)
    first = pool.draw(seed=7)
    assert [r.id for r in first] == [r.id for r in pool.draw(seed=7)]
    assert [r.tier for r in first] == ["love", "love", "okay", "okay"]
    assert len({r.id for r in first}) == 4
    assert any([r.id for r in pool.draw(seed=s)] != [r.id for r in first] for s in range(8, 20))


def test_import_imagefolder_with_the_public_columns(tmp_path):
    source = tmp_path / "hub_copy" / "train"
    source.mkdir(parents=True)
    starter = ReferencePool.load(STARTER_POOL_DIR)
    rows = []
    for entry in starter.entries()[:3]:
        name = f"{entry.id}.png"
        (source / name).write_bytes(starter.png(entry))
        (source / f"{entry.id}.js").write_text(starter.source(entry))
        rows.append({"file_name": name, "source_file": f"{entry.id}.js", "tier": entry.tier,
                     "subject": entry.subject, "generator_model": "someone/model", "score": 0.5})
    (source / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pool = import_imagefolder(tmp_path / "hub_copy", tmp_path / "pool")
    reloaded = ReferencePool.load(tmp_path / "pool")
    assert len(reloaded.entries()) == 3
    first = reloaded.entries()[0]
    assert first.generator == "someone/model" and first.extra["score"] == 0.5
    assert reloaded.source(first) == starter.source(starter.entries()[0])
    assert pool.counts() == reloaded.counts()


def test_corrupt_manifest_is_a_clear_error(tmp_path):
    (tmp_path / "manifest.jsonl").write_text('{"file": "love/a.png", "tier": "love"}\n{not json\n')
    with pytest.raises(ValueError, match="manifest.jsonl:2"):
        ReferencePool.load(tmp_path)
    (tmp_path / "manifest.jsonl").write_text('{"file": "love/a.png", "tier": "adored"}\n')
    with pytest.raises(ValueError, match="unknown tier"):
        ReferencePool.load(tmp_path)


# --- style ----------------------------------------------------------------------------------

def test_style_ranks_the_love_tier_above_blank_and_weak_paintings():
    scorer = StyleScorer.from_pool_dir(STARTER_POOL_DIR)
    pool = ReferencePool.load(STARTER_POOL_DIR)
    love = [scorer.score(pool.png(e)) for e in pool.entries("love")]
    okay = [scorer.score(pool.png(e)) for e in pool.entries("okay")]
    weak = {name: scorer.score(png) for name, png in weak_paintings().items()}
    assert weak["blank"] == 0.0
    assert min(love) > max(weak.values()), (love, weak)
    assert sum(love) / len(love) > sum(okay) / len(okay)
    assert all(0.0 <= s <= 1.0 for s in love + okay + list(weak.values()))


def test_style_is_deterministic_and_resolution_independent():
    pool = ReferencePool.load(STARTER_POOL_DIR)
    profile = StyleProfile.from_pngs([pool.png(e) for e in pool.entries("love")])
    png = pool.png(pool.entries("love")[0])
    half = png_of(Image.open(io.BytesIO(png)).resize((300, 300), Image.LANCZOS))
    assert style_score(png, profile) == style_score(png, profile)
    assert style_score(half, profile) == pytest.approx(style_score(png, profile), abs=0.1)
    restored = StyleProfile.from_json(profile.to_json())
    assert style_score(png, restored) == pytest.approx(style_score(png, profile))


def test_style_scorer_returns_none_without_an_image():
    scorer = StyleScorer.from_pool_dir(STARTER_POOL_DIR)
    assert scorer.score(None) is None
    assert scorer.score(b"not a png") is None


def test_offline_scorer_end_to_end():
    pool = ReferencePool.load(STARTER_POOL_DIR)
    scorer = RewardScorer(load_preset("style-offline"), style=style_image_scorer(StyleScorer.from_pool_dir(STARTER_POOL_DIR)))
    entry = pool.entries("love")[0]
    paintings = [
        PaintingToScore(pool.png(entry), pool.source(entry), passed=True, subject=entry.subject),
        PaintingToScore(None, "function setup(", passed=False),
        PaintingToScore(None, pool.source(entry), passed=True),  # passed but no image: style is None
    ]
    good, failed, lost = scorer.score_many_sync(paintings)
    assert set(good.components) == {"gate", "length", "style"}
    assert good.total == pytest.approx(0.05 + 0.05 * good.components["length"] + 0.9 * good.components["style"])
    assert failed.total == 0.0 and "style" not in failed.components
    assert lost.total == 0.0  # no image means the gate did not pass


def test_image_scorer_crash_is_none_not_zero():
    async def broken(pngs, subjects):
        raise ConnectionError("scorer box went away")

    pool = ReferencePool.load(STARTER_POOL_DIR)
    entry = pool.entries("love")[0]
    scorer = RewardScorer(load_preset("hps-only"), hps=broken)
    (result,) = asyncio.run(scorer.score_many([PaintingToScore(pool.png(entry), pool.source(entry), True)]))
    assert result.components["hpsv3"] is None
    assert result.total is None


def test_judge_led_mix_through_a_real_http_judge():
    """The mixer, the seeded reference draw and the HTTP judge together, on loopback."""
    from fake_openai_server import FakeOpenAIServer, prefer_image
    from rewards.judge import HttpJudge, JudgeConfig

    pool = ReferencePool.load(STARTER_POOL_DIR)
    candidate = pool.entries("love")[0]
    candidate_png = pool.png(candidate)
    seen = []

    async def hps(pngs, subjects):  # a scorer double: this test is about the judge path
        seen.extend(subjects)
        return [0.5] * len(pngs)

    with FakeOpenAIServer(prefer_image(candidate_png)) as server:
        judge = HttpJudge(JudgeConfig(base_url=server.base_url, model="fake-judge", token="t0ken", max_concurrency=2))
        scorer = RewardScorer(load_preset("judge-led"), judge=judge, pool=pool, hps=hps)
        paintings = [PaintingToScore(candidate_png, pool.source(candidate), True, subject="harbour", group_seed=3)] * 2
        first, second = scorer.score_many_sync(paintings)
        judge.close()
        requests = server.chat_requests()
    assert first.components["judge"] == 1.0  # won both orders against every reference
    assert first.references == second.references and len(first.references) == 4
    expected = 0.05 + 0.05 * first.components["length"] + 0.60 * 1.0 + 0.30 * 0.5
    assert first.total == pytest.approx(expected)
    assert all(r.bearer_token == "t0ken" for r in requests)
    assert seen == ["harbour", "harbour"]
