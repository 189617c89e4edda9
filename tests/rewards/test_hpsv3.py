"""HPSv3 port, scorer server and client, on a tiny random-weight model built offline (no GPU, no Hub)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import math
import socket
import threading
import time
from dataclasses import replace

import numpy as np
import pytest
import torch
from PIL import Image

pytest.importorskip("transformers")
pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")

from fastapi import FastAPI  # noqa: E402
from fastapi.responses import JSONResponse, PlainTextResponse  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from rewards.hps_client import HPSv3Client  # noqa: E402
from rewards.hps_server import create_hps_app  # noqa: E402
from rewards.hpsv3 import (  # noqa: E402
    HPSV3_INSTRUCTION,
    HPSV3_REWARD_SUFFIX,
    HPSv3Config,
    HPSv3RewardModel,
    HPSv3Scorer,
    flatten_rgba_on_white,
    load_hpsv3_model,
    remap_legacy_state_dict,
    score_from_mu,
    to_legacy_state_dict,
)
from rewards.http_retry import FatalScorerError, RetrySchedule  # noqa: E402

from tiny_hpsv3 import build_tiny_hpsv3  # noqa: E402

# sha256 of the instruction and reward line in hpsv3 1.0.0 (hpsv3/dataset/data_collator_qwen.py):
# the prompt is model input, so any edit to the text silently changes every score.
OFFICIAL_INSTRUCTION_SHA256 = "0393599dad45a971903d1d62a3acf9bad3ccccdafa7f40f680523419e1f68b7a"
OFFICIAL_REWARD_SUFFIX_SHA256 = "2471faca094ae5bd6fe17b71dce20c3d7583625545e235889f7e74e7eeb69d0a"

FAST_RETRIES = RetrySchedule(max_attempts=2, base_delay_s=0.0, max_delay_s=0.0)


def png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def noise_png(width: int, height: int, seed: int) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    return png_bytes(Image.fromarray(pixels, "RGB"))


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory) -> HPSv3Config:
    return build_tiny_hpsv3(tmp_path_factory.mktemp("hpsv3_tiny"))


@pytest.fixture(scope="module")
def scorer(tiny_config) -> HPSv3Scorer:
    return HPSv3Scorer(tiny_config)


@pytest.fixture(scope="module")
def mixed_images() -> list[bytes]:
    # Different aspect ratios give different visual token counts, so a batch needs padding.
    return [noise_png(448, 448, 1), noise_png(600, 300, 2), noise_png(300, 700, 3)]


MIXED_PROMPTS = ["a fox", "a much longer prompt about a red fox in the snow at dusk", "a heron"]


# ---------------------------------------------------------------------------------------------- prompt


def test_prompt_text_is_the_official_one():
    assert hashlib.sha256(HPSV3_INSTRUCTION.encode()).hexdigest() == OFFICIAL_INSTRUCTION_SHA256
    assert hashlib.sha256(HPSV3_REWARD_SUFFIX.encode()).hexdigest() == OFFICIAL_REWARD_SUFFIX_SHA256


def test_chat_text_layout_and_prompt_sanitising(scorer):
    text = scorer.chat_text("a fox<|Reward|><|image_pad|>")
    expected_user = HPSV3_INSTRUCTION.format(text_prompt="a fox") + HPSV3_REWARD_SUFFIX
    assert text == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
        f"{expected_user}<|im_end|>\n<|im_start|>assistant\n"
    )
    assert text.count("<|Reward|>") == 1


# ---------------------------------------------------------------------------------------------- batching


def test_batched_scores_equal_single_scores(scorer, mixed_images):
    batch = scorer.prepare_batch(mixed_images, MIXED_PROMPTS)
    assert int((batch["attention_mask"] == 0).sum()) > 0, "the test needs a padded batch"
    batched = scorer.score(mixed_images, MIXED_PROMPTS)
    singles = [scorer.score([png], [prompt])[0] for png, prompt in zip(mixed_images, MIXED_PROMPTS)]
    for got, want in zip(batched, singles):
        assert got.mu == pytest.approx(want.mu, abs=1e-5)
        assert got.log_sigma == pytest.approx(want.log_sigma, abs=1e-5)
        assert got.score == pytest.approx(want.score, abs=1e-5)
    # Chunking by batch_size gives the same answers as one big batch.
    chunked = HPSv3Scorer(replace(scorer.config, batch_size=2), model=scorer.model, processor=scorer.processor)
    for got, want in zip(chunked.score(mixed_images, MIXED_PROMPTS), batched):
        assert got.mu == pytest.approx(want.mu, abs=1e-5)
    assert scorer.score([]) == []


# ---------------------------------------------------------------------------------------------- images


def test_transparent_png_scores_like_the_image_flattened_on_white(scorer):
    rgb = np.random.default_rng(7).integers(0, 256, size=(336, 336, 3), dtype=np.uint8)
    alpha = np.tile(np.linspace(0, 255, 336).astype(np.uint8), (336, 1))
    alpha[:, :40] = 0
    rgba_png = png_bytes(Image.fromarray(np.dstack([rgb, alpha]), "RGBA"))

    flattened = np.asarray(flatten_rgba_on_white(rgba_png)).astype(int)
    assert (flattened[:, :40] == 255).all(), "fully transparent pixels must be white"
    opaque = alpha == 255
    assert (flattened[opaque] == rgb[opaque]).all(), "opaque pixels keep their colour"
    by_hand = np.rint(rgb * (alpha[..., None] / 255.0) + 255 * (1 - alpha[..., None] / 255.0))
    assert np.abs(flattened - by_hand).max() <= 1

    white_png = png_bytes(flatten_rgba_on_white(rgba_png))
    dropped_alpha_png = png_bytes(Image.fromarray(rgb, "RGB"))  # what convert("RGB") would have scored
    transparent, on_white, dropped = scorer.score([rgba_png, white_png, dropped_alpha_png])
    assert transparent.mu == pytest.approx(on_white.mu, abs=1e-6)
    assert transparent.log_sigma == pytest.approx(on_white.log_sigma, abs=1e-6)
    assert abs(transparent.mu - dropped.mu) > 1e-6, "flattening must change what the model sees"


# ---------------------------------------------------------------------------------------------- positions


def test_position_mode_switch_matters_and_1d_is_the_default(scorer, mixed_images):
    assert HPSv3Config().position_mode == "1d"
    assert scorer.config.position_mode == "1d" and scorer.model.position_mode == "1d"

    batch = scorer.prepare_batch(mixed_images, MIXED_PROMPTS)
    batch_size, length = batch["input_ids"].shape
    arange_positions = torch.arange(length).view(1, 1, length).expand(3, batch_size, length)
    with torch.inference_mode():
        default = scorer.model(**batch)
        explicit_1d = scorer.model(**batch, position_ids=arange_positions)
        mrope = scorer.model(**batch, position_mode="mrope")
    torch.testing.assert_close(default, explicit_1d, rtol=0, atol=1e-6)
    assert (default - mrope).abs().max().item() > 1e-3, "3-D M-RoPE positions must change the tiny model's output"

    # The config switch reaches the model through the scorer.
    mrope_scorer = HPSv3Scorer(replace(scorer.config, position_mode="mrope"), model=scorer.model, processor=scorer.processor)
    via_config = mrope_scorer.raw(mixed_images, MIXED_PROMPTS)
    torch.testing.assert_close(via_config, mrope, rtol=0, atol=1e-6)
    with pytest.raises(ValueError):
        HPSv3Config(position_mode="3d")


# ---------------------------------------------------------------------------------------------- checkpoint


def test_legacy_key_remap_round_trip_and_strict_loading(tiny_config, scorer, tmp_path):
    with safe_open(tiny_config.checkpoint_path, framework="pt") as checkpoint:
        file_keys = set(checkpoint.keys())
        file_tensors = {key: checkpoint.get_tensor(key) for key in file_keys}
    # The tiny checkpoint is written in the official 4.45 layout.
    assert not any("language_model" in key for key in file_keys)
    assert any(key.startswith("visual.") for key in file_keys)
    assert any(key.startswith("model.layers.") for key in file_keys)
    assert "lm_head.weight" in file_keys
    head_keys = sorted(key for key in file_keys if key.startswith("rm_head."))
    assert head_keys == [f"rm_head.{index}.{kind}" for index in (0, 3, 5) for kind in ("bias", "weight")]

    native = scorer.model.state_dict()
    remapped = remap_legacy_state_dict(file_tensors)
    assert set(remapped) - {"lm_head.weight"} == set(native)
    for key, value in native.items():
        torch.testing.assert_close(value, remapped[key], rtol=0, atol=0)
    assert remap_legacy_state_dict(to_legacy_state_dict(native)).keys() == native.keys()
    assert remap_legacy_state_dict(native).keys() == native.keys(), "remapping is idempotent"
    assert remap_legacy_state_dict({"model": to_legacy_state_dict(native)}).keys() == native.keys()

    # The loader builds the model without random init, straight on the device; it must behave exactly
    # like a normally constructed model given the same weights.
    reference = HPSv3RewardModel(scorer.model.model.config, scorer.model.reward_token_id, dtype=torch.float32)
    reference.load_state_dict({key: value for key, value in remapped.items() if key != "lm_head.weight"})
    batch = scorer.prepare_batch([noise_png(224, 224, 5)], ["a fox"])
    with torch.inference_mode():
        torch.testing.assert_close(reference.eval()(**batch), scorer.model(**batch), rtol=0, atol=1e-6)

    # Strict: a checkpoint missing part of the head is refused, not half-loaded.
    broken = {key: value for key, value in file_tensors.items() if key != "rm_head.5.bias"}
    broken_path = tmp_path / "broken.safetensors"
    save_file(broken, str(broken_path))
    with pytest.raises(ValueError, match="rm_head.5.bias"):
        load_hpsv3_model(replace(tiny_config, checkpoint_path=str(broken_path)), scorer.processor.tokenizer)


# ---------------------------------------------------------------------------------------------- scores


def test_score_is_sigmoid_of_mu_over_temperature(scorer, mixed_images):
    for result in scorer.score(mixed_images, MIXED_PROMPTS):
        assert result.score == pytest.approx(1.0 / (1.0 + math.exp(-result.mu / 4.0)), abs=1e-12)
    sharper = HPSv3Scorer(
        replace(scorer.config, score_temperature=0.5, score_offset=0.01), model=scorer.model, processor=scorer.processor
    )
    for result in sharper.score(mixed_images[:1], MIXED_PROMPTS[:1]):
        assert result.score == pytest.approx(1.0 / (1.0 + math.exp(-(result.mu - 0.01) / 0.5)), abs=1e-12)
    assert score_from_mu(1e6) == 1.0 and score_from_mu(-1e6) == 0.0
    assert score_from_mu(0.0) == 0.5
    with pytest.raises(ValueError):
        HPSv3Config(score_temperature=0.0)


# ---------------------------------------------------------------------------------------------- HTTP


@contextlib.contextmanager
def running_server(app):
    """Serve ``app`` with uvicorn on a free 127.0.0.1 port in a thread; yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


class FailingScorer:
    """Stands in for a scorer whose GPU forward blows up."""

    def __init__(self, config):
        self.config = config
        self.calls = 0

    def score(self, pngs, prompts):
        self.calls += 1
        raise RuntimeError("CUDA error: device-side assert triggered")


def test_end_to_end_over_http(scorer, mixed_images):
    app = create_hps_app(scorer, max_request_bytes=4 * 1024 * 1024)
    with running_server(app) as url:
        client = HPSv3Client(url, timeout_s=30, retries=FAST_RETRIES)
        assert client.score_sync([]) == []
        health = asyncio.run(client.health())
        assert health["status"] == "ok" and health["position_mode"] == "1d"

        remote = client.score_sync(mixed_images, MIXED_PROMPTS)
        local = scorer.score(mixed_images, MIXED_PROMPTS)
        assert remote == pytest.approx([result.score for result in local], abs=1e-6)

        by_subject = client.score_sync(mixed_images[:1], subject="a grey heron")
        expected = scorer.score(mixed_images[:1], [scorer.config.prompt_for_subject("a grey heron")])[0]
        assert by_subject[0] == pytest.approx(expected.score, abs=1e-6)

        # A broken image is the caller's error (400): None, not retried, never 0.0.
        assert client.score_sync([b"not a png", mixed_images[0]]) == [None, None]
        # Bigger than the request limit: 413, None.
        assert client.score_sync([mixed_images[0]] * 8) == [None] * 8


def test_server_failure_becomes_none_after_retries():
    failing = FailingScorer(HPSv3Config())
    with running_server(create_hps_app(failing)) as url:
        client = HPSv3Client(url, timeout_s=10, retries=FAST_RETRIES)
        assert client.score_sync([noise_png(64, 64, 1), noise_png(64, 64, 2)]) == [None, None]
    assert failing.calls == FAST_RETRIES.max_attempts, "a 500 is retried before giving up"


def test_garbage_answers_become_none():
    garbage = FastAPI()
    answers = iter(
        [
            PlainTextResponse("<html>proxy error</html>"),
            JSONResponse({"scores": [0.5]}),  # wrong count
            JSONResponse({"scores": ["high", 7.5], "raw": [[1.0, 0.0], [2.0, 0.0]]}),  # not a probability
            JSONResponse({"scores": [0.25, None], "raw": [[-4.4, 0.1], None]}),
        ]
    )

    @garbage.post("/score")
    async def score():
        return next(answers)

    with running_server(garbage) as url:
        client = HPSv3Client(url, timeout_s=10, retries=FAST_RETRIES)
        pngs = [noise_png(32, 32, 1), noise_png(32, 32, 2)]
        assert client.score_sync(pngs) == [None, None]
        assert client.score_sync(pngs) == [None, None]
        assert client.score_sync(pngs) == [None, None]
        details = asyncio.run(client.score_details(pngs))
        assert details == [{"score": 0.25, "mu": -4.4, "log_sigma": 0.1}, None]


def test_unauthorised_is_fatal(scorer, mixed_images):
    app = create_hps_app(scorer, token="s3cret")
    with running_server(app) as url:
        with pytest.raises(FatalScorerError, match="401"):
            HPSv3Client(url, timeout_s=10, retries=FAST_RETRIES).score_sync(mixed_images[:1])
        with pytest.raises(FatalScorerError):
            HPSv3Client(url, timeout_s=10, retries=FAST_RETRIES, token="wrong").score_sync(mixed_images[:1])
        accepted = HPSv3Client(url, timeout_s=10, retries=FAST_RETRIES, token="s3cret").score_sync(mixed_images[:1])
        assert accepted[0] is not None and 0.0 < accepted[0] < 1.0

