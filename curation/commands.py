"""`watercolour pool`: build, import, curate and inspect reference pools.

Curation renders and generates (it stages a policy's paintings as candidates), so it sits
above env/, agent/, rewards/ and multiturn_trainer/; rewards/ only loads pools and draws
references from them.
"""

from __future__ import annotations

import json

from rewards.pool import STARTER_POOL_DIR, ReferencePool, import_imagefolder


def cmd_pool(args) -> int:
    if args.pool_command == "build":
        from curation.build import build

        build(args)
        return 0
    if args.pool_command == "serve":
        from curation.app import serve

        serve(args.pool, host=args.host, port=args.port)
        return 0
    if args.pool_command == "build-starter":
        from curation.starter import build_starter_pool

        pool = build_starter_pool(args.out)
        print(f"starter pool: {pool.counts()} in {pool.root}")
        return 0
    if args.pool_command == "import":
        pool = import_imagefolder(args.source, args.out)
        print(f"imported: {pool.counts()} in {pool.root}")
        return 0
    if args.pool_command == "stats":
        from curation.tools import format_statistics, pool_statistics

        stats = pool_statistics(ReferencePool.load(args.pool))
        print(json.dumps(stats, indent=1) if args.json else format_statistics(stats))
        return 0
    if args.pool_command == "export":
        from curation.tools import export_pool

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
        from curation.tools import format_consistency, judge_consistency

        overrides = {"base_url": args.judge_url, "probability_mode": args.judge_probability,
                     **({"model": args.judge_model} if args.judge_model else {})}
        try:
            report = judge_consistency(ReferencePool.load(args.pool), JudgeConfig(**overrides),
                                       samples=args.samples, seed=args.seed)
        except FatalScorerError as error:
            raise SystemExit(f"watercolour pool judge-check: {error}")
        print(json.dumps(report, indent=1) if args.json else format_consistency(report))
        return 0
    raise AssertionError(args.pool_command)


def add_parsers(sub) -> None:
    pool = sub.add_parser("pool", help="build, import and inspect reference pools")
    pool.set_defaults(func=cmd_pool)
    pool_sub = pool.add_subparsers(dest="pool_command", required=True)
    starter = pool_sub.add_parser("build-starter", help="render the project's examples into a starter pool")
    starter.add_argument("--out", default=str(STARTER_POOL_DIR))
    imp = pool_sub.add_parser("import", help="import a local imagefolder copy of a Hub pool dataset")
    imp.add_argument("source")
    imp.add_argument("--out", required=True)
    build = pool_sub.add_parser(
        "build", help="render and stage candidate paintings for a subject (from sketches, a run, or a policy)",
        usage="watercolour pool build --subject S (--from DIR|RUN_DIR | --policy MODEL | --endpoint URL) [options]")
    # Not argparse-required: --from RUN_DIR takes each painting's subject from its episode.
    build.add_argument("--subject", default=None,
                       help="required (except with --from RUN_DIR, whose episodes name theirs): "
                            "what the paintings show, the pool's subject label")
    build.add_argument("--pool", default=None, metavar="POOL_DIR", help="default: pools/<subject>")
    build.add_argument("--from", dest="source", default=None, metavar="DIR|RUN_DIR",
                       help="a folder of sketches (.js, or raw replies .txt/.md) or a run directory")
    build.add_argument("--policy", default=None, metavar="MODEL_DIR", help="generate with a local model")
    build.add_argument("--endpoint", default=None, metavar="URL",
                       help="generate with an OpenAI-compatible server (…/v1)")
    build.add_argument("--endpoint-model", default="default", help="--endpoint: model name")
    build.add_argument("--token", default=None,
                       help="--endpoint: bearer token (default: $WATERCOLOUR_ENDPOINT_TOKEN or $OPENAI_API_KEY)")
    build.add_argument("--count", type=int, default=8, help="--policy/--endpoint: sketches to generate")
    build.add_argument("--max-tokens", type=int, default=4096)
    build.add_argument("--temperature", type=float, default=1.0)
    build.add_argument("--seed", type=int, default=1, help="render seed (and sampling seed)")
    build.add_argument("--hps-url", default=None, help="also score candidates with an HPSv3 server")
    build.add_argument("--backend", default=None, help="renderer backend (default: the renderer's)")
    build.add_argument("--deadline", type=float, default=90.0, help="seconds per render")
    serve = pool_sub.add_parser("serve", help="rate a pool's candidates in a local web app (127.0.0.1)")
    serve.add_argument("pool", metavar="POOL_DIR")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8020)
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
    check.add_argument("--judge-probability", action="store_true",
                       help="check the judge's soft P(A) (verdict-token log-probabilities) instead of its verdicts")
    check.add_argument("--samples", type=int, default=8, help="rated paintings used as candidates")
    check.add_argument("--seed", type=int, default=0)
    check.add_argument("--json", action="store_true")
