"""`watercolour`: one command, subcommands dispatched to the card's folders."""

from __future__ import annotations

import argparse
import sys

# Every folder declares its own subcommands, each registered the same way: `add_parser(s)(sub)`
# with `set_defaults(func=...)`. Building the parser imports no torch, transformers or browser:
# the command functions import what they need when they run, so `watercolour --help` and every
# `watercolour COMMAND --help` answer in well under a second (torch alone takes 1.5 s warm and
# over 10 s from a cold disk). Commands with `own_options` (train, demo, hps-serve) parse
# everything after their name themselves, `--help` included: train and demo with TRL's parser
# over the whole TrainConfig, built only when one of them runs.


def build_parser() -> argparse.ArgumentParser:
    from curation.commands import add_parsers as add_curation_parsers
    from env.commands import add_parsers as add_env_parsers
    from multiturn_trainer.bench_learn import add_parser as add_bench_learn_parser
    from multiturn_trainer.config import add_parser as add_train_parsers
    from multiturn_trainer.evaluation import add_parser as add_eval_parser
    from multiturn_trainer.replay import add_parser as add_replay_parser
    from multiturn_trainer.report import add_parser as add_report_parser
    from multiturn_trainer.tiny_model import add_parser as add_tiny_parser
    from rewards.commands import add_parsers as add_reward_parsers

    parser = argparse.ArgumentParser(prog="watercolour", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    bench = add_env_parsers(sub)  # render, serve, bench render|serve
    add_bench_learn_parser(bench)  # bench learn
    add_reward_parsers(sub)  # score, hps-serve
    add_curation_parsers(sub)  # pool
    add_tiny_parser(sub)  # build-tiny
    add_train_parsers(sub)  # train, demo, sft
    add_replay_parser(sub)  # replay
    add_eval_parser(sub)  # eval
    add_report_parser(sub)  # report
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if getattr(args, "own_options", False):
        # The command name is always first: the top-level parser has no options of its own.
        args.argv = argv[1:]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args.func(args) or 0


if __name__ == "__main__":
    sys.exit(main())
