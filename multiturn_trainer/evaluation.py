"""`watercolour eval`: does a policy that sees its own painting beat one that just paints again?

For every held-out subject, N episode slots (a subject and a render seed each). Two arms:

* **refine**: one K-turn episode per slot — the policy sees its painting and the feedback and
  revises, every turn scored;
* **independent**: the equal-budget baseline — K single-turn samples per slot from the same
  prompt and the same seed.

Both arms run through the one episode loop (``EpisodeRunner``) with the same policy and the
same scorer. The headline is the slot-paired gap between the K-turn episode's final painting
and the best (and the mean) of its K independent samples: refinement vs resampling at the
same number of sketches. Writes ``eval.json``, ``eval.png`` (reward by turn / by k with 95 %
intervals, both arms, drawn with matplotlib), ``gallery.html`` (replay's gallery: step 1 = refine, step 2 =
independent) and the episodes in the run-directory layout (``episodes.jsonl``, ``renders/``).
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from multiturn_trainer import evaluation_stats as stats
from multiturn_trainer.config import TrainConfig

REFINE_STEP, INDEPENDENT_STEP = 1, 2  # where each arm's episodes sit in the eval's run directory


def eval_slots(subjects: list[str], episodes: int, seed: int) -> list[tuple[str, int]]:
    """(subject, render seed) of every slot; seeds differ from the training rows' seeds."""
    return [(subject, 7_000_003 * (seed + 1) + 1000 * s + e)
            for s, subject in enumerate(subjects) for e in range(episodes)]


def run_eval(config: TrainConfig, policy, subjects: list[str], episodes: int, out: Path, environments=None,
             scorer=None, label: str = "policy", progress: bool = True) -> dict[str, Any]:
    """Both arms over ``episodes`` slots per subject with ``config.turns`` = K; returns eval.json's dict."""
    from tqdm import tqdm

    from multiturn_trainer.environments import make_environments
    from multiturn_trainer.rollout import EpisodeRunner, episode_records
    from multiturn_trainer.store import RunStore
    from multiturn_trainer.train import build_scorer, episode_row

    turns = config.turns
    slots = eval_slots(subjects, episodes, config.seed)
    store = RunStore(out, config.name)
    store.write_config(config.to_yaml())
    scorer = scorer or build_scorer(config)
    own_environments = environments is None
    environments = environments or make_environments(config)
    # One batch of turn k runs as long as its longest reply, so larger batches mean fewer
    # passes; on the 2-core CPU, though, the demo's eval in batches of 36 took 116-135 s
    # against ~105 s in batches of 16 (2026-12-01), so the default stays a training step's.
    batch_size = config.eval_batch_size or max(1, config.episodes_per_step)
    # The same slot rows for both arms: the baseline repeats each slot K times.
    arms = {
        "refine": (dataclasses.replace(config, turns=turns), [(i, 0) for i in range(len(slots))], REFINE_STEP),
        "independent": (dataclasses.replace(config, turns=1),
                        [(i, j) for i in range(len(slots)) for j in range(turns)], INDEPENDENT_STEP),
    }
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
                batch = runner.run(policy, rows, scored_turns=every_turn)
                tokens += sum(batch.completion_tokens)
                written = episode_records(batch, [(step, slot, j) for slot, j in chosen], store, config.name,
                                          scorer.mix)
                for record, (slot, j), error in zip(written, chosen, batch.policy_errors):
                    record.update(arm=arm, slot=slot, sample=j, policy_error=error)
                store.append_episodes(written)
                records.extend(written)
                bar.update(len(chosen))
            results[arm] = {"records": records, "tokens": tokens, "wall_s": time.perf_counter() - started}
    finally:
        bar.close()
        if own_environments:
            environments.close()
    report = summarise(results, len(slots), turns)
    report.update(policy=label, subjects=list(subjects), episodes_per_subject=episodes, turns=turns,
                  preset=scorer.mix.name, seed=config.seed)
    report["plot"] = str(draw_plot(out / "eval.png", report))
    from multiturn_trainer.replay import write_gallery

    report["gallery"] = str(write_gallery(store, results["refine"]["records"] + results["independent"]["records"],
                                          out / "gallery.html"))
    (out / "eval.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def _turn_value(record: dict[str, Any], turn: int, key: str):
    """A turn's field, None for infrastructure failures (never evidence about the policy)."""
    if record.get("policy_error") or turn > len(record["turns"]):
        return None
    found = record["turns"][turn - 1]
    if found.get("infrastructure_failed"):
        return None
    value = found.get(key)
    return float(value) if value is not None else None


def summarise(results: dict[str, dict[str, Any]], slots: int, turns: int) -> dict[str, Any]:
    """eval.json's figures from the two arms' episode records (pure: no rendering, no scoring)."""
    refine: list[dict | None] = [None] * slots
    independent: list[list[dict | None]] = [[None] * turns for _ in range(slots)]
    for record in results["refine"]["records"]:
        refine[record["slot"]] = record
    for record in results["independent"]["records"]:
        independent[record["slot"]][record["sample"]] = record

    def by_turn(key: str, turn: int) -> list[float | None]:
        return [None if r is None else _turn_value(r, turn, key) for r in refine]

    def samples(key: str) -> list[list[float | None]]:
        return [[None if r is None else _turn_value(r, 1, key) for r in row] for row in independent]

    first, final = by_turn("reward", 1), by_turn("reward", turns)
    rewards = samples("reward")
    best = [stats.best_of(row, turns) for row in rewards]
    mean_of_k = [stats.mean_of(row) for row in rewards]
    flat = lambda rows: [v for row in rows for v in row]  # noqa: E731
    return {
        "slots": slots,
        "refine": {
            "reward_by_turn": [stats.bootstrap_mean(by_turn("reward", t)) for t in range(1, turns + 1)],
            # Per slot, so two policies evaluated on the same slots compare pairwise.
            "final_by_slot": final,
            "gate_pass_by_turn": [stats.bootstrap_mean(by_turn("passed", t)) for t in range(1, turns + 1)],
            "coverage_by_turn": [stats.bootstrap_mean(by_turn("paint_fraction", t)) for t in range(1, turns + 1)],
            "tokens": results["refine"]["tokens"], "wall_s": round(results["refine"]["wall_s"], 2),
            "episodes": len(results["refine"]["records"]),
            "infrastructure_failures": sum(1 for r in results["refine"]["records"] if r.get("policy_error")),
        },
        "independent": {
            "best_of_k": [stats.bootstrap_mean([stats.best_of(row, k) for row in rewards]) for k in range(1, turns + 1)],
            "mean_reward": stats.bootstrap_mean(flat(rewards)),
            "gate_pass": stats.bootstrap_mean(flat(samples("passed"))),
            "coverage": stats.bootstrap_mean(flat(samples("paint_fraction"))),
            "tokens": results["independent"]["tokens"], "wall_s": round(results["independent"]["wall_s"], 2),
            "episodes": len(results["independent"]["records"]),
            "infrastructure_failures": sum(1 for r in results["independent"]["records"] if r.get("policy_error")),
        },
        "win_rate_final_over_first": stats.win_rate(final, first),
        "final_minus_first": stats.paired_difference(final, first),
        "final_minus_best_of_k": stats.paired_difference(final, best),
        "final_minus_mean_of_k": stats.paired_difference(final, mean_of_k),
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
    """``eval_steps``: the policy being trained, without gradients, on the held-out subjects.

    The same two arms as `watercolour eval`, through the trainer's own environments and
    scorer; written to ``RUN_DIR/eval/step-N/`` (eval.json, plot, gallery)."""
    import torch

    from agent.subjects import resolve
    from multiturn_trainer.policies import local_policy

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
        f"cost: refine {refine['tokens']} tokens {refine['wall_s']:.0f} s; independent {independent['tokens']} tokens "
        f"{independent['wall_s']:.0f} s; infrastructure failures {refine['infrastructure_failures']} + "
        f"{independent['infrastructure_failures']}",
    ]
    return "\n".join(lines)


def draw_plot(path: Path, report: dict[str, Any]) -> Path:
    """Reward by turn (refine) and best-of-k (independent) with their 95 % intervals."""
    from multiturn_trainer.plots import error_bar_plot

    series = [("refine: reward at turn k", report["refine"]["reward_by_turn"]),
              ("independent: best of k", report["independent"]["best_of_k"])]
    return error_bar_plot(path, series, title=f"eval: {report['policy']}  reward with 95 % intervals",
                          xlabel="turn k (refine) / samples k (independent)", ylabel="reward")


# --- command line ----------------------------------------------------------------------------

def add_parser(sub) -> None:
    parser = sub.add_parser("eval", help="K-turn refinement vs K independent samples on held-out subjects")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--policy", metavar="DIR", help="a checkpoint (LoRA adapter or model folder)")
    source.add_argument("--endpoint", metavar="URL", help="an OpenAI-compatible chat endpoint (…/v1)")
    parser.add_argument("--endpoint-model", metavar="M", default=None, help="--endpoint: the served model's name")
    parser.add_argument("--token", default=None,
                        help="--endpoint: bearer token (default: $WATERCOLOUR_ENDPOINT_TOKEN or $OPENAI_API_KEY)")
    parser.add_argument("--concurrency", type=int, default=8, help="--endpoint: requests in flight at most")
    parser.add_argument("--config", default=None,
                        help="generation, rendering and reward settings (default: the run's config.yaml next "
                             "to --policy, else the defaults)")
    parser.add_argument("--subjects", default="eval",
                        help="'eval' (held out, default) or 'train' from configs/subjects.yaml, or subjects "
                             "separated by ';'")
    parser.add_argument("--episodes", type=int, default=4, metavar="N", help="episode slots per subject")
    parser.add_argument("--turns", type=int, default=None, metavar="K", help="default: the config's turns")
    parser.add_argument("--preset", default=None, metavar="P", help="reward preset (default: the config's)")
    parser.add_argument("--max-tokens", type=int, default=None, help="per turn (default: the config's)")
    parser.add_argument("--temperature", type=float, default=None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=None, metavar="B",
                        help="episodes generated together (default: the config's eval_batch_size, else a "
                             "training step's episodes)")
    parser.add_argument("--out", metavar="DIR", default=None, help="default: out/eval/<policy name>")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(func=cmd_eval)


def _base_config(args) -> TrainConfig:
    from multiturn_trainer.config import load_config

    if args.config:
        return load_config(args.config)
    if args.policy:
        folder = Path(args.policy).resolve()
        for parent in (folder.parent, folder.parent.parent):  # RUN/adapter, RUN/checkpoints/step-N
            if (parent / "config.yaml").is_file():
                return load_config(parent / "config.yaml")
    return TrainConfig(model=args.policy or "endpoint")


def cmd_eval(args) -> int:
    from agent.subjects import resolve

    if args.endpoint and not args.endpoint_model:
        raise SystemExit("watercolour eval: --endpoint needs --endpoint-model")
    if args.episodes < 1:
        raise SystemExit("watercolour eval: --episodes must be >= 1")
    config = _base_config(args)
    label = args.policy or f"{args.endpoint_model} at {args.endpoint}"
    name = Path(args.policy).name if args.policy else args.endpoint_model
    out = Path(args.out or f"out/eval/{name}")
    if (out / "episodes.jsonl").is_file():
        raise SystemExit(f"watercolour eval: {out} already holds an eval; choose another --out")
    overrides = {"output_dir": str(out), "run_name": f"eval-{name}", "report_to": "none", "resume": False}
    for key, value in (("turns", args.turns), ("reward_preset", args.preset), ("seed", args.seed),
                       ("max_completion_length", args.max_tokens), ("temperature", args.temperature),
                       ("eval_batch_size", args.batch_size)):
        if value is not None:
            overrides[key] = value
    config = dataclasses.replace(config, **overrides)
    chosen = resolve(args.subjects)
    if not chosen:
        raise SystemExit("watercolour eval: no subjects")
    if args.policy:
        from multiturn_trainer.policies import local_policy

        policy = local_policy(config, Path(args.policy))
    else:
        from multiturn_trainer.policies import endpoint_policy

        policy = endpoint_policy(config, args.endpoint, args.endpoint_model, args.token, args.concurrency)
    report = run_eval(config, policy, chosen, args.episodes, out, label=label, progress=not args.no_progress)
    print(table(report))
    print(f"eval: wrote {out / 'eval.json'}, plot {report['plot']}, gallery {report['gallery']}")
    return 0
