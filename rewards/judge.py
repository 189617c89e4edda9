"""Pairwise VLM judge: is the candidate a better watercolour than each reference?

For every reference the judge is asked twice, once with the candidate as painting A and once as
painting B, because vision-language judges prefer one position; asking both orders cancels that
bias. A win in both orders scores 1, a split 0.5, a loss in both 0. The painting's score is the
mean over the references that resolved (both orders answered with a readable verdict); with
fewer than half of them resolved the score is ``None`` and the rollout is dropped, never scored 0.

``HttpJudge`` talks to any OpenAI-compatible chat-completions server (the Hugging Face router,
vLLM, ...), with retries from ``rewards.http_retry``, a concurrency limit and, optionally
(``JudgeConfig.probability_mode``), a soft P(A) from the verdict token's log-probabilities.
It runs its work on a private event-loop thread, so ``score`` (async, from any loop) and
``score_sync`` (from plain code such as a reward function) share one HTTP connection pool, one
concurrency limit and one cache.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import math
import os
import random
import re
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal, Protocol

import httpx

from env.portal import Portal
from rewards.http_retry import FatalScorerError, RetryPolicy, request_with_retries

logger = logging.getLogger(__name__)

# Part of every cache key: change it whenever the prompt's wording or answer format changes,
# so verdicts given to an older prompt are never reused.
JUDGE_PROMPT_VERSION = "watercolour-pairwise-v1"

DEFAULT_BASE_URL = "https://router.huggingface.co/v1"
DEFAULT_MODEL = "Qwen/Qwen2.5-VL-72B-Instruct"

Verdict = Literal["A", "B"]

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "FatalScorerError",
    "HttpJudge",
    "JUDGE_PROMPT_VERSION",
    "JudgeConfig",
    "JudgeResult",
    "LogprobStep",
    "OrderVerdict",
    "Reference",
    "VerdictCache",
    "aggregate_reference_scores",
    "build_judge_messages",
    "pair_score",
    "parse_verdict",
    "verdict_cache_key",
    "verdict_probability",
]


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
# The prompt
# --------------------------------------------------------------------------------------------

SYSTEM_PROMPT = (
    "You are an exacting judge of watercolour painting technique. You compare two paintings "
    "made with a digital watercolour brush and decide which one is the better watercolour."
)

CRITERIA = (
    "Judge only the watercolour technique, in this order of importance:\n"
    "1. Soft bleeds: pigment that spreads and feathers into damp paper instead of flat, "
    "hard-edged fills.\n"
    "2. Layered, translucent washes: glazes that overlap and let earlier layers and the paper "
    "glow through, building depth from light to dark.\n"
    "3. Varied edges: lost, soft and crisp edges chosen with intent, not one uniform outline.\n"
    "4. Composition: a clear focal area, balanced masses and purposeful untouched paper.\n"
    "Do not reward a painting for its subject, its colours' appeal on their own, its size, or "
    "for being shown first or second."
)

ANSWER_FORMAT = (
    'Answer with strict JSON on one line and nothing else, the verdict first: '
    '{"winner": "A", "reason": "..."} or {"winner": "B", "reason": "..."}. '
    "Keep the reason under 20 words. There are no ties: pick the better watercolour."
)

MAX_SUBJECT_CHARS = 200


def _subject_line(subject: str | None) -> str | None:
    if not subject or not subject.strip():
        return None
    # The subject comes from configs, but a newline or a very long subject would let it rewrite
    # the instructions around it.
    flat = " ".join(subject.split())[:MAX_SUBJECT_CHARS]
    return (
        f"Both paintings were asked to show: {json.dumps(flat, ensure_ascii=False)}. "
        "That is context only; judge how each is painted, not what it shows."
    )


def _judge_parts(subject: str | None) -> list[tuple[str, str | None]]:
    """The user turn as ('text', text) and ('image', 'A' | 'B') parts, backend neutral."""
    intro = "Compare painting A and painting B as watercolours."
    subject_line = _subject_line(subject)
    if subject_line:
        intro = f"{intro} {subject_line}"
    return [
        ("text", intro),
        ("text", "Painting A:"),
        ("image", "A"),
        ("text", "Painting B:"),
        ("image", "B"),
        ("text", f"{CRITERIA}\n\n{ANSWER_FORMAT}"),
    ]


def png_data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def build_judge_messages(image_a_png: bytes, image_b_png: bytes, subject: str | None = None) -> list[dict]:
    """OpenAI chat messages comparing painting A with painting B (images as base64 data URLs)."""
    images = {"A": image_a_png, "B": image_b_png}
    content: list[dict] = []
    for kind, value in _judge_parts(subject):
        if kind == "image":
            content.append({"type": "image_url", "image_url": {"url": png_data_url(images[value])}})
        else:
            content.append({"type": "text", "text": value})
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": content},
    ]


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


# --------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OrderVerdict:
    """The judge's answer to one ordered query: the hard verdict and, if known, P(A)."""

    winner: Verdict
    probability_a: float | None = None

    def value(self) -> Verdict | float:
        return self.probability_a if self.probability_a is not None else self.winner


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
# Cache
# --------------------------------------------------------------------------------------------


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def verdict_cache_key(
    first_png_sha256: str,
    second_png_sha256: str,
    *,
    model: str,
    subject: str | None,
    probability_mode: bool,
) -> str:
    """Key of one ordered query. The images' positions are part of it (the order); so are the
    model, the prompt version and the subject, which is part of the prompt text."""
    material = json.dumps(
        [JUDGE_PROMPT_VERSION, model, first_png_sha256, second_png_sha256, subject or "", probability_mode],
        ensure_ascii=True,
    )
    return _sha256(material.encode("utf-8"))


class VerdictCache:
    """A bounded, thread-safe LRU of resolved verdicts; failures are never stored, so a
    transient error is retried on the next call instead of sticking."""

    def __init__(self, max_entries: int = 100_000):
        self.max_entries = max_entries
        self._entries: OrderedDict[str, OrderVerdict] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> OrderVerdict | None:
        with self._lock:
            verdict = self._entries.get(key)
            if verdict is not None:
                self._entries.move_to_end(key)
            return verdict

    def put(self, key: str, verdict: OrderVerdict) -> None:
        with self._lock:
            self._entries[key] = verdict
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


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


async def _gather_or_cancel(coroutines: list[Awaitable]) -> list:
    """Results in order; on the first exception (a FatalScorerError) cancel the rest and raise
    it as itself, not wrapped in an ExceptionGroup, so callers can catch it by type."""
    tasks = [asyncio.ensure_future(coroutine) for coroutine in coroutines]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


# --------------------------------------------------------------------------------------------
# HTTP backend
# --------------------------------------------------------------------------------------------


@dataclass
class JudgeConfig:
    base_url: str = DEFAULT_BASE_URL
    model: str = DEFAULT_MODEL
    # None: read HF_TOKEN from the environment; no token at all sends no Authorization header
    # (a local vLLM server usually needs none).
    token: str | None = None
    timeout_s: float = 60.0
    max_concurrency: int = 8
    max_attempts: int = 5
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    max_retry_after_s: float = 120.0
    probability_mode: bool = False
    top_logprobs: int = 5
    max_tokens: int = 200
    temperature: float = 0.0
    cache_entries: int = 100_000

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> JudgeConfig:
        """From a YAML preset; unknown keys are an error, so a typo never silently falls back."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown judge config keys: {', '.join(unknown)}")
        return cls(**dict(values))

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_attempts=self.max_attempts,
            base_delay_s=self.base_delay_s,
            max_delay_s=self.max_delay_s,
            max_retry_after_s=self.max_retry_after_s,
        )

    def resolved_token(self) -> str | None:
        return self.token or os.environ.get("HF_TOKEN") or None

    def chat_completions_url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"


def _message_text(payload: Any) -> str | None:
    """The first choice's message text; servers send a string or a list of text parts."""
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [part.get("text") for part in content if isinstance(part, dict)]
        return "".join(text for text in texts if isinstance(text, str)) or None
    return None


def _logprob_steps(payload: Any) -> list[LogprobStep]:
    """Per-token log-probabilities in the OpenAI format, or [] when the server sent none."""
    try:
        content = payload["choices"][0]["logprobs"]["content"]
    except (KeyError, IndexError, TypeError):
        return []
    if not isinstance(content, list):
        return []
    steps: list[LogprobStep] = []
    for entry in content:
        if not isinstance(entry, dict) or not isinstance(entry.get("token"), str):
            return []
        top = tuple(
            (alternative["token"], float(alternative["logprob"]))
            for alternative in entry.get("top_logprobs") or []
            if isinstance(alternative, dict)
            and isinstance(alternative.get("token"), str)
            and isinstance(alternative.get("logprob"), (int, float))
        )
        logprob = entry.get("logprob")
        steps.append(
            LogprobStep(entry["token"], float(logprob) if isinstance(logprob, (int, float)) else -math.inf, top)
        )
    return steps


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


class HttpJudge(_PairwiseJudge):
    """The judge behind an OpenAI-compatible chat-completions endpoint."""

    def __init__(
        self,
        config: JudgeConfig | None = None,
        *,
        cache: VerdictCache | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        rng: random.Random | None = None,
    ):
        self.config = config or JudgeConfig()
        if self.config.max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        super().__init__(
            model_name=self.config.model,
            probability_mode=self.config.probability_mode,
            cache=cache if cache is not None else VerdictCache(self.config.cache_entries),
        )
        # Injected so tests can record backoff and Retry-After delays instead of waiting.
        self._sleep = sleep
        self._rng = rng
        self._client: httpx.AsyncClient | None = None
        self._semaphore: asyncio.Semaphore | None = None

    def _client_on_loop(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        # Created on the private loop on first use: httpx clients and semaphores belong to the
        # loop they are used on.
        if self._client is None:
            headers = {}
            token = self.config.resolved_token()
            if token:
                headers["Authorization"] = f"Bearer {token}"
            self._client = httpx.AsyncClient(
                headers=headers,
                timeout=httpx.Timeout(self.config.timeout_s),
                limits=httpx.Limits(
                    max_connections=self.config.max_concurrency,
                    max_keepalive_connections=self.config.max_concurrency,
                ),
            )
            self._semaphore = asyncio.Semaphore(self.config.max_concurrency)
        return self._client, self._semaphore

    def request_body(self, query_first_png: bytes, query_second_png: bytes, subject: str | None) -> dict:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": build_judge_messages(query_first_png, query_second_png, subject),
            "max_tokens": self.config.max_tokens,
            "temperature": self.config.temperature,
        }
        if self.config.probability_mode:
            body["logprobs"] = True
            body["top_logprobs"] = self.config.top_logprobs
        return body

    async def _ask_all(self, queries: list[_Query], subject: str | None) -> list[OrderVerdict | None]:
        return await _gather_or_cancel([self._ask(query, subject) for query in queries])

    async def _ask(self, query: _Query, subject: str | None) -> OrderVerdict | None:
        client, semaphore = self._client_on_loop()
        body = self.request_body(query.first_png, query.second_png, subject)
        # The slot is held through retries and their waits, so a server that asked us to slow
        # down never sees more than max_concurrency requests from this judge.
        async with semaphore:
            try:
                response = await request_with_retries(
                    client,
                    "POST",
                    self.config.chat_completions_url(),
                    service=f"judge {self.config.model} at {self.config.base_url}",
                    policy=self.config.retry_policy(),
                    rng=self._rng,
                    sleep=self._sleep,
                    json=body,
                )
            except FatalScorerError:
                raise
            except httpx.HTTPError as error:
                # Protocol-level failures that the retry helper does not classify: this query is
                # unresolved; a wrong URL or token still surfaces through every query failing.
                logger.warning("judge request failed: %r", error)
                return None
        if response is None:
            # Retries spent, a Retry-After too long to wait for, or a status retrying cannot fix
            # (e.g. 400 from a server that rejects a field such as logprobs).
            logger.warning("judge request to %s failed; the pair is unresolved", self.config.model)
            return None
        try:
            payload = response.json()
        except ValueError:
            logger.warning("judge answered with a body that is not JSON: %.200r", response.text)
            return None
        text = _message_text(payload)
        verdict = parse_verdict(text)
        if verdict is None:
            logger.warning("judge verdict unreadable: %.200r", text)
            return None
        probability = None
        if self.config.probability_mode:
            probability = _probability_consistent_with(_logprob_steps(payload), verdict)
        return OrderVerdict(verdict, probability)

    async def _release(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
