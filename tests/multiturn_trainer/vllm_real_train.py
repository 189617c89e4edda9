"""One real colocated-vLLM GRPO run through ``train()``, in a process of its own.

tests/multiturn_trainer/test_vllm_real.py runs this file as a script: vLLM registers its own Qwen3.5 config
class when its engine starts, after which transformers loads Qwen3.5 checkpoints wrongly in
that process, so the training run (which loads the HF policy, then starts the engine) gets a
fresh process. Prints one JSON line: the run's summary and what the engine was sent.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]


def main(model: str, run_dir: str, kind: str = "dense") -> None:
    import vllm

    from multiturn_trainer import grpo

    from env.core import SketchEvaluator
    from helpers import tiny_config
    from multiturn_trainer.env_backends import InProcessEnvironments
    from multiturn_trainer.train import train
    from test_microbatch import ForcedPaintings

    sent: list[dict] = []
    generate = vllm.LLM.generate

    def recording_generate(self, prompts, *args, **kwargs):
        for prompt in prompts:
            sent.append({"prompt_token_ids": list(prompt["prompt_token_ids"]),
                         "images": len(_images(prompt.get("multi_modal_data")))})
        return generate(self, prompts, *args, **kwargs)

    vllm.LLM.generate = recording_generate
    syncs: list[dict] = []
    install = grpo.reload_weights_on_cpu

    def recording_install(generation):
        install(generation)
        syncs_into_engine(generation, syncs)

    grpo.reload_weights_on_cpu = recording_install
    with SketchEvaluator(renderers=1, deadline_s=60) as evaluator:
        # Both episodes paint in turn 1 (so each turn-2 prompt carries an image); only the first
        # paints in turn 2, so the group's rewards differ, step 1 updates the adapter and step 2
        # samples from the merged weights pushed after that update.
        environments = ForcedPaintings(InProcessEnvironments(evaluator=evaluator, deadline_s=60),
                                       [[True, True], [True, False]])
        # The CPU engine: no sleep mode (the CPU backend has none) and a small share of the
        # machine's memory (on CPU gpu_memory_utilization is the share of RAM it reserves).
        config = tiny_config(Path(model), Path(run_dir), use_vllm=True, steps=2, save_steps=10, top_k=0,
                             top_p=1.0, micro_batch_size=1, vllm_enable_sleep_mode=False,
                             vllm_gpu_memory_utilization=0.15, max_completion_length=48, temperature=1.0,
                             learning_rate=1e-2, lora_experts=kind == "moe")
        summary = train(config, environments=environments)
    print("RESULT " + json.dumps({"steps": summary.steps, "run_dir": str(summary.run_dir), "sent": sent,
                                  "syncs": syncs}), flush=True)


def syncs_into_engine(generation, syncs: list[dict]) -> None:
    """Wrap the trainer's weight sync (TRL's merge-and-rename stream, loaded by the project's CPU
    sync) so that each sync records, per fused expert tensor of the stream, its largest
    difference from the engine's ``routed_experts`` tensor after loading, how far the merged
    tensor is from the adapter's base weight, and how close the base came back after unmerging."""
    import torch

    from multiturn_trainer.train import EXPERT_PARAMETERS

    stream = generation._iter_named_params
    names: list[str] = []
    streamed: dict[str, torch.Tensor] = {}  # the fused expert tensors, as sent

    def recording_stream():
        names.clear()
        streamed.clear()
        for name, param in stream():
            names.append(name)
            if name.endswith(EXPERT_PARAMETERS):
                streamed[name] = param.detach().float().clone()
            yield name, param

    def base_experts() -> dict[str, torch.Tensor]:
        return {name.removeprefix("base_model.model.").replace(".base_layer", ""): p.detach().float().clone()
                for name, p in generation.model.named_parameters()
                if name.replace(".base_layer", "").endswith(EXPERT_PARAMETERS)}

    sync = generation.sync_weights

    def recording_sync():
        before = base_experts()
        sync()
        engine = dict(generation.llm.llm_engine.model_executor.driver_worker.model_runner.model.named_parameters())
        experts = {}
        for name, tensor in streamed.items():
            layer = name.split(".layers.")[1].split(".")[0]
            target = f"language_model.model.layers.{layer}.mlp.experts.routed_experts." + (
                "w13_weight" if name.endswith("gate_up_proj") else "w2_weight")
            experts[name] = {"engine": target, "max_difference": (engine[target].float() - tensor).abs().max().item(),
                             "scale": tensor.abs().max().item(),
                             "merged_minus_base": (tensor - before[name]).abs().max().item()}
        after = base_experts()
        syncs.append({"names": sorted(names), "experts": experts,
                      "unmerge_max_difference": max(((before[n] - after[n]).abs().max().item() for n in before),
                                                    default=0.0)})

    generation._iter_named_params = recording_stream
    generation.sync_weights = recording_sync


def _images(data) -> list:
    images = (data or {}).get("image")
    return [] if images is None else (images if isinstance(images, list) else [images])


if __name__ == "__main__":
    main(*sys.argv[1:4])
