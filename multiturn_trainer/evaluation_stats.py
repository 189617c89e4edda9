"""The statistics of `watercolour eval`, the demo, `bench learn` and `report`: means, paired
differences and win rates with bootstrap 95 % intervals. Pure functions on lists of numbers
(None = unscorable, left out), no I/O.

Paired figures resample episode slots, not paintings: a slot's K-turn episode and its K
independent samples share subject and seed, so the slot is the unit the comparison is
independent over. The intervals are ``scipy.stats.bootstrap``'s percentile intervals with a
fixed seed, so the same rewards always give the same interval.
"""

from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95


def _percentile_bootstrap(samples: tuple[list[float], ...], statistic, resamples: int, level: float,
                          seed: int) -> tuple[float, float]:
    """scipy's percentile bootstrap of ``statistic`` over independent ``samples``. A sample of
    one value, or a constant one, has a point interval (scipy calls such data degenerate)."""
    from scipy.stats import bootstrap

    if all(len(set(s)) <= 1 for s in samples):
        value = float(statistic(*[np.asarray(s) for s in samples]))
        return value, value
    with warnings.catch_warnings():
        # One constant side of a difference is fine for the percentile method.
        warnings.simplefilter("ignore", category=RuntimeWarning)
        warnings.filterwarnings("ignore", message=".*degenerate.*")
        result = bootstrap(tuple(np.asarray(s, dtype=float) for s in samples), statistic, n_resamples=resamples,
                           confidence_level=level, method="percentile", vectorized=True, paired=False,
                           random_state=np.random.default_rng(seed))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _axis_mean(sample, axis=-1):
    return np.mean(sample, axis=axis)


def _axis_mean_difference(a, b, axis=-1):
    return np.mean(a, axis=axis) - np.mean(b, axis=axis)


def summary(estimate: float | None, low: float | None, high: float | None, n: int) -> dict:
    return {"estimate": estimate, "low": low, "high": high, "n": n}


def bootstrap_mean(values: Sequence[float | None], resamples: int = RESAMPLES, level: float = LEVEL,
                   seed: int = 0) -> dict:
    """Mean of the known values and its bootstrap interval ({"estimate", "low", "high", "n"})."""
    known = [float(v) for v in values if v is not None]
    if not known:
        return summary(None, None, None, 0)
    low, high = _percentile_bootstrap((known,), _axis_mean, resamples, level, seed)
    return summary(mean(known), low, high, len(known))


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
    low, high = _percentile_bootstrap((known_a, known_b), _axis_mean_difference, resamples, level, seed)
    return summary(mean(known_a) - mean(known_b), low, high, min(len(known_a), len(known_b)))


def win_rate(a: Sequence[float | None], b: Sequence[float | None], resamples: int = RESAMPLES,
             level: float = LEVEL, seed: int = 0) -> dict:
    """How often a_i beats b_i (a tie counts half), with its bootstrap interval."""
    return bootstrap_mean([1.0 if x > y else 0.5 if x == y else 0.0 for x, y in paired(a, b)], resamples, level, seed)


def best_of(samples: Sequence[float | None], k: int) -> float | None:
    """The best known reward among the first ``k`` samples (None when none of them is known)."""
    known = [s for s in samples[:k] if s is not None]
    return max(known) if known else None


def mean(values: Sequence[float | None]) -> float | None:
    """The project's one mean: of the known values (None = unscorable, left out); None when none is known."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def format_interval(summary: dict | None) -> str:
    """estimate(low..high), as the demo and `bench learn` lines print a bootstrap 95 % interval."""
    if summary is None or summary["estimate"] is None:
        return "nan"
    return f"{summary['estimate']:+.3f}({summary['low']:+.3f}..{summary['high']:+.3f})"


def format_tokens(values: list[float | None] | None) -> str:
    """Mean generated tokens per turn, "430/61": a revision's cost beside a first draft's."""
    return "/".join("nan" if v is None else f"{v:.0f}" for v in values or []) or "nan"
