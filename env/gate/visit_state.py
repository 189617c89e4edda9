"""State shared by the analyzer's mixins (``_AnalyzerState``: what ``__init__`` sets up)
and the findings they report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tree_sitter import Node

from env.contract import PAINTING_BRUSH_METHODS, SketchContract
from env.gate.literals import _FOLD_BUDGET, _line
from env.gate.scopes import _Scope


def _empty_stats(code_chars: int = 0) -> dict[str, Any]:
    return {
        "n_brush_calls": 0,
        "n_fill_calls": 0,
        "n_shapes": 0,
        "brush_methods_used": [],
        "code_chars": code_chars,
    }


@dataclass(order=True)
class _Finding:
    position: tuple[int, int]
    code: str
    message: str


class _AnalyzerState:
    """The attributes every mixin of ``_SketchAnalyzer`` reads and writes, set up once here.

    Pass 1 (``_TreeWalk``, ``_ScopeTracking``) fills the node-id sets, the name sets and the
    use lists; ``_ValueReading`` keeps the fold and kind memos; pass 2 (``_MemberChecks``,
    ``_CallChecks``) reads those and fills ``findings`` (through ``report``) and ``stats``.
    """

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
