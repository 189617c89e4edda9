"""`watercolour`: one command, subcommands dispatched to the project's folders."""

from __future__ import annotations

import argparse
import sys

from env.errors import UsageError

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
    from multiturn_trainer.commands import add_parsers as add_trainer_parsers
    from rewards.commands import add_parsers as add_reward_parsers

    parser = argparse.ArgumentParser(prog="watercolour", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    bench = add_env_parsers(sub)  # render, serve, bench render|serve
    add_reward_parsers(sub)  # score, hps-serve
    add_curation_parsers(sub)  # pool
    add_trainer_parsers(sub, bench)  # build-tiny, train, demo, sft, replay, eval, report, bench learn
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
    try:
        return args.func(args) or 0
    except UsageError as exc:
        raise SystemExit(f"{command_name(argv)}: {exc}") from None


# Commands whose first argument names a subcommand (`watercolour pool build`, `bench learn`).
NESTED = ("pool", "bench")


def command_name(argv: list[str]) -> str:
    """"watercolour train", "watercolour pool build": how an error names the command it stopped."""
    words = argv[:2] if argv[:1] and argv[0] in NESTED else argv[:1]
    return " ".join(["watercolour", *(w for w in words if not w.startswith("-"))])


if __name__ == "__main__":
    sys.exit(main())
