"""One event loop on its own thread, for sync code that hands work to loop-bound objects.

Playwright browsers, httpx clients and WebSocket sessions belong to the loop that created
them, while their callers (the trainer, the CLI, uvicorn's worker threads, another loop) have
no loop or a different one. Each owner of such objects holds a ``Portal``: an anyio blocking
portal whose single loop thread creates, uses and closes them, whichever thread asks.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

T = TypeVar("T")


async def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    return await coroutine


class Portal:
    """Runs coroutines on one private loop thread; ``close()`` stops it and joins the thread.

    ``start=False`` defers the thread to the first ``submit`` (the judge starts none until it
    is asked something). ``name`` names the thread and the "is closed" error.
    """

    def __init__(self, name: str, *, start: bool = True):
        self.name = name
        self._lock = threading.Lock()  # the first submit may race another, or close()
        self._portal: BlockingPortal | None = None
        self._exit = contextlib.ExitStack()  # leaves start_blocking_portal's context on close
        self._thread: threading.Thread | None = None
        self._closed = False
        if start:
            self._started_portal()

    @property
    def started(self) -> bool:
        """True while a loop thread is running (started and not yet closed)."""
        return self._portal is not None

    @property
    def closed(self) -> bool:
        return self._closed

    def _started_portal(self) -> BlockingPortal:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.name} is closed")
            if self._portal is None:
                portal = self._exit.enter_context(start_blocking_portal(name=self.name))
                self._thread = portal.call(threading.current_thread)
                self._portal = portal
            return self._portal

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coroutine`` on the loop; cancelling the future cancels the coroutine."""
        try:
            return self._started_portal().start_task_soon(_run, coroutine)
        except BaseException:
            coroutine.close()  # never scheduled: no "never awaited" warning on top of the error
            raise

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and wait for its result (or exception)."""
        return self.submit(coroutine).result()

    def on_loop_thread(self) -> bool:
        """True when called from the loop thread, where waiting on the loop would deadlock."""
        return self._thread is not None and threading.current_thread() is self._thread

    def close(self) -> None:
        """Stop the loop and join its thread; idempotent, from any thread but the loop's."""
        with self._lock:
            if self._closed:
                return
            if self.on_loop_thread():
                raise RuntimeError(f"{self.name} cannot be closed from its own loop thread")
            self._closed = True
            portal, self._portal = self._portal, None
        if portal is None:
            return
        try:
            # Cancel what is still running instead of waiting for it (the context's own exit
            # waits): closing must not hang behind a stuck task, and a caller still waiting
            # on one gets CancelledError rather than waiting forever.
            portal.call(portal.stop, True)
        finally:
            self._exit.close()  # returns once the loop has finished and its thread is gone

    def __enter__(self) -> Portal:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
