"""Static gate: extract the sketch from a model reply and check it before anything runs.

The reply is hostile input. The gate never executes it; it parses the JavaScript and
walks the syntax tree with real lexical scoping, so that a sketch may call its own
helper named ``line`` while a bare ``line(...)`` that resolves to p5 is rejected.
Whatever the static view cannot decide (values built at run time, aliases hidden in
data structures) is left to the run-time layer, which enforces the same contract in
the browser; the gate aims to be precise on legitimate code and to catch every
statically visible escape.

Parser choice: tree-sitter-javascript rather than esprima. Measured here with
esprima 4.0.1 (its last release, 2018): ``parseScript`` rejects optional chaining
``b?.c`` ("Unexpected token ."), nullish coalescing ``b ?? 1`` ("Unexpected token ?"),
class fields ``class A { x = 1 }`` ("Unexpected token ="), private fields, logical
assignment ``a ||= 1`` and numeric separators ``1_000``; tree-sitter 0.26 with
tree-sitter-javascript 0.25 parses all of them. Tree-sitter is also error tolerant, so
a truncated reply still yields a full tree whose ERROR/MISSING nodes locate the break
and whose intact parts are still checked (esprima raises on the first error and gives
no tree), and it parsed the 70-line example sketch in about 0.24 ms against esprima's
3.9 ms (with locations).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

import tree_sitter_javascript
from tree_sitter import Language, Node, Parser

from env.contract import (
    DOM_ACCESS_NAMES,
    DYNAMIC_CODE_NAMES,
    EXTERNAL_ACCESS_NAMES,
    GLOBAL_OBJECT_NAMES,
    JS_SAFE_GLOBALS,
    KNOWN_BRUSH_METHODS,
    P5_GLOBAL_NAMES,
    P5_TEXT_FUNCTIONS,
    PAINTING_BRUSH_METHODS,
    REASON_CODES,
    STORAGE_NAMES,
    TIMER_NAMES,
    SketchContract,
)

_JAVASCRIPT = Language(tree_sitter_javascript.language())

# Feedback to the model stays readable: a hostile reply can produce thousands of findings.
MAX_DETAILS = 40
# A truncated reply often produces a cascade of parse errors; the first few locate it.
MAX_SYNTAX_ERROR_DETAILS = 3


# --------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------


@dataclass
class ExtractResult:
    """The sketch found in a reply; ``code`` is None exactly when extraction failed."""

    code: str | None
    violations: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)


@dataclass
class GateVerdict:
    passed: bool
    code: str | None
    violations: list[str]
    details: list[str]
    stats: dict[str, Any]


def _empty_stats(code_chars: int = 0) -> dict[str, Any]:
    return {
        "n_brush_calls": 0,
        "n_fill_calls": 0,
        "n_shapes": 0,
        "brush_methods_used": [],
        "code_chars": code_chars,
    }


# --------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# Name tables used by the analysis
# --------------------------------------------------------------------------------------

_ALWAYS_ALLOWED_GLOBALS = frozenset(JS_SAFE_GLOBALS) | {"brush"}

# Precedence matters when a name sits in two tables (loadFont is text and network): the
# first match names the violation.
_FREE_NAME_CATEGORIES: tuple[tuple[str, frozenset[str]], ...] = (
    ("dynamic_code", frozenset(DYNAMIC_CODE_NAMES)),
    ("text_label", frozenset(P5_TEXT_FUNCTIONS)),
    ("external_access", frozenset(EXTERNAL_ACCESS_NAMES)),
    ("dom_access", frozenset(DOM_ACCESS_NAMES)),
    ("timer", frozenset(TIMER_NAMES)),
    ("storage", frozenset(STORAGE_NAMES)),
    ("bare_primitive", frozenset(P5_GLOBAL_NAMES)),
)

_SENSITIVE_CODES = frozenset({"dynamic_code", "external_access", "dom_access", "timer", "storage"})

_SENSITIVE_NAMES = frozenset(
    name
    for code, names in _FREE_NAME_CATEGORIES
    if code in _SENSITIVE_CODES
    for name in names
)

# Property names that are dangerous on *any* object and too specific to be a sketch's
# own property. Ambiguous names (parent, top, open, location, body, select, ...) are only
# checked where the object is known to be the global object, because a sketch may well
# have a tree node with a .parent or a flower with .open.
_DISTINCTIVE_MEMBER_NAMES: dict[str, str] = {
    **dict.fromkeys(
        (
            "constructor", "__proto__", "__defineGetter__", "__defineSetter__",
            "__lookupGetter__", "__lookupSetter__", "caller", "callee", "eval",
            "Function",
        ),
        "dynamic_code",
    ),
    **dict.fromkeys(
        (
            "globalThis", "fetch", "XMLHttpRequest", "WebSocket", "EventSource",
            "navigator", "sendBeacon", "RTCPeerConnection", "webkitRTCPeerConnection",
            "importScripts", "postMessage", "_renderer", "drawingContext", "loadImage",
            "loadJSON", "loadStrings", "loadTable", "loadXML", "loadBytes", "loadModel",
            "loadShader", "loadSound", "httpGet", "httpPost", "httpDo",
        ),
        "external_access",
    ),
    **dict.fromkeys(
        (
            "document", "createElement", "createElementNS", "querySelector",
            "querySelectorAll", "getElementById", "getElementsByTagName",
            "getElementsByClassName", "getElementsByName", "innerHTML", "outerHTML",
            "insertAdjacentHTML", "appendChild", "contentWindow", "contentDocument",
            "ownerDocument", "defaultView", "srcdoc",
        ),
        "dom_access",
    ),
    **dict.fromkeys(
        ("setTimeout", "setInterval", "requestAnimationFrame", "queueMicrotask", "requestIdleCallback"),
        "timer",
    ),
    **dict.fromkeys(("localStorage", "sessionStorage", "indexedDB", "cookieStore"), "storage"),
}

# Functions whose `this` is certainly the global object: p5 global mode calls these
# hooks as window.setup() and so on.
_GLOBAL_THIS_HOOKS = frozenset({"setup", "draw", "preload"})

_FUNCTION_NODE_TYPES = frozenset(
    {
        "function_declaration", "generator_function_declaration", "function_expression",
        "generator_function", "arrow_function", "method_definition",
    }
)
_BLOCK_SCOPE_NODE_TYPES = frozenset(
    {"statement_block", "for_statement", "for_in_statement", "catch_clause", "switch_body", "class"}
)
_FUNCTION_VALUE_TYPES = frozenset(
    {"function_expression", "generator_function", "arrow_function"}
)

_PHRASE_BY_CODE = {
    "dynamic_code": "runs or reaches dynamically built code",
    "external_access": "reaches outside the sketch",
    "dom_access": "touches the page DOM",
    "timer": "schedules code with a timer",
    "storage": "uses browser storage",
    "text_label": "draws or loads text",
    "bare_primitive": "is a p5 name outside the allowlist (paint with the allowed brush.* methods)",
    "unknown_global": "is neither declared in the sketch nor an allowed p5 or JavaScript name",
}


def _classify_free_name(name: str, allowed_p5_names: frozenset[str]) -> str | None:
    """Reason code for using a global name the sketch did not declare, or None if fine."""
    if name in allowed_p5_names or name in _ALWAYS_ALLOWED_GLOBALS:
        return None
    for code, names in _FREE_NAME_CATEGORIES:
        if name in names:
            return code
    return "unknown_global"


# --------------------------------------------------------------------------------------
# JavaScript literal helpers
# --------------------------------------------------------------------------------------

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


# Property names that lead from any object to a built-in prototype (`({}).__proto__`,
# `[].constructor.prototype`), whoever made the object they start from.
_BUILT_IN_PROTOTYPE_PATHS = frozenset({"__proto__", "constructor"})
# Object's methods that write to their first argument (Reflect is refused as a whole name).
_MUTATING_OBJECT_METHODS = frozenset({"defineProperty", "defineProperties", "assign", "setPrototypeOf"})
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


# --------------------------------------------------------------------------------------
# Scopes
# --------------------------------------------------------------------------------------

# How a value relates to the protected objects, as far as the gate can see.
_BRUSH = "brush"
_GLOBAL = "global object"
_DOCUMENT = "document"
_THIS_FUNCTION = "this (outside a class)"
_THIS_INSTANCE = "this (inside a class or object method)"
_OTHER = "other"
_GUARDED_KINDS = frozenset({_BRUSH, _GLOBAL, _DOCUMENT, _THIS_FUNCTION, _THIS_INSTANCE})

# What `this` is inside a scope.
_THIS_IS_GLOBAL = "global"
_THIS_IS_CALLER_CHOSEN = "function"
_THIS_IS_INSTANCE = "instance"


class _Binding:
    __slots__ = ("name", "kind", "value", "value_scope", "alias_of")

    def __init__(self, name: str, kind: str, value: Node | None, value_scope: "_Scope | None") -> None:
        self.name = name
        self.kind = kind
        self.value = value
        self.value_scope = value_scope
        self.alias_of: str | None = None


class _Scope:
    __slots__ = ("parent", "enclosing_function", "this_kind", "bindings")

    def __init__(self, parent: "_Scope | None", is_function_scope: bool, this_kind: str) -> None:
        self.parent = parent
        # Stored rather than searched for: hostile code can nest thousands of blocks.
        self.enclosing_function: _Scope = (
            self if is_function_scope or parent is None else parent.enclosing_function
        )
        self.this_kind = this_kind
        self.bindings: dict[str, _Binding] = {}

    def function_scope(self) -> "_Scope":
        return self.enclosing_function

    def resolve(self, name: str) -> _Binding | None:
        scope: _Scope | None = self
        while scope is not None:
            binding = scope.bindings.get(name)
            if binding is not None:
                return binding
            scope = scope.parent
        return None


def _pattern_identifiers(pattern: Node) -> list[Node]:
    """Identifier nodes a binding pattern declares (default values are not bindings)."""
    found: list[Node] = []
    pending = [pattern]
    while pending:
        node = pending.pop()
        kind = node.type
        if kind in ("identifier", "shorthand_property_identifier_pattern"):
            found.append(node)
        elif kind in ("object_pattern", "array_pattern", "rest_pattern", "formal_parameters"):
            pending.extend(_named_children(node))
        elif kind == "pair_pattern":
            value = node.child_by_field_name("value")
            if value is not None:
                pending.append(value)
        elif kind in ("assignment_pattern", "object_assignment_pattern"):
            left = node.child_by_field_name("left")
            if left is not None:
                pending.append(left)
    return found


def _pattern_keys(pattern: Node) -> list[tuple[Node, Node | None]]:
    """(key node, computed key expression) for the top level of an object pattern."""
    keys: list[tuple[Node, Node | None]] = []
    for child in _named_children(pattern):
        if child.type == "shorthand_property_identifier_pattern":
            keys.append((child, None))
        elif child.type == "object_assignment_pattern":
            left = child.child_by_field_name("left")
            if left is not None:
                keys.append((left, None))
        elif child.type == "pair_pattern":
            key = child.child_by_field_name("key")
            if key is None:
                continue
            if key.type == "computed_property_name":
                inner = _named_children(key)
                keys.append((key, inner[0] if inner else None))
            else:
                keys.append((key, None))
    return keys


# --------------------------------------------------------------------------------------
# The analysis
# --------------------------------------------------------------------------------------


@dataclass(order=True)
class _Finding:
    position: tuple[int, int]
    code: str
    message: str


class _SketchAnalyzer:
    """One pass collects scopes and uses; a second step judges the uses."""

    def __init__(self, code: str, contract: SketchContract) -> None:
        self.code = code
        self.contract = contract
        self.allowed_brush_methods = frozenset(contract.brush_methods)
        self.allowed_p5_names = frozenset(contract.p5_names)
        self.painting_methods = frozenset(PAINTING_BRUSH_METHODS) & self.allowed_brush_methods
        self.findings: list[_Finding] = []
        self.syntax_errors = 0

        # Tree-sitter's Node.parent walks down from the root each time, so relations the
        # judges need are recorded by node id while descending instead.
        self.binding_node_ids: set[int] = set()
        self.callee_ids: set[int] = set()
        self.member_object_ids: set[int] = set()
        self.pair_value_ids: set[int] = set()
        self.jsx_child_ids: set[int] = set()
        self.user_property_names: set[str] = set()
        self.reassigned_names: set[str] = set()
        self.implicitly_assigned: list[tuple[str, _Scope]] = []

        self.identifier_uses: list[tuple[Node, _Scope]] = []
        self.member_uses: list[tuple[Node, _Scope]] = []
        self.call_uses: list[tuple[Node, _Scope]] = []
        self.this_uses: list[tuple[Node, _Scope]] = []
        self.value_flows: list[tuple[Node, Node, _Scope]] = []  # (target, value, scope)
        # Objects the sketch writes to, deletes from or redefines: (object expression, scope, what).
        self.mutated_objects: list[tuple[Node, _Scope, str]] = []

        self.fold_memo: dict[int, str | list[str] | None] = {}
        self.kind_memo: dict[int, str] = {}
        self.fold_budget = _FOLD_BUDGET
        self.program: _Scope | None = None

        self.stats = _empty_stats(len(code))
        self.brush_methods_used: set[str] = set()
        self.n_painting_calls = 0
        self.has_webgl_canvas = False

    # -- findings ---------------------------------------------------------------------

    def report(self, node: Node | None, code: str, message: str) -> None:
        if node is None:
            position = (1 << 30, 0)
            text = message
        else:
            position = (node.start_point[0], node.start_point[1])
            text = f"line {_line(node)}: {message}"
        self.findings.append(_Finding(position, code, text))

    # -- pass 1: scopes, declarations and uses ----------------------------------------

    def collect(self, root: Node) -> _Scope:
        program = _Scope(None, True, _THIS_IS_GLOBAL)
        scopes = [program]
        pending: list[tuple[Node, _Scope]] = [(root, program)]
        while pending:
            node, scope = pending.pop()
            inner = self.enter(node, scope, program)
            if inner is not scope:
                scopes.append(inner)
            for child in reversed(node.children):
                pending.append((child, inner))
        # Lookups walk the parent chain; skipping scopes that declare nothing keeps that
        # walk short even for thousands of nested blocks. Parents come before children
        # in `scopes`, so each parent is already compressed when its children are.
        for scope in scopes[1:]:
            parent = scope.parent
            if parent is not None and parent is not program and not parent.bindings:
                scope.parent = parent.parent
        return program

    def enter(self, node: Node, scope: _Scope, program: _Scope) -> _Scope:
        """Record what `node` declares or uses; return the scope for its children."""
        kind = node.type
        if node.is_error or node.is_missing:
            self.syntax_errors += 1
            if self.syntax_errors <= MAX_SYNTAX_ERROR_DETAILS:
                self.report(self.syntax_error_anchor(node), "syntax_error", self.describe_syntax_error(node))
            return scope
        if not node.is_named:
            return scope  # keywords and punctuation
        if kind.startswith("jsx_"):
            if node.id not in self.jsx_child_ids:
                self.syntax_errors += 1
                self.report(node, "syntax_error", "HTML/JSX markup is not JavaScript")
            self.jsx_child_ids.update(child.id for child in node.children)
            return scope

        if kind == "identifier":
            if node.id not in self.binding_node_ids:
                self.identifier_uses.append((node, scope))
        elif kind in ("shorthand_property_identifier", "shorthand_property_identifier_pattern"):
            if kind == "shorthand_property_identifier":
                self.user_property_names.add(_identifier_name(node))
            if node.id not in self.binding_node_ids:
                self.identifier_uses.append((node, scope))
        elif kind == "this":
            self.this_uses.append((node, scope))
        elif kind in ("member_expression", "subscript_expression"):
            self.member_uses.append((node, scope))
            obj = node.child_by_field_name("object")
            if obj is not None:
                self.member_object_ids.add(obj.id)
        elif kind in ("call_expression", "new_expression"):
            self.call_uses.append((node, scope))
            callee = node.child_by_field_name("function" if kind == "call_expression" else "constructor")
            if callee is not None:
                self.callee_ids.add(callee.id)
                self.note_mutating_call(node, _unparenthesize(callee), scope)
        elif kind == "variable_declaration":
            self.declare_variables(node, scope.function_scope(), scope, "var", program)
        elif kind == "lexical_declaration":
            declaration_kind = node.child_by_field_name("kind")
            self.declare_variables(node, scope, scope, _node_text(declaration_kind) if declaration_kind else "let", program)
        elif kind in ("function_declaration", "generator_function_declaration"):
            return self.enter_function_declaration(node, scope, program)
        elif kind in _FUNCTION_NODE_TYPES:
            return self.enter_function(node, scope, program)
        elif kind == "class_declaration":
            name = node.child_by_field_name("name")
            if name is not None:
                self.declare(name, scope, "class", None, scope, program)
        elif kind in ("field_definition", "class_static_block"):
            prop = node.child_by_field_name("property")
            if prop is not None and prop.type == "property_identifier":
                self.user_property_names.add(_identifier_name(prop))
            return _Scope(scope, True, _THIS_IS_INSTANCE)
        elif kind in _BLOCK_SCOPE_NODE_TYPES:
            return self.enter_block(node, scope, program)
        elif kind == "pair":
            key = node.child_by_field_name("key")
            if key is not None:
                self.note_property_key(key)
            value = node.child_by_field_name("value")
            if value is not None:
                self.pair_value_ids.add(value.id)
        elif kind in ("assignment_expression", "augmented_assignment_expression"):
            self.note_assignment(node, scope)
        elif kind == "update_expression":
            argument = node.child_by_field_name("argument")
            if argument is not None and argument.type == "identifier":
                self.reassigned_names.add(_identifier_name(argument))
            elif argument is not None:
                self.note_mutated(argument, scope, "writes to")
        elif kind == "unary_expression" and getattr(node.child_by_field_name("operator"), "type", None) == "delete":
            argument = node.child_by_field_name("argument")
            if argument is not None:
                self.note_mutated(argument, scope, "deletes from")
        elif kind == "with_statement":
            self.report(node, "dynamic_code", "`with` makes every name lookup dynamic")
        elif kind == "import_statement":
            self.report(node, "external_access", "import loads code from outside the sketch")
            # The imported names are bindings; reporting each as unknown would be noise.
            for clause in _named_children(node):
                if clause.type == "import_clause":
                    for name in self.descendants_of_type(clause, "identifier"):
                        self.declare(name, program, "import", None, program, program)
        elif kind == "export_statement":
            self.syntax_errors += 1
            self.report(node, "syntax_error", "export is only valid in modules, not in a sketch")
        elif kind == "import":  # the callee of import(...)
            self.report(node, "dynamic_code", "import() loads and runs code at run time")
        return scope

    @staticmethod
    def syntax_error_anchor(node: Node) -> Node:
        # When recovery fails the ERROR node can start at the top of the file and wrap
        # complete functions; the break is where the first incomplete piece begins.
        for child in node.children:
            complete = child.type == "comment" or (
                child.is_named
                and not child.has_error
                and (child.type.endswith("_declaration") or child.type.endswith("_statement"))
            )
            if not complete:
                return child
        return node

    def describe_syntax_error(self, node: Node) -> str:
        if node.is_missing:
            return f"missing `{node.type}` (is the sketch truncated or unbalanced?)"
        end_line = node.end_point[0] + 1
        if not self.code.encode("utf-8")[node.end_byte:].strip():
            return f"the code from here to the end (line {end_line}) is incomplete; was the sketch cut off?"
        if end_line > _line(node):
            return f"unexpected code through line {end_line}"
        return "unexpected code"

    @staticmethod
    def descendants_of_type(node: Node, node_type: str) -> list[Node]:
        found: list[Node] = []
        pending = [node]
        while pending:
            current = pending.pop()
            if current.type == node_type:
                found.append(current)
            pending.extend(current.children)
        return found

    def declare(
        self, name_node: Node, target: _Scope, kind: str, value: Node | None,
        value_scope: _Scope, program: _Scope,
    ) -> None:
        self.binding_node_ids.add(name_node.id)
        name = _identifier_name(name_node)
        if name not in target.bindings or kind != "var":
            target.bindings[name] = _Binding(name, kind, value, value_scope)
        if target is program and kind in ("var", "function") and name in _SENSITIVE_NAMES:
            # Top-level var and function declarations become properties of the global
            # object, so `var location = ...` navigates and `var top` is the real window.
            code = _classify_free_name(name, frozenset())
            self.report(name_node, code or "external_access", f"top-level `{kind} {name}` writes to the browser global `{name}`")

    def declare_variables(
        self, declaration: Node, target: _Scope, site: _Scope, kind: str, program: _Scope
    ) -> None:
        for declarator in _named_children(declaration):
            if declarator.type != "variable_declarator":
                continue
            name = declarator.child_by_field_name("name")
            value = declarator.child_by_field_name("value")
            if name is None:
                continue
            if name.type == "identifier":
                self.declare(name, target, kind, value, site, program)
            else:
                for identifier in _pattern_identifiers(name):
                    self.declare(identifier, target, kind, None, site, program)
            if value is not None:
                self.value_flows.append((name, value, site))

    def this_kind_of_function(self, node: Node, scope: _Scope, name: str | None) -> str:
        if node.type == "arrow_function":
            return scope.this_kind
        if node.type == "method_definition":
            return _THIS_IS_INSTANCE
        if node.id in self.pair_value_ids:
            return _THIS_IS_INSTANCE  # object-literal method written as `key: function`
        if name in _GLOBAL_THIS_HOOKS and scope.parent is None:
            return _THIS_IS_GLOBAL
        return _THIS_IS_CALLER_CHOSEN

    def declare_parameters(self, node: Node, scope: _Scope, program: _Scope) -> None:
        parameters = node.child_by_field_name("parameters")
        if parameters is None:
            parameters = node.child_by_field_name("parameter")
        if parameters is None:
            return
        for identifier in _pattern_identifiers(parameters):
            self.declare(identifier, scope, "param", None, scope, program)

    def enter_function_declaration(self, node: Node, scope: _Scope, program: _Scope) -> _Scope:
        name_node = node.child_by_field_name("name")
        name = _identifier_name(name_node) if name_node is not None else None
        if name_node is not None:
            self.declare(name_node, scope, "function", node, scope, program)
            # Sloppy-mode scripts also hoist block-level functions to the function scope.
            function_scope = scope.function_scope()
            if function_scope is not scope and name not in function_scope.bindings:
                self.declare(name_node, function_scope, "function", node, scope, program)
        inner = _Scope(scope, True, self.this_kind_of_function(node, scope, name))
        self.declare_parameters(node, inner, program)
        return inner

    def enter_function(self, node: Node, scope: _Scope, program: _Scope) -> _Scope:
        name_node = node.child_by_field_name("name") if node.type != "method_definition" else None
        inner = _Scope(scope, True, self.this_kind_of_function(node, scope, None))
        if node.type == "method_definition":
            method_name = node.child_by_field_name("name")
            if method_name is not None:
                self.note_property_key(method_name)
        if name_node is not None and name_node.type == "identifier":
            self.declare(name_node, inner, "function", node, inner, program)
        self.declare_parameters(node, inner, program)
        return inner

    def enter_block(self, node: Node, scope: _Scope, program: _Scope) -> _Scope:
        inner = _Scope(scope, False, scope.this_kind)
        if node.type == "class":
            name = node.child_by_field_name("name")
            if name is not None:
                self.declare(name, inner, "class", None, inner, program)
        elif node.type == "catch_clause":
            parameter = node.child_by_field_name("parameter")
            if parameter is not None:
                for identifier in _pattern_identifiers(parameter):
                    self.declare(identifier, inner, "catch", None, inner, program)
        elif node.type == "for_in_statement":
            left = node.child_by_field_name("left")
            declaration_kind = node.child_by_field_name("kind")
            if left is not None and declaration_kind is not None:
                kind = _node_text(declaration_kind)
                target = scope.function_scope() if kind == "var" else inner
                for identifier in _pattern_identifiers(left):
                    self.declare(identifier, target, kind, None, inner, program)
                right = node.child_by_field_name("right")
                if right is not None and left.type == "object_pattern":
                    self.value_flows.append((left, right, inner))
            elif left is not None:
                self.note_written_target(left, scope, plain=True)
        return inner

    def note_property_key(self, key: Node) -> None:
        if key.type in ("property_identifier", "identifier"):
            self.user_property_names.add(_identifier_name(key))
        elif key.type == "string":
            value = _string_literal_value(key)
            if value:
                self.user_property_names.add(value)

    def note_written_target(self, target: Node, scope: _Scope, plain: bool) -> None:
        target = _unparenthesize(target)
        if target.type == "identifier":
            name = _identifier_name(target)
            self.reassigned_names.add(name)
            if plain:
                self.implicitly_assigned.append((name, scope))
        elif target.type in _MEMBER_TYPES:
            prop = target.child_by_field_name("property")
            if prop is not None:
                self.user_property_names.add(_identifier_name(prop))
            self.note_mutated(target, scope, "writes to")
        elif target.type in ("object_pattern", "array_pattern"):
            for identifier in _pattern_identifiers(target):
                if identifier.type == "identifier":
                    self.reassigned_names.add(_identifier_name(identifier))
                    if plain:
                        self.implicitly_assigned.append((_identifier_name(identifier), scope))

    def note_mutated(self, target: Node, scope: _Scope, what: str) -> None:
        """Remember a member expression the sketch writes to or deletes (judged in pass 2)."""
        target = _unparenthesize(target)
        if target.type in _MEMBER_TYPES:
            self.mutated_objects.append((target, scope, what))

    def note_mutating_call(self, call: Node, callee: Node, scope: _Scope) -> None:
        """``Object.defineProperty(target, ...)`` and its kin write to ``target``."""
        if callee.type != "member_expression":
            return
        obj, prop = callee.child_by_field_name("object"), callee.child_by_field_name("property")
        if obj is None or prop is None or obj.type != "identifier" or _identifier_name(obj) != "Object":
            return
        arguments = call.child_by_field_name("arguments")
        if _identifier_name(prop) in _MUTATING_OBJECT_METHODS and arguments is not None and _named_children(arguments):
            self.mutated_objects.append((_named_children(arguments)[0], scope, "redefines"))

    def note_assignment(self, node: Node, scope: _Scope) -> None:
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        if left is None:
            return
        plain = node.type == "assignment_expression"
        self.note_written_target(left, scope, plain)
        if plain and right is not None:
            self.value_flows.append((_unparenthesize(left), right, scope))

    # -- between passes: implicit globals and aliases ----------------------------------

    def settle_bindings(self, program: _Scope) -> None:
        # Sloppy scripts create a global on plain assignment (`for (i = 0; ...)`). Only
        # names unknown to every table qualify, so assigning `line = 0` cannot launder a
        # later bare `line(...)` call.
        for name, scope in self.implicitly_assigned:
            if scope.resolve(name) is None and _classify_free_name(name, self.allowed_p5_names) == "unknown_global":
                program.bindings[name] = _Binding(name, "implicit", None, None)
        # `const b = brush` or `const w = this` make b and w stand for the protected
        # object; chains (`const c = b`) need a few rounds to settle.
        for _ in range(8):
            changed = False
            self.kind_memo.clear()  # aliases found in the last round change object kinds
            for target, value, scope in self.value_flows:
                if target.type != "identifier":
                    continue
                binding = scope.resolve(_identifier_name(target))
                if binding is None:
                    continue
                kind = self.object_kind(value, scope)
                if kind in _GUARDED_KINDS and binding.alias_of != kind:
                    binding.alias_of = kind
                    changed = True
            if not changed:
                break
        self.kind_memo.clear()

    # -- constant folding for computed keys ---------------------------------------------

    def fold(self, node: Node, scope: _Scope, depth: int = 0) -> str | list[str] | None:
        """Value of a string-building expression made only of constants, else None."""
        # A node's scope is fixed by where it sits, so its value can be cached by node:
        # without this, `a1 = a0 + a0; a2 = a1 + a1; ...` would take exponential time.
        if node.id in self.fold_memo:
            return self.fold_memo[node.id]
        if depth > _MAX_FOLD_DEPTH or self.fold_budget <= 0:
            return None
        self.fold_budget -= 1
        value = self.fold_uncached(node, scope, depth)
        self.fold_memo[node.id] = value
        return value

    def fold_uncached(self, node: Node, scope: _Scope, depth: int) -> str | list[str] | None:
        node = _unparenthesize(node)
        kind = node.type
        value: str | list[str] | None = None
        if kind == "string":
            value = _string_literal_value(node)
        elif kind == "number":
            value = _node_text(node)
        elif kind == "template_string":
            parts: list[str] = []
            for child in node.children:
                if child.type in _LITERAL_PARTS:
                    part = _literal_part(child)
                    if part is None:
                        return None
                    parts.append(part)
                elif child.type == "template_substitution":
                    inner = _named_children(child)
                    folded = self.fold(inner[0], scope, depth + 1) if len(inner) == 1 else None
                    if not isinstance(folded, str):
                        return None
                    parts.append(folded)
            value = "".join(parts)
        elif kind == "binary_expression":
            value = self.fold_concatenation(node, scope, depth)
        elif kind == "array":
            items: list[str] = []
            for element in _named_children(node):
                folded = self.fold(element, scope, depth + 1)
                if not isinstance(folded, str):
                    return None
                items.append(folded)
            value = items
        elif kind == "identifier":
            binding = scope.resolve(_identifier_name(node))
            if (
                binding is not None
                and binding.value is not None
                and binding.value_scope is not None
                and binding.kind in ("const", "let", "var")
                and (binding.kind == "const" or binding.name not in self.reassigned_names)
            ):
                value = self.fold(binding.value, binding.value_scope, depth + 1)
        elif kind == "call_expression":
            value = self.fold_call(node, scope, depth)
        if isinstance(value, str) and len(value) > _MAX_FOLDED_LENGTH:
            return None
        if isinstance(value, list) and sum(len(item) for item in value) > _MAX_FOLDED_LENGTH:
            return None
        return value

    def fold_concatenation(self, node: Node, scope: _Scope, depth: int) -> str | None:
        operator = node.child_by_field_name("operator")
        if operator is None or _node_text(operator) != "+":
            return None
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        if left is None or right is None:
            return None
        left_value = self.fold(left, scope, depth + 1)
        if not isinstance(left_value, str):
            return None
        right_value = self.fold(right, scope, depth + 1)
        if not isinstance(right_value, str):
            return None
        if _unparenthesize(left).type == "number" and _unparenthesize(right).type == "number":
            return None  # numeric addition, not a key being spelled out
        return left_value + right_value

    def fold_call(self, node: Node, scope: _Scope, depth: int) -> str | list[str] | None:
        callee = node.child_by_field_name("function")
        arguments = node.child_by_field_name("arguments")
        if callee is None or arguments is None or arguments.type != "arguments":
            return None
        argument_nodes = _named_children(arguments)
        callee = _unparenthesize(callee)
        if callee.type == "identifier" and _identifier_name(callee) == "atob" and len(argument_nodes) == 1:
            encoded = self.fold(argument_nodes[0], scope, depth + 1)
            if not isinstance(encoded, str):
                return None
            try:
                return base64.b64decode(encoded, validate=False).decode("latin-1")
            except (binascii.Error, ValueError):
                return None
        if callee.type != "member_expression":
            return None
        receiver = callee.child_by_field_name("object")
        method = callee.child_by_field_name("property")
        if receiver is None or method is None:
            return None
        method_name = _identifier_name(method)
        if method_name == "fromCharCode" and receiver.type == "identifier" and _identifier_name(receiver) == "String":
            characters: list[str] = []
            for argument in argument_nodes:
                folded = self.fold(argument, scope, depth + 1)
                if not isinstance(folded, str):
                    return None
                try:
                    character = _code_point(int(folded, 0) if folded.lower().startswith("0x") else int(folded))
                except ValueError:
                    return None
                if character is None:
                    return None
                characters.append(character)
            return "".join(characters)
        target = self.fold(receiver, scope, depth + 1)
        if target is None:
            return None
        folded_arguments = [self.fold(argument, scope, depth + 1) for argument in argument_nodes]
        if method_name == "join" and isinstance(target, list):
            separator = folded_arguments[0] if folded_arguments else ","
            return separator.join(target) if isinstance(separator, str) else None
        if method_name == "split" and isinstance(target, str) and len(folded_arguments) == 1:
            separator = folded_arguments[0]
            if not isinstance(separator, str):
                return None
            return list(target) if separator == "" else target.split(separator)
        if method_name == "reverse" and isinstance(target, list) and not folded_arguments:
            return target[::-1]
        if method_name == "concat" and all(isinstance(item, str) for item in folded_arguments):
            if isinstance(target, str):
                return target + "".join(folded_arguments)  # type: ignore[arg-type]
            return target + list(folded_arguments)  # type: ignore[arg-type]
        if isinstance(target, str) and not folded_arguments:
            if method_name == "toLowerCase":
                return target.lower()
            if method_name == "toUpperCase":
                return target.upper()
            if method_name == "trim":
                return target.strip()
            if method_name == "toString":
                return target
        return None

    # -- what a value refers to ------------------------------------------------------

    def object_kind(self, node: Node, scope: _Scope) -> str:
        """Which protected object (if any) an expression evaluates to."""
        # Walk down a member chain (window.document.defaultView...) to its base, then back
        # out one property at a time. Results are cached per node so that every link of
        # a long chain is judged in linear total time.
        chain: list[tuple[Node, str | None]] = []
        current = node
        while True:
            current = _unparenthesize(current)
            cached = self.kind_memo.get(current.id)
            if cached is not None:
                kind = cached
                break
            obj = current.child_by_field_name("object")
            if current.type == "member_expression":
                prop = current.child_by_field_name("property")
                name = _identifier_name(prop) if prop is not None else None
            elif current.type == "subscript_expression":
                index = current.child_by_field_name("index")
                folded = self.fold(index, scope) if index is not None else None
                name = folded if isinstance(folded, str) else None
            else:
                kind = self.base_kind(current, scope)
                break
            chain.append((current, name))
            if obj is None or name is None:
                kind = _OTHER
                chain[-1] = (current, None)
                break
            current = obj
        for link, name in reversed(chain):
            kind = _OTHER if name is None else self.property_kind(kind, name)
            self.kind_memo[link.id] = kind
        return kind

    @staticmethod
    def property_kind(kind: str, name: str) -> str:
        if kind in (_GLOBAL, _THIS_FUNCTION):
            if name in GLOBAL_OBJECT_NAMES:
                return _GLOBAL
            if name == "document":
                return _DOCUMENT
            if name == "brush":
                return _BRUSH
        if kind == _DOCUMENT and name == "defaultView":
            return _GLOBAL
        return _OTHER

    def base_kind(self, node: Node, scope: _Scope) -> str:
        if node.type == "this":
            return _THIS_INSTANCE if scope.this_kind == _THIS_IS_INSTANCE else _THIS_FUNCTION
        if node.type != "identifier":
            return _OTHER
        name = _identifier_name(node)
        binding = scope.resolve(name)
        if name == "brush" and (binding is None or binding.alias_of is None):
            # Always hold brush.* to the allowlist, even if a parameter happens to be
            # called brush: it is almost certainly the real one passed in.
            return _BRUSH
        if binding is not None:
            return binding.alias_of or _OTHER
        if name in GLOBAL_OBJECT_NAMES:
            return _GLOBAL
        if name == "document":
            return _DOCUMENT
        return _OTHER

    # -- pass 2: judge the uses ----------------------------------------------------------

    def judge_identifiers(self) -> None:
        for node, scope in self.identifier_uses:
            name = _identifier_name(node)
            if scope.resolve(name) is not None:
                continue
            code = _classify_free_name(name, self.allowed_p5_names)
            if code is None:
                continue
            if code == "unknown_global" and self.syntax_errors:
                continue  # declarations may be lost in a broken tree; syntax_error says enough
            call_suffix = "()" if node.id in self.callee_ids else ""
            self.report(node, code, f"`{name}{call_suffix}` {_PHRASE_BY_CODE[code]}")

    def judge_mutations(self) -> None:
        """Writing to, deleting from or redefining anything the sketch did not create.

        At run time lockdown() has frozen every built-in, so such a write throws; a sketch that
        catches the error would otherwise leave no trace. Judged here from the code instead:
        the target's chain starts at a name the sketch never declared (a JavaScript or p5
        global, brush), at an alias of a guarded object, or goes through a prototype.
        """
        for node, scope, what in self.mutated_objects:
            root, names = _member_chain(node)
            origin = self.origin_of(root, scope)
            if origin == "reported":
                continue
            if names & _BUILT_IN_PROTOTYPE_PATHS:
                built_in = "a built-in prototype (through __proto__ or constructor)"
            elif "prototype" in names and origin != "own function":
                built_in = "a prototype the sketch did not create"
            elif origin == "built-in":
                built_in = f"`{_node_text(root)}`, which the sketch did not create"
            else:
                continue
            self.report(node, "dynamic_code", f"{what} {built_in}: patching built-ins is not allowed")

    def origin_of(self, root: Node | None, scope: _Scope, depth: int = 0) -> str:
        """Who made the object at the root of a written chain: "built-in" (a JavaScript or p5
        global the sketch never declared, brush, an alias of one), "reported" (a name with its
        own reason code), "own function" (a function or class the sketch declared) or "own"."""
        if root is None or depth > 8:
            return "own"
        # The global object, the page and names like `location` have their own reason codes
        # (external_access, dom_access, ...), reported where they are used: "reported".
        if root.type == "this":
            return "reported" if scope.this_kind == _THIS_IS_GLOBAL else "own"
        if root.type != "identifier":
            return "own function" if root.type in _FUNCTION_NODE_TYPES or root.type == "class" else "own"
        name = _identifier_name(root)
        binding = scope.resolve(name)
        if binding is None:
            return "built-in" if _classify_free_name(name, self.allowed_p5_names) is None else "reported"
        if binding.alias_of == _BRUSH:
            return "built-in"
        if binding.alias_of in _GUARDED_KINDS:
            return "reported"
        if binding.kind in ("function", "class"):
            return "own function"
        value = _unparenthesize(binding.value) if binding.value is not None else None
        if value is not None and value.type in ("identifier", "this", *_MEMBER_TYPES) and binding.value_scope is not None:
            inner, _ = _member_chain(value)
            return self.origin_of(inner, binding.value_scope, depth + 1)
        if value is not None and (value.type in _FUNCTION_NODE_TYPES or value.type == "class"):
            return "own function"
        return "own"

    def judge_this_values(self) -> None:
        for node, scope in self.this_uses:
            if node.id in self.member_object_ids:
                continue  # this.name is judged as a member access
            if scope.this_kind == _THIS_IS_GLOBAL:
                self.report(node, "external_access", "`this` here is the global object; it may only be used as `this.name`")

    def judge_members(self) -> None:
        for node, scope in self.member_uses:
            obj = node.child_by_field_name("object")
            if obj is None:
                continue
            kind = self.object_kind(obj, scope)
            label = self.object_label(obj, kind)
            if node.type == "member_expression":
                prop = node.child_by_field_name("property")
                if prop is None or prop.type == "private_property_identifier":
                    continue
                self.judge_member_name(node, _identifier_name(prop), kind, label, scope)
                continue
            index = node.child_by_field_name("index")
            if index is None:
                continue
            folded = self.fold(index, scope)
            if not isinstance(folded, str):
                if kind in _GUARDED_KINDS:
                    self.report(node, "dynamic_code", f"{label}[...] with a computed key")
                continue
            if kind in _GUARDED_KINDS and not _is_literal_key(_unparenthesize(index)):
                self.report(node, "dynamic_code", f"{label}[...] spells out the key {folded!r} at run time")
            self.judge_member_name(node, folded, kind, label, scope)

    @staticmethod
    def object_label(obj: Node, kind: str) -> str:
        obj = _unparenthesize(obj)
        if obj.end_byte - obj.start_byte <= 120:  # only short expressions make a readable label
            text = " ".join(_node_text(obj).split())
            if len(text) <= 40:
                return text
        return {_BRUSH: "brush", _GLOBAL: "window", _DOCUMENT: "document"}.get(kind, "(...)")

    def judge_member_name(self, node: Node, name: str, kind: str, label: str, scope: _Scope) -> None:
        distinctive = _DISTINCTIVE_MEMBER_NAMES.get(name)
        if distinctive is not None:
            self.report(node, distinctive, f"{label}.{name} {_PHRASE_BY_CODE[distinctive]}")
        if kind == _BRUSH:
            self.judge_brush_method(node, name)
        elif kind == _GLOBAL and distinctive is None:
            code = _classify_free_name(name, self.allowed_p5_names)
            if code is not None and code != "unknown_global":
                self.report(node, code, f"{label}.{name} {_PHRASE_BY_CODE[code]}")
        elif kind == _DOCUMENT and distinctive is None:
            # `document` itself is already reported; only a different kind of harm adds news.
            code = _classify_free_name(name, self.allowed_p5_names)
            if code in ("storage", "external_access", "dynamic_code", "timer"):
                self.report(node, code, f"{label}.{name} {_PHRASE_BY_CODE[code]}")
        elif kind in (_THIS_FUNCTION, _THIS_INSTANCE) and distinctive is None:
            if name in self.user_property_names or (self.program is not None and name in self.program.bindings):
                return
            code = _classify_free_name(name, self.allowed_p5_names)
            if code is None or (code == "unknown_global" and (kind == _THIS_INSTANCE or self.syntax_errors)):
                return
            self.report(node, code, f"{label}.{name} {_PHRASE_BY_CODE[code]}")

    def judge_brush_method(self, node: Node, name: str) -> None:
        self.brush_methods_used.add(name)
        if name in self.allowed_brush_methods:
            return
        if name in KNOWN_BRUSH_METHODS:
            self.report(node, "brush_method_not_allowed", f"brush.{name} is not in the allowlist")
        else:
            self.report(node, "unknown_brush_method", f"brush.{name} is not a p5.brush method")

    def judge_destructuring(self) -> None:
        # `const {fetch} = this` reads properties just like this.fetch does.
        for target, value, scope in self.value_flows:
            if target.type != "object_pattern":
                continue
            kind = self.object_kind(value, scope)
            if kind not in _GUARDED_KINDS:
                continue
            label = self.object_label(value, kind)
            for key, computed in _pattern_keys(target):
                if computed is not None:
                    folded = self.fold(computed, scope)
                    if not isinstance(folded, str):
                        self.report(key, "dynamic_code", f"destructures {label} with a computed key")
                        continue
                    self.report(key, "dynamic_code", f"destructures {label} with the computed key {folded!r}")
                    name = folded
                elif key.type == "string":
                    name = _string_literal_value(key) or ""
                else:
                    name = _identifier_name(key)
                self.judge_member_name(key, name, kind, label, scope)

    def judge_calls(self) -> None:
        for node, scope in self.call_uses:
            callee = node.child_by_field_name("function" if node.type == "call_expression" else "constructor")
            if callee is None:
                continue
            callee = _unparenthesize(callee)
            arguments_node = node.child_by_field_name("arguments")
            arguments = (
                _named_children(arguments_node)
                if arguments_node is not None and arguments_node.type == "arguments"
                else []
            )
            callee_name = self.callee_name(callee, scope)
            if callee_name in ("setTimeout", "setInterval") and arguments and arguments[0].type in ("string", "template_string"):
                self.report(node, "dynamic_code", f"{callee_name} with a string runs that string as code")
            if callee_name == "createCanvas" and callee.type == "identifier" and node.type == "call_expression":
                self.note_canvas(node, arguments, scope)
            if callee.type in ("member_expression", "subscript_expression") and node.type == "call_expression":
                obj = callee.child_by_field_name("object")
                if obj is not None and self.object_kind(obj, scope) == _BRUSH:
                    self.count_brush_call(callee, scope)

    def callee_name(self, callee: Node, scope: _Scope) -> str | None:
        if callee.type == "identifier":
            name = _identifier_name(callee)
            return name if scope.resolve(name) is None else None
        if callee.type == "member_expression":
            obj = callee.child_by_field_name("object")
            prop = callee.child_by_field_name("property")
            if obj is not None and prop is not None and self.object_kind(obj, scope) in (_GLOBAL, _THIS_FUNCTION):
                return _identifier_name(prop)
        return None

    def note_canvas(self, node: Node, arguments: list[Node], scope: _Scope) -> None:
        # Literal sizes are checked here for early feedback; the run-time layer checks every
        # createCanvas call whatever its arguments.
        side = self.contract.max_canvas_side
        for size in arguments[:2]:
            size = _unparenthesize(size)
            try:
                value = float(_node_text(size).replace("_", "")) if size.type == "number" else None
            except ValueError:
                value = None
            if value is not None and value > side:
                self.report(node, "canvas_too_large", f"createCanvas asks for {value:g} pixels; at most {side} per side")
                break
        if len(arguments) >= 3:
            renderer = _unparenthesize(arguments[2])
            if renderer.type == "identifier" and _identifier_name(renderer) == "WEBGL" and scope.resolve("WEBGL") is None:
                self.has_webgl_canvas = True
                return
            if self.fold(renderer, scope) == "webgl":
                self.has_webgl_canvas = True
                return
        self.report(node, "not_webgl", "createCanvas(...) must pass WEBGL as its third argument")

    def count_brush_call(self, callee: Node, scope: _Scope) -> None:
        if callee.type == "member_expression":
            prop = callee.child_by_field_name("property")
            method = _identifier_name(prop) if prop is not None else None
        else:
            index = callee.child_by_field_name("index")
            folded = self.fold(index, scope) if index is not None else None
            method = folded if isinstance(folded, str) else None
        self.stats["n_brush_calls"] += 1
        if method == "fill":
            self.stats["n_fill_calls"] += 1
        if method in ("endShape", "circle"):
            self.stats["n_shapes"] += 1
        if method in self.painting_methods:
            self.n_painting_calls += 1

    def judge_structure(self, program: _Scope) -> None:
        if self.syntax_errors:
            return  # a truncated sketch misses parts as a consequence; syntax_error covers it
        setup = program.bindings.get("setup")
        defines_setup = setup is not None and (
            setup.kind in ("function", "implicit")  # `function setup` or `setup = ...`
            or (setup.value is not None and _unparenthesize(setup.value).type in _FUNCTION_VALUE_TYPES)
            # `let setup;` declared first and assigned later
            or (setup.value is None and setup.kind in ("var", "let") and "setup" in self.reassigned_names)
        )
        if not defines_setup:
            self.report(None, "missing_setup", "the sketch does not define setup()")
        if not self.has_webgl_canvas and not any(f.code == "not_webgl" for f in self.findings):
            self.report(None, "not_webgl", "the sketch never calls createCanvas(width, height, WEBGL)")
        if self.n_painting_calls == 0:
            methods = " or ".join(f"brush.{name}" for name in sorted(self.painting_methods)) or "a painting brush method"
            self.report(None, "no_painting_calls", f"the sketch never calls {methods}")

    # -- driver --------------------------------------------------------------------------

    def run(self) -> None:
        parser = Parser(_JAVASCRIPT)
        tree = parser.parse(self.code.encode("utf-8"))
        program = self.collect(tree.root_node)
        self.program = program
        self.settle_bindings(program)
        self.judge_identifiers()
        self.judge_this_values()
        self.judge_members()
        self.judge_mutations()
        self.judge_destructuring()
        self.judge_calls()
        self.judge_structure(program)
        self.stats["brush_methods_used"] = sorted(self.brush_methods_used)


def _unique(codes: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(codes))


def static_gate(reply: str | bytes, contract: SketchContract = SketchContract()) -> GateVerdict:
    """Extract the sketch from a model reply and check it against the contract.

    Never raises on any str or bytes reply; ``passed`` is True exactly when
    ``violations`` is empty.
    """
    if contract is None:
        contract = SketchContract()
    extracted = extract_sketch(reply, contract)
    if extracted.code is None:
        details = extracted.details or [REASON_CODES[code] for code in extracted.violations]
        return GateVerdict(False, None, _unique(extracted.violations), details, _empty_stats())
    analyzer = _SketchAnalyzer(extracted.code, contract)
    analyzer.run()
    findings = sorted(analyzer.findings)
    violations = _unique(finding.code for finding in findings)
    details = list(dict.fromkeys(finding.message for finding in findings))
    if len(details) > MAX_DETAILS:
        omitted = len(details) - MAX_DETAILS
        details = details[:MAX_DETAILS] + [f"... {omitted} more findings omitted"]
    return GateVerdict(not violations, extracted.code, violations, details, analyzer.stats)
