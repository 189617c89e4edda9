"""Client for the watercolour OpenEnv server (one WebSocket session per client).

Async by default; ``.sync()`` gives the blocking wrapper::

    with WatercolourEnv(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(subject="a lighthouse at dusk", seed=7, turns=3)
        result = env.step(WatercolourAction(response=model_reply))
        png = png_bytes(result.observation)
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Dict, Optional, Union

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from env.models import WatercolourAction, WatercolourObservation, WatercolourState
from env.prompts import episode_turns
from env.security import resolve_token
from env.turn import INFRASTRUCTURE_ERROR, TurnObservation

# A step waits for a render that may queue behind every other session's: realistic
# paintings take 10-42 s each on a 2-core machine, so openenv's 60 s default would time out
# perfectly healthy steps under load.
DEFAULT_MESSAGE_TIMEOUT_S = 900.0


class WatercolourEnv(EnvClient[WatercolourAction, WatercolourObservation, WatercolourState]):
    """Typed client: ``reset(subject=..., seed=..., turns=..., revision_format=...)`` and ``step(WatercolourAction)``."""

    def __init__(self, base_url: Optional[str] = None, message_timeout_s: float = DEFAULT_MESSAGE_TIMEOUT_S,
                 token: Optional[str] = None, **kwargs: Any):
        """``token``: the server's bearer token (default: ``WATERCOLOUR_TOKEN``, if set)."""
        token = resolve_token(token)
        if token:
            kwargs["headers"] = {**(kwargs.get("headers") or {}), "Authorization": f"Bearer {token}"}
        super().__init__(base_url=base_url, message_timeout_s=message_timeout_s, **kwargs)

    def _step_payload(self, action: Union[WatercolourAction, str]) -> Dict[str, Any]:
        # A bare string is accepted as the reply itself: rollout code usually has just that.
        if isinstance(action, str):
            action = WatercolourAction(response=action)
        return {"response": action.response}

    def _parse_result(self, payload: Dict[str, Any]) -> StepResult[WatercolourObservation]:
        fields = dict(payload.get("observation", {}))
        metadata = payload.get("metadata") or fields.get("metadata") or {}
        fields.update(done=payload.get("done", False), reward=payload.get("reward"), metadata=metadata)
        observation = WatercolourObservation.model_validate(fields)
        return StepResult(
            observation=observation,
            reward=observation.reward,
            done=observation.done,
            metadata=metadata,
        )

    def _parse_state(self, payload: Dict[str, Any]) -> WatercolourState:
        return WatercolourState.model_validate(payload)


def png_bytes(observation: WatercolourObservation) -> Optional[bytes]:
    """The observation's painting as PNG bytes, or None when the turn rendered nothing."""
    encoded = observation.image_png_base64
    if encoded is None:
        return None
    try:
        data = base64.b64decode(encoded, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"image_png_base64 is not valid base64: {exc}") from None
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError("image_png_base64 does not hold a PNG")
    return data


def infrastructure_failed(observation: WatercolourObservation) -> bool:
    """True when the renderer (not the sketch) failed this turn: drop the rollout."""
    return bool(observation.metadata.get("infrastructure_failed")) or INFRASTRUCTURE_ERROR in observation.violations


def turn_from_wire(observation: WatercolourObservation) -> TurnObservation:
    """The record ``env.turn.turn_observation`` made on the server, back from its wire form."""
    metadata = observation.metadata
    infrastructure_error = metadata.get("infrastructure_error")
    if infrastructure_error is None and infrastructure_failed(observation):
        # A server that flagged the failure without its reason: the record still has to say it failed.
        infrastructure_error = INFRASTRUCTURE_ERROR
    return TurnObservation(
        turn=observation.turn, turns=episode_turns(observation.turn, observation.turns_left),
        code=observation.code, show_code=observation.show_code, png=png_bytes(observation),
        passed=observation.passed, violations=list(observation.violations), errors=list(observation.errors),
        paint_fraction=observation.paint_fraction, render_ms=observation.render_ms, feedback=observation.feedback,
        infrastructure_error=infrastructure_error, rendered=bool(metadata.get("rendered")),
        details=list(metadata.get("details") or []), stats=dict(metadata.get("stats") or {}),
    )
