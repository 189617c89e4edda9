"""The reward side's command-line verbs: `score` and `hps-serve` (pools are curated by `curation/`)."""

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
from rewards.mixer import DEFAULT_PRESET, PaintingToScore, build_scorer
from rewards.pool import STARTER_POOL_DIR, ReferencePool


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
                          hps_url=args.hps_url, judge_probability=args.judge_probability)
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


def cmd_hps_serve(args) -> int:
    """Parses its own options (`--help` included): the HPSv3 server's settings."""
    import argparse
    import logging
    import os

    from rewards.hps_server import DEFAULT_MAX_IMAGES, DEFAULT_MAX_REQUEST_BYTES, DEFAULT_PORT, TOKEN_ENV, serve_hps

    parser = argparse.ArgumentParser(prog="watercolour hps-serve", description="Serve HPSv3 scores over HTTP.")
    parser.add_argument("--checkpoint", required=True, help="HPSv3.safetensors (or its directory)")
    parser.add_argument("--base-model", required=True, help="Qwen2-VL-7B-Instruct config + processor directory")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--position-mode", default="1d", choices=["1d", "mrope"])
    parser.add_argument("--max-request-bytes", type=int, default=DEFAULT_MAX_REQUEST_BYTES)
    parser.add_argument("--max-images", type=int, default=DEFAULT_MAX_IMAGES)
    options = parser.parse_args(args.argv)
    logging.basicConfig(level=logging.INFO)
    from rewards.hpsv3 import HPSv3Config

    config = HPSv3Config(checkpoint_path=options.checkpoint, base_model_path=options.base_model,
                         device=options.device, dtype=options.dtype, batch_size=options.batch_size,
                         position_mode=options.position_mode)
    # The token comes from the environment so it never shows in `ps` output.
    serve_hps(host=options.host, port=options.port, config=config, token=os.environ.get(TOKEN_ENV) or None,
              max_request_bytes=options.max_request_bytes, max_images=options.max_images)
    return 0


def add_parsers(sub) -> None:
    score = sub.add_parser("score", help="score paintings with a reward preset")
    score.add_argument("images", nargs="+", metavar="IMAGE")
    score.add_argument("--preset", default=DEFAULT_PRESET,
                       help="a preset name in configs/rewards/ or a YAML file (default: %(default)s, CPU only)")
    score.add_argument("--subject", default=None)
    score.add_argument("--pool", default=str(STARTER_POOL_DIR))
    score.add_argument("--sources", default=None, help="folder holding STEM.js sketch sources")
    score.add_argument("--judge-url", default=None)
    score.add_argument("--judge-model", default=None)
    score.add_argument("--judge-probability", action="store_true",
                       help="score a soft P(A) from the judge's verdict-token log-probabilities")
    score.add_argument("--hps-url", default=None)
    score.add_argument("--seed", type=int, default=0, help="reference draw seed (one per GRPO group)")
    score.add_argument("--json", action="store_true")
    score.set_defaults(func=cmd_score)

    # hps-serve parses its own options (cmd_hps_serve), `--help` included.
    hps = sub.add_parser("hps-serve", add_help=False,
                         help="serve HPSv3 scores over HTTP (options: see `watercolour hps-serve --help`)")
    hps.set_defaults(func=cmd_hps_serve, own_options=True)
