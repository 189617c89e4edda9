"""From ordered verdicts to a painting's score, and the backend-neutral judge that asks for them.

For every reference the judge is asked twice, once with the candidate as painting A and once as
painting B, because vision-language judges prefer one position; asking both orders cancels that
bias. A win in both orders scores 1, a split 0.5, a loss in both 0. The painting's score is the
mean over the references that resolved (both orders answered with a readable verdict); with
fewer than half of them resolved the score is ``None`` and the rollout is dropped, never scored 0.

A judge runs its work on a private event-loop thread, so ``score`` (async, from any loop) and
``score_sync`` (from plain code such as a reward function) share one backend, one concurrency
limit and one cache.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from env.portal import Portal
from rewards.judge.cache import VerdictCache, _sha256, verdict_cache_key
from rewards.judge.verdict import OrderVerdict, Verdict

# --------------------------------------------------------------------------------------------
# References and results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reference:
    """One painting from the reference pool; the pool module decides which ones a group faces."""

    id: str
    png: bytes


class ReferenceLike(Protocol):
    id: str
    png: bytes


@dataclass(frozen=True)
class JudgeResult:
    score: float | None
    # (reference id, that reference's score or None when it did not resolve), in input order.
    per_reference: list[tuple[str, float | None]]
    resolved: int
    # Verdict queries sent to the backend (one per order not served from the cache); HTTP
    # retries of one query are not counted again.
    requests: int
    cache_hits: int

    @property
    def reference_ids(self) -> list[str]:
        return [reference_id for reference_id, _ in self.per_reference]


# --------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------


def _candidate_share_as_a(verdict: Verdict | float) -> float:
    """How much painting A won, in [0, 1]: a hard verdict is 1 or 0, a probability is itself."""
    if isinstance(verdict, str):
        return 1.0 if verdict == "A" else 0.0
    return min(1.0, max(0.0, float(verdict)))


def pair_score(verdict_ab: Verdict | float | None, verdict_ba: Verdict | float | None) -> float | None:
    """The candidate's score against one reference from both orders.

    ``verdict_ab`` is the answer with the candidate as painting A, ``verdict_ba`` with the
    candidate as painting B. Each is 'A', 'B', P(A) as a float (probability mode) or None.
    Both won: 1, split: 0.5, both lost: 0. One missing order is unresolved (None): a single
    order carries the judge's position bias that asking both is meant to cancel.
    """
    if verdict_ab is None or verdict_ba is None:
        return None
    won_as_a = _candidate_share_as_a(verdict_ab)
    won_as_b = 1.0 - _candidate_share_as_a(verdict_ba)
    return (won_as_a + won_as_b) / 2.0


def aggregate_reference_scores(scores: Sequence[float | None]) -> float | None:
    """Mean over resolved references; None when fewer than half of them resolved."""
    resolved = [score for score in scores if score is not None]
    if not scores or 2 * len(resolved) < len(scores):
        return None
    return sum(resolved) / len(resolved)


# --------------------------------------------------------------------------------------------
# The shared judge machinery
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Query:
    """One ordered question: is ``first`` (painting A) better than ``second`` (painting B)?"""

    key: str
    first_png: bytes
    second_png: bytes


class _PairwiseJudge(ABC):
    """Scoring, caching and threading; a backend (``HttpJudge``) answers the ordered questions."""

    def __init__(self, *, model_name: str, probability_mode: bool, cache: VerdictCache | None):
        self.model_name = model_name
        self.probability_mode = probability_mode
        self.cache = cache if cache is not None else VerdictCache()
        # Started on first use: a judge that is built but never asked holds no thread.
        self._portal = Portal(type(self).__name__, start=False)
        self._closed = False

    @abstractmethod
    async def _ask_all(self, queries: list[_Query], subject: str | None) -> list[OrderVerdict | None]:
        """The backend's answers to distinct, uncached queries, in order (None: unresolved)."""

    async def _release(self) -> None:
        """Free what the backend holds on the private loop; the HTTP client overrides this."""

    async def score(
        self, candidate_png: bytes, references: Iterable[ReferenceLike], subject: str | None = None
    ) -> JudgeResult:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")
        work = self._portal.submit(self._score(candidate_png, list(references), subject))
        return await asyncio.wrap_future(work)

    def score_sync(
        self, candidate_png: bytes, references: Iterable[ReferenceLike], subject: str | None = None
    ) -> JudgeResult:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")
        if self._portal.on_loop_thread():
            raise RuntimeError("score_sync called from the judge's own loop; await score() instead")
        return self._portal.call(self._score(candidate_png, list(references), subject))

    async def _score(self, candidate_png: bytes, references: list[ReferenceLike], subject: str | None) -> JudgeResult:
        candidate_hash = _sha256(candidate_png)
        ordered: list[tuple[_Query, _Query]] = []
        for reference in references:
            reference_hash = _sha256(reference.png)
            key_ab, key_ba = (
                verdict_cache_key(
                    first, second, model=self.model_name, subject=subject, probability_mode=self.probability_mode
                )
                for first, second in ((candidate_hash, reference_hash), (reference_hash, candidate_hash))
            )
            ordered.append(
                (_Query(key_ab, candidate_png, reference.png), _Query(key_ba, reference.png, candidate_png))
            )

        answers: dict[str, OrderVerdict | None] = {}
        to_ask: dict[str, _Query] = {}
        cache_hits = 0
        for pair in ordered:
            for query in pair:
                cached = self.cache.get(query.key)
                if cached is not None:
                    answers[query.key] = cached
                    cache_hits += 1
                elif query.key not in to_ask:
                    # The same ordered question twice in one call (a reference identical to the
                    # candidate, or listed twice) is asked once.
                    to_ask[query.key] = query

        queries = list(to_ask.values())
        for query, answer in zip(queries, await self._ask_all(queries, subject)):
            answers[query.key] = answer
            if answer is not None:
                self.cache.put(query.key, answer)

        per_reference: list[tuple[str, float | None]] = []
        for reference, (query_ab, query_ba) in zip(references, ordered):
            verdict_ab, verdict_ba = answers.get(query_ab.key), answers.get(query_ba.key)
            per_reference.append(
                (
                    reference.id,
                    pair_score(
                        verdict_ab.value() if verdict_ab else None,
                        verdict_ba.value() if verdict_ba else None,
                    ),
                )
            )
        scores = [score for _, score in per_reference]
        return JudgeResult(
            score=aggregate_reference_scores(scores),
            per_reference=per_reference,
            resolved=sum(score is not None for score in scores),
            requests=len(queries),
            cache_hits=cache_hits,
        )

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._portal.started:
            try:
                await asyncio.wrap_future(self._portal.submit(self._release()))
            finally:
                await asyncio.to_thread(self._portal.close)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._portal.started:
            try:
                self._portal.call(self._release())
            finally:
                self._portal.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.aclose()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
