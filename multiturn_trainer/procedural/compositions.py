"""The compositions, one per subject: shared layers (paper, wall, sky, clouds) and ``COMPOSERS``."""

from __future__ import annotations

import math
from typing import Callable

from multiturn_trainer.procedural.painter import Painter
from multiturn_trainer.procedural.shapes import (CANVAS, FISH, HULL, LEMON, PEAR, TEAPOT_BODY, TULIP, VASE, band,
                                                 blob, clamp, ellipse, leaf, lobed, lozenge, petal, rectangle,
                                                 rectangle_around_circle, ridge, rotate, scaled, tapered)


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
        top_x, top_y = rotate([(0, -1.85 * r)], x, y, tilt)[0]
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
        trees.append((clamp(x, 60, 540), base, p.u(62, 90) * (base / 400)))
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


COMPOSERS: dict[str, Callable[[Painter], None]] = {
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
