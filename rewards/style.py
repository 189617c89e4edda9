"""An offline style reward: how much a painting looks like the pool's `love` tier.

Deterministic, CPU-only, from cheap image statistics. It stands in for the learned rewards
(judge, HPSv3) on machines with no GPU or API — the demo and small-model experiments use
it. It knows nothing about subjects; it measures watercolour-ness the way the pool shows it:

- coverage: how much of the paper is painted;
- palette: saturation and lightness spread of the paint, and a hue histogram;
- edge softness: watercolour edges bleed, so gradients are mostly gentle; vector-like
  flat fills have few but hard edges;
- texture: washes granulate, so painted regions carry fine-scale variation;
- layering: translucent washes overlap into many distinct tones.

Each statistic is compared with the love tier's mean and spread (a z-score); the score is
exp(-mean z² / 2) blended with palette-histogram overlap, so it lies in [0, 1].
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from env.pigment import PAINT_DISTANCE, background_colour, load_rgb
from rewards.pool import ReferencePool

ANALYSIS_SIZE = 160  # statistics at a fixed size, so any resolution scores alike
HUE_BINS = 12
SCALAR_FEATURES = (
    "coverage", "saturation_mean", "saturation_std", "lightness_std",
    "edge_mean", "hard_edge_share", "texture", "tone_count",
)
# The spread floor keeps a feature on which all love paintings agree from dominating.
MIN_SPREAD = {
    "coverage": 0.08, "saturation_mean": 0.05, "saturation_std": 0.03, "lightness_std": 0.03,
    "edge_mean": 0.01, "hard_edge_share": 0.05, "texture": 0.005, "tone_count": 0.08,
}
PALETTE_WEIGHT = 0.25


def _resize(rgb: np.ndarray) -> np.ndarray:
    image = Image.fromarray(rgb).resize((ANALYSIS_SIZE, ANALYSIS_SIZE), Image.BILINEAR)
    return np.asarray(image).astype(np.float32) / 255.0


def _hsl(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    high = rgb.max(axis=-1)
    low = rgb.min(axis=-1)
    lightness = (high + low) / 2
    chroma = high - low
    saturation = np.where(chroma > 1e-6, chroma / (1 - np.abs(2 * lightness - 1) + 1e-6), 0.0)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    safe = np.where(chroma > 1e-6, chroma, 1.0)
    hue = np.where(high == r, ((g - b) / safe) % 6, np.where(high == g, (b - r) / safe + 2, (r - g) / safe + 4))
    return hue / 6.0, np.clip(saturation, 0, 1), lightness


def image_features(png: bytes) -> dict:
    """The statistics of one painting (a dict of floats plus the hue histogram)."""
    full = load_rgb(png)
    background = background_colour(full)
    rgb = _resize(full)
    distance = np.sqrt((((rgb * 255) - background) ** 2).sum(axis=-1))
    painted = distance > PAINT_DISTANCE
    coverage = float(painted.mean())
    hue, saturation, lightness = _hsl(rgb)

    grey = rgb.mean(axis=-1)
    gy, gx = np.gradient(grey)
    gradient = np.hypot(gx, gy)
    edges = gradient > 0.02
    hard_edge_share = float((gradient > 0.12).sum() / max(1, edges.sum()))

    # Fine-scale variation: the residual after a 3x3 box blur, inside the paint only.
    padded = np.pad(grey, 1, mode="edge")
    blurred = sum(padded[dy:dy + ANALYSIS_SIZE, dx:dx + ANALYSIS_SIZE] for dy in range(3) for dx in range(3)) / 9
    residual = np.abs(grey - blurred)
    texture = float(residual[painted].mean()) if painted.any() else 0.0

    if painted.any():
        paint_sat, paint_light = saturation[painted], lightness[painted]
        quantised = (rgb[painted] * 7).round().astype(np.int32)
        keys = quantised[:, 0] * 64 + quantised[:, 1] * 8 + quantised[:, 2]
        counts = np.bincount(keys, minlength=512)
        # tones that hold at least 0.5% of the paint, on a log scale, normalised to [0, 1]
        tone_count = float(np.log1p((counts > 0.005 * painted.sum()).sum()) / np.log1p(512))
        weights = paint_sat + 1e-3
        histogram, _ = np.histogram(hue[painted], bins=HUE_BINS, range=(0, 1), weights=weights)
        histogram = histogram / max(histogram.sum(), 1e-9)
        saturation_mean, saturation_std = float(paint_sat.mean()), float(paint_sat.std())
        lightness_std = float(paint_light.std())
    else:
        tone_count = saturation_mean = saturation_std = lightness_std = 0.0
        histogram = np.zeros(HUE_BINS)
    return {
        "coverage": coverage,
        "saturation_mean": saturation_mean,
        "saturation_std": saturation_std,
        "lightness_std": lightness_std,
        "edge_mean": float(gradient[painted].mean()) if painted.any() else 0.0,
        "hard_edge_share": hard_edge_share,
        "texture": texture,
        "tone_count": tone_count,
        "hue_histogram": histogram.tolist(),
    }


@dataclass
class StyleProfile:
    """The love tier, summarised: per-feature mean and spread, and the mean hue histogram."""

    mean: dict[str, float]
    spread: dict[str, float]
    hue_histogram: list[float]
    n_images: int
    sources: list[str] = field(default_factory=list)

    @classmethod
    def from_pngs(cls, pngs: list[bytes], sources: list[str] | None = None) -> "StyleProfile":
        if not pngs:
            raise ValueError("a style profile needs at least one `love` painting")
        features = [image_features(png) for png in pngs]
        mean = {k: float(np.mean([f[k] for f in features])) for k in SCALAR_FEATURES}
        spread = {k: max(float(np.std([f[k] for f in features])), MIN_SPREAD[k]) for k in SCALAR_FEATURES}
        histogram = np.mean([f["hue_histogram"] for f in features], axis=0)
        return cls(mean, spread, histogram.tolist(), len(pngs), list(sources or []))

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=1)

    @classmethod
    def from_json(cls, text: str) -> "StyleProfile":
        return cls(**json.loads(text))


def style_score(png: bytes, profile: StyleProfile) -> float:
    """Similarity in [0, 1] of one painting to the profile; 1 = typical of the love tier."""
    features = image_features(png)
    z = np.array([(features[k] - profile.mean[k]) / profile.spread[k] for k in SCALAR_FEATURES])
    statistics_similarity = float(np.exp(-0.5 * np.mean(z ** 2)))
    palette_overlap = float(np.minimum(features["hue_histogram"], profile.hue_histogram).sum())
    if features["coverage"] == 0.0:
        return 0.0  # blank paper: nothing to compare
    return (1 - PALETTE_WEIGHT) * statistics_similarity + PALETTE_WEIGHT * palette_overlap


class StyleScorer:
    """Scores paintings against a pool's love tier; builds the profile once."""

    def __init__(self, profile: StyleProfile):
        self.profile = profile

    @classmethod
    def from_pool_dir(cls, pool_dir: str | Path) -> "StyleScorer":
        pool = ReferencePool.load(pool_dir)
        love = pool.entries(tier="love")
        return cls(StyleProfile.from_pngs([pool.png(e) for e in love], [e.file for e in love]))

    def score(self, png: bytes | None) -> float | None:
        """None when there is no image to score (the painting failed to render)."""
        if not png:
            return None
        try:
            return style_score(png, self.profile)
        except (OSError, ValueError):
            return None
