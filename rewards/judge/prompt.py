"""The judge's prompt: the instructions and the chat messages that show it painting A and B."""

from __future__ import annotations

import base64
import json

# Part of every cache key: change it whenever the prompt's wording or answer format changes,
# so verdicts given to an older prompt are never reused.
JUDGE_PROMPT_VERSION = "watercolour-pairwise-v1"

SYSTEM_PROMPT = (
    "You are an exacting judge of watercolour painting technique. You compare two paintings "
    "made with a digital watercolour brush and decide which one is the better watercolour."
)

CRITERIA = (
    "Judge only the watercolour technique, in this order of importance:\n"
    "1. Soft bleeds: pigment that spreads and feathers into damp paper instead of flat, "
    "hard-edged fills.\n"
    "2. Layered, translucent washes: glazes that overlap and let earlier layers and the paper "
    "glow through, building depth from light to dark.\n"
    "3. Varied edges: lost, soft and crisp edges chosen with intent, not one uniform outline.\n"
    "4. Composition: a clear focal area, balanced masses and purposeful untouched paper.\n"
    "Do not reward a painting for its subject, its colours' appeal on their own, its size, or "
    "for being shown first or second."
)

ANSWER_FORMAT = (
    'Answer with strict JSON on one line and nothing else, the verdict first: '
    '{"winner": "A", "reason": "..."} or {"winner": "B", "reason": "..."}. '
    "Keep the reason under 20 words. There are no ties: pick the better watercolour."
)

MAX_SUBJECT_CHARS = 200


def _subject_line(subject: str | None) -> str | None:
    if not subject or not subject.strip():
        return None
    # The subject comes from configs, but a newline or a very long subject would let it rewrite
    # the instructions around it.
    flat = " ".join(subject.split())[:MAX_SUBJECT_CHARS]
    return (
        f"Both paintings were asked to show: {json.dumps(flat, ensure_ascii=False)}. "
        "That is context only; judge how each is painted, not what it shows."
    )


def _judge_parts(subject: str | None) -> list[tuple[str, str | None]]:
    """The user turn as ('text', text) and ('image', 'A' | 'B') parts, backend neutral."""
    intro = "Compare painting A and painting B as watercolours."
    subject_line = _subject_line(subject)
    if subject_line:
        intro = f"{intro} {subject_line}"
    return [
        ("text", intro),
        ("text", "Painting A:"),
        ("image", "A"),
        ("text", "Painting B:"),
        ("image", "B"),
        ("text", f"{CRITERIA}\n\n{ANSWER_FORMAT}"),
    ]


def png_data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def build_judge_messages(image_a_png: bytes, image_b_png: bytes, subject: str | None = None) -> list[dict]:
    """OpenAI chat messages comparing painting A with painting B (images as base64 data URLs)."""
    images = {"A": image_a_png, "B": image_b_png}
    content: list[dict] = []
    for kind, value in _judge_parts(subject):
        if kind == "image":
            content.append({"type": "image_url", "image_url": {"url": png_data_url(images[value])}})
        else:
            content.append({"type": "text", "text": value})
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": content},
    ]
