"""Pass 2's checks on calls and on the sketch as a whole (``_CallChecks``): string timers,
createCanvas size and renderer, brush call counts, and setup, WEBGL and painting being present."""

from __future__ import annotations

from tree_sitter import Node

from env.gate.literals import _identifier_name, _named_children, _node_text, _unparenthesize
from env.gate.scopes import _BRUSH, _FUNCTION_VALUE_TYPES, _GLOBAL, _THIS_FUNCTION, _Scope
from env.gate.visit_values import _ValueReading


class _CallChecks(_ValueReading):
    """Judges ``call_uses`` and counts brush calls into ``stats``; ``judge_structure`` runs last."""

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
