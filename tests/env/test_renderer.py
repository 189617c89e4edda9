"""The sandboxed renderer, with real Chromium and the pinned p5/p5.brush."""

from __future__ import annotations

import json
import re
import time

import pytest

from helpers import FIXTURES, ROOT, SMALL_SKETCH, small_sketch_with
from env.pigment import load_rgb, paint_fraction
from env.renderer import NPM_PINS, SyncRenderer


def test_small_sketch_paints(renderer):
    result = renderer.render(SMALL_SKETCH, seed=3)
    assert result.passed, (result.violations, result.errors)
    assert result.png is not None and result.png.startswith(b"\x89PNG")
    assert load_rgb(result.png).shape == (200, 200, 3)
    assert 0.05 < result.paint_fraction < 0.9
    assert result.ended_as == "drawn"


def test_same_code_and_seed_give_identical_png(renderer):
    first = renderer.render(SMALL_SKETCH, seed=42)
    second = renderer.render(SMALL_SKETCH, seed=42)
    other = renderer.render(SMALL_SKETCH, seed=43)
    assert first.png == second.png
    assert other.png != first.png  # random() in the sketch and p5.brush's own noise follow the seed


def test_sketch_without_draw_is_captured_after_setup(renderer):
    code = """async function setup() {
      createCanvas(200, 200, WEBGL);
      translate(-width / 2, -height / 2);
      background('#f8f1e4');
      brush.noStroke();
      brush.fill('#2b6cb0', 160);
      brush.circle(100, 100, 50);
      noLoop();
    }"""
    result = renderer.render(code, seed=1)
    assert result.ended_as == "setup_only"
    assert result.passed, (result.violations, result.errors)
    # the same painting done in draw() instead gives the same pixels
    in_draw = renderer.render(code.replace("noLoop();\n    }", "noLoop();\n    }\n    function draw() {}"), seed=1)
    assert in_draw.ended_as == "drawn"
    assert load_rgb(in_draw.png).tolist() == load_rgb(result.png).tolist()


def test_sketch_that_throws_reports_error(renderer):
    result = renderer.render(small_sketch_with("\n  undefinedHelper(3);"), seed=1)
    assert not result.passed
    assert "render_error" in result.violations
    assert any("undefinedHelper" in e for e in result.errors)


def test_syntax_error_reports_error_and_finishes(renderer):
    result = renderer.render("async function setup() { createCanvas(200, 200, WEBGL); \n function draw( {", seed=1)
    assert not result.passed
    assert "render_error" in result.violations
    assert result.errors


@pytest.mark.parametrize("statement, code", [
    ("text('hi', 10, 10);", "text_label"),
    ("window['te' + 'xt']('hi', 10, 10);", "text_label"),
    ("this.rect(1, 2, 3, 4);", "bare_primitive"),
    ("ellipse(1, 2, 3, 4);", "bare_primitive"),
    ("brush.rect(1, 2, 3, 4);", "brush_method_not_allowed"),
    ("brush['li' + 'ne'](1, 2, 3, 4);", "brush_method_not_allowed"),
    ("brush.nonsense(1);", "unknown_brush_method"),
    ("p5.instance.text('x', 1, 1);", "external_access"),
    ("p5.prototype.text.call(null, 'x', 1, 1);", "text_label"),
    ("drawingContext.clear(0);", "p5_function_not_allowed"),
    ("eval('1 + 1');", "dynamic_code"),
    ("(function(){}).constructor('return 1')();", "dynamic_code"),
    ("document.createElement('div');", "dom_access"),
    ("document.body.innerHTML = '<b>hi</b>';", "dom_access"),
    ("setTimeout(() => 1, 0);", "timer"),
    ("localStorage.setItem('a', 'b');", "storage"),
])
def test_run_time_allowlist_records_violation(renderer, statement, code):
    result = renderer.render(small_sketch_with("\n  " + statement), seed=1)
    assert not result.passed
    assert code in result.violations, (result.violations, result.errors)


def test_allowed_calls_do_not_trip_the_run_time_guard(renderer):
    body = """
  push(); translate(10, 10); pop();
  const n = noise(0.3) + map(0.5, 0, 1, 0, 10) + lerp(1, 2, 0.5) + constrain(5, 0, 3) + dist(0, 0, 3, 4);
  brush.noFill(); brush.fill('#333', 40); brush.fillTexture(0.2, 0.2);
  brush.beginShape(0.3); brush.vertex(10, 10); brush.vertex(60, 20); brush.vertex(30, 70); brush.endShape(true);"""
    result = renderer.render(small_sketch_with(body), seed=1)
    assert result.passed, (result.violations, result.errors)


def _runtime_fixtures():
    for path in sorted((FIXTURES / "sketches" / "runtime_hostile").glob("*.js")):
        expected = tuple(re.search(r"//\s*expect:\s*([\w|]+)", path.read_text()).group(1).split("|"))
        yield pytest.param(path, expected, id=path.stem)


@pytest.mark.slow  # 8 s for the infinite loop
@pytest.mark.parametrize("path, expected", list(_runtime_fixtures()))
def test_runtime_hostile_fixtures(path, expected, renderer):
    deadline = 8.0
    started = time.perf_counter()
    result = renderer.render(path.read_text(), seed=1, deadline_s=deadline)
    # `// expect: a|b`: either code (a heap bomb meets the heap cap or the process ceiling first).
    assert set(expected) & set(result.violations), (result.violations, result.errors)
    assert not result.passed
    assert result.infrastructure_error is None
    assert time.perf_counter() - started < deadline + 30


@pytest.mark.slow  # 5 s
def test_runaway_loop_is_killed_and_pool_keeps_serving(renderer):
    started = time.perf_counter()
    result = renderer.render(small_sketch_with("\n  while (true) {}"), seed=1, deadline_s=3)
    assert result.violations == ["render_timeout"]
    assert time.perf_counter() - started < 25
    follow_up = renderer.render(SMALL_SKETCH, seed=1)
    assert follow_up.passed, follow_up.violations


NETWORK_ATTEMPTS = [
    "fetch('http://127.0.0.1:{port}/fetch').catch(() => {{}});",
    "const im = new Image(); im.src = 'http://127.0.0.1:{port}/image';",
    "navigator.sendBeacon('http://127.0.0.1:{port}/beacon', 'x');",
    "new WebSocket('ws://127.0.0.1:{port}/ws');",
    "const x = new XMLHttpRequest(); x.open('GET', 'http://127.0.0.1:{port}/xhr'); x.send();",
    "import('http://127.0.0.1:{port}/module.js').catch(() => {{}});",
    "document.body.style.backgroundImage = 'url(http://127.0.0.1:{port}/css)';",
    "new EventSource('http://127.0.0.1:{port}/sse');",
    "const pc = new RTCPeerConnection({{iceServers: [{{urls: 'stun:127.0.0.1:{port}'}}]}});",
    "location.href = 'http://127.0.0.1:{port}/navigate';",
    "window.open('http://127.0.0.1:{port}/popup');",
    "const l = document.querySelector('head'); l.insertAdjacentHTML('beforeend', '<link rel=stylesheet href=http://127.0.0.1:{port}/l.css>');",
    # Doors a depth-counting guard would leave open (the network layer held them)
    "document.body.append(document.createRange().createContextualFragment('<img src=http://127.0.0.1:{port}/frag>'));",
    "document.head.after('x'); document.body.outerHTML = '<body><img src=http://127.0.0.1:{port}/outer></body>';",
    "brush.circle({{ valueOf() {{ const im = new Image(); im.src = 'http://127.0.0.1:{port}/valueof'; return 40; }} }}, 50, 50);",
    "sin({{ valueOf() {{ navigator.sendBeacon('http://127.0.0.1:{port}/beacon2', 'x'); return 1; }} }});",
    "const f = document.createElement('iframe'); document.body.appendChild(f); f.contentWindow.fetch('http://127.0.0.1:{port}/iframe');",
    "const form = document.createElement('form'); form.action = 'http://127.0.0.1:{port}/form'; document.body.appendChild(form); form.submit();",
    "Promise.resolve().then(() => fetch('http://127.0.0.1:{port}/microtask'));",
]


@pytest.mark.slow  # 18 s
def test_no_request_leaves_the_page(renderer, loopback_listener):
    port = loopback_listener.port
    results = []
    for attempt in NETWORK_ATTEMPTS:
        body = "\n  try { " + attempt.format(port=port) + " } catch (e) {}"
        results.append(renderer.render(small_sketch_with(body), seed=1, deadline_s=15))
    # also reach it from the sketch's top level, before p5 starts
    top_level = "try { fetch('http://127.0.0.1:%d/top').catch(() => {}); } catch (e) {}\n" % port
    results.append(renderer.render(top_level + SMALL_SKETCH, seed=1, deadline_s=15))
    time.sleep(1.0)
    assert loopback_listener.connections == []
    # Inside the Compartment none of these capabilities exists: every attempt is also a
    # recorded reason code (import() is refused by SES before the sketch runs), none is an
    # infrastructure error, and the network layer stays as defence in depth.
    unrecorded = [a for a, r in zip(NETWORK_ATTEMPTS, results) if not set(r.violations) - {"render_error", "blank_canvas"}]
    assert unrecorded == []
    assert not any(r.infrastructure_failed or r.passed for r in results)


def test_infrastructure_failure_is_not_a_sketch_failure(tmp_path):
    with SyncRenderer(renderers=1, executable=str(tmp_path / "no-such-chromium")) as broken:
        result = broken.render(SMALL_SKETCH, seed=1)
    assert result.infrastructure_error is not None
    assert result.infrastructure_failed
    assert "infrastructure_error" in result.violations


def test_preview_density_halves_the_png(tmp_path):
    with SyncRenderer(renderers=1, pixel_density=0.5) as preview:
        result = preview.render(SMALL_SKETCH, seed=1)
    assert result.passed, result.violations
    assert load_rgb(result.png).shape == (100, 100, 3)


def test_paint_fraction_of_blank_and_painted_arrays():
    import numpy as np

    paper = np.full((50, 50, 3), (248, 241, 228), dtype=np.uint8)
    assert paint_fraction(paper) == 0.0
    paper[:10, :] = (200, 40, 40)
    assert paint_fraction(paper) == pytest.approx(0.2)


def test_library_versions_are_pinned_and_installed():
    package = json.loads((ROOT / "package.json").read_text())
    lock = json.loads((ROOT / "package-lock.json").read_text())
    # ses (Hardened JavaScript) confines the sketch: pinned exactly like p5, and served from
    # the same node_modules.
    assert package["dependencies"] == {"p5": "2.3.4", "p5.brush": "2.2.2", "ses": "2.3.0"}
    # The renderer checks node_modules against its own copy of the pins (a wheel has no package.json).
    assert package["dependencies"] == NPM_PINS
    for name, version in package["dependencies"].items():
        assert lock["packages"][f"node_modules/{name}"]["version"] == version
        installed = json.loads((ROOT / "node_modules" / name / "package.json").read_text())
        assert installed["version"] == version
    # ses's own dependencies come from the lock file, never from a range at install time.
    for name, entry in lock["packages"].items():
        if name.startswith("node_modules/"):
            assert "version" in entry and "integrity" in entry, name
    # p5.brush 2.x draws nothing on p5 1.x: the pair must stay on the same major version.
    assert package["dependencies"]["p5"].split(".")[0] == package["dependencies"]["p5.brush"].split(".")[0]


def test_closed_renderer_refuses_work_and_closes_once():
    sync_renderer = SyncRenderer(renderers=1)
    sync_renderer.close()
    sync_renderer.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        sync_renderer.render(SMALL_SKETCH, seed=1)


def test_failed_start_does_not_leak_the_loop_thread():
    import threading

    before = threading.active_count()
    with pytest.raises(ValueError, match="unknown backend"):
        SyncRenderer(renderers=1, backend="no-such-backend")
    assert threading.active_count() == before


@pytest.mark.slow  # 7 s
def test_default_backend_accumulates_fill_masks_in_float16():
    """The default's look depends on float16 mask canvases (8-bit software masks lose paint on
    every translucent layer): same sketch, same seed, the float16 masks paint darker."""
    from env.renderer import DEFAULT_BACKEND

    assert DEFAULT_BACKEND == "llvmpipe-f16"
    painted = {}
    for backend in ("llvmpipe-f16", "llvmpipe-sw2d"):
        with SyncRenderer(renderers=1, backend=backend, deadline_s=60) as sync_renderer:
            first = sync_renderer.render(SMALL_SKETCH, seed=5)
            again = sync_renderer.render(SMALL_SKETCH, seed=5)
        assert first.passed and first.png == again.png, backend
        painted[backend] = (255 - load_rgb(first.png).astype(float)).mean()
    assert painted["llvmpipe-f16"] > painted["llvmpipe-sw2d"] * 1.02, painted  # 18.4 vs 17.8 measured


@pytest.mark.slow  # 10 s
def test_browser_killed_mid_render_is_replaced_and_the_render_is_done_again():
    import threading

    # A second or two of plain JavaScript in draw(): the browser is killed while it runs. The
    # browser's death is not the sketch's doing (it renders fine alone), so the pool starts
    # a new browser and renders it again instead of dropping the rollout.
    spinning = small_sketch_with("let total = 0; for (let i = 0; i < 1e9; i++) { total += i % 7; }")
    with SyncRenderer(renderers=1, deadline_s=60) as sync_renderer:
        assert sync_renderer.render(SMALL_SKETCH, seed=1).passed  # the browser is up and warm
        slot = sync_renderer.renderer_pool._browsers[0]
        browser = slot.browser
        killer = threading.Timer(1.0, slot.kill)
        killer.start()
        started = time.monotonic()
        killed = sync_renderer.render(spinning, seed=1)
        killer.join()
        assert not killed.infrastructure_failed and killed.passed, (killed.violations, killed.errors)
        assert killed.png == sync_renderer.render(spinning, seed=1).png
        assert time.monotonic() - started < 60
        after = [sync_renderer.render(SMALL_SKETCH, seed=s) for s in (1, 2)]
        assert all(r.passed and r.png for r in after)  # a new browser took its place
        assert slot.browser is not browser
