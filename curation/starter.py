"""The starter pool: the project's own example sketches, rendered and tiered by their authors.

It is labelled honestly: a starter so that the judge and the style reward have something to
compare with out of the box, not a curated taste. `love` holds the layered, realistic
examples (examples/sketches), `okay` the deliberately plain ones (examples/simple).
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

from env.core import evaluate_reply
from env.renderer import RendererPool
from env.files import DATA_ROOT, write_atomically
from rewards.pool import STARTER_POOL_DIR, ReferencePool

STARTER_SOURCES = {"love": DATA_ROOT / "examples" / "sketches", "okay": DATA_ROOT / "examples" / "simple"}
STARTER_SEED = 1
STARTER_README = """# Starter pool (not a curated taste)

Rendered from the project's own example sketches with `watercolour pool build-starter`
(seed {seed}). `love` = the layered, realistic examples in examples/sketches; `okay` = the
deliberately plain ones in examples/simple. Tiers were assigned by the sketches' authors,
not by a grading pass: build a real pool for your subject (see `watercolour pool`).
"""


def subject_of(code: str, fallback: str) -> str:
    """The sketch's first comment line, up to the colon: "// Three poppies in a meadow: …"."""
    match = re.search(r"^\s*//\s*([^\n:.]+)", code)
    return match.group(1).strip().lower() if match else fallback


async def _render_all(sketches: list[tuple[str, Path]], seed: int):
    async with RendererPool(deadline_s=180) as pool:
        return await asyncio.gather(*(evaluate_reply(path.read_text(), pool, seed) for _, path in sketches))


def build_starter_pool(destination: str | Path = STARTER_POOL_DIR, seed: int = STARTER_SEED) -> ReferencePool:
    destination = Path(destination)
    sketches = [(tier, path) for tier, folder in STARTER_SOURCES.items() for path in sorted(folder.glob("*.js"))]
    outcomes = asyncio.run(_render_all(sketches, seed))
    failed = [f"{path.name}: {o.violations}" for (_, path), o in zip(sketches, outcomes) if not o.passed]
    if failed:
        raise RuntimeError("starter sketches failed the gate: " + "; ".join(failed))
    pool = ReferencePool(destination, [])
    destination.mkdir(parents=True, exist_ok=True)
    for (tier, path), outcome in zip(sketches, outcomes):
        code = path.read_text()
        # The sketches stay where they are (examples/); the pool points at them.
        source_file = os.path.relpath(path, destination)
        pool.add(outcome.png, tier, path.stem, subject=subject_of(code, path.stem), source_file=source_file,
                 generator="project example (hand-written)", paint_coverage=round(outcome.paint_fraction, 4),
                 seed=seed, curation="starter")
    pool.save()
    write_atomically(destination / "README.md", STARTER_README.format(seed=seed))
    return pool
