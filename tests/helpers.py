"""Helpers the test modules import (``from helpers import ...``); the fixtures live in conftest.py."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import uvicorn

from agent.messages import first_turn_messages
from multiturn_trainer.config import TrainConfig
from multiturn_trainer.sft import run_sft
from multiturn_trainer.tiny_model import build_tiny_model

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# A small valid sketch: two circles render in about a second, unlike realistic paintings.
# The fields of `watercolour render --json`'s objects (ARCHITECTURE.md, CLI contract).
RECORD_KEYS = {"file", "passed", "violations", "errors", "paint_fraction", "elapsed_ms", "png"}


def run_cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """The command line as a user runs it, from the checkout."""
    return subprocess.run([sys.executable, "-m", "watercolour.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


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


@contextmanager
def running_server(app, port: int = 0):
    """uvicorn on 127.0.0.1 (a free port unless given), in a thread of this process."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
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


# --- the tiny trainer (test_trainer, test_replay) ----------------------------------------------
# The tiny models paint only after a warm start: each session-scoped policy is the tiny model
# fine-tuned (run_sft, the product's SFT) on a handful of small sketches, so its sampled
# sketches render and turn >= 2 prompts carry real paintings.

SUBJECTS = ["a red apple", "a blue pond"]


def sketch_variant(rng: random.Random) -> str:
    colours = ["#d6362b", "#2b6cb0", "#e3a72f", "#3f8f4e"]
    first, second = rng.sample(colours, 2)
    return (SMALL_SKETCH.replace("#d6362b", first).replace("#2b6cb0", second)
            .replace("130, 120, 35", f"{rng.randrange(100, 160)}, {rng.randrange(90, 150)}, {rng.randrange(25, 45)}"))


def warm_start(tmp_path_factory, kind: str) -> Path:
    base = build_tiny_model(tmp_path_factory.mktemp(f"tiny-{kind}"), kind=kind, seed=0)
    rng = random.Random(kind)
    examples = [{"subject": s, "prompt_messages": first_turn_messages(s), "completion": f"```js\n{sketch_variant(rng)}```"}
                for s in SUBJECTS for _ in range(4)]
    out = tmp_path_factory.mktemp(f"policy-{kind}")
    result = run_sft(str(base), out, examples, epochs=30, learning_rate=5e-3, batch_size=4, quiet=True)
    assert result.last_loss < result.first_loss / 3
    return out


def tiny_config(model: Path, out: Path, **overrides) -> TrainConfig:
    values = dict(model=str(model), turns=2, num_generations=2, prompts_per_step=1, max_completion_length=320,
                  steps=1, subjects=SUBJECTS, learning_rate=5e-4, warmup_steps=0, save_steps=1,
                  output_dir=str(out), report_to="none", seed=3, render_backend="llvmpipe-f16",
                  # The test policy is over-fitted on a few small sketches: sampled at 0.5 its
                  # sketches render (at 1.0 the 0.5M-parameter model still garbles them).
                  temperature=0.5)
    values.update(overrides)
    return TrainConfig(**values)
