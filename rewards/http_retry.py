"""One retry schedule for every remote scorer (the pairwise judge and the HPSv3 server).

Retry what a busy server says is temporary (408, 429, 5xx, timeouts, dropped connections)
with exponential backoff, full jitter and ``Retry-After``; stop at once, and loudly, on
what retrying cannot fix (401/402/403: the token or the bill). Anything else that fails
is ``None`` for the caller: the rollout is dropped, never scored 0.0.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from dataclasses import dataclass

import httpx

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
FATAL_STATUS = frozenset({401, 402, 403})


class FatalScorerError(RuntimeError):
    """A remote scorer refused us for a reason retrying cannot fix: stop the run."""


@dataclass(frozen=True)
class RetrySchedule:
    max_attempts: int = 5
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    # Retry-After beyond this is not waited for: the request counts as failed (None).
    max_retry_after_s: float = 120.0

    def backoff(self, attempt: int, rng: random.Random | None = None) -> float:
        """Full jitter: uniform in [0, min(max, base * 2**attempt)]."""
        ceiling = min(self.max_delay_s, self.base_delay_s * (2 ** attempt))
        return (rng or random).uniform(0, ceiling)


def retry_after_seconds(response: httpx.Response, now: float | None = None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP date), or None."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (now if now is not None else time.time()))


def fatal_message(service: str, response: httpx.Response) -> str:
    hints = {
        401: "the token was refused: set HF_TOKEN (or the config's token) to a valid token",
        402: "payment required: the provider's credit is used up",
        403: "forbidden: the token lacks access to this model or endpoint",
    }
    body = response.text[:300].replace("\n", " ")
    return f"{service} answered {response.status_code} ({hints.get(response.status_code, 'refused')}): {body}"


async def request_with_retries(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    service: str,
    retries: RetrySchedule = RetrySchedule(),
    rng: random.Random | None = None,
    sleep=asyncio.sleep,
    failures: list[str] | None = None,
    **kwargs,
) -> httpx.Response | None:
    """The successful response, or None once retries are spent. Raises FatalScorerError.
    ``failures``, when given, collects why each failed attempt failed (for the caller's message)."""
    def failed(why: str) -> None:
        if failures is not None:
            failures.append(why)

    for attempt in range(retries.max_attempts):
        last_try = attempt == retries.max_attempts - 1
        try:
            response = await client.request(method, url, **kwargs)
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            failed(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            if last_try:
                return None
            await sleep(retries.backoff(attempt, rng))
            continue
        if response.status_code in FATAL_STATUS:
            raise FatalScorerError(fatal_message(service, response))
        if response.is_success:
            return response
        failed(f"HTTP {response.status_code}: {response.text[:200].strip()}")
        if response.status_code not in RETRYABLE_STATUS or last_try:
            return None
        delay = retry_after_seconds(response)
        if delay is not None and delay > retries.max_retry_after_s:
            return None
        await sleep(delay if delay is not None else retries.backoff(attempt, rng))
    return None
