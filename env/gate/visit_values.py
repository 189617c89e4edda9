"""What an expression's value is (``_ValueReading``): constant folding of string-building
expressions for computed keys, and which protected object (brush, window, document) it refers to."""

from __future__ import annotations

import base64
import binascii

from tree_sitter import Node

from env.contract import GLOBAL_OBJECT_NAMES
from env.gate.literals import (
    _LITERAL_PARTS,
    _MAX_FOLD_DEPTH,
    _MAX_FOLDED_LENGTH,
    _code_point,
    _identifier_name,
    _literal_part,
    _named_children,
    _node_text,
    _string_literal_value,
    _unparenthesize,
)
from env.gate.scopes import (
    _BRUSH,
    _DOCUMENT,
    _GLOBAL,
    _OTHER,
    _THIS_FUNCTION,
    _THIS_INSTANCE,
    _THIS_IS_INSTANCE,
    _Scope,
)
from env.gate.visit_state import _AnalyzerState


class _ValueReading(_AnalyzerState):
    """``fold`` and ``object_kind``, which both passes and every check build on."""

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
