"""Trainer callback: metrics.jsonl, the train-phase time, and one readable progress line per step."""

from __future__ import annotations

import math
import time

from transformers.trainer_callback import PrinterCallback, ProgressCallback

from multiturn_trainer.grpo import log_line


class RunCallback(ProgressCallback):
    """The progress bar over steps, with a compact line per step instead of a raw dict."""

    def __init__(self, trainer):
        super().__init__()
        self.trainer = trainer
        self._step_started = None

    @classmethod
    def install(cls, trainer) -> "RunCallback":
        trainer.remove_callback(PrinterCallback)
        trainer.remove_callback(ProgressCallback)
        callback = cls(trainer)
        trainer.add_callback(callback)
        return callback

    def on_step_begin(self, args, state, control, **kwargs):
        self._step_started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self._step_started is None:
            return
        metrics = getattr(self.trainer, "_last_step_metrics", {}) or {}
        rollout = sum(v for k, v in metrics.items() if k.startswith("time/") and v is not None)
        train_seconds = max(0.0, time.perf_counter() - self._step_started - rollout)
        self.trainer._metrics["train"]["time/train"].append(train_seconds)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "loss" not in logs:
            return
        record = {"step": state.global_step}
        record.update({k: _clean(v) for k, v in logs.items()})
        self.trainer.store.append_metrics(record)
        line = log_line(state.global_step, state.max_steps, record)
        if self.training_bar is not None:
            self.training_bar.write(line)
        else:
            print(line, flush=True)


def _clean(value):
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value
