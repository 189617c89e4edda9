"""A real, scriptable OpenAI-compatible chat-completions server on 127.0.0.1 for tests.

It listens on a free port in a background thread (stdlib ``ThreadingHTTPServer``: starts in
milliseconds, one thread per connection, so concurrent requests really overlap) and answers
``POST /v1/chat/completions``. Each request is answered by the next scripted reply in the
queue, or, when the queue is empty, by ``rule(request)``. Every request is recorded with its
headers, JSON body and the SHA-256 of each image it carried, in order, so tests can assert on
the bearer token, the model name and which painting was shown as A or B.

    with FakeOpenAIServer(rule=prefer_image(candidate_png)) as server:
        server.enqueue(FakeReply.error(500))          # the first request fails, then the rule
        judge = HttpJudge(JudgeConfig(base_url=server.base_url, ...))

Other test files can use the ``fake_openai_server`` fixture by importing it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

CHAT_COMPLETIONS_PATH = "/v1/chat/completions"
_DATA_URL = re.compile(r"^data:image/[A-Za-z0-9.+-]+;base64,(.*)$", re.DOTALL)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    raw_body: bytes
    body: Any  # the decoded JSON, or None when the body was not JSON
    image_urls: list[str] = field(default_factory=list)
    image_hashes: list[str] = field(default_factory=list)  # sha256 of each decoded image, in order

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def bearer_token(self) -> str | None:
        value = self.headers.get("authorization", "")
        return value[len("Bearer ") :] if value.startswith("Bearer ") else None

    @property
    def text(self) -> str:
        """All text parts of all messages, joined: for asserting on the prompt."""
        parts: list[str] = []
        for message in self.body.get("messages", []) if isinstance(self.body, dict) else []:
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        return "\n".join(parts)


def _images_in(body: Any) -> tuple[list[str], list[str]]:
    urls: list[str] = []
    hashes: list[str] = []
    if not isinstance(body, dict):
        return urls, hashes
    for message in body.get("messages", []):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "image_url":
                continue
            url = (part.get("image_url") or {}).get("url", "")
            urls.append(url)
            match = _DATA_URL.match(url)
            try:
                hashes.append(sha256_hex(base64.b64decode(match.group(1), validate=True)) if match else "")
            except ValueError:
                hashes.append("")
    return urls, hashes


def chat_completion(content: Any, *, model: str = "fake-judge", logprobs: list[dict] | None = None) -> dict:
    """An OpenAI chat-completion body with one choice (``content``: a string, a list of parts or None)."""
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": content},
        "finish_reason": "stop",
    }
    if logprobs is not None:
        choice["logprobs"] = {"content": logprobs}
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [choice],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def verdict_logprobs(winner: str, probability_a: float, reason: str = "soft layered washes") -> list[dict]:
    """Token log-probabilities for a verdict the way chat servers split it: the letter is glued
    to its opening quote (' "A'), and the alternatives at that step carry P(A) and P(B)."""
    letter_token = f' "{winner}'
    other = "B" if winner == "A" else "A"
    probability = {"A": probability_a, "B": 1.0 - probability_a}
    leftover = 1e-4  # a little mass on an unrelated token, as real top lists have

    def lp(p: float) -> float:
        return math.log(max(p, 1e-12))

    tokens = ['{"', "winner", '":', letter_token, '",', ' "', "reason", '":', f' "{reason}', '"}']
    content = []
    for token in tokens:
        top = [{"token": token, "logprob": 0.0}]
        logprob = 0.0
        if token == letter_token:
            logprob = lp(probability[winner])
            top = [
                {"token": letter_token, "logprob": logprob},
                {"token": f' "{other}', "logprob": lp(probability[other])},
                {"token": ' "The', "logprob": lp(leftover)},
            ]
        content.append({"token": token, "logprob": logprob, "top_logprobs": top})
    return content


@dataclass
class FakeReply:
    """One scripted answer: status, body, headers, and how long to wait before sending it."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0

    @classmethod
    def json(cls, payload: Any, status: int = 200, delay_s: float = 0.0, headers: dict | None = None) -> FakeReply:
        return cls(
            status,
            json.dumps(payload).encode(),
            {"Content-Type": "application/json", **(headers or {})},
            delay_s,
        )

    @classmethod
    def content(cls, text: str, *, delay_s: float = 0.0, logprobs: list[dict] | None = None) -> FakeReply:
        """A successful completion whose message is ``text`` (a verdict, or garbage)."""
        return cls.json(chat_completion(text, logprobs=logprobs), delay_s=delay_s)

    @classmethod
    def verdict(
        cls,
        winner: str,
        reason: str = "softer bleeds and layered washes",
        *,
        probability_a: float | None = None,
        delay_s: float = 0.0,
    ) -> FakeReply:
        """A strict-JSON verdict; with ``probability_a`` it also carries token logprobs."""
        text = json.dumps({"winner": winner, "reason": reason})
        logprobs = verdict_logprobs(winner, probability_a, reason) if probability_a is not None else None
        return cls.content(text, delay_s=delay_s, logprobs=logprobs)

    @classmethod
    def error(cls, status: int, *, retry_after: str | float | None = None, message: str = "") -> FakeReply:
        headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
        payload = {"error": {"message": message or f"fake error {status}", "code": status}}
        return cls.json(payload, status=status, headers=headers)

    @classmethod
    def raw(cls, body: bytes | str, *, status: int = 200, content_type: str = "text/plain") -> FakeReply:
        """A body that need not be JSON at all."""
        data = body.encode() if isinstance(body, str) else body
        return cls(status, data, {"Content-Type": content_type})


Rule = Callable[[RecordedRequest], FakeReply]


def always(winner: str, **verdict_kwargs) -> Rule:
    """Always the same position: a judge with pure position bias (splits every pair)."""
    return lambda request: FakeReply.verdict(winner, **verdict_kwargs)


def prefer_image(*preferred_pngs: bytes, otherwise: str = "A", **verdict_kwargs) -> Rule:
    """Pick whichever position shows one of the preferred images; ``otherwise`` when both or
    neither do."""
    preferred = {sha256_hex(png) for png in preferred_pngs}

    def rule(request: RecordedRequest) -> FakeReply:
        shown = [digest in preferred for digest in request.image_hashes[:2]]
        if shown == [True, False]:
            return FakeReply.verdict("A", **verdict_kwargs)
        if shown == [False, True]:
            return FakeReply.verdict("B", **verdict_kwargs)
        return FakeReply.verdict(otherwise, **verdict_kwargs)

    return rule


def shows_image(request: RecordedRequest, png: bytes) -> bool:
    return sha256_hex(png) in request.image_hashes


class FakeOpenAIServer:
    def __init__(self, rule: Rule | None = None, *, host: str = "127.0.0.1"):
        self.rule: Rule = rule or always("A")
        self.requests: list[RecordedRequest] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._queue: deque[FakeReply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer((host, 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """What a client's ``base_url`` should be (the OpenAI convention ends in /v1)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def enqueue(self, *replies: FakeReply) -> None:
        """Replies served, in order, before the rule answers again."""
        with self._lock:
            self._queue.extend(replies)

    def chat_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path == CHAT_COMPLETIONS_PATH]

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._queue.clear()
            self.max_in_flight = 0

    def start(self) -> FakeOpenAIServer:
        # A short poll keeps stop() quick: shutdown() waits for the serve loop to notice.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        # Wakes handlers that are sleeping through a scripted delay, so shutdown is immediate.
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _answer(self, request: RecordedRequest) -> FakeReply:
        with self._lock:
            self.requests.append(request)
            scripted = self._queue.popleft() if self._queue else None
        if request.method != "POST" or request.path != CHAT_COMPLETIONS_PATH:
            return FakeReply.error(404, message=f"no route {request.method} {request.path}")
        return scripted if scripted is not None else self.rule(request)

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers and httpx pools expect
            timeout = 10  # idle keep-alive connections end on their own after the test

            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:
                self._handle()

            def do_POST(self) -> None:
                self._handle()

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                urls, hashes = _images_in(body)
                request = RecordedRequest(
                    method=self.command,
                    path=self.path.split("?", 1)[0],
                    headers={name.lower(): value for name, value in self.headers.items()},
                    raw_body=raw,
                    body=body,
                    image_urls=urls,
                    image_hashes=hashes,
                )
                with server._lock:
                    server._in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server._in_flight)
                try:
                    reply = server._answer(request)
                    if reply.delay_s and server._stopping.wait(reply.delay_s):
                        return
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    # The client gave up (its timeout fired) while we were still "thinking".
                    self.close_connection = True
                finally:
                    with server._lock:
                        server._in_flight -= 1

        return Handler


@pytest.fixture
def fake_openai_server():
    """A started FakeOpenAIServer; set ``.rule`` or ``.enqueue(...)`` in the test."""
    with FakeOpenAIServer() as server:
        yield server


__all__ = [
    "CHAT_COMPLETIONS_PATH",
    "FakeOpenAIServer",
    "FakeReply",
    "RecordedRequest",
    "Rule",
    "always",
    "chat_completion",
    "fake_openai_server",
    "prefer_image",
    "sha256_hex",
    "shows_image",
    "verdict_logprobs",
]
