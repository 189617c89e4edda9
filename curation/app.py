"""`watercolour pool serve POOL_DIR`: a local web app to rate candidate paintings into tiers.

A FastAPI server on 127.0.0.1 and one static page (curation/static/pool_app.html). The API only
ever takes entry ids from requests, never paths: an image or a source is found through the
manifest and must lie inside the pool folder. Every rating is one read-modify-write of the
manifest under the pool's file lock (`locked_pool`), written atomically, and appended to
``ratings.jsonl`` (time, id, from, to, client), so two tabs rating at once lose nothing and
every decision can be traced. Corrupt manifest lines are reported and kept verbatim.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, Field

from env.errors import UsageError
from env.files import DATA_ROOT
from env.security import LOOPBACK_HOSTS
from rewards.pool import CANDIDATE, MANIFEST, RATED_TIERS, TIERS, PoolEntry, ReferencePool, locked_pool
from curation.tools import pool_statistics

PAGE = Path(__file__).resolve().parent / "static" / "pool_app.html"
EXAMPLES = DATA_ROOT / "examples"
RATINGS_LOG = "ratings.jsonl"


class Rating(BaseModel):
    id: str = Field(min_length=1, max_length=200)
    tier: str = Field(min_length=1, max_length=20)
    client: str = Field(default="", max_length=100)


def entry_view(pool: ReferencePool, entry: PoolEntry) -> dict[str, Any]:
    return {
        "id": entry.id, "tier": entry.tier, "subject": entry.subject, "coverage": entry.paint_coverage,
        "generator": entry.generator, "hpsv3": entry.extra.get("hpsv3"),
        "missing": pool.image_path(entry) is None, "has_source": bool(entry.source_file),
    }


def pool_stats(pool: ReferencePool) -> dict[str, Any]:
    """`pool stats` (counts, coverage, what the judge can draw) plus what the page must warn about."""
    return {
        **pool_statistics(pool),
        "missing_images": [e.id for e in pool.entries() if pool.image_path(e) is None],
        "corrupt_lines": [{"line": c.number, "error": c.error} for c in pool.corrupt],
    }


def create_pool_app(pool_dir: str | Path) -> FastAPI:
    root = Path(pool_dir)
    # Fail at start-up, not on the first request, when the folder is not a pool.
    if not (root / MANIFEST).is_file():
        raise FileNotFoundError(f"no manifest.jsonl in {root}: not a pool (build one with `watercolour pool build`)")
    app = FastAPI(title="watercolour pool", docs_url=None, redoc_url=None, openapi_url=None)

    def current() -> ReferencePool:
        return ReferencePool.load(root, keep_corrupt=True)

    def find(pool: ReferencePool, entry_id: str) -> PoolEntry:
        entry = pool.entry(entry_id)
        if entry is None:
            raise HTTPException(404, detail={"error": "unknown_entry", "id": entry_id})
        return entry

    @app.get("/", response_class=HTMLResponse)
    def page() -> HTMLResponse:
        return HTMLResponse(PAGE.read_text(encoding="utf-8"))

    @app.get("/api/entries")
    def entries() -> dict[str, Any]:
        pool = current()
        return {"pool": str(root), "tiers": list(TIERS), "entries": [entry_view(pool, e) for e in pool.entries()]}

    @app.get("/api/stats")
    def stats() -> dict[str, Any]:
        return pool_stats(current())

    @app.get("/api/image/{entry_id}")
    def image(entry_id: str) -> Response:
        pool = current()
        entry = find(pool, entry_id)
        path = pool.image_path(entry)
        if path is None:
            return JSONResponse({"error": "missing_image", "id": entry_id, "file": entry.file}, status_code=404)
        return FileResponse(path, media_type="image/png", headers={"Cache-Control": "no-store"})

    @app.get("/api/source/{entry_id}", response_class=PlainTextResponse)
    def source(entry_id: str) -> PlainTextResponse:
        pool = current()
        entry = find(pool, entry_id)
        path = (root / entry.source_file).resolve() if entry.source_file else None
        # Inside the pool, or the project's own examples (the starter pool points there).
        allowed = path is not None and any(path.is_relative_to(base) for base in (root.resolve(), EXAMPLES))
        if not allowed or not path.is_file() or path.suffix != ".js":
            return PlainTextResponse("// no sketch source recorded for this painting", status_code=404)
        return PlainTextResponse(path.read_text(encoding="utf-8", errors="replace"))

    @app.post("/api/rate")
    def rate(rating: Rating) -> dict[str, Any]:
        # Undo sends an entry back to the tier it came from, candidate included.
        if rating.tier not in RATED_TIERS + (CANDIDATE,):
            raise HTTPException(422, detail={"error": "unknown_tier", "tier": rating.tier})
        with locked_pool(root) as pool:
            entry = find(pool, rating.id)
            previous = entry.tier
            entry.tier = rating.tier
            entry.extra["rated_at"] = time.time()
            _append_log(root / RATINGS_LOG, {"time": entry.extra["rated_at"], "id": entry.id, "from": previous,
                                             "to": rating.tier, "client": rating.client})
        return {"id": rating.id, "tier": rating.tier, "previous": previous}

    return app


def _append_log(path: Path, record: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def serve(pool_dir: str, host: str = "127.0.0.1", port: int = 8020) -> None:
    import uvicorn

    if host not in LOOPBACK_HOSTS:
        raise UsageError("the curation app has no authentication; it binds to 127.0.0.1 only "
                         "(use an SSH tunnel to rate from another machine)")
    try:
        app = create_pool_app(pool_dir)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    stats = pool_stats(ReferencePool.load(pool_dir, keep_corrupt=True))
    print(f"pool serve: {pool_dir}: {stats['tiers']}; open http://{host}:{port}/ "
          "(keys: 1 love, 2 okay, 3 reject, arrows move, Enter focus view, u undo)", flush=True)
    for problem in stats["corrupt_lines"]:
        print(f"pool serve: manifest line {problem['line']} is corrupt ({problem['error']}); kept as is", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
