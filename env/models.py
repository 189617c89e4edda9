"""Wire models of the watercolour OpenEnv environment: action, observation, state, reset arguments.

These are the contract between the environment server and every client (the trainer's
rollout loop, evaluation scripts, the CLI). Field names and meanings are fixed by
ARCHITECTURE.md; change them only together with the server, the client and the docs.
"""

from __future__ import annotations

from typing import Literal, Optional

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, ConfigDict, Field, field_validator

# The gate judges reply size itself (``SketchContract.max_reply_bytes`` -> ``too_long``), and
# that verdict should reach the model as feedback like any other failure. The wire limit sits
# well above the gate's default so that it only stops payloads meant to exhaust server memory.
MAX_RESPONSE_CHARS = 1_000_000

MIN_TURNS = 1
MAX_TURNS = 16
DEFAULT_TURNS = 3
MAX_SUBJECT_CHARS = 300
# The renderer seeds its generator from the low 32 bits; a wider range would alias seeds.
MAX_SEED = 2**32 - 1
DEFAULT_SUBJECT = "red poppies in a summer meadow"


class WatercolourAction(Action):
    """One turn of the policy: its raw reply, from which the gate extracts the sketch."""

    response: str = Field(
        ...,
        max_length=MAX_RESPONSE_CHARS,
        description="The model's raw reply; the sketch is taken from its ```js block.",
    )


class WatercolourObservation(Observation):
    """What the policy (and the trainer) learns about one turn.

    ``reward`` stays ``None``: rewards are scored outside the environment. ``metadata``
    carries the machine-facing extras (``infrastructure_failed`` above all: a rollout
    with an infrastructure failure must be dropped, not scored as a failed painting).
    """

    image_png_base64: Optional[str] = Field(
        default=None, description="The rendered painting as base64 PNG; None when nothing was rendered."
    )
    passed: bool = Field(default=False, description="Whether the sketch passed the whole gate.")
    violations: list[str] = Field(default_factory=list, description="Reason codes (see env.contract.REASON_CODES).")
    errors: list[str] = Field(default_factory=list, description="JavaScript or renderer error messages.")
    paint_fraction: float = Field(default=0.0, ge=0.0, le=1.0, description="Share of the canvas covered by pigment.")
    render_ms: int = Field(default=0, ge=0, description="Wall time of the render in milliseconds.")
    turn: int = Field(default=0, ge=0, description="Turns taken so far; 0 right after reset.")
    turns_left: int = Field(default=0, ge=0, description="Turns still allowed in this episode.")
    feedback: str = Field(default="", description="Text for the model's next turn (the task statement after reset).")
    code: Optional[str] = Field(
        default=None,
        description=("The episode's current sketch after this turn, which the next edit reply applies to "
                     "(unchanged when this turn's edit failed or its reply held no sketch); None before any sketch."),
    )
    show_code: bool = Field(
        default=False,
        description=("True when the conversation does not hold `code` verbatim (an edit produced it): "
                     "show it in the next revision message so SEARCH text can quote it."),
    )


class WatercolourState(State):
    """Server-side episode state; ``step_count`` equals the number of turns taken."""

    subject: str = Field(default="", description="What the episode asks the model to paint.")
    seed: int = Field(default=0, ge=0, le=MAX_SEED, description="Render seed, the same for every turn.")
    turns: int = Field(default=DEFAULT_TURNS, ge=MIN_TURNS, le=MAX_TURNS, description="Turns in the episode.")
    revision_format: str = Field(default="full", description="What revision turns are asked for: 'full' or 'edit'.")
    done: bool = Field(default=False, description="True once all turns are taken.")
    last_passed: Optional[bool] = Field(default=None, description="Gate verdict of the latest turn.")
    infrastructure_failures: int = Field(
        default=0, ge=0, description="Turns the renderer failed for reasons unrelated to the sketch."
    )


class WatercolourResetParams(BaseModel):
    """The keyword arguments ``reset`` accepts, validated in one place."""

    model_config = ConfigDict(extra="forbid")

    subject: str = Field(default=DEFAULT_SUBJECT, min_length=1, max_length=MAX_SUBJECT_CHARS)
    seed: Optional[int] = Field(default=None, ge=0, le=MAX_SEED)
    turns: int = Field(default=DEFAULT_TURNS, ge=MIN_TURNS, le=MAX_TURNS)
    # What the feedback asks revisions to be; replies of either form are accepted.
    revision_format: Literal["full", "edit"] = "full"
    episode_id: Optional[str] = Field(default=None, min_length=1, max_length=255)

    @field_validator("subject")
    @classmethod
    def _subject_is_text(cls, subject: str) -> str:
        # The subject is pasted into the task statement; collapsing whitespace keeps a
        # YAML block scalar or stray newline from breaking that statement into pieces.
        cleaned = " ".join(subject.split())
        if not cleaned:
            raise ValueError("subject must contain visible text")
        return cleaned
