"""`watercolour bench serve`: drive the env server with many concurrent WebSocket sessions.

N sessions (default 64) × T turns, spread over P client *processes* (so the clients are not
one event loop's best case), each session a real OpenEnv client (``WatercolourEnv``) doing
reset + T steps with the same sketch. Without ``--url`` a ``watercolour serve`` subprocess is
started on a free port with ``--max-sessions`` ≥ N. Prints completed episodes, refused and
lost sessions, p50/p99 step latency and renders per second. A session is *refused* when the
server answers CAPACITY_REACHED and *lost* when it fails any other way; with
``--max-sessions`` ≥ N neither may happen: steps wait in the renderer's queue instead.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
import subprocess
import sys
import time
from typing import Any

from env.files import DATA_ROOT

DEFAULT_SKETCH = DATA_ROOT / "examples" / "simple" / "two_apples.js"


async def _episode(url: str, index: int, turns: int, reply: str, token: str | None) -> dict[str, Any]:
    from env.client import WatercolourEnv, infrastructure_failed

    latencies: list[float] = []
    outcome: dict[str, Any] = {"index": index, "latencies": latencies, "status": "completed", "error": None,
                               "infrastructure_failures": 0, "passed": 0}
    try:
        async with WatercolourEnv(base_url=url, token=token) as client:
            await client.reset(subject=f"load test {index}", seed=index, turns=turns)
            for _ in range(turns):
                started = time.perf_counter()
                result = await client.step(reply)
                latencies.append(time.perf_counter() - started)
                outcome["infrastructure_failures"] += infrastructure_failed(result.observation)
                outcome["passed"] += bool(result.observation.passed)
    except Exception as exc:  # noqa: BLE001 - every failure is counted and reported, never retried here
        message = f"{type(exc).__name__}: {exc}"
        outcome["status"] = "refused" if "CAPACITY_REACHED" in message else "lost"
        outcome["error"] = message[:300]
    return outcome


def _client_process(arguments: tuple[str, list[int], int, str, str | None]) -> list[dict[str, Any]]:
    url, indices, turns, reply, token = arguments

    async def run_all():
        return await asyncio.gather(*(_episode(url, i, turns, reply, token) for i in indices))

    return asyncio.run(run_all())


def percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]


def run_load(url: str, sessions: int, turns: int, processes: int, reply: str, token: str | None = None) -> dict[str, Any]:
    """Run the load from ``processes`` client processes; the summary numbers."""
    chunks = [list(range(p, sessions, processes)) for p in range(processes)]
    jobs = [(url, chunk, turns, reply, token) for chunk in chunks if chunk]
    started = time.perf_counter()
    # spawn, not fork: the parent may hold threads (a renderer, a test server) that fork would copy.
    with multiprocessing.get_context("spawn").Pool(len(jobs)) as pool:
        outcomes = [o for chunk in pool.map(_client_process, jobs) for o in chunk]
    wall = time.perf_counter() - started
    latencies = [x for o in outcomes for x in o["latencies"]]
    return {
        "sessions": sessions, "turns": turns, "processes": len(jobs),
        "completed": sum(o["status"] == "completed" for o in outcomes),
        "refused": sum(o["status"] == "refused" for o in outcomes),
        "lost": sum(o["status"] == "lost" for o in outcomes),
        "steps": len(latencies),
        "infrastructure_failures": sum(o["infrastructure_failures"] for o in outcomes),
        "passed_steps": sum(o["passed"] for o in outcomes),
        "p50_step_s": percentile(latencies, 0.50), "p99_step_s": percentile(latencies, 0.99),
        "renders_per_s": len(latencies) / wall if wall > 0 else None, "wall_s": wall,
        "errors": sorted({o["error"] for o in outcomes if o["error"]})[:5],
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(max_sessions: int, backend: str | None = None, renderers: int | None = None,
                 token: str | None = None) -> tuple[subprocess.Popen, str]:
    """A `watercolour serve` subprocess on a free loopback port, once /health answers."""
    import httpx

    port = free_port()
    command = [sys.executable, "-m", "watercolour.cli", "serve", "--port", str(port),
               "--max-sessions", str(max_sessions)]
    if backend:
        command += ["--backend", backend]
    if renderers:
        command += ["--renderers", str(renderers)]
    env = {**os.environ, **({"WATERCOLOUR_TOKEN": token} if token else {})}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"watercolour serve exited: {process.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    process.kill()
    raise RuntimeError("watercolour serve did not answer /health within 60 s")


def format_summary(summary: dict[str, Any]) -> str:
    def seconds(value):
        return "-" if value is None else f"{value:.2f}s"

    return (f"bench serve: {summary['sessions']} sessions x {summary['turns']} turns from {summary['processes']} "
            f"client processes: completed {summary['completed']}, refused {summary['refused']}, lost {summary['lost']}; "
            f"{summary['steps']} steps, p50 {seconds(summary['p50_step_s'])}, p99 {seconds(summary['p99_step_s'])}, "
            f"{summary['renders_per_s']:.2f} renders/s over {summary['wall_s']:.0f} s; "
            f"infrastructure failures {summary['infrastructure_failures']}")
