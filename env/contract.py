"""The sketch contract: which names a p5.brush sketch may use, size limits, and reason codes.

A sketch comes from a model reply, so it is untrusted. Two layers enforce this contract:
the static gate (``env.gate``) reads the source before anything runs, and the run-time
layer in the browser enforces the same allowlists while the sketch executes. Both
layers take their allowlists from one ``SketchContract`` so they cannot drift apart,
and both report failures with the codes in ``REASON_CODES``, whose explanations are
shown to the model as feedback.

The contract is an allowlist: anything that is not an allowed ``brush.*`` method, an
allowed p5 name, plain JavaScript or a name the sketch declares itself is a violation.
The name tables further down only decide *which* reason code a violation gets.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

# --- p5.brush -----------------------------------------------------------------------

DEFAULT_BRUSH_METHODS: tuple[str, ...] = (
    "scaleBrushes",
    "noStroke",
    "fill",
    "noFill",
    "fillBleed",
    "fillTexture",
    "beginShape",
    "vertex",
    "endShape",
    "circle",
)

# p5.brush exports that exist but are kept out of the default allowlist: strokes, hatches,
# fields and state helpers would let the model leave the watercolour-fill style the
# task is about. They get ``brush_method_not_allowed`` rather than ``unknown_brush_method``
# so that the feedback tells the model the method is real but forbidden.
NOT_ALLOWED_BRUSH_METHODS: tuple[str, ...] = (
    "add", "arc", "beginStroke", "box", "clip", "endStroke", "field", "flowLine",
    "hatch", "hatchArray", "hatchStyle", "instance", "line", "listFields", "load",
    "mass", "massArray", "move", "noClip", "noField", "noHatch", "noMass", "noWash",
    "noiseSeed", "pick", "polygon", "rect", "refreshField", "seed", "set", "spline",
    "stroke", "strokeWeight", "wash", "wiggle", "addField", "wRand", "Plot", "Polygon",
    "Position",
)

KNOWN_BRUSH_METHODS: tuple[str, ...] = DEFAULT_BRUSH_METHODS + NOT_ALLOWED_BRUSH_METHODS

# brush methods that put pigment on the canvas; a sketch without one of these (among the
# allowed ones) cannot paint anything, which the static gate reports as no_painting_calls.
PAINTING_BRUSH_METHODS: tuple[str, ...] = (
    "circle", "endShape", "rect", "polygon", "arc", "line", "spline", "flowLine",
    "endStroke", "hatchArray", "Plot", "Polygon",
)

# --- p5 -------------------------------------------------------------------------------

ALLOWED_P5_NAMES: tuple[str, ...] = (
    "createCanvas", "WEBGL", "background", "translate", "angleMode", "DEGREES",
    "RADIANS", "noLoop", "push", "pop", "width", "height", "random", "randomSeed",
    "noise", "noiseSeed", "sin", "cos", "tan", "atan2", "sqrt", "pow", "abs", "min",
    "max", "floor", "ceil", "round", "map", "lerp", "constrain", "dist", "PI", "TWO_PI",
    "HALF_PI",
)

P5_TEXT_FUNCTIONS: tuple[str, ...] = (
    "text", "textFont", "textSize", "textAlign", "textStyle", "textWidth", "textLeading",
    "textAscent", "textDescent", "textWrap", "textBounds", "textToPoints", "loadFont",
)

# Known p5 global functions, variables and constants (p5 1.x global mode). Using one that
# is not allowed is reported as ``bare_primitive``; the list only has to be good enough
# to give a precise reason code, because names outside every list are violations too
# (``unknown_global``). The hooks a sketch defines itself (setup, draw, preload, event
# handlers) are deliberately absent: they are the sketch's names, not p5's.
P5_GLOBAL_NAMES: tuple[str, ...] = (
    # shapes and attributes
    "arc", "ellipse", "circle", "line", "point", "quad", "rect", "square", "triangle",
    "ellipseMode", "rectMode", "noSmooth", "smooth", "strokeCap", "strokeJoin",
    "strokeWeight", "bezier", "bezierDetail", "bezierPoint", "bezierTangent", "curve",
    "curveDetail", "curveTightness", "curvePoint", "curveTangent", "beginContour",
    "endContour", "beginShape", "endShape", "vertex", "bezierVertex", "curveVertex",
    "quadraticVertex", "splineVertex", "normal", "plane", "box", "sphere", "cylinder",
    "cone", "ellipsoid", "torus", "model",
    # colour
    "background", "clear", "colorMode", "fill", "noFill", "noStroke", "stroke", "erase",
    "noErase", "color", "alpha", "blue", "brightness", "green", "hue", "lerpColor",
    "lightness", "red", "saturation",
    # transforms
    "applyMatrix", "resetMatrix", "rotate", "rotateX", "rotateY", "rotateZ", "scale",
    "shearX", "shearY", "translate",
    # structure, environment, rendering
    "remove", "noLoop", "loop", "isLooping", "push", "pop",
    "redraw", "frameCount", "deltaTime", "focused", "cursor", "noCursor", "frameRate",
    "getTargetFrameRate", "displayWidth", "displayHeight", "windowWidth", "windowHeight",
    "width", "height", "fullscreen", "pixelDensity", "displayDensity", "getURL",
    "getURLPath", "getURLParams", "describe", "describeElement", "textOutput",
    "gridOutput", "createCanvas", "resizeCanvas", "noCanvas", "createGraphics",
    "createFramebuffer", "blendMode", "setAttributes", "disableFriendlyErrors", "print",
    # images and pixels
    "createImage", "image", "tint", "noTint", "imageMode", "pixels", "blend", "copy",
    "filter", "get", "set", "loadPixels", "updatePixels",
    # 3D
    "ambientLight", "directionalLight", "pointLight", "spotLight", "lights", "noLights",
    "lightFalloff", "specularColor", "imageLight", "panorama", "ambientMaterial",
    "emissiveMaterial", "specularMaterial", "normalMaterial", "shininess", "metalness",
    "texture", "textureMode", "textureWrap", "camera", "perspective", "ortho", "frustum",
    "createCamera", "setCamera", "orbitControl", "debugMode", "noDebugMode",
    "createShader", "createFilterShader", "shader", "resetShader",
    # math
    "abs", "ceil", "constrain", "dist", "exp", "floor", "lerp", "log", "mag", "map",
    "max", "min", "norm", "pow", "round", "sq", "sqrt", "fract", "createVector", "noise",
    "noiseDetail", "noiseSeed", "randomSeed", "random", "randomGaussian", "acos", "asin",
    "atan", "atan2", "cos", "sin", "tan", "degrees", "radians", "angleMode",
    # data and time helpers
    "millis", "second", "minute", "hour", "day", "month", "year", "append", "arrayCopy",
    "concat", "reverse", "shorten", "shuffle", "sort", "splice", "subset", "float",
    "int", "str", "boolean", "byte", "char", "unchar", "hex", "unhex", "join", "match",
    "matchAll", "nf", "nfc", "nfp", "nfs", "split", "splitTokens", "trim",
    "createStringDict", "createNumberDict",
    # input state and event hooks
    "mouseX", "mouseY", "pmouseX", "pmouseY", "winMouseX", "winMouseY", "pwinMouseX",
    "pwinMouseY", "mouseButton", "mouseIsPressed", "movedX", "movedY", "requestPointerLock",
    "exitPointerLock", "keyIsPressed", "key", "keyCode", "keyIsDown", "touches",
    "accelerationX", "accelerationY", "accelerationZ", "rotationX", "rotationY",
    "rotationZ", "deviceOrientation", "turnAxis", "setMoveThreshold", "setShakeThreshold",
    # constants
    "P2D", "WEBGL", "WEBGL2", "CLOSE", "OPEN", "CHORD", "PIE", "CENTER", "CORNER",
    "CORNERS", "RADIUS", "LEFT", "RIGHT", "TOP", "BOTTOM", "BASELINE", "PI", "HALF_PI",
    "QUARTER_PI", "TAU", "TWO_PI", "DEGREES", "RADIANS", "HSB", "HSL", "RGB", "ROUND",
    "SQUARE", "PROJECT", "MITER", "BEVEL", "POINTS", "LINES", "LINE_STRIP", "LINE_LOOP",
    "TRIANGLES", "TRIANGLE_FAN", "TRIANGLE_STRIP", "QUADS", "QUAD_STRIP", "TESS",
    "BLEND", "REMOVE", "ADD", "DARKEST", "LIGHTEST", "DIFFERENCE", "SUBTRACT",
    "EXCLUSION", "MULTIPLY", "SCREEN", "REPLACE", "OVERLAY", "HARD_LIGHT", "SOFT_LIGHT",
    "DODGE", "BURN", "THRESHOLD", "GRAY", "OPAQUE", "INVERT", "POSTERIZE", "DILATE",
    "ERODE", "BLUR", "NORMAL", "ITALIC", "BOLD", "BOLDITALIC", "CHAR", "WORD", "AUTO",
    "ARROW", "CROSS", "HAND", "MOVE", "TEXT", "WAIT", "LANDSCAPE", "PORTRAIT", "IMAGE",
    "NEAREST", "REPEAT", "CLAMP", "MIRROR", "FLAT", "SMOOTH", "AXES", "GRID",
)

# --- browser and JavaScript names, by reason code --------------------------------------

# Plain-JavaScript globals a sketch may use. Reflective helpers (Reflect, Proxy) and code
# loaders are deliberately absent: legitimate sketches never need them.
JS_SAFE_GLOBALS: tuple[str, ...] = (
    "Math", "Number", "String", "Boolean", "Array", "Object", "JSON", "Symbol", "BigInt",
    "Map", "Set", "WeakMap", "WeakSet", "Promise", "Date", "Error", "TypeError",
    "RangeError", "SyntaxError", "ReferenceError", "parseInt", "parseFloat", "isNaN",
    "isFinite", "NaN", "Infinity", "undefined", "arguments", "console",
    "encodeURIComponent", "decodeURIComponent", "encodeURI", "decodeURI",
    "ArrayBuffer", "DataView", "Float32Array", "Float64Array", "Int8Array", "Int16Array",
    "Int32Array", "Uint8Array", "Uint8ClampedArray", "Uint16Array", "Uint32Array",
)

DYNAMIC_CODE_NAMES: tuple[str, ...] = (
    "eval", "Function", "Reflect", "Proxy", "WebAssembly", "AsyncFunction",
    "GeneratorFunction",
)

# Everything that can reach outside the sketch: the network, other windows, the global
# object itself (which hands out every other capability) and p5's raw renderer.
# ``document`` is the one global-object door reported as dom_access instead, because
# what a sketch does with it is DOM manipulation.
GLOBAL_OBJECT_NAMES: tuple[str, ...] = (
    "window", "globalThis", "self", "top", "parent", "frames", "opener",
)

EXTERNAL_ACCESS_NAMES: tuple[str, ...] = GLOBAL_OBJECT_NAMES + (
    "p5", "_renderer", "drawingContext", "fetch", "XMLHttpRequest", "WebSocket",
    "EventSource", "Image", "Audio", "FontFace", "navigator", "sendBeacon",
    "RTCPeerConnection", "webkitRTCPeerConnection", "RTCDataChannel", "Worker",
    "SharedWorker", "ServiceWorker", "importScripts", "location", "open", "postMessage",
    "BroadcastChannel", "MessageChannel", "Request", "alert", "confirm", "prompt",
    "loadImage", "loadJSON", "loadStrings", "loadTable", "loadXML", "loadBytes",
    "loadModel", "loadShader", "loadSound", "httpGet", "httpPost", "httpDo",
    "createCapture", "save", "saveCanvas", "saveFrames", "saveGif", "saveJSON",
    "saveStrings", "saveTable", "createWriter", "downloadFile",
)

DOM_ACCESS_NAMES: tuple[str, ...] = (
    "document", "createElement", "createElementNS", "querySelector", "querySelectorAll",
    "getElementById", "getElementsByTagName", "getElementsByClassName",
    "getElementsByName", "innerHTML", "outerHTML", "insertAdjacentHTML", "appendChild",
    "contentWindow", "contentDocument", "ownerDocument", "defaultView", "srcdoc",
    "body", "createDiv", "createP", "createSpan", "createImg", "createA", "createButton",
    "createInput", "createSlider", "createSelect", "createCheckbox", "createRadio",
    "createColorPicker", "createFileInput", "createVideo", "createAudio", "select",
    "selectAll", "removeElements",
)

TIMER_NAMES: tuple[str, ...] = (
    "setTimeout", "setInterval", "requestAnimationFrame", "queueMicrotask",
    "requestIdleCallback", "clearTimeout", "clearInterval",
)

STORAGE_NAMES: tuple[str, ...] = (
    "localStorage", "sessionStorage", "indexedDB", "cookie", "caches", "storeItem",
    "getItem", "removeItem", "clearStorage", "cookieStore",
)

# --- reason codes ---------------------------------------------------------------------

# There is deliberately no ``missing_draw``: p5 runs setup() on its own and a sketch that
# paints there (with noLoop) renders fine, so only a missing setup() is a contract break.
STATIC_REASON_CODES: dict[str, str] = {
    "no_code": "The reply contains no JavaScript sketch (put the code in a ```js block).",
    "not_utf8": "The reply is not valid UTF-8 text.",
    "too_long": "The reply or the sketch is longer than the allowed size.",
    "syntax_error": "The sketch is not valid JavaScript (often a truncated or unbalanced block).",
    "missing_setup": "The sketch does not define setup().",
    "not_webgl": "The sketch must call createCanvas(width, height, WEBGL).",
    "brush_method_not_allowed": "The sketch calls a p5.brush method that is outside the allowlist.",
    "unknown_brush_method": "The sketch uses a brush.* name that p5.brush does not have.",
    "bare_primitive": "The sketch uses a p5 drawing function or variable outside the allowlist; paint only with the allowed brush.* methods.",
    "text_label": "The sketch calls a p5 text function (text, textFont, loadFont, ...); text functions are not allowed.",
    "external_access": "The sketch reaches outside itself (network, other windows, the global object or p5 internals).",
    "dynamic_code": "The sketch builds or runs code dynamically or tampers with JavaScript itself (eval, Function, constructor tricks, patching built-ins).",
    "dom_access": "The sketch touches the page (document, DOM elements).",
    "timer": "The sketch uses timers or animation callbacks; draw everything synchronously in draw().",
    "storage": "The sketch uses browser storage (localStorage, cookies, IndexedDB, ...).",
    "unknown_global": "The sketch uses a global name that it does not declare and that is not an allowed p5 or JavaScript name.",
    "no_painting_calls": "The sketch never calls brush.circle or brush.endShape, so it cannot paint anything.",
    "canvas_too_large": "The sketch asks for a canvas larger than the allowed size (createCanvas width and height).",
}

RUNTIME_REASON_CODES: dict[str, str] = {
    "p5_function_not_allowed": "At run time the sketch called a p5 or p5.brush function outside the allowlist.",
    "render_timeout": "The sketch did not finish rendering in time (infinite loop or far too much work).",
    "render_crashed": "The browser crashed while rendering the sketch (usually memory exhaustion).",
    "memory_limit": "The sketch allocated more memory than a painting needs (huge arrays or buffers, or many large canvases: call createCanvas once).",
    "render_error": "The sketch threw a JavaScript error while running.",
    "blank_canvas": "The sketch ran but left (almost) no paint on the canvas.",
    "infrastructure_error": "The renderer failed for reasons unrelated to the sketch; it was not judged.",
}

# An edit reply (SEARCH/REPLACE blocks, ``env.edits``) that cannot be applied: the turn fails,
# nothing of the reply is applied and the episode's sketch stays as it was.
EDIT_REASON_CODES: dict[str, str] = {
    "edit_no_sketch": "The reply sends SEARCH/REPLACE edits but there is no sketch to edit yet; send the complete sketch in one ```js block.",
    "edit_malformed": "An edit block is not well formed: a <<<<<<< SEARCH line, the exact lines to change, a ======= line, their replacement, then a >>>>>>> REPLACE line.",
    "edit_no_match": "The SEARCH text of an edit block is not in the current sketch; copy the lines exactly as they are.",
    "edit_ambiguous": "The SEARCH text of an edit block occurs more than once in the current sketch; quote more lines so it matches one place.",
    "edit_empty_result": "The edits leave an empty sketch.",
    "edit_too_long": "The edits make the sketch longer than the allowed size.",
    "edit_too_many_blocks": "The reply holds more edit blocks than allowed; send fewer, larger edits or the complete sketch.",
}

REASON_CODES: dict[str, str] = {**STATIC_REASON_CODES, **RUNTIME_REASON_CODES, **EDIT_REASON_CODES}


def _as_name_tuple(value: Any, field_name: str) -> tuple[str, ...]:
    # YAML hands over lists and a lone string is a classic config slip ("fill" would
    # otherwise become the five names f, i, l, l); reject anything but a sequence of str.
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ValueError(f"{field_name} must be a list of names, got {type(value).__name__}")
    names = tuple(value)
    for name in names:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"{field_name} contains {name!r}, which is not a JavaScript name")
    return names


@dataclass(frozen=True)
class SketchContract:
    """Configuration shared by the static gate and the run-time layer."""

    brush_methods: tuple[str, ...] = DEFAULT_BRUSH_METHODS
    p5_names: tuple[str, ...] = ALLOWED_P5_NAMES
    max_reply_bytes: int = 200_000
    max_code_chars: int = 40_000
    min_paint_fraction: float = 0.005
    # createCanvas bounds: the examples paint at 600x600; 2048 leaves room for large
    # paintings while the PNG (decoded on our side) stays under 17 MB of RGBA.
    max_canvas_side: int = 2048
    # Array-buffer bytes the page may hold, as V8 counts them (every typed array, DataView
    # and buffer, p5's and p5.brush's own included: the examples hold 1.6-3.1 MiB). The
    # renderer enforces it and derives its process-memory ceiling from it (env/renderer.py).
    max_typed_array_bytes: int = 256 * 1024 * 1024

    def __post_init__(self) -> None:
        brush_methods = _as_name_tuple(self.brush_methods, "brush_methods")
        unknown = [name for name in brush_methods if name not in KNOWN_BRUSH_METHODS]
        if unknown:
            # A typo here would silently allow nothing; a real new p5.brush export belongs
            # in KNOWN_BRUSH_METHODS first.
            raise ValueError(f"brush_methods has names p5.brush does not export: {unknown}")
        object.__setattr__(self, "brush_methods", brush_methods)
        object.__setattr__(self, "p5_names", _as_name_tuple(self.p5_names, "p5_names"))
        for size_field in ("max_reply_bytes", "max_code_chars", "max_canvas_side", "max_typed_array_bytes"):
            value = getattr(self, size_field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{size_field} must be a positive integer, got {value!r}")
        fraction = self.min_paint_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 <= fraction <= 1.0:
            raise ValueError(f"min_paint_fraction must be a number in [0, 1], got {fraction!r}")
        object.__setattr__(self, "min_paint_fraction", float(fraction))

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None) -> "SketchContract":
        """Build a contract from a parsed YAML/JSON mapping; missing keys keep defaults."""
        if mapping is None:
            return cls()
        if not isinstance(mapping, Mapping):
            raise ValueError(f"a sketch contract must be a mapping, got {type(mapping).__name__}")
        known = {f.name for f in fields(cls)}
        unexpected = sorted(str(key) for key in mapping if key not in known)
        if unexpected:
            raise ValueError(f"unknown sketch contract keys {unexpected}; expected some of {sorted(known)}")
        return cls(**dict(mapping))
