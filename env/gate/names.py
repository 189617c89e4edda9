"""Name tables for the analysis: the globals a sketch may use, the sensitive global and
property names with the reason code each one earns, and ``_classify_free_name``.
"""

from __future__ import annotations

from env.contract import (
    DOM_ACCESS_NAMES,
    DYNAMIC_CODE_NAMES,
    EXTERNAL_ACCESS_NAMES,
    JS_SAFE_GLOBALS,
    P5_GLOBAL_NAMES,
    P5_TEXT_FUNCTIONS,
    STORAGE_NAMES,
    TIMER_NAMES,
)

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

# Property names that lead from any object to a built-in prototype (`({}).__proto__`,
# `[].constructor.prototype`), whoever made the object they start from.
_BUILT_IN_PROTOTYPE_PATHS = frozenset({"__proto__", "constructor"})
# Object's methods that write to their first argument (Reflect is refused as a whole name).
_MUTATING_OBJECT_METHODS = frozenset({"defineProperty", "defineProperties", "assign", "setPrototypeOf"})

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
