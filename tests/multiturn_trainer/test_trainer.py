"""The multi-turn GRPO trainer on tiny Qwen3.5 models (dense and MoE), real renders, real rewards.

The tiny models paint only after a warm start, so each module-scoped ``policy`` is the tiny
model fine-tuned (``run_sft``, the product's SFT) on a handful of small sketches: enough that
its sampled sketches render, so turn >= 2 prompts carry real paintings.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from PIL import Image

from env.errors import UsageError
from helpers import ROOT, SMALL_SKETCH, running_server, tiny_config
from env.bench_serve import free_port
from env.client import png_bytes, turn_from_wire
from env.contract import SketchContract
from env.core import SketchOutcome
from env.environment import WatercolourEnvironment
from env.models import WatercolourAction
from env.server import create_app
from env.turn import EpisodeSketch, turn_observation
from multiturn_trainer.config import GRPO_FIELDS, TrainConfig, load_config, parse_config, parse_overrides
from multiturn_trainer.env_backends import InProcessEnvironments, RemoteEnvironments
from multiturn_trainer.episodes import EpisodeTokens, environment_turn, generation_fields, loss_image_inputs
from multiturn_trainer.grpo import TRL_PIN, check_trl_pin
from multiturn_trainer.replay import load_run, verify, write_html_gallery
from multiturn_trainer.rollout import EpisodeRunner
from multiturn_trainer.sft import sft_labels, tokenize_example
from multiturn_trainer.store import RunStore, turn_statistics
from multiturn_trainer.tiny_model import build_tiny_model, load_pretrained
from multiturn_trainer.resources import scorer_for
from multiturn_trainer.train import PushError, build_trainer, prepare_run, push_adapter, train
from agent.messages import first_turn_messages
from agent.policies import PolicyReply

def run_one_step(config: TrainConfig, environments):
    """Build the trainer and run one generation + loss step by hand, keeping the internals visible."""
    store, _ = prepare_run(config)
    trainer = build_trainer(config, store, environments=environments)
    trainer.model.train()
    rows = [dict(row) for row in trainer.train_dataset.select(range(1)) for _ in range(config.num_generations)]
    output = trainer._generate_and_score_completions(rows)
    return trainer, store, output


# --- the pin and the config ------------------------------------------------------------------


def test_trl_is_pinned_to_the_version_whose_internals_we_override():
    import trl

    check_trl_pin()
    assert trl.__version__ == TRL_PIN
    assert f'"trl=={TRL_PIN}"' in (ROOT / "pyproject.toml").read_text()


def test_config_loads_presets_and_command_line_overrides(tmp_path):
    smoke = load_config(ROOT / "configs" / "smoke.yaml")
    assert smoke.reward_preset == "style-offline" and smoke.tiny_model == "dense"
    overrides = parse_overrides(["--steps", "3", "--turns=1", "--output-dir", str(tmp_path), "--enable-thinking",
                                 "--subjects", "a pear, a plum", "--micro-batch-size", "none"])
    config = load_config(ROOT / "configs" / "smoke.yaml", overrides)
    assert (config.steps, config.turns, config.output_dir) == (3, 1, str(tmp_path))
    assert config.enable_thinking is True and config.subjects == ["a pear", "a plum"]
    assert config.micro_batch_size is None
    with pytest.raises(ValueError, match="unknown option --stepz"):
        parse_overrides(["--stepz", "3"])
    with pytest.raises(ValueError, match="turns must be >= 1"):
        load_config(None, {"turns": "0"})
    with pytest.raises(ValueError, match="micro_batch_size"):
        TrainConfig(num_generations=4, micro_batch_size=3)
    for preset in ("smoke", "demo", "qwen3.5-35b-a3b", "qwen3.5-35b-a3b-2gpu", "qwen3.5-4b", "qwen3.5-4b-single-turn"):
        loaded = load_config(ROOT / "configs" / f"{preset}.yaml")
        assert loaded.steps >= 1



def test_yaml_and_command_line_values_mean_the_same_through_one_parser(tmp_path):
    for preset in ("smoke", "demo", "learn", "qwen3.5-35b-a3b", "qwen3.5-35b-a3b-2gpu", "qwen3.5-4b",
                   "qwen3.5-4b-single-turn"):
        path = ROOT / "configs" / f"{preset}.yaml"
        assert load_config(path) == parse_config(["--config", str(path)]), preset
    pears = ["a pear", "a plum"]
    assert parse_config(["--subjects", "a pear,a plum"]).subjects == pears  # one comma-separated value
    assert parse_config(["--subjects", "a pear", "a plum"]).subjects == pears  # TRL's space-separated values
    listed = tmp_path / "listed.yaml"
    listed.write_text("subjects: a pear, a plum\nbf16: true\njudge_url: none\n")
    assert load_config(listed).subjects == pears and load_config(listed).judge_url is None
    assert parse_config(["--config", str(listed), "--bf16", "none"]).bf16 is None  # "auto" again
    assert load_config(listed, {"bf16": None}).bf16 is None
    assert parse_config(["--bf16"]).bf16 is True and parse_config(["--bf16", "false"]).bf16 is False
    assert parse_config(["--judge-url", "none", "--report-to", "none"]).judge_url is None
    assert parse_config(["--report-to", "none"]).report_to == "none"  # a str that is not optional stays
    assert parse_config(["--lora", "false"]).lora is False and parse_config(["--no-lora"]).lora is False
    aliased = parse_config(["--max-steps", "3", "--out", str(tmp_path / "x")])
    assert (aliased.steps, aliased.output_dir) == (3, str(tmp_path / "x"))
    assert parse_config(["--config=configs/demo.yaml"]) == load_config(ROOT / "configs" / "demo.yaml")
    with pytest.raises(ValueError, match="invalid int value: 'abc'"):
        parse_config(["--steps", "abc"])


def test_renamed_keys_name_the_new_key_and_recorded_configs_still_load(tmp_path):
    recorded = tmp_path / "config.yaml"  # a RUN_DIR/config.yaml written before the rename
    text = TrainConfig(steps=4).to_yaml()
    assert "held_out_eval_steps: 0\n" in text and "push_adapter_to: null\n" in text
    recorded.write_text(text.replace("held_out_eval_steps:", "eval_steps:").replace("push_adapter_to:", "push_to_hub:"))
    assert load_config(recorded) == TrainConfig(steps=4)
    for line, new in (("eval_steps: 5", "held_out_eval_steps"), ("push_to_hub: true", "push_adapter_to")):
        used = tmp_path / "used.yaml"
        used.write_text(line + "\n")
        with pytest.raises(ValueError, match=f"renamed {new}"):
            load_config(used)
    with pytest.raises(ValueError, match="renamed --held-out-eval-steps"):
        parse_config(["--eval-steps", "0"])
    with pytest.raises(ValueError, match="renamed --push-adapter-to"):
        parse_overrides(["--push-to-hub", "someone/repo"])
    with pytest.raises(ValueError, match="renamed held_out_eval_steps"):
        load_config(None, {"eval_steps": 2})


def test_credit_is_checked_and_per_turn_credit_scores_every_turn():
    assert TrainConfig(turns=3).scored_turns() == [1, 3]
    assert TrainConfig(turns=3, credit="reward_to_go").scored_turns() == [1, 2, 3]
    assert TrainConfig(turns=3, credit="turn").scored_turns() == [1, 2, 3]
    assert TrainConfig(turns=3, credit="turn_then_to_go").scored_turns() == [1, 2, 3]
    assert parse_config(["--credit", "reward_to_go"]).credit == "reward_to_go"
    assert parse_config(["--credit", "turn"]).credit == "turn"
    with pytest.raises(ValueError, match="credit must be"):
        TrainConfig(credit="token")
    with pytest.raises(ValueError, match="needs reward_turn last"):
        TrainConfig(credit="reward_to_go", reward_turn="best")
    with pytest.raises(ValueError, match="needs reward_turn last"):
        TrainConfig(credit="turn_then_to_go", reward_turn="best")


def test_grpo_config_takes_the_fields_it_shares_from_one_list(tmp_path):
    import dataclasses

    from trl import GRPOConfig

    from multiturn_trainer.train import grpo_args

    trl_fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    assert set(GRPO_FIELDS) <= trl_fields and len(set(GRPO_FIELDS)) == len(GRPO_FIELDS)
    for preset in ("smoke", "qwen3.5-4b"):  # HF generate, and vLLM colocate
        config = load_config(ROOT / "configs" / f"{preset}.yaml", {"output_dir": str(tmp_path / preset)})
        args = grpo_args(config, RunStore(tmp_path / preset, preset))
        passed = {name: getattr(args, name) for name in GRPO_FIELDS}
        assert passed == {name: getattr(config, name) for name in GRPO_FIELDS}
        assert (args.max_steps, args.data_seed) == (config.steps, config.seed)

def test_model_presets_follow_the_public_recipe():
    big = load_config(ROOT / "configs" / "qwen3.5-35b-a3b.yaml")
    assert big.model == "Qwen/Qwen3.5-35B-A3B"
    assert (big.learning_rate, big.lr_scheduler_type, big.warmup_steps, big.scale_rewards) == (
        5e-5, "constant_with_warmup", 5, "none")
    assert (big.num_generations, big.steps, big.lora_target_modules) == (8, 110, "all-linear")
    # Not the recipe's top-p 0.95 / top-k 20: under vLLM with importance sampling the presets
    # sample untruncated, so sampler and trainer log-probs mean the same (tests/multiturn_trainer/test_vllm_real.py).
    assert not big.use_vllm and (big.top_p, big.top_k) == (1.0, 0)  # one card: HF generate (memory plan)
    for preset in (load_config(ROOT / "configs" / "qwen3.5-35b-a3b-2gpu.yaml"),
                   load_config(ROOT / "configs" / "qwen3.5-4b.yaml"),
                   load_config(ROOT / "configs" / "qwen3.5-4b-single-turn.yaml")):
        assert preset.use_vllm and (preset.top_p, preset.top_k) == (1.0, 0)
        assert preset.vllm_importance_sampling_mode == "token_truncate"
    assert big.lora_vision is False
    small = load_config(ROOT / "configs" / "qwen3.5-4b.yaml")
    assert small.model == "Qwen/Qwen3.5-4B"
    single = load_config(ROOT / "configs" / "qwen3.5-4b-single-turn.yaml")
    assert single.turns == 1


# --- episode tokens ------------------------------------------------------------------------------


@pytest.mark.slow  # warm-started tiny policy
def test_environment_turn_tokens_carry_the_painting_and_close_a_truncated_turn(dense_policy):
    _, processor = load_pretrained(dense_policy)
    painting = Image.new("RGB", (600, 600), (200, 60, 50))
    content = [{"type": "text", "text": "Your painting from turn 1:"}, {"type": "image", "image": painting},
               {"type": "text", "text": "Turn 1 of 2: your sketch passed the gate."}]
    ended = environment_turn(processor, content, True, {"enable_thinking": False})
    text = processor.tokenizer.decode(ended.ids)
    assert text.startswith("\n<|im_start|>user\nYour painting from turn 1:<|vision_start|>")
    assert text.endswith("<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert ended.ids.count(pad) == int(ended.image_grid_thw.prod()) // 4 > 0
    cut = environment_turn(processor, content, False, {"enable_thinking": False})
    assert processor.tokenizer.decode(cut.ids).startswith("<|im_end|>\n<|im_start|>user")

    episode = EpisodeTokens([1, 2, 3])
    episode.add_policy([4, 5])
    episode.add_environment(ended)
    episode.add_policy([6])
    assert episode.env_mask == [1, 1] + [0] * len(ended.ids) + [1]
    fields = generation_fields([episode], pad)
    assert sum(fields["mm_token_type_ids"][0]) == ended.ids.count(pad)
    batch = torch.tensor([episode.context()])
    inputs = loss_image_inputs([episode], batch, pad)
    assert inputs["num_images"] == [1] and inputs["mm_token_type_ids"].sum() == ended.ids.count(pad)
    truncated = batch.clone()
    truncated[0, episode.context().index(pad)] = 1  # one image token lost, e.g. to a budget cut
    with pytest.raises(ValueError, match="image tokens"):
        loss_image_inputs([episode], truncated, pad)


# --- one step end to end ------------------------------------------------------------------------


def _sequence_logps(model, ids: list[int], fields: dict, start: int, end: int, temperature: float) -> torch.Tensor:
    """Log-probs of ids[start:end] given everything before, as a sampler with these inputs sees them."""
    kwargs = {}
    if fields:
        kwargs = {"pixel_values": fields["pixel_values"], "image_grid_thw": fields["image_grid_thw"],
                  "mm_token_type_ids": torch.tensor([fields["mm_token_type_ids"][0][:end]])}
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids[:end]]), **kwargs).logits[0].float() / temperature
    logps = torch.log_softmax(logits[start - 1:end - 1], dim=-1)
    return logps.gather(1, torch.tensor(ids[start:end]).unsqueeze(1)).squeeze(1)


@pytest.mark.slow  # warm-started tiny policy
@pytest.mark.parametrize("kind,turns,reward_turn", [("dense", 2, "last"), ("dense", 3, "best"), ("moe", 2, "last")])
def test_multi_turn_step_shows_the_policy_its_painting_and_trains_on_its_tokens_only(
        kind, turns, reward_turn, dense_policy, moe_policy, environments, tmp_path):
    policy = dense_policy if kind == "dense" else moe_policy
    # The MoE case keeps the load-balancing loss on (off by default while the router is frozen)
    # so its path stays exercised for users who adapt the router.
    moe = {"lora_experts": True, "router_aux_loss_coef": 0.001} if kind == "moe" else {}
    config = tiny_config(policy, tmp_path / "run", turns=turns, reward_turn=reward_turn, **moe)
    trainer, store, output = run_one_step(config, environments)
    [record_a, record_b] = store.read_episodes()
    for record in (record_a, record_b):
        assert len(record["turns"]) == turns
        assert [t["turn"] for t in record["turns"]] == list(range(1, turns + 1))
        scored = [t["reward"] for t in record["turns"] if t["reward"] is not None]
        if reward_turn == "best":  # every turn scored, the best one rewarded
            assert len(scored) == turns and record["reward"] == max(scored)
        else:
            assert record["rewarded_turn"] == turns and record["reward"] == record["turns"][-1]["reward"]
    episodes = [e.tokens for e in trainer.last_episode_batch.episodes]
    pad = trainer._image_pad_token_id
    rendered = [[t["png"] is not None for t in r["turns"]] for r in (record_a, record_b)]
    assert any(any(r[:-1]) for r in rendered), "the warm-started policy should paint in turn 1"
    for episode, painted in zip(episodes, rendered):
        # Every painting of turns 1..K-1 comes back as an image in the next user turn.
        assert len(episode.images) == sum(painted[:-1])
        ids = episode.completion_ids
        image_positions = [i for i, t in enumerate(ids) if t == pad]
        assert all(episode.env_mask[i] == 0 for i in image_positions)
    # Environment tokens are masked out of the loss, the policy's are in it.
    tool_mask = output["tool_mask"]
    completion = output["completion_ids"]
    assert ((completion == pad) & (tool_mask == 1)).sum() == 0
    assert tool_mask.sum() < output["completion_mask"].sum()
    # The paintings reach the loss pass: pixel values and one mm token per image feature.
    assert "pixel_values" in output and output["num_images"] == [len(e.images) for e in episodes]
    assert output["mm_token_type_ids"].sum() == sum(len([t for t in e.completion_ids if t == pad]) for e in episodes)
    calls = []
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps  # set by train()
    hook = trainer.model.get_base_model().model.visual.register_forward_hook(lambda *a: calls.append(1))
    loss = trainer.compute_loss(trainer.model, output)
    hook.remove()
    loss.backward()
    assert torch.isfinite(loss) and calls, "the vision tower must run in the loss pass"
    if kind == "moe":
        assert trainer.aux_loss_enabled
        assert any("experts" in n and "lora" in n for n, _ in trainer.model.named_parameters())

    # Sampling and training see the same thing: the log-probs of turn k's tokens given the
    # generation-time context (with its images) equal those of the single training pass.
    model = trainer.model
    model.eval()
    prompt_len = output["prompt_mask"].shape[1]
    full = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
    attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
    with torch.no_grad():
        trained = trainer._get_per_token_logps_and_entropies(
            model, full, attention, output["completion_ids"].shape[1], pixel_values=output["pixel_values"],
            image_grid_thw=output["image_grid_thw"], num_images=output["num_images"],
            mm_token_type_ids=output["mm_token_type_ids"])[0]
    row = max(range(len(episodes)), key=lambda i: len(episodes[i].images))
    episode = episodes[row]
    ids = episode.context()
    last_turn_start = len(episode.prompt_ids) + max(i for i, m in enumerate(episode.env_mask) if m == 0) + 1
    sampled = _sequence_logps(model, ids, generation_fields([episode], pad), last_turn_start, len(ids),
                              trainer.temperature)
    pad_left = prompt_len - len(episode.prompt_ids)
    offset = last_turn_start - len(episode.prompt_ids)
    training = trained[row, offset:offset + len(sampled)]
    assert torch.allclose(sampled, training, atol=1e-4), (sampled - training).abs().max()
    assert pad_left >= 0


@pytest.mark.slow  # warm-started tiny policy
@pytest.mark.parametrize("kind", ["dense", "moe"])
def test_single_turn_baseline_runs_the_same_path_without_images(kind, dense_policy, moe_policy, environments, tmp_path):
    config = tiny_config(dense_policy if kind == "dense" else moe_policy, tmp_path / "run", turns=1)
    trainer, store, output = run_one_step(config, environments)
    records = store.read_episodes()
    assert all(len(r["turns"]) == 1 for r in records)
    assert "pixel_values" not in output
    assert bool((output["tool_mask"] == 1).all())


class FlakyStyle:
    """The real style scorer, failing (as a crashed scorer does) for every other painting."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = 0

    async def __call__(self, pngs, subjects):
        scores = await self.inner(pngs, subjects)
        self.calls += 1
        return [None if i % 2 == 0 else s for i, s in enumerate(scores)]


@pytest.mark.slow  # warm-started tiny policy
def test_unscorable_episodes_are_dropped_not_zeroed(dense_policy, environments, tmp_path):
    config = tiny_config(dense_policy, tmp_path / "run", turns=1, num_generations=4)
    store, _ = prepare_run(config)
    scorer = scorer_for(config)
    scorer.style = FlakyStyle(scorer.style)
    trainer = build_trainer(config, store, environments=environments, scorer=scorer)
    rows = [dict(row) for row in trainer.train_dataset.select(range(1)) for _ in range(4)]
    output = trainer._generate_and_score_completions(rows)
    records = store.read_episodes()
    gated = [r for r in records if r["components"]["gate"] == 1.0]
    for position, record in enumerate(records):
        if record["reward"] is None:
            assert output["advantages"][position] == 0
            assert output["tool_mask"][position].sum() == 0
    assert scorer.style.calls >= 1
    if gated:
        assert any(r["reward"] is None for r in records)
    metrics = trainer._last_step_metrics
    assert metrics["episode/dropped"] == sum(r["reward"] is None for r in records)
    # Each failed style call is counted (the gate-failed turns never asked for one).
    failed_turns = [t for r in records for t in r["turns"] if t["components"] and t["components"].get("style", 0) is None]
    assert metrics["failures/style"] == len(failed_turns) and metrics["failures/render"] == 0
    assert "failures/judge" not in metrics  # not in this mix


# --- whole runs ------------------------------------------------------------------------------------


@pytest.mark.slow  # warm-started tiny policy
def test_train_writes_the_run_directory_and_resumes_without_losing_or_repeating_episodes(
        dense_policy, environments, tmp_path):
    out = tmp_path / "run"
    config = tiny_config(dense_policy, out, steps=2, save_steps=1)
    summary = train(config, environments=environments)
    assert summary.steps == 2 and summary.episodes == 4
    assert (out / "config.yaml").is_file() and load_config(out / "config.yaml").steps == 2
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    expected = {"run", "step", "group", "index", "subject", "seed", "turns", "reward", "components", "references", "weights"}
    for record in records:
        assert expected <= set(record)
        assert set(record["components"]) >= {"gate", "length"}
        if record["components"]["gate"] == 1.0:  # a failed gate scores 0 without the costly scorers
            assert "style" in record["components"]
        for turn in record["turns"]:
            assert {"turn", "code", "png", "passed", "violations", "errors", "paint_fraction", "render_ms"} <= set(turn)
            if turn["png"]:
                assert (out / turn["png"]).read_bytes().startswith(b"\x89PNG")
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    for key in ("loss", "episode/reward_mean", "components/gate/mean", "gate_pass_rate", "coverage", "turn_gain",
                "time/generate", "time/render", "time/score", "time/train", "frac_reward_zero_std"):
        assert key in metrics[0], key
    for step in (1, 2):
        assert (out / "checkpoints" / f"step-{step}" / "adapter_model.safetensors").is_file()
        assert (out / "renders" / f"step-{step:05d}" / "contact_sheet.png").is_file()
    assert (out / "adapter" / "adapter_model.safetensors").is_file() and summary.gallery.is_file()

    # A kill after step 2's episodes were written but before its checkpoint: resume from step 1.
    import shutil

    shutil.rmtree(out / "checkpoints" / "step-2")
    resumed = train(tiny_config(dense_policy, out, steps=3, save_steps=1, resume=True), environments=environments)
    records = RunStore(out, "run").read_episodes()
    assert sorted(r["step"] for r in records) == [1, 1, 2, 2, 3, 3]
    assert len({r["episode_id"] for r in records}) == 6
    assert resumed.steps == 3
    with pytest.raises(UsageError, match="already holds a run"):
        prepare_run(tiny_config(dense_policy, out))

    # Replay: every recorded painting re-renders byte-identically; statistics by turn.
    store, config, episodes = load_run(out)
    counts = verify(store, config, episodes, evaluator=environments.evaluator)
    assert counts["different"] == 0 and counts["missing"] == 0
    assert counts["identical"] == sum(1 for e in episodes for t in e["turns"] if t["png"])
    rows = turn_statistics(episodes)
    assert [r["turn"] for r in rows] == [1, 2] and all(r["episodes"] == 6 for r in rows)
    check_gallery_in_chromium(write_html_gallery(store, episodes, tmp_path / "gallery.html"), episodes)


def check_gallery_in_chromium(path: Path, episodes) -> None:
    """Open the HTML gallery from the file system in real Chromium: every painting loads."""
    from playwright.sync_api import sync_playwright

    from env.renderer import find_chromium

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=find_chromium())
        try:
            page = browser.new_page()
            page.goto(path.as_uri())
            counts = page.evaluate("""() => ({
                episodes: document.querySelectorAll('.episode').length,
                turns: document.querySelectorAll('.turn').length,
                images: document.images.length,
                loaded: [...document.images].filter(i => i.complete && i.naturalWidth > 0).length,
            })""")
            # The step slider shows one step at a time; "all" brings every step back.
            steps = page.locator("section.step").count()
            page.locator("#step-slider").fill(str(steps - 1))
            visible_after_slide = page.evaluate("() => [...document.querySelectorAll('section.step')]"
                                                ".filter(s => !s.hidden).map(s => s.id)")
            page.click("#show-all")
            visible_after_all = page.locator("section.step:not([hidden])").count()
            screenshot = page.screenshot(full_page=False)
        finally:
            browser.close()
    assert counts["episodes"] == len(episodes)
    assert counts["turns"] == sum(len(e["turns"]) for e in episodes)
    assert counts["images"] == counts["loaded"] == sum(1 for e in episodes for t in e["turns"] if t["png"])
    assert visible_after_slide == [f"step-{max(e['step'] for e in episodes)}"]
    assert visible_after_all == steps == len({e["step"] for e in episodes})
    assert screenshot.startswith(b"\x89PNG")


@pytest.mark.slow  # 10 s
def test_train_command_line_runs_the_smoke_preset(dense_policy, tmp_path):
    out = tmp_path / "cli-run"
    completed = subprocess.run(
        [sys.executable, "-m", "watercolour.cli", "train", "--config", "configs/smoke.yaml", "--model", str(dense_policy),
         "--tiny-model", "none", "--steps", "1", "--turns", "2", "--num-generations", "2",
         "--max-completion-length", "200", "--output-dir", str(out), "--report-to", "none", "--renderers", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "step 1/1" in completed.stderr + completed.stdout
    records = RunStore(out, "x").read_episodes()
    assert len(records) == 2 and all(len(r["turns"]) == 2 for r in records)


@pytest.mark.slow  # 10 s
def test_first_cli_run_announces_the_tiny_model_and_keeps_trackio_in_the_run_directory(tmp_path):
    """A fresh model folder: one line says what is built before it is; trackio's metrics and
    each step's contact sheet land in RUN_DIR/trackio, found from there by trackio's own CLI."""
    import os

    out = tmp_path / "first-run"
    env = {k: v for k, v in os.environ.items() if k != "TRACKIO_DIR"}
    env["HF_HOME"] = str(tmp_path / "hf-home")  # trackio's fallback home: must stay empty
    completed = subprocess.run(
        [sys.executable, "-m", "watercolour.cli", "train", "--config", "configs/smoke.yaml",
         "--model", str(tmp_path / "fresh-tiny"), "--tiny-warm-start-steps", "0", "--steps", "1", "--turns", "2",
         "--num-generations", "2", "--max-completion-length", "64", "--output-dir", str(out),
         "--report-to", "trackio", "--renderers", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=env,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "train: building the tiny offline dense model in" in completed.stdout
    assert "falling back to its reference PyTorch implementation" not in completed.stderr
    assert not (tmp_path / "hf-home" / "trackio").exists()
    trackio_env = {**env, "TRACKIO_DIR": str(out / "trackio")}
    trackio = [str(Path(sys.executable).parent / "trackio"), "list"]
    projects = subprocess.run(trackio + ["projects"], capture_output=True, text=True, env=trackio_env, timeout=120)
    assert "watercolour" in projects.stdout, projects.stdout + projects.stderr
    metrics = subprocess.run(trackio + ["metrics", "--project", "watercolour", "--run", "first-run", "--json"],
                             capture_output=True, text=True, env=trackio_env, timeout=120)
    assert metrics.returncode == 0, metrics.stderr
    assert "train/loss" in metrics.stdout and "train/contact_sheet" in metrics.stdout, metrics.stdout
    logged = list((out / "trackio" / "media").rglob("*.png"))
    assert len(logged) == 1 and logged[0].read_bytes() == (out / "renders" / "step-00001" / "contact_sheet.png").read_bytes()


@pytest.mark.slow  # 23 s
def test_trainer_killed_with_sigkill_mid_step_resumes_without_losing_or_repeating_episodes(dense_policy, tmp_path):
    import signal

    out = tmp_path / "killed"
    command = [sys.executable, "-m", "watercolour.cli", "train", "--config", "configs/smoke.yaml",
               "--model", str(dense_policy), "--tiny-model", "none", "--steps", "3", "--save-steps", "1",
               "--turns", "2", "--num-generations", "2", "--max-completion-length", "200",
               "--output-dir", str(out), "--report-to", "none", "--renderers", "1"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 400
        while not (out / "checkpoints" / "step-1" / "trainer_state.json").is_file():
            assert process.poll() is None, process.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)  # in the middle of step 2: no clean-up of any kind
    finally:
        process.kill()
        process.wait()
    before = RunStore(out, "x").read_episodes()
    assert {r["step"] for r in before} <= {1, 2}
    resumed = subprocess.run(command + ["--resume"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resume: continuing" in resumed.stdout
    records = RunStore(out, "x").read_episodes()
    assert sorted(r["step"] for r in records) == [1, 1, 2, 2, 3, 3]
    assert len({r["episode_id"] for r in records}) == 6
    assert [m["step"] for m in RunStore(out, "x").read_metrics()] == [1, 2, 3]
    assert RunStore(out, "x").latest_checkpoint().name == "step-3"


def test_remote_environments_spread_sessions_over_servers(evaluator):
    reply = f"```js\n{SMALL_SKETCH}```"
    with running_server(create_app(evaluator, max_sessions=4)) as first, \
            running_server(create_app(evaluator, max_sessions=4)) as second:
        remote = RemoteEnvironments([first, second])
        try:
            remote.reset(["a", "b", "c"], [1, 2, 3], turns=2)
            observations = remote.step([reply, reply, "no code here"], turn=1)
            assert [o.passed for o in observations] == [True, True, False]
            assert observations[0].png.startswith(b"\x89PNG") and observations[2].png is None
            assert "no_code" in observations[2].violations and "Turn 1 of 2" in observations[0].feedback
        finally:
            remote.close()
    dead = RemoteEnvironments(["http://127.0.0.1:9"], reconnect_attempts=2, reconnect_delay_s=0.1)
    try:
        dead.reset(["a"], [1], turns=1)
        [observation] = dead.step([reply], turn=1)
        assert observation.infrastructure_failed and observation.png is None
    finally:
        dead.close()


def test_remote_episodes_survive_a_server_restart_and_report_a_server_that_stays_down(evaluator):
    reply = f"```js\n{SMALL_SKETCH}```"
    port = free_port()
    remote = RemoteEnvironments([f"http://127.0.0.1:{port}"], reconnect_attempts=2, reconnect_delay_s=0.2)
    try:
        with running_server(create_app(evaluator, max_sessions=4), port=port):
            remote.reset(["a pear", "a lake"], [1, 2], turns=3)
            first = remote.step([reply, reply], turn=1)
        # The server is gone and comes back on the same port: every session is reopened and
        # replayed to turn 1 (deterministic renders), then turn 2 goes through.
        with running_server(create_app(evaluator, max_sessions=4), port=port):
            second = remote.step([reply, "no code here"], turn=2)
            assert remote.reconnects == 2
            assert not any(o.infrastructure_failed for o in second)
            assert second[0].passed and second[0].png == first[0].png and "Turn 2 of 3" in second[0].feedback
            assert "no_code" in second[1].violations
        # Down for good: reported as an infrastructure failure (reward None), never a bad painting.
        third = remote.step([reply, reply], turn=3)
        assert all(o.infrastructure_failed and o.png is None for o in third)
        assert all("reconnecting" in o.errors[0] for o in third)
    finally:
        remote.close()


class _EvaluatorThatRaises:
    """Stands in for a SketchEvaluator whose event-loop thread has died: ``evaluate_many`` raises."""

    def __init__(self):
        self.calls = []

    def evaluate_many(self, replies, seeds, deadline_s=None, currents=None):
        self.calls.append((list(replies), list(seeds), deadline_s))
        raise RuntimeError("renderer loop is closed")


class _Painter:
    """A message policy that always answers with the same reply."""

    works_on = "messages"

    def __init__(self, reply):
        self.reply_text = reply

    def reply(self, conversations):
        return [PolicyReply(text=self.reply_text) for _ in conversations]


class _NeverScores:
    def score_many_sync(self, paintings):
        raise AssertionError(f"an infrastructure failure was sent to the scorer: {len(paintings)} paintings")


def test_in_process_environments_report_an_evaluator_that_raises_as_infrastructure_failures():
    reply = f"```js\n{SMALL_SKETCH}```"
    evaluator = _EvaluatorThatRaises()
    environments = InProcessEnvironments(evaluator=evaluator, deadline_s=5)
    environments.reset(["a pear", "a lake"], [1, 2], turns=2)
    observations = environments.step([reply, "no code here"], turn=1)
    assert evaluator.calls == [([reply, "no code here"], [1, 2], 5)]
    message = "evaluator_failed: RuntimeError: renderer loop is closed"
    for observation in observations:  # every episode of the call, as the server reports it
        assert observation.infrastructure_failed and not observation.passed and observation.png is None
        assert observation.violations == ["infrastructure_error"]
        assert observation.errors == [message] and observation.infrastructure_error == message
        assert (observation.turn, observation.turns_left) == (1, 1)
        assert observation.feedback.startswith("Turn 1 of 2: the renderer failed for reasons unrelated to your sketch")

    # Downstream the rollouts are dropped: never scored, reward None (not 0).
    rows = [{"prompt": first_turn_messages(subject), "subject": subject, "seed": seed}
            for subject, seed in (("a pear", 1), ("a lake", 2))]
    batch = EpisodeRunner(None, environments, _NeverScores(), turns=2).run(_Painter(reply), rows)
    assert batch.rewards == [None, None] and len(evaluator.calls) == 3


class _FixedEvaluator:
    """A SketchEvaluator that reports the same outcome for every reply, on both paths."""

    contract = SketchContract()

    def __init__(self, result):
        self.result = result

    def evaluate(self, reply, seed=0, deadline_s=None, current=None):
        return self.result

    async def evaluate_async(self, reply, seed=0, deadline_s=None, current=None):
        return self.result

    def evaluate_many(self, replies, seeds, deadline_s=None, currents=None):
        return [self.result for _ in replies]


@pytest.mark.parametrize("result", [
    SketchOutcome(code="brush.circle(0, 0, 5)", passed=True, violations=[], errors=[], paint_fraction=0.12,
                  render_ms=812, png=b"\x89PNG\r\n\x1a\nnot really", details=[], stats={"brush_calls": 3},
                  rendered=True),
    SketchOutcome(code="x(", passed=False, violations=["render_error"], errors=["TypeError: x is not a function"],
                  paint_fraction=0.0, render_ms=40, png=None, details=["line 1: x("], rendered=True),
    SketchOutcome(code=None, passed=False, violations=[], errors=[], paint_fraction=0.0, render_ms=0, png=None,
                  infrastructure_error="browser_start_failed: no display"),
], ids=["passed", "failed", "infrastructure"])
def test_environment_server_and_in_process_paths_report_a_turn_alike(result):
    """The OpenEnv server's observation and the trainer's in-process record come from one function."""
    evaluator = _FixedEvaluator(result)
    server = WatercolourEnvironment(evaluator=evaluator)
    server.reset(subject="a pear", seed=1, turns=3)
    environments = InProcessEnvironments(evaluator=evaluator)
    environments.reset(["a pear"], [1], turns=3)
    expected_sketch = EpisodeSketch()
    for turn in (1, 2):
        wire = server.step(WatercolourAction(response="anything"))
        [record] = environments.step(["anything"], turn)
        assert record == turn_observation(result, turn, 3, SketchContract(),
                                          sketch=expected_sketch.advance("anything", result))
        assert (wire.code, wire.show_code) == (record.code, record.show_code)
        assert png_bytes(wire) == record.png
        assert turn_from_wire(wire) == record  # the remote backend's way back from the wire
        assert (wire.turn, wire.turns_left, wire.feedback, wire.passed, wire.violations, wire.errors,
                wire.paint_fraction, wire.render_ms) == (
                    record.turn, record.turns_left, record.feedback, record.passed, record.violations, record.errors,
                    record.paint_fraction, record.render_ms)
        assert {key: wire.metadata[key] for key in ("infrastructure_failed", "infrastructure_error",
                                                    "rendered", "details", "stats")} == {
            "infrastructure_failed": record.infrastructure_failed,
            "infrastructure_error": record.infrastructure_error, "rendered": record.rendered,
            "details": record.details, "stats": record.stats}
    assert record.infrastructure_failed == (result.infrastructure_error is not None)


@pytest.mark.slow  # warm-started tiny policy
def test_push_to_hub_offline_fails_with_a_clear_message(dense_policy, tmp_path, monkeypatch):
    from peft import LoraConfig, get_peft_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model, processor = load_pretrained(dense_policy)
    peft_model = get_peft_model(model, LoraConfig(r=2, target_modules="all-linear", exclude_modules=r".*\.visual\..*"))
    with pytest.raises(PushError, match="offline") as caught:
        push_adapter(SimpleNamespace(model=peft_model, processing_class=processor), "someone/watercolour-lora",
                     tmp_path / "adapter")
    assert "hf upload someone/watercolour-lora" in str(caught.value)


@pytest.mark.slow  # warm-started tiny policy
def test_sft_prompt_tokens_match_the_trainers_first_turn(dense_policy):
    _, processor = load_pretrained(dense_policy)
    example = {"prompt_messages": first_turn_messages("a red apple"), "completion": "```js\nx```"}
    episode = tokenize_example(processor, example)
    ids, labels = episode.context(), sft_labels(episode)
    prompt = processor.apply_chat_template([example["prompt_messages"]], add_generation_prompt=True, tokenize=True,
                                           return_dict=True, enable_thinking=False)["input_ids"][0]
    assert ids[:len(prompt)] == list(prompt)
    assert all(label == -100 for label in labels[:len(prompt)])
    assert labels[-1] == processor.tokenizer.eos_token_id


@pytest.mark.slow  # 11 s
def test_two_processes_run_their_own_groups_without_clashing(tmp_path):
    """The multi-process path `accelerate launch` takes on GPUs (torchrun + DDP), here over gloo on CPU.

    (accelerate's own CPU multi-process launcher needs MPI, which this machine does not have.)
    """
    out = tmp_path / "ddp"
    model = build_tiny_model(tmp_path / "tiny", kind="dense", seed=0)
    completed = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "watercolour.cli", "train", "--config", "configs/smoke.yaml", "--model", str(model),
         "--tiny-model", "none", "--steps", "1", "--turns", "2", "--num-generations", "2",
         "--max-completion-length", "32", "--output-dir", str(out), "--report-to", "none", "--renderers", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    records = RunStore(out, "ddp").read_episodes()
    assert len(records) == 4 and len({r["episode_id"] for r in records}) == 4
    assert {r["group"] for r in records} == {0, 1}
