"""The sketch's text as SES will read it: ``eval(`` and ``import(`` in comments and strings.

SES does not parse a source before evaluating it. It refuses, by regular expression, any text
that could hold a direct eval (``(^|[^.])\\beval(\\s*\\()``) or an import expression
(``\\bimport(\\s*(?:\\(|/[/*]))``), wherever it stands: a comment such as
``// no eval() here`` or a string ``'eval(x)'`` made an honest sketch fail as dynamic_code.
This module rewrites those occurrences where they cannot be code, using the same parser as
the static gate, so that SES refuses only a real call (which stays dynamic_code):

- in a comment, ``eval(`` becomes ``eval_(`` (a comment's text has no meaning);
- in a string or a template's text, the ``(`` (or the ``/`` of ``import//``) becomes its
  escape ``\\x28`` (``\\x2f``): the string's value is unchanged. A tagged template sees
  the change in its ``raw`` strings only.

Regular-expression literals are left alone (``/eval(x)/``: an escape would change what the
pattern matches), so such a sketch is still refused; the feedback names ``eval(`` as the
cause.
"""

from __future__ import annotations

import re

from tree_sitter import Parser

# The candidates, as SES's patterns find them (a preceding "." is a method call SES allows).
_CANDIDATE = re.compile(r"\b(?:eval\s*\(|import\s*(?:\(|/[/*]))")
_IN_COMMENT = re.compile(r"\b(eval|import)(?=\s*(?:\(|/[/*]))")
_IN_STRING = re.compile(r"\b(eval|import)(\s*)(\(|/(?=[/*]))")
_ESCAPES = {"(": "\\x28", "/": "\\x2f"}


def _escape_in_string(text: str) -> str:
    return _IN_STRING.sub(lambda m: m.group(1) + m.group(2) + _ESCAPES[m.group(3)], text)


def neutralise_for_ses(code: str) -> str:
    """``code`` with ``eval(``/``import(`` rewritten where they are comment or string text."""
    if not isinstance(code, str) or not _CANDIDATE.search(code):
        return code  # the common case costs one regular-expression scan
    from env.gate.analysis import _JAVASCRIPT

    data = code.encode("utf-8", "surrogatepass")
    tree = Parser(_JAVASCRIPT).parse(data)
    edits: list[tuple[int, int, bytes]] = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        kind = node.type
        if kind == "comment" or kind == "html_comment":
            text = data[node.start_byte:node.end_byte].decode("utf-8", "surrogatepass")
            new = _IN_COMMENT.sub(r"\1_", text)
            if new != text:
                edits.append((node.start_byte, node.end_byte, new.encode("utf-8", "surrogatepass")))
            continue
        if kind == "string_fragment" and node.parent is not None and node.parent.type in ("string", "template_string"):
            text = data[node.start_byte:node.end_byte].decode("utf-8", "surrogatepass")
            new = _escape_in_string(text)
            if new != text:
                edits.append((node.start_byte, node.end_byte, new.encode("utf-8", "surrogatepass")))
            continue
        if kind == "regex":
            continue
        stack.extend(node.children)
    if not edits:
        return code
    for start, end, replacement in sorted(edits, reverse=True):
        data = data[:start] + replacement + data[end:]
    return data.decode("utf-8", "surrogatepass")
