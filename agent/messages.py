"""Chat messages for painting episodes, in the transformers multimodal chat format.

A message is ``{"role": "system" | "user" | "assistant", "content": [part, ...]}`` where a part
is ``{"type": "text", "text": str}`` or ``{"type": "image", "image": PIL.Image.Image}``: the
format processors' ``apply_chat_template`` and TRL's vision-language paths accept.

Functions here never mutate the list they are given: episodes of one GRPO group start from
the same first-turn messages, and an in-place append would leak one episode's painting into
its siblings.
"""

from __future__ import annotations

import io
from typing import Any

from PIL import Image

from env.prompts import first_turn_prompt, revision_prompt
from env.contract import SketchContract
from env.pigment import load_rgb

Message = dict[str, Any]


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def image_part(image: Image.Image) -> dict[str, Any]:
    return {"type": "image", "image": image}


def first_turn_messages(
    subject: str,
    contract: SketchContract | None = None,
    enable_thinking: bool = False,
    revision_format: str = "full",
) -> list[Message]:
    """System prompt (the contract) and the task: everything the policy sees on turn 1."""
    system, task = first_turn_prompt(subject, contract, enable_thinking, revision_format)
    return [
        {"role": "system", "content": [text_part(system)]},
        {"role": "user", "content": [text_part(task)]},
    ]


def painting_image(png: bytes) -> Image.Image:
    """The rendered PNG as an RGB image, transparency flattened onto white.

    Reuses the pigment loader so the model sees exactly the pixels the gate measured.
    """
    return Image.fromarray(load_rgb(png))


def append_turn(
    messages: list[Message],
    assistant_reply: str,
    painting_png: bytes | None,
    feedback: str,
    turn: int,
    turns: int,
    revision_format: str = "full",
    code: str | None = None,
    sees_images: bool = True,
) -> list[Message]:
    """A new list: ``messages`` plus the assistant's reply and the user message opening ``turn``."""
    return [
        *messages,
        {"role": "assistant", "content": [text_part(assistant_reply)]},
        {"role": "user", "content": revision_content(painting_png, feedback, turn, turns, revision_format, code,
                                                          sees_images)},
    ]


def revision_content(painting_png: bytes | None, feedback: str, turn: int, turns: int,
                     revision_format: str = "full", code: str | None = None,
                     sees_images: bool = True) -> list[dict[str, Any]]:
    """The content of the user message opening ``turn``: the previous painting and the feedback.

    ``turn`` is the turn being opened (2..turns), as in ``revision_prompt``. The message
    shows the painting of turn ``turn - 1`` when the render produced one; otherwise it says
    there is none, so the model never mistakes a missing image for a blank painting.
    ``code``: the current sketch when the environment says to show it (``show_code``).
    ``sees_images`` False (a text-only policy, or the blind ablation's ``show_painting: false``): no
    image is sent and the message says so, so the model reads the feedback as all there is rather
    than as a caption of a missing picture. Both get the same words: a blind VLM reads exactly
    what a text-only model reads.
    """
    previous = turn - 1
    prompt = revision_prompt(feedback, turn, turns, revision_format, code)
    if painting_png is not None and not sees_images:
        return [text_part(f"Your sketch from turn {previous} was rendered, but this conversation is text only: "
                          "there is no image of the painting, only the feedback below.\n\n" + prompt)]
    if painting_png is not None:
        return [
            text_part(f"Your painting from turn {previous}:"),
            image_part(painting_image(painting_png)),
            text_part(prompt),
        ]
    return [
        text_part(
            f"Your sketch from turn {previous} produced no painting, so there is no image to show.\n\n" + prompt
        )
    ]


def observation_content(observation, turn: int, turns: int, revision_format: str = "full",
                        sees_images: bool = True) -> list[dict[str, Any]]:
    """``revision_content`` for an environment's turn record (``env.turn.TurnObservation``): its
    painting, its feedback and, when the environment says so, the current sketch."""
    code = observation.code if observation.show_code else None
    return revision_content(observation.png, observation.feedback, turn, turns, revision_format, code, sees_images)


def text_only_messages(messages: list[Message]) -> list[Message]:
    """``messages`` with each content a plain string (its text parts joined), for a text-only
    model's chat template. An image part is an error: a text-only policy must never be handed a
    painting it would silently not see (its revision turns say there is none instead)."""
    flat = []
    for message in messages:
        content = message["content"]
        if not isinstance(content, str):
            if any(part.get("type") != "text" for part in content):
                raise ValueError("a text-only model was handed an image part")
            content = "".join(part["text"] for part in content)
        flat.append({**message, "content": content})
    return flat


def template_variables(processor, values: dict[str, Any]) -> dict[str, Any]:
    """Of ``values`` (e.g. ``enable_thinking``), the ones the processor's chat template reads.

    A processor whose template does not read one (SmolLM2's) warns about it on every call, once
    per prompt and example: thousands of lines in a warm start. A template that does (Qwen3.5's)
    gets them all."""
    template = getattr(processor, "chat_template", None) or getattr(getattr(processor, "tokenizer", None),
                                                                     "chat_template", None)
    if not isinstance(template, str):
        return dict(values)
    return {name: value for name, value in values.items() if name in template}


def png_bytes(image: Image.Image) -> bytes:
    """PNG encoding of an image."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()
