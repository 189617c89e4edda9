"""The loss pass with TRL's micro-batch split: episodes whose image counts differ.

The 35B preset trains one sequence per micro-batch. TRL shuffles the step's episodes and
splits them into micro-batches after generation, so a micro-batch can hold episodes with no
painting at all (every earlier turn failed the gate before rendering) next to ones with two.
These tests drive ``trainer.train()`` — the split, the shuffle and the loss — with image
counts forced by real renders: an episode's turn is replaced by a sketch that renders or by
one that fails the static gate, so which turns carry a painting is known in advance.
"""

from __future__ import annotations

import pytest

from helpers import SMALL_SKETCH, tiny_config
from multiturn_trainer.train import train

BROKEN = "```js\nfunction setup( {\n```"  # a syntax error: no render, no painting


class ForcedPaintings:
    """Real environments whose replies are swapped per (episode, turn) for a sketch that paints
    or one that does not, so each episode's image count is fixed. Records what it rendered."""

    def __init__(self, inner, paints: list[list[bool]]):
        self.inner, self.paints = inner, paints
        self.rendered: list[list[bool]] = []

    def reset(self, subjects, seeds, turns, revision_format="full"):
        self.inner.reset(subjects, seeds, turns, revision_format)

    def step(self, replies, turn):
        forced = [f"```js\n{SMALL_SKETCH}```" if self.paints[i][turn - 1] else BROKEN for i in range(len(replies))]
        observations = self.inner.step(forced, turn)
        self.rendered.append([o.png is not None for o in observations])
        return observations

    def close(self):
        pass


# Three turns: turns 1 and 2 are shown to the policy, so image counts are the painted turns among them.
PATTERNS = {
    "2-0-1-2": [[True, True, True], [False, False, True], [True, False, True], [True, True, True]],
    # Three image-less episodes among four: a micro-batch of 2 always pairs two of them.
    "0-0-0-2": [[False, False, True], [False, False, True], [False, False, True], [True, True, True]],
}


@pytest.mark.slow  # warm-started tiny policy
@pytest.mark.parametrize("micro, pattern", [(1, "2-0-1-2"), (2, "2-0-1-2"), (2, "0-0-0-2")])
def test_train_with_micro_batches_and_mixed_image_counts(micro, pattern, moe_policy, environments, tmp_path):
    paints = PATTERNS[pattern]
    envs = ForcedPaintings(environments, paints)
    config = tiny_config(moe_policy, tmp_path / "run", turns=3, num_generations=4, micro_batch_size=micro,
                         steps=2, save_steps=10)
    summary = train(config, environments=envs)
    assert summary.steps == 2 and summary.episodes == 8
    # The renders really produced the image counts the test is about, on both steps.
    counts = [sum(step_turn[i] for step_turn in envs.rendered[s * 3:s * 3 + 2]) for s in range(2) for i in range(4)]
    expected = [sum(row[:2]) for row in paints]
    assert counts == expected * 2
