"""Client for the HPSv3 scorer server (``rewards/hps_server.py``).

Same failure rules as every remote scorer (``rewards/http_retry.py``): temporary trouble is retried
with backoff; 401/402/403 raise ``FatalScorerError`` (stop the run); anything else that goes wrong,
including a 200 with an answer we cannot trust, is ``None`` for the affected images, never 0.0, so
the rollout is dropped instead of being scored as bad.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import math
import random
from typing import Any, Sequence

import httpx

from rewards.http_retry import FatalScorerError, RetrySchedule, request_with_retries

SERVICE = "HPSv3 scorer"


def _as_finite_float(value: Any) -> float | None:
    # bool is an int subclass; a JSON true is not a score.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _parse_pair(value: Any) -> tuple[float, float] | None:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return None
    mu, log_sigma = _as_finite_float(value[0]), _as_finite_float(value[1])
    return None if mu is None or log_sigma is None else (mu, log_sigma)


class HPSv3Client:
    def __init__(
        self,
        base_url: str,
        timeout_s: float = 120.0,
        retries: RetrySchedule = RetrySchedule(),
        token: str | None = None,
        rng: random.Random | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.retries = retries
        self.token = token
        self.rng = rng

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    async def score_details(
        self,
        pngs: Sequence[bytes],
        prompts: Sequence[str | None] | None = None,
        subject: str | None = None,
    ) -> list[dict[str, float] | None]:
        """Per image ``{"score", "mu", "log_sigma"}`` or None. Raises FatalScorerError on 401/402/403."""
        count = len(pngs)
        if count == 0:
            return []
        if prompts is not None and len(prompts) != count:
            raise ValueError(f"{count} images but {len(prompts)} prompts")
        body: dict[str, Any] = {"images": [base64.b64encode(png).decode("ascii") for png in pngs]}
        if prompts is not None:
            body["prompts"] = list(prompts)
        if subject is not None:
            body["subject"] = subject
        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            response = await request_with_retries(
                client,
                "POST",
                f"{self.base_url}/score",
                service=SERVICE,
                retries=self.retries,
                rng=self.rng,
                json=body,
                headers=self._headers(),
            )
        if response is None:
            return [None] * count
        return self._parse(response, count)

    @staticmethod
    def _parse(response: httpx.Response, count: int) -> list[dict[str, float] | None]:
        try:
            payload = response.json()
        except ValueError:
            return [None] * count
        scores = payload.get("scores") if isinstance(payload, dict) else None
        if not isinstance(scores, list) or len(scores) != count:
            return [None] * count
        raw = payload.get("raw")
        raw = raw if isinstance(raw, list) and len(raw) == count else [None] * count
        results: list[dict[str, float] | None] = []
        for score_value, pair in zip(scores, raw):
            score_value = _as_finite_float(score_value)
            # A score outside [0, 1] cannot come from the sigmoid mapping: the server is not what we think.
            if score_value is None or not 0.0 <= score_value <= 1.0:
                results.append(None)
                continue
            parsed_pair = _parse_pair(pair)
            detail = {"score": score_value}
            if parsed_pair is not None:
                detail["mu"], detail["log_sigma"] = parsed_pair
            results.append(detail)
        return results

    async def score(
        self,
        pngs: Sequence[bytes],
        prompts: Sequence[str | None] | None = None,
        subject: str | None = None,
    ) -> list[float | None]:
        details = await self.score_details(pngs, prompts, subject)
        return [None if detail is None else detail["score"] for detail in details]

    async def health(self) -> dict[str, Any] | None:
        """The server's /health answer, or None when it cannot be reached or answers oddly."""
        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            response = await request_with_retries(
                client, "GET", f"{self.base_url}/health", service=SERVICE, retries=self.retries, rng=self.rng,
                headers=self._headers(),
            )
        if response is None:
            return None
        try:
            payload = response.json()
        except ValueError:
            return None
        return payload if isinstance(payload, dict) else None

    def score_sync(
        self,
        pngs: Sequence[bytes],
        prompts: Sequence[str | None] | None = None,
        subject: str | None = None,
    ) -> list[float | None]:
        """Blocking ``score``; safe to call from code that already runs an event loop (uses a worker thread)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.score(pngs, prompts, subject))
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, self.score(pngs, prompts, subject)).result()


__all__ = ["HPSv3Client", "FatalScorerError", "RetrySchedule", "SERVICE"]
