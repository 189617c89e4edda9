"""``HttpJudge``: the pairwise judge behind any OpenAI-compatible chat-completions server (the
Hugging Face router, vLLM, ...), with retries from ``rewards.http_retry``, a concurrency limit
and, optionally (``JudgeConfig.probability_mode``), a soft P(A) from the verdict token's
log-probabilities. Its ``score`` and ``score_sync`` share one HTTP connection pool, one
concurrency limit and one cache.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import httpx

from rewards.http_retry import FatalScorerError, RetrySchedule, request_with_retries
from rewards.judge.cache import VerdictCache
from rewards.judge.prompt import build_judge_messages
from rewards.judge.scoring import _PairwiseJudge, _Query
from rewards.judge.verdict import LogprobStep, OrderVerdict, _probability_consistent_with, parse_verdict

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://router.huggingface.co/v1"
DEFAULT_MODEL = "Qwen/Qwen2.5-VL-72B-Instruct"


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

    def retry_schedule(self) -> RetrySchedule:
        return RetrySchedule(
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
                    retries=self.config.retry_schedule(),
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
