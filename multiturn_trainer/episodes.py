"""The tokens of one painting episode: the policy's turns, the environment's turns, the images.

An episode is one growing token sequence: the turn-1 prompt, then alternately the policy's
completion (loss mask 1) and the environment's user turn (loss mask 0) with the painting
as image tokens. The next turn is generated from exactly these ids, not from a re-templated
conversation, so the sequence the loss pass scores is token for token the one sampled. The
Qwen3.5 template re-renders earlier assistant turns differently (it drops their empty
``<think>`` block once a user turn follows), so re-templating would shift every later
turn by a few tokens and the sampling and training log-probs would no longer agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from PIL import Image

from agent.messages import text_only_messages

# Stands in for the assistant's reply while the template renders the next user turn; the
# environment turn is everything the template puts after it.
_REPLY_MARKER = "\u2063reply-marker\u2063"


@dataclass
class EnvironmentTurn:
    ids: list[int]
    pixel_values: torch.Tensor | None = None
    image_grid_thw: torch.Tensor | None = None  # Qwen-style processors only (patch rows per image)
    images: list[Image.Image] = field(default_factory=list)
    image_features: int = 0  # how many image tokens these images' features fill


@dataclass
class EpisodeTokens:
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    images: list[Image.Image] = field(default_factory=list)
    pixel_values: list[torch.Tensor] = field(default_factory=list)
    image_grid_thw: list[torch.Tensor] = field(default_factory=list)
    image_features: int = 0

    def context(self) -> list[int]:
        return list(self.prompt_ids) + list(self.completion_ids)

    def add_policy(self, ids: list[int]) -> None:
        self.completion_ids.extend(ids)
        self.env_mask.extend([1] * len(ids))

    def add_environment(self, turn: EnvironmentTurn) -> None:
        self.completion_ids.extend(turn.ids)
        self.env_mask.extend([0] * len(turn.ids))
        self.images.extend(turn.images)
        self.image_features += turn.image_features
        if turn.pixel_values is not None:
            self.pixel_values.append(turn.pixel_values)
        if turn.image_grid_thw is not None:
            self.image_grid_thw.append(turn.image_grid_thw)


def turn_of_each_token(env_mask: list[int]) -> list[int]:
    """1-based turn of every completion token; environment tokens 0. A turn's tokens are the
    policy tokens (mask 1) after that many environment turns (runs of mask 0)."""
    turns, turn, in_environment = [], 1, False
    for value in env_mask:
        if value:
            if in_environment:
                turn, in_environment = turn + 1, False
            turns.append(turn)
        else:
            in_environment = True
            turns.append(0)
    return turns


def reply_ids(processor, text: str) -> list[int]:
    """A reply written out of band (SFT targets, recorded replies) as policy tokens, closed with
    the end-of-turn token."""
    tokenizer = getattr(processor, "tokenizer", processor)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]


def environment_turn(
    processor,
    user_content: list[dict[str, Any]],
    policy_ended_turn: bool,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> EnvironmentTurn:
    """Token ids (image tokens expanded) and pixel values for one environment user turn.

    ``policy_ended_turn``: the completion ended with the end-of-turn token; if it ran out of
    budget instead, the turn is closed here (as an environment token, so it is not trained).
    """
    images = [part["image"] for part in user_content if part.get("type") == "image"]
    template_content = [{"type": "image"} if part.get("type") == "image" else part for part in user_content]
    conversation = [
        {"role": "user", "content": [{"type": "text", "text": "."}]},
        {"role": "assistant", "content": [{"type": "text", "text": _REPLY_MARKER}]},
        {"role": "user", "content": template_content},
    ]
    tokenizer = getattr(processor, "tokenizer", processor)
    if tokenizer is processor:
        # A text-only model's processing class is its tokenizer, and its chat template (like
        # most text-only ones) takes each message's content as one string.
        conversation = text_only_messages(conversation)
    text = processor.apply_chat_template(
        conversation, tokenize=False, add_generation_prompt=True, **(chat_template_kwargs or {})
    )
    suffix = text[text.rindex(_REPLY_MARKER) + len(_REPLY_MARKER):]
    end_of_turn = tokenizer.eos_token
    if not suffix.startswith(end_of_turn):
        raise ValueError(f"the chat template does not end an assistant turn with {end_of_turn!r}")
    if policy_ended_turn:
        suffix = suffix[len(end_of_turn):]
    if tokenizer is processor:
        if images:
            raise ValueError("a text-only model (its processing class is a tokenizer) was handed an image")
        # No BOS or other specials: the suffix continues a sequence, it does not start one.
        encoded = tokenizer([suffix], add_special_tokens=False, return_tensors="pt")
    else:
        encoded = processor(text=[suffix], images=images or None, return_tensors="pt")
    return EnvironmentTurn(
        ids=encoded["input_ids"][0].tolist(),
        pixel_values=encoded.get("pixel_values") if images else None,
        image_grid_thw=encoded.get("image_grid_thw") if images else None,
        images=images,
        image_features=image_features(processor, encoded, images) if images else 0,
    )


def image_features(processor, encoded: dict[str, Any], images: list[Image.Image]) -> int:
    """How many image tokens the processor's image features fill, counted from the images' side
    (not from the ids), so the loss pass can check the two agree.

    A Qwen-style processor reports each image's patch grid (``image_grid_thw``), merged 2x2 into
    tokens; any other VLM processor says how many tokens an image of a size takes.
    """
    grid = encoded.get("image_grid_thw")
    if grid is not None:
        return int(grid.prod(dim=-1).sum().item()) // processor.image_processor.merge_size ** 2
    sizes = [(image.height, image.width) for image in images]
    return int(sum(processor._get_num_multimodal_tokens(image_sizes=sizes)["num_image_tokens"]))


def generation_fields(episodes: list[EpisodeTokens], image_pad_id: int | None) -> dict[str, Any]:
    """The multimodal inputs of a batched generate over ``episodes`` (empty when no images).

    One ``pixel_values`` for the batch, images in the order their tokens come. Qwen3.5 also takes
    the patch grids and computes its 3-D rotary positions from ``mm_token_type_ids``, a per-token
    field that TRL's generation path left-pads with the ids.
    """
    pixel_values = [p for e in episodes for p in e.pixel_values]
    if not pixel_values:
        return {}
    fields: dict[str, Any] = {"pixel_values": torch.cat(pixel_values)}
    grids = [g for e in episodes for g in e.image_grid_thw]
    if grids:
        fields["image_grid_thw"] = torch.cat(grids)
        fields["mm_token_type_ids"] = [[int(t == image_pad_id) for t in e.context()] for e in episodes]
    return fields


def loss_image_inputs(
    episodes: list[EpisodeTokens],
    prompt_completion_ids: torch.Tensor,
    image_pad_id: int | None,
) -> dict[str, Any]:
    """What the loss pass needs so the image features reach it, matched to the padded batch.

    Raises when the image tokens in a row and the features of its images disagree: feeding
    the model mismatched images would train on garbage silently.
    """
    pixel_values = [p for e in episodes for p in e.pixel_values]
    if not pixel_values:
        return {}
    image_tokens = prompt_completion_ids == image_pad_id
    for row, episode in enumerate(episodes):
        tokens = int(image_tokens[row].sum().item())
        if tokens != episode.image_features:
            raise ValueError(f"episode {row}: {tokens} image tokens for {episode.image_features} image features")
    device = prompt_completion_ids.device
    inputs: dict[str, Any] = {
        "pixel_values": torch.cat(pixel_values).to(device),
        "num_images": [len(e.images) for e in episodes],
    }
    grids = [g for e in episodes for g in e.image_grid_thw]
    if grids:
        inputs["image_grid_thw"] = torch.cat(grids).to(device)
        inputs["mm_token_type_ids"] = image_tokens.long()
    return inputs
