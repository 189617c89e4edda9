"""GPU check: the 35B-A3B preset's step measured phase by phase on random weights, and projected.

No download: the model is built from the released architecture's shapes (40 layers, hidden
2048, 256 experts routed 8 + 1 shared, 3 GatedDeltaNet : 1 gated-attention layers, vocab
248320, a 27-layer vision tower) with random bf16 weights on the GPU, and the offline
tokenizer and processor of the tiny model with the released image budget (a 600x600
painting = 361 image tokens at patch 16 / merge 2).

A real 3-turn step at 4,096 tokens a turn takes the better part of an hour with HF generate,
so the check measures each phase where it is cheap to measure and projects the step:

1. generate: G sequences decoding ``--decode-tokens`` tokens from the real turn-1 prompt,
   tokens/s per sequence and in all, with HF generate and — where vLLM is installed — with the
   preset's colocated vLLM engine (random "dummy" weights, beside the resident training
   weights, sleep mode). A turn lasts until its longest sequence stops: random weights never
   stop, which is the worst case.
2. train: one LoRA forward + backward on one worst-case episode — the real turn-1 prompt,
   ``turns`` completions of ``max_completion_length`` tokens and the ``turns - 1`` environment
   turns with real paintings (the starter pool's) as image tokens — for ``lora_experts`` off
   and on; peak and reserved memory, seconds, tokens.
3. render: G paintings in parallel on a pool sized like the preset's.
4. step: one real ``train()`` step of the preset's shape (3 turns, micro-batch 1) with short
   turns, replies replaced by example sketches so real paintings reach TRL's split and the
   loss pass, checking the whole path runs at these shapes.

    python scripts/gpu_check.py                 # on the H200 (about 5 minutes)
    python scripts/gpu_check.py --shapes 4b     # 4B-class dense shapes
    python scripts/gpu_check.py --shapes tiny   # the same code on a CPU (the test suite runs this)

Prints one line per phase and a projection next to the single-turn anchor (1,100 s per step,
34 h for 110 steps), and writes everything to ``$OUT/gpu_check.json`` (or ``--out``).
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

# Run as a script, so the checkout has to be put on the path before the project is importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from env.files import DATA_ROOT as ROOT  # noqa: E402

ANCHOR_STEP_S = 1100.0  # the public single-turn run: ~1,100 s per step of 8 rollouts
ANCHOR_STEPS = 110
PRESETS = {"35b-a3b": "qwen3.5-35b-a3b", "4b": "qwen3.5-4b", "tiny": "qwen3.5-35b-a3b"}


def released_shapes(shapes: str):
    from multiturn_trainer.tiny_model import TinyTextSizes, TinyVisionSizes

    vision = replace(TinyVisionSizes(), depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16,
                     num_position_embeddings=2304)
    if shapes == "35b-a3b":
        text = replace(
            TinyTextSizes(), hidden_size=2048, num_hidden_layers=40, full_attention_interval=4, num_attention_heads=16,
            num_key_value_heads=2, head_dim=256, linear_num_key_heads=16, linear_num_value_heads=32,
            linear_key_head_dim=128, linear_value_head_dim=128, mrope_section=(11, 11, 10), num_experts=256,
            num_experts_per_tok=8, moe_intermediate_size=512, shared_expert_intermediate_size=512,
        )
        return "moe", text, vision
    # 4B-class dense shapes (the released 4B config is not available offline: the parameter
    # count is printed so the figure can be read against it).
    text = replace(
        TinyTextSizes(), hidden_size=2560, intermediate_size=9216, num_hidden_layers=32, full_attention_interval=4,
        num_attention_heads=16, num_key_value_heads=4, head_dim=256, linear_num_key_heads=16,
        linear_num_value_heads=32, linear_key_head_dim=128, linear_value_head_dim=128, mrope_section=(11, 11, 10),
    )
    vision = replace(vision, depth=24, hidden_size=1024, intermediate_size=4096)
    return "dense", text, vision


def build_policy(shapes: str, scratch: Path):
    import torch
    from transformers import AutoProcessor, Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration

    from multiturn_trainer.tiny_model import _model_config, build_tiny_model

    kind = "dense" if shapes == "4b" else "moe"
    tiny = build_tiny_model(scratch / f"tiny-{kind}", kind=kind, seed=0)
    processor = AutoProcessor.from_pretrained(str(tiny))
    cls = Qwen3_5MoeForConditionalGeneration if kind == "moe" else Qwen3_5ForConditionalGeneration
    if shapes == "tiny":
        return cls.from_pretrained(str(tiny)), processor
    kind, text, vision = released_shapes(shapes)
    config = _model_config(kind, processor.tokenizer, text, vision)
    config.text_config.vocab_size = 248_320
    config.text_config.dtype = "bfloat16"
    processor.image_processor.size = {"shortest_edge": 56 * 56, "longest_edge": 600 * 600}
    processor.image_processor.max_pixels = 600 * 600
    with torch.device("cuda"):
        model = cls._from_config(config, dtype=torch.bfloat16)
    model.name_or_path = str(tiny)
    return model, processor


class Memory:
    """Peak and reserved GPU memory of one phase (nothing on a CPU)."""

    def __init__(self, gpu: bool):
        self.gpu = gpu

    def __enter__(self):
        if self.gpu:
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc):
        if self.gpu:
            import torch

            torch.cuda.synchronize()
        self.seconds = time.perf_counter() - self.started

    def figures(self) -> dict:
        figures = {"seconds": round(self.seconds, 2)}
        if self.gpu:
            import torch

            figures["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
            figures["reserved_gib"] = round(torch.cuda.max_memory_reserved() / 2**30, 1)
        return figures


def starter_paintings(count: int) -> list[bytes]:
    pngs = sorted((ROOT / "pools" / "starter").glob("*/*.png"))
    return [pngs[i % len(pngs)].read_bytes() for i in range(count)]


def turn_one_ids(config, processor) -> list[int]:
    """The real turn-1 prompt (system prompt + task) as token ids, as the trainer builds it."""
    from agent.messages import first_turn_messages

    messages = first_turn_messages(config.subjects[0], enable_thinking=config.enable_thinking)
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                         enable_thinking=config.enable_thinking)
    return list(processor.tokenizer(text, add_special_tokens=False)["input_ids"])


def worst_case_episode(config, processor):
    """The longest episode the preset can produce, built with the trainer's own token code:
    real prompt, completions of the full budget (random weights never stop), real paintings."""
    import torch

    from agent.messages import revision_content
    from multiturn_trainer.episodes import EpisodeTokens, environment_turn

    episode = EpisodeTokens(turn_one_ids(config, processor))
    # Random completions of ordinary tokens only: a stray image token would not match any image.
    tokenizer = processor.tokenizer
    special = set(tokenizer.all_special_ids) | set(tokenizer.added_tokens_decoder)
    ordinary = torch.tensor([i for i in range(len(tokenizer)) if i not in special])
    generator = torch.Generator().manual_seed(0)
    for turn, png in zip(range(1, config.turns + 1), starter_paintings(config.turns)):
        picks = torch.randint(0, len(ordinary), (config.max_completion_length,), generator=generator)
        episode.add_policy(ordinary[picks].tolist())
        if turn < config.turns:
            feedback = "The painting passed the gate; 41% of the canvas carries paint."
            episode.add_environment(environment_turn(processor, revision_content(png, feedback, turn + 1, config.turns),
                                                     False, {"enable_thinking": config.enable_thinking}))
    return episode


def measure_train(model, processor, config, episode, gpu: bool, lora_experts: bool) -> dict:
    """One LoRA forward + backward on the worst-case episode (micro-batch 1, as the preset)."""
    import torch
    from peft import get_peft_model

    from multiturn_trainer.episodes import loss_image_inputs
    from multiturn_trainer.train import peft_config

    settings = replace(config, lora_experts=lora_experts)
    peft_model = get_peft_model(model, peft_config(settings, model))
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    if gpu:
        peft_model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        peft_model.enable_input_require_grads()
    peft_model.train()
    device = next(model.parameters()).device
    ids = torch.tensor([episode.context()], device=device)
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    merge = processor.image_processor.merge_size ** 2
    images = loss_image_inputs([episode], ids, pad, merge)
    images.pop("num_images", None)
    labels = ids.clone()
    labels[:, :len(episode.prompt_ids)] = -100
    figures = {"lora_experts": lora_experts, "trainable_parameters": trainable,
               "tokens": ids.size(1), "images": len(episode.image_grid_thw)}
    try:
        with Memory(gpu) as memory:
            dtype = torch.bfloat16 if gpu else torch.float32
            with torch.autocast(device_type=device.type, dtype=dtype, enabled=gpu):
                loss = peft_model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels,
                                  pixel_values=images["pixel_values"].to(dtype), image_grid_thw=images["image_grid_thw"],
                                  mm_token_type_ids=images["mm_token_type_ids"]).loss
            loss.backward()
        figures.update(memory.figures())
    except torch.OutOfMemoryError as exc:
        figures["error"] = f"out of memory: {str(exc).splitlines()[0]}"
    finally:
        peft_model.zero_grad(set_to_none=True)
        peft_model.unload()  # the base model back, for the next setting
        if gpu:
            torch.cuda.empty_cache()
    return figures


def measure_generate(model, processor, config, generations: int, decode_tokens: int, gpu: bool) -> dict:
    """HF generate of ``decode_tokens`` forced tokens for G copies of the turn-1 prompt."""
    import torch

    device = next(model.parameters()).device
    ids = torch.tensor([turn_one_ids(config, processor)] * generations, device=device)
    encoded = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    model.eval()
    with torch.no_grad(), Memory(gpu) as memory:
        out = model.generate(**encoded, max_new_tokens=decode_tokens, min_new_tokens=decode_tokens, do_sample=True,
                             temperature=1.0, top_k=20, top_p=0.95, pad_token_id=processor.tokenizer.pad_token_id)
    new = (out.size(1) - encoded["input_ids"].size(1))
    figures = {"backend": "hf", "sequences": generations, "prompt_tokens": encoded["input_ids"].size(1),
               "decode_tokens": new, **memory.figures()}
    figures["tokens_per_s_per_sequence"] = round(new / memory.seconds, 2)
    figures["tokens_per_s"] = round(new * generations / memory.seconds, 1)
    return figures


def vllm_engine():
    """vLLM's ``LLM`` and ``SamplingParams``, or None where vLLM is not installed."""
    try:
        from vllm import LLM, SamplingParams
    except ImportError:
        return None
    return LLM, SamplingParams


def measure_generate_vllm(model, processor, config, generations: int, decode_tokens: int, scratch: Path,
                          gpu: bool) -> dict:
    """The preset's colocated engine beside the resident training weights: vLLM with random
    ("dummy") weights at the same shapes, its context from the episode budget, sleep mode on;
    the same G sequences and forced decode length as the HF measurement."""
    engine = vllm_engine()
    if engine is None:
        return {"backend": "vllm", "skipped": "vLLM is not installed"}
    import torch

    LLM, SamplingParams = engine
    shapes_dir = scratch / "vllm-shapes"
    model.config.save_pretrained(shapes_dir)
    processor.save_pretrained(shapes_dir)
    # In this process, as TRL's colocate mode runs it, so the memory figures include it.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    with Memory(gpu) as start:
        llm = LLM(model=str(shapes_dir), load_format="dummy", dtype="bfloat16" if gpu else "float32",
                  gpu_memory_utilization=config.vllm_gpu_memory_utilization, max_model_len=config.episode_token_budget(),
                  max_num_seqs=generations, enable_sleep_mode=True, seed=0)
    figures = {"backend": "vllm", "start_seconds": round(start.seconds, 1), "max_model_len": config.episode_token_budget(),
               "gpu_memory_utilization": config.vllm_gpu_memory_utilization}
    if gpu:
        free, total = torch.cuda.mem_get_info()
        figures["device_used_gib_awake"] = round((total - free) / 2**30, 1)
    ids = turn_one_ids(config, processor)
    params = SamplingParams(n=1, max_tokens=decode_tokens, min_tokens=decode_tokens, temperature=1.0, top_k=20,
                            top_p=0.95, logprobs=0)
    with Memory(gpu) as memory:
        outputs = llm.generate([{"prompt_token_ids": ids} for _ in range(generations)], sampling_params=params,
                               use_tqdm=False)
    new = max(len(o.outputs[0].token_ids) for o in outputs)
    figures.update(sequences=generations, prompt_tokens=len(ids), decode_tokens=new, **memory.figures(),
                   tokens_per_s_per_sequence=round(new / memory.seconds, 2),
                   tokens_per_s=round(sum(len(o.outputs[0].token_ids) for o in outputs) / memory.seconds, 1))
    llm.sleep(level=2)  # what the trainer does before every loss pass
    if gpu:
        free, total = torch.cuda.mem_get_info()
        figures["device_used_gib_asleep"] = round((total - free) / 2**30, 1)
    del llm
    if gpu:
        torch.cuda.empty_cache()
    return figures


def measure_render(config, generations: int) -> dict:
    from env.core import SketchEvaluator

    sketch = (ROOT / "examples" / "sketches" / "poppies.js").read_text()
    kwargs = {"size": config.renderers} if config.renderers else {}
    if config.render_backend:
        kwargs["backend"] = config.render_backend
    with SketchEvaluator(**kwargs) as evaluator:
        evaluator.evaluate_many([sketch], [0])  # warm: browsers started, libraries cached
        started = time.perf_counter()
        outcomes = evaluator.evaluate_many([sketch] * generations, list(range(generations)))
        seconds = time.perf_counter() - started
    return {"paintings": generations, "renderers": config.renderers or os.cpu_count(), "seconds": round(seconds, 2),
            "passed": sum(o.passed for o in outcomes)}


class InjectedSketches:
    """The in-process environments with every reply replaced by an example sketch: random
    weights write no sketch that renders, and the step must carry real paintings."""

    def __init__(self, inner):
        self.inner = inner
        self.sketches = [p.read_text() for p in sorted((ROOT / "examples" / "sketches").glob("*.js"))]

    def reset(self, subjects, seeds, turns):
        self.inner.reset(subjects, seeds, turns)

    def step(self, replies, turn):
        return self.inner.step([self.sketches[(i + turn) % len(self.sketches)] for i in range(len(replies))], turn)

    def close(self):
        self.inner.close()


def measure_step(model, processor, config, scratch: Path, step_tokens: int) -> dict:
    from multiturn_trainer.environments import make_environments
    from multiturn_trainer.store import RunStore
    from multiturn_trainer.train import train

    short = replace(config, model=str(scratch / "unused"), steps=1, max_completion_length=step_tokens,
                    output_dir=str(scratch / "run"), report_to="none", save_steps=10, reward_preset="style-offline",
                    use_vllm=False, tiny_model=None)
    started = time.perf_counter()
    summary = train(short, environments=InjectedSketches(make_environments(short)), policy=(model, processor))
    [metrics] = RunStore(summary.run_dir, "gpu-check").read_metrics()
    with open(summary.run_dir / "episodes.jsonl") as lines:
        images = [sum(1 for t in json.loads(line)["turns"][:-1] if t["png"]) for line in lines]
    return {"seconds": round(time.perf_counter() - started, 1), "episodes": summary.episodes,
            "turns": short.turns, "tokens_per_turn": step_tokens, "images_per_episode": images,
            **{f"{phase}_s": round(metrics.get(f"time/{phase}") or 0.0, 1)
               for phase in ("generate", "render", "score", "train")}}


def project(config, generate: dict, train_runs: list[dict], render: dict) -> dict:
    """A full step of the preset from the measured phases, with ``generate``'s decoding speed."""
    per_turn = config.max_completion_length / generate["tokens_per_s_per_sequence"]
    generate_s = config.turns * per_turn
    chosen = next((t for t in train_runs if t["lora_experts"] == config.lora_experts and "seconds" in t), None)
    train_s = None if chosen is None else config.episodes_per_step * chosen["seconds"]
    render_s = config.turns * render["seconds"]
    step_s = None if train_s is None else generate_s + render_s + train_s
    projection = {"generate_s": round(generate_s), "render_s": round(render_s),
                  "train_s": None if train_s is None else round(train_s),
                  "step_s": None if step_s is None else round(step_s),
                  "anchor_step_s": ANCHOR_STEP_S, "anchor_110_steps_h": round(ANCHOR_STEP_S * ANCHOR_STEPS / 3600, 1)}
    if step_s is not None:
        projection["vs_anchor"] = round(step_s / ANCHOR_STEP_S, 2)
        projection["110_steps_h"] = round(step_s * ANCHOR_STEPS / 3600, 1)
        projection["render_share"] = round(render_s / step_s, 3)
    return projection


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", choices=("35b-a3b", "4b", "tiny"), default="35b-a3b")
    parser.add_argument("--turns", type=int, default=None, help="default: the preset's")
    parser.add_argument("--generations", type=int, default=None, help="episodes per step; default: the preset's")
    parser.add_argument("--max-completion-length", type=int, default=None, help="default: the preset's")
    parser.add_argument("--decode-tokens", type=int, default=64, help="tokens decoded to measure generation speed")
    parser.add_argument("--step-tokens", type=int, default=32, help="tokens per turn in the real train() step")
    parser.add_argument("--out", default=os.environ.get("OUT"))
    args = parser.parse_args(argv)

    import torch

    from multiturn_trainer.config import load_config
    from multiturn_trainer.kernels import gated_delta_net_path

    gpu = torch.cuda.is_available()
    if args.shapes != "tiny" and not gpu:
        raise SystemExit("gpu_check: the released shapes need a GPU; use --shapes tiny on a CPU")
    config = load_config(ROOT / "configs" / f"{PRESETS[args.shapes]}.yaml")
    overrides = {"subjects": ["poppies in a summer meadow"], "micro_batch_size": 1}
    for key in ("turns", "max_completion_length"):
        if getattr(args, key) is not None:
            overrides[key] = getattr(args, key)
    if args.generations is not None:
        overrides["num_generations"] = args.generations
    config = replace(config, **overrides)
    if not gpu:
        config = replace(config, renderers=2, bf16=False, gradient_checkpointing=False)
    report: dict = {"shapes": args.shapes, "preset": PRESETS[args.shapes],
                    "device": torch.cuda.get_device_name(0) if gpu else "cpu",
                    "turns": config.turns, "episodes_per_step": config.episodes_per_step,
                    "max_completion_length": config.max_completion_length,
                    "gated_delta_net": gated_delta_net_path()}

    def say(phase: str, figures: dict) -> None:
        report[phase] = figures
        print(f"gpu_check {phase}: " + " ".join(f"{k}={v}" for k, v in figures.items()), flush=True)

    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        with Memory(gpu) as memory:
            model, processor = build_policy(args.shapes, scratch)
        say("build", {**memory.figures(), "parameters_b": round(sum(p.numel() for p in model.parameters()) / 1e9, 3),
                      **({"weights_gib": round(torch.cuda.memory_allocated() / 2**30, 1)} if gpu else {})})
        say("kernels", report["gated_delta_net"])
        say("generate", measure_generate(model, processor, config, config.episodes_per_step, args.decode_tokens, gpu))
        say("generate_vllm", measure_generate_vllm(model, processor, config, config.episodes_per_step,
                                                   args.decode_tokens, scratch, gpu))
        episode = worst_case_episode(config, processor)
        train_runs = []
        for lora_experts in (False, True):
            figures = measure_train(model, processor, config, episode, gpu, lora_experts)
            train_runs.append(figures)
            say(f"train_lora_experts_{str(lora_experts).lower()}", figures)
        report["longest_sequence_trained"] = max(t["tokens"] for t in train_runs)
        say("render", measure_render(config, config.episodes_per_step))
        with Memory(gpu) as memory:
            step = measure_step(model, processor, config, scratch, args.step_tokens)
        say("step", {**step, **memory.figures()})
        say("projection_hf", project(config, report["generate"], train_runs, report["render"]))
        if "tokens_per_s_per_sequence" in report["generate_vllm"]:
            say("projection_vllm", project(config, report["generate_vllm"], train_runs, report["render"]))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "gpu_check.json").write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
