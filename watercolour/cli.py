"""`watercolour`: one command, subcommands dispatched to the card's folders."""

from __future__ import annotations

import argparse
import sys

from env.renderer import BACKENDS, DEFAULT_BACKEND


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="watercolour", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    render = sub.add_parser("render", help="gate and render sketches (raw model replies or .js files)")
    render.add_argument("files", nargs="+", metavar="FILE")
    render.add_argument("--seed", type=int, default=0)
    render.add_argument("--out-dir", default=None, help="write each PNG and a contact sheet here")
    render.add_argument("--json", action="store_true", help="one JSON object per file, one per line")
    render.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    render.add_argument("--deadline", type=float, default=90.0, metavar="SECONDS", help="per-render deadline")
    render.add_argument("--pool-size", type=int, default=None, help="browser processes (default: one per core)")

    serve = sub.add_parser("serve", help="run the OpenEnv server (WebSocket sessions)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--max-sessions", type=int, default=64)
    serve.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    serve.add_argument("--deadline", type=float, default=90.0, metavar="SECONDS")
    serve.add_argument("--pool-size", type=int, default=None)
    serve.add_argument("--token", default=None,
                       help="bearer token every request must carry (default: $WATERCOLOUR_TOKEN); "
                            "required to bind anything but 127.0.0.1")

    bench = sub.add_parser("bench", help="benchmarks that print ratios measured side by side")
    bench_sub = bench.add_subparsers(dest="bench_command", required=True)
    bench_render = bench_sub.add_parser("render", help="default backend vs the reference SwiftShader-GL path")
    bench_render.add_argument("files", nargs="*", metavar="SKETCH", help="default: examples/sketches/*.js")
    bench_render.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    bench_render.add_argument("--seed", type=int, default=1)
    bench_render.add_argument("--repeats", type=int, default=1)
    bench_render.add_argument("--deadline", type=float, default=180.0)
    from env.bench_serve import add_parser as add_bench_serve_parser

    add_bench_serve_parser(bench_sub)

    from rewards.commands import add_parsers as add_reward_parsers

    add_reward_parsers(sub)

    from multiturn_trainer.tiny_model import add_parser as add_tiny_parser

    add_tiny_parser(sub)

    from multiturn_trainer.config import add_parser as add_train_parsers

    add_train_parsers(sub)

    from multiturn_trainer.replay import add_parser as add_replay_parser

    add_replay_parser(sub)

    from multiturn_trainer.evaluation import add_parser as add_eval_parser

    add_eval_parser(sub)

    demo = sub.add_parser("demo", help="the embedded default: tiny model, warm start, multi-turn GRPO on CPU")
    demo.add_argument("--config", default="configs/demo.yaml")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["hps-serve"]:
        # Its options belong to the scorer server's own parser (argparse cannot pass
        # `--help` and friends through a sub-command untouched).
        from rewards.hps_server import main as hps_main

        hps_main(argv[1:])
        return 0
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command not in ("train", "demo"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "func", None) is not None:
        return args.func(args)
    if args.command == "render":
        from env.commands import cmd_render

        return cmd_render(args)
    if args.command == "serve":
        from env.server import serve

        serve(host=args.host, port=args.port, max_sessions=args.max_sessions, backend=args.backend,
              deadline=args.deadline, pool_size=args.pool_size, token=args.token)
        return 0
    if args.command == "bench" and args.bench_command == "serve":
        from env.bench_serve import cmd_bench_serve

        return cmd_bench_serve(args)
    if args.command == "bench" and args.bench_command == "render":
        from env.commands import cmd_bench_render

        return cmd_bench_render(args)
    if args.command == "score":
        from rewards.commands import cmd_score

        return cmd_score(args)
    if args.command == "pool":
        from rewards.commands import cmd_pool

        return cmd_pool(args)
    if args.command == "build-tiny":
        from multiturn_trainer.tiny_model import cmd_build_tiny

        return cmd_build_tiny(args)
    if args.command == "train":
        from multiturn_trainer.train import cmd_train

        return cmd_train(args, extra)
    if args.command == "replay":
        from multiturn_trainer.replay import cmd_replay

        return cmd_replay(args)
    if args.command == "sft":
        from multiturn_trainer.sft import cmd_sft

        return cmd_sft(args)
    if args.command == "demo":
        from multiturn_trainer.train import cmd_demo

        return cmd_demo(args, extra)
    raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":
    sys.exit(main())
