"""One sketch through the whole gate: static checks, sandboxed render, run-time checks, pigment.

This is the single place where the static verdict and the render are combined, so the CLI,
the OpenEnv environment and the trainer all see the same ``SketchOutcome``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from dataclasses import dataclass, field
from typing import Any

from env.contract import SketchContract
from env.edits import resolve_turn
from env.gate import GateVerdict, check_code, static_gate
from env.gate.analysis import _empty_stats as empty_stats
from env.renderer import RendererPool, RenderResult, SyncRenderer
from env.text import safe_lines, safe_text

# Static findings that the run-time sandbox enforces as well: a sketch with only these is
# still rendered, so the policy sees what it painted next to the reason it failed.
RENDER_DESPITE = frozenset({
    "brush_method_not_allowed",
    "unknown_brush_method",
    "bare_primitive",
    "text_label",
    "no_painting_calls",
    "not_webgl",
})


@dataclass
class SketchOutcome:
    """The whole gate's verdict on one sketch and its render: what ``watercolour render`` prints
    (its ``render_ms`` named ``elapsed_ms`` there, the CLI contract's name) and what every turn
    record is made of (``env.turn.TurnObservation`` extends it with the turn's place and feedback)."""

    code: str | None
    passed: bool
    violations: list[str]
    errors: list[str]
    paint_fraction: float
    render_ms: int
    png: bytes | None
    infrastructure_error: str | None = None
    details: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    rendered: bool = False

    @property
    def infrastructure_failed(self) -> bool:
        return self.infrastructure_error is not None


def should_render(verdict: GateVerdict) -> bool:
    return verdict.code is not None and set(verdict.violations) <= RENDER_DESPITE


def combine(verdict: GateVerdict, render: RenderResult | None) -> SketchOutcome:
    # Every outcome's text is bounded and well-formed here, whoever built the parts (a
    # renderer of another kind, a static detail quoting a 40,000-character literal), so the
    # feedback, the records and the wire never carry what a tokenizer or UTF-8 refuses.
    violations = list(verdict.violations)
    details = safe_lines(verdict.details, limit=200, max_items=200)
    if render is None:
        return SketchOutcome(
            code=verdict.code, passed=False, violations=violations, errors=[], paint_fraction=0.0,
            render_ms=0, png=None, details=details, stats=dict(verdict.stats),
        )
    for code in render.violations:
        if code not in violations:
            violations.append(code)
    details.extend(safe_lines(render.details, limit=200, max_items=200))
    return SketchOutcome(
        code=verdict.code,
        passed=verdict.passed and render.passed,
        violations=violations,
        errors=safe_lines(render.errors),
        paint_fraction=render.paint_fraction,
        render_ms=render.render_ms,
        png=render.png,
        infrastructure_error=None if render.infrastructure_error is None else safe_text(render.infrastructure_error),
        details=details,
        stats=dict(verdict.stats),
        rendered=True,
    )


def gate_turn(reply: str | bytes, current: str | None, contract: SketchContract) -> GateVerdict:
    """The static verdict on what ``reply`` makes of the episode's current sketch ``current``.

    An edit reply (``env.edits``) is applied to ``current`` and the result is checked as code;
    a failed edit is a verdict with its ``edit_*`` code and no code (nothing is rendered, and
    the environment keeps ``current``). Any other reply is a full sketch, extracted as ever."""
    resolved = resolve_turn(reply, current, contract)
    if not resolved.edited:
        return static_gate(reply, contract)
    if resolved.failed:
        return GateVerdict(False, None, list(resolved.violations), list(resolved.details), empty_stats())
    return check_code(resolved.code, contract)


async def evaluate_reply(
    reply: str | bytes,
    renderer_pool: RendererPool,
    seed: int = 0,
    contract: SketchContract | None = None,
    deadline_s: float | None = None,
    current: str | None = None,
) -> SketchOutcome:
    """Gate and render the model's raw reply, applied to the episode's current sketch ``current``
    (None on turn 1). Never raises for anything in the reply."""
    contract = contract or renderer_pool.contract
    verdict = gate_turn(reply, current, contract)
    if not should_render(verdict):
        return combine(verdict, None)
    render = await renderer_pool.render(verdict.code, seed=seed, deadline_s=deadline_s)
    return combine(verdict, render)


class SketchEvaluator:
    """A renderer pool on its own event-loop thread, usable from sync and async code alike.

    Playwright objects belong to the loop that created them; servers (uvicorn) and trainers
    run their own loops or none, so the pool gets a private one and callers hand it work.
    """

    def __init__(self, contract: SketchContract | None = None, **renderer_kwargs):
        self.contract = contract or SketchContract()
        self._renderer = SyncRenderer(contract=self.contract, **renderer_kwargs)
        self.renderer_pool = self._renderer.renderer_pool

    def submit(self, reply: str | bytes, seed: int = 0, deadline_s: float | None = None,
               current: str | None = None) -> concurrent.futures.Future:
        return self._renderer.submit(evaluate_reply(reply, self.renderer_pool, seed, self.contract, deadline_s, current))

    def evaluate(self, reply: str | bytes, seed: int = 0, deadline_s: float | None = None,
                 current: str | None = None) -> SketchOutcome:
        return self.submit(reply, seed, deadline_s, current).result()

    async def evaluate_async(self, reply: str | bytes, seed: int = 0, deadline_s: float | None = None,
                             current: str | None = None) -> SketchOutcome:
        return await asyncio.wrap_future(self.submit(reply, seed, deadline_s, current))

    def evaluate_many(self, replies: list[str | bytes], seeds: list[int], deadline_s: float | None = None,
                      currents: list[str | None] | None = None) -> list[SketchOutcome]:
        currents = currents if currents is not None else [None] * len(replies)
        futures = [self.submit(r, s, deadline_s, c) for r, s, c in zip(replies, seeds, currents)]
        return [f.result() for f in futures]

    def close(self) -> None:
        self._renderer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
