"""Who may talk to a watercolour service, and how much they may send.

The env server renders arbitrary JavaScript and the scorer spends GPU time, so both bind
127.0.0.1 by default and refuse any other address unless a token is set (``--token`` or the
``WATERCOLOUR_TOKEN`` variable). With a token, ``TokenGuard`` checks it on every HTTP request
and on every WebSocket handshake (``Authorization: Bearer …``), before a body is read or a
socket accepted; HTTP bodies over the size limit are refused from their Content-Length or,
for chunked bodies, while they are read. WebSocket messages are capped by uvicorn's ``ws_max_size``.
"""

from __future__ import annotations

import hmac
import json
import os

from env.errors import UsageError

TOKEN_ENV = "WATERCOLOUR_TOKEN"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
# A model reply is capped at 256 KiB by the wire model; a few MiB leaves room for JSON
# framing and stops a client from making the server buffer arbitrary amounts.
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
DEFAULT_WS_MAX_BYTES = 4 * 1024 * 1024
# Liveness probes (Docker, Spaces) carry no token.
OPEN_PATHS = ("/health",)


def resolve_token(token: str | None) -> str | None:
    """The explicit token, else the environment's; an empty string counts as none."""
    return (token if token is not None else os.environ.get(TOKEN_ENV)) or None


def require_token_off_loopback(service: str, host: str, token: str | None) -> None:
    if host not in LOOPBACK_HOSTS and token is None:
        raise UsageError(f"refusing to listen on {host} without a token; set --token or "
                         f"{TOKEN_ENV} (clients send 'Authorization: Bearer TOKEN'), or bind 127.0.0.1")


def bearer_ok(headers: list[tuple[bytes, bytes]], token: str) -> bool:
    supplied = next((value for name, value in headers if name.lower() == b"authorization"), b"")
    return hmac.compare_digest(supplied, f"Bearer {token}".encode())


class TokenGuard:
    """ASGI middleware: bearer token on HTTP and WebSocket, and an HTTP body size limit."""

    def __init__(self, app, token: str | None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES):
        self.app = app
        self.token = token or None
        self.max_body_bytes = max_body_bytes

    def __getattr__(self, name):
        # The wrapped FastAPI app's attributes (state, routes, …) stay reachable.
        return getattr(self.app, name)

    async def __call__(self, scope, receive, send):
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        authorised = self.token is None or scope.get("path") in OPEN_PATHS or bearer_ok(scope.get("headers", []), self.token)
        if kind == "websocket":
            if not authorised:
                # Closing before accepting makes the handshake fail with HTTP 403.
                return await send({"type": "websocket.close", "code": 1008})
            return await self.app(scope, receive, send)
        if not authorised:
            return await _json(send, 401, {"error": "missing or invalid bearer token"})
        length = next((v for k, v in scope.get("headers", []) if k.lower() == b"content-length"), None)
        if length is not None and length.isdigit():
            if int(length) > self.max_body_bytes:
                return await _json(send, 413, {"error": f"request larger than {self.max_body_bytes} bytes"})
            return await self.app(scope, receive, send)
        # No Content-Length (chunked): read at most the limit here, then hand the body on.
        # Raising from inside the app instead would surface as FastAPI's 400, not a 413.
        chunks, seen = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            seen += len(message.get("body", b""))
            if seen > self.max_body_bytes:
                return await _json(send, 413, {"error": f"request larger than {self.max_body_bytes} bytes"})
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)


async def _json(send, status: int, payload: dict) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
