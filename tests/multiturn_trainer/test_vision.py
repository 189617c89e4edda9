"""The vision warm start of a VLM assembled around a causal LM (multiturn_trainer/vision.py): what a
painting shows, read from its pixels; the description the vision side is trained to make the
language model say; and the probe that scores it against what a model that does not look could do."""

from __future__ import annotations

import json

import pytest
from PIL import Image, ImageDraw

from agent.messages import png_bytes
from multiturn_trainer.vision import COLOURS, PLACES, QUESTION, PaintingFacts, painting_facts, read_caption

PAPER = (247, 241, 230)


def painting(box: tuple[int, int, int, int] | None, colour: tuple[int, int, int]) -> bytes:
    image = Image.new("RGB", (200, 200), PAPER)
    if box is not None:
        ImageDraw.Draw(image).rectangle(box, fill=colour)
    return png_bytes(image)


def test_painting_facts_read_coverage_pigment_and_place_from_the_pixels():
    blank = painting_facts(painting(None, PAPER))
    assert blank.coverage == 0.0
    # A pale blue wash over the lower left quarter: a wash differs from the paper by ~20 levels.
    wash = painting_facts(painting((0, 100, 99, 199), (222, 232, 242)))
    assert wash.coverage == pytest.approx(0.25, abs=0.03) and wash.colour == "blue" and wash.where == "lower left"
    band = painting_facts(painting((0, 0, 199, 59), (200, 90, 70)))
    assert band.colour == "red" and band.where == "upper" and band.coverage == pytest.approx(0.3, abs=0.03)
    assert painting_facts(painting((50, 50, 149, 149), (40, 40, 40))).colour == "dark"


def test_a_caption_names_its_words_and_reads_back():
    facts = PaintingFacts(0.34, "teal", "lower right")
    assert read_caption(f"Sure. {facts.caption()}") == PaintingFacts(0.34, "teal", "lower right")
    assert read_caption("A lovely painting of the sea.") is None
    assert len(COLOURS) == 10 and len(PLACES) == 9 and QUESTION.startswith("Describe the painting")


@pytest.mark.slow  # renders 10 paintings, two vision steps, a probe of 3 (about 40 s)
def test_the_vision_warm_start_trains_the_vision_side_and_the_lm_reading_it_and_writes_its_probe(tmp_path):
    import torch

    from multiturn_trainer.families import FAMILIES
    from multiturn_trainer.pretrained import VisionSizes, assemble_vlm
    from multiturn_trainer.tiny_model import build_tiny_model
    from multiturn_trainer.vision import warm_start_vision

    text = build_tiny_model(tmp_path / "text", kind="text", seed=0)
    folder = assemble_vlm(text, tmp_path / "vlm", VisionSizes(image_size=56, patch_size=14, hidden_size=32,
                                                              layers=1, heads=2, intermediate_size=64))
    before, _ = FAMILIES["llava"].load(folder, dtype="float32")
    result = warm_start_vision(folder, steps=2, paintings=7, held_out=3, quiet=True)
    after, _ = FAMILIES["llava"].load(folder, dtype="float32")
    changed = {name for (name, a), (_, b) in zip(before.named_parameters(), after.named_parameters())
               if not torch.equal(a, b)}
    # The vision side learns; of the language model only the attention queries and values (the
    # merged LoRA that learns to read the image tokens); embeddings, MLPs and the head stay.
    vision = {n for n in changed if "vision_tower" in n or "multi_modal_projector" in n}
    assert vision and changed - vision and all(
        "language_model" in n and (".q_proj." in n or ".v_proj." in n) for n in changed - vision)
    report = json.loads((folder / "vision.json").read_text())
    assert report["steps"] == 2 and report["probe"]["paintings"] == result.held_out == 3
    for key in ("coverage_error_points", "colour_right", "where_right"):
        assert key in report["probe"] and f"{key}_without_looking" in report["probe"]
    assert Image.open(folder / "vision-probe.png").size[0] > 0
