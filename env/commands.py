"""The environment's command-line verbs: `render`, `serve`, `bench render` and `bench serve`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import numpy as np

from env.contact_sheet import SheetItem, contact_sheet
from env.contract import SketchContract
from env.core import SketchOutcome, evaluate_reply
from env.files import DATA_ROOT
from env.pigment import load_rgb
from env.renderer import BACKENDS, DEFAULT_BACKEND, WARM_UP_SKETCH, RendererPool

EXAMPLE_SKETCHES = DATA_ROOT / "examples" / "sketches"
# Slack on top of the render deadline for the static gate, browser start and PNG decoding,
# so the CLI as a whole finishes each file within deadline + this.
DEADLINE_SLACK_S = 30.0


def example_sketches() -> list[Path]:
    return sorted(EXAMPLE_SKETCHES.glob("*.js"))


def _read_reply(path: Path) -> str | bytes:
    # Bytes go to the gate undecoded: it reports not_utf8 and too_long itself.
    return path.read_bytes()


async def render_files(
    files: list[Path],
    seed: int,
    backend: str,
    deadline_s: float,
    renderers: int | None = None,
    pixel_density: float = 1.0,
    progress: bool = True,
    previous: str | None = None,
) -> list[SketchOutcome]:
    """Gate and render every file concurrently across the browser pool, in input order.
    ``previous``: the current sketch each file (a reply) is applied to, as on a revision turn."""
    contract = SketchContract()
    async with RendererPool(renderers=renderers, backend=backend, contract=contract, deadline_s=deadline_s,
                            pixel_density=pixel_density) as renderer_pool:
        tasks = [asyncio.ensure_future(evaluate_reply(_read_reply(f), renderer_pool, seed, contract, current=previous))
                 for f in files]
        if progress and sys.stderr.isatty():
            from tqdm import tqdm

            for done in tqdm(asyncio.as_completed(tasks), total=len(tasks), desc="render", unit="sketch", file=sys.stderr):
                await done
        return list(await asyncio.gather(*tasks))


def outcome_record(path: Path, outcome: SketchOutcome, png_path: Path | None) -> dict:
    """The CLI's JSON line (contract in ARCHITECTURE.md)."""
    return {
        "file": str(path),
        "passed": outcome.passed,
        "violations": outcome.violations,
        "errors": outcome.errors,
        "paint_fraction": round(outcome.paint_fraction, 6),
        "elapsed_ms": outcome.render_ms,
        "png": str(png_path) if png_path else None,
    }


def report_missing_files(command: str, paths: list[Path]) -> bool:
    """Print the usage error for input files that do not exist; True when any is missing."""
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"watercolour {command}: no such file: {', '.join(missing)}", file=sys.stderr)
    return bool(missing)


def read_previous_sketch(path: Path) -> str | None:
    """The text of ``--revise PREVIOUS.js``: a sketch's code, or None (with a message) when it is no text."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"watercolour render: --revise {path}: not a readable UTF-8 sketch ({exc})", file=sys.stderr)
        return None


def cmd_render(args) -> int:
    files = [Path(f) for f in args.files]
    revise = Path(args.revise) if args.revise else None
    if report_missing_files("render", files + ([revise] if revise else [])):
        return 2
    previous = read_previous_sketch(revise) if revise else None
    if revise and previous is None:
        return 2
    out_dir = Path(args.out_dir) if args.out_dir else None
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
    outcomes = asyncio.run(render_files(files, args.seed, args.backend, args.deadline, args.renderers,
                                        progress=not args.json, previous=previous))
    records, sheet_items = [], []
    for index, (path, outcome) in enumerate(zip(files, outcomes)):
        png_path = None
        if out_dir and outcome.png:
            png_path = out_dir / f"{index:03d}-{path.stem}.png"
            png_path.write_bytes(outcome.png)
            if outcome.code is not None:
                # The sketch beside its painting (the code extracted from a raw reply), so
                # `watercolour score OUT/*.png` finds it and scores length without --sources.
                png_path.with_suffix(".js").write_text(outcome.code, encoding="utf-8")
        record = outcome_record(path, outcome, png_path)
        if revise:
            # The sketch the reply leaves: PREVIOUS.js's text unchanged when its edit failed
            # or it held no sketch, as the environment keeps an episode's sketch.
            record["code"] = outcome.code if outcome.code is not None else previous
        records.append(record)
        sheet_items.append(SheetItem(path.stem, outcome.png,
                                     "passed" if outcome.passed else ",".join(outcome.violations)[:38]))
    if args.json:
        for record in records:
            print(json.dumps(record), flush=True)
    else:
        _print_table(records)
    if out_dir:
        sheet = out_dir / "contact_sheet.png"
        sheet.write_bytes(contact_sheet(sheet_items, title=f"watercolour render (seed {args.seed}, {args.backend})"))
        if not args.json:
            print(f"contact sheet: {sheet}")
    return 0


def cmd_serve(args) -> int:
    # Said first: importing the server (openenv, FastAPI, Gradio) takes a few seconds, up to a
    # minute from a cold disk, before uvicorn says anything.
    print(f"watercolour serve: loading the OpenEnv server for http://{args.host}:{args.port} "
          f"(renderer backend {args.backend}; the browsers start with the first episode)…", flush=True)
    from env.server import serve

    serve(host=args.host, port=args.port, max_sessions=args.max_sessions, backend=args.backend,
          deadline=args.deadline, renderers=args.renderers, token=args.token)
    return 0


def cmd_bench_serve(args) -> int:
    import subprocess

    from env.bench_serve import format_summary, run_load, start_server

    reply = Path(args.sketch).read_text(encoding="utf-8")
    process = None
    url = args.url
    try:
        if url is None:
            process, url = start_server(max(args.max_sessions or args.sessions, 1), args.backend, args.renderers,
                                        args.token)
        summary = run_load(url, args.sessions, args.turns, args.processes, reply, args.token)
    finally:
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    print(json.dumps(summary, indent=1) if args.json else format_summary(summary))
    for error in summary["errors"]:
        print(f"  error: {error}", file=sys.stderr)
    return 0 if summary["lost"] == 0 and summary["refused"] == 0 else 1


def _add_renderers(parser, help: str) -> None:
    parser.add_argument("--renderers", type=int, default=None, metavar="N", help=help)
    # The old name, kept so earlier command lines still run.
    parser.add_argument("--pool-size", dest="renderers", type=int, default=None, help=argparse.SUPPRESS)


def add_parsers(sub):
    """`render`, `serve` and `bench` (parsers only: nothing here starts a browser). Returns the
    `bench` subcommands, so the folders above add their own benchmarks (`bench learn`)."""
    render = sub.add_parser("render", help="gate and render sketches (raw model replies or .js files)")
    render.add_argument("files", nargs="+", metavar="FILE")
    render.add_argument("--seed", type=int, default=0)
    render.add_argument("--out-dir", default=None,
                        help="write each PNG, its sketch (NNN-STEM.png + NNN-STEM.js) and a contact sheet here")
    render.add_argument("--json", action="store_true", help="one JSON object per file, one per line")
    render.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    render.add_argument("--deadline", type=float, default=90.0, metavar="SECONDS", help="per-render deadline")
    _add_renderers(render, "browser processes (default: one per core)")
    render.add_argument("--revise", default=None, metavar="PREVIOUS.js",
                        help="apply each FILE (a revision reply: SEARCH/REPLACE edit blocks or a full sketch) to this "
                             "sketch, then gate and render the result; --json adds the resulting sketch as \"code\"")
    render.set_defaults(func=cmd_render)

    serve = sub.add_parser("serve", help="run the OpenEnv server (WebSocket sessions)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--max-sessions", type=int, default=64)
    serve.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    serve.add_argument("--deadline", type=float, default=90.0, metavar="SECONDS")
    _add_renderers(serve, "browser processes (default: one per core)")
    serve.add_argument("--token", default=None,
                       help="bearer token every request must carry (default: $WATERCOLOUR_TOKEN); "
                            "required to bind anything but 127.0.0.1")
    serve.set_defaults(func=cmd_serve)

    bench = sub.add_parser("bench", help="benchmarks that print ratios measured side by side")
    bench_sub = bench.add_subparsers(dest="bench_command", required=True)
    bench_render = bench_sub.add_parser("render", help="default backend vs the reference SwiftShader-GL path")
    bench_render.add_argument("files", nargs="*", metavar="SKETCH", help="default: examples/sketches/*.js")
    bench_render.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    bench_render.add_argument("--seed", type=int, default=1)
    bench_render.add_argument("--repeats", type=int, default=1)
    bench_render.add_argument("--deadline", type=float, default=180.0)
    bench_render.set_defaults(func=cmd_bench_render)
    from env.bench_serve import DEFAULT_SKETCH

    serve = bench_sub.add_parser("serve", help="many concurrent WebSocket sessions against the env server")
    serve.add_argument("--url", default=None, help="an env server to load (default: start one on a free port)")
    serve.add_argument("--sessions", type=int, default=64)
    serve.add_argument("--turns", type=int, default=3)
    serve.add_argument("--processes", type=int, default=4, help="client processes")
    serve.add_argument("--max-sessions", type=int, default=None, help="for the started server (default: --sessions)")
    serve.add_argument("--backend", default=None, help="for the started server")
    _add_renderers(serve, "browsers of the started server")
    serve.add_argument("--sketch", default=str(DEFAULT_SKETCH), help="the reply every step sends")
    serve.add_argument("--token", default=None, help="bearer token (also given to the started server)")
    serve.add_argument("--json", action="store_true")
    serve.set_defaults(func=cmd_bench_serve)
    return bench_sub


def _print_table(records: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="watercolour render")
    for column in ("file", "passed", "violations", "paint", "ms"):
        table.add_column(column)
    for r in records:
        table.add_row(Path(r["file"]).name, "yes" if r["passed"] else "no", ", ".join(r["violations"]),
                      f"{r['paint_fraction']:.3f}", str(r["elapsed_ms"]))
    Console().print(table)


def mean_abs_difference(png_a: bytes, png_b: bytes) -> float:
    a = load_rgb(png_a).astype(np.int16)
    b = load_rgb(png_b).astype(np.int16)
    if a.shape != b.shape:
        return float("nan")
    return float(np.abs(a - b).mean())


async def _bench_backend(backend: str, codes: list[str], seed: int, deadline_s: float, repeats: int) -> list[tuple[float, bytes | None, bool]]:
    """Sequential renders on one browser: best latency of `repeats`, the PNG, and whether
    every repeat gave the same bytes (determinism, checked on the fly)."""
    results = []
    async with RendererPool(renderers=1, backend=backend, deadline_s=deadline_s) as renderer_pool:
        await renderer_pool.render(WARM_UP_SKETCH, seed)  # browser start-up is not part of any sketch's time
        for code in codes:
            best, pngs = float("inf"), []
            for _ in range(repeats):
                started = time.perf_counter()
                result = await renderer_pool.render(code, seed)
                best = min(best, time.perf_counter() - started)
                pngs.append(result.png)
            results.append((best, pngs[0], len(set(pngs)) == 1 and pngs[0] is not None))
    return results


def cmd_bench_render(args) -> int:
    files = [Path(f) for f in args.files] if args.files else example_sketches()
    codes = [f.read_text() for f in files]
    print(f"bench render: {len(files)} sketches, default backend '{args.backend}' vs 'reference' "
          f"(one browser each, warm, best of {args.repeats})", flush=True)
    fast = asyncio.run(_bench_backend(args.backend, codes, args.seed, args.deadline, args.repeats))
    reference = asyncio.run(_bench_backend("reference", codes, args.seed, args.deadline, 1))
    same = "same bytes" if args.repeats > 1 else ""
    print(f"{'sketch':<28}{args.backend + ' s':>12}{'reference s':>14}{'ratio':>8}{'mean|Δ|/255':>14}{same:>12}")
    total_fast = total_ref = 0.0
    differences, deterministic = [], []
    for path, (t_fast, png_fast, stable), (t_ref, png_ref, _) in zip(files, fast, reference):
        diff = mean_abs_difference(png_fast, png_ref) if png_fast and png_ref else float("nan")
        differences.append(diff)
        deterministic.append(stable)
        total_fast += t_fast
        total_ref += t_ref
        stable_text = ("yes" if stable else "NO") if args.repeats > 1 else ""
        print(f"{path.stem:<28}{t_fast:>12.2f}{t_ref:>14.2f}{t_ref / t_fast:>8.2f}{diff:>14.3f}{stable_text:>12}")
    mean_diff = float(np.nanmean(differences)) if differences else float("nan")
    print(f"{'total':<28}{total_fast:>12.2f}{total_ref:>14.2f}{total_ref / total_fast:>8.2f}{mean_diff:>14.3f}")
    determinism = f" deterministic={sum(deterministic)}/{len(deterministic)}" if args.repeats > 1 else ""
    print(f"bench: backend={args.backend} speedup={total_ref / total_fast:.2f}x mean_abs_diff={mean_diff:.3f}/255{determinism}")
    return 0
