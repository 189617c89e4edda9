"""scripts/gpu_check.py: every phase on tiny shapes on a CPU, its JSON kept when killed
half-way, the memory plan's arithmetic at the released shapes, and (in its own lane,
`make rehearse-device`) the same run under the GPU image's package versions."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers import ROOT

SCRIPT = ROOT / "scripts" / "gpu_check.py"
TINY = ["--shapes", "tiny", "--generations", "2", "--max-completion-length", "16", "--reply-tokens", "8",
        "--decode-tokens", "4", "--step-tokens", "8"]
MODEL_PHASES = ("generate_hf", "memory_plan", "train_lora_experts_false", "train_lora_experts_true", "weight_sync")


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class RecordingLLM:
    """vLLM's ``LLM`` surface the check calls, recording what it is given. vLLM does not install
    on this machine; what matters here is what the check hands the engine."""

    instances: list["RecordingLLM"] = []

    def __init__(self, model: str, **kwargs):
        self.model, self.kwargs, self.events, self.prompts = model, kwargs, [], []
        self.environ = dict(os.environ)  # external_launcher reads its rendezvous from here
        saved = Path(model) / "config.json"  # the folder is gone once the check ends
        self.architectures = json.loads(saved.read_text()).get("architectures") if saved.exists() else None
        RecordingLLM.instances.append(self)

    def generate(self, prompts, sampling_params, use_tqdm=False):
        self.prompts.extend(prompts)
        self.sampling = sampling_params
        tokens = list(range(5, 5 + sampling_params.max_tokens))
        return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=tokens)]) for _ in prompts]

    def sleep(self, level=1):
        self.events.append(("sleep", level))


def image_pad_runs(ids: list[int], pad: int) -> list[int]:
    runs, length = [], 0
    for token in ids + [None]:
        if token == pad:
            length += 1
        elif length:
            runs, length = runs + [length], 0
    return runs


@pytest.mark.slow  # 306-342 s with other work running (load 12-14)
def test_gpu_check_runs_every_phase_on_cpu_with_tiny_shapes(tmp_path, monkeypatch, capsys):
    """Every phase on tiny shapes where TRL and a browser are installed (this venv): the code
    the H200 runs, with vLLM's engine replaced by a recorder."""
    gpu_check = load_script()
    RecordingLLM.instances = []
    monkeypatch.setattr(gpu_check, "vllm_engine", lambda: (RecordingLLM, SimpleNamespace))
    for key in gpu_check.SINGLE_PROCESS_RENDEZVOUS:
        monkeypatch.delenv(key, raising=False)
    assert gpu_check.main([*TINY, "--out", str(tmp_path)]) == 0
    # The vLLM phase's rendezvous lives only as long as its engine: later `watercolour train`
    # subprocesses of this process must not inherit a port it holds.
    assert not set(gpu_check.SINGLE_PROCESS_RENDEZVOUS) & set(os.environ)
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["shapes"] == "tiny" and report["settings"]["turns"] == 3
    assert report["settings"]["episodes_per_step"] == 2
    for phase in ("environment", "kernels", "build", *MODEL_PHASES, "generate_vllm", "render", "step", "projection"):
        assert report[phase]["status"] == "ok", (phase, report[phase])
    assert report["build"]["architectures"] == ["Qwen3_5MoeForConditionalGeneration"]
    # Generation starts from a turn-2 prompt: the painting goes through the vision tower.
    generate = report["generate_hf"]
    assert generate["images_per_prompt"] == 1 and generate["decode_tokens"] == 4
    assert generate["tokens_per_s_per_sequence"] > 0
    # The worst-case episode: 3 completions of the full budget and two real paintings.
    for setting in ("false", "true"):
        trained = report[f"train_lora_experts_{setting}"]
        assert trained["images"] == 2 and trained["tokens"] > 3 * 16 and trained["seconds"] > 0
    assert (report["train_lora_experts_true"]["trainable_parameters"]
            > report["train_lora_experts_false"]["trainable_parameters"])
    plan = report["memory_plan"]
    assert plan["reserved_gib"] >= 0 and plan["workload"]["sequences"] == 2
    assert plan["plan"]["max_model_len"] == 2048 + 3 * 16 + 2 * 1024
    # The sync reads every tensor of the model once (the tiny MoE has 105).
    assert report["weight_sync"]["tensors"] == 105
    assert report["memory_verdict"]["plan"] == "one GPU: HF generate"
    # vLLM's engine gets TRL's colocate arguments, a config with `architectures`, and one
    # <|image_pad|> per image beside the image itself (vLLM expands it).
    [llm] = RecordingLLM.instances
    for key, value in {"load_format": "dummy", "distributed_executor_backend": "external_launcher",
                       "max_num_batched_tokens": 4096, "logprobs_mode": "processed_logprobs",
                       "enable_sleep_mode": True, "max_model_len": 2048 + 3 * 16 + 2 * 1024}.items():
        assert llm.kwargs[key] == value, key
    assert llm.architectures == ["Qwen3_5MoeForConditionalGeneration"]
    assert len(llm.prompts) == 2 and ("sleep", 2) in llm.events
    for prompt in llm.prompts:
        assert prompt["multi_modal_data"]["image"].size == (600, 600)
    # The real train() step carried paintings into turns 1 and 2.
    step = report["step"]
    assert step["episodes"] == 2 and step["images_per_episode"] == [2, 2]
    assert report["render"]["passed"] == 2
    projection = report["projection"]
    assert projection["anchor_step_s"] == 1100.0 and projection["anchor_110_steps_h"] == 33.6
    hf = projection["hf_generate"]
    assert hf["decode_source"] == "measured: generate_hf"
    assert hf["step_s"] == pytest.approx(hf["generate_s"] + hf["render_s"] + hf["train_s"] + hf["sync_s"], abs=2)
    assert projection["vllm_server_two_gpus"]["decode_source"] == "measured: generate_vllm"
    assert "gpu_check projection:" in capsys.readouterr().out


def test_vllm_prompt_has_one_placeholder_per_image(tmp_path, monkeypatch):
    """What the engine gets as a prompt: one <|image_pad|> for the one painting, not the expanded run."""
    gpu_check = load_script()
    from multiturn_trainer.tiny_model import build_tiny_model
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(str(build_tiny_model(tmp_path / "tiny", kind="moe", seed=0)))
    config = gpu_check.load_preset("tiny", SimpleNamespace(turns=None, max_completion_length=16, generations=2))
    RecordingLLM.instances = []
    monkeypatch.setattr(gpu_check, "vllm_engine", lambda: (RecordingLLM, SimpleNamespace))
    model = SimpleNamespace(config=SimpleNamespace(save_pretrained=lambda path: None))
    for key in gpu_check.SINGLE_PROCESS_RENDEZVOUS:
        monkeypatch.delenv(key, raising=False)
    figures = gpu_check.measure_generate_vllm(model, processor, config, 2, 3, tmp_path, gpu=False)
    assert figures["decode_tokens"] == 3
    assert RecordingLLM.instances[0].environ["MASTER_PORT"] == "29531"  # set while the engine was built
    assert "MASTER_PORT" not in os.environ  # and undone after it
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    [llm] = RecordingLLM.instances
    assert [image_pad_runs(p["prompt_token_ids"], pad) for p in llm.prompts] == [[1], [1]]
    # Sampled as the preset samples: untruncated, so processed log-probs mean the trainer's.
    assert (llm.sampling.top_k, llm.sampling.top_p, llm.sampling.temperature) == (config.top_k, config.top_p,
                                                                                  config.temperature)
    assert (config.top_k, config.top_p) == (0, 1.0)


def test_released_shapes_have_the_released_parameter_count(tmp_path):
    """Built on the meta device (no memory): the 35B-A3B shapes give the 35.1 B parameters and
    65.4 GiB of bf16 weights measured on the H200; the 4B-class shapes give 5.17 B."""
    import torch
    from transformers import AutoProcessor, Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration

    from multiturn_trainer.tiny_model import build_tiny_model

    gpu_check = load_script()
    for shapes, kind, cls, billions in (("35b", "moe", Qwen3_5MoeForConditionalGeneration, 35.107),
                                        ("4b", "dense", Qwen3_5ForConditionalGeneration, 5.175)):
        processor = AutoProcessor.from_pretrained(str(build_tiny_model(tmp_path / kind, kind=kind, seed=0)))
        with torch.device("meta"):
            model = cls._from_config(gpu_check.released_config(shapes, processor), dtype=torch.bfloat16)
        parameters = sum(p.numel() for p in model.parameters())
        assert parameters / 1e9 == pytest.approx(billions, abs=0.001), shapes
        if shapes == "35b":
            assert parameters * 2 / 2**30 == pytest.approx(65.4, abs=0.05)
            assert gpu_check.model_shapes(model) == {
                "full_attention_layers": 10, "linear_attention_layers": 30, "num_key_value_heads": 2, "head_dim": 256,
                "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
                "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4}


def test_memory_plan_arithmetic_at_the_released_shapes():
    """The memory plan (docs/design/vllm-and-memory.md), from the same function the check reports: the 35B's KV cache
    per token and for 8 x 16k tokens, and why the one-card colocate share leaves too little."""
    gpu_check = load_script()
    from multiturn_trainer.config import load_config

    shapes = {"full_attention_layers": 10, "linear_attention_layers": 30, "num_key_value_heads": 2, "head_dim": 256,
              "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
              "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4}
    # The one-card colocate plan the 35B preset had: vLLM's share 0.5 of the card, sleep mode.
    colocate = replace(load_config(ROOT / "configs" / "qwen3.5-35b-a3b.yaml"), use_vllm=True, vllm_mode="colocate",
                       vllm_gpu_memory_utilization=gpu_check.COLOCATE_UTILIZATION)
    plan = gpu_check.plan_arithmetic(colocate, shapes, weights_gib=65.4, total_gib=140.4)
    assert plan["kv_bytes_per_token"] == 2 * 10 * 2 * 256 * 2 == 20_480
    assert plan["max_model_len"] == 16_384 and plan["max_num_seqs"] == 8
    # 8 x 16,384 tokens x 20 KiB = 2.5 GiB, plus 8 x 30 layers of ~1 MiB GatedDeltaNet state.
    assert plan["needed_kv_cache_gib"] == pytest.approx(2.5 + 8 * 30 * 2 * (32 * 128 * 128 + 3 * 8192) / 2**30, abs=0.01)
    assert plan["vllm_share_gib"] == pytest.approx(70.2, abs=0.05)
    assert plan["free_during_generation_gib"] < gpu_check.HEADROOM_GIB  # 4.8 GiB: why it is not the plan
    # The plans chosen instead: HF generate on the one card, or vLLM on a second card.
    assert load_config(ROOT / "configs" / "qwen3.5-35b-a3b.yaml").use_vllm is False
    two = load_config(ROOT / "configs" / "qwen3.5-35b-a3b-2gpu.yaml")
    assert (two.use_vllm, two.vllm_mode, two.vllm_server_base_url) == (True, "server", "http://localhost:8000")
    server = gpu_check.server_card_arithmetic(two, shapes, weights_gib=65.4, total_gib=140.4)
    assert server["free_gib"] >= gpu_check.HEADROOM_GIB and server["kv_room_before_profile_gib"] > 40


def test_two_gpu_preset_reaches_trls_server_mode(tmp_path):
    """The two-GPU preset as TRL receives it: server mode at the preset's URL, no sleep mode (the
    engine has its own card), the episode budget as context. Starting `trl vllm-serve` needs vLLM
    and a GPU, so this is as far as it runs here."""
    from multiturn_trainer.config import load_config
    from multiturn_trainer.store import RunStore
    from multiturn_trainer.train import grpo_args

    config = replace(load_config(ROOT / "configs" / "qwen3.5-35b-a3b-2gpu.yaml"), output_dir=str(tmp_path))
    args = grpo_args(config, RunStore(tmp_path / "run", "two-gpu"))
    assert (args.use_vllm, args.vllm_mode, args.vllm_server_base_url) == (True, "server", "http://localhost:8000")
    assert args.vllm_enable_sleep_mode is False and args.vllm_max_model_length == 16_384


@pytest.mark.slow  # its own lane (make rehearse-device), 88-142 s
@pytest.mark.skipif(not os.environ.get("WATERCOLOUR_DEVICE_PYTHON"),
                    reason="the GPU image's rehearsal venv runs in its own lane: make rehearse-device")
def test_gpu_check_under_the_gpu_images_versions(tmp_path):
    """The run the H200 gets, on this CPU: the image's torch, transformers, accelerate and peft,
    no TRL, datasets, pydantic, vLLM or browser, and the wheel folder device_wheels.sh wrote."""
    python = os.environ["WATERCOLOUR_DEVICE_PYTHON"]
    env = {**os.environ, "OUT": str(tmp_path), "PYTHONPATH": os.environ.get("WATERCOLOUR_DEVICE_SITE", "")}
    done = subprocess.run([python, str(SCRIPT), *TINY], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    versions = report["environment"]["versions"]
    assert (versions["torch"], versions["transformers"], versions["accelerate"]) == ("2.11.0", "5.17.0", "1.15.0")
    assert not any(versions[name] for name in ("trl", "datasets", "pydantic", "vllm", "playwright"))
    if os.environ.get("WATERCOLOUR_DEVICE_SITE"):
        # The carried kernels import under these versions, then the CPU run hides them.
        assert versions["flash-linear-attention"] == "0.6.0" and report["kernels"]["fla_imports"] is True
        assert "hidden" in report["kernels"]
    for phase in ("environment", "kernels", "build", *MODEL_PHASES, "projection"):
        assert report[phase]["status"] == "ok", (phase, report[phase])
    for phase, why in (("generate_vllm", "vLLM"), ("render", "playwright"), ("step", "trl")):
        assert report[phase]["status"] == "skipped" and why in report[phase]["reason"], phase


@pytest.mark.slow  # 36-47 s with other work running (load 12-14)
def test_gpu_check_json_keeps_the_finished_phases_when_killed(tmp_path):
    """Killed half-way (SIGKILL, no clean-up), the JSON holds every phase that finished."""
    env = {**os.environ, "OUT": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen([sys.executable, str(SCRIPT), *TINY], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    path = tmp_path / "gpu_check.json"
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            if path.exists() and "generate_hf" in json.loads(path.read_text()):
                break
            assert process.poll() is None, "the check ended before it could be killed"
            time.sleep(0.2)
        else:
            pytest.fail("generate_hf never finished")
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    report = json.loads(path.read_text())
    for phase in ("environment", "kernels", "build", "generate_hf"):
        assert report[phase]["status"] == "ok", phase
    assert "projection" not in report and "step" not in report


# What the GPU image lacks (device_wheels.sh carries only the fla kernels).
NOT_ON_THE_GPU_IMAGE = ("trl", "datasets", "pydantic", "vllm", "playwright", "tree_sitter", "tree_sitter_javascript")
# The project modules the check's model phases import on the device.
MODEL_PHASE_MODULES = ("multiturn_trainer.tiny_model", "multiturn_trainer.episodes", "multiturn_trainer.kernels",
                       "multiturn_trainer.train", "agent.messages")


def test_model_phases_import_without_what_the_gpu_image_lacks():
    """The fast guard for `make rehearse-device`: an import of the gate (tree-sitter) or TRL at
    the top of a module the model phases load fails the H200 run before it measures anything."""
    program = (
        "import importlib, importlib.abc, sys\n"
        f"blocked = {NOT_ON_THE_GPU_IMAGE!r}\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in blocked:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r} (not on the GPU image)')\n"
        "sys.meta_path.insert(0, Block())\n"
        f"for module in {MODEL_PHASE_MODULES!r}:\n"
        "    importlib.import_module(module)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
