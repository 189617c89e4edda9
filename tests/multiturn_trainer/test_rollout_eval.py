"""The one episode loop with every kind of policy, and `watercolour eval`.

Real components throughout: the tiny Qwen3.5 through ``LocalModelPolicy``, a loopback
OpenAI-compatible server answering with real sketches through ``EndpointPolicy``, the
in-process renderer and the offline reward preset.
"""

from __future__ import annotations

import base64
import io
import json
import random
import re
import socket
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from agent.messages import first_turn_messages, painting_image
from agent.policies import EndpointPolicy, LocalModelPolicy, openai_messages
from agent.subjects import subjects as subject_split
from helpers import SMALL_SKETCH, tiny_config
from fake_openai_server import FakeOpenAIServer, FakeReply, chat_completion
from multiturn_trainer import evaluation_stats as stats
from multiturn_trainer.rollout import EpisodeRunner
from multiturn_trainer.tiny_model import load_pretrained
from multiturn_trainer.resources import scorer_for, episode_row

# --- statistics on synthetic rewards with known answers -------------------------------------


def test_bootstrap_interval_contains_the_true_mean_and_narrows_with_more_data():
    rng = random.Random(7)
    small = [rng.gauss(0.5, 0.1) for _ in range(50)]
    large = [rng.gauss(0.5, 0.1) for _ in range(800)]
    a, b = stats.bootstrap_mean(small), stats.bootstrap_mean(large)
    for summary in (a, b):
        assert summary["low"] < 0.5 < summary["high"]
        assert summary["low"] <= summary["estimate"] <= summary["high"]
    assert (b["high"] - b["low"]) < (a["high"] - a["low"]) / 2
    # The standard error of 800 draws is 0.1/sqrt(800) = 0.0035: a 95 % interval is about ±0.007.
    assert 0.008 < b["high"] - b["low"] < 0.02
    # Unknown rewards are left out, never counted as 0; a constant sample has a point interval.
    assert stats.bootstrap_mean([0.3, None, 0.3]) == {"estimate": 0.3, "low": 0.3, "high": 0.3, "n": 2}
    assert stats.bootstrap_mean([None]) == {"estimate": None, "low": None, "high": None, "n": 0}


def test_win_rate_and_paired_difference_of_a_known_paired_sample():
    turn_k = [1.0, 2.0, 3.0, 4.0, None]
    turn_1 = [0.0, 2.0, 5.0, 1.0, 9.0]
    # Wins 1 > 0 and 4 > 1, a tie at 2, a loss 3 < 5; the unpaired slot is left out.
    win = stats.win_rate(turn_k, turn_1)
    assert win["estimate"] == pytest.approx(2.5 / 4) and win["n"] == 4
    assert 0.0 <= win["low"] <= win["estimate"] <= win["high"] <= 1.0
    gap = stats.paired_difference(turn_k, turn_1)
    assert gap["estimate"] == pytest.approx((1 + 0 - 2 + 3) / 4)
    assert stats.best_of([0.2, None, 0.7, 0.9], 3) == 0.7 and stats.best_of([None, None], 2) is None
    assert stats.mean([0.2, None, 0.4]) == pytest.approx(0.3)
    # A clear effect has an interval above zero; the same data shifted to no effect straddles it.
    rng = random.Random(3)
    base = [rng.random() for _ in range(200)]
    better = [x + 0.1 + rng.gauss(0, 0.05) for x in base]
    assert stats.paired_difference(better, base)["low"] > 0.05
    same = [x + rng.gauss(0, 0.05) for x in base]
    shifted = stats.paired_difference(same, base)
    assert shifted["low"] < 0 < shifted["high"]
    with pytest.raises(ValueError):
        stats.paired([1.0], [1.0, 2.0])


def test_difference_of_independent_means_has_the_known_spread():
    # Means 0.6 and 0.5 of 400 draws each, sd 0.1: the difference's standard error is
    # 0.1 * sqrt(2 / 400) = 0.0071, so a 95 % interval is about ±0.014 around 0.1.
    rng = random.Random(11)
    late = [rng.gauss(0.6, 0.1) for _ in range(400)]
    early = [rng.gauss(0.5, 0.1) for _ in range(400)] + [None]
    rise = stats.difference_of_means(late, early)
    assert rise["estimate"] == pytest.approx(sum(late) / 400 - sum(v for v in early if v is not None) / 400)
    assert rise["low"] < 0.1 < rise["high"] and 0.02 < rise["high"] - rise["low"] < 0.04
    assert rise["n"] == 400
    # Noise alone: the interval straddles 0; an empty side gives no estimate.
    flat = stats.difference_of_means(early[:200], early[200:400])
    assert flat["low"] < 0 < flat["high"]
    assert stats.difference_of_means([], late)["estimate"] is None


def test_subject_splits_are_disjoint_and_the_train_split_is_the_procedural_one():
    from multiturn_trainer.procedural import SUBJECTS
    from multiturn_trainer.config import TrainConfig

    train, held_out = subject_split("train"), subject_split("eval")
    assert train == SUBJECTS and TrainConfig(model="m").subjects == list(train)
    assert held_out and not set(train) & set(held_out)


def test_openenv_task_statement_is_the_trainers_first_turn():
    from env.contract import SketchContract
    from env.environment import task_statement

    system, task = (m["content"][0]["text"] for m in first_turn_messages("a bowl of cherries"))
    assert task_statement("a bowl of cherries", 3, SketchContract()) == f"{system}\n\n{task}"


# --- the episode runner with a served model ---------------------------------------------------


def sketch_reply(colour: str) -> FakeReply:
    return FakeReply.content(f"Here is the painting:\n```js\n{SMALL_SKETCH.replace('#2b6cb0', colour)}```")


def decoded_image(url: str) -> np.ndarray:
    data = base64.b64decode(url.split(",", 1)[1])
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def test_endpoint_policy_sees_its_painting_on_turn_two_and_the_episode_is_scored(environments, tmp_path,
                                                                                monkeypatch):
    # No local model: the served one paints (the config only sets turns, rendering and reward).
    config = tiny_config(tmp_path / "no-model", tmp_path / "run", turns=2, num_generations=2)
    colours = iter(["#123456", "#654321", "#2a9d8f", "#e76f51"])
    monkeypatch.setenv("WATERCOLOUR_ENDPOINT_TOKEN", "sekret")
    with FakeOpenAIServer(rule=lambda request: sketch_reply(next(colours))) as server:
        policy = EndpointPolicy(server.base_url, "painter", max_tokens=500, concurrency=2, seed=11)
        rows = [episode_row(config, "a red apple", 5), episode_row(config, "a blue pond", 6)]
        batch = EpisodeRunner(config, environments, scorer_for(config)).run(policy, rows)
        asked = server.chat_requests()
    assert len(asked) == 4 and all(r.model == "painter" and r.bearer_token == "sekret" for r in asked)
    assert sorted(r.body["seed"] for r in asked) == [11, 12, 13, 14]  # every sample its own seed
    first, second = asked[:2], asked[2:]
    assert all(not r.image_urls for r in first)
    assert sorted("a red apple" in r.text for r in first) == [False, True]
    # Turn 2: each request carries exactly its own episode's turn-1 painting, as a PNG data URL.
    for request in second:
        [url] = request.image_urls
        assert url.startswith("data:image/png;base64,")
        shown = decoded_image(url)
        matches = [i for i, e in enumerate(batch.episodes)
                   if np.array_equal(shown, np.asarray(painting_image(e.observations[0].png)))]
        assert len(matches) == 1
        episode = matches[0]
        assert batch.episodes[episode].row["subject"] in request.text
        # The reply of turn 1 is in the conversation as the assistant's message.
        assistant = [m for m in request.body["messages"] if m["role"] == "assistant"]
        assert assistant[0]["content"][0]["text"] == batch.episodes[episode].replies[0]
    assert all(o.passed and o.png for e in batch.episodes for o in e.observations)
    assert all(isinstance(r, float) for r in batch.rewards) and all(e.sampling_logps is None for e in batch.episodes)
    assert all(e.tokens is None for e in batch.episodes) and [e.policy_error for e in batch.episodes] == [None, None]


def test_an_unreachable_endpoint_is_an_infrastructure_failure_not_a_zero(environments, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    config = tiny_config(tmp_path / "no-model", tmp_path / "run", turns=2)
    policy = EndpointPolicy(f"http://127.0.0.1:{port}/v1", "painter", max_attempts=2, retry_delay_s=0.01,
                            timeout_s=2)
    rows = [episode_row(config, "a red apple", 5), episode_row(config, "a blue pond", 6)]
    batch = EpisodeRunner(config, environments, scorer_for(config)).run(policy, rows)
    assert batch.rewards == [None, None]
    assert all(e.policy_error and "no answer" in e.policy_error for e in batch.episodes)
    for seen in [e.observations for e in batch.episodes]:
        assert [o.infrastructure_failed for o in seen] == [True, True]
        assert seen[0].violations == ["infrastructure_error"] and seen[0].errors[0].startswith("policy:")
    assert all(score is None for e in batch.episodes for score in e.turn_scores.values())


def test_endpoint_answers_in_parts_or_empty_are_read_as_the_server_meant_them(environments, tmp_path):
    """Content as a list of text parts is the reply; content None or "" is the model answering
    without a sketch (the gate's no_code, scored 0: the policy's failure); a body that is no
    chat completion is an infrastructure failure (reward None)."""
    config = tiny_config(tmp_path / "no-model", tmp_path / "run", turns=1, num_generations=2)
    parts = chat_completion([{"type": "text", "text": "Here:\n```js\n"},
                                  {"type": "text", "text": SMALL_SKETCH + "```"}])
    with FakeOpenAIServer() as server:
        server.enqueue(FakeReply.json(parts), FakeReply.json(chat_completion(None)),
                       FakeReply.json(chat_completion("")), FakeReply.json({"choices": []}),
                       FakeReply.error(400, message="this model's maximum context length is 4096 tokens"))
        policy = EndpointPolicy(server.base_url, "painter", concurrency=1, max_attempts=1)
        rows = [episode_row(config, "a red apple", seed) for seed in (1, 2, 3, 4, 5)]
        batch = EpisodeRunner(config, environments, scorer_for(config)).run(policy, rows)
    [parted], [nothing], [empty], [broken], [refused] = [e.observations for e in batch.episodes]
    errors = [e.policy_error for e in batch.episodes]
    assert parted.passed and batch.rewards[0] > 0
    for seen, reward in ((nothing, batch.rewards[1]), (empty, batch.rewards[2])):
        assert seen.violations == ["no_code"] and not seen.infrastructure_failed and reward == 0.0
    assert broken.infrastructure_failed and batch.rewards[3] is None
    assert errors[:3] == [None, None, None] and "unreadable answer" in errors[3]
    # A refusal the client cannot retry says what the server said.
    assert refused.infrastructure_failed and batch.rewards[4] is None
    assert "HTTP 400" in errors[4] and "maximum context length" in errors[4]


def test_openai_messages_send_images_as_png_data_urls():
    image = Image.new("RGB", (4, 3), (200, 10, 10))
    wire = openai_messages([{"role": "user", "content": [{"type": "text", "text": "look"},
                                                         {"type": "image", "image": image}]}])
    [message] = wire
    assert message["content"][0] == {"type": "text", "text": "look"}
    assert decoded_image(message["content"][1]["image_url"]["url"]).shape == (3, 4, 3)


# --- the tiny model through the local policy ------------------------------------------------


@pytest.mark.slow  # warm-started tiny policy
def test_local_policy_runs_two_turn_episodes_with_the_painting_in_its_context(dense_policy, environments, tmp_path):
    config = tiny_config(dense_policy, tmp_path / "run", turns=2)
    model, processor = load_pretrained(dense_policy)
    policy = LocalModelPolicy(model.eval(), processor, max_new_tokens=320, temperature=0.5, seed=3)
    rows = [episode_row(config, "a red apple", 5), episode_row(config, "a blue pond", 6)]
    batch = EpisodeRunner(config, environments, scorer_for(config)).run(policy, rows, scored_turns=[1, 2])
    assert [len(e.replies) for e in batch.episodes] == [2, 2]
    for episode, seen in ((e.tokens, e.observations) for e in batch.episodes):
        # Turn 2 was generated after the environment turn, whose image tokens are in the sequence.
        assert 0 in episode.env_mask and episode.env_mask[-1] == 1
        assert len(episode.images) == sum(o.png is not None for o in seen[:1])
    assert sum(e.completion_tokens for e in batch.episodes) > 0
    assert all(e.sampling_logps is None for e in batch.episodes)
    assert all(set(e.turn_scores) == {1, 2} for e in batch.episodes)
    assert any(reward is not None for reward in batch.rewards)


# --- `watercolour eval` through its command line --------------------------------------------


@pytest.mark.slow  # warm-started tiny policy
def test_eval_command_writes_json_plot_and_gallery_for_the_tiny_policy(dense_policy, tmp_path, capsys):
    from watercolour.cli import main

    config_path = tmp_path / "eval.yaml"
    config_path.write_text(tiny_config(dense_policy, tmp_path / "unused", renderers=2).to_yaml())
    out = tmp_path / "eval"
    assert main(["eval", "--policy", str(dense_policy), "--config", str(config_path), "--subjects",
                 "a red apple;a blue pond", "--episodes", "1", "--turns", "2", "--max-tokens", "320",
                 "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "headline: final - best-of-2 independent" in printed and "win rate turn 2 over turn 1" in printed
    report = json.loads((out / "eval.json").read_text())
    assert report["turns"] == 2 and report["slots"] == 2 and report["preset"] == "style-offline"
    assert len(report["refine"]["reward_by_turn"]) == 2 and len(report["independent"]["best_of_k"]) == 2
    assert report["refine"]["episodes"] == 2 and report["independent"]["episodes"] == 4  # K samples per slot
    assert report["refine"]["tokens"] > 0 and report["independent"]["tokens"] > 0
    for key in ("win_rate_final_over_first", "final_minus_best_of_k", "final_minus_mean_of_k"):
        assert set(report[key]) == {"estimate", "low", "high", "n"}
    # best-of-k never decreases with k, by construction of the same samples.
    best = [p["estimate"] for p in report["independent"]["best_of_k"]]
    if None not in best:
        assert best[1] >= best[0]
    plot = Image.open(report["plot"])
    assert plot.size == (640, 420)
    gallery = Path(report["gallery"]).read_text()
    assert "step 1" in gallery and "step 2" in gallery and "data:image/png;base64," in gallery
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    # The config's revision format (edit) and the other one (full), each compared at equal tokens.
    assert sorted({e["arm"] for e in episodes}) == ["independent", "refine", "refine_full"]
    assert report["revision_format"] == "edit" and report["refine_full"]["episodes"] == 2
    assert "full revisions: tokens by turn" in printed and "edit revisions: tokens by turn" in printed
    # Both arms paint the same slots: same subjects and the same render seeds.
    seeds = {arm: sorted({(e["subject"], e["seed"]) for e in episodes if e["arm"] == arm})
             for arm in ("refine", "independent")}
    assert seeds["refine"] == seeds["independent"]
    with pytest.raises(SystemExit, match="already holds"):
        main(["eval", "--policy", str(dense_policy), "--config", str(config_path), "--out", str(out)])


def test_eval_command_against_a_served_model_sends_the_painting_only_to_refining_turns(tmp_path, capsys,
                                                                                     monkeypatch):
    """`watercolour eval --endpoint` as a user runs it, against a loopback server that answers
    every request with a real sketch and records what it was sent."""
    from watercolour.cli import main

    monkeypatch.setenv("WATERCOLOUR_ENDPOINT_TOKEN", "sekret")
    out = tmp_path / "eval"
    with FakeOpenAIServer(rule=lambda request: sketch_reply("#2a9d8f")) as server:
        assert main(["eval", "--endpoint", server.base_url, "--endpoint-model", "served-painter",
                     "--subjects", "a red apple;a blue pond", "--episodes", "1", "--turns", "2",
                     "--max-tokens", "700", "--out", str(out), "--no-progress"]) == 0
        asked = server.chat_requests()
    printed = capsys.readouterr().out
    assert "served-painter at http" in printed and "headline: final - best-of-2 independent" in printed
    # 2 slots: a 2-turn episode each in both revision formats (8 requests) and 2 independent
    # samples each (4 requests).
    assert len(asked) == 12
    assert all(r.model == "served-painter" and r.bearer_token == "sekret" and r.body["max_tokens"] == 700
               for r in asked)
    with_painting = [r for r in asked if r.image_urls]
    assert len(with_painting) == 4 and all(len(r.image_urls) == 1 for r in with_painting)
    assert sum("SEARCH/REPLACE edit blocks" in r.text for r in with_painting) == 2
    assert all(len(r.body["messages"]) == 4 and "Turn 1 of 2" in r.text for r in with_painting)
    assert all(len(r.body["messages"]) == 2 for r in asked if not r.image_urls)
    report = json.loads((out / "eval.json").read_text())
    assert report["refine"]["episodes"] == 2 and report["independent"]["episodes"] == 4
    assert report["refine"]["infrastructure_failures"] == 0 and report["independent"]["infrastructure_failures"] == 0
    assert all(p["estimate"] > 0 for p in report["refine"]["reward_by_turn"])
    assert report["refine"]["gate_pass_by_turn"][1]["estimate"] == 1.0
    assert Path(report["plot"]).is_file() and "data:image/png;base64," in Path(report["gallery"]).read_text()


class CountingPolicy:
    """A message policy (the interface the runner calls) that answers with a real sketch and
    records how many conversations each call carried."""

    works_on = "messages"

    def __init__(self):
        self.batches: list[int] = []

    def reply(self, conversations):
        from agent.policies import PolicyReply

        self.batches.append(len(conversations))
        return [PolicyReply(f"```js\n{SMALL_SKETCH}```", completion_tokens=5) for _ in conversations]


def test_lines_from_previous_counts_the_drafts_lines_a_sketch_keeps():
    from multiturn_trainer.evaluation import lines_from_previous

    draft = "a();\n\n  b();\nb();\nc();\n"
    assert lines_from_previous(draft, draft) == 1.0
    assert lines_from_previous(draft, "a();\nb();\nd();") == 0.5  # one b() of two, a(); blank lines ignored
    assert lines_from_previous(draft, None) == 0.0  # a revision with no code kept nothing
    assert lines_from_previous(None, draft) is None and lines_from_previous("\n", draft) is None


class EditingPolicy:
    """A message policy that writes a fresh sketch on turn 1 (its colours and sizes drawn anew on
    every call) and, when it has a draft, sends the draft back with one line changed."""

    works_on = "messages"

    def __init__(self):
        self.rng = random.Random(0)

    def sketch(self) -> str:
        r = self.rng
        return (SMALL_SKETCH.replace("'#d6362b', 160", f"'#{r.randrange(16**6):06x}', {r.randrange(100, 250)}")
                .replace("'#2b6cb0', 140", f"'#{r.randrange(16**6):06x}', {r.randrange(100, 250)}")
                .replace("130, 120, 35", f"{r.randrange(60, 140)}, {r.randrange(60, 140)}, {r.randrange(20, 50)}"))

    def reply(self, conversations):
        from agent.policies import PolicyReply

        replies = []
        for messages in conversations:
            drafts = [m for m in messages if m["role"] == "assistant"]
            if drafts:
                code = drafts[-1]["content"][0]["text"].replace("brush.noStroke();", "brush.noStroke(); // revised")
            else:
                code = f"```js\n{self.sketch()}```"
            replies.append(PolicyReply(code, completion_tokens=5))
        return replies


def test_eval_tells_a_policy_that_edits_its_draft_from_one_that_paints_afresh(environments, tmp_path):
    from multiturn_trainer.evaluation import run_eval, table

    config = tiny_config(tmp_path / "no-model", tmp_path / "run")
    report = run_eval(config, EditingPolicy(), ["a red apple", "a blue pond"], 2, tmp_path / "eval",
                      environments=environments, progress=False)
    lines = len([line for line in SMALL_SKETCH.splitlines() if line.strip()])
    revised, resampled = report["refine"]["lines_from_previous"], report["independent"]["lines_from_previous"]
    # Every revision changes one line of its draft; independent samples differ in three.
    assert revised["n"] == 4 and revised["estimate"] == pytest.approx((lines - 1) / lines)
    assert resampled["n"] == 4 and resampled["estimate"] == pytest.approx((lines - 3) / lines)
    assert "lines of the previous sketch kept: revision 0." in table(report)


@pytest.mark.parametrize("eval_batch_size, batches", [(None, [2, 2, 2, 2, 2, 2, 2, 2]), (12, [4, 4, 8])])
def test_eval_generates_in_batches_of_eval_batch_size(environments, tmp_path, eval_batch_size, batches):
    from multiturn_trainer.evaluation import run_eval

    # 2 subjects x 2 slots: 4 two-turn episodes, 8 single samples; a training step is 2 episodes.
    config = tiny_config(tmp_path / "no-model", tmp_path / "run", eval_batch_size=eval_batch_size)
    policy = CountingPolicy()
    report = run_eval(config, policy, ["a red apple", "a blue pond"], 2, tmp_path / "eval",
                      environments=environments, progress=False)
    assert policy.batches == batches
    assert report["refine"]["episodes"] == 4 and report["independent"]["episodes"] == 8
    with pytest.raises(ValueError, match="eval_batch_size"):
        tiny_config(tmp_path / "no-model", tmp_path / "run", eval_batch_size=0)


@pytest.mark.slow  # warm-started tiny policy
def test_training_evaluates_on_held_out_subjects_and_the_demo_compares_with_the_warm_start(
        dense_policy, environments, tmp_path):
    """``held_out_eval_steps`` through ``trainer.train()``: eval/* figures in the step's metrics line and
    a report per evaluation; then the demo's comparison of the trained adapter and its base."""
    from multiturn_trainer.evaluation import final_difference
    from multiturn_trainer.store import RunStore
    from multiturn_trainer.commands import demo_eval, eval_fields
    from multiturn_trainer.evaluation_stats import format_interval
    from multiturn_trainer.train import train

    held_out = "a green pear on a plate"
    config = tiny_config(dense_policy, tmp_path / "run", steps=2, held_out_eval_steps=1, eval_episodes=1,
                         eval_subjects=held_out, save_steps=10)
    summary = train(config, environments=environments)
    metrics = RunStore(summary.run_dir, "run").read_metrics()
    assert [m["step"] for m in metrics] == [1, 2]
    for record in metrics:
        assert record["eval/reward_turn_1"] is not None and record["time/eval"] > 0
        for key in ("eval/final_minus_first", "eval/final_minus_best_of_k", "eval/win_rate_final_over_first"):
            assert key in record
    for step in (1, 2):
        report = json.loads((summary.run_dir / "eval" / f"step-{step}" / "eval.json").read_text())
        assert report["subjects"] == [held_out] and report["refine"]["episodes"] == 1
        assert report["independent"]["episodes"] == config.turns  # K independent samples per slot

    reports = demo_eval(config, summary)
    assert set(reports) == {"warm_start", "trained"}
    assert all((summary.run_dir / "eval" / name / "eval.png").is_file() for name in reports)
    fields = eval_fields(reports)
    assert "eval_turn_gain=" in fields and "eval_warm_start_final_minus_best_of_k=" in fields
    # What training bought on the held-out slots: the final turns of the two policies, slot by slot.
    trained, warm = reports["trained"], reports["warm_start"]
    assert len(trained["refine"]["final_by_slot"]) == len(warm["refine"]["final_by_slot"]) == trained["slots"]
    pairs = [(a, b) for a, b in zip(trained["refine"]["final_by_slot"], warm["refine"]["final_by_slot"])
             if a is not None and b is not None]
    gain = final_difference(trained, warm)
    assert gain["n"] == len(pairs) and gain["estimate"] == pytest.approx(sum(a - b for a, b in pairs) / len(pairs))
    assert f"eval_trained_minus_warm_start={format_interval(gain)}" in fields
    with pytest.raises(ValueError, match="different slots"):
        final_difference(trained, {**warm, "seed": warm["seed"] + 1})
    # The run's own rise (last third minus first third) comes with its interval, as the demo prints it.
    rise = summary.reward_rise
    assert rise["estimate"] == pytest.approx(summary.reward_last_third - summary.reward_first_third)
    assert rise["low"] <= rise["estimate"] <= rise["high"]
    assert re.fullmatch(r"[+-]\d\.\d{3}\([+-]\d\.\d{3}\.\.[+-]\d\.\d{3}\)", format_interval(rise))


class EditBlocksPolicy:
    """A message policy that paints a sketch on turn 1 (100 tokens, it says) and then revises it
    with one SEARCH/REPLACE block a turn (10 tokens), against the sketch the environment shows."""

    works_on = "messages"

    def __init__(self):
        self.revision_prompts: list[str] = []

    def reply(self, conversations):
        from agent.policies import PolicyReply

        replies = []
        for messages in conversations:
            if len(messages) == 2:
                replies.append(PolicyReply(f"```js\n{SMALL_SKETCH}```", completion_tokens=100))
                continue
            asked = " ".join(part["text"] for part in messages[-1]["content"] if part["type"] == "text")
            self.revision_prompts.append(asked)
            radius = 35 + len([m for m in messages if m["role"] == "assistant"])
            previous = radius - 1 if radius > 36 else 35
            replies.append(PolicyReply(
                f"<<<<<<< SEARCH\n  brush.circle(130, 120, {previous});\n=======\n"
                f"  brush.circle(130, 120, {radius});\n>>>>>>> REPLACE", completion_tokens=10))
        return replies


def test_eval_counts_tokens_per_turn_and_compares_edits_with_resampling_at_equal_tokens(environments, tmp_path):
    from multiturn_trainer.evaluation import equal_token_budget, run_eval, table

    assert equal_token_budget(110, [100, 100, 100]) == 1 and equal_token_budget(300, [100, 100, 100]) == 3
    assert equal_token_budget(50, [100, 100]) == 1 and equal_token_budget(None, [100]) is None
    config = tiny_config(tmp_path / "no-model", tmp_path / "run", turns=3, revision_format="edit")
    policy = EditBlocksPolicy()
    report = run_eval(config, policy, ["a red apple"], 2, tmp_path / "eval", environments=environments,
                      progress=False)
    refine = report["refine"]
    assert [t["estimate"] for t in refine["tokens_by_turn"]] == [100, 10, 10]
    # 120 tokens buy one independent sample of 100: refinement is compared with best of 1.
    assert refine["samples_at_equal_tokens"]["estimate"] == 1
    assert refine["final_minus_best_at_equal_tokens"]["n"] == 2
    assert refine["gate_pass_by_turn"][2]["estimate"] == 1.0
    episodes = [json.loads(line) for line in (tmp_path / "eval" / "episodes.jsonl").read_text().splitlines()]
    refined = [e for e in episodes if e["arm"] == "refine"]
    for episode in refined:
        # Each turn records its reply and the sketch the environment holds after it.
        codes = [turn["code"] for turn in episode["turns"]]
        assert "brush.circle(130, 120, 35);" in codes[0] and "brush.circle(130, 120, 37);" in codes[2]
        assert [turn["completion_tokens"] for turn in episode["turns"]] == [100, 10, 10]
    # Turn 2 quotes nothing (the draft is the policy's own reply); turn 3 shows the edited sketch.
    assert all("SEARCH/REPLACE edit blocks" in text for text in policy.revision_prompts)
    shown = [text for text in policy.revision_prompts if "Your current sketch, with your edits applied" in text]
    assert len(shown) == 2 and all("brush.circle(130, 120, 36);" in text for text in shown)
    assert "edit revisions: tokens by turn 100.0 / 10.0 / 10.0" in table(report)
    assert "reply (edits)" in Path(report["gallery"]).read_text()


@pytest.mark.slow  # 18 renders
def test_replay_verify_reapplies_the_edits_of_an_edit_run(environments, tmp_path, capsys):
    from multiturn_trainer.evaluation import run_eval
    from watercolour.cli import main

    config = tiny_config(tmp_path / "no-model", tmp_path / "run", turns=3, revision_format="edit")
    run_eval(config, EditBlocksPolicy(), ["a red apple"], 2, tmp_path / "eval", environments=environments,
             progress=False)
    assert main(["replay", str(tmp_path / "eval"), "--verify"]) == 0
    assert "0 turns whose sketch differs from the record" in capsys.readouterr().out
    # A record whose sketch is not what its edits make is caught.
    lines = (tmp_path / "eval" / "episodes.jsonl").read_text().splitlines()
    tampered = json.loads(lines[0])
    tampered["turns"][2]["code"] = tampered["turns"][2]["code"].replace("37);", "38);")
    (tmp_path / "eval" / "episodes.jsonl").write_text("\n".join([json.dumps(tampered), *lines[1:]]) + "\n")
    assert main(["replay", str(tmp_path / "eval"), "--verify"]) == 1
    assert "1 turns whose sketch differs from the record" in capsys.readouterr().out
