"""Flawed drafts: the gate failures a small policy makes, applied to valid compact sketches for revision examples."""

from __future__ import annotations

import random
import re

# The compact form (``Painter(compact=True)``) removed the tiny model's two commonest slips, a
# hex colour a digit short and a vertex list that never closed. What it can still get wrong:
# a reply cut off or garbled (a syntax error), a call outside the contract, and layers that
# paint nothing the gate counts: too faint, or shapes shrunk to a point. Each flaw below puts one of
# those into a valid sketch, so a revision example can show the failure, the environment's
# real reply to it, and the repaired sketch.
FLAWS: tuple[str, ...] = ("faint_layers", "cut_off", "forbidden_call", "point_shapes")

_FILL = re.compile(r"brush\.fill\((\d+), (\d+), (\d+), \d+\);")
_SHAPE = re.compile(r"(block|oval)\((-?[\d.]+), (-?[\d.]+), (-?[\d.]+), (-?[\d.]+)\);")
# Calls outside the contract, of the kinds models reach for: lettering, the brush's own
# settings (not in the allowlist), the network.
_FORBIDDEN_LINES = ("  text('{title}', 40, 60);", "  brush.set('HB', '#2b2b2b', 1);",
                    "  fetch('https://example.com/palette.json');")


def _point(match: re.Match) -> str:
    kind, x, y, _, _ = match.groups()
    # Every corner at one point, radii of zero: a shape that encloses nothing.
    return f"block({x}, {y}, {x}, {y});" if kind == "block" else f"oval({x}, {y}, 0, 0);"


def flawed_draft(sketch: str, flaw: str, rng: random.Random) -> str:
    """``sketch`` with one ``flaw`` (one of FLAWS) that makes it fail the gate or the render."""
    if flaw == "faint_layers":
        # Every wash at an opacity too low to leave the pigment the gate asks for.
        alpha = rng.randint(2, 6)
        return _FILL.sub(lambda m: f"brush.fill({m.group(1)}, {m.group(2)}, {m.group(3)}, {alpha});", sketch)
    if flaw == "cut_off":
        # As if the reply ran out of tokens: cut somewhere in the painting's second half.
        start = sketch.index("function draw()")
        cut = rng.randrange(start + (len(sketch) - start) // 2, len(sketch) - 2)
        return sketch[:cut]
    if flaw == "forbidden_call":
        lines = sketch.splitlines()
        at = max(i for i, line in enumerate(lines) if line.startswith("  // "))
        title = sketch[3:sketch.index(":")].split(" ")[-1]
        lines.insert(at, rng.choice(_FORBIDDEN_LINES).format(title=title))
        return "\n".join(lines) + "\n"
    if flaw == "point_shapes":
        return _SHAPE.sub(_point, sketch)
    raise ValueError(f"unknown flaw {flaw!r}; choose one of {FLAWS}")
