"""Lexical scopes: what kind of protected object a value is, what ``this`` is inside a scope,
which syntax nodes open a scope, bindings, and the names a binding pattern declares.
"""

from __future__ import annotations

from tree_sitter import Node

from env.gate.literals import _named_children

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
