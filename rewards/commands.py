"""The reward side's command-line verbs: `score` and `pool`."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path

from env.commands import report_missing_files
from env.contract import SketchContract
from env.gate import static_gate
from env.pigment import paint_fraction_of_png
from rewards.mixer import PaintingToScore, build_scorer
from rewards.pool import ReferencePool, import_imagefolder
from rewards.starter_pool import STARTER_POOL_DIR, build_starter_pool


def find_source(image: Path, sources_dir: Path | None, pool: ReferencePool | None) -> str | None:
    """The sketch behind a painting: IMAGE.js beside it, STEM.js in --sources, or the pool's."""
    stems = [image.stem, re.sub(r"^\d+-", "", image.stem)]  # `render --out-dir` writes 000-stem.png
    folders = [image.parent] + ([sources_dir] if sources_dir else [])
    for folder in folders:
        for stem in stems:
            candidate = folder / f"{stem}.js"
            if candidate.is_file():
                return candidate.read_text(encoding="utf-8", errors="replace")
    if pool is not None:
        for entry in pool.entries():
            if (pool.root / entry.file).resolve() == image.resolve():
                return pool.source(entry)
    return None


def cmd_score(args) -> int:
    images = [Path(p) for p in args.images]
    if report_missing_files("score", images):
        return 2
    pool = ReferencePool.load(args.pool)
    scorer = build_scorer(args.preset, pool, judge_url=args.judge_url, judge_model=args.judge_model,
                          hps_url=args.hps_url)
    contract = SketchContract()
    paintings = []
    for image in images:
        png = image.read_bytes()
        code = find_source(image, Path(args.sources) if args.sources else None, pool)
        if code is None:
            print(f"watercolour score: no sketch source for {image} (looked for {image.stem}.js): length = 0",
                  file=sys.stderr)
        try:
            painted = paint_fraction_of_png(png) >= contract.min_paint_fraction
        except OSError:
            print(f"watercolour score: {image} is not a readable image", file=sys.stderr)
            png, painted = None, False
        passed = painted and (code is None or static_gate(code, contract).passed)
        paintings.append(PaintingToScore(png, code, passed, subject=args.subject or "", group_seed=args.seed))
    results = asyncio.run(scorer.score_many(paintings))
    for image, result in zip(images, results):
        record = {"image": str(image), **result.as_record()}
        if args.json:
            print(json.dumps(record), flush=True)
        else:
            parts = "  ".join(f"{k}={'null' if v is None else f'{v:.3f}'}" for k, v in result.components.items())
            total = "null" if result.total is None else f"{result.total:.3f}"
            print(f"{image}: total={total}  {parts}")
    return 0


def cmd_pool(args) -> int:
    if args.pool_command == "build":
        from rewards.pool_build import build

        build(args)
        return 0
    if args.pool_command == "serve":
        from rewards.pool_app import serve

        serve(args.pool, host=args.host, port=args.port)
        return 0
    if args.pool_command == "build-starter":
        pool = build_starter_pool(args.out)
        print(f"starter pool: {pool.counts()} in {pool.root}")
        return 0
    if args.pool_command == "import":
        pool = import_imagefolder(args.source, args.out)
        print(f"imported: {pool.counts()} in {pool.root}")
        return 0
    if args.pool_command == "stats":
        from rewards.pool_tools import format_statistics, pool_statistics

        stats = pool_statistics(ReferencePool.load(args.pool))
        print(json.dumps(stats, indent=1) if args.json else format_statistics(stats))
        return 0
    if args.pool_command == "export":
        from rewards.pool_tools import export_pool

        tiers = [t.strip() for t in args.tiers.split(",") if t.strip()]
        try:
            out = export_pool(ReferencePool.load(args.pool), args.out, tiers)
        except (FileExistsError, ValueError) as error:
            raise SystemExit(f"watercolour pool export: {error}")
        print(f"exported {', '.join(tiers)} of {args.pool} to {out} (imagefolder: {out}/metadata.jsonl)")
        return 0
    if args.pool_command == "judge-check":
        from rewards.http_retry import FatalScorerError
        from rewards.judge import JudgeConfig
        from rewards.pool_tools import format_consistency, judge_consistency

        overrides = {"base_url": args.judge_url, **({"model": args.judge_model} if args.judge_model else {})}
        try:
            report = judge_consistency(ReferencePool.load(args.pool), JudgeConfig(**overrides),
                                       samples=args.samples, seed=args.seed)
        except FatalScorerError as error:
            raise SystemExit(f"watercolour pool judge-check: {error}")
        print(json.dumps(report, indent=1) if args.json else format_consistency(report))
        return 0
    raise AssertionError(args.pool_command)


def cmd_hps_serve(args) -> int:
    from rewards.hps_server import main

    main(args.argv)
    return 0


def add_parsers(sub) -> None:
    score = sub.add_parser("score", help="score paintings with a reward preset")
    score.add_argument("images", nargs="+", metavar="IMAGE")
    score.add_argument("--preset", default="style-offline",
                       help="a preset name in configs/rewards/ or a YAML file (default: %(default)s, CPU only)")
    score.add_argument("--subject", default=None)
    score.add_argument("--pool", default=str(STARTER_POOL_DIR))
    score.add_argument("--sources", default=None, help="folder holding STEM.js sketch sources")
    score.add_argument("--judge-url", default=None)
    score.add_argument("--judge-model", default=None)
    score.add_argument("--hps-url", default=None)
    score.add_argument("--seed", type=int, default=0, help="reference draw seed (one per GRPO group)")
    score.add_argument("--json", action="store_true")
    score.set_defaults(func=cmd_score)

    pool = sub.add_parser("pool", help="build, import and inspect reference pools")
    pool.set_defaults(func=cmd_pool)
    pool_sub = pool.add_subparsers(dest="pool_command", required=True)
    starter = pool_sub.add_parser("build-starter", help="render the project's examples into a starter pool")
    starter.add_argument("--out", default=str(STARTER_POOL_DIR))
    imp = pool_sub.add_parser("import", help="import a local imagefolder copy of a Hub pool dataset")
    imp.add_argument("source")
    imp.add_argument("--out", required=True)
    from rewards.pool_build import add_arguments as add_build_arguments

    build = pool_sub.add_parser(
        "build", help="render and stage candidate paintings for a subject (from sketches, a run, or a policy)",
        usage="watercolour pool build --subject S (--from DIR|RUN_DIR | --policy MODEL | --endpoint URL) [options]")
    add_build_arguments(build)
    serve = pool_sub.add_parser("serve", help="rate a pool's candidates in a local web app (127.0.0.1)")
    serve.add_argument("pool", metavar="POOL_DIR")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8020)
    # hps-serve parses its own options (rewards/hps_server.py), `--help` included.
    hps = sub.add_parser("hps-serve", add_help=False,
                         help="serve HPSv3 scores over HTTP (options: see `watercolour hps-serve --help`)")
    hps.set_defaults(func=cmd_hps_serve, own_options=True)

    stats = pool_sub.add_parser("stats", help="counts per tier and subject, paint coverage, judge reference draws")
    stats.add_argument("pool", nargs="?", default=str(STARTER_POOL_DIR))
    stats.add_argument("--json", action="store_true")
    export = pool_sub.add_parser("export", help="write a pool as an imagefolder dataset (Hub layout)")
    export.add_argument("pool")
    export.add_argument("out", help="a new or empty folder")
    export.add_argument("--tiers", default="love,okay", help="comma-separated rated tiers (default: love,okay)")
    check = pool_sub.add_parser("judge-check", help="how consistent the judge is on a pool's own paintings")
    check.add_argument("pool")
    check.add_argument("--judge-url", required=True, help="OpenAI-compatible base URL, e.g. http://host:8000/v1")
    check.add_argument("--judge-model", default=None)
    check.add_argument("--samples", type=int, default=8, help="rated paintings used as candidates")
    check.add_argument("--seed", type=int, default=0)
    check.add_argument("--json", action="store_true")
