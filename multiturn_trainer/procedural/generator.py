"""The generator's entry points: the trained ``SUBJECTS``, ``generate_sketch`` and the ``sft_examples`` built from it.

Determinism: every choice comes from ``random.Random`` seeded with the subject and the seed
(string seeding hashes with SHA-512, so it does not depend on PYTHONHASHSEED).
"""

from __future__ import annotations

import random
from typing import Any, Sequence

from agent.messages import first_turn_messages
from agent.subjects import subjects as subject_split
from multiturn_trainer.procedural.compositions import COMPOSERS
from multiturn_trainer.procedural.painter import Painter, layer_starts

# The train split of configs/subjects.yaml; every one of them needs a composer.
SUBJECTS: tuple[str, ...] = subject_split("train")


def check_composers() -> None:
    """Raise ValueError if configs/subjects.yaml trains on a subject that has no composer.

    Checked when a sketch is asked for rather than at import, so a data file cannot break
    ``import multiturn_trainer.procedural``.
    """
    missing = [s for s in SUBJECTS if s not in COMPOSERS]
    if missing:
        raise ValueError(f"configs/subjects.yaml trains on subjects without a procedural composer: {missing}")


def generate_sketch(subject: str, seed: int, max_sections: int | None = None) -> str:
    """A valid sketch of ``subject`` (one of SUBJECTS); the same (subject, seed) gives the same code.

    ``max_sections`` keeps only the first layers after the paper wash (the big masses first):
    a compact sketch a tiny model can learn in minutes on a CPU.
    """
    if subject not in COMPOSERS:
        if subject in SUBJECTS:
            check_composers()  # a train subject without a composer is the data file's fault: say so
        raise ValueError(f"no procedural composition for {subject!r}; choose one of {list(SUBJECTS)}")
    painter = Painter(random.Random(f"{subject}\x00{int(seed)}"))
    COMPOSERS[subject](painter)
    return painter.sketch(subject, max_sections)


def without_layer(sketch: str, index: int) -> str:
    """``sketch`` without the ``index``-th layer of its painting (0: the first ``  // name``
    section of ``draw()``), and the blank line that separated it: a draft that a revision
    completes by putting the layer back between its neighbours."""
    lines = sketch.split("\n")
    starts = layer_starts(lines)
    if not 0 <= index < len(starts) - 1:
        raise ValueError(f"the sketch has {len(starts)} layers; a layer other than the last one is removed, not {index}")
    return "\n".join(lines[:starts[index]] + lines[starts[index + 1]:])


def sft_examples(n: int, seed: int = 0, max_sections: int | None = None,
                 subjects: Sequence[str] | None = None, revision_format: str = "full") -> list[dict[str, Any]]:
    """``n`` supervised turn-1 examples: the prompt messages and a fenced sketch as the completion.

    Subjects cycle in a seeded order so any ``n`` covers them as evenly as possible; each
    example draws its own sketch seed.
    """
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    rng = random.Random(f"sft\x00{int(seed)}")
    examples = []
    order: list[str] = []
    for _ in range(n):
        if not order:
            order = list(subjects or SUBJECTS)
            rng.shuffle(order)
        subject = order.pop()
        sketch = generate_sketch(subject, rng.randrange(2**31), max_sections)
        examples.append({
            "subject": subject,
            "prompt_messages": first_turn_messages(subject, revision_format=revision_format),
            "completion": f"```js\n{sketch}```",
        })
    return examples
