"""Render p5.brush sketches in sandboxed headless Chromium.

A pool of browser *processes* (pages inside one browser serialise in its GPU process, so
parallelism needs several browsers), each rendering one sketch at a time on a fresh page.
Every request from the page is intercepted: our four library files (p5, p5.brush, SES, runtime) are served from disk,
everything else is aborted, and the browser is started behind a dead proxy so that anything
the interception misses fails too.

Failures come in two kinds, and the reward side treats them differently:
- sketch failures (violations, JS errors, timeouts, crashes, blank canvas) are the policy's
  fault: the render "ran" and the gate says no;
- infrastructure failures (browser would not start, protocol errors) set
  ``RenderResult.infrastructure_error`` so the rollout is dropped instead of scored.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import json
import os
import secrets
import signal
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from env.contract import (
    DOM_ACCESS_NAMES,
    DYNAMIC_CODE_NAMES,
    EDIT_REASON_CODES,
    EXTERNAL_ACCESS_NAMES,
    JS_SAFE_GLOBALS,
    P5_GLOBAL_NAMES,
    P5_TEXT_FUNCTIONS,
    REASON_CODES,
    STORAGE_NAMES,
    TIMER_NAMES,
    SketchContract,
)
from env.pigment import paint_fraction_of_png

# What a page may report: never an edit's code (edits are applied in Python before any page
# exists), so a page can never dress a render up as a failed edit.
PAGE_REASON_CODES = frozenset(code for code in REASON_CODES if code not in EDIT_REASON_CODES)
from env.backends import BACKENDS, DEFAULT_BACKEND
from env.files import source_root
from env.gate.source import neutralise_for_ses
from env.portal import Portal
from env.text import safe_lines, safe_text

PAGE_DIR = Path(__file__).resolve().parent / "page"
SANDBOX_ORIGIN = "http://sketch.sandbox"


# The browser libraries the sandboxed page loads, at the exact versions package.json and
# package-lock.json pin (tests/env/test_renderer.py holds the three to each other).
NPM_PINS = {"p5": "2.3.4", "p5.brush": "2.2.2", "ses": "2.3.0"}
NODE_MODULES_VARIABLE = "WATERCOLOUR_NODE_MODULES"


def _pin_problems(modules: Path) -> list[str]:
    """What keeps ``modules`` from serving the pinned libraries ([] when it can)."""
    problems = []
    for name, version in NPM_PINS.items():
        manifest = modules / name / "package.json"
        try:
            found = json.loads(manifest.read_text()).get("version")
        except (OSError, ValueError):
            problems.append(f"no {name}")
            continue
        if found != version:
            problems.append(f"{name} {found}, not {version}")
    return problems


def node_modules_candidates() -> list[tuple[str, Path]]:
    """Where p5, p5.brush and ses are looked for, in order: $WATERCOLOUR_NODE_MODULES alone when
    it is set; else the checkout's node_modules (running from a source tree), then ./node_modules
    in the working directory (e.g. `npm ci` run in the checkout an installed package runs from)."""
    override = os.environ.get(NODE_MODULES_VARIABLE)
    if override:
        return [(f"${NODE_MODULES_VARIABLE}", Path(override))]
    candidates = []
    root = source_root()
    if root is not None:
        candidates.append(("the checkout", root / "node_modules"))
    cwd = Path.cwd() / "node_modules"
    if not any(cwd.resolve() == path.resolve() for _, path in candidates):
        candidates.append(("the working directory", cwd))
    return candidates


def node_modules_dir() -> Path:
    """The first node_modules holding p5, p5.brush and ses at the pinned versions (see
    node_modules_candidates); FileNotFoundError saying how to get them when none does."""
    tried = []
    for label, path in node_modules_candidates():
        problems = _pin_problems(path)
        if not problems:
            return path
        tried.append(f"{label}: {path} ({', '.join(problems)})")
    pins = ", ".join(f"{name}@{version}" for name, version in NPM_PINS.items())
    raise FileNotFoundError(
        f"the renderer needs the pinned browser libraries ({pins}); looked in " + "; ".join(tried)
        + f". Run `npm ci` (or `make setup`) in the project checkout, then run from there or set "
        f"{NODE_MODULES_VARIABLE} to that checkout's node_modules folder."
    )


def library_files() -> dict[str, Path]:
    modules = node_modules_dir()
    return {
        "/p5.min.js": modules / "p5" / "lib" / "p5.min.js",
        "/p5.brush.js": modules / "p5.brush" / "dist" / "p5.brush.js",
        # Hardened JavaScript: lockdown() and Compartment, the sketch's confinement.
        "/ses.js": modules / "ses" / "dist" / "ses.umd.min.js",
        "/runtime.js": PAGE_DIR / "runtime.js",
    }


# Flags shared by every backend: no network, no background work, nothing written to disk.
SANDBOX_ARGS = [
    "--proxy-server=http://127.0.0.1:9",  # dead proxy: a request that escapes interception fails
    "--proxy-bypass-list=<-loopback>",  # ...including ones to loopback addresses
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-domain-reliability",
    "--disable-sync",
    "--no-first-run",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--mute-audio",
    # A sketch needs a few MB of heap; a memory bomb should die in seconds (render_crashed)
    # instead of swapping the machine until the deadline. Optimised code is compiled on the
    # main thread: compiled in the background, it is installed whenever that thread finishes,
    # so the frame sizes on the stack, and with them the recursion depth at which RangeError
    # is thrown, changed from render to render (9,605 to 17,839 frames were measured).
    # The same holds for everything else V8 does in the background or keeps between pages,
    # which made a sketch that catches stack overflows paint differently depending on what
    # else the pool was rendering: --single-threaded runs no V8 background task at all
    # (Maglev and GC work included), --no-compilation-cache compiles every page's scripts
    # afresh (a function compiled by an earlier page of the same renderer process needs no
    # lazy compilation, and so less stack, at the overflow), and --no-flush-bytecode and
    # --no-memory-reducer take the timer-driven GC decisions about compiled code away.
    "--js-flags=--max-old-space-size=512 --no-concurrent-recompilation --no-concurrent-osr"
    " --no-concurrent-sparkplug --single-threaded --no-compilation-cache --no-flush-bytecode --no-memory-reducer",
    "--renderer-process-limit=4",
]


# Memory. The sketch's budget is one number, SketchContract.max_typed_array_bytes: the
# array-buffer bytes the page may hold, as the engine itself counts them (V8's ArrayBuffer
# backing stores, CDP Runtime.getHeapUsage's backingStorageSize: every typed array, DataView,
# resized or transferred buffer, however it was made). The page answers that question only
# between tasks, so it is asked at every such point while the sketch runs and once more
# after the report; a buffer the sketch let go of counts until V8 frees it (the page holds
# that memory until then). Over the budget: memory_limit. While JavaScript runs without yielding, the
# renderer process's RSS is watched from /proc every MEMORY_SAMPLE_S: the page may use what
# a real painting needs (PAGE_RSS_ALLOWANCE_MB: the examples peaked at 200-234 MB at 600x600,
# poppies at 341 MB at the largest canvas, 2048x2048) plus the budget.
PAGE_RSS_ALLOWANCE_MB = 448
MEMORY_SAMPLE_S = 0.1
MIB = 1024 * 1024


def memory_limit_mb_for(contract: SketchContract) -> int:
    """The renderer-process RSS ceiling that goes with ``contract``'s array-buffer budget."""
    return PAGE_RSS_ALLOWANCE_MB + -(-contract.max_typed_array_bytes // MIB)


DEFAULT_MEMORY_LIMIT_MB = memory_limit_mb_for(SketchContract())

# The GPU process holds every canvas's and WEBGL context's memory (with software GL, in its own
# RSS), outside the page's. It is watched the same way, against its own ceiling: a 200x200
# sketch's browser peaked at 184 MB, the six examples at 2048x2048 (scaleBrushes(10)) at
# 441-454 MB; sixteen 2048x2048 WEBGL canvases reached 1476 MB. The page allows two canvases'
# worth of pixels in at most four createCanvas calls (runtime.js), so this is the bound for
# whatever else a sketch finds.
GPU_RSS_LIMIT_MB = 768


def find_chromium() -> str | None:
    """A Chromium on PATH (Debian's), else Playwright's own download (None)."""
    override = os.environ.get("WATERCOLOUR_CHROMIUM")
    if override:
        return override
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class RenderResult:
    """What one render produced. ``violations`` holds run-time reason codes only."""

    passed: bool
    violations: list[str]
    errors: list[str]
    paint_fraction: float
    render_ms: int
    png: bytes | None
    ended_as: str
    infrastructure_error: str | None = None
    details: list[str] = field(default_factory=list)

    @property
    def infrastructure_failed(self) -> bool:
        return self.infrastructure_error is not None


def seed_script(seed: int) -> str:
    # sfc32 seeded from the integer: p5.brush seeds its own generators from Math.random at
    # load time, so Math.random must be deterministic before any library script runs.
    return (
        "(()=>{let a=%d>>>0,b=0x9e3779b9,c=0x243f6a88,d=0xb7e15162;"
        "const next=()=>{a>>>=0;b>>>=0;c>>>=0;d>>>=0;let t=(a+b)|0;a=b^(b>>>9);"
        "b=(c+(c<<3))|0;c=(c<<21)|(c>>>11);d=(d+1)|0;t=(t+d)|0;c=(c+t)|0;"
        "return (t>>>0)/4294967296;};for(let i=0;i<16;i++)next();"
        "Object.defineProperty(Math,'random',{value:next,writable:false,configurable:false});})();"
        % (seed & 0xFFFFFFFF)
    )


# Runs before the libraries: every 2D canvas (p5.brush's fill masks are OffscreenCanvases)
# accumulates in float16 instead of 8 bits. Used by backends with "float16_masks".
FLOAT16_MASKS_SCRIPT = (
    "(()=>{for(const C of [OffscreenCanvas,HTMLCanvasElement]){const get=C.prototype.getContext;"
    "C.prototype.getContext=function(type,options){if(type==='2d')"
    "options=Object.assign({},options||{},{colorType:'float16'});return get.call(this,type,options);};}})();"
)


# The sketch's clock (Date.now(), new Date()): a fixed instant, so a sketch that seeds
# from the time still renders byte-identically. 2024-01-01T00:00:00Z.
CLOCK_EPOCH_MS = 1_704_067_200_000


def name_codes() -> dict[str, str]:
    """Reason code of each known forbidden name, for the page's traps (later lists win)."""
    codes: dict[str, str] = {}
    for names, code in ((P5_GLOBAL_NAMES, "bare_primitive"), (EXTERNAL_ACCESS_NAMES, "external_access"),
                        (DOM_ACCESS_NAMES, "dom_access"), (TIMER_NAMES, "timer"), (STORAGE_NAMES, "storage"),
                        (DYNAMIC_CODE_NAMES, "dynamic_code")):
        codes.update(dict.fromkeys(names, code))
    return codes


def page_html(code: str, seed: int, contract: SketchContract, nonce: str, pixel_density: float = 1.0,
              float16_masks: bool = False) -> str:
    config = {
        "nonce": nonce,
        "pixelDensity": pixel_density,
        # SES refuses `eval(`/`import(` by pattern, also in comments and strings: rewritten
        # there (values unchanged), so only a real call is refused (env/gate/source.py).
        "sketch": neutralise_for_ses(code),
        "brushMethods": list(contract.brush_methods),
        "p5Names": list(contract.p5_names),
        "textFunctions": list(P5_TEXT_FUNCTIONS),
        "jsGlobals": list(JS_SAFE_GLOBALS),
        "codes": name_codes(),
        "maxCanvasSide": contract.max_canvas_side,
        "maxTypedArrayBytes": contract.max_typed_array_bytes,
        "clockEpochMs": CLOCK_EPOCH_MS,
    }
    # JSON inside a <script> element: escaping "<" keeps "</script>" in the sketch inert.
    config_json = json.dumps(config).replace("<", "\\u003c")
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<style>html,body{margin:0;padding:0;background:#fff}</style>"
        f"<script>{seed_script(seed)}</script>"
        + (f"<script>{FLOAT16_MASKS_SCRIPT}</script>" if float16_masks else "")
        + f"<script>window.__WC_CONFIG={config_json};</script>"
        "<script src='/p5.min.js'></script>"
        "<script src='/p5.brush.js'></script>"
        "<script src='/ses.js'></script>"
        "<script src='/runtime.js'></script>"
        "</head><body></body></html>"
    )


# Exercises p5 set-up, a brush fill (the accelerated 2D mask canvas) and the read-back.
WARM_UP_SKETCH = (
    "async function setup(){createCanvas(64,64,WEBGL);noLoop();}\n"
    "function draw(){translate(-width/2,-height/2);background('#fff');brush.noStroke();"
    "brush.fill('#345',120);brush.circle(32,32,12);}"
)


class _Browser:
    """One Chromium process and the lock that makes it render one sketch at a time."""

    def __init__(self, renderer_pool: "RendererPool", index: int):
        self.renderer_pool = renderer_pool
        self.index = index
        self.browser = None
        self.context = None
        self.renders = 0
        self.waiters: dict[Any, asyncio.Future] = {}
        self.marker = ""
        self.gpu_pids: list[int] = []  # this browser's GPU process, as the memory watch found it

    @property
    def running(self) -> bool:
        return self.browser is not None and self.browser.is_connected()

    async def ensure_started(self):
        if self.running:
            return
        await self.close()
        self.marker = secrets.token_hex(8)
        self.browser = await self.renderer_pool._launch(self.marker)
        self.context = await self.browser.new_context(
            viewport={"width": 640, "height": 640},
            device_scale_factor=1,
            java_script_enabled=True,
            service_workers="block",
            bypass_csp=False,
        )
        await self.context.route("**/*", self.renderer_pool._route)
        await self.context.route_web_socket("**/*", _refuse_websocket)
        await self.context.expose_binding("__wcReport", self._on_report)

    def _on_report(self, source, payload):
        waiter = self.waiters.get(source.get("page"))
        if waiter is not None and not waiter.done():
            waiter.set_result(payload)

    async def close(self):
        browser, self.browser, self.context = self.browser, None, None
        if browser is not None:
            try:
                await asyncio.wait_for(browser.close(), timeout=10)
            except Exception:
                # A page stuck in an infinite loop can keep Browser.close() waiting; the
                # process is killed outright so the pool keeps serving.
                kill_browser(self.marker)

    def gpu_rss_mb(self) -> int:
        """Resident memory of this browser's GPU process, in MB (0 when there is none)."""
        pids = _typed_pids(browser_pids(self.marker), ("gpu-process",)) if self.marker else []
        return max((_rss_kb(pid) or 0 for pid, _kind in pids), default=0) // 1024

    def forget(self) -> None:
        """Drop a browser whose driver is gone: nothing can be asked of it any more, so its
        process is killed by its marker and the next render launches a new one."""
        self.browser, self.context = None, None
        self.waiters.clear()
        kill_browser(self.marker)

    def kill(self) -> int:
        """Kill this browser's process now (fault injection in tests; safe from any thread)."""
        return kill_browser(self.marker)


async def _refuse_websocket(ws):
    await ws.close(code=1008, reason="network disabled in the watercolour sandbox")


def browser_pids(marker: str) -> list[int]:
    """Processes of the Chromium launched with ``--watercolour-browser=MARKER`` (Linux /proc).

    Playwright starts Chromium from its node driver, so the Python side holds no handle to
    the browser process; the marker switch (Chromium ignores unknown switches) finds it.
    """
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"--watercolour-browser={marker}".encode() in arguments:
            found.append(int(entry.name))
    return found


def kill_browser(marker: str) -> int:
    """SIGKILL the marked browser (its child processes exit with it); how many were killed."""
    killed = 0
    for pid in browser_pids(marker):
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except ProcessLookupError:
            pass
    return killed


class RendererPool:
    """Async pool of sandboxed browsers. Use ``async with RendererPool() as renderer_pool``."""

    def __init__(
        self,
        renderers: int | None = None,
        backend: str = DEFAULT_BACKEND,
        contract: SketchContract | None = None,
        deadline_s: float = 90.0,
        executable: str | None = None,
        pixel_density: float = 1.0,
        memory_limit_mb: int | None = None,
        gpu_memory_limit_mb: int | None = None,
    ):
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose from {sorted(BACKENDS)}")
        self.renderers = renderers or default_renderers()
        self.backend = backend
        self.contract = contract or SketchContract()
        self.deadline_s = deadline_s
        # p5 draws at window.devicePixelRatio: 0.5 is the preview option for intermediate
        # turns (a quarter of the pixels to raster; the PNG is half the size).
        self.pixel_density = pixel_density
        self.memory_limit_mb = memory_limit_mb if memory_limit_mb is not None else memory_limit_mb_for(self.contract)
        self.gpu_memory_limit_mb = gpu_memory_limit_mb if gpu_memory_limit_mb is not None else GPU_RSS_LIMIT_MB
        self.executable = executable if executable is not None else find_chromium()
        self._playwright = None
        self._driver = None
        self._admission: _Admission | None = None
        self._driver_lock: asyncio.Lock | None = None
        self._browsers: list[_Browser] = []
        self._idle: asyncio.Queue[_Browser] | None = None
        self._files = {path: file.read_bytes() for path, file in self._library_paths().items()}
        self._pending_html: dict[str, str] = {}
        self.page_messages = 0  # console messages and page errors the pages sent (see _render_on)

    @staticmethod
    def _library_paths() -> dict[str, Path]:
        files = library_files()  # node_modules_dir() says how to get the libraries when they are missing
        missing = [str(p) for p in files.values() if not p.exists()]
        if missing:
            raise FileNotFoundError(
                "the pinned browser libraries are incomplete (run `npm ci` in the project checkout): "
                + ", ".join(missing)
            )
        return files

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def start(self):
        self._admission = _Admission()
        self._driver_lock = asyncio.Lock()
        await self._start_driver()
        self._idle = asyncio.Queue()
        self._browsers = [_Browser(self, i) for i in range(self.renderers)]
        for browser in self._browsers:
            self._idle.put_nowait(browser)

    async def close(self):
        for browser in self._browsers:
            if self._driver_alive():
                await browser.close()
            else:
                browser.forget()
        await self._stop_driver()

    # --- the Playwright driver ----------------------------------------------------------------
    # Every browser of the pool talks through one Node.js driver process. If it dies (a
    # protocol message too large for it once killed it with ERR_STRING_TOO_LONG; the page no
    # longer sends sketch text to the protocol, but the pool must not depend on that), every
    # later call through it fails: the pool then starts a new driver and new browsers, and the
    # renders that were in flight are rendered again (RendererPool.render).

    async def _start_driver(self):
        from playwright.async_api import async_playwright

        self._driver = async_playwright()
        self._playwright = await self._driver.start()

    async def _stop_driver(self):
        driver, self._driver, self._playwright = self._driver, None, None
        # A driver that died left its reason on the transport's error future: read here, so
        # asyncio does not log it as never retrieved.
        error = getattr(getattr(getattr(driver, "_client", None), "_transport", None), "on_error_future", None)
        if isinstance(error, asyncio.Future) and error.done() and not error.cancelled():
            error.exception()
        if driver is not None:
            try:
                await asyncio.wait_for(driver.__aexit__(None, None, None), timeout=10)
            except Exception:
                kill_pids(_driver_pid(driver))

    def _driver_alive(self) -> bool:
        connection = getattr(getattr(self._driver, "_client", None), "_connection", None)
        return self._playwright is not None and getattr(connection, "_closed_error", None) is None

    async def _ensure_driver(self):
        if self._driver_alive():
            return
        async with self._driver_lock:
            if self._driver_alive():
                return
            # The browsers belonged to the dead driver: killed by their marker, relaunched
            # through the new driver on their next render.
            for browser in self._browsers:
                browser.forget()
            await self._stop_driver()
            await self._start_driver()

    def driver_pid(self) -> int | None:
        """The Playwright driver's process id (fault injection in tests)."""
        return _driver_pid(self._driver)

    async def _launch(self, marker: str):
        spec = BACKENDS[self.backend]
        env = {**os.environ, **spec["env"]}
        kwargs: dict[str, Any] = {
            "headless": True,
            "args": SANDBOX_ARGS + spec["args"] + [f"--watercolour-browser={marker}"],
            "env": env,
            "timeout": 60_000,
        }
        if self.executable:
            kwargs["executable_path"] = self.executable
        return await self._playwright.chromium.launch(**kwargs)

    async def _route(self, route):
        try:
            await self._serve(route)
        except Exception:
            pass  # the page, browser or driver went away while the request was answered

    async def _serve(self, route):
        url = route.request.url
        if url.startswith(SANDBOX_ORIGIN + "/"):
            path = url[len(SANDBOX_ORIGIN):].split("?", 1)[0]
            if path.startswith("/page/"):
                html = self._pending_html.get(path)
                if html is not None:
                    await route.fulfill(status=200, content_type="text/html", body=html)
                    return
            body = self._files.get(path)
            if body is not None:
                await route.fulfill(status=200, content_type="text/javascript", body=body)
                return
        await route.abort("blockedbyclient")

    async def render(self, code: str, seed: int = 0, deadline_s: float | None = None) -> RenderResult:
        """Render one sketch; never raises for anything the sketch does.

        A render whose browser or driver went away is rendered again: first alongside the
        others (it may only have been in the same pool as the sketch that did it), then alone
        in the pool. A sketch that takes its browser or the driver down when it renders alone
        is what does it: its failure (render_crashed), and every other render of the batch
        still gets its painting.
        """
        deadline = self.deadline_s if deadline_s is None else deadline_s
        started = time.perf_counter()
        result = None
        for attempt in range(RENDER_ATTEMPTS):
            alone = attempt == RENDER_ATTEMPTS - 1
            async with self._admission.enter(exclusive=alone):
                result = await self._render_once(code, seed, deadline)
            if not _lost_to_infrastructure(result):
                return result
        return _sketch_failure(started, "render_crashed",
                               "the browser went away each time this sketch rendered, the last time alone: "
                               + (result.errors[0] if result.errors else "")[:200])

    async def _render_once(self, code: str, seed: int, deadline: float) -> RenderResult:
        browser = await self._idle.get()
        started = time.perf_counter()
        try:
            try:
                await self._ensure_driver()
                if browser.running and await asyncio.to_thread(browser.gpu_rss_mb) > self.gpu_memory_limit_mb * 2 // 3:
                    # What earlier renders left in the GPU process is not this sketch's: the
                    # browser is replaced before it renders, so its budget is all its own.
                    await browser.close()
                fresh = not browser.running
                await browser.ensure_started()
                if fresh:
                    # The first page of a new browser also brings up its GPU process and
                    # canvas resources; a throw-away painting keeps that start-up out of
                    # the sketch's time and its pixels (we once saw a first render differ
                    # from later ones by 90 pixels under heavy load).
                    await self._render_on(browser, WARM_UP_SKETCH, 0, deadline, time.perf_counter())
                    await browser.ensure_started()
            except Exception as exc:  # browser would not start: not the sketch's fault
                await browser.close()
                return _infrastructure_result(started, f"browser_start_failed: {exc}")
            return await self._render_on(browser, code, seed, deadline, started)
        finally:
            self._idle.put_nowait(browser)

    async def _render_on(self, browser: _Browser, code: str, seed: int, deadline: float, started: float) -> RenderResult:
        browser.renders += 1
        key = f"/page/{browser.index}-{browser.renders}.html"
        nonce = secrets.token_hex(16)
        self._pending_html[key] = page_html(code, seed, self.contract, nonce, self.pixel_density,
                                             BACKENDS[self.backend].get("float16_masks", False))
        page = None
        crashed = asyncio.Event()  # the page's renderer process died: the sketch's doing (memory)
        died = asyncio.Event()  # the whole browser went away: not the sketch's doing
        process = browser.browser

        def on_disconnected(_browser) -> None:
            died.set()

        process.on("disconnected", on_disconnected)
        navigated = asyncio.Event()  # the page tried to leave its document: external_access
        over_memory: dict[str, int] = {}
        memory_event = asyncio.Event()
        page_url = SANDBOX_ORIGIN + key
        monitor = asyncio.ensure_future(self._watch_memory(browser, memory_event, over_memory))
        # A dead driver answers nothing and reports nothing (not even the browser's
        # disconnection): its death is watched for, or the render would wait out its deadline.
        driver_gone = asyncio.Event()
        driver_watch = asyncio.ensure_future(self._watch_driver(driver_gone))
        held = None
        try:
            page = await browser.context.new_page()
            page.on("crash", lambda _page: crashed.set())
            # The page should send nothing to the console or as a page error (runtime.js
            # cancels errors and rejections and silences the console): what arrives anyway
            # is counted, so a test can hold the page to that.
            page.on("console", self._count_page_message)
            page.on("pageerror", self._count_page_message)
            session = await browser.context.new_cdp_session(page)
            held = asyncio.ensure_future(self._watch_held_memory(session, memory_event, over_memory))

            def on_request(request) -> None:
                # A navigation away from the sketch's page (location, a form, a link) can only
                # be the sketch's doing; the network layer aborts it, and the render ends now
                # instead of at the deadline.
                if request.is_navigation_request() and request.url != page_url:
                    navigated.set()

            page.on("request", on_request)
            page.on("popup", lambda _popup: navigated.set())
            outcome = await _race(self._load_and_wait(browser, page, key, nonce),
                                  {"crashed": crashed, "browser_died": died, "navigated": navigated,
                                   "memory_limit": memory_event, "driver_died": driver_gone}, deadline)
            if outcome == "driver_died":
                browser.forget()
                return _infrastructure_result(started, "driver_died: the Playwright driver exited mid-render")
            if outcome == "memory_limit" and "held_mb" in over_memory:
                return _sketch_failure(started, "memory_limit", self._held_message(over_memory["held_mb"]))
            if outcome == "memory_limit":
                kill_pids(over_memory.get("pid"))
                await browser.close()
                return _sketch_failure(started, "memory_limit",
                                       f"the {over_memory.get('process', 'page')} used {over_memory.get('rss_mb', 0)} MB, "
                                       f"over the {over_memory.get('limit_mb', self.memory_limit_mb)} MB limit")
            if outcome == "navigated":
                await browser.close()
                return _sketch_failure(started, "external_access", "the sketch tried to navigate away from its page")
            if outcome == "timeout":
                await browser.close()  # the page may be spinning; recycle the whole process
                return _sketch_failure(started, "render_timeout", f"no painting within {deadline:g} s")
            if outcome == "browser_died" and not crashed.is_set():
                await browser.close()
                return _infrastructure_result(started, "browser_died: the browser process exited mid-render")
            if outcome in ("crashed", "browser_died"):
                await browser.close()
                return _sketch_failure(started, "render_crashed", "the renderer process died (memory or crash)")
            if outcome.get("endedAs") == "lockdown_failed":
                return _infrastructure_result(started, f"sandbox_failed: {safe_lines(outcome.get('errors'))}")
            # The GPU process's peak over this render, the bursts between samples included.
            gpu_peak = _peak_rss_mb(browser.gpu_pids)
            if gpu_peak > self.gpu_memory_limit_mb:
                await browser.close()
                return _sketch_failure(started, "memory_limit", f"the GPU process used {gpu_peak} MB, over the "
                                       f"{self.gpu_memory_limit_mb} MB limit")
            # What the page holds at the capture (it is idle now: the report has been sent).
            held.cancel()
            held_bytes = await asyncio.wait_for(self._held_bytes(session), max(0.5, deadline - (time.perf_counter() - started)))
            if held_bytes > self.contract.max_typed_array_bytes:
                return _sketch_failure(started, "memory_limit", self._held_message(held_bytes // MIB))
            # Decoding the picture is part of the render: it runs inside the same deadline.
            remaining = max(0.5, deadline - (time.perf_counter() - started))
            try:
                return await asyncio.wait_for(asyncio.to_thread(self._result_from_page, outcome, started), remaining)
            except asyncio.TimeoutError:
                return _sketch_failure(started, "render_timeout", f"the painting could not be read within {deadline:g} s")
        except Exception as exc:
            message = str(exc)
            if not self._driver_alive():
                # The driver went away under this render: not (yet) this sketch's doing.
                browser.forget()
                return _infrastructure_result(started, f"driver_died: {message[:300]}")
            browser_died = died.is_set() or not process.is_connected()
            await browser.close()
            if browser_died and not crashed.is_set():
                return _infrastructure_result(started, f"browser_died: {message[:300]}")
            if crashed.is_set() or "crash" in message.lower() or "Target closed" in message or "has been closed" in message:
                return _sketch_failure(started, "render_crashed", "the renderer process died (memory or crash)")
            return _infrastructure_result(started, f"render_protocol_error: {message[:300]}")
        finally:
            monitor.cancel()
            driver_watch.cancel()
            if held is not None:
                held.cancel()
            process.remove_listener("disconnected", on_disconnected)
            self._pending_html.pop(key, None)
            browser.waiters.pop(page, None)
            if page is not None and browser.browser is not None:
                try:
                    await asyncio.wait_for(page.close(), timeout=5)
                except Exception:
                    await browser.close()

    async def _load_and_wait(self, browser: _Browser, page, key: str, nonce: str) -> dict:
        reported = browser.waiters[page] = asyncio.get_running_loop().create_future()
        await page.goto(SANDBOX_ORIGIN + key, wait_until="commit")
        while True:
            payload = await reported
            try:
                result = json.loads(payload) if isinstance(payload, str) else None
            except ValueError:
                result = None
            if isinstance(result, dict) and result.get("nonce") == nonce:
                return result
            # A report without our nonce came from the sketch itself: ignore it, keep waiting.
            reported = browser.waiters[page] = asyncio.get_running_loop().create_future()

    async def _watch_driver(self, event: asyncio.Event) -> None:
        while self._driver_alive():
            await asyncio.sleep(0.2)
        event.set()

    def _count_page_message(self, _message) -> None:
        self.page_messages += 1

    def _held_message(self, held_mb: int) -> str:
        return (f"the page held {held_mb} MiB of typed arrays and buffers, over the "
                f"{self.contract.max_typed_array_bytes // MIB} MiB budget")

    async def _held_bytes(self, session) -> int:
        """Array-buffer bytes the page holds, as the engine counts them: a buffer the sketch let
        go of counts until V8 has freed it (it still occupies the page's memory until then)."""
        usage = await session.send("Runtime.getHeapUsage")
        return int(usage.get("backingStorageSize", 0))

    async def _watch_held_memory(self, session, event: asyncio.Event, found: dict) -> None:
        """Ask the engine what the page holds at every point where it is between tasks."""
        try:
            while not event.is_set():
                held = await self._held_bytes(session)  # answered when the page next yields
                if held > self.contract.max_typed_array_bytes:
                    found.update(held_mb=held // MIB)
                    event.set()
                    return
                await asyncio.sleep(MEMORY_SAMPLE_S)
        except Exception:
            return  # the page closed or crashed: the render's own outcome says so

    async def _watch_memory(self, browser: _Browser, event: asyncio.Event, found: dict) -> None:
        """Sample the browser's renderer processes; flag the first one over the limit.

        ArrayBuffer backing stores and canvases live outside the V8 heap, so
        --max-old-space-size alone does not stop a memory bomb; RSS does.
        """
        limits_kb = {"renderer": self.memory_limit_mb * 1024, "gpu-process": self.gpu_memory_limit_mb * 1024}
        roots = await asyncio.to_thread(browser_pids, browser.marker)
        watched: list[tuple[int, str]] = []
        samples = 0
        while not event.is_set():
            # Walking /proc for the process tree costs ~9 ms here; reading known processes'
            # RSS is ~0.1 ms, so the tree is refreshed only every 2 s (or until one is found).
            if not watched or samples % 20 == 0:
                watched = await asyncio.to_thread(_typed_pids, roots, tuple(limits_kb))
                gpu = [pid for pid, kind in watched if kind == "gpu-process"]
                if gpu != browser.gpu_pids:
                    # The GPU process's peak is read once more when the render ends
                    # (_gpu_peak_mb): its memory grows in bursts (the read-back of the
                    # painting) that sampling can miss. The peak starts from this render.
                    browser.gpu_pids = gpu
                    for pid in gpu:
                        _reset_peak_rss(pid)
            samples += 1
            for pid, kind in watched:
                rss = _rss_kb(pid)
                if rss is not None and rss > limits_kb[kind]:
                    found.update(pid=pid, rss_mb=rss // 1024, limit_mb=limits_kb[kind] // 1024,
                                 process="GPU process" if kind == "gpu-process" else "page")
                    event.set()
                    return
            await asyncio.sleep(MEMORY_SAMPLE_S)

    def _result_from_page(self, page_result: dict, started: float) -> RenderResult:
        # The page's text is the sketch's: well-formed and bounded from here on (env/text.py).
        reported = [v for v in page_result.get("violations", []) if isinstance(v, dict)]
        violations = _unique(code for v in reported if (code := safe_text(v.get("code"), 40)) in PAGE_REASON_CODES)
        details = safe_lines((f"{v.get('name')}: {v.get('code')}" for v in reported), limit=200, max_items=200)
        errors = safe_lines(page_result.get("errors", []))
        png = None
        fraction = 0.0
        data_url = page_result.get("png")
        if data_url and data_url.startswith("data:image/png;base64,"):
            encoded = data_url.split(",", 1)[1]
            size = png_size(encoded)
            side = self.contract.max_canvas_side
            if size is None:
                errors.append("the canvas could not be read as a PNG")
                violations.append("render_error")
            elif size[0] > side or size[1] > side:
                # Checked before decoding: the sketch's canvas, the sketch's fault.
                violations.append("canvas_too_large")
                errors.append(f"the canvas is {size[0]}x{size[1]} pixels; at most {side}x{side} is allowed")
            else:
                try:
                    png = base64.b64decode(encoded)
                    fraction = paint_fraction_of_png(png)
                except Exception as exc:  # a PNG the sketch's canvas produced: its failure
                    png = None
                    errors.append(f"the canvas could not be decoded: {exc}"[:300])
                    violations.append("render_error")
        ended_as = page_result.get("endedAs") or "unknown"
        if errors and not violations:
            violations.append("render_error")
        if png is None and not violations:
            violations.append("render_error")
            errors.append("the sketch produced no canvas")
        if fraction < self.contract.min_paint_fraction and "blank_canvas" not in violations:
            violations.append("blank_canvas")
        return RenderResult(
            passed=not violations,
            violations=violations,
            errors=errors,
            paint_fraction=fraction,
            render_ms=int((time.perf_counter() - started) * 1000),
            png=png,
            ended_as=ended_as,
            details=details,
        )


def png_size(encoded: str) -> tuple[int, int] | None:
    """Width and height from a base64 PNG's IHDR chunk, without decoding the image."""
    try:
        head = base64.b64decode(encoded[:44])
    except ValueError:
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def _children(pids: list[int]) -> list[int]:
    """All descendants of ``pids`` (Linux /proc)."""
    parent_of: dict[int, int] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            parent_of[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found, frontier = [], set(pids)
    while frontier:
        layer = [pid for pid, parent in parent_of.items() if parent in frontier]
        found.extend(layer)
        frontier = set(layer)
    return found


def _renderer_pids(roots: list[int]) -> list[int]:
    """Renderer processes (``--type=renderer``) under the browser ``roots``."""
    return [pid for pid, _kind in _typed_pids(roots, ("renderer",))]


def _typed_pids(roots: list[int], kinds: tuple[str, ...]) -> list[tuple[int, str]]:
    """(pid, kind) of the processes under the browser ``roots`` started with ``--type=KIND``."""
    found = []
    for pid in _children(roots):
        try:
            # Chromium rewrites its process title, so the switches may be one space-separated
            # string rather than NUL-separated arguments: matched as text.
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        for kind in kinds:
            if f"--type={kind}".encode() in command:
                found.append((pid, kind))
    return found


def _reset_peak_rss(pid: int) -> None:
    """Start the process's peak resident size (VmHWM) afresh (Linux: clear_refs 5)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass


def _peak_rss_mb(pids: list[int]) -> int:
    peak = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
        except (OSError, ValueError):
            continue
    return peak // 1024


def _rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _heaviest_renderer(roots: list[int]) -> tuple[int, int] | None:
    """(pid, RSS in kB) of the largest renderer process under the browser ``roots``."""
    sizes = [(pid, rss) for pid in _renderer_pids(roots) if (rss := _rss_kb(pid)) is not None]
    return max(sizes, key=lambda item: item[1]) if sizes else None


def kill_pids(*pids: int | None) -> None:
    for pid in pids:
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


async def _race(work, events: dict[str, asyncio.Event], deadline: float):
    """The work's result, the name of the first event that fired, or "timeout"."""
    work_task = asyncio.ensure_future(work)
    event_tasks = {asyncio.ensure_future(event.wait()): name for name, event in events.items()}
    try:
        done, _ = await asyncio.wait({work_task, *event_tasks}, timeout=deadline, return_when=asyncio.FIRST_COMPLETED)
        if work_task in done:
            return work_task.result()
        for task, name in event_tasks.items():
            if task in done:
                return name
        return "timeout"
    finally:
        for task in (work_task, *event_tasks):
            if not task.done():
                task.cancel()
        await asyncio.gather(work_task, *event_tasks, return_exceptions=True)


# A render lost to its browser or driver is tried this many times, the last one alone.
RENDER_ATTEMPTS = 3
_LOST = ("browser_died", "driver_died", "render_protocol_error")


def _lost_to_infrastructure(result: RenderResult) -> bool:
    return result.infrastructure_error is not None and result.infrastructure_error.startswith(_LOST)


def _driver_pid(driver) -> int | None:
    process = getattr(getattr(getattr(driver, "_client", None), "_transport", None), "_proc", None)
    return getattr(process, "pid", None)


class _Admission:
    """Renders run side by side (``enter(exclusive=False)``) or alone (``exclusive=True``: it
    waits for the others to end, and none start until it has)."""

    def __init__(self):
        self._condition = asyncio.Condition()
        self._active = 0
        self._exclusive = False
        self._waiting = 0

    @contextlib.asynccontextmanager
    async def enter(self, exclusive: bool):
        async with self._condition:
            if exclusive:
                self._waiting += 1
                try:
                    await self._condition.wait_for(lambda: not self._exclusive and self._active == 0)
                finally:
                    self._waiting -= 1
                self._exclusive = True
            else:
                await self._condition.wait_for(lambda: not self._exclusive and self._waiting == 0)
                self._active += 1
        try:
            yield
        finally:
            async with self._condition:
                if exclusive:
                    self._exclusive = False
                else:
                    self._active -= 1
                self._condition.notify_all()


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _sketch_failure(started: float, code: str, message: str) -> RenderResult:
    return RenderResult(
        passed=False, violations=[code], errors=[message], paint_fraction=0.0,
        render_ms=int((time.perf_counter() - started) * 1000), png=None, ended_as=code,
    )


def _infrastructure_result(started: float, message: str) -> RenderResult:
    message = safe_text(message)  # a protocol error can quote what the page sent
    return RenderResult(
        passed=False, violations=["infrastructure_error"], errors=[message], paint_fraction=0.0,
        render_ms=int((time.perf_counter() - started) * 1000), png=None, ended_as="infrastructure_error",
        infrastructure_error=message,
    )


def default_renderers() -> int:
    # One browser per core: GL raster is CPU-bound, so more browsers than cores only contend.
    return max(1, os.cpu_count() or 1)


class SyncRenderer:
    """Blocking wrapper: runs a RendererPool on a private event loop thread."""

    def __init__(self, **renderer_kwargs):
        # The browsers are launched, used and closed on this one loop (Playwright objects
        # belong to the loop that created them).
        self._portal = Portal("the renderer")
        try:
            self.renderer_pool = RendererPool(**renderer_kwargs)
            self._portal.call(self.renderer_pool.start())
        except BaseException:
            self._portal.close()
            raise

    def submit(self, coroutine) -> "concurrent.futures.Future":
        return self._portal.submit(coroutine)

    def render(self, code: str, seed: int = 0, deadline_s: float | None = None) -> RenderResult:
        return self._portal.call(self.renderer_pool.render(code, seed, deadline_s))

    def close(self):
        if self._portal.closed:
            return
        try:
            self._portal.call(self.renderer_pool.close())
        finally:
            self._portal.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
