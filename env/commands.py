"""The environment's command-line verbs: `render`, `bench render`, and the pre-trainer demo."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import numpy as np

from env.contact_sheet import SheetItem, contact_sheet
from env.contract import SketchContract
from env.core import SketchOutcome, evaluate_reply
from env.pigment import load_rgb
from env.renderer import WARM_UP_SKETCH, RendererPool

PROJECT_ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_SKETCHES = PROJECT_ROOT / "examples" / "sketches"
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
    pool_size: int | None = None,
    pixel_density: float = 1.0,
    progress: bool = True,
) -> list[SketchOutcome]:
    """Gate and render every file concurrently across the browser pool, in input order."""
    contract = SketchContract()
    async with RendererPool(size=pool_size, backend=backend, contract=contract, deadline_s=deadline_s,
                            pixel_density=pixel_density) as pool:
        tasks = [asyncio.ensure_future(evaluate_reply(_read_reply(f), pool, seed, contract)) for f in files]
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


def cmd_render(args) -> int:
    files = [Path(f) for f in args.files]
    if report_missing_files("render", files):
        return 2
    out_dir = Path(args.out_dir) if args.out_dir else None
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
    outcomes = asyncio.run(render_files(files, args.seed, args.backend, args.deadline, args.pool_size,
                                        progress=not args.json))
    records, sheet_items = [], []
    for index, (path, outcome) in enumerate(zip(files, outcomes)):
        png_path = None
        if out_dir and outcome.png:
            png_path = out_dir / f"{index:03d}-{path.stem}.png"
            png_path.write_bytes(outcome.png)
        records.append(outcome_record(path, outcome, png_path))
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
    async with RendererPool(size=1, backend=backend, deadline_s=deadline_s) as pool:
        await pool.render(WARM_UP_SKETCH, seed)  # browser start-up is not part of any sketch's time
        for code in codes:
            best, pngs = float("inf"), []
            for _ in range(repeats):
                started = time.perf_counter()
                result = await pool.render(code, seed)
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
