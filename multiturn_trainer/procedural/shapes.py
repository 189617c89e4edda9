"""Geometry helpers for the procedural sketches: parametric shapes as point lists in canvas coordinates."""

from __future__ import annotations

import math
import random
from typing import Iterable, Sequence

CANVAS = 600

Point = tuple[float, float]


def clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))


def rotate(points: Iterable[Point], cx: float, cy: float, angle_deg: float) -> list[Point]:
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
    return rotate(local, cx, cy, rotation)


def ellipse(cx: float, cy: float, rx: float, ry: float, count: int = 10, rotation: float = 0.0) -> list[Point]:
    local = [(math.cos(2 * math.pi * i / count) * rx, math.sin(2 * math.pi * i / count) * ry) for i in range(count)]
    return rotate(local, cx, cy, rotation)


def petal(cx: float, cy: float, length: float, width: float, angle: float) -> list[Point]:
    """A petal growing from (cx, cy) along ``angle`` degrees, widest two thirds out."""
    half = width / 2
    local = [(0, 0), (0.3 * length, -0.7 * half), (0.7 * length, -half), (length, -0.35 * half),
             (length, 0.35 * half), (0.7 * length, half), (0.3 * length, 0.7 * half)]
    return rotate(local, cx, cy, angle)


def leaf(x: float, y: float, length: float, width: float, angle: float) -> list[Point]:
    """A leaf pointed at both ends, attached at (x, y)."""
    half = width / 2
    local = [(0, 0), (0.3 * length, -half), (0.7 * length, -0.8 * half), (length, 0),
             (0.7 * length, 0.8 * half), (0.3 * length, half)]
    return rotate(local, x, y, angle)


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
    return rotate([(x * scale, y * scale) for x, y in template], cx, cy, rotation)


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
