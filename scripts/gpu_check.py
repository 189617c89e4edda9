"""GPU check: the 35B-A3B (or 4B) preset measured phase by phase on random weights, and projected.

Written for the lent H200 as its image is (Python 3.12, torch 2.11, transformers 5.17,
accelerate 1.15, peft; no TRL, datasets, pydantic, vLLM or browser; no network), with the
fast GatedDeltaNet kernels carried as wheels (``scripts/device_wheels.sh DIR``):

    OUT=DIR python3 scripts/gpu_check.py --shapes 35b     # on the H200, under 8 minutes
    OUT=DIR python3 scripts/gpu_check.py --shapes 4b      # the 4B presets' shapes
    OUT=DIR python3 scripts/gpu_check.py --shapes tiny    # the same code on a CPU (tests, CI)

No download: the model is built from the released architecture's shapes with random bf16
weights on the GPU, with the offline tokenizer and processor of the tiny model at the released
image budget (a 600x600 painting = 361 image tokens at patch 16 / merge 2).

``DIR/gpu_check.json`` is rewritten after every phase (atomically), so a run cut short keeps
the phases it finished. Each phase is a key with ``status`` ("ok", "skipped" with a
``reason``, or "failed" with an ``error``) and its figures:

- ``environment``: package versions and which optional parts are present.
- ``build``: the policy at the chosen shapes; parameters and weight memory.
- ``kernels``: which GatedDeltaNet kernels run (fla/causal-conv1d or the reference path).
- ``generate_hf``: HF generate at the preset's batch from a turn-2 prompt (turn-1 prompt, a
  reply, the painting as image tokens and feedback), tokens/s per sequence and in all.
- ``memory_plan``: the colocated vLLM share reserved as one real allocation beside the
  training weights while a generation-sized workload runs, then freed for the loss pass as
  sleep mode does; the arithmetic (``plan``) next to what the device reported.
- ``train_lora_experts_false`` / ``_true``: one LoRA forward + backward on the worst-case
  episode (3 completions of the full budget, two real paintings as image tokens).
- ``weight_sync``: merge the adapter and stream every tensor once, as TRL's sync does.
- ``generate_vllm``: the colocated engine with TRL's own arguments (where vLLM is installed).
- ``render``, ``step``: rendering and one real ``train()`` step (where a browser and TRL are).
- ``projection``: a 3-turn step and 110-step run next to the single-turn anchor, each figure
  marked measured or sourced.

Only torch, transformers, peft, PIL, numpy and yaml are needed, with the project's own model,
prompt and episode code (none of which imports pydantic, openenv, TRL or a browser).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, so the checkout has to be put on the path before the project is importable.
sys.path.insert(0, str(ROOT))

GIB = 2**30
ANCHOR_STEP_S = 1100.0  # the public single-turn run: ~1,100 s per step of 8 rollouts
ANCHOR_STEPS = 110
HEADROOM_GIB = 10.0  # what the memory plan must leave free at its worst moment
COLOCATE_UTILIZATION = 0.5  # the one-card colocate share the 35B preset used to take
PRESETS = {"35b": "qwen3.5-35b-a3b", "4b": "qwen3.5-4b", "tiny": "qwen3.5-35b-a3b"}
# Sourced, not measured here: a public vLLM benchmark of an A3B MoE of the same active size
# (Qwen3-Coder-30B-A3B-Instruct, AWQ, on an RTX 5090, whose 1.8 TB/s is well under the H200's
# 4.8 TB/s): median TPOT 7.06 ms, i.e. ~140 tokens/s per sequence. Posted on r/LocalLLaMA
# ("LLM inference-throughput benchmark ... Qwen3 Coder family models on RTX 5090 and PRO 6000",
# vllm bench serve). Used only for the vLLM column of the projection, and labelled so.
VLLM_DECODE_SOURCED = {"tokens_per_s_per_sequence": 140.0,
                       "source": "public vllm bench serve figure: Qwen3-Coder-30B-A3B-Instruct-AWQ, RTX 5090, "
                                 "median TPOT 7.06 ms (r/LocalLLaMA benchmark post); not measured here"}
# The slowest example painting on the default backend (docs/experiments/renderer-backends.md):
# with one renderer per episode a turn's paintings take that long.
RENDER_TURN_SOURCED_S = 4.3


# ---------------------------------------------------------------------------------------------
# The report: one key per phase, written after every phase.


class Report:
    def __init__(self, out: str | None):
        self.data: dict = {}
        self.path = Path(out) / "gpu_check.json" if out else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def set(self, key: str, value) -> None:
        self.data[key] = value
        self.write()

    def write(self) -> None:
        if self.path is None:
            return
        # Written beside and renamed over: a kill mid-write leaves the previous complete file.
        partial = self.path.with_suffix(".json.partial")
        partial.write_text(json.dumps(self.data, indent=2, default=str))
        os.replace(partial, self.path)

    def phase(self, name: str, run, *args, **kwargs) -> dict:
        """Run one phase; a failure is recorded and the next phase still runs."""
        started = time.perf_counter()
        try:
            figures = run(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - every phase reports, whatever broke
            figures = {"status": "failed", "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                       "traceback": traceback.format_exc(limit=6)}
        figures = {"status": "ok", **figures}
        figures.setdefault("wall_s", round(time.perf_counter() - started, 2))
        self.set(name, figures)
        shown = {k: v for k, v in figures.items() if k != "traceback"}
        print(f"gpu_check {name}: " + " ".join(f"{k}={v}" for k, v in shown.items()), flush=True)
        return figures


# vLLM's external_launcher backend rendezvouses through torch.distributed even in one process.
SINGLE_PROCESS_RENDEZVOUS = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                             "MASTER_PORT": "29531"}


@contextlib.contextmanager
def single_process_rendezvous():
    """The rendezvous variables the caller lacks, for as long as the engine lives, and then
    undone: a process that goes on to start trainers or subprocesses (the test suite, the step
    phase) must not hand them a port this process already listens on."""
    added = {k: v for k, v in SINGLE_PROCESS_RENDEZVOUS.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def skipped(reason: str) -> dict:
    return {"status": "skipped", "reason": reason}


# ---------------------------------------------------------------------------------------------
# What is installed.


def version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def present(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def browser_missing() -> str | None:
    """Why no painting can be rendered here, or None when a browser is there."""
    if not present("playwright"):
        return "playwright is not installed"
    try:
        from env.renderer import find_chromium

        if find_chromium():  # a Chromium on PATH, as the renderer picks it
            return None
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            executable = Path(p.chromium.executable_path)
    except Exception as exc:  # noqa: BLE001
        return f"no Chromium: {type(exc).__name__}"
    return None if executable.exists() else f"no Chromium at {executable}"


def environment(gpu: bool) -> dict:
    import torch

    figures = {"python": platform.python_version(),
               "versions": {name: version(name) for name in ("torch", "transformers", "accelerate", "peft", "numpy",
                                                             "pillow", "pyyaml", "tokenizers", "safetensors",
                                                             "flash-linear-attention", "fla-core", "causal-conv1d",
                                                             "trl", "datasets", "pydantic", "vllm", "playwright")},
               "device": torch.cuda.get_device_name(0) if gpu else "cpu"}
    if gpu:
        free, total = torch.cuda.mem_get_info()
        figures.update(total_gib=round(total / GIB, 1), free_gib_at_start=round(free / GIB, 1))
    return figures


# ---------------------------------------------------------------------------------------------
# The policy at the released shapes.


def released_shapes(shapes: str):
    """Text and vision sizes. 35B-A3B: the released config (Qwen/Qwen3.5-35B-A3B's config.json:
    40 layers, hidden 2048, 16 query / 2 key-value heads of 256, 256 experts of 512 routed 8 + a
    shared one of 512, GatedDeltaNet 16 key / 32 value heads of 128 three layers in four, vocab
    248320, a 27-layer vision tower of 1152). The same figures appear in a public Megatron
    recipe for this model (THUDM/slime, scripts/models/qwen3.5-35B-A3B.sh).
    4B: not verified against the release (no copy of its config was at hand offline): a
    Qwen3.5-style dense stack of 4B class (hidden 2560, 32 layers, FFN 9216, the 35B's head
    layout, a 24-layer vision tower of 1024): 5.17 B parameters with untied embeddings (9.6 GiB
    in bf16), so its memory figures err high; ``build`` prints the count."""
    from multiturn_trainer.tiny_model import TinyTextSizes, TinyVisionSizes

    vision = replace(TinyVisionSizes(), depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16,
                     num_position_embeddings=2304)
    if shapes == "35b":
        text = replace(
            TinyTextSizes(), hidden_size=2048, num_hidden_layers=40, full_attention_interval=4, num_attention_heads=16,
            num_key_value_heads=2, head_dim=256, linear_num_key_heads=16, linear_num_value_heads=32,
            linear_key_head_dim=128, linear_value_head_dim=128, mrope_section=(11, 11, 10), num_experts=256,
            num_experts_per_tok=8, moe_intermediate_size=512, shared_expert_intermediate_size=512,
        )
        return "moe", text, vision
    text = replace(
        TinyTextSizes(), hidden_size=2560, intermediate_size=9216, num_hidden_layers=32, full_attention_interval=4,
        num_attention_heads=16, num_key_value_heads=4, head_dim=256, linear_num_key_heads=16,
        linear_num_value_heads=32, linear_key_head_dim=128, linear_value_head_dim=128, mrope_section=(11, 11, 10),
    )
    vision = replace(vision, depth=24, hidden_size=1024, intermediate_size=4096)
    return "dense", text, vision


def released_config(shapes: str, processor):
    """The model config at the released shapes, with the offline tokenizer's special-token ids."""
    from multiturn_trainer.tiny_model import _model_config

    kind, text, vision = released_shapes(shapes)
    config = _model_config(kind, processor.tokenizer, text, vision)
    config.text_config.vocab_size = 248_320
    config.text_config.dtype = "bfloat16"
    return config


def build_policy(shapes: str, scratch: Path):
    import torch
    from transformers import AutoProcessor, Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration

    from multiturn_trainer.tiny_model import build_tiny_model

    kind = "dense" if shapes == "4b" else "moe"
    tiny = build_tiny_model(scratch / f"tiny-{kind}", kind=kind, seed=0)
    processor = AutoProcessor.from_pretrained(str(tiny))
    cls = Qwen3_5MoeForConditionalGeneration if kind == "moe" else Qwen3_5ForConditionalGeneration
    if shapes == "tiny":
        model = cls.from_pretrained(str(tiny))
    else:
        config = released_config(shapes, processor)
        processor.image_processor.size = {"shortest_edge": 56 * 56, "longest_edge": 600 * 600}
        processor.image_processor.max_pixels = 600 * 600
        with torch.device("cuda"):
            model = cls._from_config(config, dtype=torch.bfloat16)
        model.name_or_path = str(tiny)
    # A saved config without `architectures` makes vLLM fall back to its generic Transformers
    # backend instead of its native Qwen3.5 model.
    model.config.architectures = [cls.__name__]
    return model, processor


class Memory:
    """Seconds, and peak and reserved GPU memory, of one phase (seconds only on a CPU)."""

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

            figures["peak_gib"] = round(torch.cuda.max_memory_allocated() / GIB, 1)
            figures["reserved_gib"] = round(torch.cuda.max_memory_reserved() / GIB, 1)
            figures["free_at_peak_gib"] = round(free_at_peak() / GIB, 1)
        return figures


def free_at_peak() -> int:
    """Bytes the device had free at this phase's peak: free now, less what the allocator held
    at its peak beyond what it holds now (the CUDA context and other processes are in both)."""
    import torch

    free, _ = torch.cuda.mem_get_info()
    return free - (torch.cuda.max_memory_reserved() - torch.cuda.memory_reserved())


def device_free_gib() -> float:
    import torch

    free, _ = torch.cuda.mem_get_info()
    return free / GIB


# ---------------------------------------------------------------------------------------------
# Prompts and episodes, built with the trainer's own token code.


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


def episode_up_to(config, processor, turns: int, completion_tokens: int):
    """An episode of ``turns`` policy turns of ``completion_tokens`` random ordinary tokens
    (random weights never stop, the worst case), each but the last followed by the
    environment's turn carrying a real painting (the starter pool's) and feedback."""
    import torch

    from agent.messages import revision_content
    from multiturn_trainer.episodes import EpisodeTokens, environment_turn

    episode = EpisodeTokens(turn_one_ids(config, processor))
    # Ordinary tokens only: a stray image token would match no image.
    tokenizer = processor.tokenizer
    special = set(tokenizer.all_special_ids) | set(tokenizer.added_tokens_decoder)
    ordinary = torch.tensor([i for i in range(len(tokenizer)) if i not in special])
    generator = torch.Generator().manual_seed(0)
    for turn, png in zip(range(1, turns + 1), starter_paintings(turns)):
        picks = torch.randint(0, len(ordinary), (completion_tokens,), generator=generator)
        episode.add_policy(ordinary[picks].tolist())
        if turn < turns or turns < config.turns:
            feedback = "The painting passed the gate; 41% of the canvas carries paint."
            episode.add_environment(environment_turn(processor, revision_content(png, feedback, turn + 1, config.turns),
                                                     False, {"enable_thinking": config.enable_thinking}))
    return episode


def worst_case_episode(config, processor):
    """The longest episode the preset can produce: every turn at the full completion budget."""
    return episode_up_to(config, processor, config.turns, config.max_completion_length)


# ---------------------------------------------------------------------------------------------
# Phases.


def measure_generate(model, processor, config, generations: int, decode_tokens: int, gpu: bool,
                     reply_tokens: int) -> dict:
    """HF generate of ``decode_tokens`` forced tokens for G copies of a turn-2 prompt, so the
    painting's image tokens go through the vision tower and the prompt's 3-D positions."""
    import torch

    from multiturn_trainer.episodes import generation_fields

    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    episode = episode_up_to(config, processor, 1, reply_tokens)
    device = next(model.parameters()).device
    episodes = [episode] * generations
    ids = torch.tensor([e.context() for e in episodes], device=device)
    fields = generation_fields(episodes, pad)
    dtype = next(model.parameters()).dtype
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids),
              "pixel_values": fields["pixel_values"].to(device, dtype), "image_grid_thw": fields["image_grid_thw"].to(device),
              "mm_token_type_ids": torch.tensor(fields["mm_token_type_ids"], device=device)}
    model.eval()
    with torch.no_grad(), Memory(gpu) as memory:
        out = model.generate(**inputs, max_new_tokens=decode_tokens, min_new_tokens=decode_tokens, do_sample=True,
                             temperature=config.temperature, top_k=config.top_k or None, top_p=config.top_p,
                             pad_token_id=processor.tokenizer.pad_token_id)
    new = out.size(1) - ids.size(1)
    return {"backend": "hf", "sequences": generations, "prompt_tokens": ids.size(1),
            "images_per_prompt": len(episode.image_grid_thw), "decode_tokens": new, **memory.figures(),
            "tokens_per_s_per_sequence": round(new / memory.seconds, 2),
            "tokens_per_s": round(new * generations / memory.seconds, 1)}


def kernels(gpu: bool, reference: bool = False) -> dict:
    """Which GatedDeltaNet kernels the model will run. The carried fla wheels are Triton
    kernels, which need a GPU: on a CPU the check proves they import under these torch and
    transformers versions, then hides them so the reference path runs (as it does for
    training on a CPU, where fla is never installed)."""
    from multiturn_trainer.kernels import gated_delta_net_path

    path = gated_delta_net_path()
    figures = {"gated_delta_net": path}
    if (reference or not gpu) and "fla" in path.values():
        for name in [m for m in sys.modules if m == "fla" or m.startswith("fla.")]:
            del sys.modules[name]
        sys.modules["fla"] = None  # import fla now raises ImportError: transformers falls back
        figures["fla_imports"] = True
        figures["hidden"] = ("fla hidden (--reference-kernels): the reference path runs" if gpu else
                             "fla hidden: its Triton kernels need a GPU; the reference path runs")
    return figures


def model_shapes(model) -> dict:
    text = model.config.text_config
    layer_types = list(getattr(text, "layer_types", None) or [])
    return {"full_attention_layers": layer_types.count("full_attention"),
            "linear_attention_layers": layer_types.count("linear_attention"),
            "num_key_value_heads": text.num_key_value_heads, "head_dim": text.head_dim,
            "linear_num_key_heads": text.linear_num_key_heads, "linear_num_value_heads": text.linear_num_value_heads,
            "linear_key_head_dim": text.linear_key_head_dim, "linear_value_head_dim": text.linear_value_head_dim,
            "linear_conv_kernel_dim": text.linear_conv_kernel_dim}


def plan_arithmetic(config, shapes: dict, weights_gib: float, total_gib: float) -> dict:
    """The one-card colocate plan by arithmetic, in vLLM's own terms: vLLM may use
    ``gpu_memory_utilization x total`` (its worker's requested_memory), which must be free when
    it starts; its KV cache gets what is left of that after its weights and profile run.

    KV per token: 2 (K, V) x full-attention layers x KV heads x head dim x 2 bytes; GatedDeltaNet
    state per sequence (constant in length): linear layers x (value heads x key dim x value dim
    + (conv kernel - 1) x (2 x key heads x key dim + value heads x value dim)) x 2 bytes."""
    context = config.vllm_max_model_length or config.episode_token_budget()
    sequences = config.episodes_per_step
    kv_per_token = 2 * shapes["full_attention_layers"] * shapes["num_key_value_heads"] * shapes["head_dim"] * 2
    key_dim = shapes["linear_num_key_heads"] * shapes["linear_key_head_dim"]
    value_dim = shapes["linear_num_value_heads"] * shapes["linear_value_head_dim"]
    state_per_sequence = shapes["linear_attention_layers"] * 2 * (
        shapes["linear_num_value_heads"] * shapes["linear_key_head_dim"] * shapes["linear_value_head_dim"]
        + (shapes["linear_conv_kernel_dim"] - 1) * (2 * key_dim + value_dim))
    needed_kv_gib = (kv_per_token * context * sequences + state_per_sequence * sequences) / GIB
    share_gib = config.vllm_gpu_memory_utilization * total_gib
    vllm_weights_gib = weights_gib  # bf16, the same tensors as the trainer's
    plan = {"max_model_len": context, "max_num_seqs": sequences, "kv_bytes_per_token": kv_per_token,
            "needed_kv_cache_gib": round(needed_kv_gib, 2),
            "vllm_share_gib": round(share_gib, 1), "vllm_weights_gib": round(vllm_weights_gib, 1),
            "vllm_kv_room_before_profile_gib": round(share_gib - vllm_weights_gib, 1),
            "training_weights_gib": round(weights_gib, 1), "total_gib": round(total_gib, 1),
            "free_during_generation_gib": round(total_gib - weights_gib - share_gib, 1)}
    return plan


SERVER_UTILIZATION = 0.85  # `trl vllm-serve --gpu_memory_utilization` in the two-GPU preset's notes


def server_card_arithmetic(config, shapes: dict, weights_gib: float, total_gib: float) -> dict:
    """The second card of the two-GPU plan: vLLM alone on it, at SERVER_UTILIZATION."""
    colocated = plan_arithmetic(replace(config, vllm_gpu_memory_utilization=SERVER_UTILIZATION), shapes,
                                weights_gib, total_gib)
    return {"gpu_memory_utilization": SERVER_UTILIZATION, "share_gib": colocated["vllm_share_gib"],
            "kv_room_before_profile_gib": colocated["vllm_kv_room_before_profile_gib"],
            "needed_kv_cache_gib": colocated["needed_kv_cache_gib"],
            "free_gib": round(total_gib - colocated["vllm_share_gib"], 1)}


def measure_memory_plan(model, processor, config, gpu: bool, reply_tokens: int) -> dict:
    """The preset's colocate share reserved as one real allocation beside the training weights
    (what vLLM's engine holds awake), a generation-sized workload run under it, then freed as
    sleep mode frees it before the loss pass. On a CPU the same code runs with a share of a
    few MiB and no device figures."""
    import torch

    shapes = model_shapes(model)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    colocated = config.use_vllm and config.vllm_mode == "colocate"
    if not colocated:
        # The preset generates elsewhere (HF generate, or vLLM on a second card): the share
        # tested is the one-card colocate plan it replaced, to measure why it was replaced.
        config = replace(config, vllm_gpu_memory_utilization=COLOCATE_UTILIZATION, vllm_mode="colocate")
    figures: dict = {"tested": "the preset's colocate share" if colocated else "the one-card colocate plan (not the preset's)",
                     "vllm_gpu_memory_utilization": config.vllm_gpu_memory_utilization}
    if gpu:
        free, total = torch.cuda.mem_get_info()
        share = int(config.vllm_gpu_memory_utilization * total)
        figures["plan"] = plan_arithmetic(config, shapes, weights / GIB, total / GIB)
        figures["two_gpu_server_card"] = server_card_arithmetic(config, shapes, weights / GIB, total / GIB)
        figures["free_before_reservation_gib"] = round(free / GIB, 1)
    else:
        share, total = 4 * 2**20, None
        figures["plan"] = plan_arithmetic(config, shapes, weights / GIB, weights / GIB * 2)
    reservation = None
    try:
        reservation = torch.empty(share, dtype=torch.uint8, device=next(model.parameters()).device)
        reservation.fill_(1)  # touched, so the pages are real
    except torch.OutOfMemoryError as exc:
        figures.update(status="ok", reserved=False, fits=False,
                       error=f"the share does not fit beside the training weights: {str(exc).splitlines()[0]}")
        return figures
    figures["reserved_gib"] = round(share / GIB, 2)
    if gpu:
        figures["free_with_reservation_gib"] = round(device_free_gib(), 1)
    try:
        # The workload a turn puts on the card while the engine is awake: a short batched decode
        # from the turn-2 prompt (the images' vision pass and the prompt's prefill included).
        workload = measure_generate(model, processor, config, config.episodes_per_step, 4, gpu, reply_tokens)
        figures["workload"] = {k: workload[k] for k in ("sequences", "prompt_tokens", "decode_tokens", "seconds")}
        if gpu:
            figures["free_at_worst_gib"] = round(free_at_peak() / GIB, 1)
    except torch.OutOfMemoryError as exc:
        figures.update(workload_error=f"out of memory: {str(exc).splitlines()[0]}", free_at_worst_gib=0.0)
    finally:
        del reservation  # what sleep(level=2) does before the loss pass
        if gpu:
            torch.cuda.empty_cache()
    if gpu:
        figures["free_after_release_gib"] = round(device_free_gib(), 1)
        figures["fits"] = figures.get("free_at_worst_gib", 0.0) >= HEADROOM_GIB
    return figures


def measure_train(model, processor, config, episode, gpu: bool, lora_experts: bool) -> dict:
    """One LoRA forward + backward on the worst-case episode (micro-batch 1, as the preset)."""
    import torch
    from peft import get_peft_model

    from multiturn_trainer.episodes import loss_image_inputs
    from multiturn_trainer.train import peft_config

    settings = replace(config, lora_experts=lora_experts)
    if lora_experts and not any(n.endswith("gate_up_proj") for n, _ in model.named_parameters()):
        return skipped("a dense model has no fused expert parameters")
    peft_model = get_peft_model(model, peft_config(settings, model))
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    if gpu:
        peft_model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        peft_model.enable_input_require_grads()
    peft_model.train()
    device = next(model.parameters()).device
    ids = torch.tensor([episode.context()], device=device)
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    images = loss_image_inputs([episode], ids, pad)
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
        figures.update(status="failed", error=f"out of memory: {str(exc).splitlines()[0]}")
    finally:
        peft_model.zero_grad(set_to_none=True)
        if gpu:
            peft_model.gradient_checkpointing_disable()
        peft_model.unload()  # the base model back, for the next phase
        if gpu:
            torch.cuda.empty_cache()
    return figures


def measure_weight_sync(model, config, gpu: bool) -> dict:
    """What TRL's sync costs the trainer before a generation: merge the LoRA adapter into the
    base weights, read every tensor once in order and copy it into a staging buffer (vLLM's
    ``load_weights`` copies each one into its own parameter; server mode broadcasts it), then
    unmerge. The transfer to the engine itself is not here: colocated it is a device copy of the
    same bytes, in server mode an NCCL broadcast."""
    import torch
    from peft import get_peft_model

    from multiturn_trainer.train import peft_config

    peft_model = get_peft_model(model, peft_config(replace(config, lora_experts=False), model))
    tensors = 0
    streamed = 0
    largest = max(p.numel() * p.element_size() for p in model.parameters())
    device = next(model.parameters()).device
    staging = torch.empty(largest, dtype=torch.uint8, device=device)
    try:
        with Memory(gpu) as memory:
            with torch.no_grad():
                peft_model.merge_adapter()
                for name, tensor in peft_model.base_model.model.state_dict().items():
                    if "lora_" in name:
                        continue
                    size = tensor.numel() * tensor.element_size()
                    staging[:size].copy_(tensor.detach().reshape(-1).view(torch.uint8))
                    tensors += 1
                    streamed += size
                peft_model.unmerge_adapter()
        figures = {"tensors": tensors, "streamed_gib": round(streamed / GIB, 2), **memory.figures()}
        figures["gib_per_s"] = round(streamed / GIB / max(memory.seconds, 1e-9), 1)
        figures["per_step_colocate_s"] = round(config.turns * memory.seconds, 2)  # TRL re-pushes after every sleep
        figures["per_step_server_s"] = round(memory.seconds, 2)  # once per step when the step changes
        figures["note"] = "a lower bound: vLLM's load_weights (or the NCCL push) adds its own work per tensor"
    finally:
        del staging
        peft_model.unload()
        if gpu:
            torch.cuda.empty_cache()
    return figures


def memory_verdict(config, report: dict, gpu: bool) -> dict:
    """The preset's plan at its worst moment on the training card, from the measured phases:
    the least free memory over its generation (HF generate on this card, or the colocate share
    beside the weights), its loss pass and its weight sync."""
    if config.use_vllm and config.vllm_mode == "server":
        plan, moments = "two GPUs: trl vllm-serve on the second, training on this one", ["train", "weight_sync"]
    elif config.use_vllm:
        plan, moments = "one GPU: vLLM colocated, sleeping during the loss pass", ["memory_plan", "train", "weight_sync"]
    else:
        plan, moments = "one GPU: HF generate", ["generate_hf", "train"]
    figures: dict = {"plan": plan, "headroom_gib_required": HEADROOM_GIB}
    if not gpu:
        return {**figures, "free_gib_at_worst": None, "note": "no device memory figures on a CPU"}
    free = {}
    for moment in moments:
        phase = report.get(f"train_lora_experts_{str(config.lora_experts).lower()}" if moment == "train" else moment, {})
        value = phase.get("free_at_worst_gib", phase.get("free_at_peak_gib"))
        free[moment] = 0.0 if phase.get("status") == "failed" or phase.get("fits") is False and value is None else value
    measured = {k: v for k, v in free.items() if v is not None}
    if not measured:
        return {**figures, "status": "failed", "error": "no phase of the plan measured its memory"}
    worst = min(measured, key=measured.get)
    return {**figures, "free_gib": free, "worst_moment": worst, "free_gib_at_worst": measured[worst],
            "fits": measured[worst] >= HEADROOM_GIB}


def vllm_engine():
    """vLLM's ``LLM`` and ``SamplingParams``, or None where vLLM is not installed."""
    if not present("vllm"):
        return None
    from vllm import LLM, SamplingParams

    return LLM, SamplingParams


def measure_generate_vllm(model, processor, config, generations: int, decode_tokens: int, scratch: Path,
                          gpu: bool) -> dict:
    """The preset's colocated engine beside the resident training weights, built with the
    arguments TRL 1.16's colocate mode passes (external launcher, 4,096 batched tokens,
    processed log-probs, sleep mode), random ("dummy") weights at the model's shapes with
    its ``architectures``, and the painting sent as multimodal data with one image placeholder
    per image in the prompt (vLLM expands it itself)."""
    engine = vllm_engine()
    if engine is None:
        return skipped("vLLM is not installed")
    with single_process_rendezvous():
        return _generate_vllm(engine, model, processor, config, generations, decode_tokens, scratch, gpu)


def _generate_vllm(engine, model, processor, config, generations, decode_tokens, scratch, gpu):
    import torch

    from agent.messages import revision_content

    LLM, SamplingParams = engine
    shapes_dir = scratch / "vllm-shapes"
    model.config.save_pretrained(shapes_dir)
    processor.save_pretrained(shapes_dir)
    context = config.vllm_max_model_length or config.episode_token_budget()
    with Memory(gpu) as start:
        llm = LLM(model=str(shapes_dir), load_format="dummy", dtype="bfloat16" if gpu else "float32",
                  gpu_memory_utilization=config.vllm_gpu_memory_utilization, max_model_len=context,
                  max_num_seqs=generations, enable_sleep_mode=True, distributed_executor_backend="external_launcher",
                  max_num_batched_tokens=4096, logprobs_mode="processed_logprobs", seed=0)
    figures = {"backend": "vllm", "start_seconds": round(start.seconds, 1), "max_model_len": context,
               "gpu_memory_utilization": config.vllm_gpu_memory_utilization}
    if gpu:
        figures["device_free_gib_awake"] = round(device_free_gib(), 1)
    from PIL import Image
    import io

    [png] = starter_paintings(1)
    image = Image.open(io.BytesIO(png)).convert("RGB")
    from agent.messages import first_turn_messages

    messages = first_turn_messages(config.subjects[0], enable_thinking=config.enable_thinking)
    messages = [*messages, {"role": "assistant", "content": [{"type": "text", "text": "```js\n```"}]},
                {"role": "user", "content": [{"type": "image"} if p.get("type") == "image" else p
                                             for p in revision_content(png, "Passed.", 2, config.turns)]}]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                         enable_thinking=config.enable_thinking)
    ids = list(processor.tokenizer(text, add_special_tokens=False)["input_ids"])  # one <|image_pad|> per image
    # The preset's own sampling (untruncated: its log-probs then mean what the trainer's do).
    params = SamplingParams(n=1, max_tokens=decode_tokens, min_tokens=decode_tokens, temperature=config.temperature,
                            top_k=config.top_k, top_p=config.top_p, logprobs=0)
    with Memory(gpu) as memory:
        outputs = llm.generate([{"prompt_token_ids": ids, "multi_modal_data": {"image": image}}
                                for _ in range(generations)], sampling_params=params, use_tqdm=False)
    new = max(len(o.outputs[0].token_ids) for o in outputs)
    figures.update(sequences=generations, prompt_tokens=len(ids), decode_tokens=new, **memory.figures(),
                   tokens_per_s_per_sequence=round(new / memory.seconds, 2),
                   tokens_per_s=round(sum(len(o.outputs[0].token_ids) for o in outputs) / memory.seconds, 1))
    llm.sleep(level=2)  # what TRL does after every generation
    if gpu:
        figures["device_free_gib_asleep"] = round(device_free_gib(), 1)
    del llm
    if gpu:
        torch.cuda.empty_cache()
    return figures


def measure_render(config, generations: int) -> dict:
    reason = browser_missing()
    if reason is not None:
        return skipped(reason)
    from env.core import SketchEvaluator

    sketch = (ROOT / "examples" / "sketches" / "poppies.js").read_text()
    kwargs = {"renderers": config.renderers} if config.renderers else {}
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

    def reset(self, subjects, seeds, turns, revision_format="full"):
        self.inner.reset(subjects, seeds, turns, revision_format)

    def step(self, replies, turn):
        return self.inner.step([self.sketches[(i + turn) % len(self.sketches)] for i in range(len(replies))], turn)

    def close(self):
        self.inner.close()


def measure_step(model, processor, config, scratch: Path, step_tokens: int, gpu: bool) -> dict:
    missing = [name for name in ("trl", "datasets", "pydantic") if not present(name)]
    if missing:
        return skipped(f"not installed: {', '.join(missing)} (the real train() step needs TRL's path)")
    reason = browser_missing()
    if reason is not None:
        return skipped(reason)
    from multiturn_trainer.env_backends import make_environments
    from multiturn_trainer.store import RunStore
    from multiturn_trainer.train import train

    short = replace(config, model=str(scratch / "unused"), steps=1, max_completion_length=step_tokens,
                    output_dir=str(scratch / "run"), report_to="none", save_steps=10, reward_preset="style-offline",
                    use_vllm=False, tiny_model=None)
    with Memory(gpu) as memory:
        summary = train(short, environments=InjectedSketches(make_environments(short)), model_and_processor=(model, processor))
    [metrics] = RunStore(summary.run_dir, "gpu-check").read_metrics()
    with open(summary.run_dir / "episodes.jsonl") as lines:
        images = [sum(1 for t in json.loads(line)["turns"][:-1] if t["png"]) for line in lines]
    return {"episodes": summary.episodes, "turns": short.turns, "tokens_per_turn": step_tokens,
            "images_per_episode": images, **memory.figures(),
            **{f"{phase}_s": round(metrics.get(f"time/{phase}") or 0.0, 1)
               for phase in ("generate", "render", "score", "train")}}


def project(config, report: dict) -> dict:
    """A full step of the preset from the measured phases; each figure says where it comes from.

    generate: turns x budget / decode speed per sequence (a turn lasts until its longest
    sequence stops; random weights never stop). train: episodes x one fwd+bwd of the
    worst-case episode, plus for vLLM one no-grad forward per episode for the importance-sampling
    ratio (estimated at a third of a fwd+bwd). render: measured, else the sourced figure.
    sync: the measured merge + stream, three times a step colocated, once in server mode."""
    chosen = report.get(f"train_lora_experts_{str(config.lora_experts).lower()}", {})
    if chosen.get("status") != "ok" or "seconds" not in chosen:
        return {"status": "skipped", "reason": "no measured loss pass to project from",
                "anchor_step_s": ANCHOR_STEP_S, "anchor_110_steps_h": round(ANCHOR_STEP_S * ANCHOR_STEPS / 3600, 1)}
    train_s = config.episodes_per_step * chosen["seconds"]
    render = report.get("render", {})
    if render.get("status") == "ok":
        render_s, render_source = config.turns * render["seconds"], "measured: render"
    else:
        render_s, render_source = config.turns * RENDER_TURN_SOURCED_S, "sourced: docs/experiments/renderer-backends.md (4.3 s a turn)"
    sync = report.get("weight_sync", {})
    sync_once = sync.get("seconds") if sync.get("status") == "ok" else None
    columns = {}
    hf = report.get("generate_hf", {})
    if hf.get("status") == "ok":
        columns["hf_generate"] = (hf["tokens_per_s_per_sequence"], "measured: generate_hf", 0.0, 1.0)
    vllm = report.get("generate_vllm", {})
    if vllm.get("status") == "ok":
        speed, source = vllm["tokens_per_s_per_sequence"], "measured: generate_vllm"
    else:
        speed, source = VLLM_DECODE_SOURCED["tokens_per_s_per_sequence"], "sourced: " + VLLM_DECODE_SOURCED["source"]
    if sync_once is not None:
        columns["vllm_colocate"] = (speed, source, config.turns * sync_once, 4 / 3)
        columns["vllm_server_two_gpus"] = (speed, source, sync_once, 4 / 3)
    projection: dict = {"anchor_step_s": ANCHOR_STEP_S, "anchor_110_steps_h": round(ANCHOR_STEP_S * ANCHOR_STEPS / 3600, 1),
                        "turns": config.turns, "episodes": config.episodes_per_step,
                        "max_completion_length": config.max_completion_length,
                        "train_source": f"measured: {'train_lora_experts_' + str(config.lora_experts).lower()}",
                        "render_source": render_source, "sync_source": "measured: weight_sync"}
    for name, (speed, source, sync_s, train_factor) in columns.items():
        generate_s = config.turns * config.max_completion_length / speed
        step_s = generate_s + render_s + train_s * train_factor + sync_s
        projection[name] = {"decode_tokens_per_s_per_sequence": speed, "decode_source": source,
                            "generate_s": round(generate_s), "render_s": round(render_s),
                            "train_s": round(train_s * train_factor), "sync_s": round(sync_s, 1),
                            "step_s": round(step_s), "vs_anchor": round(step_s / ANCHOR_STEP_S, 2),
                            "110_steps_h": round(step_s * ANCHOR_STEPS / 3600, 1)}
    return projection


# ---------------------------------------------------------------------------------------------


def load_preset(shapes: str, args):
    import yaml

    from multiturn_trainer.config import TrainConfig

    # The GPU image has no TRL, so no TrlParser (config.load_config): the preset's YAML mapping
    # goes to TrainConfig as it is, which normalises its values itself.
    config = TrainConfig(**yaml.safe_load((ROOT / "configs" / f"{PRESETS[shapes]}.yaml").read_text()))
    overrides = {"subjects": ["poppies in a summer meadow"], "micro_batch_size": 1}
    for key in ("turns", "max_completion_length"):
        if getattr(args, key) is not None:
            overrides[key] = getattr(args, key)
    if args.generations is not None:
        overrides["num_generations"] = args.generations
    return replace(config, **overrides)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", choices=("35b", "35b-a3b", "4b", "tiny"), default="35b")
    parser.add_argument("--turns", type=int, default=None, help="default: the preset's")
    parser.add_argument("--generations", type=int, default=None, help="episodes per step; default: the preset's")
    parser.add_argument("--max-completion-length", type=int, default=None, help="default: the preset's")
    parser.add_argument("--decode-tokens", type=int, default=64, help="tokens decoded to measure generation speed")
    parser.add_argument("--reply-tokens", type=int, default=None,
                        help="turn-1 reply length in the turn-2 generation prompt; default: the completion budget")
    parser.add_argument("--step-tokens", type=int, default=32, help="tokens per turn in the real train() step")
    parser.add_argument("--reference-kernels", action="store_true",
                        help="hide the carried fla kernels (a rerun where they fail on the machine)")
    parser.add_argument("--out", default=os.environ.get("OUT"))
    args = parser.parse_args(argv)
    shapes = "35b" if args.shapes == "35b-a3b" else args.shapes

    import torch

    gpu = torch.cuda.is_available()
    if shapes != "tiny" and not gpu:
        raise SystemExit("gpu_check: the released shapes need a GPU; use --shapes tiny on a CPU")
    config = load_preset(shapes, args)
    if not gpu:
        config = replace(config, renderers=2, bf16=False, gradient_checkpointing=False)
    reply_tokens = args.reply_tokens or config.max_completion_length
    report = Report(args.out)
    report.set("shapes", shapes)
    report.set("preset", PRESETS[shapes])
    report.set("settings", {"turns": config.turns, "episodes_per_step": config.episodes_per_step,
                            "max_completion_length": config.max_completion_length, "use_vllm": config.use_vllm,
                            "vllm_mode": config.vllm_mode, "lora_experts": config.lora_experts,
                            "headroom_gib_required": HEADROOM_GIB})
    report.phase("environment", environment, gpu)

    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        built: dict = {}

        def build() -> dict:
            with Memory(gpu) as memory:
                built["model"], built["processor"] = build_policy(shapes, scratch)
            model = built["model"]
            figures = {**memory.figures(), "parameters_b": round(sum(p.numel() for p in model.parameters()) / 1e9, 3),
                       "weights_gib": round(sum(p.numel() * p.element_size() for p in model.parameters()) / GIB, 2),
                       "architectures": model.config.architectures}
            return figures

        # Before the model is built: transformers picks each kernel when it imports Qwen3.5.
        report.phase("kernels", kernels, gpu, args.reference_kernels)
        if report.phase("build", build)["status"] != "ok":
            return 1
        model, processor = built["model"], built["processor"]
        report.phase("generate_hf", measure_generate, model, processor, config, config.episodes_per_step,
                     args.decode_tokens, gpu, reply_tokens)
        report.phase("memory_plan", measure_memory_plan, model, processor, config, gpu, reply_tokens)
        episode = worst_case_episode(config, processor)
        for lora_experts in (False, True):
            report.phase(f"train_lora_experts_{str(lora_experts).lower()}", measure_train, model, processor, config,
                         episode, gpu, lora_experts)
        report.phase("weight_sync", measure_weight_sync, model, config, gpu)
        report.phase("memory_verdict", memory_verdict, config, report.data, gpu)
        report.phase("generate_vllm", measure_generate_vllm, model, processor, config, config.episodes_per_step,
                     args.decode_tokens, scratch, gpu)
        report.phase("render", measure_render, config, config.episodes_per_step)
        report.phase("step", measure_step, model, processor, config, scratch, args.step_tokens, gpu)
        report.phase("projection", project, config, report.data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
