"""JavaScript literal helpers: decoding string and identifier escapes, the limits on constant
folding, and small syntax-tree node helpers (text, children, member chains, parentheses).
"""

from __future__ import annotations

import re

from tree_sitter import Node

_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}
_IDENTIFIER_ESCAPE = re.compile(r"\\u\{([0-9a-fA-F]+)\}|\\u([0-9a-fA-F]{4})")
# Folded strings only ever matter when they spell a name; anything longer is not one.
_MAX_FOLDED_LENGTH = 256
_MAX_FOLD_DEPTH = 48
# Total folding steps per sketch; memoisation already makes folding linear, this is a
# second line against pathological inputs.
_FOLD_BUDGET = 50_000


def _code_point(value: int) -> str | None:
    return chr(value) if 0 <= value <= 0x10FFFF else None


def _decode_escape(sequence: str) -> str | None:
    body = sequence[1:]
    if not body:
        return None
    if body[0] in "\r\n\u2028\u2029":
        return ""  # line continuation
    if body[0] == "x" and len(body) == 3:
        return _code_point(int(body[1:], 16))
    if body.startswith("u{") and body.endswith("}"):
        try:
            return _code_point(int(body[2:-1], 16))
        except ValueError:
            return None
    if body[0] == "u" and len(body) == 5:
        try:
            return _code_point(int(body[1:], 16))
        except ValueError:
            return None
    if body[0] in "01234567" and len(body) > 1:
        return _code_point(int(body, 8)) if all(c in "01234567" for c in body) else None
    return _SIMPLE_ESCAPES.get(body, body)


def _node_text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", errors="replace")


def _identifier_name(node: Node) -> str:
    # JavaScript accepts unicode escapes inside identifiers: \u0065val is eval.
    raw = _node_text(node)
    if "\\" not in raw:
        return raw

    def replace(match: re.Match[str]) -> str:
        value = int(match.group(1) or match.group(2), 16)
        return _code_point(value) or match.group(0)

    return _IDENTIFIER_ESCAPE.sub(replace, raw)


_LITERAL_PARTS = ("string_fragment", "escape_sequence")


def _literal_part(child: Node) -> str | None:
    """The text of a string or template fragment; None for an escape we cannot decode."""
    text = _node_text(child)
    return text if child.type == "string_fragment" else _decode_escape(text)


def _string_literal_value(node: Node) -> str | None:
    parts: list[str] = []
    for child in node.children:
        if child.type in _LITERAL_PARTS:
            part = _literal_part(child)
            if part is None:
                return None
            parts.append(part)
    return "".join(parts)


def _is_literal_key(node: Node) -> bool:
    if node.type in ("string", "number"):
        return True
    return node.type == "template_string" and not any(
        child.type == "template_substitution" for child in node.children
    )


def _named_children(node: Node) -> list[Node]:
    return [child for child in node.named_children if child.type != "comment"]


_MEMBER_TYPES = ("member_expression", "subscript_expression")


def _member_chain(node: Node) -> tuple[Node | None, set[str]]:
    """The innermost object of ``a.b[c].d`` (``a``) and the property names spelled on the way."""
    names: set[str] = set()
    node = _unparenthesize(node)
    while node.type in _MEMBER_TYPES:
        prop = node.child_by_field_name("property") or node.child_by_field_name("index")
        if prop is not None:
            text = _identifier_name(prop) if prop.type == "property_identifier" else prop.text.decode("utf-8", "replace")
            names.add(text.strip("'\"`"))
        node = _unparenthesize(node.child_by_field_name("object"))
    return node, names


def _unparenthesize(node: Node) -> Node:
    for _ in range(_MAX_FOLD_DEPTH):
        if node.type != "parenthesized_expression":
            return node
        inner = _named_children(node)
        if len(inner) != 1:
            return node
        node = inner[0]
    return node


def _line(node: Node) -> int:
    return node.start_point[0] + 1
