"""Capability confinement of sketches (issue 13), with real Chromium and the pinned SES.

The run-time layer is tested on its own here: sketches go straight to the renderer, without
the static gate in front, so every hostile class must be stopped (and named) by the page.
Fixtures in tests/fixtures/sketches/sandbox_hostile/ carry `// expect: <code>` like the
other hostile folders.
"""

from __future__ import annotations

import base64
import io
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from helpers import FIXTURES, SMALL_SKETCH, small_sketch_with
from env.contract import REASON_CODES, SketchContract
from env.renderer import SyncRenderer, png_size

SANDBOX_FIXTURES = FIXTURES / "sketches" / "sandbox_hostile"


def _fixtures():
    for path in sorted(SANDBOX_FIXTURES.glob("*.js")):
        expected = re.search(r"//\s*expect:\s*(\w+)", path.read_text()).group(1)
        yield pytest.param(path, expected, id=path.stem)


def test_there_are_sandbox_fixtures_for_every_class():
    names = {path.stem for path in SANDBOX_FIXTURES.glob("*.js")}
    assert len(names) >= 20
    for prefix in ("dom_", "navigate_", "canvas_", "register_addon", "getcontext", "iframe", "crypto", "eval"):
        assert any(name.startswith(prefix) for name in names), prefix
    for path in SANDBOX_FIXTURES.glob("*.js"):
        expected = re.search(r"//\s*expect:\s*(\w+)", path.read_text()).group(1)
        assert expected in REASON_CODES, path.name


@pytest.mark.parametrize("path, expected", list(_fixtures()))
def test_sandbox_hostile_fixtures_are_stopped_at_run_time(path, expected, renderer):
    deadline = 20.0
    started = time.perf_counter()
    result = renderer.render(path.read_text(), seed=1, deadline_s=deadline)
    elapsed = time.perf_counter() - started
    assert expected in result.violations, (result.violations, result.errors)
    assert not result.passed
    assert result.infrastructure_error is None
    # Navigation and every other attempt fail at once, well inside the deadline (the old
    # runtime let a navigation run into render_timeout after the whole deadline).
    assert elapsed < 10, elapsed


def test_renderer_keeps_serving_after_the_hostile_fixtures(renderer):
    result = renderer.render(SMALL_SKETCH, seed=1)
    assert result.passed, (result.violations, result.errors)


CLOCK_READER = """async function setup() {
  createCanvas(200, 200, WEBGL);
  randomSeed(Date.now());
  noiseSeed(new Date().getTime() % 1000);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background('#f8f1e4');
  const t0 = performance.now();
  let spins = 0;
  while (performance.now() - t0 < 25) spins++;  // a time budget: ends after 25 calls
  brush.noStroke();
  brush.fill('#2b6cb0', 150);
  brush.circle(60 + random(80), 60 + (Date.now() % 97), 20 + spins + noise(1) * 10);
  brush.fill('#d6362b', 150);
  brush.circle(100 + Math.random() * 40, 130, 25 + String(Date()).length % 7);
}
"""


def test_clock_readers_render_byte_identically(renderer):
    first = renderer.render(CLOCK_READER, seed=7)
    second = renderer.render(CLOCK_READER, seed=7)
    assert first.passed, (first.violations, first.errors)
    assert first.png == second.png
    other_seed = renderer.render(CLOCK_READER, seed=8)
    assert other_seed.png != first.png  # Math.random still follows the render's seed


def test_the_clock_is_the_documented_one(renderer):
    body = """
  const checks = [Date.now() === 1704067200000, new Date().toISOString() === '2024-01-01T00:00:00.000Z',
    new Date(5).getTime() === 5, performance.now() === 1, performance.now() === 2];
  if (checks.some((ok) => !ok)) throw new Error('clock: ' + checks.join(','));"""
    result = renderer.render(small_sketch_with(body), seed=1)
    assert result.passed, (result.violations, result.errors)


def test_library_objects_never_reach_the_sketch(renderer):
    # p5 calls return the instance or renderer, brush.circle returns its Plot: all lead to
    # the page. Only primitives come back; arguments are made primitive on the way in.
    body = """
  const returned = [brush.circle(50, 50, 10), translate(0, 0), angleMode(DEGREES), push(), pop()];
  if (returned.some((v) => v !== undefined)) throw new Error('leaked ' + typeof returned.find((v) => v !== undefined));
  const palette = [{ c: '#123456' }, { c: '#654321' }];
  const pick = random(palette);
  if (!palette.includes(pick)) throw new Error('random(list) did not return an element of the list');
  let called = 0;
  brush.circle({ valueOf() { called++; return 120; } }, 100, 10);
  if (called !== 1) throw new Error('valueOf ran ' + called + ' times');
  if (typeof window !== 'object' || window.brush !== brush) throw new Error('window is not the sketch global');"""
    result = renderer.render(small_sketch_with(body), seed=1)
    assert result.violations == ["external_access"], (result.violations, result.errors)  # reading window
    assert not any("leaked" in e or "did not" in e or "valueOf ran" in e for e in result.errors), result.errors


def test_allowed_sketches_keep_their_pixels_with_helpers_named_like_p5(renderer):
    # Top-level declarations live in the sketch's own scope now: a helper called `line` or
    # `rect` is the sketch's, and p5's global binding no longer needs working around.
    code = SMALL_SKETCH.replace("function draw() {", "function rect(x) { return x * 2; }\nfunction draw() {\n  const r = rect(10);")
    result = renderer.render(code, seed=3)
    assert result.passed, (result.violations, result.errors)
    assert result.png == renderer.render(SMALL_SKETCH, seed=3).png


# --- causes and their classification -----------------------------------------------------

SKETCH_CAUSES = [
    # (cause, draw body, expected violation)
    ("js_error", "undefinedHelper(3);", "render_error"),
    ("timeout", "while (true) {}", "render_timeout"),
    ("heap_bomb", "const a = []; for (let i = 0; i < 1e9; i++) a.push({ i });", "render_crashed"),
    ("typed_array_bomb", "const a = []; for (let i = 0; i < 16; i++) a.push(new Float64Array(2 ** 24));", "memory_limit"),
    ("rss_bomb", "const s = new Float64Array(2 ** 23); const b = []; for (let i = 0; i < 64; i++) { const c = s.slice(); c.fill(i); b.push(c); }", "memory_limit"),
    ("canvas_too_large", "createCanvas(20000, 20000, WEBGL);", "canvas_too_large"),
    ("navigation", "location.href = 'http://127.0.0.1:9/away';", "external_access"),
    ("blank", "background('#f8f1e4');", "blank_canvas"),
    ("forbidden_call", "ellipse(1, 2, 3, 4);", "bare_primitive"),
    ("patched_builtin", "const j = JSON; j.stringify = () => '{}';", "dynamic_code"),
]


@pytest.mark.parametrize("cause, body, expected", SKETCH_CAUSES, ids=[c[0] for c in SKETCH_CAUSES])
def test_every_cause_a_sketch_can_produce_is_a_sketch_failure(cause, body, expected, renderer):
    if cause == "blank":
        code = SMALL_SKETCH.replace("brush.circle", "Math.max")  # nothing painted at all
    else:
        code = small_sketch_with("\n  " + body)
    started = time.perf_counter()
    # V8 thrashes its collector near the 512 MB heap limit before it gives up (~12 s measured).
    result = renderer.render(code, seed=1, deadline_s=30 if cause == "heap_bomb" else 6)
    assert expected in result.violations, (cause, result.violations, result.errors)
    assert not result.passed
    assert result.infrastructure_error is None and "infrastructure_error" not in result.violations
    assert time.perf_counter() - started < 40
    follow_up = renderer.render(SMALL_SKETCH, seed=1)
    assert follow_up.passed, (cause, follow_up.violations)  # the pool keeps serving


def _png(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 40, 40)).save(buffer, format="PNG")
    return buffer.getvalue()


def _forged_header(width: int, height: int) -> bytes:
    # A real small PNG whose IHDR claims another size: what a 20000x20000 canvas would send.
    data = bytearray(_png(4, 4))
    data[16:20] = width.to_bytes(4, "big")
    data[20:24] = height.to_bytes(4, "big")
    return bytes(data)


PAGE_CAUSES = [
    # (cause, page report, expected violation, infrastructure?)
    ("huge_png", {"png": "data:image/png;base64," + base64.b64encode(_forged_header(20000, 20000)).decode()}, "canvas_too_large", False),
    ("corrupt_png", {"png": "data:image/png;base64," + base64.b64encode(_forged_header(8, 8)).decode()}, "render_error", False),
    ("not_png", {"png": "data:image/png;base64," + base64.b64encode(b"GIF89a" + bytes(40)).decode()}, "render_error", False),
    ("no_canvas", {"png": None}, "render_error", False),
    ("sketch_violation", {"png": None, "violations": [{"code": "dom_access", "name": "document"}]}, "dom_access", False),
]


@pytest.mark.parametrize("cause, report, expected, infrastructure", PAGE_CAUSES, ids=[c[0] for c in PAGE_CAUSES])
def test_page_reports_map_to_classifications(cause, report, expected, infrastructure):
    from env.renderer import RendererPool

    pool = RendererPool(size=1)  # not started: _result_from_page is pure decoding
    result = pool._result_from_page({"endedAs": "drawn", "violations": [], "errors": [], **report}, time.perf_counter())
    assert expected in result.violations, (cause, result.violations, result.errors)
    assert result.infrastructure_failed is infrastructure
    assert not result.passed


def test_png_size_reads_the_header_only():
    assert png_size(base64.b64encode(_png(30, 20)).decode()) == (30, 20)
    assert png_size(base64.b64encode(_forged_header(20000, 20000)).decode()) == (20000, 20000)
    assert png_size("not base64 at all!") is None


def test_our_own_failures_are_infrastructure_errors(tmp_path):
    with SyncRenderer(size=1, executable=str(tmp_path / "no-such-chromium")) as broken:
        result = broken.render(SMALL_SKETCH, seed=1)
    assert result.infrastructure_failed and result.violations == ["infrastructure_error"]


def test_the_contract_bounds_are_configurable():
    contract = SketchContract.from_mapping({"max_canvas_side": 300, "max_typed_array_bytes": 1024})
    assert (contract.max_canvas_side, contract.max_typed_array_bytes) == (300, 1024)
    with pytest.raises(ValueError):
        SketchContract.from_mapping({"max_canvas_side": 0})
    with SyncRenderer(size=1, contract=contract, deadline_s=30) as small:
        too_big = small.render(SMALL_SKETCH.replace("200, 200", "400, 400"), seed=1)
        buffer = small.render(small_sketch_with("\n  new Float32Array(1000);"), seed=1)
        fine = small.render(SMALL_SKETCH, seed=1)
    assert "canvas_too_large" in too_big.violations
    assert "memory_limit" in buffer.violations
    assert fine.passed, fine.violations


# --- property test: any mix of hostile statements is a sketch failure, never ours --------

HOSTILE_STATEMENTS = [
    "Promise.resolve().then(() => { const t = { b: brush }; t.b[['re', 'ct'].join('')](0, 0, 9, 9); });",
    "brush.circle({ valueOf() { return Object.getPrototypeOf(() => 0).constructor('return 1')(); } }, 1, 1);",
    "Object.getPrototypeOf(() => 0).apply = () => 0;",
    "JSON.stringify = () => '{}';",
    "Array.prototype.push = () => 0;",
    "document.body.after('x');",
    "document.createRange().createContextualFragment('<b>x</b>');",
    "new Image().src = 'http://127.0.0.1:9/i';",
    "navigator.sendBeacon('http://127.0.0.1:9/b', 'x');",
    "p5.registerAddon(() => 0);",
    "HTMLCanvasElement.prototype.getContext = () => null;",
    "location.href = 'http://127.0.0.1:9/n';",
    "window.open('http://127.0.0.1:9/p');",
    "crypto.getRandomValues(new Uint8Array(2));",
    "setTimeout(() => 0, 0);",
    "globalThis.fetch('http://127.0.0.1:9/f');",
    "createCanvas(30000, 10, WEBGL);",
    "new Compartment().evaluate('1');",
]


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(HOSTILE_STATEMENTS), min_size=1, max_size=3),
       st.lists(st.booleans(), min_size=3, max_size=3))
def test_any_mix_of_hostile_statements_fails_with_a_reason(renderer, statements, wrapped):
    # Some statements run inside try/catch. A caught attempt on a missing capability is
    # recorded; a caught write to a frozen built-in changes nothing and leaves no trace, so
    # such a sketch may pass, but then its picture is exactly the allowed calls' picture.
    body = "\n".join(f"  try {{ {s} }} catch (e) {{}}" if w else f"  {s}" for s, w in zip(statements, wrapped))
    result = renderer.render(small_sketch_with("\n" + body), seed=1, deadline_s=15)
    assert result.infrastructure_error is None
    if result.passed:
        assert result.png == renderer.render(SMALL_SKETCH, seed=1).png, statements
    else:
        assert set(result.violations) - {"render_error", "blank_canvas"}, (statements, result.violations, result.errors)


def test_lettering_is_judged_by_the_text_functions_only(renderer):
    # The decision (README, "The sketch contract and the gate"): p5's text functions are a
    # violation; letters painted with allowed brush shapes are not, and the feedback says so.
    from env.core import SketchOutcome
    from env.feedback import feedback_text

    assert "lettering" not in REASON_CODES["text_label"] and "text function" in REASON_CODES["text_label"]
    outcome = SketchOutcome(code="", passed=False, violations=["text_label"], errors=[], paint_fraction=0.1,
                            render_ms=1, png=None)
    assert REASON_CODES["text_label"] in feedback_text(outcome, turn=1, turns_left=1)
    letter_h = """
  brush.fill('#2b2230', 200);
  for (const x of [60, 120]) { brush.beginShape(0); brush.vertex(x, 40); brush.vertex(x + 12, 40);
    brush.vertex(x + 12, 160); brush.vertex(x, 160); brush.endShape(true); }
  brush.beginShape(0); brush.vertex(60, 95); brush.vertex(132, 95); brush.vertex(132, 107);
  brush.vertex(60, 107); brush.endShape(true);"""
    assert renderer.render(small_sketch_with(letter_h), seed=1).passed


# --- caught writes to built-ins: judged from the code ---------------------------------------

# At run time every one of these throws (lockdown froze the target) and the try/catch swallows
# it, so the runtime sees nothing; the static gate names each as dynamic_code.
CAUGHT_PATCHES = [
    "Array.prototype.map = null;",
    "Math.random = () => 0;",
    "JSON.parse = null;",
    "const A = Array; A.prototype.push = null;",
    "const b = brush; b.fill = null;",
    "brush.fill = null;",
    "Object.defineProperty(Array.prototype, 'm', { value: 1 });",
    "Object.assign(Math, { random: () => 0 });",
    "Object.setPrototypeOf(brush, null);",
    "delete Math.random;",
    "Math.PI++;",
    "[].constructor.prototype.x = 1;",
    "({}).__proto__.y = 2;",
    "String['prototype'].z = 1;",
]


@pytest.mark.parametrize("statement", CAUGHT_PATCHES)
def test_a_caught_write_to_a_built_in_is_still_dynamic_code(statement):
    from env.gate import static_gate

    verdict = static_gate(f"```js\n{small_sketch_with(f'  try {{ {statement} }} catch (e) {{}}')}```")
    assert not verdict.passed and "dynamic_code" in verdict.violations, (statement, verdict.violations)


def test_writes_to_the_sketchs_own_objects_are_allowed_and_the_evaluator_rejects_a_caught_patch(evaluator):
    from env.gate import static_gate

    own = ("  const layer = { colour: '#ffffff', points: [] }; layer.colour = '#2f5d8a'; layer.points[0] = 1;"
           " layer.points[0]++; delete layer.extra; Object.assign(layer, { alpha: 90 });"
           " Object.defineProperty(layer, 'x', { value: 1 });")
    assert static_gate(f"```js\n{small_sketch_with(own)}```").passed
    outcome = evaluator.evaluate(f"```js\n{small_sketch_with('  try { Math.random = () => 0; } catch (e) {}')}```")
    assert not outcome.passed and "dynamic_code" in outcome.violations and not outcome.infrastructure_failed
