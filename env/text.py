"""Sketch-controlled text made safe for everything downstream.

Error messages and property names come out of the sandboxed page, where the sketch chooses
them: a lone UTF-16 surrogate survives JSON (``"\\ud800"`` decodes to a Python str that
``.encode("utf-8")``, a tokenizer and a chat template all refuse), and a message can be
megabytes long. Every such string passes ``safe_text`` once, where it enters Python
(``env.renderer``), so feedback, prompts, episode records, logs and the OpenEnv wire only
ever see well-formed, bounded text.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

MAX_TEXT_CHARS = 500
MAX_ITEMS = 50

# Lone surrogates (the only str values UTF-8 cannot encode) and the C0/C1 controls other
# than tab and newline (a NUL or an escape sequence has no business in a prompt or a log).
_UNSAFE = re.compile(r"[\ud800-\udfff]|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe_text(value: Any, limit: int = MAX_TEXT_CHARS) -> str:
    """``value`` as a well-formed, printable string of at most ``limit`` characters."""
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception:  # a str() that raises: the text is lost, the verdict is not
        text = "an unprintable value"
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return _UNSAFE.sub(lambda m: "\ufffd" if m.group() >= "\ud800" else " ", text)


def safe_lines(values: Iterable[Any] | None, limit: int = MAX_TEXT_CHARS, max_items: int = MAX_ITEMS) -> list[str]:
    """The first ``max_items`` of ``values``, each through ``safe_text``."""
    out: list[str] = []
    for value in values or ():
        if len(out) >= max_items:
            break
        out.append(safe_text(value, limit))
    return out
