"""Reply extraction: decode a raw model reply, set its thinking block aside and pick the
JavaScript sketch out of its fenced code blocks (``extract_sketch``, ``ExtractResult``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from env.contract import SketchContract


@dataclass
class ExtractResult:
    """The sketch found in a reply; ``code`` is None exactly when extraction failed."""

    code: str | None
    violations: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)


# Every quantifier here is bounded or unambiguous: the reply is hostile, and a pattern
# like <think[^>]*> takes quadratic time on "<think" repeated 30,000 times.
_THINK_OPEN = re.compile(r"<think(?:\s[^<>]{0,200})?>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think\s{0,20}>", re.IGNORECASE)
_JS_FENCE_LANGUAGES = frozenset(
    {"", "js", "javascript", "p5", "p5js", "p5.js", "mjs", "es6", "ecmascript"}
)
_LOOKS_LIKE_SKETCH = re.compile(r"\bfunction\s+setup\b|\bcreateCanvas\b")
_DEFINES_SETUP = re.compile(r"\bfunction\s+setup\b|\bsetup\s*=")


def _strip_thinking(text: str) -> str:
    # Chat templates that open the think block in the prompt leave only the closing tag
    # in the reply; everything before it is then reasoning, not the answer.
    first_close = _THINK_CLOSE.search(text)
    first_open = _THINK_OPEN.search(text)
    if first_close and (first_open is None or first_close.start() < first_open.start()):
        text = text[first_close.end():]
    kept: list[str] = []
    position = 0
    while True:
        opening = _THINK_OPEN.search(text, position)
        if opening is None:
            kept.append(text[position:])
            break
        kept.append(text[position:opening.start()])
        closing = _THINK_CLOSE.search(text, opening.end())
        if closing is None:
            break  # unclosed: the reply was cut off while still thinking
        position = closing.end()
    return "".join(kept)


@dataclass
class _FencedBlock:
    language: str
    body: str


def _fence_opening(line: str) -> tuple[str, str] | None:
    """(fence, language) if `line` opens a fenced block, following CommonMark's rules."""
    content = line.lstrip(" ")
    if len(line) - len(content) > 3 or not content or content[0] not in "`~":
        return None
    marker = content[0]
    run = len(content) - len(content.lstrip(marker))
    if run < 3:
        return None
    info = content[run:].strip()
    if marker == "`" and "`" in info:
        return None  # an inline code span such as ```x```, not a fence
    language = info.split()[0].lower() if info else ""
    return content[:run], language


def _fenced_blocks(text: str) -> list[_FencedBlock]:
    # Split on "\n" only: str.splitlines would also break on U+2028 and friends, which
    # may legitimately sit inside JavaScript strings.
    blocks: list[_FencedBlock] = []
    fence = ""
    language = ""
    body: list[str] = []
    inside = False
    for line in text.split("\n"):
        bare = line.rstrip("\r")
        if not inside:
            opening = _fence_opening(bare)
            if opening is not None:
                inside = True
                fence, language = opening
                body = []
            continue
        stripped = bare.strip()
        if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
            blocks.append(_FencedBlock(language, "\n".join(body)))
            inside = False
            continue
        if fence[0] == "`" and stripped.endswith(fence) and len(stripped) > len(fence):
            # Models sometimes glue the closing fence to the last code line: "}```".
            body.append(bare.rstrip()[: -len(fence)])
            blocks.append(_FencedBlock(language, "\n".join(body)))
            inside = False
            continue
        body.append(bare)
    if inside:
        # A reply cut off by the token limit never closes its fence; keep what arrived so
        # the parser can report where it breaks.
        blocks.append(_FencedBlock(language, "\n".join(body)))
    return blocks


def _choose_block(blocks: list[_FencedBlock]) -> _FencedBlock | None:
    candidates = [block for block in blocks if block.language in _JS_FENCE_LANGUAGES]
    if not candidates:
        candidates = [block for block in blocks if _LOOKS_LIKE_SKETCH.search(block.body)]
    if not candidates:
        return None
    with_setup = [block for block in candidates if _DEFINES_SETUP.search(block.body)]
    return max(with_setup or candidates, key=lambda block: len(block.body))


def _decode_reply(reply: str | bytes, contract: SketchContract) -> tuple[str | None, list[str], list[str]]:
    too_long = (
        ["too_long"],
        [f"the reply is longer than {contract.max_reply_bytes} bytes"],
    )
    if isinstance(reply, (bytes, bytearray, memoryview)):
        raw = bytes(reply)
        if len(raw) > contract.max_reply_bytes:
            return None, *too_long
        try:
            return raw.decode("utf-8"), [], []
        except UnicodeDecodeError as error:
            return None, ["not_utf8"], [f"byte {error.start} of the reply is not valid UTF-8"]
    if not isinstance(reply, str):
        return None, ["no_code"], [f"the reply is a {type(reply).__name__}, not text"]
    # Every character is at least one byte, so the length alone can reject huge replies
    # without encoding them.
    if len(reply) > contract.max_reply_bytes:
        return None, *too_long
    try:
        encoded_length = len(reply.encode("utf-8"))
    except UnicodeEncodeError as error:
        # Lone surrogates survive in Python str but cannot be UTF-8 on the wire.
        return None, ["not_utf8"], [f"character {error.start} of the reply is not encodable as UTF-8"]
    if encoded_length > contract.max_reply_bytes:
        return None, *too_long
    return reply, [], []


def extract_sketch(reply: str | bytes, contract: SketchContract = SketchContract()) -> ExtractResult:
    """Find the JavaScript sketch in a raw model reply."""
    text, violations, details = _decode_reply(reply, contract)
    if text is None:
        return ExtractResult(None, violations, details)
    text = _strip_thinking(text.lstrip("\ufeff"))
    blocks = _fenced_blocks(text)
    if blocks:
        chosen = _choose_block(blocks)
        code = chosen.body if chosen is not None else None
    else:
        code = text.strip() if _LOOKS_LIKE_SKETCH.search(text) else None
    if code is not None:
        code = code.lstrip("\ufeff")
    if code is None or not code.strip():
        return ExtractResult(None, ["no_code"], ["no JavaScript sketch found outside the thinking block (expected a ```js block)"])
    if len(code) > contract.max_code_chars:
        return ExtractResult(
            None,
            ["too_long"],
            [f"the sketch has {len(code)} characters; the limit is {contract.max_code_chars}"],
        )
    return ExtractResult(code)
