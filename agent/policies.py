"""Policy backends: what writes the sketches of an episode, for the episode runner to drive.

The episode loop (``multiturn_trainer.rollout.EpisodeRunner``) works with two kinds of policy:

* a **token policy** (``works_on == "tokens"``) continues each episode's exact token context:
  the turn-1 prompt ids, earlier completions and the environment turns with their image
  tokens. The training loss scores those very tokens, so the trainer's own generation and a
  local transformers model work this way (``TrainerPolicy`` in ``multiturn_trainer/grpo.py``,
  ``LocalModelPolicy`` here).
* a **message policy** (``works_on == "messages"``) answers chat conversations with images,
  as a served model does: ``EndpointPolicy`` talks to any OpenAI-compatible chat endpoint
  (``vllm serve``, TGI, a hosted API), paintings sent as base64 PNG data URLs.

Both return one reply per episode. A message policy may fail to answer (endpoint down,
retries spent): that reply's ``text`` is None, an infrastructure failure, and the runner
gives the episode reward None — never a made-up 0.
"""

from __future__ import annotations

import asyncio
import base64
import os
import random
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from agent.messages import Message, png_bytes, template_variables, text_only_messages

# Where EndpointPolicy looks for a bearer token when none is given (never in a config file:
# configs are written into run directories).
TOKEN_ENV_VARS = ("WATERCOLOUR_ENDPOINT_TOKEN", "OPENAI_API_KEY")


@dataclass
class PolicyReply:
    """One turn's answer. ``text`` None: the policy could not answer (infrastructure)."""

    text: str | None
    completion_tokens: int = 0
    error: str | None = None


@runtime_checkable
class TokenPolicy(Protocol):
    works_on: Literal["tokens"]
    processor: Any  # tokenizes prompts, decodes completions, templates environment turns
    eos_token_ids: list[int]
    image_pad_token_id: int | None
    chat_template_kwargs: dict[str, Any]
    sees_images: bool  # False: a text-only model (revision turns say there is no image)

    def prompt_ids(self, prompts: list[list[Message]]) -> list[list[int]]:
        """Token ids of each turn-1 conversation, ending with the assistant's generation prompt."""

    def generate(self, contexts: list[list[int]], images: list[list[Any] | None],
                 fields: dict[str, Any]) -> tuple[list[list[int]], list[list[float | None]] | None]:
        """One completion per context (ending with EOS when the model ended its turn) and, when
        the sampler reports them, each completion token's log-prob (else None)."""


@runtime_checkable
class MessagePolicy(Protocol):
    works_on: Literal["messages"]

    def reply(self, conversations: list[list[Message]]) -> list[PolicyReply]:
        """One reply per conversation (each ends with a user turn)."""


class LocalModelPolicy:
    """A transformers model (e.g. a checkpoint with its LoRA merged) sampling with ``generate``.

    Batched over all episodes of a turn, left-padded like TRL's HF path, with the episode
    images' pixel values so later turns see their paintings. No sampler log-probs: nothing
    trains on these tokens. ``sees_images`` False: a text-only model (``processor`` is its
    tokenizer), prompted with plain-string messages and no image placeholder; ``image_pad_token``
    names a VLM's placeholder (both from ``multiturn_trainer.families``).
    """

    works_on: Literal["tokens"] = "tokens"

    def __init__(self, model, processor, max_new_tokens: int, temperature: float = 1.0, top_p: float = 1.0,
                 top_k: int = 0, seed: int | None = None, enable_thinking: bool = False, sees_images: bool = True,
                 image_pad_token: str | None = "<|image_pad|>"):
        self.model = model
        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", processor)
        self.max_new_tokens = max_new_tokens
        self.sampling = dict(do_sample=temperature > 0, temperature=temperature or None, top_p=top_p,
                             top_k=top_k or None)
        # End-of-turn ids and the image placeholder resolved as TRL's trainer resolves them, so
        # a checkpoint generates here exactly as it did in training.
        configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        configured = [] if configured is None else [configured] if isinstance(configured, int) else list(configured)
        self.eos_token_ids = list(dict.fromkeys([self.tokenizer.eos_token_id, *configured]))
        self.sees_images = sees_images
        self.image_pad_token_id = None
        if sees_images and image_pad_token is not None:
            token_id = self.tokenizer.convert_tokens_to_ids(image_pad_token)
            if token_id is not None and token_id != self.tokenizer.unk_token_id:
                self.image_pad_token_id = token_id
        self.chat_template_kwargs = template_variables(processor, {"enable_thinking": enable_thinking})
        self._seed = seed

    def prompt_ids(self, prompts: list[list[Message]]) -> list[list[int]]:
        ids = []
        for prompt in prompts:
            if not self.sees_images:
                prompt = text_only_messages(prompt)
            text = self.processor.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False,
                                                      **self.chat_template_kwargs)
            ids.append(list(self.tokenizer(text, add_special_tokens=False)["input_ids"]))
        return ids

    def generate(self, contexts, images, fields):
        import torch

        if self._seed is not None:
            # Seeded once, at the first turn: a run is reproducible, and later calls still differ.
            torch.manual_seed(self._seed)
            self._seed = None
        device = self.model.device
        width = max(len(c) for c in contexts)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_token_ids[0]
        input_ids = torch.tensor([[pad] * (width - len(c)) + list(c) for c in contexts], device=device)
        attention = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts], device=device)
        inputs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": attention}
        for name, value in fields.items():
            if isinstance(value, torch.Tensor):
                inputs[name] = value.to(device)
            else:  # per-token fields (mm_token_type_ids) are left-padded like the ids
                inputs[name] = torch.tensor([[0] * (width - len(v)) + list(v) for v in value], device=device)
        if "pixel_values" in inputs:
            inputs["pixel_values"] = inputs["pixel_values"].to(self.model.dtype)
        with torch.no_grad():
            output = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens, pad_token_id=pad,
                                         **{k: v for k, v in self.sampling.items() if v is not None})
        completions = []
        for row in output[:, width:].tolist():
            # Everything after the first end-of-turn is padding of the batch, not the reply.
            ends = [i for i, token in enumerate(row) if token in self.eos_token_ids]
            completions.append(row[:ends[0] + 1] if ends else row)
        return completions, None


class EndpointPolicy:
    """An OpenAI-compatible ``/chat/completions`` endpoint, paintings sent as PNG data URLs.

    Requests of one turn run concurrently, at most ``concurrency`` at a time. Timeouts,
    dropped connections, 408/429/5xx are retried with backoff (``rewards.http_retry``, the
    judge's policy); 401/403 stop the run at once. A request that still fails is a
    ``PolicyReply(None, error=...)``: an infrastructure failure, not a bad painting.
    """

    works_on: Literal["messages"] = "messages"

    def __init__(self, base_url: str, model: str, max_tokens: int = 4096, temperature: float = 1.0,
                 top_p: float | None = None, token: str | None = None, concurrency: int = 8,
                 max_attempts: int = 4, timeout_s: float = 600.0, seed: int | None = None,
                 retry_delay_s: float = 1.0):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.token = token if token is not None else next(
            (os.environ[name] for name in TOKEN_ENV_VARS if os.environ.get(name)), None)
        self.concurrency = max(1, concurrency)
        self.max_attempts = max(1, max_attempts)
        self.retry_delay_s = retry_delay_s
        self.timeout_s = timeout_s
        # Sampling seeds: every request gets its own (seed, seed+1, ...), so K samples of one
        # prompt are K different samples even on servers that honour the seed.
        self._next_seed = seed

    def reply(self, conversations: list[list[Message]]) -> list[PolicyReply]:
        return asyncio.run(self._reply_all(conversations))

    async def _reply_all(self, conversations):
        import httpx

        from rewards.http_retry import RetrySchedule

        retry = RetrySchedule(max_attempts=self.max_attempts, base_delay_s=self.retry_delay_s)
        gate = asyncio.Semaphore(self.concurrency)
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        async with httpx.AsyncClient(timeout=self.timeout_s, headers=headers) as client:
            async def one(conversation):
                async with gate:
                    return await self._reply_one(client, conversation, retry)

            return list(await asyncio.gather(*(one(c) for c in conversations)))

    def request_body(self, conversation: list[Message]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": openai_messages(conversation),
                                "max_tokens": self.max_tokens, "temperature": self.temperature}
        if self.top_p is not None:
            body["top_p"] = self.top_p
        if self._next_seed is not None:
            body["seed"] = self._next_seed
            self._next_seed += 1
        return body

    async def _reply_one(self, client, conversation, retry) -> PolicyReply:
        from rewards.http_retry import request_with_retries

        url = f"{self.base_url}/chat/completions"
        failures: list[str] = []
        response = await request_with_retries(client, "POST", url, service=f"policy endpoint {self.base_url}",
                                              retries=retry, rng=random.Random(), failures=failures,
                                              json=self.request_body(conversation))
        if response is None:
            last = f" (last: {failures[-1]})" if failures else ""
            return PolicyReply(None, error=f"no answer from {url} after {len(failures)} attempt(s){last}")
        try:
            data = response.json()
            text = reply_text(data["choices"][0]["message"])
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            return PolicyReply(None, error=f"unreadable answer from {url}: {type(exc).__name__}: {exc}")
        usage = data.get("usage") or {}
        return PolicyReply(text, completion_tokens=int(usage.get("completion_tokens") or 0))


def reply_text(message: dict[str, Any]) -> str:
    """The text of a chat answer's message. Servers send ``content`` as a string or as a list of
    parts (text parts are joined). ``None`` or nothing (a model that spent its tokens thinking,
    or refused) is an empty reply: the model answered without a sketch, which the gate scores
    as ``no_code``, the policy's failure and not an infrastructure one. Anything else is not an
    answer this client can read (TypeError: the caller reports it as infrastructure)."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(part, dict) for part in content):
        return "".join(part["text"] for part in content
                       if part.get("type") == "text" and isinstance(part.get("text"), str))
    raise TypeError(f"message content is {type(content).__name__}")


def openai_messages(conversation: list[Message]) -> list[dict[str, Any]]:
    """Chat messages in the OpenAI wire format: text parts as text, images as PNG data URLs."""
    wire = []
    for message in conversation:
        content = message["content"]
        if isinstance(content, str):
            wire.append({"role": message["role"], "content": content})
            continue
        parts = []
        for part in content:
            if part.get("type") == "image":
                encoded = base64.b64encode(png_bytes(part["image"])).decode("ascii")
                parts.append({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}})
            else:
                parts.append({"type": "text", "text": part["text"]})
        wire.append({"role": message["role"], "content": parts})
    return wire
