"""The two cheap reward components: the gate and the length nudge."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


def gate_score(passed: bool) -> float:
    """1 when the painting passed the environment's gate, else 0."""
    return 1.0 if passed else 0.0


@dataclass(frozen=True)
class LengthRamp:
    """A soft nudge toward longer sketches, in tokens.

    0 below ``start``, linear to 1 at ``full``, 1 up to ``cliff``, 0 above it (a sketch
    that long is padding, not painting).
    """

    start: int = 150
    full: int = 3000
    cliff: int = 6000
    chars_per_token: float = 4.0

    def __post_init__(self):
        if not (0 <= self.start < self.full <= self.cliff):
            raise ValueError(f"length ramp needs 0 <= start < full <= cliff, got {self}")
        if self.chars_per_token <= 0:
            raise ValueError("chars_per_token must be positive")

    @classmethod
    def from_mapping(cls, mapping: dict[str, Any] | None) -> "LengthRamp":
        return cls(**(mapping or {}))

    def tokens(self, code: str, tokenizer: Callable[[str], list] | None = None) -> float:
        """The real tokenizer's count when one is given, else characters / chars_per_token."""
        if tokenizer is not None:
            return float(len(tokenizer(code)))
        return len(code) / self.chars_per_token

    def score_tokens(self, tokens: float) -> float:
        if tokens > self.cliff or tokens < self.start:
            return 0.0
        if tokens >= self.full:
            return 1.0
        return (tokens - self.start) / (self.full - self.start)

    def score(self, code: str | None, tokenizer: Callable[[str], list] | None = None) -> float:
        if not code:
            return 0.0
        return self.score_tokens(self.tokens(code, tokenizer))
