"""The text the model reads before its next turn: what the gate and the renderer saw.

Feedback reports facts only: which rules the sketch broke (with the contract's own
explanation of each reason code), what JavaScript threw, how much paint reached the canvas,
and what to send next. It never judges the painting or mentions references and scores;
those belong to the reward side, and a policy that is told its score learns to chase the
wording instead of the painting.
"""

from __future__ import annotations

from env.contract import REASON_CODES, SketchContract
from env.core import SketchOutcome
from env.prompts import revision_reply_format, turns_left_after

MAX_FEEDBACK_CHARS = 1200
MAX_DETAIL_LINES = 5
MAX_ERROR_LINES = 3
MAX_LINE_CHARS = 160


def feedback_text(
    outcome: SketchOutcome,
    turn: int,
    turns: int,
    contract: SketchContract | None = None,
    revision_format: str = "full",
) -> str:
    """Short plain-text feedback on turn ``turn`` of a ``turns``-turn episode, for the turn after it;
    at most MAX_FEEDBACK_CHARS."""
    contract = contract or SketchContract()
    revise = revision_reply_format(revision_format)
    header = f"Turn {turn} of {turns}: "
    turns_left = turns_left_after(turn, turns)
    if outcome.infrastructure_error is not None:
        # The sketch was never judged; telling the model it failed would teach it nonsense.
        return _join(
            [header + "the renderer failed for reasons unrelated to your sketch, so this turn was not judged."],
            [_next_step(turns_left, f"Send {revise} again.")],
        )
    if outcome.passed:
        return _join(
            [header + "your sketch passed the gate."],
            [
                _painting_line(outcome, contract),
                _next_step(turns_left, f"Look at your painting, decide what to change, and reply with {revise}."),
            ],
        )

    tail = [
        _painting_line(outcome, contract),
        _next_step(turns_left, f"Fix these problems and reply with {revise}."),
    ]
    lines = [header + "your sketch did not pass the gate."]
    # The tail (painting line, next step) always fits; the sections above share the rest.
    budget = MAX_FEEDBACK_CHARS - _length(tail) - 1

    reasons = list(outcome.violations)
    if reasons:
        lines.append("Problems:")
    for index, code in enumerate(reasons):
        line = f"- {code}: {REASON_CODES.get(code, 'unrecognised reason code')}"
        # Keep room to at least name the codes after this one: an unexplained code still
        # tells the model what to look up, a dropped one tells it nothing.
        rest = [_also(reasons[index + 1:])] if index + 1 < len(reasons) else []
        if _length(lines + [line] + rest) > budget:
            lines.append(_also(reasons[index:]))
            break
        lines.append(line)

    _append_section(lines, "Where:", outcome.details, MAX_DETAIL_LINES, budget)
    _append_section(lines, "JavaScript errors:", outcome.errors, MAX_ERROR_LINES, budget)
    return _join(lines, tail)


def _painting_line(outcome: SketchOutcome, contract: SketchContract) -> str:
    if not outcome.rendered:
        return "The sketch was not rendered because of these problems, so there is no painting this turn."
    if outcome.png is None:
        return "The render produced no painting."
    return (
        f"Paint covers {_percent(outcome.paint_fraction)} of the canvas; "
        f"the gate needs at least {_percent(contract.min_paint_fraction)}."
    )


def _next_step(turns_left: int, instruction: str) -> str:
    if turns_left <= 0:
        return "That was the last turn."
    plural = "turn" if turns_left == 1 else "turns"
    return f"Next: {instruction} ({turns_left} {plural} left)"


def _append_section(lines: list[str], title: str, items: list[str], max_items: int, budget: int) -> None:
    """Add up to ``max_items`` clipped items under ``title`` while they fit the budget."""
    present = [" ".join(item.split()) for item in items if item.strip()]
    shown = [_clip("- " + item) for item in present[:max_items]]
    if not shown:
        return
    if _length(lines + [title, shown[0]]) > budget:
        return
    lines.append(title)
    for count, line in enumerate(shown):
        if _length(lines + [line]) > budget:
            shown_count = count
            break
        lines.append(line)
    else:
        shown_count = len(shown)
    hidden = len(present) - shown_count
    more = f"- ({hidden} more)"
    if hidden > 0 and _length(lines + [more]) <= budget:
        lines.append(more)


def _also(codes: list[str]) -> str:
    return "- also: " + ", ".join(codes)


def _percent(fraction: float) -> str:
    value = max(0.0, fraction) * 100.0
    if value >= 10:
        return f"{value:.0f}%"
    if value >= 1:
        return f"{value:.1f}%"
    # Small coverages are where the gate threshold lives (0.5%); keep two significant digits.
    return f"{value:.2g}%"


def _clip(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 1] + "…"


def _length(lines: list[str]) -> int:
    return sum(len(line) for line in lines) + max(0, len(lines) - 1)


def _join(lines: list[str], tail: list[str]) -> str:
    return "\n".join(lines + tail)
