"""Reading the judge's answer to one ordered query: the hard verdict ('A' or 'B') from its text
and, in probability mode, P(A) from the verdict token's log-probabilities."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

Verdict = Literal["A", "B"]


# --------------------------------------------------------------------------------------------
# Parsing verdicts
# --------------------------------------------------------------------------------------------

_CODE_FENCE = re.compile(r"^```[A-Za-z0-9_-]*[ \t]*\n?(.*?)\n?```$", re.DOTALL)
_THINK_BLOCK = re.compile(r"^<think>.*?</think>", re.DOTALL)


def _winner_of(value: Any) -> Verdict | None:
    if not isinstance(value, dict):
        return None
    winner = value.get("winner")
    if not isinstance(winner, str):
        return None
    winner = winner.strip().upper()
    return winner if winner in ("A", "B") else None  # type: ignore[return-value]


def _strict_json(text: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(text)
    except ValueError:
        return False, None


def parse_verdict(text: str | None) -> Verdict | None:
    """'A' or 'B' from the judge's reply, or None when the reply is not a clear verdict.

    Strict JSON first. Then, minimally: a reasoning block before the answer, a code fence
    around it, or prose around one JSON object. Several JSON verdicts that disagree, a tie,
    or anything else is None (unresolved, never a loss).
    """
    if not isinstance(text, str):
        return None
    body = text.strip()
    decoded, value = _strict_json(body)
    if decoded:
        return _winner_of(value)

    body = _THINK_BLOCK.sub("", body, count=1).strip()
    fenced = _CODE_FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    decoded, value = _strict_json(body)
    if decoded:
        return _winner_of(value)

    decoder = json.JSONDecoder()
    verdicts: list[Verdict | None] = []
    for brace in re.finditer(r"\{", body):
        try:
            value, _ = decoder.raw_decode(body, brace.start())
        except ValueError:
            continue
        if isinstance(value, dict) and "winner" in value:
            verdicts.append(_winner_of(value))
    if verdicts and verdicts[0] is not None and all(v == verdicts[0] for v in verdicts):
        return verdicts[0]
    return None


# --------------------------------------------------------------------------------------------
# Probability mode: P(A) from the verdict token's alternatives
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogprobStep:
    """One generated token, its log-probability and the most likely alternatives at that step."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


_WINNER_VALUE = re.compile(r'"winner"\s*:\s*"\s*([AaBb])(?![A-Za-z])')
# An alternative token at the verdict step names a letter if, after optional quotes and
# whitespace (tokenizers glue ' "' to the letter), it is exactly A or B and not a word.
_ALTERNATIVE_LETTER = re.compile(r'^[\s"]*([AaBb])(?![A-Za-z])')


def verdict_probability(steps: Sequence[LogprobStep]) -> float | None:
    """P(winner = A) at the verdict token, or None when the steps cannot say.

    The verdict comes first in the JSON, so the letter after ``"winner": "`` is the model's
    decision before any reason is written. Its top alternatives give the probability mass on
    A and on B (summing variants such as 'A' and ' "A'); P(A) is A's share of that mass. A
    letter missing from the top list counts as 0: it was below the listed alternatives.
    """
    if not steps:
        return None
    joined = "".join(step.token for step in steps)
    match = _WINNER_VALUE.search(joined)
    if match is None:
        return None
    letter_offset = match.start(1)
    offset = 0
    for step in steps:
        if offset <= letter_offset < offset + len(step.token):
            break
        offset += len(step.token)
    else:
        return None

    alternatives = dict(step.top)
    # Some servers list only the alternatives, not the sampled token itself.
    alternatives.setdefault(step.token, step.logprob)
    # When the letter sits inside a longer token ('": "A'), alternatives share that prefix.
    prefix = step.token[: letter_offset - offset]
    mass = {"A": 0.0, "B": 0.0}
    for token, logprob in alternatives.items():
        rest = token[len(prefix) :] if prefix and token.startswith(prefix) else token
        letter = _ALTERNATIVE_LETTER.match(rest)
        if letter is None or logprob is None or not math.isfinite(logprob):
            continue
        mass[letter.group(1).upper()] += math.exp(logprob)
    total = mass["A"] + mass["B"]
    if total <= 0.0:
        return None
    return mass["A"] / total


def _probability_consistent_with(steps: list[LogprobStep], verdict: Verdict) -> float | None:
    """P(A), unless the logprobs disagree with the parsed verdict (e.g. they found a "winner"
    inside reasoning text rather than the answer); then the hard verdict stands."""
    probability = verdict_probability(steps)
    if probability is None:
        return None
    match = _WINNER_VALUE.search("".join(step.token for step in steps))
    if match is None or match.group(1).upper() != verdict:
        return None
    return probability


# --------------------------------------------------------------------------------------------
# One ordered query's answer
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OrderVerdict:
    """The judge's answer to one ordered query: the hard verdict and, if known, P(A)."""

    winner: Verdict
    probability_a: float | None = None

    def value(self) -> Verdict | float:
        return self.probability_a if self.probability_a is not None else self.winner
