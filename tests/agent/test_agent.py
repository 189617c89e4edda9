"""The agent folder: prompts generated from the contract, multimodal chat turns, extraction, procedural sketches."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from env import prompts
from agent.messages import append_turn, first_turn_messages
from multiturn_trainer.procedural import SUBJECTS, generate_sketch, sft_examples
from env.prompts import revision_prompt, system_prompt, task_prompt
from env.contract import DEFAULT_BRUSH_METHODS, KNOWN_BRUSH_METHODS, SketchContract
from env.core import SketchEvaluator, SketchOutcome
from env.feedback import feedback_text
from env.gate import extract_sketch, static_gate

SUBJECT = "red poppies in a summer meadow"


def _allowed_section(prompt: str) -> list[str]:
    section = prompt.split("## Allowed brush methods", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("- ")]


def _forbidden_section(prompt: str) -> str:
    return prompt.split("## Forbidden", 1)[1].split("\n## ", 1)[0]


def _painting_png(size: int = 60) -> bytes:
    """A small RGBA painting with a transparent corner, as a renderer might return."""
    image = Image.new("RGBA", (size, size), (214, 54, 43, 255))
    for x in range(10):
        for y in range(10):
            image.putpixel((x, y), (0, 0, 0, 0))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def images_in(messages) -> list[Image.Image]:
    """Every image in the conversation, in the order a processor consumes them."""
    return [part["image"] for message in messages if not isinstance(message["content"], str)
            for part in message["content"] if part.get("type") == "image" and "image" in part]


def _outcome(png: bytes | None, passed: bool = True) -> SketchOutcome:
    return SketchOutcome(
        code="function setup() {}", passed=passed, violations=[] if passed else ["render_error"],
        errors=[] if passed else ["TypeError: x is undefined"], paint_fraction=0.3 if png else 0.0,
        render_ms=5, png=png, rendered=True,
    )


# --- prompts ------------------------------------------------------------------------


def test_system_prompt_lists_exactly_the_allowed_brush_methods_with_signatures():
    contract = SketchContract()
    lines = _allowed_section(system_prompt(contract))
    named = [re.match(r"- brush\.(\w+)", line).group(1) for line in lines]
    assert named == list(contract.brush_methods)
    for method, line in zip(contract.brush_methods, lines):
        assert line.startswith(f"- {prompts.brush_signature(method)}: ")
    text = "\n".join(lines)
    for signature in (
        "brush.scaleBrushes(scale)", "brush.noStroke()", "brush.fill(color, opacity)", "brush.noFill()",
        "brush.fillBleed(strength, direction?, angle?)",
        "brush.fillTexture(textureStrength, borderIntensity, scatter?)", "brush.beginShape(curvature)",
        "brush.vertex(x, y, pressure?)", "brush.endShape(close)", "brush.circle(x, y, radius, irregularity?)",
    ):
        assert signature in text


def test_every_known_brush_method_has_a_signature():
    assert set(prompts.BRUSH_SIGNATURES) == set(KNOWN_BRUSH_METHODS)


def test_system_prompt_follows_a_widened_allowlist():
    widened = SketchContract(brush_methods=DEFAULT_BRUSH_METHODS + ("rect", "hatch"))
    default_prompt, widened_prompt = system_prompt(SketchContract()), system_prompt(widened)
    assert widened_prompt != default_prompt
    lines = _allowed_section(widened_prompt)
    assert len(lines) == len(widened.brush_methods)
    assert any(line.startswith("- brush.rect(x, y, w, h, mode?): ") for line in lines)
    assert any(line.startswith("- brush.hatch(dist, angle, options?): ") for line in lines)
    # what is now allowed must not be named as forbidden any more
    assert "brush.rect" in _forbidden_section(default_prompt)
    assert "brush.rect" not in _forbidden_section(widened_prompt)
    assert "brush.hatch" not in _forbidden_section(widened_prompt)


def test_allowed_method_without_a_signature_is_listed_by_name(monkeypatch):
    monkeypatch.delitem(prompts.BRUSH_SIGNATURES, "rect")
    widened = SketchContract(brush_methods=DEFAULT_BRUSH_METHODS + ("rect",))
    lines = _allowed_section(system_prompt(widened))
    assert lines[-1].startswith("- brush.rect ")
    assert "(" not in lines[-1].split()[1]


def test_system_prompt_states_the_contract_and_the_reply_format():
    contract = SketchContract()
    prompt = system_prompt(contract)
    assert prompts.SKETCH_SKELETON in prompt
    for statement in ("createCanvas(600, 600, WEBGL);", "brush.scaleBrushes(3);", "angleMode(DEGREES);",
                      "noLoop();", "translate(-width / 2, -height / 2);", "background('#f8f1e4');"):
        assert statement in prompts.SKETCH_SKELETON
    assert ", ".join(contract.p5_names) in prompt
    for forbidden in ("ellipse", "eval", "document", "fetch", "setTimeout", "localStorage", "text"):
        assert forbidden in _forbidden_section(prompt)
    assert "10-30 brush.fill" in prompt and "600x600" in prompt
    assert "```js" in prompt.split("## Reply format", 1)[1]
    thinking = system_prompt(contract, enable_thinking=True)
    assert thinking != prompt and "thinking" in thinking.split("## Reply format", 1)[1]


def test_task_and_revision_prompts():
    assert SUBJECT in task_prompt(f"  {SUBJECT} ")
    with pytest.raises(ValueError):
        task_prompt("   ")
    text = revision_prompt("Turn 1 of 3: your sketch passed the gate.", 2, 3)
    assert "your sketch passed the gate" in text and "Turn 2 of 3" in text and "full revised sketch" in text
    assert "last turn" in revision_prompt("notes", 3, 3)
    for turn, turns in ((1, 3), (4, 3)):
        with pytest.raises(ValueError):
            revision_prompt("notes", turn, turns)


# --- messages -----------------------------------------------------------------------


def test_three_turn_conversation_carries_each_previous_painting():
    first = first_turn_messages(SUBJECT)
    assert [m["role"] for m in first] == ["system", "user"]
    assert images_in(first) == []
    png = _painting_png()
    turn1_feedback = feedback_text(_outcome(png), 1, 3)
    second = append_turn(first, "```js\n// turn 1\n```", png, turn1_feedback, 2, 3)
    third = append_turn(second, "```js\n// turn 2\n```", png, feedback_text(_outcome(png), 2, 3), 3, 3)

    assert len(first) == 2 and len(second) == 4  # earlier lists are never mutated
    assert [m["role"] for m in third] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert third[2]["content"] == [{"type": "text", "text": "```js\n// turn 1\n```"}]
    for index, previous_turn in ((3, 1), (5, 2)):
        parts = third[index]["content"]
        assert [part["type"] for part in parts] == ["text", "image", "text"]
        assert f"turn {previous_turn}" in parts[0]["text"]
        assert f"Turn {previous_turn + 1} of 3" in parts[2]["text"]
    assert turn1_feedback in third[3]["content"][2]["text"]

    images = images_in(third)
    assert len(images) == 2 and images[0] is third[3]["content"][1]["image"]
    assert all(image.mode == "RGB" and image.size == (60, 60) for image in images)
    assert images[0].getpixel((0, 0)) == (255, 255, 255)  # transparency flattened onto white
    assert images[0].getpixel((30, 30)) == (214, 54, 43)


def test_failed_render_gets_a_message_without_an_image():
    first = first_turn_messages(SUBJECT)
    failed = _outcome(None, passed=False)
    second = append_turn(first, "no code here", None, feedback_text(failed, 1, 3), 2, 3)
    parts = second[-1]["content"]
    assert [part["type"] for part in parts] == ["text"]
    assert "no painting" in parts[0]["text"] and "render_error" in parts[0]["text"]
    third = append_turn(second, "```js\n// fixed\n```", _painting_png(), "Turn 2 of 3: passed.", 3, 3)
    assert len(images_in(third)) == 1


# --- extraction ---------------------------------------------------------------------

SKETCH = generate_sketch(SUBJECT, 0)


@pytest.mark.parametrize("reply, expected", [
    (f"Here it is:\n```js\n{SKETCH}```\nEnjoy.", SKETCH.rstrip("\n")),
    (f"<think>maybe ```js\nfunction setup() {{}}\n``` first</think>\n```javascript\n{SKETCH}```", SKETCH.rstrip("\n")),
    (f"I planned it.</think>```js\n{SKETCH}```", SKETCH.rstrip("\n")),
    ("```js\nasync function setup() {\n  createCanvas(600, 600, WEBGL);", "async function setup() {\n  createCanvas(600, 600, WEBGL);"),
    ("<think>still thinking about ```js blocks", None),
    ("I cannot paint that.", None),
])
def test_extract_sketch_finds_the_code_in_a_reply(reply, expected):
    assert extract_sketch(reply).code == expected


# --- procedural sketches ------------------------------------------------------------


def test_procedural_subjects():
    assert len(SUBJECTS) >= 12 and len(set(SUBJECTS)) == len(SUBJECTS)
    for needle in ("poppies", "lemons", "harbour", "mountain lake", "tulips", "koi", "sunflowers", "pears",
                   "lighthouse", "autumn trees", "teapot", "moon"):
        assert any(needle in subject for subject in SUBJECTS), needle
    with pytest.raises(ValueError):
        generate_sketch("a portrait of a cat", 0)


def test_every_train_subject_has_a_composer_and_a_missing_one_fails_the_call_not_the_import(tmp_path):
    from agent.subjects import subjects as subject_split
    from multiturn_trainer.procedural import check_composers
    from multiturn_trainer.procedural.compositions import COMPOSERS

    assert set(subject_split("train")) <= set(COMPOSERS)
    check_composers()
    subjects = tmp_path / "subjects.yaml"
    subjects.write_text("train: [a harbour at dusk, a portrait of a cat]\neval: [a still life]\n")
    script = ("import multiturn_trainer.procedural as p\n"
              "assert len(p.generate_sketch('a harbour at dusk', 0)) > 0\n"
              "try:\n    p.sft_examples(2)\nexcept ValueError as error:\n    print(error)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2], env={**os.environ, "WATERCOLOUR_SUBJECTS": str(subjects)})
    assert done.returncode == 0, done.stderr
    assert "without a procedural composer: ['a portrait of a cat']" in done.stdout


def test_two_hundred_procedural_sketches_pass_the_static_gate():
    coordinate = re.compile(r"-?\d+(?:\.\d+)?")
    for index in range(200):
        subject = SUBJECTS[index % len(SUBJECTS)]
        code = generate_sketch(subject, index)
        verdict = static_gate(f"```js\n{code}```")
        assert verdict.passed, (subject, index, verdict.violations, verdict.details)
        # straight-line code: the static count of fills is the number of washes painted
        assert 10 <= verdict.stats["n_fill_calls"] <= 30, (subject, index)
        assert set(verdict.stats["brush_methods_used"]) <= set(DEFAULT_BRUSH_METHODS)
        assert code.split("brush.noStroke();", 1)[1].lstrip().startswith("// background wash")
        for call in re.findall(r"shape\(\[(.*?)\], [\d.]+\);", code, flags=re.DOTALL):
            assert all(0 <= float(value) <= 600 for value in coordinate.findall(call))


def test_procedural_sketches_are_deterministic_and_vary_with_the_seed():
    for subject in SUBJECTS:
        assert generate_sketch(subject, 7) == generate_sketch(subject, 7)
        assert len({generate_sketch(subject, seed) for seed in range(4)}) == 4


def test_sft_examples_pair_the_first_turn_prompt_with_a_fenced_sketch():
    examples = sft_examples(len(SUBJECTS) + 2, seed=3)
    assert examples == sft_examples(len(SUBJECTS) + 2, seed=3)
    assert {example["subject"] for example in examples} == set(SUBJECTS)
    for example in examples[:4]:
        assert example["prompt_messages"] == first_turn_messages(example["subject"])
        assert images_in(example["prompt_messages"]) == []
        assert example["completion"].startswith("```js\n") and example["completion"].endswith("```")
        assert static_gate(example["completion"]).passed
        json.dumps(example)


@pytest.mark.slow
def test_procedural_sketches_render_and_pass_the_gate():
    # The two cheapest compositions (about 9 s each on two shared cores).
    replies = [f"```js\n{generate_sketch(subject, 5)}```" for subject in ("tulips in a glass vase", "a teapot and a cup")]
    with SketchEvaluator(renderers=1, deadline_s=90) as evaluator:
        outcomes = evaluator.evaluate_many(replies, seeds=[0, 0])
    for outcome in outcomes:
        assert outcome.passed, (outcome.violations, outcome.errors, outcome.details)
        assert outcome.paint_fraction > 0.05
    messages = append_turn(first_turn_messages("tulips in a glass vase"), replies[0], outcomes[0].png,
                           feedback_text(outcomes[0], 1, 2), 2, 2)
    assert images_in(messages)[0].size == (600, 600)
