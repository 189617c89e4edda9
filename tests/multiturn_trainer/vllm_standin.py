"""A stand-in for the part of vLLM that TRL 1.16's colocate path calls, for CPU tests.

It implements exactly the surface ``trl.generation.vllm_generation.VLLMGeneration`` uses —
``LLM(**engine kwargs)``, ``llm.generate(prompts, sampling_params=…, use_tqdm=False)`` with
``{"prompt_token_ids", "multi_modal_data"}`` rows, ``SamplingParams(**kwargs)``, per-token
``logprobs`` (``{token_id: Logprob(logprob, rank)}``), ``sleep(level)``, ``wake_up(tags)``,
``reset_prefix_cache()`` and ``llm_engine.model_executor.driver_worker.model_runner.model.load_weights``
— and asserts what it is sent, rejecting what vLLM 0.31 rejects or silently gets wrong: token
prompts with one ``<|image_pad|>`` per image given (vLLM expands each itself), ``SamplingParams``
keywords vLLM knows, weights pushed under names the model has, no generation while its weights
are asleep. It exists for what needs a GPU (sleep mode, the in-place weight push TRL does on
CUDA); tests/multiturn_trainer/test_vllm_real.py runs the real engine where a CPU build of vLLM is installed. It samples with a real copy of the policy (the weights TRL pushes), so
the log-probs it returns are the sampler's and the trainer's ratio must come out at 1.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch


# vLLM 0.31.0's ``SamplingParams`` fields (a msgspec Struct: an unknown keyword is a TypeError
# there, so it is one here; tests/multiturn_trainer/test_vllm_real.py checks this list against the real class).
SAMPLING_PARAMS_FIELDS = frozenset((
    "n", "presence_penalty", "frequency_penalty", "repetition_penalty", "temperature", "watermarking", "top_p",
    "top_k", "min_p", "seed", "stop", "stop_token_ids", "ignore_eos", "max_tokens", "min_tokens", "logprobs",
    "prompt_logprobs", "prompt_logprob_token_ids", "prompt_logprob_start", "logprob_token_ids", "flat_logprobs",
    "detokenize", "skip_special_tokens", "spaces_between_special_tokens", "include_stop_str_in_output",
    "output_kind", "stream_interval", "skip_clone", "output_text_buffer_length", "structured_outputs", "logit_bias",
    "allowed_token_ids", "extra_args", "bad_words", "skip_reading_prefix_cache", "thinking_token_budget",
    "repetition_detection", "routed_experts_prompt_start", "trace_decode_token_ids",
))


class SamplingParams:
    def __init__(self, **kwargs):
        unknown = sorted(set(kwargs) - SAMPLING_PARAMS_FIELDS)
        if unknown:
            raise TypeError(f"Unexpected keyword argument(s) {unknown} (vLLM 0.31 SamplingParams)")
        self.__dict__.update(kwargs)


class _Weights:
    def __init__(self, owner: "StandInLLM"):
        self.owner = owner

    def load_weights(self, weights):
        state = self.owner.model.state_dict()
        for name, tensor in weights:
            if name not in state:
                raise KeyError(f"vLLM stand-in: pushed weight {name!r} is not a parameter of the model")
            state[name].copy_(tensor.to(state[name].dtype))
            self.owner.loaded.add(name)
        self.owner.weights_awake = True


class StandInLLM:
    instances: list["StandInLLM"] = []

    def __init__(self, model: str, **engine_kwargs):
        from multiturn_trainer.tiny_model import load_pretrained

        self.engine_kwargs = dict(engine_kwargs, model=model)
        if engine_kwargs.get("load_format") == "dummy":  # vLLM's random weights at the folder's shapes
            from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor

            self.model = AutoModelForImageTextToText.from_config(AutoConfig.from_pretrained(model))
            self.processor = AutoProcessor.from_pretrained(model)
        else:
            self.model, self.processor = load_pretrained(model)
        self.model.eval()
        self.image_pad_id = self.processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
        self.merge = self.processor.image_processor.merge_size ** 2
        self.loaded: set[str] = set()
        self.weights_awake = True
        self.events: list[tuple] = []
        self.requests: list[dict] = []
        self.llm_engine = SimpleNamespace(model_executor=SimpleNamespace(driver_worker=SimpleNamespace(
            model_runner=SimpleNamespace(model=_Weights(self)))))
        StandInLLM.instances.append(self)

    def sleep(self, level: int = 1):
        self.events.append(("sleep", level))
        if level == 2:
            self.weights_awake = False  # level 2 discards the weights: they must be pushed again

    def wake_up(self, tags=None):
        self.events.append(("wake_up", tuple(tags or ())))

    def reset_prefix_cache(self):
        self.events.append(("reset_prefix_cache",))

    def generate(self, prompts, sampling_params, use_tqdm=False):
        if not self.weights_awake:
            raise RuntimeError("vLLM stand-in: generate() while the weights are discarded (sleep level 2)")
        self.events.append(("generate", len(prompts)))
        return [self._one(prompt, sampling_params) for prompt in prompts]

    def _one(self, prompt: dict, params: SamplingParams):
        ids = list(prompt["prompt_token_ids"])
        images = (prompt.get("multi_modal_data") or {}).get("image")
        images = [] if images is None else (images if isinstance(images, list) else [images])
        runs = _runs(ids, self.image_pad_id)
        if images:
            # Like vLLM's prompt rendering: one <|image_pad|> per image, expanded here to the
            # image's token count (vLLM expands an expanded run again, silently).
            encoded = self.processor.image_processor(images=images, return_tensors="pt")
            sizes = [int(g.prod()) // self.merge for g in encoded["image_grid_thw"]]
            if runs != [1] * len(images):
                raise AssertionError(f"vLLM stand-in: image token runs {runs} for {len(images)} images "
                                     "(vLLM takes one <|image_pad|> per image and expands it itself)")
            ids = _expand(ids, self.image_pad_id, sizes)
            inputs = {"input_ids": torch.tensor([ids])}
            inputs.update(pixel_values=encoded["pixel_values"], image_grid_thw=encoded["image_grid_thw"],
                          mm_token_type_ids=(inputs["input_ids"] == self.image_pad_id).long())
        elif runs:
            raise AssertionError(f"vLLM stand-in: {len(runs)} runs of image tokens but no multi_modal_data")
        else:
            inputs = {"input_ids": torch.tensor([ids])}
        self.requests.append({"prompt_token_ids": list(prompt["prompt_token_ids"]), "images": len(images), "max_tokens": params.max_tokens,
                              "logprobs": params.logprobs, "n": params.n})
        tokenizer = self.processor.tokenizer
        with torch.no_grad():
            out = self.model.generate(
                **inputs, do_sample=True, temperature=params.temperature, top_p=params.top_p,
                top_k=params.top_k if params.top_k and params.top_k > 0 else None, max_new_tokens=params.max_tokens,
                min_new_tokens=getattr(params, "min_tokens", 0) or None,
                output_scores=True, return_dict_in_generate=True, eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
            )
        tokens = out.sequences[0, len(ids):].tolist()
        if tokenizer.eos_token_id in tokens:
            tokens = tokens[:tokens.index(tokenizer.eos_token_id) + 1]
        logprobs = [{token: SimpleNamespace(logprob=float(torch.log_softmax(score[0].float(), -1)[token]), rank=1)}
                    for token, score in zip(tokens, out.scores)]
        return SimpleNamespace(prompt_token_ids=ids, outputs=[SimpleNamespace(token_ids=tokens, logprobs=logprobs)])


def _expand(ids: list[int], token: int, sizes: list[int]) -> list[int]:
    out, images = [], iter(sizes)
    for t in ids:
        out.extend([t] * next(images) if t == token else [t])
    return out


def _runs(ids: list[int], token: int) -> list[int]:
    runs, length = [], 0
    for t in ids + [None]:
        if t == token:
            length += 1
        elif length:
            runs.append(length)
            length = 0
    return runs


def install(monkeypatch) -> type[StandInLLM]:
    """Put the stand-in where TRL looks for vLLM."""
    import trl.generation.vllm_generation as vllm_generation
    import trl.trainer.grpo_trainer as grpo_trainer

    StandInLLM.instances = []
    monkeypatch.setattr(vllm_generation, "LLM", StandInLLM, raising=False)
    monkeypatch.setattr(vllm_generation, "SamplingParams", SamplingParams, raising=False)
    monkeypatch.setattr(vllm_generation, "is_vllm_available", lambda *a, **k: True)
    if hasattr(grpo_trainer, "is_vllm_available"):
        monkeypatch.setattr(grpo_trainer, "is_vllm_available", lambda *a, **k: True)
    return StandInLLM
