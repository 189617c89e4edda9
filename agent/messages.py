"""Chat messages for painting episodes, in the transformers multimodal chat format.

A message is ``{"role": "system" | "user" | "assistant", "content": [part, ...]}`` where a part
is ``{"type": "text", "text": str}`` or ``{"type": "image", "image": PIL.Image.Image}``: the
format processors' ``apply_chat_template`` and TRL's vision-language paths accept. Apart from
the PIL images everything is plain JSON data, so ``to_record`` only has to swap images for
file references to log an episode, and ``from_record`` swaps them back for replay.

Functions here never mutate the list they are given: episodes of one GRPO group start from
the same first-turn messages, and an in-place append would leak one episode's painting into
its siblings.
"""

from __future__ import annotations

import copy
import io
from typing import Any, Callable

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
) -> list[Message]:
    """System prompt (the contract) and the task: everything the policy sees on turn 1."""
    system, task = first_turn_prompt(subject, contract, enable_thinking)
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
) -> list[Message]:
    """A new list: ``messages`` plus the assistant's reply and the user message opening ``turn``."""
    return [
        *messages,
        {"role": "assistant", "content": [text_part(assistant_reply)]},
        {"role": "user", "content": revision_content(painting_png, feedback, turn, turns)},
    ]


def revision_content(painting_png: bytes | None, feedback: str, turn: int, turns: int) -> list[dict[str, Any]]:
    """The content of the user message opening ``turn``: the previous painting and the feedback.

    ``turn`` is the turn being opened (2..turns), as in ``revision_prompt``. The message
    shows the painting of turn ``turn - 1`` when the render produced one; otherwise it says
    there is none, so the model never mistakes a missing image for a blank painting.
    """
    previous = turn - 1
    if painting_png is not None:
        return [
            text_part(f"Your painting from turn {previous}:"),
            image_part(painting_image(painting_png)),
            text_part(revision_prompt(feedback, turn, turns)),
        ]
    return [
        text_part(
            f"Your sketch from turn {previous} produced no painting, so there is no image to show.\n\n"
            + revision_prompt(feedback, turn, turns)
        )
    ]


def images_in(messages: list[Message]) -> list[Image.Image]:
    """Every image in the conversation, in the order a processor consumes them."""
    return [part["image"] for part in _parts(messages) if part.get("type") == "image" and "image" in part]


def to_record(
    messages: list[Message],
    save_image: Callable[[Image.Image, int], str] | None = None,
) -> list[dict[str, Any]]:
    """A JSON-serialisable copy with each image replaced by ``{"type": "image", "png": ref}``.

    ``save_image(image, index)`` stores the ``index``-th image of the conversation and
    returns its reference (usually a path relative to the run directory such as
    ``renders/...png``); without it the reference is None and only the position is kept.
    """
    record: list[dict[str, Any]] = []
    image_index = 0
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            record.append({"role": message["role"], "content": content})
            continue
        parts = []
        for part in content:
            if part.get("type") == "image":
                reference = save_image(part["image"], image_index) if save_image is not None else None
                parts.append({"type": "image", "png": reference})
                image_index += 1
            else:
                parts.append(copy.deepcopy(part))
        record.append({"role": message["role"], "content": parts})
    return record


def from_record(
    record: list[dict[str, Any]],
    load_image: Callable[[str], Image.Image | bytes],
) -> list[Message]:
    """Messages rebuilt from ``to_record`` output; ``load_image(ref)`` returns an image or PNG bytes."""
    messages: list[Message] = []
    for message in record:
        content = message["content"]
        if isinstance(content, str):
            messages.append({"role": message["role"], "content": content})
            continue
        parts = []
        for part in content:
            if part.get("type") == "image":
                reference = part.get("png")
                if reference is None:
                    raise ValueError("the record has an image without a reference; it was logged without save_image")
                loaded = load_image(reference)
                if isinstance(loaded, (bytes, bytearray)):
                    loaded = painting_image(bytes(loaded))
                parts.append(image_part(loaded))
            else:
                parts.append(copy.deepcopy(part))
        messages.append({"role": message["role"], "content": parts})
    return messages


def text_only(messages: list[Message], image_placeholder: str = "[painting]") -> list[dict[str, str]]:
    """Messages with string content, for text-only tokenizers whose chat templates reject part lists.

    Images become ``image_placeholder`` so a text-only model at least learns where one was.
    """
    flattened = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            text = content
        else:
            pieces = [part["text"] if part.get("type") == "text" else image_placeholder for part in content]
            text = "\n".join(pieces)
        flattened.append({"role": message["role"], "content": text})
    return flattened


def png_bytes(image: Image.Image) -> bytes:
    """PNG encoding of an image, for ``save_image`` callbacks that write files."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _parts(messages: list[Message]):
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            continue
        yield from content
