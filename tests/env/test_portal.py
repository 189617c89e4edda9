"""env.portal: the one loop thread that the renderer, the judge and the remote environments use."""

import asyncio
import concurrent.futures
import threading
import time

import pytest

from env.portal import Portal


async def _where() -> tuple[threading.Thread, asyncio.AbstractEventLoop]:
    return threading.current_thread(), asyncio.get_running_loop()


def test_coroutines_from_any_thread_run_on_one_loop_thread():
    with Portal("test portal") as portal:
        first_thread, first_loop = portal.call(_where())
        assert first_thread is not threading.current_thread()
        assert first_thread in threading.enumerate()
        with concurrent.futures.ThreadPoolExecutor(4) as callers:
            seen = list(callers.map(lambda _: portal.call(_where()), range(8)))
        assert all(thread is first_thread and loop is first_loop for thread, loop in seen)


def test_objects_made_on_the_loop_are_usable_in_later_calls():
    async def make():
        return asyncio.Event()  # bound to the loop it is first waited on

    async def wait_for(event):
        await asyncio.wait_for(event.wait(), timeout=5)
        return "set"

    async def set_it(event):
        event.set()

    with Portal("test portal") as portal:
        event = portal.call(make())
        waiting = portal.submit(wait_for(event))
        portal.call(set_it(event))
        assert waiting.result(timeout=5) == "set"


def test_results_and_exceptions_come_back_as_themselves():
    async def add(a, b):
        await asyncio.sleep(0)
        return a + b

    class Boom(Exception):
        pass

    async def fail():
        raise Boom("no")

    with Portal("test portal") as portal:
        assert portal.call(add(2, 3)) == 5
        future = portal.submit(add(1, 1))
        assert isinstance(future, concurrent.futures.Future) and future.result(timeout=5) == 2
        with pytest.raises(Boom, match="no"):
            portal.call(fail())
        assert portal.call(add(0, 1)) == 1  # a failed call does not take the loop down


def test_close_joins_the_thread_and_is_idempotent():
    before = set(threading.enumerate())
    portal = Portal("test portal")
    loop_thread, _ = portal.call(_where())
    assert loop_thread not in before and portal.started
    portal.close()
    assert loop_thread not in threading.enumerate()
    assert set(threading.enumerate()) <= before
    assert portal.closed and not portal.started
    portal.close()  # idempotent

    async def never_run():
        raise AssertionError("ran after close")

    coroutine = never_run()
    with pytest.raises(RuntimeError, match="test portal is closed"):
        portal.submit(coroutine)
    assert coroutine.cr_frame is None  # closed, so no "was never awaited" warning


def test_lazy_portal_starts_its_thread_on_first_use():
    before = threading.active_count()
    portal = Portal("lazy portal", start=False)
    assert not portal.started and threading.active_count() == before
    portal.close()  # closing one that never started starts nothing
    assert threading.active_count() == before

    with Portal("lazy portal", start=False) as portal:
        assert portal.call(_where())[0] in threading.enumerate()
        assert portal.started
    assert threading.active_count() == before


def test_close_cancels_work_still_running_instead_of_waiting_for_it():
    portal = Portal("test portal")
    stuck = portal.submit(asyncio.sleep(3600))
    started = time.monotonic()
    portal.close()
    assert time.monotonic() - started < 5
    assert stuck.cancelled()


def test_cancelling_the_future_cancels_the_coroutine():
    cancelled = threading.Event()

    async def sleeper():
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with Portal("test portal") as portal:
        future = portal.submit(sleeper())
        portal.call(asyncio.sleep(0.05))  # let it start
        future.cancel()
        assert cancelled.wait(timeout=5)


def test_close_from_another_thread_and_not_from_the_loop():
    portal = Portal("test portal")
    loop_thread, _ = portal.call(_where())

    async def close_from_inside():
        assert portal.on_loop_thread()
        portal.close()

    with pytest.raises(RuntimeError, match="own loop thread"):
        portal.call(close_from_inside())
    assert not portal.on_loop_thread()

    closer = threading.Thread(target=portal.close)
    closer.start()
    closer.join(timeout=10)
    assert not closer.is_alive() and portal.closed
    assert loop_thread not in threading.enumerate()
