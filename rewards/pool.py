"""The reference pool: paintings in tiers (`love`, `okay`, `reject`) with their sketch sources.

On disk::

    POOL_DIR/manifest.jsonl      one JSON object per painting (see PoolEntry)
    POOL_DIR/love/*.png          …and okay/, reject/
    POOL_DIR/sources/*.js        the sketch behind each painting

The judge compares a candidate with references drawn from here; the style reward
summarises the love tier. The manifest is rewritten atomically (temp file + rename), so a
reader never sees half a manifest.
"""

from __future__ import annotations

import csv
import json
import os
import random
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable

TIERS = ("love", "okay", "reject")
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


class ReferencePool:
    def __init__(self, root: str | Path, entries: list[PoolEntry], description: str = ""):
        self.root = Path(root)
        self._entries = entries
        self.description = description

    # --- loading and saving ---------------------------------------------------------

    @classmethod
    def load(cls, root: str | Path) -> "ReferencePool":
        root = Path(root)
        manifest = root / MANIFEST
        if not manifest.is_file():
            raise FileNotFoundError(f"no {MANIFEST} in {root}: not a reference pool")
        entries, problems = [], []
        for number, line in enumerate(manifest.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entries.append(PoolEntry.from_mapping(json.loads(line)))
            except (ValueError, TypeError) as exc:
                problems.append(f"{manifest}:{number}: {exc}")
        if problems:
            raise ValueError("corrupt pool manifest:\n" + "\n".join(problems))
        description_file = root / "README.md"
        description = description_file.read_text(encoding="utf-8") if description_file.exists() else ""
        return cls(root, entries, description)

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        write_atomically(self.root / MANIFEST, "".join(json.dumps(asdict(e)) + "\n" for e in self._entries))

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


def write_atomically(path: Path, text: str) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


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
        if tier not in TIERS:
            raise ValueError(f"{image}: tier {row.get('tier')!r} is not one of {TIERS}")
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
