"""The warm start's revision examples: real drafts, real feedback, a sketch that fixes them."""

import random

import pytest

from agent.messages import first_turn_messages, revision_content
from env.gate import static_gate
from multiturn_trainer.procedural import FLAWS, flawed_draft, generate_sketch
from multiturn_trainer.sft import REVISION_SECTIONS, revision_examples, sft_labels, tokenize_example

# The failures each flaw must cause (what the tiny model's own failures look like).
EXPECTED_VIOLATIONS = {
    "short_colour": {"render_error"},
    "cut_off": {"syntax_error"},
    "forbidden_call": {"text_label", "brush_method_not_allowed", "external_access"},
    "one_point_shape": {"render_error"},
}


@pytest.mark.parametrize("flaw", FLAWS)
def test_each_flaw_breaks_a_valid_sketch_in_one_place(flaw):
    sketch = generate_sketch("red poppies in a summer meadow", 11, REVISION_SECTIONS[1])
    assert static_gate(f"```js\n{sketch}```").passed
    draft = flawed_draft(sketch, flaw, random.Random(0))
    assert draft != sketch
    assert draft == flawed_draft(sketch, flaw, random.Random(0))  # seeded, so the warm start is reproducible
    if flaw == "short_colour":
        assert len(draft) == len(sketch) - 1
    if flaw == "cut_off":
        assert sketch.startswith(draft)
    if flaw == "forbidden_call":
        assert len(draft.splitlines()) == len(sketch.splitlines()) + 1


def test_unknown_flaw_is_refused():
    with pytest.raises(ValueError, match="unknown flaw"):
        flawed_draft(generate_sketch("tulips in a glass vase", 1, 3), "typo", random.Random(0))


@pytest.mark.slow  # 10 s (8 renders)
def test_revision_examples_show_real_failures_and_their_repair(evaluator):
    examples = revision_examples(2 * len(FLAWS), seed=5, evaluator=evaluator, subjects=["tulips in a glass vase"])
    assert len(examples) == 2 * len(FLAWS)
    repairs = examples[1::2]
    for example, flaw in zip(repairs, FLAWS):
        feedback = " ".join(part["text"] for part in example["environment"] if part.get("type") == "text")
        assert not example["draft_passed"], flaw
        # The feedback is the renderer's verdict on this draft, naming what went wrong.
        assert "did not pass the gate" in feedback
        assert EXPECTED_VIOLATIONS[flaw] & set(part for part in feedback.replace(":", " ").split()), (flaw, feedback)
        if flaw == "short_colour":
            assert "Invalid color string" in feedback
        assert static_gate(example["completion"]).passed
    for example in examples[0::2]:  # the other half add a layer to a 2-layer draft
        assert example["completion"].startswith(example["draft"][:-3].rstrip("}\n"))


@pytest.mark.slow  # 10 s (8 renders)
def test_edit_revision_examples_send_edits_that_repair_the_draft_the_environment_holds(evaluator):
    from env.core import gate_turn

    examples = revision_examples(2 * len(FLAWS), seed=5, evaluator=evaluator, subjects=["tulips in a glass vase"],
                                 revision_format="edit")
    edits = 0
    for example in examples:
        draft = static_gate(example["draft"]).code
        # The environment holds the draft's sketch; the completion applied to it passes the gate.
        verdict = gate_turn(example["completion"], draft, evaluator.contract)
        assert verdict.passed, (example["completion"][:200], verdict.violations)
        edits += example["completion"].startswith("<<<<<<< SEARCH")
        text = " ".join(part["text"] for part in example["environment"] if part.get("type") == "text")
        assert "SEARCH/REPLACE" in text
        system = example["prompt_messages"][0]["content"][0]["text"]
        assert "<<<<<<< SEARCH" in system and "never a fragment or a diff" not in system
    assert edits >= len(examples) // 2  # most revisions are edits; a fix that changes most of it is a rewrite
    for example in examples[0::2]:  # a layer put back between two: the edit quotes no coordinates
        search = example["completion"].split("\n=======\n")[0]
        assert search.startswith("<<<<<<< SEARCH") and "[[" not in search, search
        assert example["draft"].count("\n  // ") == 3  # a compact sketch's layers, as the policy drafts


@pytest.mark.slow  # warm-started tiny policy
def test_a_revision_example_trains_on_both_sketches_and_not_on_the_environment(dense_policy):
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(dense_policy)
    sketch = generate_sketch("tulips in a glass vase", 2, REVISION_SECTIONS[1])
    example = {
        "prompt_messages": first_turn_messages("tulips in a glass vase"),
        "draft": f"```js\n{flawed_draft(sketch, 'short_colour', random.Random(1))}```",
        "environment": revision_content(None, "Turn 1 of 2: your sketch did not pass the gate.", turn=2, turns=2),
        "completion": f"```js\n{sketch}```",
    }
    episode = tokenize_example(processor, example)
    labels = sft_labels(episode)
    assert sum(1 for label in labels if label != -100) == sum(episode.env_mask)
    assert 0 < sum(episode.env_mask) < len(episode.completion_ids)


def test_length_grouped_batches_cover_each_example_once_and_pad_less():
    import random

    from multiturn_trainer.sft import length_grouped_batches

    rng = random.Random(0)
    lengths = [rng.choice([700, 1600]) + rng.randrange(100) for _ in range(180)]
    batches = length_grouped_batches(lengths, 4, random.Random(1))
    assert sorted(i for batch in batches for i in batch) == list(range(180))
    assert all(1 <= len(batch) <= 4 for batch in batches)

    def padded(batches):
        return sum(max(lengths[i] for i in batch) * len(batch) for batch in batches)

    order = list(range(180))
    random.Random(1).shuffle(order)
    drawn_at_random = [order[i:i + 4] for i in range(0, 180, 4)]
    assert padded(batches) < 0.85 * padded(drawn_at_random)
    # Not sorted globally: long and short batches alternate through the epoch.
    widths = [max(lengths[i] for i in batch) for batch in batches]
    assert widths != sorted(widths) and widths != sorted(widths, reverse=True)


def test_sft_batches_ask_only_for_the_logits_the_loss_uses(tmp_path):
    """Trimming the prompt's logits is a speed-up, not a different loss: a batch of a first turn
    and a revision (draft, painting, feedback, sketch) gives the loss and gradients of the full
    forward pass."""
    import io

    import torch
    from PIL import Image

    from multiturn_trainer.sft import sft_inputs
    from multiturn_trainer.tiny_model import build_tiny_model, load_pretrained

    model, processor = load_pretrained(build_tiny_model(tmp_path / "tiny", kind="dense", seed=0))
    painting = io.BytesIO()
    Image.new("RGB", (600, 600), (180, 120, 60)).save(painting, format="PNG")
    sketch = generate_sketch("tulips in a glass vase", 3, REVISION_SECTIONS[1])
    first = {"prompt_messages": first_turn_messages("tulips in a glass vase"), "completion": f"```js\n{sketch}```"}
    revision = dict(first, prompt_messages=first_turn_messages("red poppies in a summer meadow"),
                    draft=f"```js\n{generate_sketch('red poppies in a summer meadow', 4, 2)}```",
                    environment=revision_content(painting.getvalue(), "Your sketch passed the gate.", turn=2, turns=2))
    batch = [tokenize_example(processor, first), tokenize_example(processor, revision)]
    pad = processor.tokenizer.pad_token_id
    image_pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    inputs = sft_inputs(batch, pad, image_pad)
    width = inputs["input_ids"].shape[1]
    assert "pixel_values" in inputs
    assert inputs["logits_to_keep"] < width - 1000  # the system prompt's logits are not computed
    full = dict(inputs, logits_to_keep=0, labels=torch.tensor(
        [sft_labels(e) + [-100] * (width - len(e.context())) for e in batch]))

    def loss_and_grads(kwargs):
        model.zero_grad()
        loss = model(**kwargs).loss
        loss.backward()
        return loss.item(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    trimmed_loss, trimmed_grads = loss_and_grads(inputs)
    full_loss, full_grads = loss_and_grads(full)
    assert trimmed_loss == pytest.approx(full_loss, rel=1e-5)
    assert len(trimmed_grads) == len(full_grads)
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in zip(trimmed_grads, full_grads))
