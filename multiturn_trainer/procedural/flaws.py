"""Flawed drafts: the gate failures a small policy really makes, applied to valid sketches for revision examples."""

from __future__ import annotations

import random
import re

from multiturn_trainer.procedural.painter import layer_starts

# What the tiny model gets wrong, counted over 256 turns of a demo: 95 render errors from a
# malformed hex colour ('#9d7e6', one digit short), 47 syntax errors (a sketch cut off or
# garbled), 50 blank canvases (shapes of one or two points, or layers too faint to count),
# and a few one-vertex shapes that p5 rejects outright. Each flaw below reproduces one of
# those on a valid sketch, so a revision example can show the failure, the environment's real
# reply to it, and the repaired sketch.
FLAWS: tuple[str, ...] = ("short_colour", "cut_off", "forbidden_call", "one_point_shape")

_HEX_COLOUR = re.compile(r"'#[0-9a-f]{6}'")
_SHAPE_CALL = re.compile(r"shape\(\[\[(-?[\d.]+), (-?[\d.]+)\][^;]*?\], (-?[\d.]+)\);", re.S)
# Calls outside the contract, of the kinds models reach for: lettering, the brush's own
# settings (not in the allowlist), the network.
_FORBIDDEN_LINES = ("  text('{title}', 40, 60);", "  brush.set('HB', '#2b2b2b', 1);",
                    "  fetch('https://example.com/palette.json');")


def flawed_draft(sketch: str, flaw: str, rng: random.Random) -> str:
    """``sketch`` with one ``flaw`` (one of FLAWS) that makes it fail the gate or the render."""
    if flaw == "short_colour":
        colours = list(_HEX_COLOUR.finditer(sketch))
        chosen = colours[rng.randrange(len(colours))]
        drop = chosen.start() + 2 + rng.randrange(6)
        return sketch[:drop] + sketch[drop + 1:]
    if flaw == "cut_off":
        # As if the reply ran out of tokens: cut somewhere in the painting's second half.
        start = sketch.index("function draw()")
        cut = rng.randrange(start + (len(sketch) - start) // 2, len(sketch) - 2)
        return sketch[:cut]
    if flaw == "forbidden_call":
        lines = sketch.splitlines()
        at = max(layer_starts(lines))
        title = sketch[3:sketch.index(":")].split(" ")[-1]
        lines.insert(at, rng.choice(_FORBIDDEN_LINES).format(title=title))
        return "\n".join(lines) + "\n"
    if flaw == "one_point_shape":
        # Every shape collapsed to its first point: the layers paint nothing p5 accepts.
        return _SHAPE_CALL.sub(lambda m: f"shape([[{m.group(1)}, {m.group(2)}]], {m.group(3)});", sketch)
    raise ValueError(f"unknown flaw {flaw!r}; choose one of {FLAWS}")
