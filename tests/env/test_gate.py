"""Tests for the sketch contract and the static gate.

Fixtures live in tests/fixtures/sketches/:
- good/             sketches (or whole replies) that must pass;
- hostile/          first line `// expect: <code>`, the rest is the reply; the code must be reported;
- runtime_hostile/  same header, but the sketch is statically clean: only the run-time
                    layer can catch it, so the static gate must let it through.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from env.contract import (
    ALLOWED_P5_NAMES,
    DEFAULT_BRUSH_METHODS,
    KNOWN_BRUSH_METHODS,
    P5_TEXT_FUNCTIONS,
    REASON_CODES,
    RUNTIME_REASON_CODES,
    STATIC_REASON_CODES,
    SketchContract,
)
from env.gate import ExtractResult, GateVerdict, extract_sketch, static_gate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sketches"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sketches"

SETUP = (
    "async function setup() {\n"
    "  createCanvas(600, 600, WEBGL);\n"
    "  brush.scaleBrushes(3);\n"
    "  angleMode(DEGREES);\n"
    "  noLoop();\n"
    "}\n"
)


def sketch_with(draw_body: str, prelude: str = "") -> str:
    """A minimal valid sketch whose draw() also runs `draw_body`."""
    return (
        prelude
        + SETUP
        + "function draw() {\n"
        + "  translate(-width / 2, -height / 2);\n"
        + "  background('#f8f1e4');\n"
        + "  brush.fill('#d6362b', 150);\n"
        + "  brush.circle(300, 300, 80);\n"
        + draw_body
        + "\n}\n"
    )


def read_fixture(path: Path) -> tuple[str, str | bytes]:
    raw = path.read_bytes()
    header, _, rest = raw.partition(b"\n")
    header_text = header.decode("utf-8")
    assert header_text.startswith("// expect:"), f"{path.name} lacks its expect header"
    expected = header_text.split(":", 1)[1].strip()
    reply: str | bytes = rest if path.suffix == ".bin" else rest.decode("utf-8")
    return expected, reply


def fixture_files(folder: str) -> list[Path]:
    return sorted(path for path in (FIXTURES / folder).iterdir() if path.is_file())


# --------------------------------------------------------------------------------------
# Contract
# --------------------------------------------------------------------------------------


def test_reason_codes_cover_the_contract() -> None:
    required = {
        "no_code", "not_utf8", "too_long", "syntax_error", "missing_setup", "not_webgl",
        "brush_method_not_allowed", "unknown_brush_method", "bare_primitive", "text_label",
        "external_access", "dynamic_code", "dom_access", "timer", "storage",
        "no_painting_calls", "p5_function_not_allowed", "render_timeout", "render_crashed",
        "render_error", "blank_canvas", "infrastructure_error",
    }
    assert required <= set(REASON_CODES)
    assert "missing_draw" not in REASON_CODES
    assert set(STATIC_REASON_CODES).isdisjoint(RUNTIME_REASON_CODES)
    for code, explanation in REASON_CODES.items():
        assert explanation and "\n" not in explanation, code


def test_contract_defaults() -> None:
    contract = SketchContract()
    assert contract.brush_methods == DEFAULT_BRUSH_METHODS
    assert len(DEFAULT_BRUSH_METHODS) == 10
    assert contract.p5_names == ALLOWED_P5_NAMES
    assert (contract.max_reply_bytes, contract.max_code_chars) == (200_000, 40_000)
    assert contract.min_paint_fraction == 0.005
    assert set(DEFAULT_BRUSH_METHODS) <= set(KNOWN_BRUSH_METHODS)
    assert {"rect", "hatch", "wash", "Polygon"} <= set(KNOWN_BRUSH_METHODS) - set(DEFAULT_BRUSH_METHODS)
    assert {"text", "textFont", "textSize", "loadFont", "textToPoints"} <= set(P5_TEXT_FUNCTIONS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        contract.max_code_chars = 1  # type: ignore[misc]


def test_contract_from_mapping() -> None:
    contract = SketchContract.from_mapping(
        {"brush_methods": list(DEFAULT_BRUSH_METHODS) + ["rect"], "max_code_chars": 1000, "min_paint_fraction": 0}
    )
    assert contract.brush_methods[-1] == "rect"
    assert isinstance(contract.brush_methods, tuple)
    assert contract.max_code_chars == 1000
    assert contract.min_paint_fraction == 0.0
    assert contract.p5_names == ALLOWED_P5_NAMES
    assert SketchContract.from_mapping(None) == SketchContract()
    assert SketchContract.from_mapping({}) == SketchContract()


@pytest.mark.parametrize(
    "mapping",
    [
        {"brush_method": ["fill"]},  # typo in the key
        {"brush_methods": "fill"},  # a string, not a list
        {"brush_methods": ["fill", "recct"]},  # not a p5.brush export
        {"p5_names": ["ok", "not a name"]},
        {"max_reply_bytes": 0},
        {"max_code_chars": "40000"},
        {"min_paint_fraction": 1.5},
    ],
)
def test_contract_rejects_bad_config(mapping: dict) -> None:
    with pytest.raises(ValueError):
        SketchContract.from_mapping(mapping)


# --------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", fixture_files("good"), ids=lambda path: path.name)
def test_good_sketches_pass(path: Path) -> None:
    verdict = static_gate(path.read_text(encoding="utf-8"))
    assert verdict.passed, verdict.details
    assert verdict.violations == [] and verdict.details == []
    assert 10 <= verdict.stats["n_fill_calls"] <= 30
    assert verdict.stats["n_shapes"] > 0
    assert "createCanvas(600, 600, WEBGL)" in verdict.code


def test_there_are_enough_fixtures() -> None:
    # realistic valid sketches live in examples/sketches (checked below); good/ adds whole replies
    assert len(fixture_files("good")) + len(list(EXAMPLES.glob("*.js"))) >= 3
    assert len(fixture_files("hostile")) >= 30
    assert len(fixture_files("runtime_hostile")) >= 5


@pytest.mark.parametrize("path", fixture_files("hostile"), ids=lambda path: path.name)
def test_hostile_sketches_are_rejected(path: Path) -> None:
    expected, reply = read_fixture(path)
    assert expected in STATIC_REASON_CODES
    verdict = static_gate(reply)
    assert not verdict.passed
    assert expected in verdict.violations, (verdict.violations, verdict.details)
    assert verdict.details


@pytest.mark.parametrize("path", fixture_files("runtime_hostile"), ids=lambda path: path.name)
def test_runtime_only_hostile_sketches_pass_the_static_gate(path: Path) -> None:
    expected, reply = read_fixture(path)
    # A fixture may expect one of several codes ("render_crashed|memory_limit": which limit a
    # heap bomb meets first depends on the machine); each must be a known code.
    assert all(code in REASON_CODES for code in expected.split("|"))
    verdict = static_gate(reply)
    assert verdict.passed, verdict.details


@pytest.mark.parametrize(
    "path",
    sorted(EXAMPLES.glob("*.js")) if EXAMPLES.is_dir() else [],
    ids=lambda path: path.name,
)
def test_project_examples_pass(path: Path) -> None:
    verdict = static_gate(path.read_text(encoding="utf-8"))
    assert verdict.passed, verdict.details


# --------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------

SKETCH = sketch_with("")


def test_extract_fenced_block_with_prose() -> None:
    reply = f"Here is my painting.\n\n```js\n{SKETCH}```\n\nEnjoy the poppies!"
    result = extract_sketch(reply, SketchContract())
    assert isinstance(result, ExtractResult)
    assert result.violations == []
    assert result.code.strip() == SKETCH.strip()


@pytest.mark.parametrize("info", ["javascript", "JavaScript", "", "js title=poppies"])
def test_extract_accepts_js_fence_labels(info: str) -> None:
    result = extract_sketch(f"```{info}\n{SKETCH}```", SketchContract())
    assert result.code is not None and result.code.strip() == SKETCH.strip()


def test_extract_prefers_the_block_defining_setup() -> None:
    helper = "```js\n" + "// a much longer helper block\n" * 40 + "const x = 1;\n```\n"
    reply = helper + f"```js\n{SKETCH}```\n"
    assert extract_sketch(reply, SketchContract()).code.strip() == SKETCH.strip()


def test_extract_falls_back_to_the_longest_block() -> None:
    reply = "```js\nconst a = 1;\n```\n```js\nconst longer = [1, 2, 3];\n```\n"
    assert extract_sketch(reply, SketchContract()).code == "const longer = [1, 2, 3];"


def test_extract_ignores_non_js_blocks() -> None:
    reply = f"```bash\nnpm install p5.brush\n```\n```js\n{SKETCH}```"
    assert extract_sketch(reply, SketchContract()).code.strip() == SKETCH.strip()


def test_extract_drops_think_blocks() -> None:
    thought = "<think>\nmaybe text('draft', 0, 0)?\n```js\ntext('x', 1, 1)\n```\n</think>\n"
    verdict = static_gate(thought + f"```js\n{SKETCH}```")
    assert verdict.passed, verdict.details
    assert "text(" not in verdict.code


def test_extract_handles_a_dangling_think_close() -> None:
    # Templates that open <think> in the prompt leave only the closing tag in the reply.
    reply = "planning with createCanvas(1, 1)\n</think>\n" + f"```js\n{SKETCH}```"
    assert static_gate(reply).passed


def test_unclosed_think_swallows_the_rest() -> None:
    result = extract_sketch(f"<think>\nplanning...\n```js\n{SKETCH}```", SketchContract())
    assert result.code is None and result.violations == ["no_code"]


def test_extract_takes_the_rest_of_an_unclosed_final_fence() -> None:
    result = extract_sketch("Sketch:\n```js\n" + SKETCH + "// cut off here", SketchContract())
    assert result.code.endswith("// cut off here")
    assert static_gate("Sketch:\n```js\n" + SKETCH + "// cut off here").passed


def test_extract_handles_a_fence_glued_to_the_last_line() -> None:
    verdict = static_gate("```js\n" + SKETCH.rstrip() + "```\nDone.")
    assert verdict.passed, verdict.details


def test_extract_accepts_unfenced_code_only_if_it_looks_like_a_sketch() -> None:
    assert static_gate(SKETCH).passed
    assert static_gate("const x = 1;").violations == ["no_code"]


@pytest.mark.parametrize("reply", ["", "   \n\t", b"", "```js\n```", "<think>only thoughts</think>"])
def test_empty_replies_have_no_code(reply: str | bytes) -> None:
    verdict = static_gate(reply)
    assert verdict.violations == ["no_code"] and not verdict.passed and verdict.code is None


def test_bytes_are_decoded_and_a_bom_is_ignored() -> None:
    assert static_gate(("\ufeff```js\n" + SKETCH + "```").encode("utf-8")).passed


@pytest.mark.parametrize("reply", [b"```js\nfunction setup() {}\n\xff```", "function setup() {\ud800}"])
def test_invalid_utf8_is_rejected(reply: str | bytes) -> None:
    verdict = static_gate(reply)
    assert verdict.violations == ["not_utf8"] and verdict.code is None


def test_reply_size_limit_counts_utf8_bytes() -> None:
    contract = SketchContract()
    # 70,000 euro signs are 210,000 bytes: over the limit although only 70,000 characters.
    euros = SKETCH + "// " + "€" * 70_000
    assert static_gate(euros, contract).violations == ["too_long"]
    assert static_gate(euros.encode("utf-8"), contract).violations == ["too_long"]
    assert static_gate("x" * 10_000_000).violations == ["too_long"]


def test_code_size_limit() -> None:
    small = SketchContract(max_code_chars=len(SKETCH) - 10)
    verdict = static_gate(SKETCH, small)
    assert verdict.violations == ["too_long"]
    assert static_gate(SKETCH, SketchContract(max_code_chars=len(SKETCH) + 10)).passed


# --------------------------------------------------------------------------------------
# Gate rules
# --------------------------------------------------------------------------------------


def test_verdict_shape_and_stats() -> None:
    verdict = static_gate(
        sketch_with("  brush.fill('#000', 10);\n  brush.beginShape();\n  brush.vertex(1, 2);\n  brush.endShape();")
    )
    assert isinstance(verdict, GateVerdict)
    assert verdict.passed
    assert verdict.stats == {
        "n_brush_calls": 7,
        "n_fill_calls": 2,
        "n_shapes": 2,
        "brush_methods_used": ["beginShape", "circle", "endShape", "fill", "scaleBrushes", "vertex"],
        "code_chars": len(verdict.code),
    }


def test_details_name_the_line() -> None:
    verdict = static_gate(sketch_with("  brush.rect(1, 2, 3, 4);"))
    rect_line = verdict.code.splitlines().index("  brush.rect(1, 2, 3, 4);") + 1
    assert verdict.details == [f"line {rect_line}: brush.rect is not in the allowlist"]
    assert "rect" in verdict.stats["brush_methods_used"]


def test_violations_are_unique_and_in_source_order() -> None:
    verdict = static_gate(sketch_with("  ellipse(1, 2, 3);\n  text('a', 1, 1);\n  ellipse(4, 5, 6);\n  text('b', 1, 1);"))
    assert verdict.violations == ["bare_primitive", "text_label"]
    assert len(verdict.details) == 4


def test_widened_allowlist_lets_brush_rect_pass() -> None:
    code = sketch_with("  brush.rect(100, 100, 200, 200);")
    assert static_gate(code).violations == ["brush_method_not_allowed"]
    widened = SketchContract(brush_methods=DEFAULT_BRUSH_METHODS + ("rect",))
    assert static_gate(code, widened).passed


def test_widened_allowlist_counts_rect_as_painting() -> None:
    only_rect = SETUP + "function draw() {\n  brush.fill('#000', 50);\n  brush.rect(1, 1, 50, 50);\n}\n"
    assert static_gate(only_rect).violations == ["brush_method_not_allowed", "no_painting_calls"]
    widened = SketchContract(brush_methods=DEFAULT_BRUSH_METHODS + ("rect",))
    assert static_gate(only_rect, widened).passed


def test_widened_p5_names_allow_a_bare_primitive() -> None:
    code = sketch_with("  rotate(30);")
    assert static_gate(code).violations == ["bare_primitive"]
    assert static_gate(code, SketchContract(p5_names=ALLOWED_P5_NAMES + ("rotate",))).passed


@pytest.mark.parametrize(
    "prelude, body",
    [
        # helpers that share a name with p5 functions are the sketch's own
        ("function line(x1, y1, x2, y2) { brush.beginShape(); brush.vertex(x1, y1); brush.vertex(x2, y2); brush.endShape(); }\n",
         "  line(0, 0, 100, 100);"),
        ("function petal(x, y) { brush.circle(x, y, 5); }\n", "  petal(1, 2);"),
        ("", "  const image = [1, 2, 3];\n  const rect = { w: 3 };\n  brush.circle(image[0], rect.w, 4);"),
        ("", "  const text = 'caption';\n  brush.circle(text.length, 1, 1);"),
        ("", "  const ellipse = (x) => brush.circle(x, x, 3);\n  ellipse(40);"),
        ("function scaled(scale, rotate) { return scale * rotate; }\n", "  brush.circle(scaled(2, 3), 1, 1);"),
        # class methods named like p5 primitives, called as methods
        ("class Flower {\n  constructor(x) { this.x = x; this.fill = '#f00'; }\n"
         "  rotate(a) { return this.x + a; }\n  stroke() { brush.fill(this.fill, 90); brush.circle(this.rotate(1), 1, 1); }\n}\n",
         "  new Flower(5).stroke();"),
        # an old-style constructor function
        ("function Leaf(x) { this.x = x; this.size = 4; }\nLeaf.prototype.paint = function () { brush.circle(this.x, 1, this.size); };\n",
         "  new Leaf(3).paint();"),
        # top-level helpers reached through this in draw
        ("function petal(x) { brush.circle(x, x, 2); }\n", "  this.petal(3);"),
        # names like parent or top are fine when the sketch declares them
        ("", "  const top = 10, parent = { x: 1 }, self = 3;\n  brush.circle(top + parent.x + self, 1, 1);"),
    ],
)
def test_user_declared_names_are_not_flagged(prelude: str, body: str) -> None:
    verdict = static_gate(sketch_with(body, prelude))
    assert verdict.passed, verdict.details


def test_a_declaration_only_shadows_inside_its_own_scope() -> None:
    code = sketch_with("  function local() { const ellipse = 1; return ellipse; }\n  local();\n  ellipse(1, 2, 3);")
    assert static_gate(code).violations == ["bare_primitive"]
    code = sketch_with("  { let text = 'x'; brush.circle(text.length, 1, 1); }\n  text('hi', 1, 1);")
    assert static_gate(code).violations == ["text_label"]


def test_modern_javascript_is_not_a_false_positive() -> None:
    body = """
  const colors = ['#e85a3c', '#d6362b', '#f2b5c4'];
  const grid = Array.from({ length: 4 }, (_, y) => Array.from({ length: 4 }, (_, x) => [x, y]));
  for (let k = 0; k < 9; k++) {
    brush.fill(colors[k % 3], 100 + k);
    brush.circle(Math.cos(k) * 50 + 300, Math.sin(k) * 50 + 300, sqrt(k + 1) * 4);
  }
  for (const row of grid) for (const [x, y] of row) brush.circle(x * 100, y * 100, 3);
  const settings = { radius: 4, bleed: null, nested: { alpha: 90 } };
  const { radius, nested: { alpha } = {}, ...rest } = settings;
  const bleed = settings.bleed ?? 0.2;
  const maybe = settings?.missing?.deep ?? radius;
  let counter = 0;
  counter ||= 1;
  counter **= 2;
  const label = `petal-${counter}-${alpha}`;
  brush.fillBleed(bleed, label.length > 3 ? 'out' : 'in');
  const scaleBy = (value, factor = 2) => value * factor;
  function nested(depth) {
    function inner(d) { return d <= 0 ? 0 : 1 + inner(d - 1); }
    return inner(depth);
  }
  outer: for (let i = 0; i < 3; i++) {
    for (let j = 0; j < 3; j++) { if (i * j > 2) break outer; }
  }
  try { JSON.parse('{"a": 1}'); } catch ({ message }) { counter += message.length; }
  switch (counter % 2) { case 0: counter++; break; default: counter--; }
  const big = 1_000_000n;
  const points = [...grid.flat(), [maybe, scaleBy(nested(2))]];
  const lookup = new Map(points.map(([x, y], i) => [i, x + y]));
  for (const key in settings) { if (Object.hasOwn(settings, key)) counter += key.length; }
  for (idx = 0; idx < 2; idx++) { counter += idx; }
  class Petal {
    static count = 0;
    #angle = 0;
    size = radius;
    constructor(angle) { this.#angle = angle; Petal.count++; }
    get tip() { return [cos(this.#angle) * this.size, sin(this.#angle) * this.size]; }
    paint() { const [x, y] = this.tip; brush.circle(x + 300, y + 300, this.size); }
  }
  [0, 90, 180, 270].map((a) => new Petal(a)).forEach((p) => p.paint());
  const seeds = new Float32Array(4).map(() => random());
  brush.circle(lookup.get(0) + seeds[0] + rest.radius ?? 0 + Number(big > 0n), 1, min(2, max(1, noise(1))));
"""
    verdict = static_gate(sketch_with(body))
    assert verdict.passed, verdict.details


def test_setup_may_be_assigned_or_an_arrow() -> None:
    draw = "function draw() { brush.circle(1, 1, 1); }\n"
    for setup in (
        "const setup = async () => { createCanvas(600, 600, WEBGL); };\n",
        "var setup = function () { createCanvas(600, 600, WEBGL); };\n",
        "setup = () => createCanvas(600, 600, WEBGL);\n",
    ):
        verdict = static_gate(setup + draw)
        assert verdict.passed, (setup, verdict.details)
    verdict = static_gate("const setup = 3;\ncreateCanvas(600, 600, WEBGL);\n" + draw)
    assert verdict.violations == ["missing_setup"]


def test_only_setup_is_required_not_draw() -> None:
    only_setup = "function setup() {\n  createCanvas(600, 600, WEBGL);\n  brush.fill('#000', 90);\n  brush.circle(1, 2, 3);\n}\n"
    assert static_gate(only_setup).passed


@pytest.mark.parametrize(
    "body, expected",
    [
        ("  window.fetch('x');", {"external_access"}),
        ("  self.fetch('x');", {"external_access"}),
        ("  const g = globalThis; g.fetch('x');", {"external_access"}),
        ("  top.location.href = 'x';", {"external_access"}),
        ("  this.fetch('x');", {"external_access"}),
        ("  this.text('hi', 1, 1);", {"text_label"}),
        ("  this['ellipse'](1, 2, 3);", {"bare_primitive"}),
        ("  this[`text`]('hi', 1, 1);", {"text_label"}),
        ("  const k = 'te' + 'xt'; this[k]('hi', 1, 1);", {"dynamic_code", "text_label"}),
        ("  const name = prompt2(); this[name]('hi', 1, 1);", {"dynamic_code", "unknown_global"}),
        ("  brush[`re${'ct'}`](1, 2, 3, 4);", {"dynamic_code", "brush_method_not_allowed"}),
        ("  brush['circle'](1, 2, 3);", set()),
        ("  brush['re' + 'ct'](1, 2, 3, 4);", {"dynamic_code", "brush_method_not_allowed"}),
        ("  const m = 'tcer'.split('').reverse().join(''); brush[m](1, 2, 3, 4);",
         {"dynamic_code", "brush_method_not_allowed"}),
        ("  window[String.fromCharCode(101, 118, 97, 108)]('1');", {"dynamic_code", "external_access"}),
        ("  ({}).constructor.constructor('return this')();", {"dynamic_code"}),
        ("  (function () {}).constructor('x')();", {"dynamic_code"}),
        ("  const f = () => 1; f['con' + 'structor']('x');", {"dynamic_code"}),
        ("  Reflect.get(brush, 'rect');", {"dynamic_code"}),
        ("  setTimeout(`brush.rect()`, 0);", {"dynamic_code", "timer"}),
        ("  window.setTimeout(() => 1, 0);", {"external_access", "timer"}),
        ("  sessionStorage.clear();", {"storage"}),
        ("  storeItem('k', 1);", {"storage"}),
        ("  document.getElementById('x').remove();", {"dom_access"}),
        ("  const el = createElement('p');", {"dom_access"}),
        ("  select('canvas');", {"dom_access"}),
        ("  location.href = 'https://example.com';", {"external_access"}),
        ("  open('https://example.com');", {"external_access"}),
        ("  _renderer.GL.clear(0);", {"external_access"}),
        ("  const w = new Worker('x.js');", {"external_access"}),
        ("  const es = new EventSource('/stream');", {"external_access"}),
        ("  const pc = new RTCPeerConnection();", {"external_access"}),
        ("  httpGet('https://example.com');", {"external_access"}),
        ("  queueMicrotask(() => 1);", {"timer"}),
        ("  textSize(20);", {"text_label"}),
        ("  rotate(45); scale(2);", {"bare_primitive"}),
        ("  const prim = triangle; prim(1, 2, 3, 4, 5, 6);", {"bare_primitive"}),
        ("  brush.stroke('#000'); brush.line(1, 2, 3, 4);", {"brush_method_not_allowed"}),
        ("  brush.constructor('x');", {"dynamic_code", "unknown_brush_method"}),
        ("  const { rect } = brush; rect(1, 2, 3, 4);", {"brush_method_not_allowed"}),
        ("  const { fetch: f } = window; f('x');", {"external_access"}),
        ("  const { ['fe' + 'tch']: f } = this; f('x');", {"dynamic_code", "external_access"}),
        ("  const b = brush; const c = b; c.wash();", {"brush_method_not_allowed"}),
        ("  const b = brush; b[Math.random() > 0.5 ? 'rect' : 'circle'](1, 2, 3);", {"dynamic_code"}),
        ("  const d = window.document; d.cookie = 'a=1';", {"external_access", "dom_access", "storage"}),
        ("  arguments.callee.caller;", {"dynamic_code"}),
        ("  const o = {}; o.__proto__.polluted = 1;", {"dynamic_code"}),
        ("  eval?.('1');", {"dynamic_code"}),
        ("  (0, eval)('1');", {"dynamic_code"}),
        ("  new.target; foo();", {"unknown_global"}),
        ("  const s = this; s.x = 1;", {"external_access"}),
    ],
)
def test_gate_rules(body: str, expected: set[str]) -> None:
    verdict = static_gate(sketch_with(body))
    assert set(verdict.violations) == expected, verdict.details
    assert verdict.passed == (not expected)


def test_top_level_var_location_is_still_named() -> None:
    verdict = static_gate(sketch_with("", "var location = 'https://example.com';\n"))
    assert not verdict.passed and verdict.violations == ["external_access"]
    assert "writes to the browser global" in verdict.details[0]


@pytest.mark.parametrize(
    "prelude, use",
    [
        ("var fetch = 1;\n", "brush.circle(fetch, 1, 1);"),
        ("function setTimeout() { return 2; }\n", "brush.circle(setTimeout(), 1, 1);"),
        ("var top = 0;\n", "top++; brush.circle(top, 1, 1);"),
        ("function select(list, i) { return list[i]; }\n", "brush.circle(select([1, 2], 0), 1, 1);"),
        ("function open(x) { return x + 1; }\n", "brush.circle(open(1), 1, 1);"),
    ],
)
def test_top_level_helpers_named_like_browser_globals_are_the_sketchs_own(prelude: str, use: str) -> None:
    # The sketch's top level is the body of a function in a Compartment: these are its own
    # locals and reach nothing of the browser's (tests/env/test_sandbox.py renders them).
    verdict = static_gate(sketch_with("  " + use, prelude))
    assert verdict.passed, verdict.details


def test_top_level_let_of_a_browser_global_name_only_shadows() -> None:
    verdict = static_gate(sketch_with("  brush.circle(top, 1, 1);", "let top = 40;\n"))
    assert verdict.passed, verdict.details


def test_this_inside_class_methods_is_the_instance() -> None:
    prelude = (
        "class Bloom {\n"
        "  constructor() { Object.assign(this, { r: 3 }); }\n"
        "  paint() { brush.circle(this.r, this.undeclaredButHarmless ?? 1, 1); }\n"
        "  grab() { return this.fetch('x'); }\n"
        "}\n"
    )
    verdict = static_gate(sketch_with("  new Bloom().paint();", prelude))
    assert verdict.violations == ["external_access"], verdict.details


def test_this_at_top_level_is_the_global_object() -> None:
    verdict = static_gate(sketch_with("", "const g = this;\n"))
    assert verdict.violations == ["external_access"]
    verdict = static_gate(sketch_with("  this.undeclaredThing();"))
    assert verdict.violations == ["unknown_global"]


def test_syntax_error_reports_the_line_of_truncation() -> None:
    code = SKETCH + "function extra() {\n  brush.circle(1, 2,"
    verdict = static_gate(code)
    assert verdict.violations == ["syntax_error"]
    last_line = len(code.splitlines())
    assert any(f"line {last_line}" in detail for detail in verdict.details), verdict.details
    # An unclosed loop at the very end shows up as a missing brace instead.
    verdict = static_gate(SKETCH + "function extra() {\n  for (let i = 0; i < 3; i++) {\n    brush.circle(i, 2, 3);")
    assert verdict.violations == ["syntax_error"]
    assert any("missing `}`" in detail for detail in verdict.details), verdict.details


def test_syntax_error_still_reports_security_findings() -> None:
    verdict = static_gate(SKETCH + "fetch('x');\nfunction broken( {")
    assert "syntax_error" in verdict.violations and "external_access" in verdict.violations


@pytest.mark.parametrize(
    "code",
    [
        "createCanvas(600, 600, WEBGL)\nfunction setup(){}\nconst x = " + "(" * 3000 + "1" + ")" * 3000 + ";\nbrush.circle(1,1,1);",
        "createCanvas(600, 600, WEBGL)\nfunction setup(){}\nthis[" + " + ".join(["'a'"] * 3000) + "];\nbrush.circle(1,1,1);",
        "createCanvas(600, 600, WEBGL)\nfunction setup(){}\nconst d = o" + ".p" * 5000 + ";\nbrush.circle(1,1,1);",
        "createCanvas(600, 600, WEBGL)\nfunction setup(){}\nconst " + "[" * 2000 + "z" + "]" * 2000 + " = q;\nbrush.circle(1,1,1);",
        "createCanvas(600, 600, WEBGL)\nfunction setup(){}\n" + "{" * 4000 + "}" * 4000,
    ],
    ids=["parentheses", "concatenation", "member-chain", "array-pattern", "blocks"],
)
def test_deeply_nested_code_does_not_crash(code: str) -> None:
    verdict = static_gate(code)
    assert isinstance(verdict, GateVerdict)


_PATHOLOGICAL_REPLIES = {
    # inputs that made earlier regular expressions or tree walks quadratic or exponential
    "think-open-spam": "<think" * 30_000,
    "think-close-whitespace": "</think" + " " * 150_000,
    "fence-without-newline": "```" + "a" * 150_000 + "`",
    "fence-spaces": "```" + " " * 150_000 + "`",
    "many-fences": "```js\n" * 30_000,
    "doubling-constants": SKETCH + "const a0 = '';\n"
    + "".join(f"const a{i} = a{i - 1} + a{i - 1};\n" for i in range(1, 1200)) + "this[a1199];",
    "deep-blocks": SKETCH + "{" * 12_000 + "".join(f"v{i};" for i in range(1500)) + "}" * 12_000,
    "long-member-chain": SKETCH + "a" + ".b" * 19_000,
    "long-subscript-chain": SKETCH + "this" + "['x']" * 7_000,
}


def test_pathological_replies_are_fast() -> None:
    import time

    contract = SketchContract(max_code_chars=200_000)
    started = time.perf_counter()
    for reply in _PATHOLOGICAL_REPLIES.values():
        assert_well_formed(static_gate(reply, contract))
    # About 1 s in total on a laptop-class CPU; quadratic behaviour takes minutes.
    assert time.perf_counter() - started < 10


# --------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------


def assert_well_formed(verdict: GateVerdict) -> None:
    assert isinstance(verdict, GateVerdict)
    assert verdict.passed == (not verdict.violations)
    assert len(verdict.violations) == len(set(verdict.violations))
    assert set(verdict.violations) <= set(STATIC_REASON_CODES)
    if verdict.violations:
        assert verdict.details
    assert set(verdict.stats) == {"n_brush_calls", "n_fill_calls", "n_shapes", "brush_methods_used", "code_chars"}


_PROPERTY_SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@_PROPERTY_SETTINGS
@given(st.text())
def test_gate_never_raises_on_text(reply: str) -> None:
    assert_well_formed(static_gate(reply))


@_PROPERTY_SETTINGS
@given(st.binary())
def test_gate_never_raises_on_bytes(reply: bytes) -> None:
    assert_well_formed(static_gate(reply))


_JS_TOKENS = [
    "brush", ".", "fill", "circle", "rect", "this", "window", "[", "]", "(", ")", "{", "}",
    "'te'", "+", "\"xt\"", "`a${", "}`", "const", "let", "x", "=", ";", "=>", "function",
    "class", "new", "fetch", "eval", "?.", "??", "...", ",", ":", "for", "of", "in",
    "\\u0065val", "constructor", "import", "with", "<think>", "```js", "```", "\n", " ",
    "setTimeout", "document", "return", "async", "await", "#p", "static", "0x41", "1e3",
]


@_PROPERTY_SETTINGS
@given(st.lists(st.sampled_from(_JS_TOKENS), max_size=80))
def test_gate_never_raises_on_javascript_like_soup(tokens: list[str]) -> None:
    # Prefixing a real setup makes the analyser (not just the extractor) see the soup.
    assert_well_formed(static_gate(SKETCH + " ".join(tokens)))
