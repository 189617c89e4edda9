"""The statistics of `watercolour eval`: means, paired differences and win rates with bootstrap
95 % intervals. Pure functions on lists of numbers (None = unscorable, left out), no I/O.

Paired figures resample episode slots, not paintings: a slot's K-turn episode and its K
independent samples share subject and seed, so the slot is the unit the comparison is
independent over. Percentile bootstrap with a fixed seed, so the same rewards always give
the same interval.
"""

from __future__ import annotations

import random
from typing import Sequence

RESAMPLES = 2000
LEVEL = 0.95


def _interval(statistic, values: list, resamples: int, level: float, seed: int) -> tuple[float, float]:
    rng = random.Random(seed)
    n = len(values)
    return _percentile_interval([statistic([values[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples)],
                                level)


def _percentile_interval(draws: list[float], level: float) -> tuple[float, float]:
    draws = sorted(draws)
    tail = (1 - level) / 2
    return draws[int(tail * (len(draws) - 1))], draws[int(round((1 - tail) * (len(draws) - 1)))]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def summary(estimate: float | None, low: float | None, high: float | None, n: int) -> dict:
    return {"estimate": estimate, "low": low, "high": high, "n": n}


def bootstrap_mean(values: Sequence[float | None], resamples: int = RESAMPLES, level: float = LEVEL,
                   seed: int = 0) -> dict:
    """Mean of the known values and its bootstrap interval ({"estimate", "low", "high", "n"})."""
    known = [float(v) for v in values if v is not None]
    if not known:
        return summary(None, None, None, 0)
    low, high = _interval(_mean, known, resamples, level, seed)
    return summary(_mean(known), low, high, len(known))


def paired(a: Sequence[float | None], b: Sequence[float | None]) -> list[tuple[float, float]]:
    """The pairs where both sides are known."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} and {len(b)}")
    return [(float(x), float(y)) for x, y in zip(a, b) if x is not None and y is not None]


def paired_difference(a: Sequence[float | None], b: Sequence[float | None], resamples: int = RESAMPLES,
                      level: float = LEVEL, seed: int = 0) -> dict:
    """Mean of a_i - b_i over the slots where both are known, with its bootstrap interval."""
    return bootstrap_mean([x - y for x, y in paired(a, b)], resamples, level, seed)


def difference_of_means(a: Sequence[float | None], b: Sequence[float | None], resamples: int = RESAMPLES,
                        level: float = LEVEL, seed: int = 0) -> dict:
    """mean(a) - mean(b) for two independent samples (each resampled on its own), with its interval.

    For figures with no pairing, such as a training run's last third of episodes against its
    first third. ``n`` is the smaller sample.
    """
    known_a = [float(v) for v in a if v is not None]
    known_b = [float(v) for v in b if v is not None]
    if not known_a or not known_b:
        return summary(None, None, None, 0)
    rng = random.Random(seed)
    low, high = _percentile_interval([_mean([known_a[rng.randrange(len(known_a))] for _ in known_a])
                                      - _mean([known_b[rng.randrange(len(known_b))] for _ in known_b])
                                      for _ in range(resamples)], level)
    return summary(_mean(known_a) - _mean(known_b), low, high, min(len(known_a), len(known_b)))


def win_rate(a: Sequence[float | None], b: Sequence[float | None], resamples: int = RESAMPLES,
             level: float = LEVEL, seed: int = 0) -> dict:
    """How often a_i beats b_i (a tie counts half), with its bootstrap interval."""
    return bootstrap_mean([1.0 if x > y else 0.5 if x == y else 0.0 for x, y in paired(a, b)], resamples, level, seed)


def best_of(samples: Sequence[float | None], k: int) -> float | None:
    """The best known reward among the first ``k`` samples (None when none of them is known)."""
    known = [s for s in samples[:k] if s is not None]
    return max(known) if known else None


def mean_of(samples: Sequence[float | None]) -> float | None:
    known = [s for s in samples if s is not None]
    return _mean(known) if known else None
