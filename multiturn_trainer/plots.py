"""The project's plots, drawn with matplotlib (headless Agg backend): eval's reward by turn,
`bench learn`'s curves and `report`'s side-by-side runs. Intervals come in as the summaries
of ``evaluation_stats`` ({"estimate", "low", "high", "n"}); nothing here computes statistics."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence


def pyplot():
    """matplotlib's pyplot on the Agg backend (no display on a training machine)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def error_bar_plot(path: Path, series: Sequence[tuple[str, list[dict[str, Any]]]], title: str, xlabel: str,
                   ylabel: str) -> Path:
    """Points 1..K per series with their intervals as error bars, side by side."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    count = max(1, len(series))
    for index, (name, points) in enumerate(series):
        offset = (index - (count - 1) / 2) * 0.08
        xs, ys, lows, highs = [], [], [], []
        for k, point in enumerate(points, start=1):
            if point.get("estimate") is None:
                continue
            xs.append(k + offset)
            ys.append(point["estimate"])
            lows.append(point["estimate"] - point["low"])
            highs.append(point["high"] - point["estimate"])
        ax.errorbar(xs, ys, yerr=[lows, highs], marker="o", capsize=4, label=name)
    turns = max((len(points) for _, points in series), default=1)
    ax.set_xticks(range(1, turns + 1))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, path)


def band(ax, xs: Sequence[float], points: Sequence[dict[str, Any] | None], label: str, colour=None):
    """A line of estimates with a shaded interval band; points without an estimate are gaps."""
    import math

    ys = [math.nan if p is None or p.get("estimate") is None else p["estimate"] for p in points]
    lows = [math.nan if p is None or p.get("low") is None else p["low"] for p in points]
    highs = [math.nan if p is None or p.get("high") is None else p["high"] for p in points]
    (line,) = ax.plot(xs, ys, marker=".", label=label, color=colour)
    ax.fill_between(xs, lows, highs, alpha=0.2, color=line.get_color(), linewidth=0)
    return line


def save(fig, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    pyplot().close(fig)
    return path
