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
