"""The pool curation app: `pool build` stages candidates, `pool serve` rates them in real Chromium."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from helpers import ROOT, SMALL_SKETCH, running_server, small_sketch_with
from fake_openai_server import FakeOpenAIServer, FakeReply
from rewards.pool import CANDIDATE, ReferencePool
from curation.app import create_pool_app
from curation.build import build
from watercolour.cli import main
from env.errors import UsageError

COLOURS = ["#d6362b", "#2b6cb0", "#e3a72f", "#3f8f4e", "#7c3aed"]


def build_args(pool: Path, **overrides) -> SimpleNamespace:
    values = dict(subject="two circles", pool=str(pool), source=None, policy=None, endpoint=None,
                  endpoint_model="default", token=None, count=2, max_tokens=2000, temperature=1.0, seed=1,
                  hps_url=None, backend=None, deadline=60.0)
    values.update(overrides)
    return SimpleNamespace(**values)


@pytest.fixture(scope="module")
def staged_pool(tmp_path_factory) -> Path:
    sketches = tmp_path_factory.mktemp("sketches")
    for colour in COLOURS:
        (sketches / f"circles {colour[1:]}.js").write_text(SMALL_SKETCH.replace("#d6362b", colour))
    (sketches / "label.js").write_text(small_sketch_with("text('hi', 10, 10);"))  # fails the gate
    (sketches / "again.js").write_text(SMALL_SKETCH)  # the same painting as the first red one
    (sketches / "notes.csv").write_text("ignored")
    pool = tmp_path_factory.mktemp("pool") / "circles"
    report = build(build_args(pool, source=str(sketches)))
    assert len(report.staged) == 5 and report.duplicates == 1 and list(report.failed) == ["label"]
    return pool


def copy_pool(source: Path, target: Path) -> Path:
    import shutil

    shutil.copytree(source, target)
    return target


def test_build_stages_passing_sketches_as_candidates_with_coverage(staged_pool):
    pool = ReferencePool.load(staged_pool)
    entries = pool.entries()
    assert {e.tier for e in entries} == {CANDIDATE} and len(entries) == 5
    for entry in entries:
        assert entry.subject == "two circles" and 0.005 < entry.paint_coverage < 1
        assert pool.png(entry).startswith(b"\x89PNG") and "brush.circle" in pool.source(entry)
        assert len(entry.extra["sha256"]) == 64
    # Candidates never reach the judge or the style reward.
    assert pool.draw(seed=0) == [] and pool.counts()["love"] == 0


@pytest.mark.slow  # 5 s
def test_build_from_an_openai_compatible_endpoint(tmp_path):
    reply = FakeReply.content(f"Here you go:\n```js\n{SMALL_SKETCH.replace('#2b6cb0', '#123456')}```")
    with FakeOpenAIServer(rule=lambda request: reply) as server:
        report = build(build_args(tmp_path / "pool", endpoint=server.base_url, endpoint_model="painter", count=2))
        asked = server.chat_requests()
    assert len(asked) == 2 and asked[0].model == "painter" and "two circles" in asked[0].text
    # Same reply, same seed-independent painting? No: each request has its own render seed.
    assert len(report.staged) + report.duplicates == 2 and len(report.staged) >= 1
    # The episodes are a run directory in the pool folder, replayable like a training run's, and
    # each candidate names its episode.
    [run_dir] = (tmp_path / "pool" / "runs").iterdir()
    for entry in ReferencePool.load(tmp_path / "pool").entries():
        assert entry.extra["origin"].startswith(f"{run_dir}:1-0-")
    assert main(["replay", str(run_dir), "--verify"]) == 0
    with pytest.raises(UsageError, match="exactly one of"):
        build(build_args(tmp_path / "pool", endpoint=server.base_url, source=str(tmp_path)))


@pytest.mark.slow  # warm-started tiny policy
def test_build_from_a_local_policy(dense_policy, tmp_path):
    report = build(build_args(tmp_path / "pool", policy=str(dense_policy), count=3, max_tokens=320, temperature=0.5))
    assert len(report.staged) + report.duplicates + len(report.failed) == 3
    entries = ReferencePool.load(tmp_path / "pool").entries()
    assert len(entries) == len(report.staged)
    assert all(e.tier == CANDIDATE and e.generator.startswith("policy ") for e in entries)


def open_app(playwright, url: str):
    from env.renderer import find_chromium

    browser = playwright.chromium.launch(executable_path=find_chromium())
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.goto(url)
    page.wait_for_selector("body[data-ready='true']")
    return browser, page


def tiers_on_disk(pool_dir: Path) -> dict[str, str]:
    return {e.id: e.tier for e in ReferencePool.load(pool_dir).entries()}


def card_tiers(page) -> dict[str, str]:
    return page.evaluate("() => Object.fromEntries([...document.querySelectorAll('.card')]"
                         ".map(c => [c.dataset.id, c.querySelector('.tier').textContent]))")


def test_rate_with_keyboard_and_clicks_undo_and_reload(staged_pool, tmp_path):
    from playwright.sync_api import sync_playwright

    pool_dir = copy_pool(staged_pool, tmp_path / "pool")
    order = [e.id for e in ReferencePool.load(pool_dir).entries()]
    with running_server(create_pool_app(pool_dir)) as url, sync_playwright() as playwright:
        browser, page = open_app(playwright, url)
        try:
            assert page.locator(".card").count() == 5 and page.locator(".card img").count() == 5
            loaded = page.evaluate("() => [...document.images].filter(i => i.complete && i.naturalWidth > 0).length")
            assert loaded == 5
            page.keyboard.press("1")                       # card 0: love, focus moves to card 1
            page.wait_for_function("() => document.querySelector('.card').classList.contains('tier-love')")
            page.keyboard.press("3")                       # card 1: reject, focus to card 2
            page.keyboard.press("ArrowRight")              # skip card 2
            page.keyboard.press("2")                       # card 3: okay
            page.locator(".card").nth(4).locator("button[data-tier='love']").click()  # card 4 by click
            page.wait_for_function("() => document.querySelectorAll('.card.tier-candidate').length === 1")
            page.keyboard.press("u")                       # undo the click: card 4 back to candidate
            page.wait_for_function("() => document.querySelectorAll('.card.tier-candidate').length === 2")
            page.wait_for_selector("body[data-pending='0']")  # every rating has reached the server
            expected = {order[0]: "love", order[1]: "reject", order[2]: CANDIDATE, order[3]: "okay", order[4]: CANDIDATE}
            assert tiers_on_disk(pool_dir) == expected
            page.wait_for_function("() => [...document.querySelectorAll('#tier-counts td')].map(td => td.textContent)"
                                   ".join(' ') === 'love 1 okay 1 reject 1 candidate 2 total 5'")

            # Focus view: the painting and its sketch source side by side.
            page.keyboard.press("Enter")
            page.wait_for_function("() => document.getElementById('focus-source').textContent.includes('createCanvas')")
            assert page.locator("#focus").is_visible()
            page.keyboard.press("Escape")
            assert not page.locator("#focus").is_visible()

            # Filters: candidates only, then a coverage window that excludes everything.
            page.select_option("#filter-tier", CANDIDATE)
            assert page.locator(".card").count() == 2
            page.select_option("#filter-tier", "")
            page.fill("#filter-min", "0.99")
            page.dispatch_event("#filter-min", "change")
            assert page.locator(".card").count() == 0

            page.reload()
            page.wait_for_selector("body[data-ready='true']")
            assert card_tiers(page) == expected
            screenshot = page.screenshot()
        finally:
            browser.close()
    assert screenshot.startswith(b"\x89PNG")
    log = [json.loads(line) for line in (pool_dir / "ratings.jsonl").read_text().splitlines()]
    assert [(r["id"], r["from"], r["to"]) for r in log] == [
        (order[0], CANDIDATE, "love"), (order[1], CANDIDATE, "reject"), (order[3], CANDIDATE, "okay"),
        (order[4], CANDIDATE, "love"), (order[4], "love", CANDIDATE)]


def test_two_pages_rating_at_once_lose_nothing(staged_pool, tmp_path):
    from playwright.sync_api import sync_playwright

    pool_dir = copy_pool(staged_pool, tmp_path / "pool")
    ids = [e.id for e in ReferencePool.load(pool_dir).entries()]
    rate_all = """async ([ids, tier]) => Promise.all(ids.map(id => fetch('/api/rate', {method: 'POST',
        headers: {'Content-Type': 'application/json'}, body: JSON.stringify({id, tier})}).then(r => r.status)))"""
    with running_server(create_pool_app(pool_dir)) as url, sync_playwright() as playwright:
        browser, first = open_app(playwright, url)
        try:
            second = browser.new_page()
            second.goto(url)
            second.wait_for_selector("body[data-ready='true']")
            # Both pages fire their ratings at the same moment, many requests in flight at once.
            first_done = first.evaluate_handle(rate_all, [ids[:3] * 4, "love"])
            statuses = second.evaluate(rate_all, [ids[3:] * 4, "okay"])
            assert set(statuses) == {200} and set(first_done.json_value()) == {200}
            assert tiers_on_disk(pool_dir) == {**{i: "love" for i in ids[:3]}, **{i: "okay" for i in ids[3:]}}
            # The other page picks up the change by polling, without a reload.
            first.wait_for_function("() => document.querySelectorAll('.card.tier-okay').length === 2", timeout=10000)
        finally:
            browser.close()
    assert len((pool_dir / "ratings.jsonl").read_text().splitlines()) == 20


def test_missing_images_and_corrupt_lines_are_reported_and_kept(staged_pool, tmp_path):
    from playwright.sync_api import sync_playwright

    pool_dir = copy_pool(staged_pool, tmp_path / "pool")
    entries = ReferencePool.load(pool_dir).entries()
    (pool_dir / entries[0].file).unlink()
    corrupt = '{"file": "candidate/x.png", "tier": "superb"'  # cut short, and an unknown tier
    with (pool_dir / "manifest.jsonl").open("a") as manifest:
        manifest.write(corrupt + "\n")
    with pytest.raises(ValueError, match="corrupt pool manifest"):
        ReferencePool.load(pool_dir)  # training refuses a corrupt pool outright
    with running_server(create_pool_app(pool_dir)) as url, sync_playwright() as playwright:
        stats = httpx.get(f"{url}/api/stats").json()
        assert stats["missing_images"] == [entries[0].id] and stats["corrupt_lines"][0]["line"] == 6
        assert httpx.get(f"{url}/api/image/{entries[0].id}").json()["error"] == "missing_image"
        assert httpx.get(f"{url}/api/image/no-such-entry").status_code == 404
        assert httpx.get(f"{url}/api/image/..%2F..%2Fmanifest.jsonl").status_code == 404
        bad = httpx.post(f"{url}/api/rate", json={"id": entries[1].id, "tier": "superb"})
        assert bad.status_code == 422 and bad.json()["detail"]["error"] == "unknown_tier"
        browser, page = open_app(playwright, url)
        try:
            assert page.locator(".card .missing").count() == 1
            banner = page.locator("#problems").inner_text()
            assert "missing on disk" in banner and "line 6 is corrupt" in banner
            page.locator(".card").nth(1).locator("button[data-tier='okay']").click()
            page.wait_for_function("() => document.querySelectorAll('.card.tier-okay').length === 1")
            page.wait_for_selector("body[data-pending='0']")
        finally:
            browser.close()
    lines = (pool_dir / "manifest.jsonl").read_text().splitlines()
    assert corrupt in lines and len(lines) == 6  # the corrupt line survived the rewrite
    assert ReferencePool.load(pool_dir, keep_corrupt=True).entry(entries[1].id).tier == "okay"


def test_serve_refuses_a_folder_that_is_not_a_pool_and_non_loopback_hosts(tmp_path):
    for extra in ([], ["--host", "0.0.0.0"]):
        completed = subprocess.run([sys.executable, "-m", "watercolour.cli", "pool", "serve", str(tmp_path), *extra],
                                   cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert completed.returncode != 0
        assert ("not a pool" if not extra else "127.0.0.1 only") in completed.stderr
