"""Where the trainer's episodes are rendered: in-process, or on remote `watercolour serve` servers.

Both backends take all episodes' replies for one turn at once and return every observation,
so a step renders one turn of all B x G episodes in parallel (a browser pool in-process, or one
WebSocket session per episode spread round-robin across the servers). Neither re-implements
gating or rendering: the in-process one calls env.core, the remote one the OpenEnv client, and
both report a turn as the record ``env.turn.turn_observation`` makes (on the server, for remote).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from env.contract import SketchContract
from env.core import SketchEvaluator
from env.portal import Portal
from env.prompts import check_revision_format
from env.turn import EpisodeSketch, TurnObservation, infrastructure_outcome, turn_observation


class EpisodeEnvironments(Protocol):
    def reset(self, subjects: list[str], seeds: list[int], turns: int, revision_format: str = "full") -> None: ...

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
        self.revision_format = "full"
        self._seeds: list[int] = []
        self._sketches: list[EpisodeSketch] = []
        self.turns = 1

    def reset(self, subjects: list[str], seeds: list[int], turns: int, revision_format: str = "full") -> None:
        self._seeds = list(seeds)
        self._sketches = [EpisodeSketch() for _ in seeds]
        self.turns = turns
        self.revision_format = check_revision_format(revision_format)

    def step(self, replies: list[str], turn: int) -> list[TurnObservation]:
        if len(replies) != len(self._seeds):
            raise ValueError(f"{len(replies)} replies for {len(self._seeds)} episodes")
        currents = [sketch.current for sketch in self._sketches]
        try:
            outcomes = self.evaluator.evaluate_many(replies, self._seeds, self.deadline_s, currents)
        except Exception as exc:  # noqa: BLE001 - the renderer broke, not the sketches: drop, never score
            outcomes = [infrastructure_outcome(exc)] * len(replies)
        return [turn_observation(outcome, turn, self.turns, self.contract, self.revision_format,
                                 sketch.advance(reply, outcome))
                for outcome, reply, sketch in zip(outcomes, replies, self._sketches)]

    def close(self) -> None:
        if self._own:
            self.evaluator.close()


class RemoteEnvironments:
    """One OpenEnv WebSocket session per episode, spread round-robin across ``urls``.

    The sessions live on a private event-loop thread (the trainer has no loop of its own).
    A session that fails mid-episode (the server restarted, the connection dropped) is
    retried: a new session is opened, reset with the episode's subject and seed, and the
    episode's earlier replies are sent again — rendering is deterministic, so it arrives at
    the same state — before the current reply. Only when ``reconnect_attempts`` are spent do
    the episode's later turns become infrastructure failures, so its reward is None,
    never a made-up score.
    """

    def __init__(self, urls: list[str], message_timeout_s: float | None = None, token: str | None = None,
                 reconnect_attempts: int = 3, reconnect_delay_s: float = 2.0):
        if not urls:
            raise ValueError("RemoteEnvironments needs at least one server URL")
        self.urls = list(urls)
        self.message_timeout_s = message_timeout_s
        self.token = token
        self.reconnect_attempts = reconnect_attempts
        self.reconnect_delay_s = reconnect_delay_s
        self.revision_format = "full"
        # The WebSocket sessions are opened, used and closed on this one loop.
        self._portal = Portal(type(self).__name__)
        self._clients: list[Any] = []
        self._broken: list[str | None] = []
        self._episodes: list[dict[str, Any]] = []  # subject, seed, replies so far, url
        self.turns = 1
        self.reconnects = 0  # sessions re-opened after a failure (for logs and tests)

    def reset(self, subjects: list[str], seeds: list[int], turns: int, revision_format: str = "full") -> None:
        self._portal.call(self._close_clients())
        self.turns = turns
        self.revision_format = check_revision_format(revision_format)
        self._episodes = [{"subject": s, "seed": seed, "replies": [], "url": self.urls[i % len(self.urls)]}
                          for i, (s, seed) in enumerate(zip(subjects, seeds))]
        self._clients, self._broken = self._portal.call(self._open_all())

    def _client(self, url: str):
        from env.client import DEFAULT_MESSAGE_TIMEOUT_S, WatercolourEnv

        return WatercolourEnv(base_url=url, message_timeout_s=self.message_timeout_s or DEFAULT_MESSAGE_TIMEOUT_S,
                              token=self.token)

    async def _open(self, episode: dict[str, Any]):
        """A fresh session at the episode's start: (client, None) or (None, why not)."""
        client = self._client(episode["url"])
        try:
            await client.connect()
            await client.reset(subject=episode["subject"], seed=episode["seed"], turns=self.turns,
                               revision_format=self.revision_format)
            return client, None
        except Exception as exc:  # noqa: BLE001 - a dead server is an infrastructure failure
            await _close_quietly(client)
            return None, f"reset failed on {episode['url']}: {exc}"

    async def _open_all(self):
        pairs = await asyncio.gather(*(self._open_with_retries(e) for e in self._episodes))
        return [client for client, _ in pairs], [error for _, error in pairs]

    async def _open_with_retries(self, episode: dict[str, Any]):
        """A session replayed up to the episode's current turn: (client, None) or (None, why)."""
        why = "no attempt"
        for attempt in range(max(1, self.reconnect_attempts)):
            if attempt:
                await asyncio.sleep(self.reconnect_delay_s * 2 ** (attempt - 1))
            client, why = await self._open(episode)
            if client is None:
                continue
            try:
                for reply in episode["replies"]:
                    await client.step(reply)
            except Exception as exc:  # noqa: BLE001
                await _close_quietly(client)
                why = f"replaying the episode failed: {exc}"
                continue
            return client, None
        return None, why

    async def _reopen(self, index: int) -> str | None:
        """Replace episode ``index``'s broken session; None on success, else why not."""
        if self._clients[index] is not None:
            await _close_quietly(self._clients[index])
        self._clients[index], why = await self._open_with_retries(self._episodes[index])
        if why is None:
            self.reconnects += 1
        return why

    def step(self, replies: list[str], turn: int) -> list[TurnObservation]:
        if len(replies) != len(self._clients):
            raise ValueError(f"{len(replies)} replies for {len(self._clients)} episodes")
        return self._portal.call(self._step_all(replies, turn))

    async def _step_all(self, replies: list[str], turn: int) -> list[TurnObservation]:
        from env.client import turn_from_wire

        async def one(index: int, reply: str) -> TurnObservation:
            for attempt in range(2):  # the session as it is, then once more after reopening it
                client = self._clients[index]
                if client is None or self._broken[index] is not None:
                    break
                try:
                    result = await client.step(reply)
                except Exception as exc:  # noqa: BLE001
                    if attempt == 0:
                        failure = await self._reopen(index)
                        if failure is None:
                            continue
                        self._broken[index] = f"step failed ({exc}); reconnecting: {failure}"
                    else:
                        self._broken[index] = f"step failed after reconnecting: {exc}"
                    break
                self._episodes[index]["replies"].append(reply)
                return turn_from_wire(result.observation)
            lost = infrastructure_outcome(self._broken[index] or "no session")
            return turn_observation(lost, turn, self.turns, revision_format=self.revision_format)

        return list(await asyncio.gather(*(one(i, r) for i, r in enumerate(replies))))

    async def _close_clients(self) -> None:
        await asyncio.gather(*(_close_quietly(c) for c in self._clients if c is not None))
        self._clients = []

    def close(self) -> None:
        if self._portal.closed:
            return
        try:
            self._portal.call(self._close_clients())
        finally:
            self._portal.close()


async def _close_quietly(client) -> None:
    try:
        await client.close()
    except Exception:  # noqa: BLE001 - closing a dead session must not mask the real failure
        pass


def make_environments(config) -> EpisodeEnvironments:
    if config.env_urls:
        # The servers' token comes from WATERCOLOUR_TOKEN, never from the config: config.yaml
        # is written into the run directory.
        return RemoteEnvironments(config.env_urls)
    kwargs: dict[str, Any] = {}
    if config.render_backend:
        kwargs["backend"] = config.render_backend
    if config.renderers:
        kwargs["renderers"] = config.renderers
    return InProcessEnvironments(deadline_s=config.render_deadline_s, **kwargs)
