"""The vision warm start of a VLM assembled around a pretrained language model, and its probe.

``build-pretrained --vlm`` gives SmolLM2 a new, random SigLIP vision tower and projector
(``pretrained.assemble_vlm``). Random image features are noise to the language model, so before
the policy can *see* its painting the vision side is trained, the language model frozen, on
paintings the real renderer made from procedural sketches: each painting is shown with "Describe
the painting ..." and the target is a one-line description computed from its pixels
(``painting_facts``): how much of the canvas holds paint, its main colour, and where the paint
sits. Only the vision tower and projector learn; what they learn is what the language model
can then read off the image tokens.

The probe asks the trained VLM to describe held-out paintings (other sketch seeds) and scores its
words against the pixels: coverage error in percentage points, main colour and position right or
wrong. Each figure is set beside what a model that does not look could do at best (the training
set's mean coverage, its most common colour and position), so "it sees" means "beats that".
"""

from __future__ import annotations

import colorsys
import io
import json
import random
import re
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from PIL import Image
from tqdm.auto import tqdm

from multiturn_trainer.evaluation_stats import mean

COLOURS = ("red", "orange", "yellow", "green", "teal", "blue", "purple", "pink", "grey", "dark")
PLACES = ("upper left", "upper", "upper right", "left", "centre", "right", "lower left", "lower", "lower right")
# Short: every token of it is paid for in each warm-start step. The answer's form is learnt (the
# LoRA on the language model), not asked for; a question that spelt out the form and its words
# (~90 tokens) made a frozen language model write the form at once but cost a third of each step.
QUESTION = "Describe the painting: how much paint, its main colour, where it is."
# Hue bucket upper bounds in degrees (the last bucket wraps back to red).
_HUES = ((15, "red"), (45, "orange"), (70, "yellow"), (160, "green"), (200, "teal"), (255, "blue"),
         (290, "purple"), (340, "pink"), (360, "red"))
# A pixel holds paint when a channel differs from the paper by more than this (0-255): washes
# are pale, a blue sky differs from the paper by ~20.
PAINT_THRESHOLD = 16


@dataclass(frozen=True)
class PaintingFacts:
    coverage: float  # share of the canvas that holds paint, 0..1
    colour: str  # the most common colour name among painted pixels (COLOURS)
    where: str  # where the paint's centre of mass is: "upper left" ... "centre" ... "lower right"

    def caption(self) -> str:
        return f"Paint covers {round(self.coverage * 100)}% of the canvas, mostly {self.colour}, centred {self.where}."

    def brief(self) -> str:
        return f"{round(self.coverage * 100)}% {self.colour}, {self.where}"


def _colour_name(pixel: tuple[int, ...], paper: tuple[int, ...]) -> str:
    """The colour a pixel's pigment adds to the paper: the hue of its difference from the paper
    (on mid grey), so a pale wash names its pigment rather than the paper's warm white."""
    r, g, b = (min(255, max(0, 128 + c - q)) for c, q in zip(pixel, paper))
    h, s, v = colorsys.rgb_to_hsv(r / 255, g / 255, b / 255)
    if max(pixel) < 70:
        return "dark"
    if s < 0.12:
        return "grey"
    degrees = h * 360
    return next(name for bound, name in _HUES if degrees < bound)


def painting_facts(png: bytes, size: int = 96) -> PaintingFacts:
    """What a painting shows, from its pixels: the paper is its most common colour."""
    image = Image.open(io.BytesIO(png)).convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
    data = image.tobytes()
    pixels = [tuple(data[i:i + 3]) for i in range(0, len(data), 3)]
    paper = Counter((r // 16, g // 16, b // 16) for r, g, b in pixels).most_common(1)[0][0]
    paper = tuple(c * 16 + 8 for c in paper)
    painted = [(i, p) for i, p in enumerate(pixels) if max(abs(c - q) for c, q in zip(p, paper)) > PAINT_THRESHOLD]
    coverage = len(painted) / len(pixels)
    if not painted:
        return PaintingFacts(0.0, "grey", "centre")
    colour = Counter(_colour_name(p, paper) for _, p in painted).most_common(1)[0][0]
    x = mean([i % size for i, _ in painted]) / size
    y = mean([i // size for i, _ in painted]) / size
    row = "upper" if y < 0.42 else "lower" if y > 0.58 else ""
    column = "left" if x < 0.42 else "right" if x > 0.58 else ""
    where = f"{row} {column}".strip() or "centre"
    return PaintingFacts(coverage, colour, where)


_CAPTION = re.compile(r"covers (\d{1,3})% of the canvas, mostly (\w+), centred ([a-z ]+)\.")


def read_caption(text: str) -> PaintingFacts | None:
    match = _CAPTION.search(text)
    if match is None:
        return None
    return PaintingFacts(int(match.group(1)) / 100, match.group(2), match.group(3).strip())


def render_paintings(n: int, seed: int, backend: str | None = None, quiet: bool = False) -> list[bytes]:
    """``n`` paintings by the real renderer: procedural sketches of every subject, 1 to 3
    layers after the paper wash, so coverage ranges from faint to full."""
    from env.core import SketchEvaluator
    from multiturn_trainer.procedural import SUBJECTS, generate_sketch

    rng = random.Random(f"paintings\x00{seed}")
    plans = [(rng.choice(SUBJECTS), rng.randrange(2**31), rng.choice((1, 2, 3, None))) for _ in range(n)]
    replies = [f"```js\n{generate_sketch(subject, s, sections)}```" for subject, s, sections in plans]
    kwargs = {"backend": backend} if backend else {}
    paintings = []
    with SketchEvaluator(deadline_s=90, **kwargs) as evaluator, \
            tqdm(total=n, desc="rendering paintings", unit="painting", disable=quiet) as bar:
        for start in range(0, n, 16):  # in chunks, so the bar moves
            chunk = slice(start, start + 16)
            outcomes = evaluator.evaluate_many(replies[chunk], [s for _, s, _ in plans[chunk]])
            paintings += [o.png for o in outcomes if o.png]
            bar.update(len(outcomes))
    return paintings


def question_inputs(processor, png: bytes):
    """The processor's inputs for one painting shown with the question (a description turn's prompt)."""
    from agent.messages import painting_image

    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": QUESTION}]}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return processor(text=[prompt], images=[painting_image(png)], return_tensors="pt")


def _batch(processor, items: list[tuple[bytes, str]]):
    """Right-padded inputs for described paintings; labels on the answers and their end-of-turn only."""
    import torch

    tokenizer = processor.tokenizer
    encoded = [(question_inputs(processor, png),
                tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id])
               for png, answer in items]
    width = max(e["input_ids"].size(1) + len(t) for e, t in encoded)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    ids, labels, mask = [], [], []
    for e, target in encoded:
        prompt = e["input_ids"][0].tolist()
        row = prompt + target
        ids.append(row + [pad] * (width - len(row)))
        labels.append([-100] * len(prompt) + target + [-100] * (width - len(row)))
        mask.append([1] * len(row) + [0] * (width - len(row)))
    return {"input_ids": torch.tensor(ids), "labels": torch.tensor(labels), "attention_mask": torch.tensor(mask),
            "pixel_values": torch.cat([e["pixel_values"] for e, _ in encoded])}


def vision_parameters(model) -> list:
    """The parameters the vision warm start trains: the vision tower and the projector."""
    inner = model.model
    return list(inner.vision_tower.parameters()) + list(inner.multi_modal_projector.parameters())


def train_vision(model, processor, items: list[tuple[bytes, PaintingFacts]], steps: int, batch_size: int = 8,
                 learning_rate: float = 1e-3, seed: int = 0, quiet: bool = False, lm_rank: int = 8,
                 lm_learning_rate: float = 3e-4, readout_weight: float = 1.0):
    """Fit the vision tower and projector so the language model describes each painting (``items``:
    the paintings with their facts); returns (the model, the losses).

    Two things keep the vision side from settling on the answer that is right on average (it did:
    with the language model frozen and the caption loss alone, 120 steps ended saying "20%, blue,
    lower" of every painting, no better than not looking): a linear readout of the mean image
    token trained on the same facts (``readout_weight``; dropped after training), so the image
    tokens carry them, and a rank-``lm_rank`` LoRA on the language model's attention queries and
    values, merged afterwards, so the language model learns to read them (0 keeps it frozen).
    """
    import torch

    torch.manual_seed(seed)
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    vision = vision_parameters(model)
    for parameter in vision:
        parameter.requires_grad_(True)
    projector = model.model.multi_modal_projector
    readout = torch.nn.Linear(model.config.text_config.hidden_size, 1 + len(COLOURS) + len(PLACES))
    groups = [{"params": vision + list(readout.parameters()), "lr": learning_rate}]
    if lm_rank:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=lm_rank, lora_alpha=2 * lm_rank, lora_dropout=0.0,
                                                 target_modules=r".*language_model.*\.(q_proj|v_proj)"))
        for parameter in vision:  # PEFT froze everything but its adapters
            parameter.requires_grad_(True)
        groups.append({"params": [p for n, p in model.named_parameters() if "lora_" in n], "lr": lm_learning_rate})
    image_tokens = []
    hook = projector.register_forward_hook(lambda module, inputs, output: image_tokens.append(output))
    optimizer = torch.optim.AdamW(groups, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 10) * max(0.05, 1 - s / steps))
    rng = random.Random(seed)
    model.train()
    losses = []
    bar = tqdm(range(steps), desc="vision warm start", disable=quiet)
    trained = [p for group in groups for p in group["params"]]
    for _ in bar:
        chosen = rng.sample(items, min(batch_size, len(items)))
        image_tokens.clear()
        loss = model(**_batch(processor, [(png, f.caption()) for png, f in chosen])).loss
        pooled = readout(image_tokens[-1].float().mean(dim=1))
        coverage = torch.tensor([f.coverage for _, f in chosen])
        colour = torch.tensor([COLOURS.index(f.colour) for _, f in chosen])
        place = torch.tensor([PLACES.index(f.where) for _, f in chosen])
        facts_loss = (10 * ((pooled[:, 0] - coverage) ** 2).mean()
                      + torch.nn.functional.cross_entropy(pooled[:, 1:1 + len(COLOURS)], colour)
                      + torch.nn.functional.cross_entropy(pooled[:, 1 + len(COLOURS):], place))
        (loss + readout_weight * facts_loss).backward()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        bar.set_postfix(loss=f"{loss.item():.3f}", facts=f"{facts_loss.item():.3f}")
    hook.remove()
    if lm_rank:
        model = model.merge_and_unload()
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(True)
    return model, losses


def probe(model, processor, held_out: list[tuple[bytes, PaintingFacts]], train_facts: list[PaintingFacts]) -> dict[str, Any]:
    """Describe held-out paintings greedily; score the words against the pixels' facts, beside the
    best a model that does not look could do (the training set's mean coverage, commonest answers)."""
    import torch

    truths = [facts for _, facts in held_out]
    answers = []
    with torch.no_grad():
        for png, _ in held_out:
            encoded = question_inputs(processor, png)
            out = model.generate(**encoded, max_new_tokens=40, do_sample=False)
            answers.append(processor.tokenizer.decode(out[0, encoded["input_ids"].size(1):], skip_special_tokens=True))
    read = [read_caption(a) for a in answers]
    mean_coverage = mean([f.coverage for f in train_facts])
    common_colour = Counter(f.colour for f in train_facts).most_common(1)[0][0]
    common_where = Counter(f.where for f in train_facts).most_common(1)[0][0]
    n = len(held_out)

    def share(hits) -> float:
        return sum(hits) / n

    return {
        "paintings": n,
        "readable": share(r is not None for r in read),
        "coverage_error_points": sum(abs((r.coverage if r else mean_coverage) - t.coverage) for r, t in zip(read, truths)) * 100 / n,
        "coverage_error_points_without_looking": sum(abs(mean_coverage - t.coverage) for t in truths) * 100 / n,
        "colour_right": share(r is not None and r.colour == t.colour for r, t in zip(read, truths)),
        "colour_right_without_looking": share(t.colour == common_colour for t in truths),
        "where_right": share(r is not None and r.where == t.where for r, t in zip(read, truths)),
        "where_right_without_looking": share(t.where == common_where for t in truths),
        "examples": [{"said": a, "truth": t.caption()} for a, t in zip(answers, truths)],
    }


def probe_sheet(held_out: list[tuple[bytes, PaintingFacts]], report: dict[str, Any]) -> bytes:
    """A contact sheet: each held-out painting with what the VLM said and what its pixels say."""
    from env.contact_sheet import SheetItem, contact_sheet

    def said(text: str) -> str:
        facts = read_caption(text)
        return text[:40] if facts is None else facts.brief()

    items = [SheetItem(caption="said: " + said(example["said"]), png=png, subcaption="pixels: " + facts.brief())
             for (png, facts), example in zip(held_out, report["examples"])]
    return contact_sheet(items, title="vision probe: what the VLM said, what the pixels say")


@dataclass
class VisionWarmStart:
    steps: int
    lm_rank: int
    paintings: int
    held_out: int
    first_loss: float
    last_loss: float
    probe: dict[str, Any]


def warm_start_vision(folder: str | Path, steps: int, paintings: int, held_out: int, seed: int = 0,
                      backend: str | None = None, quiet: bool = False, lm_rank: int = 8) -> VisionWarmStart:
    """Train the vision side of the VLM in ``folder`` in place, probe it, write ``vision.json``
    and ``vision-probe.png`` beside the weights."""
    import torch

    from multiturn_trainer.families import family_at

    folder = Path(folder)
    model, processor = family_at(folder).load(folder, dtype=torch.float32)
    # Each painting's facts read from its pixels once: the training targets, the probe's truths.
    rendered = [(png, painting_facts(png)) for png in render_paintings(paintings + held_out, seed, backend, quiet)]
    split = max(0, len(rendered) - held_out)
    train_set, test_set = rendered[:split], rendered[split:]
    if not train_set:
        raise RuntimeError("the renderer returned no paintings to train the vision side on")
    model, losses = train_vision(model, processor, train_set, steps, seed=seed, quiet=quiet, lm_rank=lm_rank)
    report = probe(model, processor, test_set, [facts for _, facts in train_set]) if test_set else {}
    model.to(torch.bfloat16).save_pretrained(folder)
    result = VisionWarmStart(steps, lm_rank, len(train_set), len(test_set), losses[0], mean(losses[-5:]), report)
    (folder / "vision.json").write_text(json.dumps(asdict(result), indent=2) + "\n", encoding="utf-8")
    if test_set:
        (folder / "vision-probe.png").write_bytes(probe_sheet(test_set, report))
    return result
