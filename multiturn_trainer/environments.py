"""Where the trainer's episodes are rendered: in-process, or on remote `watercolour serve` servers.

Both backends take all episodes' replies for one turn at once and return every observation,
so a step renders turn k of all B x G episodes in parallel (a browser pool in-process, or one
WebSocket session per episode spread round-robin across the servers). Neither re-implements
gating or rendering: the in-process one calls env.core, the remote one the OpenEnv client.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from env.contract import SketchContract
from env.core import SketchEvaluator, SketchOutcome
from env.feedback import feedback_text


@dataclass
class TurnObservation:
    """What one turn of one episode produced; the fields of an episode record's turn."""

    turn: int
    code: str | None
    png: bytes | None
    passed: bool
    violations: list[str]
    errors: list[str]
    paint_fraction: float
    render_ms: int
    feedback: str
    infrastructure_failed: bool = False
    stats: dict[str, Any] = field(default_factory=dict)


class EpisodeEnvironments(Protocol):
    def reset(self, subjects: list[str], seeds: list[int], turns: int) -> None: ...

    def step(self, replies: list[str], turn: int) -> list[TurnObservation]: ...

    def close(self) -> None: ...


class InProcessEnvironments:
    """A SketchEvaluator (browser pool on its own loop thread) shared by every episode."""

    def __init__(self, evaluator: SketchEvaluator | None = None, contract: SketchContract | None = None,
                 deadline_s: float | None = None, **evaluator_kwargs):
        self.contract = contract or SketchContract()
        self._own = evaluator is None
        self.evaluator = evaluator or SketchEvaluator(contract=self.contract, **evaluator_kwargs)
        self.deadline_s = deadline_s
        self._seeds: list[int] = []
        self._turns = 1

    def reset(self, subjects: list[str], seeds: list[int], turns: int) -> None:
        self._seeds = list(seeds)
        self._turns = turns

    def step(self, replies: list[str], turn: int) -> list[TurnObservation]:
        if len(replies) != len(self._seeds):
            raise ValueError(f"{len(replies)} replies for {len(self._seeds)} episodes")
        outcomes = self.evaluator.evaluate_many(replies, self._seeds, self.deadline_s)
        return [self._observation(o, turn) for o in outcomes]

    def _observation(self, outcome: SketchOutcome, turn: int) -> TurnObservation:
        return TurnObservation(
            turn=turn, code=outcome.code, png=outcome.png, passed=outcome.passed,
            violations=list(outcome.violations), errors=list(outcome.errors),
            paint_fraction=outcome.paint_fraction, render_ms=outcome.render_ms,
            feedback=feedback_text(outcome, turn, self._turns - turn, self.contract),
            infrastructure_failed=outcome.infrastructure_failed, stats=dict(outcome.stats),
        )

    def close(self) -> None:
        if self._own:
            self.evaluator.close()


class RemoteEnvironments:
    """One OpenEnv WebSocket session per episode, spread round-robin across ``urls``.

    The sessions live on a private event-loop thread (the trainer has no loop of its own);
    a session that fails mid-episode makes that episode's later turns infrastructure
    failures, so its reward becomes None instead of a made-up score.
    """

    def __init__(self, urls: list[str], message_timeout_s: float | None = None):
        if not urls:
            raise ValueError("RemoteEnvironments needs at least one server URL")
        self.urls = list(urls)
        self.message_timeout_s = message_timeout_s
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="remote-envs", daemon=True)
        self._thread.start()
        self._clients: list[Any] = []
        self._broken: list[str | None] = []
        self._turns = 1

    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def reset(self, subjects: list[str], seeds: list[int], turns: int) -> None:
        self._run(self._close_clients())
        self._turns = turns
        self._clients, self._broken = self._run(self._open(subjects, seeds, turns))

    async def _open(self, subjects, seeds, turns):
        from env.client import DEFAULT_MESSAGE_TIMEOUT_S, WatercolourEnv

        timeout = self.message_timeout_s or DEFAULT_MESSAGE_TIMEOUT_S

        async def one(index: int, subject: str, seed: int):
            url = self.urls[index % len(self.urls)]
            client = WatercolourEnv(base_url=url, message_timeout_s=timeout)
            try:
                await client.connect()
                await client.reset(subject=subject, seed=seed, turns=turns)
                return client, None
            except Exception as exc:  # noqa: BLE001 - a dead server is an infrastructure failure
                await _close_quietly(client)
                return None, f"reset failed on {url}: {exc}"

        pairs = await asyncio.gather(*(one(i, s, seed) for i, (s, seed) in enumerate(zip(subjects, seeds))))
        return [client for client, _ in pairs], [error for _, error in pairs]

    def step(self, replies: list[str], turn: int) -> list[TurnObservation]:
        if len(replies) != len(self._clients):
            raise ValueError(f"{len(replies)} replies for {len(self._clients)} episodes")
        return self._run(self._step_all(replies, turn))

    async def _step_all(self, replies: list[str], turn: int) -> list[TurnObservation]:
        from env.client import infrastructure_failed, png_bytes

        async def one(index: int, reply: str) -> TurnObservation:
            client = self._clients[index]
            if client is not None and self._broken[index] is None:
                try:
                    result = await client.step(reply)
                    o = result.observation
                    return TurnObservation(
                        turn=turn, code=o.metadata.get("code"), png=png_bytes(o), passed=o.passed,
                        violations=list(o.violations), errors=list(o.errors), paint_fraction=o.paint_fraction,
                        render_ms=o.render_ms, feedback=o.feedback, infrastructure_failed=infrastructure_failed(o),
                        stats=dict(o.metadata.get("stats") or {}),
                    )
                except Exception as exc:  # noqa: BLE001
                    self._broken[index] = f"step failed: {exc}"
            reason = self._broken[index] or "no session"
            return TurnObservation(
                turn=turn, code=None, png=None, passed=False, violations=["infrastructure_error"], errors=[reason],
                paint_fraction=0.0, render_ms=0,
                feedback="The renderer failed for reasons unrelated to your sketch; send the sketch again.",
                infrastructure_failed=True,
            )

        return list(await asyncio.gather(*(one(i, r) for i, r in enumerate(replies))))

    async def _close_clients(self) -> None:
        await asyncio.gather(*(_close_quietly(c) for c in self._clients if c is not None))
        self._clients = []

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._run(self._close_clients())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


async def _close_quietly(client) -> None:
    try:
        await client.close()
    except Exception:  # noqa: BLE001 - closing a dead session must not mask the real failure
        pass


def make_environments(config) -> EpisodeEnvironments:
    if config.env_urls:
        return RemoteEnvironments(config.env_urls)
    kwargs: dict[str, Any] = {}
    if config.render_backend:
        kwargs["backend"] = config.render_backend
    if config.renderers:
        kwargs["size"] = config.renderers
    return InProcessEnvironments(deadline_s=config.render_deadline_s, **kwargs)
