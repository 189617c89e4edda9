"""Rank statistics shared by `replay --rescore` (do two rewards agree?) and `pool judge-check`
(does the judge agree with itself?). No scipy: two small functions do not justify the dependency."""

from __future__ import annotations

from typing import Sequence


def ranks(values: Sequence[float]) -> list[float]:
    """Ranks from 1, ties sharing their average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    result = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for i in order[start:end + 1]:
            result[i] = (start + end) / 2 + 1
        start = end + 1
    return result


def spearman(first: Sequence[float], second: Sequence[float]) -> float | None:
    """Spearman's rank correlation (Pearson on tie-averaged ranks); None when undefined."""
    if len(first) != len(second) or len(first) < 2:
        return None
    ra, rb = ranks(first), ranks(second)
    mean_a, mean_b = sum(ra) / len(ra), sum(rb) / len(rb)
    covariance = sum((x - mean_a) * (y - mean_b) for x, y in zip(ra, rb))
    spread_a = sum((x - mean_a) ** 2 for x in ra)
    spread_b = sum((y - mean_b) ** 2 for y in rb)
    if spread_a == 0 or spread_b == 0:
        return None
    return covariance / (spread_a * spread_b) ** 0.5
