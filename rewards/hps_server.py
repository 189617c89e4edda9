"""A small HTTP scorer for HPSv3, so the 7B reward model can live on its own GPU box.

``POST /score``  body ``{"images": [base64 PNG, ...], "prompts": [str, ...]?, "prompt": str?, "subject": str?}``
                 answer ``{"scores": [float|null], "raw": [[mu, log_sigma]|null], "position_mode", "score_temperature"}``
``GET /health``  answer ``{"status": "ok", ...}``

Prompts: per image from ``prompts``, else ``prompt``, else built from ``subject`` with the scorer's
prompt template, else the scorer's default prompt. ``/health`` needs no token (liveness probes). Failures are HTTP errors, never scores: 400 undecodable image,
401 missing/wrong bearer token, 413 body too large, 422 malformed body, 500 scoring failed.
A non-finite model output is ``null`` for that image. Binds 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import base64
import binascii
import logging
import math
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError

from env.security import TokenGuard, require_token_off_loopback

# rewards.hpsv3 (torch, transformers) is imported where it is used, so that
# `watercolour hps-serve --help` answers without loading torch.
if TYPE_CHECKING:
    from rewards.hpsv3 import HPSv3Config

logger = logging.getLogger(__name__)

DEFAULT_PORT = 8010
# 64 final paintings of ~1 MB each as base64, with room to spare.
DEFAULT_MAX_REQUEST_BYTES = 96 * 1024 * 1024
DEFAULT_MAX_IMAGES = 64
TOKEN_ENV = "HPSV3_SERVER_TOKEN"


class ScoreRequest(BaseModel):
    images: list[str] = Field(min_length=1)
    prompts: list[str | None] | None = None  # one per image
    prompt: str | None = None  # for every image without its own
    subject: str | None = None  # turned into a prompt by the scorer's template


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def create_hps_app(
    scorer,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    token: str | None = None,
    max_images: int = DEFAULT_MAX_IMAGES,
) -> TokenGuard:
    """``scorer`` needs ``score(pngs, prompts) -> [HPSv3Score]`` and a ``config`` with
    ``prompt_for_subject``, ``position_mode`` and ``score_temperature`` (an ``HPSv3Scorer``).

    The app comes wrapped in the env server's ``TokenGuard``: the bearer token (``/health``
    stays open) and the request-size limit are checked before a body is read."""
    from rewards.hpsv3 import InvalidImageError

    app = FastAPI(title="HPSv3 scorer", docs_url=None, redoc_url=None, openapi_url=None)
    config = scorer.config
    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "position_mode": config.position_mode,
            "score_temperature": config.score_temperature,
            "max_images": max_images,
        }

    @app.post("/score")
    async def score(request: Request):
        try:
            payload = ScoreRequest.model_validate_json(await request.body())
        except ValidationError as exc:
            return JSONResponse({"error": "malformed request", "detail": exc.errors(include_url=False)}, status_code=422)
        count = len(payload.images)
        if count > max_images:
            return JSONResponse({"error": f"at most {max_images} images per request, got {count}"}, status_code=413)
        if payload.prompts is not None and len(payload.prompts) != count:
            return JSONResponse({"error": f"{count} images but {len(payload.prompts)} prompts"}, status_code=422)
        try:
            pngs = [base64.b64decode(item, validate=True) for item in payload.images]
        except (binascii.Error, ValueError):
            return JSONResponse({"error": "images must be base64"}, status_code=400)
        fallback = payload.prompt or config.prompt_for_subject(payload.subject)
        prompts = [prompt or fallback for prompt in payload.prompts] if payload.prompts else [fallback] * count

        try:
            results = await run_in_threadpool(scorer.score, pngs, prompts)
        except InvalidImageError as exc:  # the caller's input, not our failure: no point retrying
            return JSONResponse({"error": f"bad image: {exc}"}, status_code=400)
        except Exception as exc:
            logger.exception("HPSv3 scoring failed")
            return JSONResponse({"error": f"scoring failed: {type(exc).__name__}"}, status_code=500)
        if len(results) != count:
            logger.error("scorer returned %d results for %d images", len(results), count)
            return JSONResponse({"error": "scorer returned the wrong number of results"}, status_code=500)

        raw = []
        scores = []
        for result in results:
            mu, log_sigma = _finite_or_none(result.mu), _finite_or_none(result.log_sigma)
            score_value = _finite_or_none(result.score) if mu is not None else None
            scores.append(score_value)
            raw.append([mu, log_sigma] if score_value is not None else None)
        return {
            "scores": scores,
            "raw": raw,
            "position_mode": config.position_mode,
            "score_temperature": config.score_temperature,
        }

    # An empty token would "protect" the server with the header "Bearer "; TokenGuard treats it as none.
    return TokenGuard(app, token, max_request_bytes)


def serve_hps(
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    config: HPSv3Config | None = None,
    token: str | None = None,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    max_images: int = DEFAULT_MAX_IMAGES,
) -> None:
    """Load HPSv3 from ``config`` (an ``HPSv3Config``) and serve it until interrupted."""
    import uvicorn

    from rewards.hpsv3 import HPSv3Config, HPSv3Scorer

    # Anyone who can reach an open scorer may use the GPU: elsewhere than loopback, a token.
    require_token_off_loopback("hps-serve", host, token or None)
    scorer = HPSv3Scorer(config or HPSv3Config())
    app = create_hps_app(scorer, max_request_bytes=max_request_bytes, token=token, max_images=max_images)
    uvicorn.run(app, host=host, port=port, log_level="info")


__all__ = ["ScoreRequest", "create_hps_app", "serve_hps", "DEFAULT_PORT", "DEFAULT_MAX_REQUEST_BYTES", "TOKEN_ENV"]
