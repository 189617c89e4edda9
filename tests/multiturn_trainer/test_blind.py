"""The blind ablation (``show_painting: false``): revision turns carry the feedback and the sketch
but not the painting, for every kind of policy; `watercolour eval --blind` and `bench learn`'s blind
arm report what seeing the painting adds.

Real components: a loopback OpenAI-compatible server answering with real sketches through
``EndpointPolicy``, a tiny (untrained) Qwen3.5 VLM through ``LocalModelPolicy``, the in-process
renderer and the offline reward preset."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.policies import LocalModelPolicy, PolicyReply
from fake_openai_server import FakeOpenAIServer, FakeReply
from helpers import SMALL_SKETCH, tiny_config
from multiturn_trainer.bench_learn import arm_lines, multi_minus_blind_line
from multiturn_trainer.config import load_config, parse_config
from multiturn_trainer.evaluation import blind_skip_reason, final_difference, run_eval, table
from multiturn_trainer.resources import episode_row
from multiturn_trainer.rollout import EpisodeRunner
from multiturn_trainer.tiny_model import build_tiny_model, load_pretrained

# What a revision turn says when it shows no painting (a text-only model's words, the blind arm's too).
NO_IMAGE = "this conversation is text only: there is no image of the painting"
SKETCH_REPLY = f"Here is the painting:\n```js\n{SMALL_SKETCH}```"


def test_show_painting_round_trips_through_yaml_and_the_command_line(tmp_path):
    config = tiny_config(tmp_path / "no-model", tmp_path / "run")
    assert config.show_painting is True  # seeing is the default
    blind = parse_config(["--config", "smoke", "--show-painting", "false"])
    assert blind.show_painting is False and parse_config(["--config", "smoke", "--no-show-painting"]) == blind
    recorded = tmp_path / "config.yaml"
    recorded.write_text(blind.to_yaml())
    assert "show_painting: false" in recorded.read_text() and load_config(recorded) == blind
    assert load_config(recorded, {"show_painting": True}).show_painting is True


def test_eval_blind_arm_sends_no_painting_and_reports_what_seeing_adds(environments, tmp_path, capsys, monkeypatch):
    """`watercolour eval --blind` against a served model (a message policy): the blind arm's revision
    request carries no image and says so; eval.json has the blind arm's figures and refine - blind."""
    from multiturn_trainer import evaluation
    from watercolour.cli import main

    # The session's renderer pool instead of a new one (the command would start its own).
    real_run_eval = evaluation.run_eval
    monkeypatch.setattr(evaluation, "run_eval", lambda *args, **options: real_run_eval(
        *args, environments=environments, **options))
    monkeypatch.setenv("WATERCOLOUR_ENDPOINT_TOKEN", "sekret")
    out = tmp_path / "eval"
    with FakeOpenAIServer(rule=lambda request: FakeReply.content(SKETCH_REPLY)) as server:
        assert main(["eval", "--endpoint", server.base_url, "--endpoint-model", "served-painter",
                     "--subjects", "a red apple", "--episodes", "1", "--turns", "2", "--one-format", "--blind",
                     "--max-tokens", "700", "--out", str(out), "--no-progress"]) == 0
        asked = server.chat_requests()
    # 1 slot: a 2-turn episode seeing, a 2-turn episode blind, 2 independent samples.
    assert len(asked) == 6
    revisions = [r for r in asked if len(r.body["messages"]) == 4]
    [seeing] = [r for r in revisions if r.image_urls]
    [blind] = [r for r in revisions if not r.image_urls]
    assert len(seeing.image_urls) == 1 and NO_IMAGE not in seeing.text
    assert NO_IMAGE in blind.text and "Turn 1 of 2" in blind.text  # the feedback, without the painting
    report = json.loads((out / "eval.json").read_text())
    arm = report["refine_blind"]
    assert report["show_painting"] is True and "blind_skipped" not in report
    assert arm["episodes"] == 1 and len(arm["reward_by_turn"]) == 2 and len(arm["final_by_slot"]) == 1
    assert arm["tokens"] > 0 and len(arm["tokens_by_turn"]) == 2
    for key in ("final_minus_best_at_equal_tokens", "samples_at_equal_tokens", "lines_from_previous"):
        assert set(arm[key]) == {"estimate", "low", "high", "n"}
    # The same sketch both times, so the same paintings: seeing added nothing here, slot for slot.
    difference = report["refine_minus_refine_blind"]
    assert difference["n"] == 1
    assert difference["estimate"] == pytest.approx(report["refine"]["final_by_slot"][0] - arm["final_by_slot"][0])
    printed = capsys.readouterr().out
    assert "edit revisions, blind: tokens by turn" in printed and "edit revisions: tokens by turn" in printed
    assert "seeing the painting: final, refine - refine_blind (paired by slot)" in printed
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert sorted({e["arm"] for e in episodes}) == ["independent", "refine", "refine_blind"]
    assert Path(report["plot"]).is_file()


class TextOnlyPainter:
    """A message policy for a text-only model: it says it sees no images, and checks it is shown none."""

    works_on = "messages"
    sees_images = False

    def reply(self, conversations):
        for conversation in conversations:
            assert all(part["type"] == "text" for message in conversation for part in message["content"])
        return [PolicyReply(SKETCH_REPLY, completion_tokens=5) for _ in conversations]


def test_eval_skips_the_blind_arm_where_the_policy_never_sees_the_painting(environments, tmp_path):
    config = tiny_config(tmp_path / "no-model", tmp_path / "run")
    report = run_eval(config, TextOnlyPainter(), ["a red apple"], 1, tmp_path / "eval", environments=environments,
                      progress=False, blind=True)
    assert "refine_blind" not in report and "refine_minus_refine_blind" not in report
    assert "text-only" in report["blind_skipped"]
    assert f"blind arm skipped: {report['blind_skipped']}" in table(report)
    # The other reasons: nothing to show with one turn; a blind config's refine arm is the blind arm.
    seeing = SimpleNamespace(works_on="messages")  # a policy that does not say it is text-only sees images
    assert "1 turn" in blind_skip_reason(tiny_config(tmp_path / "m", tmp_path / "r", turns=1), seeing)
    assert "blind already" in blind_skip_reason(tiny_config(tmp_path / "m", tmp_path / "r", show_painting=False),
                                                seeing)
    assert blind_skip_reason(config, seeing) is None


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory):
    """An untrained tiny Qwen3.5: it need not paint, turn 1 is a recorded sketch (4 s to build)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-vlm"), kind="dense", seed=0)


@pytest.mark.parametrize("show_painting", [True, False])
def test_a_token_policys_blind_revision_turn_has_no_image_tokens(tiny_vlm, environments, tmp_path, show_painting):
    """The local model (the trainer's TrainerPolicy takes the same path: its runner is built on the
    run's config): turn 2 opens with the painting's image tokens, or in the blind ablation with none
    and the words that say so."""
    config = tiny_config(tiny_vlm, tmp_path / "run", show_painting=show_painting)
    model, processor = load_pretrained(tiny_vlm)
    policy = LocalModelPolicy(model.eval(), processor, max_new_tokens=4, seed=0)
    rows = [episode_row(config, "a red apple", 5)]
    batch = EpisodeRunner(config, environments, None).run(policy, rows, recorded_replies=[[SKETCH_REPLY]])
    [episode] = batch.episodes
    assert episode.observations[0].passed and episode.observations[0].png
    environment = [token for token, mask in zip(episode.tokens.completion_ids, episode.tokens.env_mask) if not mask]
    shown = processor.tokenizer.decode(environment)
    image_tokens = environment.count(policy.image_pad_token_id)
    if show_painting:
        assert len(episode.tokens.images) == 1 and image_tokens > 0 and NO_IMAGE not in shown
    else:
        assert episode.tokens.images == [] and episode.tokens.pixel_values == [] and image_tokens == 0
        assert NO_IMAGE in shown and "Turn 1 of 2" in shown


def test_bench_learn_prints_the_blind_arm_and_multi_minus_blind():
    point = lambda e: {"estimate": e, "low": e - 0.1, "high": e + 0.1, "n": 2}  # noqa: E731
    rise = {"first_third": point(0.2), "last_third": point(0.3), "rise": point(0.1)}
    figures = {"steps": 4, "episodes": 48, "tokens": 9000, "tokens_by_turn": [300, 60],
               "reward": rise, "gate": rise, "blank": rise}
    [*_, verdict] = arm_lines("blind", 1, figures, None, None)
    assert verdict.startswith("learn: arm=blind seed=1 steps=4 reward_rise=+0.100(+0.000..+0.200)")
    # Held-out final-turn rewards of the multi and blind arms on the same slots, paired by slot.
    slots = {"subjects": ["a pear"], "episodes_per_subject": 3, "seed": 1}
    multi = {**slots, "refine": {"final_by_slot": [0.7, 0.5, None]}}
    blind = {**slots, "refine": {"final_by_slot": [0.4, 0.5, 0.9]}}
    difference = final_difference(multi, blind)
    assert difference["estimate"] == pytest.approx(0.15) and difference["n"] == 2
    assert multi_minus_blind_line(1, difference) == (
        f"learn: seed=1 eval_multi_minus_blind=+0.150({difference['low']:+.3f}..{difference['high']:+.3f})")
    assert multi_minus_blind_line(1, None) == "learn: seed=1 eval_multi_minus_blind=nan"
