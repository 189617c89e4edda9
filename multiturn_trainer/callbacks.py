"""Trainer callback: metrics.jsonl, the train-phase time, one readable progress line per step, and
each step's contact sheet in trackio."""

from __future__ import annotations

import math
import time

from transformers.trainer_callback import PrinterCallback, ProgressCallback, TrainerCallback

from multiturn_trainer.evaluation import evaluate_trainer_policy
from multiturn_trainer.grpo import log_line


class TokenBudget(TrainerCallback):
    """Ends training once the run (``store``) has generated ``budget`` tokens (bench learn's
    single-turn arm gets the multi-turn arm's generation budget)."""

    def __init__(self, store, budget: int):
        self.store = store
        self.budget = budget

    def generated(self) -> int:
        return sum(int(e.get("completion_tokens") or 0) for e in self.store.read_episodes())

    def on_step_end(self, args, state, control, **kwargs):
        if self.generated() >= self.budget:
            control.should_training_stop = True
        return control


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
        # First in line, so that the contact sheet this callback adds to a step's logs reaches
        # the reporting integrations (trackio) in the same log call as the step's metrics.
        trainer.callback_handler.callbacks.insert(0, callback)
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
        every = self.trainer.run_config.held_out_eval_steps
        if every and (state.global_step % every == 0 or state.global_step >= state.max_steps):
            # Before TRL logs the step, so the eval/* figures land in the same metrics.jsonl line.
            # Every process evaluates the same held-out slots (the policy is replicated).
            started = time.perf_counter()
            for name, value in evaluate_trainer_policy(self.trainer, state.global_step).items():
                if value is not None:
                    self.trainer._metrics["train"][name].append(value)
            self.trainer._metrics["train"]["time/eval"].append(time.perf_counter() - started)
        super().on_step_end(args, state, control, **kwargs)  # advances the progress bar

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
        sheet = self.trainer.store.step_dir(state.global_step) / "contact_sheet.png"
        if sheet.is_file() and _reports_only_to_trackio(args):
            import trackio

            # Same log call as the metrics (trackio's own step), so the dashboard shows the
            # paintings next to the curves; other integrations would not know trackio.Image.
            logs["contact_sheet"] = trackio.Image(str(sheet), caption=f"step {state.global_step}")


def _reports_only_to_trackio(args) -> bool:
    return list(args.report_to or []) == ["trackio"]


def _clean(value):
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value
