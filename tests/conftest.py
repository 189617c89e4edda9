"""Shared fixtures: one real renderer pool per test session (browsers are slow to start)."""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn

from env.core import SketchEvaluator
from env.renderer import RendererPool, SyncRenderer

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# A small valid sketch: two circles render in about a second, unlike realistic paintings.
SMALL_SKETCH = """async function setup() {
  createCanvas(200, 200, WEBGL);
  brush.scaleBrushes(1);
  angleMode(DEGREES);
  noLoop();
}
function draw() {
  translate(-width / 2, -height / 2);
  background('#f8f1e4');
  brush.noStroke();
  brush.fill('#d6362b', 160);
  brush.fillBleed(0.2, 'out');
  brush.circle(70 + random(-20, 20), 90, 40);
  brush.fill('#2b6cb0', 140);
  brush.circle(130, 120, 35);
}
"""


def small_sketch_with(draw_body: str) -> str:
    """SMALL_SKETCH with extra statements at the end of draw()."""
    return SMALL_SKETCH.rstrip().rstrip("}") + draw_body + "\n}\n"


@pytest.fixture(scope="session")
def renderer():
    with SyncRenderer(size=2, deadline_s=60) as sync_renderer:
        yield sync_renderer


@pytest.fixture(scope="session")
def evaluator():
    with SketchEvaluator(size=2, deadline_s=60) as shared:
        yield shared


class LoopbackListener:
    """A TCP listener on 127.0.0.1 that records every connection it receives."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(0.5)
                try:
                    self.connections.append(conn.recv(4096))
                except OSError:
                    self.connections.append(b"")

    def close(self):
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@pytest.fixture
def loopback_listener():
    listener = LoopbackListener()
    yield listener
    listener.close()


__all__ = ["running_server", "RendererPool", "SMALL_SKETCH", "small_sketch_with", "ROOT", "FIXTURES"]


@contextmanager
def running_server(app):
    """uvicorn on 127.0.0.1 with a free port, in a thread of this process."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
