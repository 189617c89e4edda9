"""Static gate: extract the sketch from a model reply and check it before anything runs.

The reply is hostile input. The gate never executes it; it parses the JavaScript and
walks the syntax tree with real lexical scoping, so that a sketch may call its own
helper named ``line`` while a bare ``line(...)`` that resolves to p5 is rejected.
Whatever the static view cannot decide (values built at run time, aliases hidden in
data structures) is left to the run-time layer, which enforces the same contract in
the browser; the gate aims to be precise on legitimate code and to catch every
statically visible escape.

Modules: ``extract`` finds the sketch in the reply, ``names`` holds the name tables,
``literals`` decodes literals and wraps syntax nodes, ``scopes`` models bindings and
scopes, and ``analysis`` walks the tree and gives the verdict. The analyzer is composed
of mixins, one concern each: ``visit_state`` (shared state, findings), ``visit_tree``
(pass 1's walk), ``visit_scopes`` (declarations, aliases), ``visit_values`` (folding,
object kinds), ``visit_members`` and ``visit_calls`` (pass 2's checks).
"""

from env.gate.analysis import MAX_DETAILS, MAX_SYNTAX_ERROR_DETAILS, GateVerdict, check_code, static_gate
from env.gate.extract import ExtractResult, extract_sketch

__all__ = [
    "MAX_DETAILS",
    "MAX_SYNTAX_ERROR_DETAILS",
    "ExtractResult",
    "GateVerdict",
    "check_code",
    "extract_sketch",
    "static_gate",
]
