"""One turn, one observation: what a ``SketchOutcome`` means to the episode it belongs to.

``turn_observation`` is the one place where a turn's verdict, its painting and the feedback
the model reads next are put together. The OpenEnv server turns the record into its wire
observation (``env.environment``), the trainer's in-process environments hand it to the
rollout as it is, and the warm start shows its feedback in its revision examples, so every
path reports a turn the same way. ``infrastructure_outcome`` is the outcome of a turn whose
renderer broke (an evaluator that raised, a remote session that is gone): never the
sketch's fault, so the rollout is dropped rather than scored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from env.contract import SketchContract
from env.core import SketchOutcome
from env.feedback import feedback_text
from env.text import safe_text

INFRASTRUCTURE_ERROR = "infrastructure_error"


@dataclass(kw_only=True)
class TurnObservation:
    """What one turn of one episode produced; the fields of an episode record's turn.

    ``infrastructure_failed``: the renderer, not the sketch, failed this turn (then
    ``passed`` is False, ``violations`` holds ``infrastructure_error`` and ``errors`` the
    reason); the rollout is dropped, never scored.
    """

    turn: int
    turns_left: int = 0
    code: str | None
    png: bytes | None
    passed: bool
    violations: list[str]
    errors: list[str]
    paint_fraction: float
    render_ms: int
    feedback: str
    infrastructure_failed: bool = False
    infrastructure_error: str | None = None
    rendered: bool = False
    details: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)


def turn_observation(outcome: SketchOutcome, turn: int, turns: int,
                     contract: SketchContract | None = None) -> TurnObservation:
    """The record of turn ``turn`` (1-based) of a ``turns``-turn episode that produced ``outcome``."""
    infrastructure_failed = outcome.infrastructure_error is not None
    violations = list(outcome.violations)
    errors = list(outcome.errors)
    if infrastructure_failed:
        if INFRASTRUCTURE_ERROR not in violations:
            violations.append(INFRASTRUCTURE_ERROR)
        if outcome.infrastructure_error not in errors:
            errors.append(outcome.infrastructure_error)
    turns_left = max(0, turns - turn)
    return TurnObservation(
        turn=turn,
        turns_left=turns_left,
        code=outcome.code,
        png=outcome.png,
        passed=outcome.passed and not infrastructure_failed,
        violations=violations,
        errors=errors,
        paint_fraction=min(1.0, max(0.0, float(outcome.paint_fraction))),
        render_ms=max(0, int(outcome.render_ms)),
        feedback=feedback_text(outcome, turn, turns_left, contract),
        infrastructure_failed=infrastructure_failed,
        infrastructure_error=outcome.infrastructure_error,
        rendered=outcome.rendered,
        details=list(outcome.details),
        stats=dict(outcome.stats),
    )


def infrastructure_outcome(cause: BaseException | str) -> SketchOutcome:
    """The outcome of a turn the renderer could not judge.

    ``cause``: the exception an evaluator raised (reported as ``evaluator_failed: Type: message``)
    or a reason given as text (a lost remote session, a policy that gave no reply), reported as it is.
    """
    if isinstance(cause, BaseException):
        message = safe_text(f"evaluator_failed: {type(cause).__name__}: {cause}")
    else:
        message = safe_text(cause)
    return SketchOutcome(
        code=None,
        passed=False,
        violations=[INFRASTRUCTURE_ERROR],
        errors=[message],
        paint_fraction=0.0,
        render_ms=0,
        png=None,
        infrastructure_error=message,
    )
