"""The OpenEnv server for watercolour episodes (WebSocket sessions at ``/ws``).

``create_app`` wires ``WatercolourEnvironment`` into openenv's FastAPI app: every WebSocket
connection gets its own episode state, and all of them share one renderer. ``serve`` runs
it under uvicorn, bound to 127.0.0.1 unless told otherwise, because the server renders
arbitrary code sent to it.

The module attribute ``app`` (for ``uvicorn env.server:app`` and ``openenv.yaml``) is built
on first access from ``WATERCOLOUR_*`` environment variables, so importing this module
starts nothing.

The stateless HTTP routes (``POST /reset``, ``POST /step``) build a fresh environment per
request, as openenv does for every environment, so an episode needs the WebSocket.
"""

from __future__ import annotations

import asyncio
import functools
import os
from typing import Any, Optional, Union

from openenv.core.env_server.http_server import create_app as create_openenv_app

from env.contract import SketchContract
from env.core import SketchEvaluator
from env.environment import ENVIRONMENT_NAME, SharedEvaluator, WatercolourEnvironment
from env.models import WatercolourAction, WatercolourObservation, WatercolourState
from env.renderer import BACKENDS, DEFAULT_BACKEND
from env.security import (DEFAULT_MAX_BODY_BYTES, DEFAULT_WS_MAX_BYTES, TokenGuard, require_token_off_loopback,
                          resolve_token)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
# Sessions only hold episode state; renders queue in the shared pool, so the session cap
# bounds open connections (a trainer opens one per rollout), not browser processes.
DEFAULT_MAX_SESSIONS = 64
DEFAULT_DEADLINE_S = 90.0


def create_app(
    evaluator: Optional[Union[SketchEvaluator, SharedEvaluator]] = None,
    *,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    backend: str = DEFAULT_BACKEND,
    deadline_s: float = DEFAULT_DEADLINE_S,
    renderers: Optional[int] = None,
    pixel_density: float = 1.0,
    contract: Optional[SketchContract] = None,
    token: Optional[str] = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
):
    """Build the FastAPI app.

    With ``evaluator`` given, every session renders through it and the caller owns it
    (``backend``, ``deadline_s``, ``renderers``, ``pixel_density`` and ``contract`` are then
    unused). Without one, the app creates a shared evaluator on the first step and closes
    it when the app shuts down. With ``token`` every request and WebSocket handshake must
    carry it (``env/security.py``); HTTP bodies are capped at ``max_body_bytes`` either way.
    The result is the FastAPI app wrapped in that guard (``.app`` is the FastAPI app).
    """
    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
        raise ValueError(f"max_sessions must be a positive integer, got {max_sessions!r}")
    owned: Optional[SharedEvaluator] = None
    if evaluator is None:
        # Checked here rather than at the first render, where it would surface as an
        # infrastructure error in the middle of someone's training run.
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose from {sorted(BACKENDS)}")
        if deadline_s <= 0:
            raise ValueError(f"deadline_s must be positive, got {deadline_s!r}")
        owned = SharedEvaluator(
            contract=contract,
            renderers=renderers,
            backend=backend,
            deadline_s=deadline_s,
            pixel_density=pixel_density,
        )
        evaluator = owned

    # A partial (not a lambda) lets openenv see the class and its SUPPORTS_CONCURRENT_SESSIONS
    # flag without constructing a throwaway environment.
    environment_factory = functools.partial(WatercolourEnvironment, evaluator=evaluator)
    app = create_openenv_app(
        environment_factory,
        WatercolourAction,
        WatercolourObservation,
        env_name=ENVIRONMENT_NAME,
        max_concurrent_envs=max_sessions,
        state_cls=WatercolourState,
    )
    app.state.watercolour_evaluator = evaluator

    if owned is not None:
        async def close_owned_evaluator() -> None:
            # Closing joins the renderer's loop thread; keep that off the server's loop.
            await asyncio.to_thread(owned.close)

        app.router.on_shutdown.append(close_owned_evaluator)
    return TokenGuard(app, token, max_body_bytes)


def serve(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    backend: str = DEFAULT_BACKEND,
    deadline: float = DEFAULT_DEADLINE_S,
    renderers: Optional[int] = None,
    pixel_density: float = 1.0,
    log_level: str = "info",
    token: Optional[str] = None,
) -> None:
    """Run the server in the foreground until interrupted."""
    import uvicorn

    token = resolve_token(token)
    require_token_off_loopback("serve", host, token)
    app = create_app(
        max_sessions=max_sessions,
        backend=backend,
        deadline_s=deadline,
        renderers=renderers,
        pixel_density=pixel_density,
        token=token,
    )
    uvicorn.run(app, host=host, port=port, log_level=log_level, ws_max_size=DEFAULT_WS_MAX_BYTES)


def app_from_environment():
    """The app that ``env.server:app`` names, configured by ``WATERCOLOUR_*`` variables."""
    # WATERCOLOUR_POOL_SIZE: the variable's old name, still read.
    renderers = os.environ.get("WATERCOLOUR_RENDERERS") or os.environ.get("WATERCOLOUR_POOL_SIZE")
    return create_app(
        max_sessions=int(os.environ.get("WATERCOLOUR_MAX_SESSIONS", DEFAULT_MAX_SESSIONS)),
        backend=os.environ.get("WATERCOLOUR_BACKEND", DEFAULT_BACKEND),
        deadline_s=float(os.environ.get("WATERCOLOUR_DEADLINE", DEFAULT_DEADLINE_S)),
        renderers=int(renderers) if renderers else None,
        pixel_density=float(os.environ.get("WATERCOLOUR_PIXEL_DENSITY", 1.0)),
        token=resolve_token(None),
    )


@functools.lru_cache(maxsize=1)
def _module_app():
    return app_from_environment()


def __getattr__(name: str) -> Any:
    # PEP 562: ``from env.server import app`` and uvicorn's "env.server:app" both land here.
    if name == "app":
        return _module_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
