"""One turn, one observation: what a ``SketchOutcome`` means to the episode it belongs to.

``turn_observation`` is the one place where a turn's verdict, its painting and the feedback
the model reads next are put together, as a ``TurnObservation``: the outcome itself (the same
fields, normalised) placed in its episode. The OpenEnv server turns the record into its wire
observation (``env.environment``), the trainer's in-process environments hand it to the
rollout as it is, and the warm start shows its feedback in its revision examples, so every
path reports a turn the same way. ``infrastructure_outcome`` is the outcome of a turn whose
renderer broke (an evaluator that raised, a remote session that is gone): never the
sketch's fault, so the rollout is dropped rather than scored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from env.contract import SketchContract
from env.core import SketchOutcome
from env.feedback import feedback_text
from env.prompts import turns_left_after
from env.text import safe_text

INFRASTRUCTURE_ERROR = "infrastructure_error"


@dataclass(kw_only=True)
class TurnObservation(SketchOutcome):
    """What turn ``turn`` of a ``turns``-turn episode produced; the fields of an episode record's turn.

    The outcome's fields mean what they mean there, except ``code``: the episode's current
    sketch after this turn, i.e. what this turn's reply made of it (a full sketch, or the
    previous sketch with the reply's edits applied), the previous sketch when the reply
    produced none (a failed edit, a reply without code), None before any sketch.
    ``infrastructure_failed``: the renderer, not the sketch, failed this turn (then ``passed``
    is False, ``violations`` holds ``infrastructure_error`` and ``errors`` the reason); the
    rollout is dropped, never scored.
    """

    turn: int
    turns: int
    # Whether the conversation lacks ``code`` verbatim (an edit produced it): the next revision
    # message shows it so the model can quote SEARCH text exactly.
    show_code: bool = False
    feedback: str

    @property
    def turns_left(self) -> int:
        return turns_left_after(self.turn, self.turns)


@dataclass
class EpisodeSketch:
    """The environment's memory of one episode's sketch: the current sketch, which edit replies
    change, and the sketches the conversation already holds verbatim (the policy's own full
    replies, sketches shown before), so a revision shows the current sketch only when it is new.
    Both the in-process environments and the OpenEnv server session keep one per episode."""

    current: str | None = None
    quoted: set[str] = field(default_factory=set)

    def advance(self, reply: str | bytes, outcome: SketchOutcome) -> tuple[str | None, bool]:
        """(the current sketch after a turn that sent ``reply`` and produced ``outcome``, whether to show it)."""
        if outcome.code is not None:
            self.current = outcome.code
            text = reply if isinstance(reply, str) else bytes(reply).decode("utf-8", "replace")
            if outcome.code in text.replace("\r\n", "\n"):
                self.quoted.add(outcome.code)
        show = self.current is not None and self.current not in self.quoted
        if show:
            self.quoted.add(self.current)
        return self.current, show


def turn_observation(outcome: SketchOutcome, turn: int, turns: int,
                     contract: SketchContract | None = None, revision_format: str = "full",
                     sketch: tuple[str | None, bool] | None = None) -> TurnObservation:
    """The record of turn ``turn`` (1-based) of a ``turns``-turn episode that produced ``outcome``.

    ``sketch``: (current sketch, show it) from the episode's ``EpisodeSketch``; without one the
    turn's own sketch is the current one (a lone turn: the warm start's drafts, a lost session)."""
    code, show_code = sketch if sketch is not None else (outcome.code, False)
    infrastructure_failed = outcome.infrastructure_error is not None
    violations = list(outcome.violations)
    errors = list(outcome.errors)
    if infrastructure_failed:
        if INFRASTRUCTURE_ERROR not in violations:
            violations.append(INFRASTRUCTURE_ERROR)
        if outcome.infrastructure_error not in errors:
            errors.append(outcome.infrastructure_error)
    return TurnObservation(
        code=code,
        passed=outcome.passed and not infrastructure_failed,
        violations=violations,
        errors=errors,
        paint_fraction=min(1.0, max(0.0, float(outcome.paint_fraction))),
        render_ms=max(0, int(outcome.render_ms)),
        png=outcome.png,
        infrastructure_error=outcome.infrastructure_error,
        details=list(outcome.details),
        stats=dict(outcome.stats),
        rendered=outcome.rendered,
        turn=turn,
        turns=turns,
        show_code=show_code,
        feedback=feedback_text(outcome, turn, turns, contract, revision_format),
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
