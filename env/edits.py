"""Edit replies: SEARCH/REPLACE blocks applied to the episode's current sketch.

On a revision turn the policy may send, instead of the whole sketch, one or more blocks in the
format coding models already know (Aider's)::

    <<<<<<< SEARCH
    (lines of the current sketch, exactly)
    =======
    (their replacement)
    >>>>>>> REPLACE

``resolve_turn`` decides what a reply means for an episode whose current sketch is ``current``:
a reply with a SEARCH marker line is an edit reply, applied here; any other reply is a full
sketch, extracted by the static gate as before. The environment (never the trainer or the
policy) keeps ``current``.

How text is matched, on purpose literally (never as a pattern):

* line endings: ``\\r\\n`` and lone ``\\r`` count as ``\\n`` in the reply and in the sketch;
* a block's SEARCH text is whole lines; each must equal a line of the sketch character for
  character, indentation included; only trailing spaces and tabs are ignored (models drop them);
* the SEARCH lines must occur exactly once, as consecutive lines of the sketch as it stands
  after the blocks before it;
* the REPLACE lines are inserted as they are (an empty REPLACE deletes the lines);
* marker lines may have surrounding spaces and 5 or more marker characters; fence lines and prose
  between blocks are ignored.

A bad edit is the sketch's failure with an ``edit_*`` reason code, never ours: if any block
fails, no block of the reply is applied and the current sketch stays as it was. All work is
bounded: the reply by the contract's reply size, the blocks by ``MAX_EDIT_BLOCKS``, each match
by one substring search over the (bounded) sketch, every intermediate sketch by the contract's
code size.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from env.contract import SketchContract
from env.gate.extract import _decode_reply, _strip_thinking
from env.text import safe_text

MAX_EDIT_BLOCKS = 64
# How many lines more than the fewest a written edit may quote to quote fewer characters.
QUOTE_EXTRA_LINES = 2
# How much of a failing block the feedback quotes: enough to find it, never a flood.
EXCERPT_CHARS = 80

# Five or more marker characters: a small model miscounts runs of one character (it writes
# 13 '<' as readily as 7), and no JavaScript line looks like these. Each pattern is a single
# character class run, so a hostile million-character line is matched in linear time.
_SEARCH = re.compile(r"[ \t]*<{5,}[ \t]*SEARCH[ \t]*")
_DIVIDER = re.compile(r"[ \t]*={5,}[ \t]*")
_REPLACE = re.compile(r"[ \t]*>{5,}[ \t]*REPLACE[ \t]*")


@dataclass
class EditBlock:
    search: list[str]
    replace: list[str]


@dataclass
class TurnSketch:
    """What a reply makes of the episode's sketch.

    ``edited``: the reply was an edit reply. Then ``code`` is the sketch after the edits
    (None when they failed, with ``violations``/``details`` saying why); otherwise ``code`` is
    None and the reply is a full sketch for the static gate to extract.
    """

    edited: bool
    code: str | None = None
    violations: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    blocks: int = 0

    @property
    def failed(self) -> bool:
        return bool(self.violations)


def normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def is_edit_reply(text: str) -> bool:
    """Whether ``text`` holds a SEARCH marker line (then it is an edit reply, whatever else it holds)."""
    return any(_SEARCH.fullmatch(line) for line in normalise_newlines(text).split("\n"))


def resolve_turn(reply: str | bytes, current: str | None, contract: SketchContract | None = None) -> TurnSketch:
    """What ``reply`` does to the episode's current sketch ``current`` (None: there is none yet).

    Never raises on any str or bytes reply."""
    contract = contract or SketchContract()
    text, violations, _ = _decode_reply(reply, contract)
    if text is None:
        # Undecodable or oversized: the static gate reports it as for any reply.
        return TurnSketch(edited=False)
    text = normalise_newlines(_strip_thinking(text))
    if not is_edit_reply(text):
        return TurnSketch(edited=False)
    if current is None:
        return _failure("edit_no_sketch", "there is no current sketch to edit yet: send the complete sketch in one ```js block")
    blocks, problem = parse_blocks(text)
    if problem is not None:
        return _failure(*problem, blocks=len(blocks))
    return apply_blocks(current, blocks, contract)


def parse_blocks(text: str) -> tuple[list[EditBlock], tuple[str, str] | None]:
    """The reply's blocks in order, or the reason code and detail of the first malformed one."""
    blocks: list[EditBlock] = []
    state = "outside"
    search: list[str] = []
    replace: list[str] = []
    for line in text.split("\n"):
        opens, divides, closes = _SEARCH.fullmatch(line), _DIVIDER.fullmatch(line), _REPLACE.fullmatch(line)
        number = len(blocks) + 1
        if state == "outside":
            if opens:
                if len(blocks) >= MAX_EDIT_BLOCKS:
                    return blocks, ("edit_too_many_blocks", f"the reply holds more than {MAX_EDIT_BLOCKS} edit blocks")
                state, search, replace = "search", [], []
            elif divides or closes:
                return blocks, ("edit_malformed", f"block {number}: a {_marker_name(line)} line without a <<<<<<< SEARCH line before it")
        elif state == "search":
            if divides:
                if not any(part.strip() for part in search):
                    return blocks, ("edit_malformed", f"block {number}: the SEARCH part is empty; quote the lines to change")
                state = "replace"
            elif opens or closes:
                return blocks, ("edit_malformed", f"block {number}: a {_marker_name(line)} line before its ======= line")
            else:
                search.append(line)
        else:  # replace
            if closes:
                blocks.append(EditBlock(search, replace))
                state = "outside"
            elif opens or divides:
                return blocks, ("edit_malformed", f"block {number}: a second {_marker_name(line)} line before >>>>>>> REPLACE")
            else:
                replace.append(line)
    if state != "outside":
        return blocks, ("edit_malformed", f"block {len(blocks) + 1} is not terminated: it needs a >>>>>>> REPLACE line")
    if not blocks:
        return blocks, ("edit_malformed", "no complete SEARCH/REPLACE block")
    return blocks, None


def apply_blocks(current: str, blocks: list[EditBlock], contract: SketchContract | None = None) -> TurnSketch:
    """``current`` with ``blocks`` applied in order, or the first block's failure (then nothing is applied)."""
    contract = contract or SketchContract()
    lines = normalise_newlines(current).split("\n")
    for number, block in enumerate(blocks, start=1):
        found = _find(lines, block.search)
        if found is None:
            return _failure("edit_no_match", f"block {number}: the SEARCH text is not in the current sketch: "
                            f"{_excerpt(block.search)}", blocks=len(blocks))
        if found < 0:
            return _failure("edit_ambiguous", f"block {number}: the SEARCH text occurs more than once in the current "
                            f"sketch; quote more lines: {_excerpt(block.search)}", blocks=len(blocks))
        lines[found:found + len(block.search)] = block.replace
        size = sum(len(line) + 1 for line in lines)
        if size > contract.max_code_chars + 1:
            return _failure("edit_too_long", f"block {number}: the edited sketch would have more than "
                            f"{contract.max_code_chars} characters", blocks=len(blocks))
    code = "\n".join(lines)
    if not code.strip():
        return _failure("edit_empty_result", "the edits leave an empty sketch", blocks=len(blocks))
    return TurnSketch(edited=True, code=code, blocks=len(blocks))


def _find(lines: list[str], search: list[str]) -> int | None:
    """The index of the one place ``search`` occurs as consecutive lines; None: nowhere; -1: more than once.

    One substring search over the joined text (CPython's is linear-time), aligned to line
    starts by the newlines around it, rather than a line-by-line scan that a hostile block of
    a thousand repeated lines would make quadratic."""
    hay = "\n" + "\n".join(line.rstrip(" \t") for line in lines) + "\n"
    needle = "\n" + "\n".join(line.rstrip(" \t") for line in search) + "\n"
    first = hay.find(needle)
    if first < 0:
        return None
    if hay.find(needle, first + 1) >= 0:
        return -1
    return hay.count("\n", 0, first)


def _failure(code: str, detail: str, blocks: int = 0) -> TurnSketch:
    return TurnSketch(edited=True, code=None, violations=[code], details=[safe_text(detail, 300)], blocks=blocks)


def _excerpt(search: list[str]) -> str:
    shown = " / ".join(line.strip() for line in search if line.strip())
    return "'" + safe_text(shown, EXCERPT_CHARS) + "'"


def _marker_name(line: str) -> str:
    if _SEARCH.fullmatch(line):
        return "<<<<<<< SEARCH"
    return "=======" if _DIVIDER.fullmatch(line) else ">>>>>>> REPLACE"


# --- writing edits (warm starts, tests, examples) -------------------------------------------------

def edit_reply(old: str, new: str) -> str:
    """SEARCH/REPLACE blocks that turn ``old`` into ``new`` (up to trailing newlines), each SEARCH
    the changed lines, or for an insertion the shortest lines beside it, with as few neighbours as
    make it occur once in the sketch it applies to (``_unique_context``): what a model is taught
    to send. Empty string when nothing changes."""
    old_lines = normalise_newlines(old).rstrip("\n").split("\n")
    new_lines = normalise_newlines(new).rstrip("\n").split("\n")
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    blocks: list[str] = []
    working = list(old_lines)
    offset = 0  # how far the working sketch's indices have moved from old's
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        start, end = i1 + offset, i2 + offset
        s0, s1 = _unique_context(working, start, end)
        search = working[s0:s1]
        replacement = working[s0:start] + new_lines[j1:j2] + working[end:s1]
        blocks.append("\n".join(["<<<<<<< SEARCH", *search, "=======", *replacement, ">>>>>>> REPLACE"]))
        working[s0:s1] = replacement
        offset += (j2 - j1) - (i2 - i1)
    return "\n".join(blocks)


def _unique_context(lines: list[str], start: int, end: int) -> tuple[int, int]:
    """The span [s0, s1) around lines[start:end] that is easiest to quote exactly: it holds a
    non-blank line and occurs once in ``lines``, and among such spans of at most
    ``QUOTE_EXTRA_LINES`` lines more than the fewest it has the fewest characters (then lines).
    A model copies a short comment line more reliably than a long coordinate line beside it."""
    spans: list[tuple[int, int, int, int]] = []
    fewest = None
    for grow in range(len(lines) + 1):
        if fewest is not None and grow > fewest + QUOTE_EXTRA_LINES:
            break
        for before in range(grow + 1):
            s0, s1 = max(0, start - before), min(len(lines), end + grow - before)
            span = lines[s0:s1]
            if span and any(line.strip() for line in span) and _find(lines, span) == s0:
                spans.append((sum(len(line) for line in span), s1 - s0, s0, s1))
                fewest = grow if fewest is None else fewest
    if not spans:
        return 0, len(lines)
    _, _, s0, s1 = min(spans)
    return s0, s1
