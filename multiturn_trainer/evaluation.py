"""`watercolour eval`: does a policy that sees its own painting beat one that just paints again?

For every held-out subject, N episode slots (a subject and a render seed each). Two arms:

* **refine**: one K-turn episode per slot — the policy sees its painting and the feedback and
  revises, every turn scored;
* **independent**: the equal-budget baseline — K single-turn samples per slot from the same
  prompt and the same seed;
* **refine_full** / **refine_edit** (``compare_formats``): the K-turn episode again with the other
  ``revision_format`` (revisions as whole sketches, or as SEARCH/REPLACE edits);
* **refine_blind** (``blind``): the K-turn episode again with ``show_painting: false``, the
  feedback and the sketch but not the painting. ``refine_minus_refine_blind`` (final-turn
  reward, paired by slot) is what seeing the painting adds to the diagnostics.

Sketches are not tokens: an edit revision costs a fraction of a first draft. So each refine arm
is also compared at an equal budget of generated tokens: per slot, the best of as many
independent samples as fit in the tokens that slot's episode generated (at least one).

Both arms run through the one episode loop (``EpisodeRunner``) with the same policy and the
same scorer. The headline is the slot-paired gap between the K-turn episode's final painting
and the best (and the mean) of its K independent samples: refinement vs resampling at the
same number of sketches. Writes ``eval.json``, ``eval.png`` (reward by turn / by k with 95 %
intervals, both arms, drawn with matplotlib), ``gallery.html`` (replay's gallery: step 1 = refine, step 2 =
independent, step 3 = the other format, step 4 = blind) and the episodes in the run-directory layout
(``episodes.jsonl``, ``renders/``).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from agent.subjects import resolve
from multiturn_trainer import evaluation_stats as stats
from multiturn_trainer.config import TrainConfig
from multiturn_trainer.env_backends import make_environments
from multiturn_trainer.plots import error_bar_plot
from multiturn_trainer.replay import write_html_gallery
from multiturn_trainer.resources import episode_row, local_policy, scorer_for
from multiturn_trainer.rollout import EpisodeRunner, run_into_store
from multiturn_trainer.store import RunStore

# Where each arm's episodes sit in the eval's run directory.
REFINE_STEP, INDEPENDENT_STEP, OTHER_FORMAT_STEP, BLIND_STEP = 1, 2, 3, 4


def eval_slots(subjects: list[str], episodes: int, seed: int) -> list[tuple[str, int]]:
    """(subject, render seed) of every slot; seeds differ from the training rows' seeds."""
    return [(subject, 7_000_003 * (seed + 1) + 1000 * s + e)
            for s, subject in enumerate(subjects) for e in range(episodes)]


def run_eval(config: TrainConfig, policy, subjects: list[str], episodes: int, out: Path, environments=None,
             scorer=None, label: str = "policy", progress: bool = True,
             compare_formats: bool = False, blind: bool = False) -> dict[str, Any]:
    """Both arms over ``episodes`` slots per subject with ``config.turns`` = K; returns eval.json's dict.
    ``compare_formats``: also refine with the other revision format (``refine_full`` or ``refine_edit``).
    ``blind``: also refine without showing the painting (``refine_blind``); skipped, with the reason in
    ``blind_skipped``, where ``refine`` does not show it either."""
    turns = config.turns
    slots = eval_slots(subjects, episodes, config.seed)
    store = RunStore(out, config.name)
    store.write_config(config.to_yaml())
    scorer = scorer or scorer_for(config)
    own_environments = environments is None
    environments = environments or make_environments(config)
    # A training step's batch: larger ones took longer on 2 cores (docs/experiments/demo-preset.md).
    batch_size = config.eval_batch_size or max(1, config.episodes_per_step)
    # The same slot rows for both arms: the baseline repeats each slot K times.
    arms = {
        "refine": (dataclasses.replace(config, turns=turns), [(i, 0) for i in range(len(slots))], REFINE_STEP),
        "independent": (dataclasses.replace(config, turns=1),
                        [(i, j) for i in range(len(slots)) for j in range(turns)], INDEPENDENT_STEP),
    }
    if compare_formats and turns > 1:
        other = "full" if config.revision_format == "edit" else "edit"
        arms[f"refine_{other}"] = (dataclasses.replace(config, revision_format=other),
                                   [(i, 0) for i in range(len(slots))], OTHER_FORMAT_STEP)
    blind_skipped = blind_skip_reason(config, policy) if blind else None
    if blind and blind_skipped is None:
        arms["refine_blind"] = (dataclasses.replace(config, show_painting=False),
                                [(i, 0) for i in range(len(slots))], BLIND_STEP)
    results: dict[str, dict[str, Any]] = {}
    bar = tqdm(total=sum(len(places) for _, places, _ in arms.values()), desc="eval", unit="episode",
               disable=not progress)
    try:
        for arm, (arm_config, places, step) in arms.items():
            runner = EpisodeRunner(arm_config, environments, scorer)
            every_turn = list(range(1, arm_config.turns + 1))
            started = time.perf_counter()
            tokens, records = 0, []
            for start in range(0, len(places), batch_size):
                chosen = places[start:start + batch_size]
                rows = [episode_row(arm_config, *slots[slot]) for slot, _ in chosen]
                batch, written = run_into_store(
                    runner, policy, rows, [(step, slot, j) for slot, j in chosen], store,
                    extra=lambda i, episode, arm=arm, chosen=chosen: {
                        "arm": arm, "slot": chosen[i][0], "sample": chosen[i][1], "policy_error": episode.policy_error},
                    scored_turns=every_turn)
                tokens += sum(episode.completion_tokens for episode in batch.episodes)
                records.extend(written)
                bar.update(len(chosen))
            results[arm] = {"records": records, "tokens": tokens, "wall_s": time.perf_counter() - started}
    finally:
        bar.close()
        if own_environments:
            environments.close()
    report = summarise_arms(results, len(slots), turns)
    report.update(policy=label, subjects=list(subjects), episodes_per_subject=episodes, turns=turns,
                  preset=scorer.mix.name, seed=config.seed, revision_format=config.revision_format,
                  show_painting=config.show_painting)
    if blind_skipped is not None:
        report["blind_skipped"] = blind_skipped
    report["plot"] = str(draw_plot(out / "eval.png", report))
    report["gallery"] = str(write_html_gallery(store, [r for arm in results.values() for r in arm["records"]],
                                               out / "gallery.html"))
    (out / "eval.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def held_out_eval(config: TrainConfig, checkpoint: Path, out: Path, label: str, environments=None, scorer=None,
                  progress: bool = True) -> dict[str, Any]:
    """``checkpoint`` (a trained adapter or its warm start) on the config's held-out subjects: how
    the demo and every `bench learn` arm compare the trained policy with where it started."""
    eval_config = dataclasses.replace(config, report_to="none")
    return run_eval(eval_config, local_policy(eval_config, checkpoint), resolve(config.eval_subjects),
                    config.eval_episodes, out, environments=environments, scorer=scorer, label=label,
                    progress=progress)


def blind_skip_reason(config: TrainConfig, policy) -> str | None:
    """Why the blind arm would be the ``refine`` arm over again (None: it would not be)."""
    if config.turns < 2:
        return "1 turn: there is no revision turn to show the painting in"
    if not getattr(policy, "sees_images", True):
        return "the policy is a text-only model: its revision turns never show the painting"
    if not config.show_painting:
        return "the config's show_painting is false: the refine arm is blind already"
    return None


def _turn(record: dict[str, Any] | None, turn: int) -> dict[str, Any] | None:
    """A turn of an episode record, None when it never ran or infrastructure failed (never
    evidence about the policy)."""
    if record is None or record.get("policy_error") or turn > len(record["turns"]):
        return None
    found = record["turns"][turn - 1]
    return None if found.get("infrastructure_failed") else found


def _turn_value(record: dict[str, Any] | None, turn: int, key: str):
    """A turn's field, None where ``_turn`` has no turn."""
    found = _turn(record, turn)
    value = None if found is None else found.get(key)
    return float(value) if value is not None else None


def lines_from_previous(previous: str | None, sketch: str | None) -> float | None:
    """Share of ``previous``'s lines that ``sketch`` contains verbatim (stripped, blank lines left
    out, counted as multisets); None when ``previous`` has no code.

    Near 1 for a revision that edits its draft, far lower for a sketch written afresh. Lines every
    sketch of a policy shares (its set-up, its helpers) count too, which is why eval reports the
    same share between two independent samples beside it."""
    def lines(code: str | None) -> Counter:
        return Counter(line.strip() for line in (code or "").splitlines() if line.strip())

    before = lines(previous)
    if not before:
        return None
    return sum((before & lines(sketch)).values()) / sum(before.values())


def _lines_kept(before: dict[str, Any] | None, after: dict[str, Any] | None) -> float | None:
    """``lines_from_previous`` of two turns, None unless both are usable (see ``_turn``)."""
    if before is None or after is None:
        return None
    return lines_from_previous(before.get("code"), after.get("code"))


def _tokens(record: dict[str, Any] | None) -> int | None:
    """Tokens an episode's policy generated, None when unknown (no record, a policy error, an older run)."""
    if record is None or record.get("policy_error"):
        return None
    return record.get("completion_tokens")


def equal_token_budget(episode_tokens: int | None, sample_tokens: list[int | None]) -> int | None:
    """How many independent samples fit in the tokens one refine episode generated: the longest
    prefix whose tokens add up to at most ``episode_tokens``, at least one. None when unknown."""
    if episode_tokens is None or not sample_tokens or any(t is None for t in sample_tokens):
        return None
    spent, count = 0, 0
    for tokens in sample_tokens:
        if spent + tokens > episode_tokens:
            break
        spent, count = spent + tokens, count + 1
    return max(1, count)


def summarise_arms(results: dict[str, dict[str, Any]], slots: int, turns: int) -> dict[str, Any]:
    """eval.json's figures from the arms' episode records (pure: no rendering, no scoring)."""
    independent: list[list[dict | None]] = [[None] * turns for _ in range(slots)]
    for record in results["independent"]["records"]:
        independent[record["slot"]][record["sample"]] = record

    def samples(key: str) -> list[list[float | None]]:
        return [[_turn_value(r, 1, key) for r in row] for row in independent]

    rewards = samples("reward")
    best = [stats.best_of(row, turns) for row in rewards]
    mean_of_k = [stats.mean(row) for row in rewards]
    sample_tokens = [[_tokens(r) for r in row] for row in independent]
    flat = lambda rows: [v for row in rows for v in row]  # noqa: E731

    def refine_arm(name: str) -> tuple[dict[str, Any], list[float | None], list[float | None]]:
        refine: list[dict | None] = [None] * slots
        for record in results[name]["records"]:
            refine[record["slot"]] = record

        def by_turn(key: str, turn: int) -> list[float | None]:
            return [_turn_value(r, turn, key) for r in refine]

        first, final = by_turn("reward", 1), by_turn("reward", turns)
        # Does a revision edit its draft or paint afresh? Per slot: turn k against turn k-1
        # (against sample j-1 of the same slot in the independent arm, below).
        revised = [stats.mean([_lines_kept(_turn(r, t - 1), _turn(r, t)) for t in range(2, turns + 1)])
                   for r in refine]
        budgets = [equal_token_budget(_tokens(r), row) for r, row in zip(refine, sample_tokens)]
        at_budget = [None if m is None else stats.best_of(row, m) for m, row in zip(budgets, rewards)]
        summary = {
            "reward_by_turn": [stats.bootstrap_mean(by_turn("reward", t)) for t in range(1, turns + 1)],
            # Per slot, so two policies evaluated on the same slots compare pairwise.
            "final_by_slot": final,
            "gate_pass_by_turn": [stats.bootstrap_mean(by_turn("passed", t)) for t in range(1, turns + 1)],
            "coverage_by_turn": [stats.bootstrap_mean(by_turn("paint_fraction", t)) for t in range(1, turns + 1)],
            "tokens_by_turn": [stats.bootstrap_mean(by_turn("completion_tokens", t)) for t in range(1, turns + 1)],
            "lines_from_previous": stats.bootstrap_mean(revised),
            "tokens": results[name]["tokens"], "wall_s": round(results[name]["wall_s"], 2),
            "episodes": len(results[name]["records"]),
            "infrastructure_failures": sum(1 for r in results[name]["records"] if r.get("policy_error")),
            # Refinement against resampling at the same generated tokens.
            "samples_at_equal_tokens": stats.bootstrap_mean(budgets),
            "final_minus_best_at_equal_tokens": stats.paired_difference(final, at_budget),
        }
        return summary, first, final

    refine, first, final = refine_arm("refine")
    resampled = [stats.mean([_lines_kept(_turn(row[j - 1], 1), _turn(row[j], 1)) for j in range(1, turns)])
                 for row in independent]
    others = {name: refine_arm(name) for name in results if name.startswith("refine_")}
    # What seeing the painting adds: the same slots refined with and without it.
    seeing = ({"refine_minus_refine_blind": stats.paired_difference(final, others["refine_blind"][2])}
              if "refine_blind" in others else {})
    return {
        "slots": slots,
        "refine": refine,
        **{name: arm[0] for name, arm in others.items()},
        "independent": {
            "best_of_k": [stats.bootstrap_mean([stats.best_of(row, k) for row in rewards]) for k in range(1, turns + 1)],
            "mean_reward": stats.bootstrap_mean(flat(rewards)),
            "gate_pass": stats.bootstrap_mean(flat(samples("passed"))),
            "coverage": stats.bootstrap_mean(flat(samples("paint_fraction"))),
            "lines_from_previous": stats.bootstrap_mean(resampled),
            "tokens_per_sample": stats.bootstrap_mean(flat(sample_tokens)),
            "tokens": results["independent"]["tokens"], "wall_s": round(results["independent"]["wall_s"], 2),
            "episodes": len(results["independent"]["records"]),
            "infrastructure_failures": sum(1 for r in results["independent"]["records"] if r.get("policy_error")),
        },
        "win_rate_final_over_first": stats.win_rate(final, first),
        "final_minus_first": stats.paired_difference(final, first),
        "final_minus_best_of_k": stats.paired_difference(final, best),
        "final_minus_mean_of_k": stats.paired_difference(final, mean_of_k),
        **seeing,
    }


def final_difference(report: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """Final-turn reward of ``report``'s policy minus ``baseline``'s, paired by slot: both evals
    must have run the same slots (the demo and `bench learn` evaluate trained and warm start so)."""
    if (report["subjects"], report["episodes_per_subject"], report["seed"]) != (
            baseline["subjects"], baseline["episodes_per_subject"], baseline["seed"]):
        raise ValueError("final_difference: the two evals ran different slots")
    return stats.paired_difference(report["refine"]["final_by_slot"], baseline["refine"]["final_by_slot"])


def headline(report: dict[str, Any]) -> dict[str, float | None]:
    """The numbers a training curve tracks, as ``eval/*`` metrics."""
    refine = report["refine"]["reward_by_turn"]
    return {
        "eval/reward_turn_1": refine[0]["estimate"],
        "eval/reward_final": refine[-1]["estimate"],
        "eval/final_minus_first": report["final_minus_first"]["estimate"],
        "eval/final_minus_best_of_k": report["final_minus_best_of_k"]["estimate"],
        "eval/final_minus_mean_of_k": report["final_minus_mean_of_k"]["estimate"],
        "eval/win_rate_final_over_first": report["win_rate_final_over_first"]["estimate"],
    }


def evaluate_trainer_policy(trainer, step: int) -> dict[str, float | None]:
    """``held_out_eval_steps``: the policy being trained, without gradients, on the held-out subjects.

    The same two arms as `watercolour eval`, through the trainer's own environments and
    scorer; written to ``RUN_DIR/eval/step-N/`` (eval.json, plot, gallery)."""
    config = trainer.run_config
    model = trainer.accelerator.unwrap_model(trainer.model)
    was_training = model.training
    policy = local_policy(config, None, model=model, processor=trainer.processing_class)
    try:
        with torch.no_grad():
            report = run_eval(dataclasses.replace(config, report_to="none"), policy,
                              resolve(config.eval_subjects), config.eval_episodes,
                              trainer.store.root / "eval" / f"step-{step}", environments=trainer.painting_envs,
                              scorer=trainer.scorer, label=f"step {step}", progress=False)
    finally:
        model.train(was_training)
    return headline(report)


def _fmt(summary: dict, sign: str = "") -> str:
    if summary["estimate"] is None:
        return "-"
    return f"{summary['estimate']:{sign}.3f} [{summary['low']:{sign}.3f}, {summary['high']:{sign}.3f}]"


def table(report: dict[str, Any]) -> str:
    """The short printed report: reward by turn / k for both arms, then the headline."""
    refine, independent = report["refine"], report["independent"]
    lines = [f"eval: {report['policy']} on {len(report['subjects'])} subjects x {report['episodes_per_subject']} "
             f"episodes, {report['turns']} turns, preset {report['preset']} (95 % bootstrap intervals)",
             f"{'turn/k':>6}  {'refine: reward at turn':<26}{'independent: best of k':<26}gate pass (refine)"]
    for t in range(report["turns"]):
        gate = refine["gate_pass_by_turn"][t]["estimate"]
        lines.append(f"{t + 1:>6}  {_fmt(refine['reward_by_turn'][t]):<26}{_fmt(independent['best_of_k'][t]):<26}"
                     f"{'-' if gate is None else f'{gate:.0%}'}")
    lines += [
        f"headline: final - best-of-{report['turns']} independent {_fmt(report['final_minus_best_of_k'], '+')}; "
        f"final - mean-of-{report['turns']} {_fmt(report['final_minus_mean_of_k'], '+')}",
        f"win rate turn {report['turns']} over turn 1: {_fmt(report['win_rate_final_over_first'])}",
        f"lines of the previous sketch kept: revision {_fmt(refine['lines_from_previous'])}; "
        f"independent sample {_fmt(independent['lines_from_previous'])}",
        f"cost: refine {refine['tokens']} tokens {refine['wall_s']:.0f} s; independent {independent['tokens']} tokens "
        f"{independent['wall_s']:.0f} s; infrastructure failures {refine['infrastructure_failures']} + "
        f"{independent['infrastructure_failures']}",
    ]
    # Each refine arm (the config's revision format, the other one when compared, the blind one)
    # against the best of the independent samples that fit in the same generated tokens.
    for name in refine_arms(report):
        arm = report[name]
        tokens = " / ".join(_fmt_number(t["estimate"]) for t in arm.get("tokens_by_turn", []))
        lines.append(f"{arm_label(report, name)}: tokens by turn {tokens}; final - best of "
                     f"{_fmt_number(arm['samples_at_equal_tokens']['estimate'])} independent at equal tokens "
                     f"{_fmt(arm['final_minus_best_at_equal_tokens'], '+')}; final "
                     f"{_fmt(arm['reward_by_turn'][-1])}")
    if "refine_minus_refine_blind" in report:
        lines.append(f"seeing the painting: final, refine - refine_blind (paired by slot) "
                     f"{_fmt(report['refine_minus_refine_blind'], '+')}")
    if "blind_skipped" in report:
        lines.append(f"blind arm skipped: {report['blind_skipped']}")
    return "\n".join(lines)


def refine_arms(report: dict[str, Any]) -> list[str]:
    """The report's refine arms: ``refine`` first, then the other format's, then the blind one."""
    return ["refine", *(name for name in ("refine_full", "refine_edit", "refine_blind") if name in report)]


def arm_label(report: dict[str, Any], name: str) -> str:
    """How the table names a refine arm: its revision format, and ", blind" where it did not see its painting."""
    own_format = name in ("refine_full", "refine_edit")
    fmt = name.removeprefix("refine_") if own_format else report.get("revision_format", "full")
    blind = name == "refine_blind" or not report.get("show_painting", True)
    return f"{fmt} revisions" + (", blind" if blind else "")


def _fmt_number(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def draw_plot(path: Path, report: dict[str, Any]) -> Path:
    """Reward by turn (refine, and refine_blind when it ran) and best-of-k (independent) with their
    95 % intervals."""
    series = [("refine: reward at turn k", report["refine"]["reward_by_turn"]),
              ("independent: best of k", report["independent"]["best_of_k"])]
    if "refine_blind" in report:
        series.append(("refine_blind (no painting): reward at turn k", report["refine_blind"]["reward_by_turn"]))
    return error_bar_plot(path, series, title=f"eval: {report['policy']}  reward with 95 % intervals",
                          xlabel="turn k (refine) / samples k (independent)", ylabel="reward")
