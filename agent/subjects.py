"""The subjects episodes paint, from ``configs/subjects.yaml``: a train split and a held-out eval split.

One file so the trainer, the warm start and ``watercolour eval`` cannot disagree on which
subjects were trained on. ``WATERCOLOUR_SUBJECTS`` points at another file of the same shape.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import yaml

from env.files import DATA_ROOT

SUBJECTS_FILE = DATA_ROOT / "configs" / "subjects.yaml"
SPLITS = ("train", "eval")


@lru_cache(maxsize=None)
def _load(path: str) -> dict[str, tuple[str, ...]]:
    data = yaml.safe_load(Path(path).read_text()) or {}
    splits = {}
    for split in SPLITS:
        subjects = tuple(" ".join(str(s).split()) for s in data.get(split) or ())
        if not subjects or any(not s for s in subjects):
            raise ValueError(f"{path}: the {split!r} split must list non-empty subjects")
        splits[split] = subjects
    overlap = set(splits["train"]) & set(splits["eval"])
    if overlap:
        raise ValueError(f"{path}: held-out subjects also in the train split: {sorted(overlap)}")
    return splits


def subjects(split: str = "train") -> tuple[str, ...]:
    """The subjects of ``split`` ("train" or "eval")."""
    if split not in SPLITS:
        raise ValueError(f"unknown subject split {split!r}; choose one of {SPLITS}")
    return _load(os.environ.get("WATERCOLOUR_SUBJECTS", str(SUBJECTS_FILE)))[split]


def resolve(spec: str) -> list[str]:
    """A split name ("train", "eval") or subjects separated by ';' (e.g. for a quick check)."""
    if spec in SPLITS:
        return list(subjects(spec))
    return [s.strip() for s in spec.split(";") if s.strip()]
