"""Procedurally generated, always-valid watercolour sketches for a supervised warm start.

A tiny model starting GRPO from scratch almost never writes a sketch that passes the gate,
so every reward is zero and nothing is learned. A few hundred examples of the contract in
use fix that: ``generate_sketch`` composes a painting from a background wash, the big masses
(sky, ground, table, water) and subject-specific motifs built by a small library of
parametric shapes (blobs, petals, leaves, ridges, bands), with palette, layout and mirror
image varied by the seed. The output follows the contract's skeleton, uses only the default
allowlist plus a declared helper, paints with 10-30 ``brush.fill`` calls, and is written as
straight-line code so the static count of fills is the number executed.

Modules: ``shapes`` (geometry), ``painter`` (the sketch text), ``compositions`` (one per
subject), ``generator`` (SUBJECTS, sketches, SFT examples), ``flaws`` (flawed drafts for
revision examples).
"""

from multiturn_trainer.procedural.flaws import FLAWS, flawed_draft
from multiturn_trainer.procedural.generator import SUBJECTS, check_composers, generate_sketch, sft_examples, without_layer

__all__ = ["FLAWS", "SUBJECTS", "check_composers", "flawed_draft", "generate_sketch", "sft_examples", "without_layer"]
