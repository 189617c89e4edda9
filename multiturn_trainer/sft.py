"""`watercolour sft`: supervised warm start on sketch sources, so a small policy paints at all.

The loss covers only the completion (the fenced sketch and the end-of-turn token); the prompt
is tokenized exactly as the GRPO trainer tokenizes turn 1 (the processor's chat template with
the generation prompt), so the warm start and the policy's first turn agree token for token.
Large models train a LoRA that is merged before saving; the result is an ordinary checkpoint
folder for ``train --model``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from agent.messages import first_turn_messages
from agent.procedural import sft_examples

# Three layers (background washes, then the main masses) is a sketch of ~1.2k characters:
# the 0.5M-parameter tiny model learns it in a few hundred steps on 2 CPU cores, the full
# compositions (3-8k characters) it does not.
COMPACT_SECTIONS = 3


@dataclass
class SftResult:
    out_dir: Path
    steps: int
    first_loss: float
    last_loss: float


def load_examples(source: str, n: int, seed: int) -> list[dict[str, Any]]:
    """(subject, prompt messages, completion) rows from the procedural generator or a pool's sources."""
    if source in ("procedural", "compact"):
        return sft_examples(n, seed=seed, max_sections=COMPACT_SECTIONS if source == "compact" else None)
    from rewards.pool import ReferencePool

    pool = ReferencePool.load(source)
    rows = []
    for entry in pool.entries():
        code = pool.source(entry)
        if code:
            subject = entry.subject or "a watercolour painting"
            rows.append({"subject": subject, "prompt_messages": first_turn_messages(subject),
                         "completion": f"```js\n{code}```"})
    if not rows:
        raise SystemExit(f"watercolour sft: the pool {source} has no sketch sources to learn from")
    rng = random.Random(seed)
    return [rows[rng.randrange(len(rows))] for _ in range(n)] if n > len(rows) else rows[:n]


def tokenize_example(processor, example: dict[str, Any], enable_thinking: bool = False) -> tuple[list[int], list[int]]:
    prompt = processor.apply_chat_template(
        example["prompt_messages"], add_generation_prompt=True, tokenize=True, return_dict=True,
        enable_thinking=enable_thinking,
    )["input_ids"][0]
    prompt = list(prompt)
    completion = processor.tokenizer(example["completion"], add_special_tokens=False)["input_ids"]
    completion = list(completion) + [processor.tokenizer.eos_token_id]
    return prompt + completion, [-100] * len(prompt) + completion


def run_sft(model_path: str, out_dir: str | Path, examples: list[dict[str, Any]], *, epochs: float = 1.0,
            learning_rate: float = 2e-3, batch_size: int = 4, lora: bool = False, seed: int = 0,
            quiet: bool = False) -> SftResult:
    from multiturn_trainer.tiny_model import load_policy

    torch.manual_seed(seed)
    gpu = torch.cuda.is_available()
    model, processor = load_policy(model_path, dtype="bfloat16" if gpu else None, device="cuda" if gpu else None)
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear",
                                                 exclude_modules=r".*\.visual\..*", task_type="CAUSAL_LM"))
    model.train()
    encoded = [tokenize_example(processor, e) for e in examples]
    steps = max(1, round(len(encoded) * epochs / batch_size))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=learning_rate,
                                  weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 10) * max(0.1, 1 - s / steps))
    rng = random.Random(seed)
    order: list[int] = []
    pad = processor.tokenizer.pad_token_id
    losses = []
    bar = tqdm(range(steps), desc="sft", disable=quiet)
    for _ in bar:
        batch = []
        for _ in range(batch_size):
            if not order:
                order = list(range(len(encoded)))
                rng.shuffle(order)
            batch.append(encoded[order.pop()])
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in batch])
        labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in batch])
        attention = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in batch])
        device = next(model.parameters()).device
        loss = model(input_ids=input_ids.to(device), attention_mask=attention.to(device), labels=labels.to(device)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        bar.set_postfix(loss=f"{loss.item():.3f}")
    if lora:
        model = model.merge_and_unload()
    out_dir = Path(out_dir)
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    return SftResult(out_dir=out_dir, steps=steps, first_loss=losses[0], last_loss=sum(losses[-5:]) / len(losses[-5:]))


def cmd_sft(args) -> int:
    from multiturn_trainer.train import ensure_model
    from multiturn_trainer.config import TrainConfig

    ensure_model(TrainConfig(model=args.model, tiny_model=args.tiny_model, seed=args.seed))
    if not Path(args.model, "config.json").is_file() and not args.tiny_model and Path(args.model).exists():
        raise SystemExit(f"watercolour sft: {args.model} is not a model folder (no config.json)")
    examples = load_examples(args.source, args.examples, args.seed)
    result = run_sft(args.model, args.out, examples, epochs=args.epochs, learning_rate=args.learning_rate,
                     batch_size=args.batch_size, lora=args.lora, seed=args.seed)
    print(f"sft: {result.steps} steps, loss {result.first_loss:.3f} -> {result.last_loss:.3f}; saved {result.out_dir}")
    return 0
