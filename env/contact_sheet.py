"""Contact sheets: many paintings on one PNG, each with a short caption."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFont

from env.pigment import open_on_white

THUMB = 240
CAPTION_HEIGHT = 34
PADDING = 8
PAPER = (246, 242, 234)
INK = (40, 36, 32)
MISSING = (214, 206, 196)


@dataclass
class SheetItem:
    caption: str
    png: bytes | None
    subcaption: str = ""


def _thumbnail(png: bytes | None) -> Image.Image:
    if not png:
        tile = Image.new("RGB", (THUMB, THUMB), MISSING)
        ImageDraw.Draw(tile).text((THUMB // 2 - 30, THUMB // 2 - 6), "no image", fill=INK)
        return tile
    return open_on_white(png).resize((THUMB, THUMB), Image.LANCZOS)


def contact_sheet(items: list[SheetItem], columns: int | None = None, title: str = "") -> bytes:
    """Lay the paintings out in a grid and return the sheet as PNG bytes."""
    count = max(1, len(items))
    columns = columns or min(count, max(1, math.ceil(math.sqrt(count * 1.5))))
    rows = math.ceil(count / columns)
    title_height = 28 if title else 0
    width = columns * (THUMB + PADDING) + PADDING
    height = title_height + rows * (THUMB + CAPTION_HEIGHT + PADDING) + PADDING
    sheet = Image.new("RGB", (width, height), PAPER)
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default()
    if title:
        draw.text((PADDING, 8), title, fill=INK, font=font)
    for index, item in enumerate(items):
        row, column = divmod(index, columns)
        x = PADDING + column * (THUMB + PADDING)
        y = title_height + PADDING + row * (THUMB + CAPTION_HEIGHT + PADDING)
        sheet.paste(_thumbnail(item.png), (x, y))
        draw.text((x, y + THUMB + 3), item.caption[:38], fill=INK, font=font)
        if item.subcaption:
            draw.text((x, y + THUMB + 17), item.subcaption[:38], fill=INK, font=font)
    out = io.BytesIO()
    sheet.save(out, format="PNG")
    return out.getvalue()


@dataclass
class TurnPanel:
    """One turn of an episode sheet: its painting and the text the policy wrote and read."""

    heading: str
    png: bytes | None
    code: str = ""
    feedback: str = ""


PANEL = 320
TEXT_LINES = 26  # code and feedback lines under each painting (the rest is cut: model text is unbounded)
LINE_CHARS = 52


def _wrapped(text: str, lines: int) -> list[str]:
    """At most ``lines`` display lines of ``text`` (model-written: cut before it is wrapped)."""
    out: list[str] = []
    for raw in text[: lines * LINE_CHARS].splitlines():
        raw = raw.expandtabs(2)
        while len(out) < lines:
            out.append(raw[:LINE_CHARS])
            raw = raw[LINE_CHARS:]
            if not raw:
                break
        if len(out) >= lines:
            break
    return out


def episode_sheet(panels: list[TurnPanel], title: str = "") -> bytes:
    """One episode's turns side by side: each turn's painting, then its sketch and the feedback
    the policy read next, so a reader sees what the revision changed and why."""
    count = max(1, len(panels))
    line_height = 12
    code_lines, feedback_lines = TEXT_LINES * 2 // 3, TEXT_LINES - TEXT_LINES * 2 // 3
    text_height = (TEXT_LINES + 3) * line_height
    title_height = 28 if title else 0
    width = count * (PANEL + PADDING * 2) + PADDING
    height = title_height + PADDING + 18 + PANEL + PADDING + text_height + PADDING
    sheet = Image.new("RGB", (width, height), PAPER)
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default()
    if title:
        draw.text((PADDING, 8), title[:160], fill=INK, font=font)
    for index, panel in enumerate(panels):
        x = PADDING + index * (PANEL + PADDING * 2)
        y = title_height + PADDING
        draw.text((x, y), panel.heading[:LINE_CHARS], fill=INK, font=font)
        y += 18
        tile = _thumbnail(panel.png).resize((PANEL, PANEL), Image.LANCZOS)
        sheet.paste(tile, (x, y))
        y += PANEL + PADDING
        draw.rectangle((x, y, x + PANEL, y + text_height), fill=(255, 255, 255))
        ty = y + 4
        for line in ["sketch:"] + _wrapped(panel.code, code_lines) + ["", "feedback:"] + _wrapped(
                panel.feedback, feedback_lines):
            draw.text((x + 4, ty), line, fill=INK, font=font)
            ty += line_height
    out = io.BytesIO()
    sheet.save(out, format="PNG")
    return out.getvalue()
