"""GPU check: one multi-turn GRPO step end to end at Qwen3.5-35B-A3B shapes, random weights.

No download: the model is built from the released architecture's shapes (40 layers, hidden
2048, 256 experts routed 8 + 1 shared, 3 GatedDeltaNet : 1 gated-attention layers, vocab
248320, a 27-layer vision tower) with random bf16 weights on the GPU, and the offline
tokenizer and processor of the tiny model (image budget raised to the released one's
600x600 -> 350 image tokens). Real rendering, real rewards, real TRL step. Prints the peak
GPU memory and the time of each phase, and writes them to $OUT/gpu_check.json when $OUT is set.

    python scripts/gpu_check.py                # on the H200 (about 5 minutes)
    python scripts/gpu_check.py --shapes tiny  # the same code path on a CPU (the test suite runs this)

Random weights do not write sketches that render, so turn 2 sees the feedback without a
painting; the tests cover the image path with a warm-started tiny model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def released_shapes():
    from multiturn_trainer.tiny_model import TinyTextSizes, TinyVisionSizes

    text = replace(
        TinyTextSizes(), hidden_size=2048, num_hidden_layers=40, full_attention_interval=4, num_attention_heads=16,
        num_key_value_heads=2, head_dim=256, linear_num_key_heads=16, linear_num_value_heads=32,
        linear_key_head_dim=128, linear_value_head_dim=128, mrope_section=(11, 11, 10), num_experts=256,
        num_experts_per_tok=8, moe_intermediate_size=512, shared_expert_intermediate_size=512,
    )
    vision = replace(TinyVisionSizes(), depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16,
                     num_position_embeddings=2304)
    return text, vision


def build_policy(shapes: str, scratch: Path):
    import torch
    from transformers import AutoProcessor, Qwen3_5MoeForConditionalGeneration

    from multiturn_trainer.tiny_model import _model_config, build_tiny_model

    tiny = build_tiny_model(scratch / "tiny-moe", kind="moe", seed=0)
    processor = AutoProcessor.from_pretrained(str(tiny))
    if shapes == "tiny":
        model = Qwen3_5MoeForConditionalGeneration.from_pretrained(str(tiny))
        return model, processor
    text, vision = released_shapes()
    config = _model_config("moe", processor.tokenizer, text, vision)
    config.text_config.vocab_size = 248_320
    config.text_config.dtype = "bfloat16"
    processor.image_processor.size = {"shortest_edge": 56 * 56, "longest_edge": 600 * 600}
    processor.image_processor.max_pixels = 600 * 600
    with torch.device("cuda"):
        model = Qwen3_5MoeForConditionalGeneration._from_config(config, dtype=torch.bfloat16)
    return model, processor


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", choices=("35b-a3b", "tiny"), default="35b-a3b")
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--max-completion-length", type=int, default=1024)
    parser.add_argument("--out", default=os.environ.get("OUT"))
    args = parser.parse_args(argv)

    import torch

    from multiturn_trainer.config import TrainConfig
    from multiturn_trainer.store import RunStore
    from multiturn_trainer.train import train

    gpu = torch.cuda.is_available()
    if args.shapes == "35b-a3b" and not gpu:
        raise SystemExit("gpu_check: the 35B-A3B shapes need a GPU; use --shapes tiny on a CPU")
    report: dict = {"shapes": args.shapes, "device": torch.cuda.get_device_name(0) if gpu else "cpu"}
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        started = time.perf_counter()
        model, processor = build_policy(args.shapes, scratch)
        report["build_s"] = round(time.perf_counter() - started, 1)
        report["parameters_b"] = round(sum(p.numel() for p in model.parameters()) / 1e9, 3)
        if gpu:
            report["weights_gib"] = round(torch.cuda.memory_allocated() / 2**30, 1)
            torch.cuda.reset_peak_memory_stats()
        config = TrainConfig(
            model=str(scratch / "unused"), turns=args.turns, num_generations=args.generations, steps=1,
            max_completion_length=args.max_completion_length, micro_batch_size=1 if gpu else None,
            output_dir=str(scratch / "run"), report_to="none", save_steps=10, subjects=["poppies in a summer meadow"],
            reward_preset="style-offline", lora_experts=False,
        )
        started = time.perf_counter()
        summary = train(config, policy=(model, processor))
        report["step_s"] = round(time.perf_counter() - started, 1)
        [metrics] = RunStore(summary.run_dir, "gpu-check").read_metrics()
        for phase in ("generate", "render", "score", "train"):
            report[f"{phase}_s"] = round(metrics.get(f"time/{phase}") or 0.0, 1)
        report["completion_tokens_mean"] = metrics.get("completions/mean_length")
        report["episodes"] = summary.episodes
        if gpu:
            report["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
    print("gpu_check: " + " ".join(f"{k}={v}" for k, v in report.items()), flush=True)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "gpu_check.json").write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
