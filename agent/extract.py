"""The sketch inside a model reply, found exactly the way the gate finds it.

A thin wrapper over ``env.gate.extract_sketch``: the policy side (logging, SFT data, replay)
must see the same code the gate judged, so the extraction rules live in one place only.
"""

from __future__ import annotations

from env.contract import SketchContract
from env.gate import extract_sketch


def extract_code(reply: str | bytes, contract: SketchContract | None = None) -> str | None:
    """The JavaScript sketch in ``reply`` (thinking stripped, fences removed), or None when there is none."""
    return extract_sketch(reply, contract or SketchContract()).code
