"""Model families (multiturn_trainer/families.py): a text-only causal LM through the same episode
loop, SFT, trainer and eval as the Qwen3.5 VLMs. The text-only model here is a tiny random
``LlamaForCausalLM`` (SmolLM2's architecture, shrunk) with a trained tokenizer and SmolLM2's chat
template; build-pretrained's real SmolLM2 takes the same path."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
import torch
from PIL import Image

from agent.messages import append_turn, first_turn_messages, png_bytes, text_only_messages
from agent.policies import LocalModelPolicy
from env.errors import UsageError
from env.turn import TurnObservation
from helpers import SMALL_SKETCH, SUBJECTS, sketch_variant, tiny_config
from multiturn_trainer.episodes import EpisodeTokens, environment_turn, reply_ids
from multiturn_trainer.families import FAMILIES, TEXT, family_at, family_for_config, family_of
from multiturn_trainer.sft import run_sft
from multiturn_trainer.tiny_model import build_tiny_model, load_pretrained

NO_IMAGE = "this conversation is text only: there is no image of the painting"


@pytest.fixture(scope="module")
def tiny_text(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny-text"), kind="text", seed=0)


@pytest.fixture(scope="module")
def text_policy(tiny_text, tmp_path_factory):
    """The tiny text-only model warm-started (the product's SFT) on small sketches, so it paints."""
    rng = random.Random("text")
    examples = [{"subject": s, "prompt_messages": first_turn_messages(s), "completion": f"```js\n{sketch_variant(rng)}```"}
                for s in SUBJECTS for _ in range(4)]
    out = tmp_path_factory.mktemp("text-policy")
    result = run_sft(str(tiny_text), out, examples, epochs=30, learning_rate=5e-3, batch_size=4, quiet=True)
    assert result.last_loss < result.first_loss / 3
    return out


def test_each_model_type_has_one_family_and_a_vlm_without_an_entry_is_refused():
    assert family_for_config({"model_type": "qwen3_5"}) is FAMILIES["qwen3_5"]
    assert family_for_config({"model_type": "qwen3_5_moe"}) is FAMILIES["qwen3_5"]
    assert family_for_config({"model_type": "llama"}) is TEXT and family_for_config({"model_type": "gpt2"}) is TEXT
    with pytest.raises(UsageError, match="families.py"):
        family_for_config({"model_type": "idefics3", "vision_config": {"hidden_size": 8}})
    claimed = [t for family in FAMILIES.values() for t in family.model_types]
    assert len(claimed) == len(set(claimed))


def test_the_tiny_text_model_is_a_llama_with_a_tokenizer_and_smollm2s_template(tiny_text):
    assert family_at(tiny_text) is TEXT
    model, tokenizer = load_pretrained(tiny_text)
    assert type(model).__name__ == "LlamaForCausalLM" and family_of(model) is TEXT
    assert not hasattr(tokenizer, "image_processor") and tokenizer.eos_token == "<|im_end|>"
    assert json.loads((tiny_text / "tiny_model.json").read_text())["kind"] == "text"
    # Text-only templates take string contents; the family hands them those.
    with pytest.raises(Exception):
        tokenizer.apply_chat_template(first_turn_messages("a red apple"), tokenize=False)
    assert "<|im_start|>user\n" in tokenizer.apply_chat_template(TEXT.chat_messages(first_turn_messages("a red apple")),
                                                                 tokenize=False)


def test_the_chat_template_renders_every_turn_of_a_text_only_episode(tiny_text):
    """The episode's token sequence, built turn by turn as the loop builds it, is exactly the chat
    template's rendering of the whole conversation; every revision turn carries its feedback and
    (when the environment says so) the sketch, and says there is no image."""
    model, tokenizer = load_pretrained(tiny_text)
    policy = LocalModelPolicy(model, tokenizer, max_new_tokens=8, sees_images=False, image_pad_token=None)
    assert policy.image_pad_token_id is None
    painting = png_bytes(Image.new("RGB", (60, 60), (200, 60, 50)))
    turns = 3
    observations = [  # turn 1 painted, turn 2 painted nothing; turn 2 shows the sketch (an edit applied)
        TurnObservation(turn=1, turns=3, png=painting, passed=True, violations=[], errors=[],
                        paint_fraction=0.4, render_ms=5, feedback="Turn 1 of 3: your sketch passed the gate.",
                        code=SMALL_SKETCH, show_code=False),
        TurnObservation(turn=2, turns=3, png=None, passed=False, violations=["no_code"], errors=[],
                        paint_fraction=0.0, render_ms=0, feedback="Turn 2 of 3: no sketch found (no_code).",
                        code=SMALL_SKETCH, show_code=True),
    ]
    replies = ["```js\n" + SMALL_SKETCH + "```", "I will paint it redder."]
    messages = first_turn_messages("a red apple")
    [prompt] = policy.prompt_ids([messages])
    episode = EpisodeTokens(prompt)
    for turn, (reply, seen) in enumerate(zip(replies, observations), start=1):
        episode.add_policy(reply_ids(tokenizer, reply))
        content = observation_content_for(seen, turn + 1, turns)
        episode.add_environment(environment_turn(tokenizer, content, True, policy.chat_template_kwargs))
        messages = append_turn(messages, reply, seen.png, seen.feedback, turn + 1, turns, "full",
                               seen.code if seen.show_code else None, sees_images=False)
    whole = tokenizer.apply_chat_template(TEXT.chat_messages(messages), add_generation_prompt=True, tokenize=False)
    assert tokenizer.decode(episode.context()) == whole
    assert episode.context() == tokenizer(whole, add_special_tokens=False)["input_ids"]
    rendered = tokenizer.decode(episode.completion_ids)
    assert rendered.count("<|im_start|>user\n") == 2 and rendered.count("<|im_start|>assistant\n") == 2
    assert NO_IMAGE in rendered  # turn 1 painted: said there is no image
    assert "produced no painting" in rendered  # turn 2 painted nothing: said so
    for seen in observations:
        assert seen.feedback in rendered
    assert rendered.count("brush.circle(130, 120, 35)") == 2  # the draft's reply, and the sketch shown at turn 3


def observation_content_for(seen, turn, turns):
    from agent.messages import observation_content

    return observation_content(seen, turn, turns, "full", sees_images=False)


def test_text_only_messages_refuse_an_image():
    with pytest.raises(ValueError, match="image"):
        text_only_messages([{"role": "user", "content": [{"type": "image", "image": Image.new("RGB", (4, 4))}]}])


@pytest.mark.slow  # warm-started tiny text policy (SFT), a GRPO step with renders, then a continuation
def test_a_text_only_causal_lm_trains_one_step_and_its_adapter_continues_the_run(text_policy, environments, tmp_path):
    from multiturn_trainer.continuation import continue_run
    from multiturn_trainer.store import RunStore
    from multiturn_trainer.train import train

    config = tiny_config(text_policy, tmp_path / "run", turns=2, max_completion_length=160)
    summary = train(config, environments=environments)
    assert summary.steps == 1 and summary.episodes == 2 and (summary.adapter / "adapter_config.json").is_file()
    episodes = RunStore(summary.run_dir, config.name).read_episodes()
    assert all([t["turn"] for t in e["turns"]] == [1, 2] for e in episodes)
    metrics = [json.loads(line) for line in (summary.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert metrics and all(torch.isfinite(torch.tensor(m["loss"])) for m in metrics if "loss" in m)
    # replay --continue-from: the trained adapter (merged onto the text-only base) writes turn 2
    # after turn 1's recorded reply, rendered again.
    result = continue_run(summary.run_dir, episodes, 2, summary.adapter, tmp_path / "continued",
                          environments=environments)
    assert result["episodes"] == 2 and result["prefix_identical"] == result["prefix_paintings"]
    continued = RunStore(tmp_path / "continued", config.name).read_episodes()
    assert [e["turns"][0]["reply"] for e in continued] == [e["turns"][0]["reply"] for e in episodes]
    assert all(len(e["turns"]) == 2 and e["continued_from"]["turn"] == 2 for e in continued)


@pytest.mark.slow  # warm-started tiny text policy, one GRPO step by hand
def test_the_trainer_shows_a_text_only_policy_no_image_and_trains_only_its_tokens(text_policy, environments, tmp_path):
    from multiturn_trainer.train import build_trainer, prepare_run

    config = tiny_config(text_policy, tmp_path / "run", turns=2, max_completion_length=160)
    store, _ = prepare_run(config)
    trainer = build_trainer(config, store, environments=environments)
    assert trainer.family is TEXT and trainer._image_pad_token_id is None
    trainer.model.train()
    rows = [dict(row) for row in trainer.train_dataset.select(range(1)) for _ in range(config.num_generations)]
    output = trainer._generate_and_score_completions(rows)
    assert "pixel_values" not in output and "mm_token_type_ids" not in output
    episodes = trainer.last_episode_batch.episodes
    tokenizer = trainer.processing_class
    for episode in episodes:
        assert episode.tokens.images == [] and 0 in episode.tokens.env_mask
        environment = tokenizer.decode([t for t, m in zip(episode.tokens.completion_ids, episode.tokens.env_mask)
                                        if m == 0])
        painted = episode.observations[0].png is not None
        assert (NO_IMAGE in environment) == painted and episode.observations[0].feedback in environment
    assert output["tool_mask"].sum() < output["completion_mask"].sum()
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps
    assert torch.isfinite(trainer.compute_loss(trainer.model, output))
    # Two episodes of equal reward carry no advantage; with one, the loss reaches the LoRA weights.
    output["advantages"] = torch.ones_like(output["advantages"])
    trainer.compute_loss(trainer.model, output).backward()
    grads = [p.grad for n, p in trainer.model.named_parameters() if "lora" in n and p.grad is not None]
    assert grads and any(g.abs().sum() > 0 for g in grads)


@pytest.mark.slow  # warm-started tiny text policy through `watercolour eval` (61 s)
def test_eval_runs_a_text_only_policy(text_policy, tmp_path, capsys):
    from watercolour.cli import main

    config_path = tmp_path / "eval.yaml"
    config_path.write_text(tiny_config(text_policy, tmp_path / "unused", renderers=2).to_yaml())
    out = tmp_path / "eval"
    assert main(["eval", "--policy", str(text_policy), "--config", str(config_path), "--subjects",
                 "a red apple;a blue pond", "--episodes", "1", "--turns", "2", "--max-tokens", "160",
                 "--one-format", "--out", str(out), "--no-progress"]) == 0
    report = json.loads((out / "eval.json").read_text())
    assert report["refine"]["episodes"] == 2 and report["independent"]["episodes"] == 4
    assert report["refine"]["tokens"] > 0
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    refine = [e for e in episodes if e["arm"] == "refine"]
    assert all(len(e["turns"]) == 2 for e in refine)


# --- the llava family: a vision tower and projector around a causal LM ----------------------

SMALL_VISION = dict(image_size=56, patch_size=14, hidden_size=32, layers=1, heads=2, intermediate_size=64)


@pytest.fixture(scope="module")
def vlm_policy(tiny_text, tmp_path_factory):
    """The tiny text model as the language model of a LLaVA-shaped VLM (what ``build-pretrained
    --vlm`` does with SmolLM2), warm-started by the product's SFT on first turns and on revisions
    whose user turn holds a painting: it paints, and its revision turns carry images."""
    from agent.messages import revision_content
    from multiturn_trainer.pretrained import VisionSizes, assemble_vlm

    base = assemble_vlm(tiny_text, tmp_path_factory.mktemp("vlm-base"), VisionSizes(**SMALL_VISION))
    # One small sketch, learnt by heart: a 0.5M-parameter model garbles varied ones, and this test
    # needs a turn 1 that renders so that turn 2 carries a painting.
    sketch = f"```js\n{SMALL_SKETCH}```"
    examples = [{"subject": s, "prompt_messages": first_turn_messages(s), "completion": sketch}
                for s in SUBJECTS for _ in range(6)]
    painting = png_bytes(Image.new("RGB", (120, 90), "#2050a0"))
    examples += [{"subject": s, "prompt_messages": first_turn_messages(s), "draft": "```js\nfunction setup() {```",
                  "environment": revision_content(painting, "Turn 1 of 2: your sketch did not parse.", 2, 2),
                  "completion": sketch} for s in SUBJECTS]
    out = tmp_path_factory.mktemp("vlm-policy")
    result = run_sft(str(base), out, examples, epochs=40, learning_rate=5e-3, batch_size=4, quiet=True)
    assert result.last_loss < result.first_loss / 3
    return out


def test_a_vlm_assembled_around_a_causal_lm_keeps_its_weights_and_counts_its_image_tokens(text_policy, tmp_path):
    from multiturn_trainer.pretrained import IMAGE_TOKEN, VisionSizes, assemble_vlm

    vision = VisionSizes(**SMALL_VISION)
    folder = assemble_vlm(text_policy, tmp_path / "vlm", vision)
    assert family_at(folder) is FAMILIES["llava"]
    model, processor = FAMILIES["llava"].load(folder, dtype="float32")
    language_model, _ = TEXT.load(text_policy, dtype="float32")
    old = language_model.get_input_embeddings().weight
    new = model.get_input_embeddings().weight
    assert new.shape[0] == old.shape[0] + 1 and torch.allclose(new[:-1], old.to(new.dtype), atol=1e-2)
    from multiturn_trainer.pretrained import _saved_parameters

    assert _saved_parameters(folder) == sum(p.numel() for p in model.parameters())  # what the build reports
    image = Image.new("RGB", (300, 200), "white")
    content = [{"type": "text", "text": "Your painting from turn 1:"}, {"type": "image", "image": image},
               {"type": "text", "text": "Turn 1 of 2: your sketch passed the gate."}]
    turn = environment_turn(processor, content, True)
    pad = processor.tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    assert turn.ids.count(pad) == turn.image_features == vision.image_tokens == 16
    assert tuple(turn.pixel_values.shape) == (1, 3, 56, 56) and turn.image_grid_thw is None


@pytest.mark.slow  # warm-started tiny text policy inside a VLM, one GRPO step with renders and images
def test_a_llava_vlm_trains_one_step_with_its_paintings_in_the_loss(vlm_policy, environments, tmp_path):
    from multiturn_trainer.store import RunStore
    from multiturn_trainer.train import train

    config = tiny_config(vlm_policy, tmp_path / "run", turns=2, max_completion_length=160, temperature=0.3,
                         revision_format="full")  # as the warm start's prompts
    summary = train(config, environments=environments)
    assert summary.steps == 1 and summary.episodes == 2
    episodes = RunStore(summary.run_dir, config.name).read_episodes()
    assert any(e["turns"][0]["passed"] for e in episodes), "the warm-started policy paints in turn 1"
    metrics = [json.loads(line) for line in (summary.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert any("loss" in m for m in metrics) and all(torch.isfinite(torch.tensor(m["loss"])) for m in metrics if "loss" in m)
    adapter = json.loads((summary.adapter / "adapter_config.json").read_text())
    assert "vision_tower" in str(adapter.get("exclude_modules"))
    # The same step by hand: the paintings of turn 1 reach the loss pass as pixel values, one
    # row per image, on exactly the image tokens of their turn.
    from multiturn_trainer.train import build_trainer, prepare_run

    store, _ = prepare_run(dataclasses.replace(config, output_dir=str(tmp_path / "by-hand")))
    trainer = build_trainer(config, store, environments=environments)
    assert trainer.family is FAMILIES["llava"] and trainer._image_pad_token_id is not None
    rows = [dict(row) for row in trainer.train_dataset.select(range(1)) for _ in range(config.num_generations)]
    output = trainer._generate_and_score_completions(rows)
    shown = [len(e.tokens.images) for e in trainer.last_episode_batch.episodes]
    assert sum(shown) > 0 and output["num_images"] == shown
    assert output["pixel_values"].shape[0] == sum(shown) and "image_grid_thw" not in output
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps
    output["advantages"] = torch.ones_like(output["advantages"])
    trainer.compute_loss(trainer.model, output).backward()
    grads = [p.grad for n, p in trainer.model.named_parameters() if "lora" in n and p.grad is not None]
    assert grads and any(g.abs().sum() > 0 for g in grads)


@pytest.mark.slow  # the VLM policy through `watercolour eval --blind` (renders, three arms)
def test_eval_runs_a_llava_policy_with_and_without_its_paintings(vlm_policy, tmp_path):
    from watercolour.cli import main

    config_path = tmp_path / "eval.yaml"
    config_path.write_text(tiny_config(vlm_policy, tmp_path / "unused", renderers=2, temperature=0.3,
                                       revision_format="full").to_yaml())
    out = tmp_path / "eval"
    assert main(["eval", "--policy", str(vlm_policy), "--config", str(config_path), "--subjects",
                 "a red apple;a blue pond", "--episodes", "1", "--turns", "2", "--max-tokens", "160",
                 "--one-format", "--blind", "--out", str(out), "--no-progress"]) == 0
    report = json.loads((out / "eval.json").read_text())
    assert report["refine"]["episodes"] == report["refine_blind"]["episodes"] == 2
    assert "refine_minus_refine_blind" in report and "blind_skipped" not in report


def test_the_chat_template_renders_every_turn_of_a_llava_episode(tiny_text, tmp_path):
    """A VLM episode built turn by turn as the loop builds it is the VLM's chat template's
    rendering of the whole conversation, each painting expanded to its run of image tokens."""
    from agent.messages import observation_content
    from multiturn_trainer.pretrained import IMAGE_TOKEN, VisionSizes, assemble_vlm

    vision = VisionSizes(**SMALL_VISION)
    folder = assemble_vlm(tiny_text, tmp_path / "vlm", vision)
    model, processor = FAMILIES["llava"].load(folder)
    policy = LocalModelPolicy(model, processor, max_new_tokens=8, image_pad_token=IMAGE_TOKEN)
    painting = png_bytes(Image.new("RGB", (60, 60), (200, 60, 50)))
    turns = 3
    observations = [
        TurnObservation(turn=1, turns=3, png=painting, passed=True, violations=[], errors=[],
                        paint_fraction=0.4, render_ms=5, feedback="Turn 1 of 3: your sketch passed the gate.",
                        code=SMALL_SKETCH, show_code=False),
        TurnObservation(turn=2, turns=3, png=painting, passed=True, violations=[], errors=[],
                        paint_fraction=0.4, render_ms=5, feedback="Turn 2 of 3: your sketch passed the gate.",
                        code=SMALL_SKETCH, show_code=False),
    ]
    replies = ["```js\n" + SMALL_SKETCH + "```", "```js\n" + SMALL_SKETCH + "```"]
    messages = first_turn_messages("a red apple")
    [prompt] = policy.prompt_ids([messages])
    episode = EpisodeTokens(prompt)
    for turn, (reply, seen) in enumerate(zip(replies, observations), start=1):
        episode.add_policy(reply_ids(processor, reply))
        content = observation_content(seen, turn + 1, turns, "full", sees_images=True)
        episode.add_environment(environment_turn(processor, content, True, policy.chat_template_kwargs))
        messages = append_turn(messages, reply, seen.png, seen.feedback, turn + 1, turns, "full", None)
    whole = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    pad = processor.tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    assert whole.count(IMAGE_TOKEN) == 2  # one placeholder per painting before the processor expands it
    expanded = whole.replace(IMAGE_TOKEN, IMAGE_TOKEN * vision.image_tokens)
    assert episode.context() == processor.tokenizer(expanded, add_special_tokens=False)["input_ids"]
    assert episode.context().count(pad) == episode.image_features == 2 * vision.image_tokens
    assert len(episode.images) == 2 and NO_IMAGE not in processor.tokenizer.decode(episode.completion_ids)
