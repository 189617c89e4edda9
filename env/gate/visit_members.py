"""Pass 2's checks on names and member access (``_MemberChecks``): free names, ``this``,
``obj.name`` and ``obj[key]`` on guarded objects, destructuring, and writes to built-ins."""

from __future__ import annotations

from tree_sitter import Node

from env.contract import KNOWN_BRUSH_METHODS
from env.gate.literals import (
    _MEMBER_TYPES,
    _identifier_name,
    _is_literal_key,
    _member_chain,
    _node_text,
    _string_literal_value,
    _unparenthesize,
)
from env.gate.names import (
    _BUILT_IN_PROTOTYPE_PATHS,
    _DISTINCTIVE_MEMBER_NAMES,
    _PHRASE_BY_CODE,
    _classify_free_name,
)
from env.gate.scopes import (
    _BRUSH,
    _DOCUMENT,
    _FUNCTION_NODE_TYPES,
    _GLOBAL,
    _GUARDED_KINDS,
    _THIS_FUNCTION,
    _THIS_INSTANCE,
    _THIS_IS_GLOBAL,
    _Scope,
    _pattern_keys,
)
from env.gate.visit_values import _ValueReading


class _MemberChecks(_ValueReading):
    """Judges ``identifier_uses``, ``this_uses``, ``member_uses``, ``mutated_objects`` and the
    destructuring ``value_flows`` recorded in pass 1."""

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
