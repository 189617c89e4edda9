"""What the policy reads: the system prompt (the sketch contract), the task and the revision turns.

Everything the prompt says about allowed names is generated from a ``SketchContract``, the
same object the static gate and the run-time sandbox enforce, so widening the allowlist in a
config changes what the model is told in the same breath as what it is allowed to do.
Feedback on a painting comes from ``env.feedback``; this module only frames it. It lives in
env/ (beside the contract and the feedback) because the OpenEnv environment states the same
task as the trainer's turn 1; agent/ builds chat messages from it.
"""

from __future__ import annotations

from env.contract import SketchContract

# The exact skeleton from the architecture contract. The prompt shows it verbatim because a
# model that copies it gets the canvas, brush scale, angle mode and coordinate origin right.
SKETCH_SKELETON = """\
async function setup() {
  createCanvas(600, 600, WEBGL);
  brush.scaleBrushes(3);
  angleMode(DEGREES);
  noLoop();
}

function draw() {
  translate(-width / 2, -height / 2);
  background('#f8f1e4');
  /* brush.* calls */
}"""

# Signatures and one-line meanings for every method p5.brush exports (from its README), so
# that any method a config adds to the allowlist is explained as precisely as the default
# ten. Optional arguments carry a question mark.
BRUSH_SIGNATURES: dict[str, tuple[str, str]] = {
    # the default allowlist
    "scaleBrushes": ("scale", "scales the built-in brushes; call once in setup() (3 suits a 600x600 canvas)"),
    "noStroke": ("", "turns outlines off; call once at the start of draw() so every shape is a pure wash"),
    "fill": (
        "color, opacity",
        "watercolour fill for the shapes that follow: a CSS colour string such as '#d6362b' and an opacity 0-255",
    ),
    "noFill": ("", "turns the fill off again"),
    "fillBleed": (
        "strength, direction?, angle?",
        "how far the wash bleeds past its edge: strength 0-1, direction 'out' or 'in', optional wash angle in degrees",
    ),
    "fillTexture": (
        "textureStrength, borderIntensity, scatter?",
        "paper texture inside the wash and pigment gathering at its border, both 0-1; scatter false gives a cleaner edge",
    ),
    "beginShape": ("curvature", "starts a custom shape; curvature 0 gives straight edges, 1 fully rounded ones"),
    "vertex": ("x, y, pressure?", "adds a point to the current shape"),
    "endShape": ("close", "finishes the shape and paints it with the current fill; pass true to close it"),
    "circle": ("x, y, radius, irregularity?", "paints a circle; irregularity 0-1 makes the outline hand-drawn"),
    # the rest of p5.brush, allowed only when a contract widens the allowlist
    "add": ("name, params", "registers a custom brush"),
    "addField": ("name, generatorFunction, options?", "registers a custom vector field"),
    "arc": ("x, y, radius, start, end", "draws an arc with the current stroke brush"),
    "beginStroke": ("type, x, y", "starts a stroke path of type 'curve' or 'segments'"),
    "box": ("", "returns the names of the available brushes"),
    "clip": ("[x1, y1, x2, y2]", "clips later strokes and hatches to a rectangle"),
    "endStroke": ("angle, pressure", "finishes the stroke path and draws it"),
    "field": ("name", "activates a vector field that bends later strokes"),
    "flowLine": ("x, y, length, dir", "draws a line that follows the active vector field"),
    "hatch": ("dist, angle, options?", "hatches the shapes that follow"),
    "hatchArray": ("polygons", "hatches several polygons as one gesture"),
    "hatchStyle": ("brushName, color, weight", "sets the brush used for hatching"),
    "instance": ("p", "binds p5.brush to a p5 instance (instance mode only)"),
    "line": ("x1, y1, x2, y2", "draws a straight stroke with the current brush"),
    "listFields": ("", "returns the names of the vector fields"),
    "load": ("buffer?", "redirects brush drawing to an offscreen buffer"),
    "mass": ("brushName, color, options?", "fills the shapes that follow with massed strokes"),
    "massArray": ("polygons", "masses several polygons as one gesture"),
    "move": ("angle, length, pressure", "adds a segment to the current stroke path"),
    "noClip": ("", "removes the clipping rectangle"),
    "noField": ("", "deactivates the vector field"),
    "noHatch": ("", "turns hatching off"),
    "noMass": ("", "turns massing off"),
    "noWash": ("", "turns the flat wash off"),
    "noiseSeed": ("seed", "seeds p5.brush's noise"),
    "pick": ("brushName", "switches the stroke brush, keeping colour and weight"),
    "polygon": ("points", "draws a polygon from an array of [x, y] points"),
    "rect": ("x, y, w, h, mode?", "draws a rectangle; mode 'corner' or 'center'"),
    "refreshField": ("time", "re-evaluates a time-dependent vector field"),
    "seed": ("seed", "seeds p5.brush's randomness"),
    "set": ("brushName, color, weight", "selects a stroke brush and turns strokes on"),
    "spline": ("points, curvature?", "draws a smooth stroke through [x, y] points"),
    "stroke": ("color", "sets the stroke colour and turns strokes on"),
    "strokeWeight": ("weight", "sets the stroke weight"),
    "wash": ("color, opacity", "flat fill without bleed or texture for the shapes that follow"),
    "wiggle": ("amount", "adds a hand-drawn wobble to strokes"),
    "wRand": ("weights", "picks a key of an object at random, weighted by its values"),
    "Plot": ("type", "class: a reusable stroke path ('curve' or 'segments')"),
    "Polygon": ("points", "class: a reusable polygon built from [x, y] points"),
    "Position": ("x, y", "class: a point that moves along the vector field"),
}

# The forbidden names a model reaches for most often; the prompt names the ones the contract
# does not allow, since a concrete "not brush.line" works better than "nothing else".
_TEMPTING_BRUSH_METHODS = ("line", "rect", "stroke", "set", "hatch", "wash", "polygon", "spline", "strokeWeight")
_TEMPTING_P5_NAMES = (
    "ellipse", "rect", "line", "point", "triangle", "quad", "arc", "fill", "stroke", "noStroke",
    "strokeWeight", "beginShape", "vertex", "endShape", "image", "rotate", "scale", "color",
)

REPLY_FORMAT = "the complete sketch in one ```js block"
# What a revision turn asks for (config ``revision_format``): the whole sketch again, or edits
# to the sketch the environment holds (``env.edits``). The environment accepts either form.
REVISION_FORMATS = ("full", "edit")
EDIT_REPLY_FORMAT = "SEARCH/REPLACE edit blocks that change your current sketch"
EDIT_BLOCK_SHAPE = (
    "<<<<<<< SEARCH\n(lines copied exactly from your current sketch)\n=======\n(the lines that replace them)\n"
    ">>>>>>> REPLACE"
)


def check_revision_format(revision_format: str) -> str:
    if revision_format not in REVISION_FORMATS:
        raise ValueError(f"revision_format must be one of {', '.join(REVISION_FORMATS)}, not {revision_format!r}")
    return revision_format


def revision_reply_format(revision_format: str = "full") -> str:
    """How the model is asked to reply on a revision turn."""
    return EDIT_REPLY_FORMAT if check_revision_format(revision_format) == "edit" else REPLY_FORMAT


def brush_signature(method: str) -> str:
    """``brush.fill(color, opacity)`` for a known method; the bare name for one without a signature."""
    if method not in BRUSH_SIGNATURES:
        return f"brush.{method}"
    arguments, _ = BRUSH_SIGNATURES[method]
    return f"brush.{method}({arguments})"


def allowed_brush_lines(contract: SketchContract = SketchContract()) -> list[str]:
    """One bullet per allowed brush method, in the contract's order."""
    lines = []
    for method in contract.brush_methods:
        if method in BRUSH_SIGNATURES:
            lines.append(f"- {brush_signature(method)}: {BRUSH_SIGNATURES[method][1]}")
        else:
            # A method the contract knows but this table does not: naming it is still
            # better than hiding an allowed tool from the model.
            lines.append(f"- brush.{method} (see the p5.brush documentation)")
    return lines


def system_prompt(contract: SketchContract = SketchContract(), enable_thinking: bool = False,
                  revision_format: str = "full") -> str:
    """The system message: the sketch contract, composition guidance and the reply format."""
    contract = contract or SketchContract()
    allowed = set(contract.brush_methods)
    sections = [
        "You paint watercolours by writing p5.js sketches that use the p5.brush library. "
        "Your sketch is rendered once in a sandboxed browser on a 600x600 canvas; you may then "
        "see the painting with notes from the gate and revise it.",
        "## Sketch skeleton\nEvery sketch has this shape: setup() creates the canvas exactly like this, "
        "and draw() starts with the translate and the background, then paints.\n"
        f"```js\n{SKETCH_SKELETON}\n```\n"
        "After the translate, (0, 0) is the top-left corner and (600, 600) the bottom-right; "
        "angles are in degrees. random() and noise() are seeded, so the painting is reproducible.",
        "## Allowed brush methods (paint only with these)\n" + "\n".join(allowed_brush_lines(contract)),
        "## Allowed p5 names\n"
        + ", ".join(contract.p5_names)
        + ".\nPlain JavaScript is fine too: const/let, functions, loops, arrays, objects, classes and Math.",
        "## Forbidden (the sketch fails the gate)\n" + "\n".join(_forbidden_lines(contract)),
        "## Composition\n" + "\n".join(_composition_lines(allowed)),
        "## Reply format\n" + _reply_format(enable_thinking, revision_format),
    ]
    return "\n\n".join(sections)


def _forbidden_lines(contract: SketchContract) -> list[str]:
    allowed_brush = set(contract.brush_methods)
    allowed_p5 = set(contract.p5_names)
    brush_examples = [f"brush.{name}" for name in _TEMPTING_BRUSH_METHODS if name not in allowed_brush]
    p5_examples = [name for name in _TEMPTING_P5_NAMES if name not in allowed_p5]
    lines = []
    brush_line = "- any other brush.* method"
    if brush_examples:
        brush_line += f" (for example {', '.join(brush_examples)})"
    lines.append(brush_line)
    p5_line = "- any other p5 function or variable"
    if p5_examples:
        p5_line += f", in particular the bare p5 drawing primitives ({', '.join(p5_examples)})"
    p5_line += ", also through this.name or computed access such as this['ellipse']"
    if "fill" in allowed_brush and "fill" not in allowed_p5:
        p5_line += "; paint with brush.fill, not fill"
    lines.append(p5_line)
    lines += [
        "- p5's text functions (text, textFont, loadFont)",
        "- the page and the DOM (document, createDiv, select)",
        "- the network, other windows and p5 internals (fetch, XMLHttpRequest, loadImage, window, globalThis, _renderer)",
        "- building or running code at run time (eval, Function, constructor tricks)",
        "- timers and animation callbacks (setTimeout, setInterval, requestAnimationFrame)",
        "- browser storage (localStorage, sessionStorage, cookies, indexedDB)",
    ]
    return lines


def _composition_lines(allowed: set[str]) -> list[str]:
    lines = [
        "- Start with a pale background wash over most of the paper (sky, wall or water), then the "
        "big masses (ground, hills, table), then the subject, then small details and accents: "
        "large shapes first, small ones last.",
        "- Build colour from layered translucent washes (opacity about 60-180): a light wash first, "
        "then smaller, darker ones on top for shadow and depth. Keep opacity above 200 for small dark accents.",
        "- Washes only darken the paper: a light colour painted over a dark one barely shows, so "
        "leave light things (a moon, a highlight) as paper and paint around them.",
        "- Use about 10-30 brush.fill calls in total; several shapes may share one fill.",
    ]
    texture_tools = [name for name in ("fillBleed", "fillTexture") if name in allowed]
    if texture_tools:
        tools = " and ".join(f"brush.{name}" for name in texture_tools)
        lines.append(
            f"- Vary {tools} from layer to layer: little bleed (0.05-0.15) for crisp details, "
            "more (0.3-0.5) for skies, water and soft backgrounds."
        )
    if {"beginShape", "vertex", "endShape"} <= allowed:
        lines.append(
            "- Build petals, leaves, hills, hulls and reflections from brush.beginShape / brush.vertex / "
            "brush.endShape(true) with about 4-14 points; use brush.circle for round things. A wash spreads "
            "with the size of its shape, so build long thin things (branches, stems) from short pieces."
        )
    lines.append("- Keep every shape inside the 600x600 canvas and leave some paper showing; no outlines, no text.")
    return lines


def _reply_format(enable_thinking: bool, revision_format: str = "full") -> str:
    if enable_thinking:
        opening = (
            "Think about the composition first (layers, colours, where each shape goes); "
            "after your thinking, reply with"
        )
    else:
        opening = "Reply with"
    if check_revision_format(revision_format) == "full":
        return (
            f"{opening} {REPLY_FORMAT}: the whole sketch from setup() to the end of draw(), never a "
            "fragment or a diff, and nothing after the block."
        )
    return (
        f"{opening} {REPLY_FORMAT}: the whole sketch from setup() to the end of draw(), and nothing "
        "after the block. When you revise, send only the changes, as edit blocks applied in order "
        f"to your current sketch:\n{EDIT_BLOCK_SHAPE}\nThe SEARCH lines must match one place of the "
        "current sketch exactly. Send the complete sketch again only when most of it changes."
    )


def task_prompt(subject: str) -> str:
    """The first user message of an episode."""
    subject = " ".join(str(subject).split())
    if not subject:
        raise ValueError("the subject must contain visible text")
    return f"Paint {subject} as a p5.brush watercolour. Reply with {REPLY_FORMAT}."


def first_turn_prompt(subject: str, contract: SketchContract | None = None,
                      enable_thinking: bool = False, revision_format: str = "full") -> tuple[str, str]:
    """(system message, first user message) of an episode: the one source of turn 1.

    The trainer's chat messages and the OpenEnv environment's task statement are both built
    from this, so a remote client sees exactly what the trained model saw.
    """
    return system_prompt(contract or SketchContract(), enable_thinking, revision_format), task_prompt(subject)


def turns_left_after(turn: int, turns: int) -> int:
    """How many turns of a ``turns``-turn episode come after turn ``turn`` (turn 0: right after reset).

    The one derivation: the revision prompt, the feedback, the turn record and the wire's
    ``turns_left`` all read it from here, and ``episode_turns`` is its one inverse."""
    return max(0, turns - turn)


def episode_turns(turn: int, turns_left: int) -> int:
    """The episode's ``turns`` back from turn ``turn`` and its ``turns_left`` (the wire states only those)."""
    return turn + turns_left


def revision_prompt(feedback: str, turn: int, turns: int, revision_format: str = "full",
                    code: str | None = None) -> str:
    """The text of the user message that opens ``turn`` (2..turns), after the painting.

    ``turn`` is the turn being asked for, not the one just finished, so the model reads how
    many chances remain including this one. ``code``: the episode's current sketch, shown when
    the conversation does not already hold it verbatim (an edit produced it), so SEARCH text
    can quote it exactly; the environment says when (``TurnObservation.show_code``).
    """
    _check_revision_turn(turn, turns)
    turns_left = turns_left_after(turn, turns)
    if turns_left == 0:
        urgency = "This is your last turn."
    else:
        urgency = f"After this one you have {turns_left} more {'turn' if turns_left == 1 else 'turns'}."
    shown = f"Your current sketch, with your edits applied:\n```js\n{code}\n```\n\n" if code is not None else ""
    if check_revision_format(revision_format) == "edit":
        ask = (f"reply with {EDIT_REPLY_FORMAT} (or {REPLY_FORMAT} if most of it changes).")
    else:
        ask = f"reply with {REPLY_FORMAT}: the full revised sketch, not only the changes."
    return (
        f"Notes on your turn {turn - 1} sketch:\n{feedback.strip()}\n\n{shown}"
        f"Turn {turn} of {turns}. {urgency} Compare the painting with the subject, decide what to "
        f"improve, and {ask}"
    )


def _check_revision_turn(turn: int, turns: int) -> None:
    if isinstance(turn, bool) or isinstance(turns, bool) or not isinstance(turn, int) or not isinstance(turns, int):
        raise TypeError(f"turn and turns must be integers, got {turn!r} and {turns!r}")
    if not 2 <= turn <= turns:
        # Turn 1 is the task prompt; passing the turn just finished instead of the next one
        # is the likely slip, and it should fail loudly rather than mislabel every turn.
        raise ValueError(f"a revision opens turn 2..{turns}, got turn {turn}")
