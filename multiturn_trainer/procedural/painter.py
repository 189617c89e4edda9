"""The ``Painter``: records one painting's washes and shapes and writes them out as sketch code."""

from __future__ import annotations

import colorsys
import random
from typing import Any, Sequence

from multiturn_trainer.procedural.shapes import CANVAS, Point, clamp

PAPER = "#f8f1e4"
MAX_LINE_CHARS = 100


def layer_starts(lines: Sequence[str]) -> list[int]:
    """Where each layer of ``draw()`` begins: its ``  // name`` comment line."""
    return [i for i, line in enumerate(lines) if line.startswith("  // ")]


def _number(value: float) -> str:
    rounded = round(value)
    return str(int(rounded)) if abs(value - rounded) < 1e-9 else f"{value:.2f}".rstrip("0").rstrip(".")

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
        lightness = clamp(lightness + self.u(-0.05, 0.05) * spread, 0.03, 0.98)
        saturation = clamp(saturation * (1 + self.u(-0.12, 0.12) * spread), 0.0, 1.0)
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
        alpha = round(clamp(alpha + self.u(-12, 12), 25, 235))
        bleed = clamp(bleed + self.u(-0.04, 0.04), 0.01, 0.6)
        texture = clamp(texture + self.u(-0.1, 0.1), 0.0, 1.0)
        border = clamp(border + self.u(-0.1, 0.1), 0.0, 1.0)
        self.body += [
            f"  brush.fill('{self.colour(colour, spread)}', {alpha});",
            f"  brush.fillBleed({_number(round(bleed, 2))}, '{direction}');",
            f"  brush.fillTexture({_number(round(texture, 2))}, {_number(round(border, 2))});",
        ]

    def _x(self, x: float) -> float:
        return CANVAS - x if self.mirrored else x

    def shape(self, points: Sequence[Point], curvature: float) -> None:
        coordinates = [
            f"[{_number(round(clamp(self._x(x), 0, CANVAS)))}, {_number(round(clamp(y, 0, CANVAS)))}]"
            for x, y in points
        ]
        self._wrapped("  shape([", coordinates, f"], {_number(round(curvature, 2))});")

    def circle(self, x: float, y: float, radius: float) -> None:
        radius = max(1.0, radius)
        # Keep the whole circle on the canvas when it fits; tiny overhangs would bleed off anyway.
        x = clamp(x, min(radius, CANVAS / 2), max(CANVAS - radius, CANVAS / 2))
        y = clamp(y, min(radius, CANVAS / 2), max(CANVAS - radius, CANVAS / 2))
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
            starts = layer_starts(body)
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
