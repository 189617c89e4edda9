"""Scope and binding tracking (``_ScopeTracking``): declarations, function, class and block
scopes, what the sketch writes to, and the implicit globals and aliases settled between passes."""

from __future__ import annotations

from tree_sitter import Node

from env.gate.literals import (
    _MEMBER_TYPES,
    _identifier_name,
    _named_children,
    _node_text,
    _string_literal_value,
    _unparenthesize,
)
from env.gate.names import _MUTATING_OBJECT_METHODS, _classify_free_name
from env.gate.scopes import (
    _GLOBAL_THIS_HOOKS,
    _GUARDED_KINDS,
    _THIS_IS_CALLER_CHOSEN,
    _THIS_IS_GLOBAL,
    _THIS_IS_INSTANCE,
    _Binding,
    _Scope,
    _pattern_identifiers,
)
from env.gate.visit_values import _ValueReading


# Top-level declarations the gate still names (see _ScopeTracking.declare).
_NAVIGATING_NAMES = frozenset({"location"})


class _ScopeTracking(_ValueReading):
    """Declares names in the right scope and records writes; aliases are settled with
    ``object_kind`` from ``_ValueReading``."""

    def declare(
        self, name_node: Node, target: _Scope, kind: str, value: Node | None,
        value_scope: _Scope, program: _Scope,
    ) -> None:
        self.binding_node_ids.add(name_node.id)
        name = _identifier_name(name_node)
        if name not in target.bindings or kind != "var":
            target.bindings[name] = _Binding(name, kind, value, value_scope)
        if target is program and kind in ("var", "function") and name in _NAVIGATING_NAMES:
            # In a plain script a top-level var or function becomes a property of window. The
            # sketch runs as the body of a function in a Compartment (env/page/runtime.js), so
            # its top-level declarations are its own locals and reach nothing: helpers named
            # `select`, `open`, `top` or `fetch` are accepted. `var location = url` is still
            # named: it is how a script navigates, never a helper name an honest sketch picks.
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
