"""The watercolour OpenEnv environment: one episode = a subject, a seed and ``turns`` painting turns.

Each session (one per WebSocket connection) holds only its episode state; rendering goes
through ONE shared ``SketchEvaluator`` whose browser pool queues work from every session.
That is why sessions are cheap to create and close: the OpenEnv HTTP routes build a
throwaway environment per request (``/metadata``, ``/state``, ``/reset``), and closing a
session must never touch the shared browsers.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import secrets
import sys
import threading
import uuid
from typing import Any, Optional, Union

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata
from pydantic import ValidationError

from env.contract import SketchContract
from env.core import SketchEvaluator, SketchOutcome
from env.prompts import first_turn_prompt, turns_left_after
from env.models import (
    MAX_SEED,
    WatercolourAction,
    WatercolourObservation,
    WatercolourResetParams,
    WatercolourState,
)
from env.turn import EpisodeSketch, infrastructure_outcome, turn_observation

ENVIRONMENT_NAME = "watercolour"
ENVIRONMENT_VERSION = "0.1.0"
# Enough for a sketch's reasons to be readable in the trainer's logs without letting a
# hostile reply blow up every observation on the wire.
MAX_METADATA_DETAILS = 40


class SharedEvaluator:
    """Creates one ``SketchEvaluator`` on first use and hands the same one to every caller.

    Creating it lazily keeps imports and session construction free of browser start-up;
    sharing it keeps the number of Chromium processes at the pool size however many
    sessions are open.
    """

    def __init__(self, contract: Optional[SketchContract] = None, **evaluator_kwargs: Any):
        # Known before the browsers start, so a reset can state the rules without starting them.
        self.contract = contract or SketchContract()
        self._evaluator_kwargs = {**evaluator_kwargs, "contract": self.contract}
        self._evaluator: Optional[SketchEvaluator] = None
        self._lock = threading.Lock()

    def get(self) -> SketchEvaluator:
        with self._lock:
            if self._evaluator is None:
                # The first episode waits for the browsers: say so (the server said nothing since start-up).
                print("watercolour serve: starting renderer pool…", file=sys.stderr, flush=True)
                self._evaluator = SketchEvaluator(**self._evaluator_kwargs)
            return self._evaluator

    @property
    def started(self) -> bool:
        return self._evaluator is not None

    def close(self) -> None:
        with self._lock:
            evaluator, self._evaluator = self._evaluator, None
        if evaluator is not None:
            evaluator.close()


# Used by environments constructed without an evaluator (e.g. openenv tooling that only
# knows the class). Closed at interpreter exit so the browsers do not outlive the process.
DEFAULT_EVALUATOR = SharedEvaluator()
atexit.register(DEFAULT_EVALUATOR.close)

# Anything with ``contract``, ``evaluate`` and ``evaluate_async`` works as a SketchEvaluator.
EvaluatorSource = Union[SketchEvaluator, SharedEvaluator]


def task_statement(subject: str, turns: int, contract: SketchContract, revision_format: str = "full") -> str:
    """The first message of an episode: the system prompt and the task the trainer's policy sees
    on turn 1 (``env.prompts.first_turn_prompt``, one source), so a remote client's model is
    asked exactly what the trained model was. ``turns`` is reported by the observation's
    ``turns_left``; the trained prompt does not state it, so neither does this."""
    system, task = first_turn_prompt(subject, contract, revision_format=revision_format)
    return f"{system}\n\n{task}"


class WatercolourEnvironment(Environment[WatercolourAction, WatercolourObservation, WatercolourState]):
    """Multi-turn painting episodes over a shared renderer.

    ``reset(subject=..., seed=..., turns=...)`` starts an episode (turn 0, no image, the
    task statement as feedback); each ``step`` gates and renders one reply; the episode is
    done after ``turns`` steps, and a further step is an error. Rewards are not computed
    here: every observation carries ``reward=None``.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, evaluator: Optional[EvaluatorSource] = None):
        super().__init__()
        self._evaluator_source = evaluator if evaluator is not None else DEFAULT_EVALUATOR
        self._state = WatercolourState()
        self._sketch = EpisodeSketch()
        self._started = False

    # --- openenv interface -------------------------------------------------------------

    def reset(
        self,
        seed: Optional[int] = None,
        episode_id: Optional[str] = None,
        **kwargs: Any,
    ) -> WatercolourObservation:
        try:
            params = WatercolourResetParams(seed=seed, episode_id=episode_id, **kwargs)
        except ValidationError as exc:
            # The WebSocket server reports ValueError messages verbatim but turns a raw
            # ValidationError into a bare "Invalid message"; keep the reason visible.
            raise ValueError(f"invalid reset arguments: {_validation_summary(exc)}") from None
        # Gym convention: no seed means a fresh one; it is recorded so the run stays replayable.
        chosen_seed = params.seed if params.seed is not None else secrets.randbelow(MAX_SEED + 1)
        self._state = WatercolourState(
            episode_id=params.episode_id or uuid.uuid4().hex,
            step_count=0,
            subject=params.subject,
            seed=chosen_seed,
            turns=params.turns,
            revision_format=params.revision_format,
        )
        self._sketch = EpisodeSketch()
        self._started = True
        return WatercolourObservation(
            turn=0,
            turns_left=turns_left_after(0, params.turns),
            feedback=task_statement(params.subject, params.turns, self._contract(), params.revision_format),
            done=False,
            reward=None,
            metadata=self._episode_metadata(),
        )

    async def reset_async(
        self,
        seed: Optional[int] = None,
        episode_id: Optional[str] = None,
        **kwargs: Any,
    ) -> WatercolourObservation:
        # Reset does no I/O; running it inline spares the server a thread hop per episode.
        return self.reset(seed=seed, episode_id=episode_id, **kwargs)

    def step(
        self,
        action: WatercolourAction,
        timeout_s: Optional[float] = None,
        **kwargs: Any,
    ) -> WatercolourObservation:
        turn = self._begin_turn(action)
        try:
            evaluator = self._evaluator()
            outcome = evaluator.evaluate(action.response, self._state.seed, deadline_s=timeout_s,
                                         current=self._sketch.current)
        except Exception as exc:  # the renderer itself broke: not the sketch's fault
            outcome = infrastructure_outcome(exc)
        return self._finish_turn(turn, action.response, outcome)

    async def step_async(
        self,
        action: WatercolourAction,
        timeout_s: Optional[float] = None,
        **kwargs: Any,
    ) -> WatercolourObservation:
        # The server awaits this on its event loop; the render runs on the evaluator's own
        # loop thread, so other sessions keep being served while this one waits.
        turn = self._begin_turn(action)
        try:
            evaluator = await asyncio.to_thread(self._evaluator)
            outcome = await evaluator.evaluate_async(action.response, self._state.seed, deadline_s=timeout_s,
                                                     current=self._sketch.current)
        except Exception as exc:  # the renderer itself broke: not the sketch's fault
            outcome = infrastructure_outcome(exc)
        return self._finish_turn(turn, action.response, outcome)

    @property
    def state(self) -> WatercolourState:
        return self._state.model_copy(deep=True)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=ENVIRONMENT_NAME,
            description=(
                "Multi-turn p5.brush watercolour painting: the policy writes a sketch, a sandboxed "
                "headless Chromium renders it, and the policy sees its painting plus gate feedback "
                "before revising. Reset with subject, seed and turns (1-16); rewards are scored elsewhere."
            ),
            version=ENVIRONMENT_VERSION,
        )

    def close(self) -> None:
        # Deliberately leaves the shared evaluator running: sessions come and go (the HTTP
        # routes open and close one per request), the browsers stay for the next one.
        self._started = False

    # --- turns -------------------------------------------------------------------------

    def _begin_turn(self, action: WatercolourAction) -> int:
        if not isinstance(action, WatercolourAction):
            raise TypeError(f"expected a WatercolourAction, got {type(action).__name__}")
        if not self._started:
            raise RuntimeError("no episode in progress: call reset(subject=..., seed=..., turns=...) before step()")
        if self._state.done:
            raise RuntimeError(
                f"episode {self._state.episode_id} is over: all {self._state.turns} turns were taken; "
                "call reset() to start a new episode"
            )
        # Counted before the render starts so that overlapping steps cannot exceed the turn budget.
        self._state.step_count += 1
        self._state.done = turns_left_after(self._state.step_count, self._state.turns) == 0
        return self._state.step_count

    def _finish_turn(self, turn: int, reply: str, outcome: SketchOutcome) -> WatercolourObservation:
        # The session keeps the episode's sketch: an edit reply applies to it, and every
        # observation carries it, so no client has to rebuild it from the replies.
        record = turn_observation(outcome, turn, self._state.turns, self._contract(), self._state.revision_format,
                                  self._sketch.advance(reply, outcome))
        if record.infrastructure_failed:
            self._state.infrastructure_failures += 1
        self._state.last_passed = record.passed
        return WatercolourObservation(
            image_png_base64=base64.b64encode(record.png).decode("ascii") if record.png else None,
            passed=record.passed,
            violations=record.violations,
            errors=record.errors,
            paint_fraction=record.paint_fraction,
            render_ms=record.render_ms,
            turn=record.turn,
            turns_left=record.turns_left,
            feedback=record.feedback,
            code=record.code,
            show_code=record.show_code,
            done=record.turns_left == 0,
            reward=None,
            metadata={
                **self._episode_metadata(),
                # The trainer drops a rollout with this flag instead of scoring it.
                "infrastructure_failed": record.infrastructure_failed,
                "infrastructure_error": record.infrastructure_error,
                "rendered": record.rendered,
                "details": record.details[:MAX_METADATA_DETAILS],
                "stats": record.stats,
            },
        )

    # --- helpers -----------------------------------------------------------------------

    def _evaluator(self) -> SketchEvaluator:
        source = self._evaluator_source
        return source.get() if isinstance(source, SharedEvaluator) else source

    def _contract(self) -> SketchContract:
        # Both kinds of source know their contract without starting any browser.
        return self._evaluator_source.contract

    def _episode_metadata(self) -> dict[str, Any]:
        return {
            "episode_id": self._state.episode_id,
            "subject": self._state.subject,
            "seed": self._state.seed,
            "turns": self._state.turns,
        }


def _validation_summary(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        location = ".".join(str(part) for part in error["loc"]) or "arguments"
        parts.append(f"{location}: {error['msg']}")
    return "; ".join(parts)
