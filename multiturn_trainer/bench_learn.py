"""`watercolour bench learn`: does GRPO move the tiny policy towards its reward? Seeds x arms.

For every seed, the arms train from the same warm start with the same preset:

* **multi**: the preset's K-turn episodes (K >= 2), ``steps`` GRPO steps;
* **single**: ``turns: 1``, trained until it has generated as many tokens as the multi arm of the
  same seed did (an equal generation budget, counted from the episodes' own token counts);
* **blind** (not by default): the multi arm with ``show_painting: false``, its revision turns
  carrying the feedback and the sketch but not the painting, trained and evaluated so.

Each arm's run is a normal run directory (``OUT/seed-N/ARM``). From its episodes: the first and
last third of the steps' reward, gate pass and blank-canvas rate of the rewarded painting, each
with a bootstrap 95 % interval over episodes, and last minus first third. Then the held-out
`watercolour eval` of the trained adapter against the warm start (the same slots, K turns for
every arm; the blind arm and its warm start blind). Writes ``OUT/learn.json`` (every number) and
``OUT/learn.png`` (reward, gate pass and turn gain against step and against generated tokens),
and ends each arm and seed with one line::

    learn: arm=NAME seed=N steps=N reward_rise=E(LO..HI) gate_rise=E(LO..HI) eval_final_minus_best_of_k=E(LO..HI)
           eval_turn_gain=E(LO..HI) eval_final_minus_best_at_equal_tokens=E(LO..HI) tokens_by_turn=T1/T2

and, where both multi and blind ran, a seed's line for what seeing the painting bought::

    learn: seed=N eval_multi_minus_blind=E(LO..HI)

(the held-out final-turn reward of the multi arm minus the blind arm's, paired by slot).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import Any

from multiturn_trainer.evaluation_stats import format_interval, format_tokens
from multiturn_trainer.plots import pyplot, save
from multiturn_trainer.report import curves, run_figures
from multiturn_trainer.store import RunStore

DEFAULT_CONFIG = "configs/learn.yaml"
ARMS = ("multi", "single", "blind")


def eval_figures(report: dict[str, Any], warm_start: dict[str, Any] | None = None) -> dict[str, Any]:
    """The held-out figures an arm's block prints; with the warm start's report on the same slots,
    also the final-turn reward against it, slot by slot."""
    from multiturn_trainer.evaluation import final_difference

    return {"reward_final": report["refine"]["reward_by_turn"][-1], "final_minus_first": report["final_minus_first"],
            "final_minus_best_of_k": report["final_minus_best_of_k"],
            "final_minus_best_at_equal_tokens": report["refine"]["final_minus_best_at_equal_tokens"],
            "tokens_by_turn": [t["estimate"] for t in report["refine"]["tokens_by_turn"]],
            "gate_pass_final": report["refine"]["gate_pass_by_turn"][-1],
            "final_minus_warm_start": final_difference(report, warm_start) if warm_start else None}


def arm_lines(arm: str, seed: int, figures: dict[str, Any], trained: dict | None, warm: dict | None) -> list[str]:
    """The printed block of one arm and seed; the last line is the verdict line."""
    lines = [f"learn: arm={arm} seed={seed}: {figures['steps']} steps, {figures['episodes']} episodes, "
             f"{figures['tokens']} generated tokens (by turn {format_tokens(figures.get('tokens_by_turn'))})"]
    for what, name in (("reward", "reward"), ("gate", "gate pass"), ("blank", "blank canvas")):
        f = figures[what]
        lines.append(f"  {name:<12} first third {format_interval(f['first_third'])}  last third {format_interval(f['last_third'])}"
                     f"  rise {format_interval(f['rise'])}")
    if trained is not None and warm is not None:
        for key, name in (("reward_final", "final-turn reward"), ("final_minus_first", "turn gain"),
                          ("final_minus_best_of_k", "final - best of k"),
                          ("final_minus_best_at_equal_tokens", "final - best at equal tokens")):
            lines.append(f"  held-out {name:<18} trained {format_interval(trained[key])}  warm start {format_interval(warm[key])}")
        lines.append(f"  held-out final-turn reward, trained - warm start (paired by slot) "
                     f"{format_interval(trained.get('final_minus_warm_start'))}")
    best = trained["final_minus_best_of_k"] if trained else None
    equal = trained["final_minus_best_at_equal_tokens"] if trained else None
    gain = trained["final_minus_first"] if trained else None
    lines.append(f"learn: arm={arm} seed={seed} steps={figures['steps']} reward_rise={format_interval(figures['reward']['rise'])} "
                 f"gate_rise={format_interval(figures['gate']['rise'])} eval_final_minus_best_of_k={format_interval(best)} "
                 f"eval_turn_gain={format_interval(gain)} eval_final_minus_best_at_equal_tokens={format_interval(equal)} "
                 f"tokens_by_turn={format_tokens(figures.get('tokens_by_turn'))}")
    return lines


def multi_minus_blind_line(seed: int, difference: dict | None) -> str:
    """The seed's verdict on seeing the painting: held-out final-turn reward, multi - blind, paired by
    slot (``nan`` without the evals)."""
    return f"learn: seed={seed} eval_multi_minus_blind={format_interval(difference)}"


def draw(path: Path, results: list[dict[str, Any]]) -> Path:
    """Reward, gate pass and turn gain against step (top) and generated tokens (bottom)."""

    plt = pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(13, 7), dpi=100)
    styles = {"multi": "-", "single": "--", "blind": ":"}
    for result in results:
        rows = result["curve"]
        label = f"{result['arm']} seed {result['seed']}"
        for column, key in enumerate(("reward", "gate", "turn_gain")):
            for row_index, x_key in enumerate(("step", "tokens")):
                ax = axes[row_index][column]
                xs = [r[x_key] for r in rows if r[key] is not None]
                ys = [r[key] for r in rows if r[key] is not None]
                if xs:
                    ax.plot(xs, ys, styles.get(result["arm"], "-"), marker=".", label=label)
    for column, title in enumerate(("reward (mean per step)", "gate pass (rewarded painting)",
                                    "turn gain (final - turn 1)")):
        for row_index, xlabel in enumerate(("GRPO step", "generated tokens")):
            ax = axes[row_index][column]
            ax.set_title(title, fontsize=10)
            ax.set_xlabel(xlabel)
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("bench learn: per-step means, multi-turn (solid), single-turn (dashed), blind multi-turn (dotted)",
                 fontsize=11)
    return save(fig, path)


def run_bench(config, seeds: list[int], arms: list[str], out: Path, do_eval: bool = True) -> dict[str, Any]:
    """Each arm runs the demo's experiment (`train`, then `held_out_eval` of the warm start and
    the trained adapter) with the arm's config."""
    # The trainer, the eval and the model (torch) are imported where they run, not with this
    # module: `watercolour bench learn --help` must answer at once.
    from multiturn_trainer.evaluation import final_difference, held_out_eval
    from multiturn_trainer.resources import ensure_model
    from multiturn_trainer.train import train

    out.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    comparisons: list[dict[str, Any]] = []
    started = time.perf_counter()
    multi_turns = config.turns if config.turns > 1 else 2

    ensure_model(config)  # the warm start, once, before any arm (each arm would build it otherwise)
    for seed in seeds:
        # The warm start's held-out eval by show_painting: an arm is compared with the warm start
        # evaluated as the arm is (the blind arm with a blind one), so "trained - warm start" is
        # what training bought, not what the painting is worth.
        warm: dict[bool, dict[str, Any]] = {}
        budget = None
        reports: dict[str, dict[str, Any]] = {}  # each arm's held-out eval of this seed
        for arm in arms:
            arm_dir = out / f"seed-{seed}" / arm
            if arm_dir.exists():
                shutil.rmtree(arm_dir)
            if arm in ("multi", "blind"):
                arm_config = dataclasses.replace(config, seed=seed, turns=multi_turns, output_dir=str(arm_dir / "run"),
                                                 report_to="none", run_name=f"learn-{arm}-{seed}")
                if arm == "blind":
                    arm_config = dataclasses.replace(arm_config, show_painting=False)
                token_budget = None
            else:
                # Equal generation budget: as many tokens as the multi arm of this seed generated
                # (twice its steps as a ceiling; the callback stops it when the budget is spent).
                steps = config.steps * multi_turns * 2 if budget else config.steps * multi_turns
                arm_config = dataclasses.replace(config, seed=seed, turns=1, steps=steps,
                                                 output_dir=str(arm_dir / "run"), report_to="none",
                                                 run_name=f"learn-{arm}-{seed}")
                token_budget = budget
            arm_started = time.perf_counter()
            summary = train(arm_config, token_budget=token_budget)
            episodes = RunStore(arm_dir / "run", arm_config.name).read_episodes()
            figures = run_figures(episodes)
            if arm == "multi":
                budget = figures["tokens"]
            trained = warm_figures = None
            if do_eval:
                # Every arm is evaluated as a K-turn refiner on the same held-out slots.
                eval_config = dataclasses.replace(arm_config, turns=multi_turns)
                seeing = eval_config.show_painting
                if seeing not in warm:
                    name = "warm-start-eval" if seeing else "warm-start-eval-blind"
                    warm[seeing] = held_out_eval(eval_config, Path(config.model), out / f"seed-{seed}" / name,
                                                 "warm start" if seeing else "warm start, blind", progress=False)
                warm_figures = eval_figures(warm[seeing])
                reports[arm] = held_out_eval(eval_config, summary.adapter, arm_dir / "eval", f"{arm} seed {seed}",
                                             progress=False)
                trained = eval_figures(reports[arm], warm[seeing])
            result = {"arm": arm, "seed": seed, "run_dir": str(arm_dir / "run"), "figures": figures,
                      "eval": {"trained": trained, "warm_start": warm_figures}, "curve": curves(episodes),
                      "wall_s": round(time.perf_counter() - arm_started, 1)}
            results.append(result)
            print("\n".join(arm_lines(arm, seed, figures, trained, warm_figures)), flush=True)
        if "multi" in arms and "blind" in arms:
            difference = final_difference(reports["multi"], reports["blind"]) if do_eval else None
            comparisons.append({"seed": seed, "multi_minus_blind": difference})
            print(multi_minus_blind_line(seed, difference), flush=True)
    report = {"config": dataclasses.asdict(config), "seeds": seeds, "arms": arms, "results": results,
              "comparisons": comparisons, "wall_s": round(time.perf_counter() - started, 1)}
    report["plot"] = str(draw(out / "learn.png", results))
    (out / "learn.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"learn: wrote {out / 'learn.json'} and {report['plot']} ({report['wall_s']:.0f} s)", flush=True)
    return report
