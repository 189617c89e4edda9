"""Pass 1's walk (``_TreeWalk``): visit every node once, dispatch it to the scope and
use bookkeeping, and report syntax errors, JSX, ``with``, import and export on the way."""

from __future__ import annotations

from tree_sitter import Node

from env.gate.literals import (
    _identifier_name,
    _line,
    _named_children,
    _node_text,
    _unparenthesize,
)
from env.gate.scopes import (
    _BLOCK_SCOPE_NODE_TYPES,
    _FUNCTION_NODE_TYPES,
    _THIS_IS_GLOBAL,
    _THIS_IS_INSTANCE,
    _Scope,
)
from env.gate.visit_scopes import _ScopeTracking

# A truncated reply often produces a cascade of parse errors; the first few locate it.
MAX_SYNTAX_ERROR_DETAILS = 3


class _TreeWalk(_ScopeTracking):
    """Walks the tree with a scope per node; declarations go to ``_ScopeTracking``."""

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
