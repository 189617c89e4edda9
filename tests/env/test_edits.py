"""Edit replies (env.edits): parsing, literal matching, reason codes, bounded work on hostile replies."""

from __future__ import annotations

import json
import random
import time

import pytest

from env.contract import EDIT_REASON_CODES, REASON_CODES, SketchContract
from env.core import gate_turn
from env.edits import MAX_EDIT_BLOCKS, edit_reply, is_edit_reply, resolve_turn
from env.prompts import SKETCH_SKELETON
from multiturn_trainer.procedural import SUBJECTS, generate_sketch, without_layer

from helpers import RECORD_KEYS, SMALL_SKETCH, run_cli


# The contract's skeleton with one red circle: what the edits below change.
SKETCH = SKETCH_SKELETON.replace(
    "  /* brush.* calls */",
    "  brush.noStroke();\n  brush.fill('#d6362b', 150);\n  brush.circle(300, 300, 120);") + "\n"


def block(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE"


def test_edit_codes_are_reason_codes_with_explanations():
    assert set(EDIT_REASON_CODES) <= set(REASON_CODES)
    assert all(code.startswith("edit_") and text for code, text in EDIT_REASON_CODES.items())


def test_one_block_changes_one_line_and_keeps_the_rest():
    reply = "Redder and larger:\n```\n" + block("  brush.circle(300, 300, 120);", "  brush.circle(300, 300, 180);") + "\n```"
    result = resolve_turn(reply, SKETCH)
    assert result.edited and not result.failed
    assert result.code == SKETCH.replace("120);", "180);")


def test_blocks_apply_in_order_to_the_result_of_the_ones_before():
    reply = "\n".join([block("  brush.circle(300, 300, 120);", "  brush.circle(100, 100, 50);"),
                       block("  brush.circle(100, 100, 50);", "  brush.circle(100, 100, 60);")])
    assert resolve_turn(reply, SKETCH).code == SKETCH.replace("300, 300, 120", "100, 100, 60")


def test_line_endings_and_trailing_whitespace_do_not_matter_but_indentation_does():
    crlf = block("  brush.fill('#d6362b', 150);   ", "  brush.fill('#2b6cd6', 150);").replace("\n", "\r\n")
    assert resolve_turn(crlf, SKETCH).code == SKETCH.replace("#d6362b", "#2b6cd6")
    assert resolve_turn(crlf, SKETCH.replace("\n", "\r\n")).code == SKETCH.replace("#d6362b", "#2b6cd6")
    unindented = block("brush.fill('#d6362b', 150);", "brush.fill('#2b6cd6', 150);")
    assert resolve_turn(unindented, SKETCH).violations == ["edit_no_match"]


def test_marker_lines_take_any_run_of_five_or_more_marker_characters():
    long_markers = ("<" * 13 + " SEARCH\n  noLoop();\n" + "=" * 11 + "\n  noLoop(); // x\n" + ">" * 7 + " REPLACE")
    assert resolve_turn(long_markers, SKETCH).code == SKETCH.replace("  noLoop();", "  noLoop(); // x")
    assert not is_edit_reply("<<<< SEARCH\n")


def test_search_text_is_literal_never_a_pattern():
    pattern = block("  brush.circle(.*);", "  brush.circle(1, 1, 1);")
    assert resolve_turn(pattern, SKETCH).violations == ["edit_no_match"]
    with_dots = SKETCH.replace("brush.circle(300, 300, 120);", "brush.circle(3.0, 3.0, 1.0); // (.*)")
    assert resolve_turn(block("  brush.circle(3.0, 3.0, 1.0); // (.*)", "  brush.circle(1, 1, 1);"), with_dots).code


@pytest.mark.parametrize("reply, code", [
    (block("}", "}\n// end"), "edit_ambiguous"),
    (block("  brush.circle(1, 2, 3);", "x"), "edit_no_match"),
    ("<<<<<<< SEARCH\n  noLoop();\n=======\n  noLoop();\n", "edit_malformed"),
    ("<<<<<<< SEARCH\n  noLoop();\n>>>>>>> REPLACE", "edit_malformed"),
    ("<<<<<<< SEARCH\n\n=======\n// new\n>>>>>>> REPLACE", "edit_malformed"),
    ("=======\n>>>>>>> REPLACE\n<<<<<<< SEARCH", "edit_malformed"),
    (block("  noLoop();", "  noLoop();\n=======\n  noLoop();"), "edit_malformed"),
    (block(SKETCH.rstrip("\n"), ""), "edit_empty_result"),
    (block("  noLoop();", "  noLoop();\n" + "  // padding padding padding\n" * 1500), "edit_too_long"),
    ("\n".join([block("  noLoop();", "  noLoop();")] * (MAX_EDIT_BLOCKS + 1)), "edit_too_many_blocks"),
])
def test_each_bad_edit_has_its_own_reason_code_and_applies_nothing(reply, code):
    result = resolve_turn(reply, SKETCH)
    assert result.edited and result.failed and result.code is None
    assert result.violations == [code]
    assert result.details and all(len(detail) <= 300 for detail in result.details)


def test_a_failing_later_block_applies_no_block_of_the_reply():
    reply = "\n".join([block("  noLoop();", "  noLoop(); // changed"), block("  nothing();", "x")])
    result = resolve_turn(reply, SKETCH)
    assert result.violations == ["edit_no_match"] and "block 2" in result.details[0]


def test_an_edit_without_a_sketch_to_edit_is_the_replys_failure():
    assert resolve_turn(block("  noLoop();", "  noLoop();"), None).violations == ["edit_no_sketch"]


def test_a_full_sketch_is_not_an_edit():
    assert not resolve_turn(f"```js\n{SKETCH}```", SKETCH).edited
    assert not is_edit_reply(f"```js\n{SKETCH}```")


def test_thinking_is_set_aside_before_looking_for_blocks():
    reply = "<think>\n" + block("  noLoop();", "  nope();") + "\n</think>\n" + block("  noLoop();", "  noLoop(); // kept")
    assert resolve_turn(reply, SKETCH).code == SKETCH.replace("  noLoop();", "  noLoop(); // kept")


def test_the_gate_judges_the_edited_sketch():
    smuggled = block("  brush.circle(300, 300, 120);", "  brush.circle(300, 300, 120);\n  text('hi', 10, 10);")
    verdict = gate_turn(smuggled, SKETCH, SketchContract())
    assert not verdict.passed and "text_label" in verdict.violations and "text('hi'" in verdict.code
    bad = gate_turn(block("  nothing();", "x"), SKETCH, SketchContract())
    assert verdict.code is not None and bad.code is None and bad.violations == ["edit_no_match"]


# --- hostile replies: each answers fast with a reason code -----------------------------------------

HOSTILE = {
    "thousands_of_blocks": "\n".join([block("}", "}")] * 5000),
    "megabyte_block": block("  noLoop();", "x" * 1_000_000),
    "near_limit_block": block("  noLoop();", "// " + "y" * 190_000),
    "one_char_everywhere": block("  " + "}", "  }"),
    "thousand_line_search_that_almost_matches": block("\n".join(["  noLoop();"] * 30_000), "x"),
    "markers_inside_strings": block("  noLoop();", "  const a = `\n=======\n`;"),
    "marker_line_in_template": "```js\nconst s = `\n<<<<<<< SEARCH\n`;\n" + SKETCH + "```",
    "nul_bytes": block("  noLoop();", "  noLoop();\x00\x00"),
    "lone_surrogate": block("  noLoop();", "  // \ud800"),
    "only_markers": "<<<<<<< SEARCH\n" * 10_000,
    "million_character_marker_line": "<" * 190_000 + " SEARCH\n" + "=" * 5,
    "bytes_not_utf8": b"<<<<<<< SEARCH\n\xff\n=======\n\n>>>>>>> REPLACE",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_edit_replies_answer_fast_with_a_reason_code(name):
    started = time.perf_counter()
    verdict = gate_turn(HOSTILE[name], SKETCH, SketchContract())
    elapsed = time.perf_counter() - started
    assert elapsed < 2.0, f"{name} took {elapsed:.2f} s"
    assert verdict.violations and set(verdict.violations) <= set(REASON_CODES), (name, verdict.violations)
    assert "infrastructure_error" not in verdict.violations


def test_edit_reply_turns_one_sketch_into_another_for_every_procedural_subject():
    rng = random.Random(0)
    for subject in SUBJECTS:
        seed = rng.randrange(2**31)
        draft, finished = generate_sketch(subject, seed, 2), generate_sketch(subject, seed, 3)
        reply = edit_reply(draft, finished)
        assert reply and resolve_turn(reply, draft).code.rstrip("\n") == finished.rstrip("\n"), subject
        assert len(reply) < 0.6 * len(finished)
        # A one-line change quotes one line (it is unique), not its neighbours.
        changed = finished.replace("brush.fill('#", "brush.fill('#1", 1)
        one_line = edit_reply(finished, changed)
        assert resolve_turn(one_line, finished).code.rstrip("\n") == changed.rstrip("\n")
        assert one_line.count("\n") == 4, one_line


def test_an_edit_that_puts_a_layer_back_quotes_a_short_line_not_coordinates():
    # The warm start's edit examples (multiturn_trainer.sft): a SmolLM2 policy did not copy long
    # coordinate lines exactly, so an insertion is anchored on the short line beside the gap.
    rng = random.Random(1)
    for subject in SUBJECTS:
        finished = generate_sketch(subject, rng.randrange(2**31), 4)
        draft = without_layer(finished, 2)
        reply = edit_reply(draft, finished)
        assert resolve_turn(reply, draft).code.rstrip("\n") == finished.rstrip("\n"), subject
        search = reply.split("\n=======\n")[0].split("\n")[1:]
        assert sum(len(line) for line in search) <= 40 and "[[" not in "".join(search), (subject, search)


def test_without_layer_keeps_every_other_line_and_refuses_the_last_layer():
    finished = generate_sketch("tulips in a glass vase", 4, 3)
    draft = without_layer(finished, 1)
    assert draft.count("  // ") == finished.count("  // ") - 1
    assert set(draft.split("\n")) <= set(finished.split("\n"))
    with pytest.raises(ValueError, match="layers"):
        without_layer(finished, 2)


# --- `watercolour render --revise` ------------------------------------------------------------

@pytest.mark.slow  # 5 renders
def test_render_revise_applies_each_reply_to_the_previous_sketch(tmp_path):
    previous = tmp_path / "previous.js"
    previous.write_text(SMALL_SKETCH)
    replies = {
        "recolour.txt": "Greener:\n" + block("  brush.fill('#2b6cb0', 140);", "  brush.fill('#2b8f4e', 140);"),
        "again.txt": block("  brush.fill('#2b6cb0', 140);", "  brush.fill('#2b8f4e', 140);").replace("\n", "\r\n"),
        "missing.txt": block("  brush.fill('#000000', 140);", "  brush.fill('#2b8f4e', 140);"),
        "unterminated.txt": "<<<<<<< SEARCH\n  noLoop();\n=======\n",
        "smuggle.txt": block("  brush.noStroke();", "  brush.noStroke();\n  fetch('http://127.0.0.1:9/x');"),
        "full.md": "A new one:\n```js\n" + SMALL_SKETCH.replace("130, 120, 35", "100, 100, 50") + "```\n",
        "prose.txt": "I would make it bluer.",
    }
    for name, text in replies.items():
        (tmp_path / name).write_bytes(text.encode())
    proc = run_cli("render", "--revise", str(previous), *(str(tmp_path / n) for n in replies), "--json",
                   "--seed", "3", "--out-dir", str(tmp_path / "out"), "--deadline", "30")
    assert proc.returncode == 0, proc.stderr
    records = {json.loads(line)["file"].split("/")[-1]: json.loads(line) for line in proc.stdout.splitlines()}
    assert all(set(r) == RECORD_KEYS | {"code"} for r in records.values())
    assert not any("infrastructure_error" in r["violations"] for r in records.values())
    recoloured = SMALL_SKETCH.replace("#2b6cb0", "#2b8f4e")
    assert records["recolour.txt"]["passed"] and records["recolour.txt"]["code"] == recoloured
    assert records["again.txt"]["passed"] and records["again.txt"]["code"] == recoloured
    # The same edit gives the same painting, byte for byte.
    pngs = [(tmp_path / "out" / records[n]["png"].split("/")[-1]).read_bytes() for n in ("recolour.txt", "again.txt")]
    assert pngs[0] == pngs[1]
    for name, code in (("missing.txt", "edit_no_match"), ("unterminated.txt", "edit_malformed")):
        assert records[name]["violations"] == [code] and records[name]["code"] == SMALL_SKETCH
        assert records[name]["png"] is None
    assert not records["smuggle.txt"]["passed"] and "external_access" in records["smuggle.txt"]["violations"]
    assert "fetch(" in records["smuggle.txt"]["code"]
    assert records["full.md"]["passed"] and "100, 100, 50" in records["full.md"]["code"]
    assert records["prose.txt"]["violations"] == ["no_code"] and records["prose.txt"]["code"] == SMALL_SKETCH
