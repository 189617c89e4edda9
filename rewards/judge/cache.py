"""The verdict cache: resolved answers to ordered queries, keyed by everything the answer depends on."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict

from rewards.judge.prompt import JUDGE_PROMPT_VERSION
from rewards.judge.verdict import OrderVerdict


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
