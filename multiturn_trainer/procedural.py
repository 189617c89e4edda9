"""Procedurally generated, always-valid watercolour sketches for a supervised warm start.

A tiny model starting GRPO from scratch almost never writes a sketch that passes the gate,
so every reward is zero and nothing is learned. A few hundred examples of the contract in
use fix that: ``generate_sketch`` composes a painting from a background wash, the big masses
(sky, ground, table, water) and subject-specific motifs built by a small library of
parametric shapes (blobs, petals, leaves, ridges, bands), with palette, layout and mirror
image varied by the seed. The output follows the contract's skeleton, uses only the default
allowlist plus a declared helper, paints with 10-30 ``brush.fill`` calls, and is written as
straight-line code so the static count of fills is the number executed.

Determinism: every choice comes from ``random.Random`` seeded with the subject and the seed
(string seeding hashes with SHA-512, so it does not depend on PYTHONHASHSEED).
"""

from __future__ import annotations

import colorsys
import math
import random
import re
from typing import Any, Callable, Iterable, Sequence

from agent.messages import first_turn_messages
from agent.subjects import subjects as subject_split

CANVAS = 600
PAPER = "#f8f1e4"
MAX_LINE_CHARS = 100

Point = tuple[float, float]


# --------------------------------------------------------------------------------------
# Shape library: pure functions returning point lists in canvas coordinates
# --------------------------------------------------------------------------------------


def _rotate(points: Iterable[Point], cx: float, cy: float, angle_deg: float) -> list[Point]:
    angle = math.radians(angle_deg)
    c, s = math.cos(angle), math.sin(angle)
    return [(cx + x * c - y * s, cy + x * s + y * c) for x, y in points]


def blob(rng: random.Random, cx: float, cy: float, rx: float, ry: float,
         count: int = 10, wobble: float = 0.12, rotation: float = 0.0) -> list[Point]:
    """A roughly elliptical patch with a hand-made wobble along its rim."""
    local = []
    for index in range(count):
        angle = 2 * math.pi * index / count
        scale = 1 + rng.uniform(-wobble, wobble)
        local.append((math.cos(angle) * rx * scale, math.sin(angle) * ry * scale))
    return _rotate(local, cx, cy, rotation)


def ellipse(cx: float, cy: float, rx: float, ry: float, count: int = 10, rotation: float = 0.0) -> list[Point]:
    local = [(math.cos(2 * math.pi * i / count) * rx, math.sin(2 * math.pi * i / count) * ry) for i in range(count)]
    return _rotate(local, cx, cy, rotation)


def petal(cx: float, cy: float, length: float, width: float, angle: float) -> list[Point]:
    """A petal growing from (cx, cy) along ``angle`` degrees, widest two thirds out."""
    half = width / 2
    local = [(0, 0), (0.3 * length, -0.7 * half), (0.7 * length, -half), (length, -0.35 * half),
             (length, 0.35 * half), (0.7 * length, half), (0.3 * length, 0.7 * half)]
    return _rotate(local, cx, cy, angle)


def leaf(x: float, y: float, length: float, width: float, angle: float) -> list[Point]:
    """A leaf pointed at both ends, attached at (x, y)."""
    half = width / 2
    local = [(0, 0), (0.3 * length, -half), (0.7 * length, -0.8 * half), (length, 0),
             (0.7 * length, 0.8 * half), (0.3 * length, half)]
    return _rotate(local, x, y, angle)


def ridge(rng: random.Random, base_y: float, amplitude: float, bottom: float,
          peaks: int = 2, step: float = 60, jagged: float = 0.0) -> list[Point]:
    """A skyline of ``peaks`` bumps rising ``amplitude`` above ``base_y``, closed down to ``bottom``."""
    centres = [rng.uniform(40, CANVAS - 40) for _ in range(peaks)]
    spreads = [rng.uniform(70, 170) for _ in range(peaks)]
    heights = [rng.uniform(0.5, 1.0) for _ in range(peaks)]
    points = []
    x = 0.0
    while x <= CANVAS + 0.5:
        rise = max(h * math.exp(-((x - c) / s) ** 2) for c, s, h in zip(centres, spreads, heights))
        points.append((x, base_y - amplitude * rise + rng.uniform(-jagged, jagged)))
        x += step
    return points + [(CANVAS, bottom), (0, bottom)]


def band(rng: random.Random, top: float, bottom: float, wobble: float = 8, step: float = 100) -> list[Point]:
    """A full-width band whose upper edge wanders by ``wobble`` pixels."""
    edge = [(x, top + rng.uniform(-wobble, wobble)) for x in range(0, CANVAS + 1, int(step))]
    return edge + [(CANVAS, bottom), (0, bottom)]


def rectangle(x0: float, y0: float, x1: float, y1: float) -> list[Point]:
    return [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]


def lozenge(cx: float, cy: float, half_width: float, height: float) -> list[Point]:
    """A flat diamond, for glints and foam on water."""
    return [(cx - half_width, cy), (cx, cy - height / 2), (cx + half_width, cy), (cx, cy + height / 2)]


def tapered(x0: float, y0: float, x1: float, y1: float, width0: float, width1: float) -> list[Point]:
    """A quadrilateral from (x0, y0) to (x1, y1) narrowing from ``width0`` to ``width1``: stems, trunks, masts."""
    length = math.hypot(x1 - x0, y1 - y0) or 1.0
    nx, ny = -(y1 - y0) / length, (x1 - x0) / length
    return [(x0 + nx * width0 / 2, y0 + ny * width0 / 2), (x1 + nx * width1 / 2, y1 + ny * width1 / 2),
            (x1 - nx * width1 / 2, y1 - ny * width1 / 2), (x0 - nx * width0 / 2, y0 - ny * width0 / 2)]


def lobed(cx: float, cy: float, radius: float, lobes: int = 5, depth: float = 0.35, rotation: float = 0.0) -> list[Point]:
    """A flower outline with ``lobes`` rounded petals in one shape."""
    points = []
    for index in range(lobes * 2):
        r = radius if index % 2 == 0 else radius * (1 - depth)
        angle = math.radians(rotation + 180 * index / lobes)
        points.append((cx + math.cos(angle) * r, cy + math.sin(angle) * r))
    return points


def rectangle_around_circle(x0: float, y0: float, x1: float, y1: float,
                            cx: float, cy: float, r: float, count: int = 16) -> list[Point]:
    """A rectangle with a round hole, reached by a slit from the top edge.

    Watercolour washes only darken the paper, so a light moon on a dark sky has to be
    reserved: the sky is painted around it. The hole is walked against the rectangle's
    direction so that the non-zero fill rule leaves it empty.
    """
    hole = [(cx + math.cos(math.radians(-90 - 360 * i / count)) * r, cy + math.sin(math.radians(-90 - 360 * i / count)) * r)
            for i in range(count + 1)]
    return [(x0, y0), (cx, y0), *hole, (cx, y0), (x1, y0), (x1, y1), (x0, y1)]


def scaled(template: Sequence[Point], cx: float, cy: float, scale: float, rotation: float = 0.0) -> list[Point]:
    return _rotate([(x * scale, y * scale) for x, y in template], cx, cy, rotation)


# Unit outlines for things with a characteristic silhouette (y grows downwards).
PEAR = [(0, -1.9), (0.35, -1.75), (0.5, -1.2), (0.55, -0.7), (0.95, -0.2), (1.0, 0.3), (0.75, 0.85),
        (0, 1.0), (-0.75, 0.85), (-1.0, 0.3), (-0.95, -0.2), (-0.55, -0.7), (-0.5, -1.2), (-0.35, -1.75)]
LEMON = [(-1.25, 0), (-0.9, -0.45), (-0.4, -0.68), (0.2, -0.7), (0.75, -0.5), (1.05, -0.2), (1.3, 0),
         (1.05, 0.22), (0.75, 0.52), (0.2, 0.72), (-0.4, 0.7), (-0.9, 0.47)]
VASE = [(-0.35, -1.0), (0.35, -1.0), (0.3, -0.75), (0.6, -0.3), (0.7, 0.3), (0.5, 0.9), (0.35, 1.0),
        (-0.35, 1.0), (-0.5, 0.9), (-0.7, 0.3), (-0.6, -0.3), (-0.3, -0.75)]
TULIP = [(0, 0.55), (-0.5, 0.3), (-0.6, -0.3), (-0.45, -0.75), (-0.25, -0.4), (0, -0.9), (0.25, -0.4),
         (0.45, -0.75), (0.6, -0.3), (0.5, 0.3)]
FISH = [(1.0, 0), (0.7, -0.28), (0.2, -0.34), (-0.4, -0.22), (-0.9, -0.05), (-1.35, -0.35), (-1.2, 0),
        (-1.35, 0.35), (-0.9, 0.05), (-0.4, 0.22), (0.2, 0.34), (0.7, 0.28)]
HULL = [(-1.0, 0), (1.0, 0), (0.8, 0.22), (-0.75, 0.22)]
TEAPOT_BODY = [(-1.0, 0.1), (-0.9, -0.45), (-0.55, -0.8), (0, -0.9), (0.55, -0.8), (0.9, -0.45),
               (1.0, 0.1), (0.8, 0.6), (0.45, 0.8), (-0.45, 0.8), (-0.8, 0.6)]


# --------------------------------------------------------------------------------------
# The painter: records washes and shapes, emits the sketch
# --------------------------------------------------------------------------------------


def _number(value: float) -> str:
    rounded = round(value)
    return str(int(rounded)) if abs(value - rounded) < 1e-9 else f"{value:.2f}".rstrip("0").rstrip(".")


def _clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))


class Painter:
    """Collects one painting's draw() body; every random choice goes through ``rng``."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        # Painting-wide decisions: a mirror image doubles the layouts for free, and a shared
        # hue drift gives each seed its own light (warmer or cooler) without breaking harmony.
        self.mirrored = rng.random() < 0.5
        self.hue_drift = rng.uniform(-0.03, 0.03)
        self.body: list[str] = []
        self.fill_count = 0

    # random helpers, named for readability in the compositions
    def u(self, low: float, high: float) -> float:
        return self.rng.uniform(low, high)

    def count(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def pick(self, options: Sequence[Any]) -> Any:
        return options[self.rng.randrange(len(options))]

    def colour(self, hex_colour: str, spread: float = 1.0) -> str:
        """``hex_colour`` nudged in hue, lightness and saturation, plus the painting's hue drift."""
        red, green, blue = (int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
        hue, lightness, saturation = colorsys.rgb_to_hls(red, green, blue)
        hue = (hue + self.hue_drift + self.u(-0.015, 0.015) * spread) % 1.0
        lightness = _clamp(lightness + self.u(-0.05, 0.05) * spread, 0.03, 0.98)
        saturation = _clamp(saturation * (1 + self.u(-0.12, 0.12) * spread), 0.0, 1.0)
        red, green, blue = colorsys.hls_to_rgb(hue, lightness, saturation)
        return "#" + "".join(f"{round(channel * 255):02x}" for channel in (red, green, blue))

    def section(self, title: str) -> None:
        if self.body:
            self.body.append("")
        self.body.append(f"  // {title}")

    def fill(self, colour: str, alpha: float, bleed: float, texture: float = 0.4,
             border: float = 0.3, direction: str = "out", spread: float = 1.0) -> None:
        """Start a wash; bleed and texture are always set so no layer inherits by accident."""
        self.fill_count += 1
        alpha = round(_clamp(alpha + self.u(-12, 12), 25, 235))
        bleed = _clamp(bleed + self.u(-0.04, 0.04), 0.01, 0.6)
        texture = _clamp(texture + self.u(-0.1, 0.1), 0.0, 1.0)
        border = _clamp(border + self.u(-0.1, 0.1), 0.0, 1.0)
        self.body += [
            f"  brush.fill('{self.colour(colour, spread)}', {alpha});",
            f"  brush.fillBleed({_number(round(bleed, 2))}, '{direction}');",
            f"  brush.fillTexture({_number(round(texture, 2))}, {_number(round(border, 2))});",
        ]

    def _x(self, x: float) -> float:
        return CANVAS - x if self.mirrored else x

    def shape(self, points: Sequence[Point], curvature: float) -> None:
        coordinates = [
            f"[{_number(round(_clamp(self._x(x), 0, CANVAS)))}, {_number(round(_clamp(y, 0, CANVAS)))}]"
            for x, y in points
        ]
        self._wrapped("  shape([", coordinates, f"], {_number(round(curvature, 2))});")

    def circle(self, x: float, y: float, radius: float) -> None:
        radius = max(1.0, radius)
        # Keep the whole circle on the canvas when it fits; tiny overhangs would bleed off anyway.
        x = _clamp(x, min(radius, CANVAS / 2), max(CANVAS - radius, CANVAS / 2))
        y = _clamp(y, min(radius, CANVAS / 2), max(CANVAS - radius, CANVAS / 2))
        self.body.append(f"  brush.circle({_number(round(self._x(x)))}, {_number(round(y))}, {_number(round(radius, 1))});")

    def _wrapped(self, head: str, items: list[str], tail: str) -> None:
        line = head
        for index, item in enumerate(items):
            piece = item + (", " if index < len(items) - 1 else "")
            if len(line) + len(piece.rstrip()) > MAX_LINE_CHARS and line.strip() not in ("shape([",):
                self.body.append(line.rstrip())
                line = "    "
            line += piece
        if len(line) + len(tail) > MAX_LINE_CHARS:
            self.body.append(line.rstrip())
            line = "  "
        self.body.append(line + tail)

    def sketch(self, subject: str, max_sections: int | None = None) -> str:
        title = subject[:1].upper() + subject[1:]
        body = self.body
        if max_sections is not None:
            starts = [i for i, line in enumerate(body) if line.startswith("  // ")]
            # A compact sketch skips the paper wash: it is nearly paper-coloured (under the
            # gate's pigment threshold), so it would spend the few layers on nothing visible.
            if body and body[0] == "  // background wash" and len(starts) > 1:
                body = body[starts[1]:]
                starts = [i - starts[1] for i in starts[1:]]
            if len(starts) > max_sections:
                body = body[:starts[max_sections]]
            while body and not body[-1].strip():
                body = body[:-1]
        lines = [
            f"// {title}: layered watercolour washes, large shapes first and small accents last.",
            "async function setup() {",
            "  createCanvas(600, 600, WEBGL);",
            "  brush.scaleBrushes(3);",
            "  angleMode(DEGREES);",
            "  noLoop();",
            "}",
            "",
            "// Paints one closed shape with the current fill.",
            "function shape(points, curvature) {",
            "  brush.beginShape(curvature);",
            "  for (const [x, y] of points) brush.vertex(x, y);",
            "  brush.endShape(true);",
            "}",
            "",
            "function draw() {",
            "  translate(-width / 2, -height / 2);",
            f"  background('{PAPER}');",
            "  brush.noStroke();",
            "",
            *body,
            "}",
        ]
        return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------
# Shared layers
# --------------------------------------------------------------------------------------


def paper_wash(p: Painter, colour: str) -> None:
    p.section("background wash")
    p.fill(colour, 45, bleed=0.45, texture=0.3, border=0.1)
    inset = p.u(12, 30)
    corners = rectangle(inset, inset, CANVAS - inset, CANVAS - inset)
    p.shape([(x + p.u(-8, 8), y + p.u(-8, 8)) for x, y in corners], p.u(0.1, 0.25))


def interior(p: Painter, table_range: tuple[float, float], paper: str, wall: str, wall_alpha: float) -> float:
    """Paper, then a wall wash down to just below the table line; returns the table line."""
    table = p.u(*table_range)
    paper_wash(p, paper)
    p.section("wall")
    p.fill(wall, wall_alpha, bleed=0.35, texture=0.35)
    p.shape(rectangle(0, 0, CANVAS, table + 10), 0.15)
    return table


def sky(p: Painter, colour: str, bottom: float, alpha: float = 100) -> None:
    p.section("sky")
    p.fill(colour, alpha, bleed=0.42, texture=0.35, border=0.15)
    p.shape([(0, 0), (CANVAS, 0)] + band(p.rng, bottom, bottom, wobble=10)[:-2][::-1], p.u(0.15, 0.3))


def clouds(p: Painter, colour: str, top: float, bottom: float, count: tuple[int, int] = (2, 3)) -> None:
    p.section("clouds")
    p.fill(colour, 115, bleed=0.5, texture=0.3, border=0.1)
    for _ in range(p.count(*count)):
        p.shape(blob(p.rng, p.u(80, 520), p.u(top, bottom), p.u(50, 95), p.u(14, 26), count=9, wobble=0.2),
                p.u(0.5, 0.7))


# --------------------------------------------------------------------------------------
# Compositions, one per subject
# --------------------------------------------------------------------------------------


def _poppies(p: Painter) -> None:
    horizon = p.u(250, 330)
    paper_wash(p, "#e9eef0")
    sky(p, "#bcd4e6", horizon + 20, alpha=90)
    p.section("far meadow")
    p.fill("#a9c27a", 110, bleed=0.3, texture=0.45)
    p.shape(ridge(p.rng, horizon, p.u(15, 35), CANVAS, peaks=2), p.u(0.3, 0.5))
    p.section("near meadow")
    p.fill("#7fa05a", 120, bleed=0.25, texture=0.5)
    p.shape(ridge(p.rng, horizon + p.u(90, 140), p.u(20, 40), CANVAS, peaks=2), p.u(0.3, 0.5))
    p.section("distant poppies")
    p.fill("#d9503a", 150, bleed=0.12, texture=0.3)
    for _ in range(p.count(6, 10)):
        p.circle(p.u(30, 570), horizon + p.u(15, 80), p.u(4, 8))
    flowers = []
    slots = p.count(3, 4)
    for index in range(slots):
        x = (index + 0.5) * CANVAS / slots + p.u(-30, 30)
        flowers.append((x, p.u(horizon - 40, horizon + 150), p.u(45, 72)))
    p.section("stems")
    p.fill("#5f7d3a", 170, bleed=0.08, texture=0.3)
    for x, y, r in flowers:
        p.shape(tapered(x, y, x + p.u(-25, 25), CANVAS, 7, 10), p.u(0.2, 0.4))
    p.section("leaves")
    p.fill("#6f8f45", 140, bleed=0.15, texture=0.45)
    for x, y, r in flowers:
        stem_y = p.u(y + 90, min(y + 200, 560))
        p.shape(leaf(x, stem_y, p.u(50, 80), p.u(14, 22), p.pick([-150, -30]) + p.u(-15, 15)), 0.4)
    for number, (x, y, r) in enumerate(flowers, start=1):
        p.section(f"poppy {number}: petals, then a darker inner layer")
        p.fill(p.pick(["#d6362b", "#e04a2f", "#c92a2a"]), 150, bleed=0.25, texture=0.5, border=0.35)
        turn = p.u(0, 72)
        for k in range(5):
            p.shape(petal(x, y, r * p.u(0.9, 1.1), r * p.u(0.9, 1.15), turn + k * 72 + p.u(-8, 8)), p.u(0.5, 0.7))
        p.fill("#a81f1f", 110, bleed=0.1, texture=0.4)
        for k in range(3):
            p.shape(petal(x, y, r * 0.6, r * 0.6, turn + 36 + k * 120), 0.6)
    p.section("dark centres")
    p.fill("#2b2230", 210, bleed=0.05, texture=0.2, border=0.6)
    for x, y, r in flowers:
        p.circle(x, y, r * p.u(0.14, 0.2))


def _lemons(p: Painter) -> None:
    table = interior(p, (300, 380), "#f1ead8", "#e8d7b0", 90)
    # a pale cloth: yellow glazed over a strong blue would turn green
    p.section("blue cloth")
    p.fill("#8fb0d8", 100, bleed=0.3, texture=0.5)
    p.shape(band(p.rng, table, CANVAS, wobble=12, step=120), 0.35)
    p.section("shadow where the cloth falls over the table edge")
    p.fill("#4f6fa2", 70, bleed=0.3, texture=0.5)
    p.shape(band(p.rng, CANVAS - p.u(60, 90), CANVAS, wobble=10, step=150), 0.4)
    lemons = []
    count = p.count(3, 4)
    for index in range(count):
        x = 90 + (index + 0.5) * 420 / count + p.u(-20, 20)
        lemons.append((x, table + p.u(70, 130), p.u(38, 48) * (3.5 / count) ** 0.5, p.u(-25, 25)))
    p.section("shadows")
    p.fill("#2e4770", 70, bleed=0.35, texture=0.3)
    for x, y, r, tilt in lemons:
        p.shape(ellipse(x + r * 0.3, y + r * 0.6, r * 1.2, r * 0.35), 0.6)
    for number, (x, y, r, tilt) in enumerate(lemons, start=1):
        p.section(f"lemon {number} and its shaded side")
        p.fill(p.pick(["#f5c518", "#f7d02c", "#f0b81c"]), 210, bleed=0.1, texture=0.4, border=0.35)
        p.shape(scaled(LEMON, x, y, r, tilt), 0.55)
        p.fill("#d99a1e", 110, bleed=0.18, texture=0.4)
        p.shape(blob(p.rng, x + r * 0.25, y + r * 0.3, r * 0.75, r * 0.35, count=8, rotation=tilt), 0.6)
    p.section("a leaf")
    p.fill("#4f7a3a", 160, bleed=0.1, texture=0.4)
    x, y, r, tilt = p.pick(lemons)
    p.shape(leaf(x + r * 0.9, y - r * 0.4, p.u(60, 90), p.u(20, 30), p.u(-60, -20)), 0.4)


def _harbour(p: Painter) -> None:
    horizon = p.u(300, 360)
    paper_wash(p, "#f3dcc4")
    colours = ["#f3c9a0", "#eeb08c", "#dc8f7a", "#b87b86"]
    bands = p.count(3, 4)
    height = horizon / bands
    for index in range(bands):
        p.section(f"sky band {index + 1}")
        p.fill(colours[index], 110 - index * 8, bleed=0.35, texture=0.45, border=0.25)
        p.shape(band(p.rng, index * height, min(horizon + 10, (index + 1) * height + 40), wobble=6, step=75), 0.3)
    sun_x = p.u(150, 450)
    p.section("low sun")
    p.fill("#fbe3a6", 170, bleed=0.5, texture=0.3, border=0.1)
    p.circle(sun_x, horizon - p.u(50, 90), p.u(35, 55))
    p.section("far hills")
    p.fill("#6e6a8c", 120, bleed=0.2, texture=0.4)
    p.shape(ridge(p.rng, horizon - 5, p.u(25, 45), horizon + 12, peaks=2, step=50), 0.45)
    p.section("near hills")
    p.fill("#4f4f6f", 140, bleed=0.15, texture=0.4)
    p.shape(ridge(p.rng, horizon + 8, p.u(10, 22), horizon + 22, peaks=2, step=60), 0.4)
    p.section("water")
    p.fill("#6d8ea6", 120, bleed=0.3, texture=0.45)
    p.shape(band(p.rng, horizon + 15, CANVAS, wobble=2), 0.3)
    p.fill("#3e5a74", 110, bleed=0.3, texture=0.45)
    p.shape(band(p.rng, horizon + (CANVAS - horizon) * p.u(0.35, 0.5), CANVAS, wobble=4), 0.3)
    p.section("sun glints")
    p.fill("#f6dcb4", 120, bleed=0.1, texture=0.2)
    for k in range(p.count(5, 7)):
        p.shape(lozenge(sun_x + p.u(-10, 10), horizon + 30 + k * 25, 40 - k * 4, 6), 0)
    boats = []
    for index in range(p.count(2, 3)):
        boats.append((p.u(80, 520), horizon + 45 + index * p.u(40, 70), p.u(55, 90)))
    for number, (x, y, length) in enumerate(boats, start=1):
        p.section(f"boat {number}")
        p.fill(p.pick(["#2f2a35", "#5b2f2a", "#2a3a3f"]), 180, bleed=0.08, texture=0.3, direction="in")
        p.shape(scaled(HULL, x, y, length / 2), 0.1)
    p.section("reflections")
    p.fill("#2f2a35", 60, bleed=0.35, texture=0.3)
    for x, y, length in boats:
        p.shape([(x - length * 0.4, y + length * 0.14), (x + length * 0.4, y + length * 0.14),
                 (x + length * 0.3, y + length * 0.45), (x - length * 0.3, y + length * 0.45)], 0.6)
    p.section("masts")
    p.fill("#2b2630", 200, bleed=0.02, texture=0.2, direction="in")
    for x, y, length in boats:
        p.shape(tapered(x, y, x, y - length * 0.9, 3, 2), 0)
    p.section("sails")
    p.fill("#efe6d6", 150, bleed=0.1, texture=0.3)
    for x, y, length in boats:
        p.shape([(x + 3, y - length * 0.85), (x + 3, y - 6), (x + length * 0.45, y - 6)], 0.2)


def _mountain_lake(p: Painter) -> None:
    horizon = p.u(300, 360)
    paper_wash(p, "#eef2f3")
    sky(p, "#a9c6de", horizon)
    clouds(p, "#f4f1ea", 50, horizon - 180)
    p.section("far mountains")
    p.fill("#8c9bb5", 130, bleed=0.2, texture=0.45)
    far = ridge(p.rng, horizon, p.u(150, 210), horizon + 5, peaks=3, step=40, jagged=8)
    p.shape(far, 0.1)
    p.section("snow on the peaks")
    p.fill("#fbfbf8", 170, bleed=0.1, texture=0.3)
    summits = sorted(far[:-2], key=lambda point: point[1])[:2]
    for x, y in summits:
        p.shape([(x, y + 2), (x + p.u(20, 35), y + p.u(35, 50)), (x, y + p.u(25, 35)), (x - p.u(20, 35), y + p.u(35, 50))], 0.15)
    p.section("near mountains")
    p.fill("#5d6f86", 140, bleed=0.2, texture=0.5)
    near = ridge(p.rng, horizon, p.u(60, 110), horizon + 5, peaks=2, step=50, jagged=6)
    p.shape(near, 0.2)
    p.section("tree line")
    p.fill("#3d5a45", 160, bleed=0.15, texture=0.5)
    p.shape([(x, horizon - p.u(6, 22)) for x in range(0, CANVAS + 1, 30)] + [(CANVAS, horizon + 8), (0, horizon + 8)], 0.05)
    p.section("lake")
    p.fill("#7fa3bf", 120, bleed=0.35, texture=0.4)
    shore = CANVAS * p.u(0.8, 0.88)
    p.shape(rectangle(0, horizon + 6, CANVAS, shore), 0.2)
    p.section("reflection of the mountains")
    p.fill("#5d6f86", 70, bleed=0.4, texture=0.3)
    p.shape([(x, min(shore, 2 * horizon - y)) for x, y in near[:-2]] + [(CANVAS, horizon + 6), (0, horizon + 6)], 0.3)
    p.section("mist over the water")
    p.fill("#ffffff", 60, bleed=0.5, texture=0.2, border=0.05)
    p.shape(band(p.rng, horizon - 4, horizon + 20, wobble=4), 0.5)
    p.section("near shore")
    p.fill("#8a7a55", 130, bleed=0.2, texture=0.55)
    p.shape(band(p.rng, shore - 6, CANVAS, wobble=10), 0.4)
    p.section("grasses")
    p.fill("#55703d", 160, bleed=0.1, texture=0.4)
    for _ in range(p.count(3, 5)):
        x = p.u(20, 580)
        for k in range(3):
            p.shape([(x + k * 8 - 4, CANVAS), (x + k * 8 + p.u(-20, 20), shore - p.u(20, 60)), (x + k * 8 + 4, CANVAS)], 0.1)


def _tulips(p: Painter) -> None:
    table = interior(p, (400, 450), "#f4ece0", "#d9cdb8", 80)
    p.section("table")
    p.fill("#a57c55", 120, bleed=0.25, texture=0.5)
    p.shape(rectangle(0, table, CANVAS, CANVAS), 0.1)
    vase_x = p.u(260, 340)
    vase_size = p.u(80, 95)
    vase_y = table - vase_size
    p.section("shadow of the vase")
    p.fill("#6b5038", 70, bleed=0.35, texture=0.3)
    p.shape(ellipse(vase_x + vase_size * 0.6, table, vase_size * 1.1, 14), 0.6)
    p.section("glass vase")
    p.fill("#8fb8c9", 120, bleed=0.15, texture=0.35, direction="in")
    p.shape(scaled(VASE, vase_x, vase_y, vase_size), 0.45)
    p.fill("#5f8ea3", 90, bleed=0.15, texture=0.35)
    shaded_side = scaled(VASE[3:7], vase_x, vase_y, vase_size)
    p.shape(shaded_side + [(vase_x + 5, vase_y + vase_size), (vase_x + 10, vase_y - vase_size * 0.3)], 0.45)
    mouth = vase_y - vase_size
    heads = []
    count = p.count(3, 5)
    for index in range(count):
        spread = (index - (count - 1) / 2) * p.u(70, 90)
        heads.append((vase_x + spread + p.u(-10, 10), mouth - p.u(110, 190) + abs(spread) * 0.4, p.u(38, 48)))
    p.section("stems")
    p.fill("#5f8a3c", 170, bleed=0.08, texture=0.3)
    for x, y, r in heads:
        p.shape(tapered(vase_x + (x - vase_x) * 0.15, mouth + 20, x, y + r * 0.4, 7, 5), 0.3)
    p.section("leaves")
    p.fill("#6f9a45", 150, bleed=0.12, texture=0.45)
    for side in (-1, 1):
        p.shape(leaf(vase_x + side * 8, mouth + 10, p.u(90, 130), p.u(22, 30), -90 + side * p.u(25, 45)), 0.4)
    for number, (x, y, r) in enumerate(heads, start=1):
        colour = p.pick(["#e0475b", "#f08a3c", "#f2c14e", "#d64f8c", "#c0392b"])
        p.section(f"tulip {number}")
        p.fill(colour, 170, bleed=0.15, texture=0.45, border=0.35)
        p.shape(scaled(TULIP, x, y, r, p.u(-12, 12)), 0.5)
        p.fill("#8e1f3a", 90, bleed=0.1, texture=0.4)
        p.shape(petal(x, y + r * 0.45, r * 1.1, r * 0.55, -90 + p.u(-8, 8)), 0.5)


def _koi_pond(p: Painter) -> None:
    paper_wash(p, "#e8efe9")
    p.section("deep water")
    p.fill("#3f7482", 95, bleed=0.4, texture=0.6, border=0.3)
    p.shape(blob(p.rng, 300, 300, 285, 285, count=12, wobble=0.04, rotation=45), 0.25)
    p.section("lighter eddies")
    p.fill("#4f8291", 70, bleed=0.5, texture=0.4)
    for _ in range(p.count(4, 6)):
        p.circle(p.u(90, 510), p.u(90, 510), p.u(45, 85))
    koi = []
    for _ in range(p.count(3, 4)):
        koi.append((p.u(120, 480), p.u(120, 480), p.u(0, 360), p.u(45, 65)))
    p.section("shadows of the koi")
    p.fill("#1f3d48", 45, bleed=0.35, texture=0.3)
    for x, y, heading, size in koi:
        p.shape(scaled(FISH, x + 9, y + 11, size, heading), 0.5)
    for number, (x, y, heading, size) in enumerate(koi, start=1):
        p.section(f"koi {number} and its markings")
        # warm, strong bodies: a pale koi would vanish, since a wash only darkens the water below
        p.fill(p.pick(["#e4572e", "#f08a24", "#d9402b", "#f3a712"]), 200, bleed=0.1, texture=0.3, border=0.4)
        p.shape(scaled(FISH, x, y, size, heading), 0.45)
        p.fill(p.pick(["#2b2230", "#8a1f1a", "#f7efe0"]), 200, bleed=0.05, texture=0.3, direction="in")
        for along in (0.5, 0.0, -0.45)[: p.count(2, 3)]:
            spot_x = x + math.cos(math.radians(heading)) * along * size
            spot_y = y + math.sin(math.radians(heading)) * along * size
            p.circle(spot_x + p.u(-3, 3), spot_y + p.u(-3, 3), size * p.u(0.09, 0.14))
    pads = [(p.u(70, 530), p.u(70, 530), p.u(28, 52)) for _ in range(p.count(3, 4))]
    p.section("lily pads")
    p.fill("#3f6b35", 170, bleed=0.2, texture=0.5)
    for x, y, r in pads:
        notch = p.u(0, 360)
        rim = [(x + math.cos(math.radians(a)) * r, y + math.sin(math.radians(a)) * r)
               for a in range(int(notch) + 25, int(notch) + 340, 45)]
        p.shape([(x, y)] + rim, 0.3)
    lotus_x, lotus_y, lotus_r = max(pads, key=lambda pad: pad[2])
    p.section("lotus bloom")
    p.fill("#ef9fb5", 180, bleed=0.1, texture=0.35)
    p.shape(lobed(lotus_x, lotus_y, lotus_r * 0.65, 8, 0.5, p.u(0, 45)), 0.4)
    p.fill("#f3d36b", 200, bleed=0.05, texture=0.3, direction="in")
    p.circle(lotus_x, lotus_y, lotus_r * 0.12)


def _sunflowers(p: Painter) -> None:
    horizon = p.u(330, 400)
    paper_wash(p, "#eef3f4")
    sky(p, "#8fb9dc", horizon + 20, alpha=110)
    clouds(p, "#ffffff", 50, horizon - 200)
    p.section("field")
    p.fill("#7d9b45", 130, bleed=0.25, texture=0.5)
    p.shape(ridge(p.rng, horizon, p.u(15, 30), CANVAS, peaks=2), 0.35)
    p.section("distant sunflowers")
    p.fill("#e8b923", 140, bleed=0.15, texture=0.3)
    for _ in range(p.count(8, 12)):
        p.circle(p.u(20, 580), horizon + p.u(10, 50), p.u(4, 9))
    count = p.count(3, 4)
    flowers = []
    for index in range(count):
        x = (index + 0.5) * CANVAS / count + p.u(-30, 30)
        flowers.append((x, p.u(150, 320), p.u(55, 72)))
    p.section("stems")
    p.fill("#4f7a2e", 170, bleed=0.08, texture=0.3)
    for x, y, r in flowers:
        p.shape(tapered(x, y, x + p.u(-20, 20), CANVAS, 8, 11), 0.3)
    p.section("leaves")
    p.fill("#5e8c35", 150, bleed=0.15, texture=0.5)
    for x, y, r in flowers:
        for side in (-1, 1):
            p.shape(leaf(x, y + p.u(110, 200), p.u(65, 95), p.u(35, 50), 90 - side * p.u(55, 80)), 0.5)
    for number, (x, y, r) in enumerate(flowers, start=1):
        turn = p.u(0, 30)
        p.section(f"sunflower {number}: outer petals, inner petals, seed head")
        # a ring of petals as one lobed shape: one wash, so petals overlap without seams
        p.fill("#f2b705", 170, bleed=0.15, texture=0.45, border=0.35)
        p.shape(lobed(x, y, r * p.u(0.95, 1.1), p.count(11, 14), 0.45, turn), 0.3)
        p.fill("#e39b0b", 140, bleed=0.1, texture=0.4)
        p.shape(lobed(x, y, r * 0.72, p.count(8, 10), 0.4, turn + 15), 0.3)
        p.fill("#5a3a1e", 200, bleed=0.08, texture=0.7, border=0.5)
        p.circle(x, y, r * p.u(0.32, 0.4))


def _pears(p: Painter) -> None:
    table = interior(p, (330, 400), "#f1eadc", "#c9c2a8", 80)
    p.section("table top")
    p.fill("#9c7653", 120, bleed=0.25, texture=0.5)
    p.shape([(0, table), (CANVAS, table + p.u(-15, 15)), (CANVAS, CANVAS), (0, CANVAS)], 0.1)
    count = p.count(2, 3)
    pears = []
    for index in range(count):
        x = 120 + (index + 0.5) * 360 / count + p.u(-20, 20)
        pears.append((x, table + p.u(60, 110), p.u(52, 68), p.u(-15, 15)))
    p.section("shadows")
    p.fill("#5a4433", 70, bleed=0.35, texture=0.3)
    for x, y, r, tilt in pears:
        p.shape(ellipse(x + r * 0.5, y + r * 0.9, r * 1.3, r * 0.3), 0.6)
    for number, (x, y, r, tilt) in enumerate(pears, start=1):
        p.section(f"pear {number}: body, blush, shade")
        p.fill(p.pick(["#b5c449", "#c9c24a", "#a8b83f"]), 160, bleed=0.12, texture=0.45, border=0.35)
        p.shape(scaled(PEAR, x, y, r, tilt), 0.55)
        p.fill("#d8743a", 80, bleed=0.3, texture=0.4)
        p.shape(blob(p.rng, x - r * 0.35, y + r * 0.1, r * 0.45, r * 0.4, count=8), 0.6)
        p.fill("#6f7f2e", 100, bleed=0.2, texture=0.45)
        p.shape(blob(p.rng, x + r * 0.45, y + r * 0.4, r * 0.4, r * 0.45, count=8, rotation=30), 0.6)
    p.section("stems")
    p.fill("#5b3a1e", 200, bleed=0.03, texture=0.3)
    stems = []
    for x, y, r, tilt in pears:
        top_x, top_y = _rotate([(0, -1.85 * r)], x, y, tilt)[0]
        stems.append((top_x, top_y))
        p.shape(tapered(top_x, top_y + 4, top_x + p.u(4, 12), top_y - p.u(18, 28), 5, 3), 0.2)
    p.section("a leaf")
    p.fill("#5d8a3a", 150, bleed=0.12, texture=0.45)
    stem_x, stem_y = p.pick(stems)
    p.shape(leaf(stem_x + 4, stem_y - 12, p.u(50, 70), p.u(20, 28), p.u(-40, -10)), 0.4)


def _lighthouse(p: Painter) -> None:
    horizon = p.u(320, 380)
    paper_wash(p, "#eef1f0")
    sky(p, "#a7c4d8", horizon)
    clouds(p, "#f7f4ee", 40, horizon - 200)
    p.section("sea")
    p.fill("#4f7f9a", 130, bleed=0.3, texture=0.5)
    p.shape(band(p.rng, horizon, CANVAS, wobble=3), 0.3)
    cliff_top = horizon - p.u(20, 60)
    cliff_edge = p.u(230, 300)
    p.section("cliff")
    p.fill("#7a6a58", 150, bleed=0.15, texture=0.6)
    p.shape([(0, cliff_top), (cliff_edge * 0.7, cliff_top - p.u(0, 15)), (cliff_edge, cliff_top + 20),
             (cliff_edge + p.u(20, 50), CANVAS - 120), (cliff_edge + p.u(60, 100), CANVAS), (0, CANVAS)], 0.2)
    p.fill("#4e4338", 110, bleed=0.2, texture=0.5)
    p.shape([(cliff_edge * 0.55, cliff_top + 70), (cliff_edge + 10, cliff_top + 60),
             (cliff_edge + p.u(40, 70), CANVAS), (cliff_edge * 0.4, CANVAS)], 0.3)
    p.section("grass on the cliff top")
    p.fill("#6f8f4a", 150, bleed=0.12, texture=0.45)
    p.shape([(0, cliff_top - 8), (cliff_edge * 0.75, cliff_top - 14), (cliff_edge + 5, cliff_top + 18),
             (cliff_edge * 0.7, cliff_top + 28), (0, cliff_top + 30)], 0.4)
    p.section("foam")
    p.fill("#f4f7f6", 120, bleed=0.2, texture=0.3)
    for k in range(p.count(4, 6)):
        p.shape(lozenge(cliff_edge + p.u(40, 300), horizon + 30 + k * p.u(30, 45), p.u(25, 50), 6), 0.3)
    tower_x = cliff_edge * p.u(0.4, 0.55)
    tower_height = p.u(170, 220)
    top = cliff_top - tower_height
    base_half, top_half = p.u(24, 30), p.u(15, 18)
    p.section("tower")
    p.fill("#f1ece2", 180, bleed=0.05, texture=0.3, direction="in")
    p.shape([(tower_x - top_half, top), (tower_x + top_half, top),
             (tower_x + base_half, cliff_top), (tower_x - base_half, cliff_top)], 0.05)
    p.section("red stripes")
    p.fill("#c8392f", 170, bleed=0.05, texture=0.35)
    for k in range(p.count(2, 3)):
        y0 = top + tower_height * (0.2 + k * 0.3)
        y1 = y0 + tower_height * 0.13
        # the stripe follows the tower's taper: its half-width grows linearly downwards
        half0 = top_half + (base_half - top_half) * (y0 - top) / tower_height
        half1 = top_half + (base_half - top_half) * (y1 - top) / tower_height
        p.shape([(tower_x - half0, y0), (tower_x + half0, y0), (tower_x + half1, y1), (tower_x - half1, y1)], 0)
    p.section("lamp glow")
    p.fill("#fbe6a2", 130, bleed=0.5, texture=0.2, border=0.05)
    p.circle(tower_x, top - 18, p.u(30, 42))
    p.section("lamp room")
    p.fill("#3b3b45", 190, bleed=0.04, texture=0.3)
    p.shape(rectangle(tower_x - top_half + 3, top - 28, tower_x + top_half - 3, top), 0)
    p.section("roof")
    p.fill("#2c2a30", 200, bleed=0.04, texture=0.3)
    p.shape([(tower_x - top_half - 4, top - 26), (tower_x, top - 50), (tower_x + top_half + 4, top - 26)], 0.05)
    p.section("gulls")
    p.fill("#3a3440", 170, bleed=0.04, texture=0.2)
    for _ in range(p.count(3, 5)):
        x, y, span = p.u(cliff_edge, 560), p.u(60, horizon - 120), p.u(7, 12)
        p.shape([(x - span, y - 3), (x, y + 2), (x + span, y - 3), (x, y + 5)], 0.2)


def _autumn_trees(p: Painter) -> None:
    horizon = p.u(300, 360)
    paper_wash(p, "#f3eee2")
    sky(p, "#cfdde3", horizon, alpha=90)
    p.section("far hills")
    p.fill("#a3a07a", 110, bleed=0.25, texture=0.45)
    p.shape(ridge(p.rng, horizon, p.u(30, 60), horizon + 25, peaks=2), 0.4)
    p.section("ground")
    p.fill("#b8914f", 120, bleed=0.25, texture=0.55)
    p.shape(ridge(p.rng, horizon + 15, p.u(8, 18), CANVAS, peaks=2), 0.3)
    vanish = p.u(240, 360)
    p.section("path")
    p.fill("#d9c7a0", 130, bleed=0.25, texture=0.4)
    p.shape([(vanish - 6, horizon + 18), (vanish + 6, horizon + 18), (p.u(400, 480), CANVAS), (p.u(150, 230), CANVAS)], 0.3)
    count = p.count(3, 4)
    trees = []
    for index in range(count):
        side = -1 if index % 2 == 0 else 1
        x = vanish + side * p.u(90, 230) * (1 + index * 0.15)
        base = horizon + p.u(40, 160)
        trees.append((_clamp(x, 60, 540), base, p.u(62, 90) * (base / 400)))
    p.section("shadows under the trees")
    p.fill("#6b4a2a", 60, bleed=0.4, texture=0.3)
    for x, base, r in trees:
        p.shape(ellipse(x + r * 0.8, base + 6, r * 1.3, r * 0.2), 0.6)
    p.section("trunks")
    p.fill("#4a3428", 190, bleed=0.05, texture=0.4)
    for x, base, r in trees:
        p.shape(tapered(x, base, x + p.u(-6, 6), base - r * 2.2, r * 0.22, r * 0.08), 0.2)
    palette = ["#c8642b", "#d98b2b", "#b8432a", "#e0a43a"]
    for number, (x, base, r) in enumerate(trees, start=1):
        crown_y = base - r * 2.4
        colour = p.pick(palette)
        p.section(f"tree {number}: crown, then its lit side")
        p.fill(colour, 150, bleed=0.3, texture=0.55, border=0.35)
        for _ in range(p.count(2, 3)):
            centre_x, centre_y = x + p.u(-r * 0.4, r * 0.4), crown_y + p.u(-r * 0.3, r * 0.3)
            p.shape(blob(p.rng, centre_x, centre_y, r * p.u(0.7, 1.0), r * p.u(0.6, 0.85), count=9, wobble=0.2), 0.6)
        p.fill("#f0c15a", 110, bleed=0.25, texture=0.45)
        p.shape(blob(p.rng, x - r * 0.3, crown_y - r * 0.35, r * 0.5, r * 0.35, count=8, wobble=0.2), 0.6)
    p.section("fallen leaves")
    p.fill("#c8642b", 150, bleed=0.1, texture=0.3)
    for _ in range(p.count(10, 15)):
        p.circle(p.u(20, 580), p.u(horizon + 40, 585), p.u(2.5, 5))


def _teapot(p: Painter) -> None:
    table = interior(p, (360, 420), "#f2ece1", "#d7c8b4", 80)
    p.section("table")
    p.fill("#b08a63", 110, bleed=0.25, texture=0.5)
    p.shape(rectangle(0, table, CANVAS, CANVAS), 0.1)
    x, size = p.u(200, 280), p.u(85, 105)
    y = table + 40 - size * 0.8
    # the cup is a paler piece of the same set; a near-white cup would disappear into the paper
    body, cup = p.pick([("#3f6fa8", "#9fb9d6"), ("#2f7a78", "#94c6bd"), ("#b5483a", "#e3a08f"), ("#d7a23b", "#ebcb80")])
    p.section("shadow")
    p.fill("#6b5440", 70, bleed=0.35, texture=0.3)
    p.shape(ellipse(x + size * 0.4, table + 45, size * 1.4, size * 0.18), 0.6)
    p.section("spout and handle")
    p.fill(body, 160, bleed=0.1, texture=0.4)
    p.shape([(x + size * 0.85, y - size * 0.1), (x + size * 1.5, y - size * 0.75), (x + size * 1.62, y - size * 0.72),
             (x + size * 1.05, y + size * 0.3)], 0.3)
    p.shape([(x - size * 0.85, y - size * 0.5), (x - size * 1.4, y - size * 0.45), (x - size * 1.45, y + size * 0.1),
             (x - size * 0.9, y + size * 0.4), (x - size * 0.95, y + size * 0.2), (x - size * 1.25, y),
             (x - size * 1.22, y - size * 0.3), (x - size * 0.9, y - size * 0.32)], 0.5)
    p.section("pot")
    p.fill(body, 160, bleed=0.1, texture=0.45, border=0.35)
    p.shape(scaled(TEAPOT_BODY, x, y, size), 0.55)
    p.fill("#1f2a3a", 90, bleed=0.2, texture=0.4)
    p.shape(blob(p.rng, x + size * 0.35, y + size * 0.35, size * 0.55, size * 0.3, count=8, rotation=-15), 0.6)
    p.section("lid and knob")
    p.fill(body, 175, bleed=0.06, texture=0.4)
    p.shape(ellipse(x, y - size * 0.9, size * 0.5, size * 0.13), 0.5)
    p.fill("#1f2a3a", 200, bleed=0.04, texture=0.3)
    p.circle(x, y - size * 1.05, size * 0.09)
    cup_x, rim = p.u(450, 510), table - p.u(5, 25)
    p.section("saucer")
    p.fill("#b9ab93", 120, bleed=0.1, texture=0.35)
    p.shape(ellipse(cup_x, table + 52, 62, 12), 0.6)
    p.section("cup and its shaded side")
    p.fill(cup, 165, bleed=0.06, texture=0.35)
    p.shape([(cup_x - 42, rim), (cup_x + 42, rim), (cup_x + 34, table + 38), (cup_x + 20, table + 50),
             (cup_x - 20, table + 50), (cup_x - 34, table + 38)], 0.4)
    p.fill(body, 90, bleed=0.15, texture=0.4)
    p.shape([(cup_x + 12, rim + 8), (cup_x + 38, rim + 8), (cup_x + 30, table + 40), (cup_x + 14, table + 48)], 0.4)
    p.section("tea")
    p.fill("#7a4520", 180, bleed=0.05, texture=0.4, direction="in")
    p.shape(ellipse(cup_x, rim + 3, 38, 7), 0.6)


def _night_sky(p: Painter) -> None:
    horizon = p.u(380, 440)
    moon_x, moon_y, moon_r = p.u(120, 480), p.u(100, 170), p.u(40, 55)
    paper_wash(p, "#dfe3ea")
    p.section("night sky, painted around the moon")
    p.fill("#2f3f6e", 175, bleed=0.3, texture=0.5, border=0.2)
    p.shape(rectangle_around_circle(0, 0, CANVAS, horizon + 30, moon_x, moon_y, moon_r * 1.1), 0)
    p.fill("#1a2444", 170, bleed=0.35, texture=0.4)
    p.shape(rectangle_around_circle(0, 0, CANVAS, horizon - p.u(110, 150), moon_x, moon_y, moon_r * 1.1), 0)
    # a dark cloud over the slit through which both washes reached round the moon
    p.section("dark cloud above the moon")
    p.fill("#1f2a50", 180, bleed=0.2, texture=0.4)
    gap = moon_y - moon_r * 1.1
    p.shape(blob(p.rng, moon_x + p.u(-20, 20), gap / 2, p.u(70, 100), gap / 2 + 4, count=10, wobble=0.12), 0.5)
    p.section("glow above the horizon")
    p.fill("#8a7fa0", 70, bleed=0.5, texture=0.3, border=0.05)
    p.shape(band(p.rng, horizon - 70, horizon + 30, wobble=10), 0.4)
    p.section("moon and its craters")
    p.fill("#f3e2a6", 150, bleed=0.06, texture=0.3)
    p.circle(moon_x, moon_y, moon_r)
    p.fill("#d8c98f", 110, bleed=0.1, texture=0.4)
    for _ in range(p.count(3, 4)):
        angle, distance = p.u(0, 2 * math.pi), p.u(0.1, 0.6) * moon_r
        p.circle(moon_x + math.cos(angle) * distance, moon_y + math.sin(angle) * distance, moon_r * p.u(0.1, 0.2))
    p.section("drifting clouds")
    p.fill("#5a6788", 90, bleed=0.45, texture=0.3)
    p.shape(blob(p.rng, p.u(100, 500), p.u(240, horizon - 60), p.u(70, 110), p.u(10, 18), count=9, wobble=0.2), 0.6)
    p.section("far hills")
    p.fill("#27324f", 170, bleed=0.2, texture=0.45)
    p.shape(ridge(p.rng, horizon, p.u(40, 70), CANVAS, peaks=2), 0.4)
    p.section("mist in the valley")
    p.fill("#8d97b3", 55, bleed=0.5, texture=0.2, border=0.05)
    p.shape(band(p.rng, horizon + 10, horizon + 45, wobble=6), 0.5)
    near_top = horizon + p.u(50, 90)
    p.section("near hills")
    p.fill("#161d33", 190, bleed=0.15, texture=0.45)
    p.shape(ridge(p.rng, near_top, p.u(20, 40), CANVAS, peaks=2), 0.35)
    p.section("pine trees")
    p.fill("#0f1424", 210, bleed=0.05, texture=0.3)
    for _ in range(p.count(4, 7)):
        x, height = p.u(20, 580), p.u(40, 80)
        base = near_top + p.u(0, 40)
        p.shape([(x - height * 0.22, base), (x - height * 0.1, base - height * 0.45), (x - height * 0.16, base - height * 0.45),
                 (x, base - height), (x + height * 0.16, base - height * 0.45), (x + height * 0.1, base - height * 0.45),
                 (x + height * 0.22, base)], 0.05)


def _cherry_blossoms(p: Painter) -> None:
    paper_wash(p, "#f5eef0")
    p.section("soft sky")
    p.fill("#c9dcec", 90, bleed=0.5, texture=0.35, border=0.1)
    p.shape(blob(p.rng, 300, 300, 330, 320, count=12, wobble=0.08), 0.4)
    p.section("blurred blossoms behind")
    p.fill("#f3c6d3", 60, bleed=0.5, texture=0.3, border=0.05)
    for _ in range(p.count(4, 6)):
        p.circle(p.u(60, 540), p.u(60, 540), p.u(35, 70))
    start_y, end_y = p.u(380, 480), p.u(120, 220)
    joints = 7
    branch = [(CANVAS * 0.95 * i / (joints - 1), start_y + (end_y - start_y) * i / (joints - 1) + p.u(-15, 15))
              for i in range(joints)]
    # Short segments: p5.brush grows a wash in proportion to its bounding box, so one long
    # diagonal shape would blur into a broad band.
    p.section("branch, thinning towards its tip")
    p.fill("#4a3430", 190, bleed=0.04, texture=0.5)
    for i, ((x0, y0), (x1, y1)) in enumerate(zip(branch, branch[1:])):
        p.shape(tapered(x0, y0, x1, y1, 24 - i * 3.2, 24 - (i + 1) * 3.2), 0.1)
    p.section("twigs")
    p.fill("#5a403a", 180, bleed=0.04, texture=0.4)
    twig_tips = []
    for k in range(p.count(3, 5)):
        base_x, base_y = branch[2 + k % 4]
        tip = (base_x + p.u(20, 60), base_y + p.pick([-1, 1]) * p.u(35, 65))
        twig_tips.append(tip)
        p.shape(tapered(base_x, base_y, tip[0], tip[1], 7, 2), 0.2)
    # blossoms cluster along the outer branch and at the twig tips
    anchors = twig_tips + branch[2:]
    flowers = []
    for _ in range(p.count(12, 18)):
        ax, ay = p.pick(anchors)
        flowers.append((ax + p.u(-35, 35), ay + p.u(-35, 35), p.u(19, 27)))
    p.section("blossoms")
    p.fill("#ef9ab3", 170, bleed=0.15, texture=0.35)
    for x, y, r in flowers:
        p.shape(lobed(x, y, r, 5, 0.35, p.u(0, 72)), 0.7)
    p.section("deeper pink at the heart of every other flower")
    p.fill("#e0668c", 120, bleed=0.1, texture=0.3)
    for x, y, r in flowers[::2]:
        p.shape(lobed(x, y, r * 0.5, 5, 0.3, p.u(0, 72)), 0.7)
    p.section("flower centres")
    p.fill("#a8324f", 200, bleed=0.04, texture=0.3)
    for x, y, r in flowers:
        p.circle(x, y, r * 0.18)
    p.section("young leaves")
    p.fill("#7a9a4a", 140, bleed=0.1, texture=0.4)
    for _ in range(p.count(3, 5)):
        ax, ay = p.pick(anchors)
        p.shape(leaf(ax, ay, p.u(30, 45), p.u(12, 16), p.u(0, 360)), 0.4)
    p.section("buds")
    p.fill("#e0708f", 180, bleed=0.06, texture=0.3)
    for tip_x, tip_y in twig_tips:
        p.shape(ellipse(tip_x, tip_y, 7, 10, count=8, rotation=p.u(0, 180)), 0.6)
    p.section("falling petals")
    p.fill("#f4b6c8", 150, bleed=0.1, texture=0.3)
    for _ in range(p.count(5, 8)):
        p.shape(petal(p.u(40, 560), p.u(300, 570), p.u(10, 16), p.u(6, 9), p.u(0, 360)), 0.6)


def _sailboats(p: Painter) -> None:
    horizon = p.u(280, 340)
    paper_wash(p, "#eef2f4")
    sky(p, "#a9cbe3", horizon)
    clouds(p, "#ffffff", 40, horizon - 150)
    p.section("far coast")
    p.fill("#8a9bb0", 110, bleed=0.2, texture=0.4)
    p.shape(ridge(p.rng, horizon, p.u(15, 35), horizon + 8, peaks=2, step=50), 0.4)
    p.section("sea")
    p.fill("#5f92b5", 120, bleed=0.3, texture=0.45)
    p.shape(band(p.rng, horizon + 4, CANVAS, wobble=2), 0.3)
    p.fill("#3d6f93", 100, bleed=0.3, texture=0.5)
    p.shape(band(p.rng, horizon + (CANVAS - horizon) * p.u(0.4, 0.55), CANVAS, wobble=5), 0.3)
    boats = []
    count = p.count(2, 4)
    for index in range(count):
        x = (index + 0.5) * CANVAS / count + p.u(-30, 30)
        y = horizon + p.u(30, 200)
        boats.append((x, y, p.u(42, 60) * (y / 400)))
    p.section("reflections")
    p.fill("#2f4f66", 60, bleed=0.35, texture=0.3)
    for x, y, size in boats:
        p.shape([(x - size, y + size * 0.3), (x + size, y + size * 0.3),
                 (x + size * 0.4, y + size * 1.6), (x - size * 0.4, y + size * 1.6)], 0.5)
    for number, (x, y, size) in enumerate(boats, start=1):
        p.section(f"sailboat {number}: hull and mast, then sails")
        p.fill(p.pick(["#2f3b4a", "#7a2e2a", "#2e4a3f", "#3b2f2a"]), 180, bleed=0.05, texture=0.3, direction="in")
        p.shape(scaled(HULL, x, y, size), 0.1)
        p.shape(tapered(x, y, x, y - size * 2.6, 3, 2), 0)
        p.fill(p.pick(["#f6f1e6", "#efe3c8", "#e9e2d8", "#d9584a"]), 160, bleed=0.08, texture=0.3)
        p.shape([(x + 3, y - size * 2.5), (x + 3, y - 5), (x + size * 1.2, y - 5)], 0.15)
        p.shape([(x - 3, y - size * 2.2), (x - 3, y - 5), (x - size * 0.8, y - 5)], 0.15)
    p.section("glints on the water")
    p.fill("#ffffff", 110, bleed=0.08, texture=0.2)
    for _ in range(p.count(6, 10)):
        p.shape(lozenge(p.u(30, 570), p.u(horizon + 20, 580), p.u(10, 25), 3), 0)


_COMPOSERS: dict[str, Callable[[Painter], None]] = {
    "red poppies in a summer meadow": _poppies,
    "lemons on a blue cloth": _lemons,
    "a harbour at dusk": _harbour,
    "a mountain lake": _mountain_lake,
    "tulips in a glass vase": _tulips,
    "a koi pond seen from above": _koi_pond,
    "sunflowers under a blue sky": _sunflowers,
    "pears on a wooden table": _pears,
    "a lighthouse on a rocky coast": _lighthouse,
    "autumn trees along a path": _autumn_trees,
    "a teapot and a cup": _teapot,
    "a night sky with a full moon": _night_sky,
    "a cherry blossom branch": _cherry_blossoms,
    "sailboats on a calm sea": _sailboats,
}

# The train split of configs/subjects.yaml; every one of them needs a composer above.
SUBJECTS: tuple[str, ...] = subject_split("train")
_missing = [s for s in SUBJECTS if s not in _COMPOSERS]
if _missing:
    raise ValueError(f"configs/subjects.yaml trains on subjects without a procedural composer: {_missing}")


def generate_sketch(subject: str, seed: int, max_sections: int | None = None) -> str:
    """A valid sketch of ``subject`` (one of SUBJECTS); the same (subject, seed) gives the same code.

    ``max_sections`` keeps only the first layers after the paper wash (the big masses first):
    a compact sketch a tiny model can learn in minutes on a CPU.
    """
    if subject not in _COMPOSERS:
        raise ValueError(f"no procedural composition for {subject!r}; choose one of {list(SUBJECTS)}")
    painter = Painter(random.Random(f"{subject}\x00{int(seed)}"))
    _COMPOSERS[subject](painter)
    return painter.sketch(subject, max_sections)


def sft_examples(n: int, seed: int = 0, max_sections: int | None = None,
                 subjects: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """``n`` supervised turn-1 examples: the prompt messages and a fenced sketch as the completion.

    Subjects cycle in a seeded order so any ``n`` covers them as evenly as possible; each
    example draws its own sketch seed.
    """
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    rng = random.Random(f"sft\x00{int(seed)}")
    examples = []
    order: list[str] = []
    for _ in range(n):
        if not order:
            order = list(subjects or SUBJECTS)
            rng.shuffle(order)
        subject = order.pop()
        sketch = generate_sketch(subject, rng.randrange(2**31), max_sections)
        examples.append({
            "subject": subject,
            "prompt_messages": first_turn_messages(subject),
            "completion": f"```js\n{sketch}```",
        })
    return examples


# --------------------------------------------------------------------------------------
# Flawed drafts: the gate failures a small policy really makes, for revision examples
# --------------------------------------------------------------------------------------

# What the tiny model got wrong in the 2026-12-01 demo (256 turns): 95 render errors from a
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
        at = max(i for i, line in enumerate(lines) if line.startswith("  // "))
        title = sketch[3:sketch.index(":")].split(" ")[-1]
        lines.insert(at, rng.choice(_FORBIDDEN_LINES).format(title=title))
        return "\n".join(lines) + "\n"
    if flaw == "one_point_shape":
        # Every shape collapsed to its first point: the layers paint nothing p5 accepts.
        return _SHAPE_CALL.sub(lambda m: f"shape([[{m.group(1)}, {m.group(2)}]], {m.group(3)});", sketch)
    raise ValueError(f"unknown flaw {flaw!r}; choose one of {FLAWS}")
