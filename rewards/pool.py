"""The reference pool: paintings in tiers (`love`, `okay`, `reject`) with their sketch sources.

On disk::

    POOL_DIR/manifest.jsonl      one JSON object per painting (see PoolEntry)
    POOL_DIR/love/*.png          …and okay/, reject/
    POOL_DIR/candidate/*.png     staged by `pool build`; rating changes the manifest's tier,
                                 not where the file lives
    POOL_DIR/sources/*.js        the sketch behind each painting

The judge compares a candidate with references drawn from here; the style reward
summarises the love tier. The manifest is rewritten atomically (temp file + rename), so a
reader never sees half a manifest.
"""

from __future__ import annotations

import csv
import fcntl
import json
import random
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable

from env.files import DATA_ROOT, write_atomically

# The pool the project ships (rendered from its own examples; `watercolour pool build-starter`).
STARTER_POOL_DIR = DATA_ROOT / "pools" / "starter"

# Rated tiers. `candidate` marks a painting staged by `watercolour pool build` and not yet
# rated in `pool serve`; the judge and the style reward never use candidates.
RATED_TIERS = ("love", "okay", "reject")
CANDIDATE = "candidate"
TIERS = RATED_TIERS + (CANDIDATE,)
MANIFEST = "manifest.jsonl"


@dataclass
class PoolEntry:
    file: str  # relative to the pool directory, e.g. "love/poppies.png"
    tier: str
    subject: str = ""
    source_file: str | None = None  # relative path of the sketch source, if known
    generator: str = ""
    paint_coverage: float | None = None
    id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.tier not in TIERS:
            raise ValueError(f"unknown tier {self.tier!r}; expected one of {TIERS}")
        if not self.id:
            self.id = Path(self.file).stem

    @classmethod
    def from_mapping(cls, mapping: dict[str, Any]) -> "PoolEntry":
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in mapping.items() if k in known}
        data.setdefault("extra", {}).update({k: v for k, v in mapping.items() if k not in known})
        return cls(**data)


@dataclass(frozen=True)
class Reference:
    """What the judge needs of a reference painting."""

    id: str
    png: bytes
    tier: str


@dataclass(frozen=True)
class CorruptLine:
    """A manifest line that does not parse: reported, and written back unchanged on save."""

    number: int
    text: str
    error: str


class ReferencePool:
    def __init__(self, root: str | Path, entries: list[PoolEntry], description: str = "",
                 corrupt: list[CorruptLine] | None = None):
        self.root = Path(root)
        self._entries = entries
        self.description = description
        self.corrupt = corrupt or []

    # --- loading and saving ---------------------------------------------------------

    @classmethod
    def load(cls, root: str | Path, keep_corrupt: bool = False) -> "ReferencePool":
        """``keep_corrupt``: load around unparsable lines instead of refusing the pool (the
        curation app reports them and keeps them verbatim, so a rating never drops a line)."""
        root = Path(root)
        manifest = root / MANIFEST
        if not manifest.is_file():
            raise FileNotFoundError(f"no {MANIFEST} in {root}: not a reference pool")
        entries, corrupt = [], []
        for number, line in enumerate(manifest.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entries.append(PoolEntry.from_mapping(json.loads(line)))
            except (ValueError, TypeError, AttributeError) as exc:
                corrupt.append(CorruptLine(number, line, f"{type(exc).__name__}: {exc}"))
        if corrupt and not keep_corrupt:
            raise ValueError("corrupt pool manifest:\n" + "\n".join(f"{manifest}:{c.number}: {c.error}" for c in corrupt))
        description_file = root / "README.md"
        description = description_file.read_text(encoding="utf-8") if description_file.exists() else ""
        return cls(root, entries, description, corrupt)

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(asdict(e)) + "\n" for e in self._entries] + [c.text + "\n" for c in self.corrupt]
        write_atomically(self.root / MANIFEST, "".join(lines))

    def entry(self, entry_id: str) -> PoolEntry | None:
        return next((e for e in self._entries if e.id == entry_id), None)

    def image_path(self, entry: PoolEntry) -> Path | None:
        """The entry's painting if it exists inside the pool folder (a manifest cannot point
        the app at other files), else None."""
        root = self.root.resolve()
        path = (self.root / entry.file).resolve()
        return path if path.is_relative_to(root) and path.is_file() else None

    # --- queries --------------------------------------------------------------------

    def entries(self, tier: str | None = None, subject: str | None = None) -> list[PoolEntry]:
        return [e for e in self._entries
                if (tier is None or e.tier == tier) and (subject is None or e.subject == subject)]

    def png(self, entry: PoolEntry) -> bytes:
        return (self.root / entry.file).read_bytes()

    def source(self, entry: PoolEntry) -> str | None:
        if not entry.source_file:
            return None
        path = self.root / entry.source_file
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def counts(self) -> dict[str, int]:
        return {tier: len(self.entries(tier)) for tier in TIERS}

    def draw(self, seed: int, love: int = 2, okay: int = 2, subject: str | None = None) -> list[Reference]:
        """References for one GRPO group: the same seed gives the same references.

        Prefers the subject's own paintings and tops up from the whole tier.
        """
        rng = random.Random(seed)
        chosen: list[Reference] = []
        for tier, count in (("love", love), ("okay", okay)):
            candidates = self.entries(tier, subject) if subject else []
            if len(candidates) < count:
                rest = [e for e in self.entries(tier) if e not in candidates]
                candidates = candidates + rng.sample(rest, min(len(rest), count - len(candidates)))
            picked = rng.sample(candidates, min(count, len(candidates)))
            chosen.extend(Reference(e.id, self.png(e), e.tier) for e in picked)
        return chosen

    # --- building ---------------------------------------------------------------------

    def add(self, png: bytes, tier: str, name: str, subject: str = "", source: str | None = None,
            generator: str = "", paint_coverage: float | None = None, source_file: str | None = None,
            **extra) -> PoolEntry:
        """Store a painting. The sketch is copied into sources/ (``source``) or, for sketches
        that already live in the project, referenced by a path relative to the pool (``source_file``)."""
        (self.root / tier).mkdir(parents=True, exist_ok=True)
        file = f"{tier}/{name}.png"
        (self.root / file).write_bytes(png)
        if source is not None:
            (self.root / "sources").mkdir(parents=True, exist_ok=True)
            source_file = f"sources/{name}.js"
            (self.root / source_file).write_text(source, encoding="utf-8")
        entry = PoolEntry(file=file, tier=tier, subject=subject, source_file=source_file,
                          generator=generator, paint_coverage=paint_coverage, extra=extra)
        self._entries.append(entry)
        return entry


@contextmanager
def locked_pool(root: str | Path):
    """The pool, loaded fresh under an exclusive lock and saved when the block ends normally.

    Every writer (the curation app's requests, `pool build`) goes through here, so two browser
    tabs or a build running next to the app never overwrite each other's changes.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".manifest.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            pool = ReferencePool.load(root, keep_corrupt=True) if (root / MANIFEST).is_file() else ReferencePool(root, [])
            yield pool
            pool.save()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# --- import from a Hub dataset in imagefolder layout --------------------------------------

def _metadata_rows(source_dir: Path) -> Iterable[dict[str, Any]]:
    """Rows of an imagefolder's metadata (metadata.jsonl or metadata.csv, any split folder)."""
    found = False
    for metadata in sorted(source_dir.rglob("metadata.jsonl")):
        found = True
        for line in metadata.read_text(encoding="utf-8").splitlines():
            if line.strip():
                yield {**json.loads(line), "_dir": metadata.parent}
    for metadata in sorted(source_dir.rglob("metadata.csv")):
        found = True
        with metadata.open(newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                yield {**row, "_dir": metadata.parent}
    if not found:
        raise FileNotFoundError(f"no metadata.jsonl or metadata.csv under {source_dir} (imagefolder layout expected)")


def import_imagefolder(source_dir: str | Path, pool_dir: str | Path) -> ReferencePool:
    """Copy a local imagefolder dataset with the public pool's columns into a pool.

    Columns used: file_name, tier, subject, generator_model, source_file (a path next to
    the image, or the sketch text itself), plus paint_coverage when present. Other columns
    are kept in each entry's ``extra``.
    """
    source_dir, pool_dir = Path(source_dir), Path(pool_dir)
    pool = ReferencePool.load(pool_dir) if (pool_dir / MANIFEST).exists() else ReferencePool(pool_dir, [])
    taken = {e.id for e in pool.entries()}
    for row in _metadata_rows(source_dir):
        base: Path = row.pop("_dir")
        image = base / row["file_name"]
        tier = str(row.get("tier", "")).strip().lower()
        if tier not in RATED_TIERS:
            raise ValueError(f"{image}: tier {row.get('tier')!r} is not one of {RATED_TIERS}")
        name = Path(row["file_name"]).stem
        while name in taken:
            name += "_"
        taken.add(name)
        source = row.get("source_file")
        code = None
        if source:
            source_path = base / str(source)
            code = source_path.read_text(encoding="utf-8") if source_path.is_file() else (
                str(source) if "function" in str(source) else None)
        coverage = row.get("paint_coverage")
        known = {"file_name", "tier", "subject", "generator_model", "source_file", "paint_coverage"}
        pool.add(image.read_bytes(), tier, name, subject=str(row.get("subject", "")), source=code,
                 generator=str(row.get("generator_model", "")),
                 paint_coverage=float(coverage) if coverage not in (None, "") else None,
                 **{k: v for k, v in row.items() if k not in known})
    pool.save()
    return pool
