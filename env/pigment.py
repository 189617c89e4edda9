"""How much paint is on the paper: the share of pixels that differ from the background."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

PAINT_DISTANCE = 32.0  # RGB Euclidean distance from the background colour that counts as paint
QUANTISATION_SHIFT = 4  # 16 levels per channel: coarse enough that paper texture shares one bin


def open_on_white(png: bytes) -> Image.Image:
    """Image bytes to an RGB PIL image, any transparency flattened onto white (transparent = paper).

    The one flattening every reader uses (metrics, contact sheets, the HPSv3 scorer, the
    judge's images): a plain ``convert("RGB")`` would turn transparent pixels black.
    """
    with Image.open(io.BytesIO(png)) as opened:
        opened.load()
        if not opened.has_transparency_data:
            return opened.convert("RGB")
        rgba = opened.convert("RGBA")
    white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return Image.alpha_composite(white, rgba).convert("RGB")


def load_rgb(png: bytes) -> np.ndarray:
    """PNG bytes to an RGB uint8 array, flattened onto white (see open_on_white)."""
    return np.asarray(open_on_white(png))


def background_colour(rgb: np.ndarray) -> np.ndarray:
    """The modal colour after coarse quantisation, refined to the mean of that bin."""
    pixels = rgb.reshape(-1, 3)
    bins = pixels >> QUANTISATION_SHIFT
    keys = (bins[:, 0].astype(np.int32) << 8) | (bins[:, 1].astype(np.int32) << 4) | bins[:, 2]
    counts = np.bincount(keys, minlength=1 << 12)
    modal = int(np.argmax(counts))
    return pixels[keys == modal].mean(axis=0)


def paint_fraction(rgb: np.ndarray) -> float:
    pixels = rgb.reshape(-1, 3).astype(np.float32)
    background = background_colour(rgb)
    distance = np.sqrt(((pixels - background) ** 2).sum(axis=1))
    return float((distance > PAINT_DISTANCE).mean())


def paint_fraction_of_png(png: bytes) -> float:
    return paint_fraction(load_rgb(png))
