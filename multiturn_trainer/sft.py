"""`watercolour sft`: supervised warm start on sketch sources, so a small policy paints at all.

Two kinds of example:

* **first turn**: the turn-1 prompt, then a fenced sketch;
* **revision** (``revisions > 0``): the turn-1 prompt, a sketch, the environment's real reply
  to it (the rendered painting as an image plus the feedback text), then a revised sketch:
  one more layer, or the repair of a gate failure (``procedural.FLAWS``). The draft is
  rendered by the real renderer, so the warm start shows the model the same kind of turn-2
  context GRPO will.

Token layout is built exactly as the GRPO trainer builds episodes (the chat template's turn-1
prompt, the completion, ``episodes.environment_turn`` for the user turn), so the warm start
and the policy's episodes agree token for token. The loss covers the policy's sketches and
end-of-turn tokens only. Large models train a LoRA that is merged before saving; the result
is an ordinary checkpoint folder for ``train --model``.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from agent.messages import first_turn_messages, revision_content, template_variables
from env.errors import UsageError
from multiturn_trainer.procedural import FLAWS, SUBJECTS, flawed_draft, generate_sketch, sft_examples, without_layer
from multiturn_trainer.episodes import EpisodeTokens, environment_turn, loss_image_inputs, reply_ids, turn_of_each_token
from multiturn_trainer.evaluation_stats import mean
from multiturn_trainer.families import FAMILIES, ModelFamily, family_of
from multiturn_trainer.tiny_model import build_tiny_model, load_pretrained

# Layers after the paper wash in a compact sketch. Measured with llvmpipe-sw2d (lighter than the
# default llvmpipe-f16, so a conservative count) on the 14
# subjects: 2 layers (~1.0k characters) pass the pigment gate 8/14 times, 3 layers (~1.4k)
# 14/14. The 0.5M-parameter tiny model learns sketches this size in a few hundred steps on
# 2 cores; the full compositions (3-8k characters) it does not learn at all in that time.
COMPACT_SECTIONS = 3
# Revisions go from 2 layers to 3: "add the missing layer" is a refinement the tiny model can
# learn, and the turn-1 painting it sees is often too faint to pass, as the feedback says.
REVISION_SECTIONS = (2, 3)
# With edits the layer added is the third of four, put back between its neighbours: the draft has
# a compact sketch's three layers (what the policy drafts), and the edit quotes the short line
# after the gap (the next layer's comment) rather than restating the last layer's coordinates,
# which a SmolLM2 policy did not copy exactly (docs/experiments/pretrained-policy.md).
EDIT_REVISION_SECTIONS = 4
TEMPLATE_KWARGS = {"enable_thinking": False}


@dataclass
class SftResult:
    out_dir: Path
    steps: int
    first_loss: float
    last_loss: float
    # Each example's longest reply, in the model's tokens: replies longer than a policy's
    # max_completion_length are sketches it was taught but cannot finish (cut mid-line: syntax_error).
    reply_tokens: list[int] = field(default_factory=list)


def load_examples(source: str, n: int, seed: int, subjects: list[str] | None = None,
                  revision_format: str = "full") -> list[dict[str, Any]]:
    """(subject, prompt messages, completion) rows from the procedural generator or a pool's sources.

    ``subjects`` narrows the procedural generator to some of its subjects; ``revision_format``
    is the one the system prompt announces (as in the episodes the model will be trained on).
    """
    if source in ("procedural", "compact"):
        return sft_examples(n, seed=seed, max_sections=COMPACT_SECTIONS if source == "compact" else None,
                            subjects=subjects, revision_format=revision_format)
    from rewards.pool import ReferencePool

    pool = ReferencePool.load(source)
    rows = []
    for entry in pool.entries():
        code = pool.source(entry)
        if code:
            subject = entry.subject or "a watercolour painting"
            rows.append({"subject": subject, "prompt_messages": first_turn_messages(subject, revision_format=revision_format),
                         "completion": f"```js\n{code}```"})
    if not rows:
        raise UsageError(f"the pool {source} has no sketch sources to learn from")
    rng = random.Random(seed)
    return [rows[rng.randrange(len(rows))] for _ in range(n)] if n > len(rows) else rows[:n]


def revision_examples(n: int, seed: int, evaluator, subjects: list[str] | None = None,
                      revision_format: str = "full") -> list[dict[str, Any]]:
    """Two-turn examples: a draft, its real painting and feedback, then the better sketch.

    Half of them add a layer (a 2-layer draft, then the same painting with its third layer);
    the other half repair a gate failure of the kind the tiny model makes (FLAWS: a hex
    colour one digit short, a sketch cut off, a forbidden call, shapes of one point) by
    sending the flawless sketch. Every draft is rendered by the real renderer, so the feedback
    is what GRPO's episodes will show; the repairs are what makes turn 2 worth having for a
    model this small (a demo warm-started on layer additions only gained nothing from turn 2).

    With ``revision_format`` "edit" the better sketch is sent as SEARCH/REPLACE blocks against
    the draft's sketch as the environment holds it (``edit_completion``), so the model starts
    able to edit; a fix that would change most of the sketch stays a full rewrite. The added layer
    is then a middle one (``EDIT_REVISION_SECTIONS``), so its edit quotes a short line.
    """
    from env.turn import turn_observation

    rng = random.Random(f"revisions\x00{seed}")
    plans = []
    for index in range(n):
        flaw = None if index % 2 == 0 else FLAWS[(index // 2) % len(FLAWS)]
        plans.append((rng.choice(list(subjects or SUBJECTS)), rng.randrange(2**31), flaw))
    first, second = REVISION_SECTIONS
    drafts, completions = [], []
    for subject, sketch_seed, flaw in plans:
        put_back = flaw is None and revision_format == "edit"
        sections = EDIT_REVISION_SECTIONS if put_back else second
        finished = generate_sketch(subject, sketch_seed, sections)
        if flaw is not None:
            draft = flawed_draft(finished, flaw, random.Random(f"{flaw}\x00{sketch_seed}"))
        elif put_back:
            draft = without_layer(finished, sections - 2)
        else:
            draft = generate_sketch(subject, sketch_seed, first)
        # A cut-off reply has no closing fence, as when generation hits the token limit.
        drafts.append(f"```js\n{draft}" + ("" if flaw == "cut_off" else "```"))
        completions.append(f"```js\n{finished}```")
    outcomes = evaluator.evaluate_many(drafts, [s for _, s, _ in plans])
    examples = []
    for (subject, _, _), draft, completion, outcome in zip(plans, drafts, completions, outcomes):
        # The draft is turn 1 of a 2-turn episode: what the environment says about it is what GRPO shows.
        seen = turn_observation(outcome, 1, 2, getattr(evaluator, "contract", None), revision_format)
        if seen.infrastructure_failed:
            continue
        if revision_format == "edit":
            completion = edit_completion(seen.code, completion)
        examples.append({
            "subject": subject,
            "prompt_messages": first_turn_messages(subject, revision_format=revision_format),
            "draft": draft,
            "environment": revision_content(seen.png, seen.feedback, 2, 2, revision_format),
            # What a text-only model's revision turn is built from instead (no image).
            "painting_png": seen.png, "feedback": seen.feedback, "revision_format": revision_format,
            "completion": completion,
            "draft_passed": seen.passed,
        })
    return examples


# An edit that would be longer than this share of the full sketch is taught as a full rewrite:
# quoting most of a sketch to change it costs more tokens than writing it again.
EDIT_SHARE_LIMIT = 0.6


def edit_completion(draft_code: str | None, completion: str) -> str:
    """The revision as SEARCH/REPLACE blocks turning ``draft_code`` into the completion's sketch,
    or the full completion when the draft left no sketch or the edit would not be much shorter."""
    # Imported here: env.edits reads replies with the gate's extractor (tree-sitter), which the
    # GPU image's rehearsal of the loss path (scripts/gpu_check.py) does not carry.
    from env.edits import edit_reply

    finished = completion.removeprefix("```js\n").removesuffix("```")
    if draft_code is None:
        return completion
    blocks = edit_reply(draft_code, finished)
    if not blocks or len(blocks) > EDIT_SHARE_LIMIT * len(finished):
        return completion
    return blocks


def tokenize_example(processor, example: dict[str, Any], family: ModelFamily = FAMILIES["qwen3_5"]) -> EpisodeTokens:
    """The example as the tokens of an episode: policy turns trained, environment turns not.
    ``family``: the model's (``multiturn_trainer.families``); a text-only one gets the revision
    turn without its image, as its episodes do."""
    variables = template_variables(processor, TEMPLATE_KWARGS)
    prompt = processor.apply_chat_template(
        family.chat_messages(example["prompt_messages"]), add_generation_prompt=True, tokenize=True,
        return_dict=True, **variables,
    )["input_ids"]
    # A processor answers a batch of one conversation, a tokenizer the conversation's ids.
    prompt = prompt[0] if prompt and not isinstance(prompt[0], int) else prompt
    episode = EpisodeTokens(list(prompt))
    if "draft" in example:
        environment = example["environment"]
        if not family.sees_images:
            environment = revision_content(example["painting_png"], example["feedback"], 2, 2,
                                           example.get("revision_format", "full"), example.get("code"), False)
        episode.add_policy(reply_ids(processor, example["draft"]))
        episode.add_environment(environment_turn(processor, environment, True, variables))
    episode.add_policy(reply_ids(processor, example["completion"]))
    return episode


def longest_reply(episode: EpisodeTokens) -> int:
    """The most policy tokens in one turn of the example."""
    return max(Counter(turn for turn in turn_of_each_token(episode.env_mask) if turn).values(), default=0)


def sft_labels(episode: EpisodeTokens) -> list[int]:
    """Labels for the loss: the policy's tokens; the prompt and environment tokens are -100."""
    completion = [t if trained else -100 for t, trained in zip(episode.completion_ids, episode.env_mask)]
    return [-100] * len(episode.prompt_ids) + completion


def sft_inputs(batch: list[EpisodeTokens], pad: int, image_pad: int | None) -> dict[str, Any]:
    """The model's keyword arguments for one SFT batch, right-padded.

    Logits are asked for only from the position before the batch's first trained token: the
    shared system prompt (~1.1k tokens) has no labels. The loss is the same mean over the same
    tokens as with all logits; the warm start's CPU steps took ~0.9x the time (32 steps on its own
    mix of first turns and revisions, both ways in one run).
    """
    ids = [e.context() for e in batch]
    width = max(len(i) for i in ids)
    input_ids = torch.tensor([i + [pad] * (width - len(i)) for i in ids])
    keep = width - min(len(e.prompt_ids) for e in batch) + 1
    labels = torch.tensor([sft_labels(e) + [-100] * (width - len(i)) for e, i in zip(batch, ids)])
    inputs: dict[str, Any] = {
        "input_ids": input_ids,
        "labels": labels[:, -keep:],
        "logits_to_keep": keep,
        "attention_mask": torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i in ids]),
    }
    # The same image inputs (and token/feature check) as the GRPO loss pass.
    images = loss_image_inputs(batch, input_ids, image_pad)
    images.pop("num_images", None)
    inputs.update(images)
    return inputs


def run_sft(model_path: str, out_dir: str | Path, examples: list[dict[str, Any]], *, epochs: float = 1.0,
            learning_rate: float = 2e-3, batch_size: int = 4, lora: bool = False, seed: int = 0,
            quiet: bool = False, freeze_vision: bool = False) -> SftResult:
    """Fine-tune ``model_path`` on ``examples``; ``freeze_vision``: the modules the family's LoRA leaves
    alone (its vision tower, for the llava family also the projector) keep their weights."""
    torch.manual_seed(seed)
    gpu = torch.cuda.is_available()
    model, processor = load_pretrained(model_path, dtype="bfloat16" if gpu else None, device="cuda" if gpu else None)
    family = family_of(model)
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear",
                                                 exclude_modules=family.lora_exclude, task_type="CAUSAL_LM"))
    if freeze_vision and family.lora_exclude:
        import re

        for name, parameter in model.named_parameters():
            if re.fullmatch(family.lora_exclude, name):
                parameter.requires_grad_(False)
    model.train()
    encoded = [tokenize_example(processor, e, family) for e in examples]
    steps = max(1, round(len(encoded) * epochs / batch_size))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=learning_rate,
                                  weight_decay=0.0)
    # Ten warm-up steps, then linear decay to a tenth.
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 10) * max(0.1, 1 - s / steps))
    rng = random.Random(seed)
    lengths = [len(e.context()) for e in encoded]
    batches: list[list[int]] = []
    tokenizer = getattr(processor, "tokenizer", processor)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    image_pad = family.image_pad_token_id(tokenizer)
    device = next(model.parameters()).device
    losses = []
    bar = tqdm(range(steps), desc="sft", disable=quiet)
    for _ in bar:
        if not batches:
            batches = length_grouped_batches(lengths, batch_size, rng)
        batch = [encoded[i] for i in batches.pop()]
        inputs = sft_inputs(batch, pad, image_pad)
        loss = model(**{k: v.to(device) if torch.is_tensor(v) else v for k, v in inputs.items()}).loss
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
    return SftResult(out_dir=out_dir, steps=steps, first_loss=losses[0], last_loss=mean(losses[-5:]),
                     reply_tokens=[longest_reply(e) for e in encoded])


def length_grouped_batches(lengths: list[int], batch_size: int, rng: random.Random,
                           pool_batches: int = 8) -> list[list[int]]:
    """One epoch of batches: shuffled, then sorted by length within pools of ``pool_batches``
    batches, so a batch pads to its own longest example rather than to a random neighbour's
    (the batches' order is shuffled again). The warm start mixes first turns with revision
    examples about twice as long (draft + painting + feedback + sketch), 64 in 180: drawn at
    random, 4 in 5 of its batches of 4 held a revision example and padded to its length."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    pool = batch_size * pool_batches
    batches = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start:start + pool], key=lambda i: lengths[i])
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches


def warm_start_examples(source: str, n_first: int, n_revisions: int, seed: int,
                        backend: str | None = None, subjects: list[str] | None = None,
                        revision_format: str = "full") -> list[dict[str, Any]]:
    """First-turn examples from ``source`` plus revision examples rendered by a real evaluator."""
    examples = load_examples(source, n_first, seed, subjects, revision_format)
    if n_revisions:
        from env.core import SketchEvaluator

        kwargs = {"backend": backend} if backend else {}
        with SketchEvaluator(deadline_s=90, **kwargs) as evaluator:
            examples += revision_examples(n_revisions, seed, evaluator, subjects, revision_format)
    return examples


def base_model(kind: str, folder: Path, seed: int = 0) -> Path:
    """The untrained base of ``kind``: a tiny random model built at ``folder``, or a pretrained
    kind's cached build (``pretrained.PRETRAINED_KINDS``; ``folder`` is then left alone)."""
    from multiturn_trainer.pretrained import PRETRAINED_KINDS, pretrained_base

    if kind in PRETRAINED_KINDS:
        return pretrained_base(kind, seed)
    return build_tiny_model(folder, kind=kind, seed=seed)


def warm_start_learning_rate(kind: str) -> float:
    """The warm start's learning rate for a base of ``kind``: a pretrained model is fine-tuned at
    its own rate, a tiny random one is taught from scratch."""
    from multiturn_trainer.pretrained import PRETRAINED_KINDS, PRETRAINED_WARM_START_LEARNING_RATE

    return PRETRAINED_WARM_START_LEARNING_RATE if kind in PRETRAINED_KINDS else 4e-3


def warm_start_tiny(out_dir: str | Path, kind: str, steps: int, seed: int = 0, learning_rate: float | None = None,
                    batch_size: int = 4, revisions: int = 64, backend: str | None = None,
                    subjects: list[str] | None = None, revision_format: str = "full") -> SftResult:
    """Build the offline base model of ``kind`` and fine-tune it on compact procedural sketches (+ revisions).

    ``kind``: a tiny random model (``build-tiny --kind``) or a pretrained one
    (``pretrained.PRETRAINED_KINDS``: SmolLM2, alone or inside the small VLM), fine-tuned at a
    pretrained model's learning rate with its vision side left as its own warm start made it.
    Written to a sibling folder first and renamed at the end, so an interrupted warm start
    never leaves a half-trained model where ``train`` would load it.
    """
    import shutil
    import tempfile

    from multiturn_trainer.pretrained import PRETRAINED_KINDS

    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    pretrained = kind in PRETRAINED_KINDS
    if learning_rate is None:
        learning_rate = warm_start_learning_rate(kind)
    with tempfile.TemporaryDirectory(dir=out_dir.parent, prefix=f".{out_dir.name}-") as scratch:
        base = base_model(kind, Path(scratch) / "base", seed)
        procedural = [s for s in subjects or SUBJECTS if s in SUBJECTS] or None
        examples = warm_start_examples("compact", max(64, steps * batch_size // 4 - revisions), revisions, seed,
                                       backend, procedural, revision_format)
        epochs = steps * batch_size / len(examples)
        result = run_sft(str(base), Path(scratch) / "tuned", examples, epochs=epochs, learning_rate=learning_rate,
                         batch_size=batch_size, seed=seed, freeze_vision=pretrained)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        (Path(scratch) / "tuned").rename(out_dir)
    result.out_dir = out_dir
    print(f"sft: warm start of the {'pretrained' if pretrained else 'tiny'} {kind} model: {result.steps} steps, "
          f"loss {result.first_loss:.2f} -> {result.last_loss:.2f}; saved {out_dir}")
    return result
