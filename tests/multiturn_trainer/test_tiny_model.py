"""The tiny offline Qwen3.5 policy: built here, loaded through the same Auto* path as the real ones."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch
from PIL import Image
from safetensors.torch import load_file

from multiturn_trainer.tiny_model import (
    QWEN3_5_ADDED_TOKENS,
    QWEN3_5_CHAT_TEMPLATE,
    QWEN3_5_CHAT_TEMPLATE_SHA256,
    build_tiny_model,
    corpus_sha256,
    load_pretrained,
)

KINDS = ("dense", "moe")
EXPECTED_MODEL_CLASS = {
    "dense": "Qwen3_5ForConditionalGeneration",
    "moe": "Qwen3_5MoeForConditionalGeneration",
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One checkpoint directory per kind, built once for the whole module."""
    return {kind: build_tiny_model(tmp_path_factory.mktemp(f"tiny-{kind}"), kind=kind, seed=0) for kind in KINDS}


@pytest.fixture(scope="module")
def policies(built):
    return {kind: load_pretrained(path) for kind, path in built.items()}


@pytest.fixture(scope="module")
def painting_png(tmp_path_factory):
    """A 600x600 PNG like the renderer's output: paper colour with two washes."""
    path = tmp_path_factory.mktemp("paintings") / "painting.png"
    image = Image.new("RGB", (600, 600), (248, 241, 228))
    image.paste((214, 54, 43), (150, 220, 310, 380))
    image.paste((43, 108, 176), (330, 250, 470, 390))
    image.save(path)
    return path


def two_turn_conversation(image: Image.Image) -> list[dict]:
    """Task, the model's first sketch, then its painting with feedback: the episode shape."""
    return [
        {"role": "system", "content": [{"type": "text", "text": "You paint watercolours with p5.brush."}]},
        {"role": "user", "content": [{"type": "text", "text": "Paint two apples side by side."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "```js\nbrush.circle(230, 320, 90);\n```"}]},
        {
            "role": "user",
            "content": [
                {"type": "image", "image": image},
                {"type": "text", "text": "Turn 1 of 2: your sketch passed the gate."},
            ],
        },
    ]


def model_inputs(processor, image: Image.Image):
    return processor.apply_chat_template(
        two_turn_conversation(image),
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
        return_tensors="pt",
    )


@pytest.mark.parametrize("kind", KINDS)
def test_loads_through_the_auto_classes(kind, built, policies):
    model, processor = policies[kind]
    assert type(model).__name__ == EXPECTED_MODEL_CLASS[kind]
    assert type(processor).__name__ == "Qwen3VLProcessor"
    assert type(processor.image_processor).__name__ == "Qwen2VLImageProcessor"
    assert type(processor.tokenizer).__name__ == "Qwen3_5Tokenizer"
    assert model.dtype == torch.float32

    description = json.loads((built[kind] / "tiny_model.json").read_text())
    assert description["kind"] == kind and description["seed"] == 0
    assert description["model_class"] == EXPECTED_MODEL_CLASS[kind]
    assert description["parameters"] == sum(p.numel() for p in model.parameters())
    assert description["tokenizer"]["tokens"] == len(processor.tokenizer)
    assert len(description["tokenizer"]["corpus_sha256"]) == 64
    assert len(processor.tokenizer) <= model.config.text_config.vocab_size


@pytest.mark.parametrize("kind", KINDS)
def test_both_attention_layer_types_are_present(kind, policies):
    model, _ = policies[kind]
    layer_types = model.config.text_config.layer_types
    assert set(layer_types) == {"linear_attention", "full_attention"}
    for layer, layer_type in zip(model.model.language_model.layers, layer_types):
        if layer_type == "linear_attention":
            assert type(layer.linear_attn).__name__.endswith("GatedDeltaNet")
        else:
            assert type(layer.self_attn).__name__.endswith("Attention")
    if kind == "moe":
        assert all(type(layer.mlp).__name__.endswith("SparseMoeBlock") for layer in model.model.language_model.layers)


def test_special_tokens_keep_the_released_layout(policies):
    model, processor = policies["dense"]
    tokenizer = processor.tokenizer
    ids = [tokenizer.convert_tokens_to_ids(content) for content, _ in QWEN3_5_ADDED_TOKENS]
    # Contiguous, in released order, right after the BPE vocabulary (as 248044.. in the real one).
    assert ids == list(range(ids[0], ids[0] + len(ids)))
    assert ids[-1] == len(tokenizer) - 1
    for content, _ in QWEN3_5_ADDED_TOKENS:
        assert tokenizer(content, add_special_tokens=False).input_ids == [tokenizer.convert_tokens_to_ids(content)]

    config = model.config
    assert config.image_token_id == processor.image_token_id == tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert config.video_token_id == processor.video_token_id
    assert config.vision_start_token_id == tokenizer.convert_tokens_to_ids("<|vision_start|>")
    assert config.vision_end_token_id == tokenizer.convert_tokens_to_ids("<|vision_end|>")
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.bos_token is None
    assert model.generation_config.eos_token_id == [tokenizer.eos_token_id, tokenizer.pad_token_id]

    # Thinking tags are not "special", so decoding for the reply keeps them for the parser.
    reply = "<think>\nwarmer shadows\n</think>\n\n```js\nbrush.circle(1, 2, 3);\n```<|im_end|>"
    decoded = tokenizer.decode(tokenizer(reply).input_ids, skip_special_tokens=True)
    assert decoded == reply.removesuffix("<|im_end|>")


def test_chat_template_is_the_official_one(policies):
    assert hashlib.sha256(QWEN3_5_CHAT_TEMPLATE.encode()).hexdigest() == QWEN3_5_CHAT_TEMPLATE_SHA256
    _, processor = policies["dense"]
    assert processor.chat_template == QWEN3_5_CHAT_TEMPLATE
    assert processor.tokenizer.chat_template == QWEN3_5_CHAT_TEMPLATE


def test_chat_template_renders_two_turns_with_an_image(policies):
    _, processor = policies["dense"]
    image = Image.new("RGB", (600, 600), "white")

    def render(**kwargs):
        return processor.apply_chat_template(
            two_turn_conversation(image), add_generation_prompt=True, tokenize=False, **kwargs
        )

    history = (
        "<|im_start|>system\nYou paint watercolours with p5.brush.<|im_end|>\n"
        "<|im_start|>user\nPaint two apples side by side.<|im_end|>\n"
        # Assistant turns before the latest user query carry no thinking block.
        "<|im_start|>assistant\n```js\nbrush.circle(230, 320, 90);\n```<|im_end|>\n"
        "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
        "Turn 1 of 2: your sketch passed the gate.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert render() == history + "<think>\n"
    assert render(enable_thinking=True) == history + "<think>\n"
    assert render(enable_thinking=False) == history + "<think>\n\n</think>\n\n"

    # After the final query, an assistant's reasoning is kept in a think block.
    finished = two_turn_conversation(image) + [
        {"role": "assistant", "content": "<think>\nmore red\n</think>\n\n```js\nbrush.circle(1, 2, 3);\n```"}
    ]
    rendered = processor.apply_chat_template(finished, tokenize=False)
    assert rendered.endswith(
        "<|im_start|>assistant\n<think>\nmore red\n</think>\n\n```js\nbrush.circle(1, 2, 3);\n```<|im_end|>\n"
    )


def test_processor_turns_a_600px_png_into_matching_image_tokens(policies, painting_png):
    model, processor = policies["dense"]
    with Image.open(painting_png) as image:
        inputs = model_inputs(processor, image.convert("RGB"))

    merge = processor.image_processor.merge_size
    patch = processor.image_processor.patch_size
    temporal = processor.image_processor.temporal_patch_size
    grid = inputs["image_grid_thw"]
    # 600x600 is capped at 192x192: 12x12 patches of 16px, 36 tokens after the 2x2 merge.
    assert grid.tolist() == [[1, 12, 12]]
    assert inputs["pixel_values"].shape == (144, 3 * temporal * patch * patch)

    image_tokens = int((inputs["input_ids"] == processor.image_token_id).sum())
    assert image_tokens == int(grid.prod()) // merge**2 == 36
    with torch.no_grad():
        features = model.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"]).pooler_output
    assert sum(feature.shape[0] for feature in features) == image_tokens
    assert features[0].shape[-1] == model.config.text_config.hidden_size


@pytest.mark.parametrize("kind", KINDS)
def test_forward_with_an_image_gives_finite_logits_and_gradients(kind, policies, painting_png):
    model, processor = policies[kind]
    with Image.open(painting_png) as image:
        inputs = model_inputs(processor, image.convert("RGB"))
    model.train()
    try:
        logits = model(**inputs).logits
        assert logits.shape == (1, inputs["input_ids"].shape[1], model.config.text_config.vocab_size)
        assert torch.isfinite(logits).all()
        # GRPO back-propagates through both token mixers and the vision tower.
        logits.float().logsumexp(-1).mean().backward()
        layers = model.model.language_model.layers
        gradients = [
            layers[model.config.text_config.layer_types.index("linear_attention")].linear_attn.in_proj_qkv.weight.grad,
            layers[model.config.text_config.layer_types.index("full_attention")].self_attn.q_proj.weight.grad,
            model.model.visual.patch_embed.proj.weight.grad,
        ]
        assert all(g is not None and torch.isfinite(g).all() and g.abs().sum() > 0 for g in gradients)
    finally:
        model.zero_grad(set_to_none=True)
        model.eval()


@pytest.mark.parametrize("kind", KINDS)
def test_generate_produces_tokens(kind, policies, painting_png):
    model, processor = policies[kind]
    with Image.open(painting_png) as image:
        inputs = model_inputs(processor, image.convert("RGB"))
    prompt_length = inputs["input_ids"].shape[1]
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=6, min_new_tokens=6, do_sample=False)
    new_tokens = output[0, prompt_length:]
    assert new_tokens.shape[0] == 6
    assert int(new_tokens.max()) < model.config.text_config.vocab_size
    assert isinstance(processor.decode(new_tokens, skip_special_tokens=True), str)


def test_same_seed_builds_identical_weights_and_tokenizer(built, tmp_path):
    again = build_tiny_model(tmp_path / "again", kind="dense", seed=0)
    other_seed = build_tiny_model(tmp_path / "other", kind="dense", seed=1)

    first = load_file(built["dense"] / "model.safetensors")
    second = load_file(again / "model.safetensors")
    assert first.keys() == second.keys()
    assert all(torch.equal(first[name], second[name]) for name in first)
    assert (built["dense"] / "tokenizer.json").read_bytes() == (again / "tokenizer.json").read_bytes()

    different = load_file(other_seed / "model.safetensors")
    assert any(not torch.equal(first[name], different[name]) for name in first)


def test_custom_corpus_and_vocabulary_cap(tmp_path):
    corpus = ["brush.fill('#c0392b', 170);\nbrush.circle(230, 320, 90);", "Paint two apples."]
    out = build_tiny_model(tmp_path / "custom", kind="dense", seed=0, vocab_size=300, corpus=corpus)
    description = json.loads((out / "tiny_model.json").read_text())
    assert description["tokenizer"]["corpus_sha256"] == corpus_sha256(corpus)
    assert description["tokenizer"]["default_corpus"] is False
    assert description["tokenizer"]["tokens"] <= 300

    with pytest.raises(ValueError, match="vocab_size"):
        build_tiny_model(tmp_path / "too-small", vocab_size=100, corpus=corpus)
    with pytest.raises(ValueError, match="kind"):
        build_tiny_model(tmp_path / "unknown", kind="sparse")


def test_build_tiny_command(tmp_path, capsys):
    from multiturn_trainer.commands import cmd_build_tiny
    from watercolour.cli import build_parser

    parser = build_parser()
    out = tmp_path / "cli"
    args = parser.parse_args(["build-tiny", "--out", str(out), "--kind", "moe", "--seed", "3"])
    assert (args.command, args.kind, args.seed) == ("build-tiny", "moe", 3)

    assert cmd_build_tiny(args) == 0
    description = json.loads((out / "tiny_model.json").read_text())
    assert (description["kind"], description["seed"]) == ("moe", 3)
    assert str(out) in capsys.readouterr().out

    defaults = parser.parse_args(["build-tiny"])
    assert (defaults.out, defaults.kind, defaults.seed) == (None, "dense", 0)


def test_the_cached_warm_start_is_rebuilt_for_another_recipe_and_kept_for_its_own(tmp_path, monkeypatch, capsys):
    """out/tiny-painter-dense serves each preset the warm start it asks for, whichever ran first."""
    import dataclasses

    import multiturn_trainer.resources as resources
    from multiturn_trainer.config import TrainConfig

    builds = []

    def fake_build(config, path):
        builds.append(config.tiny_warm_start_steps)
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.json").write_text(json.dumps({"steps": config.tiny_warm_start_steps}))

    monkeypatch.setattr(resources, "build_tiny", fake_build)
    model = tmp_path / "tiny-painter-dense"
    smoke = TrainConfig(model=str(model), tiny_model="dense", tiny_warm_start_steps=180)
    demo = TrainConfig(model=str(model), tiny_model="dense", tiny_warm_start_steps=160)
    for config in (smoke, smoke, demo, dataclasses.replace(demo, seed=3)):
        assert resources.ensure_model(config) == str(model)
    assert builds == [180, 160]  # the seed is not part of the recipe: bench learn's seeds share one
    assert json.loads((model / resources.WARM_START_STAMP).read_text()) == resources.warm_start_recipe(demo)
    assert "another recipe (steps 180 -> 160); rebuilding it" in capsys.readouterr().out
    # A model folder without a record (the user's own) is used as it is, never replaced.
    own = tmp_path / "own"
    own.mkdir()
    (own / "config.json").write_text("{}")
    assert resources.ensure_model(TrainConfig(model=str(own), tiny_model="dense", tiny_warm_start_steps=160)) == str(own)
    assert builds == [180, 160] and not (own / resources.WARM_START_STAMP).exists()


def test_the_warm_start_reports_its_reply_lengths_and_train_says_how_many_the_cap_cuts(tmp_path, monkeypatch, capsys):
    """Sketches the warm start taught that max_completion_length cannot hold are cut mid-line
    (syntax_error) on every turn: the learn-pretrained preset ran so before anyone saw why."""
    import multiturn_trainer.resources as resources
    from agent.messages import first_turn_messages
    from multiturn_trainer.config import TrainConfig
    from multiturn_trainer.episodes import reply_ids
    from multiturn_trainer.sft import SftResult, run_sft
    from multiturn_trainer.tiny_model import build_tiny_model, load_pretrained

    base = build_tiny_model(tmp_path / "base", kind="dense", seed=0)
    completions = ["```js\nbackground(250);\n```", "```js\n" + "brush.circle(300, 300, 40);\n" * 6 + "```"]
    examples = [{"subject": "a pond", "prompt_messages": first_turn_messages("a pond"), "completion": c} for c in completions]
    result = run_sft(str(base), tmp_path / "tuned", examples, epochs=1, batch_size=2, quiet=True)
    _, processor = load_pretrained(str(base))
    assert result.reply_tokens == [len(reply_ids(processor, c)) for c in completions]

    taught = [300, 900, 600]
    monkeypatch.setattr(resources, "warm_start_tiny", lambda *a, **k: SftResult(tmp_path, 1, 1.0, 0.5, taught))
    config = TrainConfig(model=str(tmp_path / "painter"), tiny_model="dense", tiny_warm_start_steps=1, max_completion_length=512)
    resources.build_tiny(config, tmp_path / "painter")
    assert "2 of 3 warm-start replies (the longest 900 tokens) are longer than max_completion_length 512" in capsys.readouterr().out
    taught = [300, 400]
    resources.build_tiny(config, tmp_path / "painter")
    assert "warm-start replies" not in capsys.readouterr().out
