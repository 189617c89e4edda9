"""Shared fixtures: one real renderer pool per test session (browsers are slow to start), the
warm-started tiny policies, and the fast lane's marks. Helpers the tests import live in helpers.py."""

from __future__ import annotations

import pytest

from env.core import SketchEvaluator
from env.renderer import SyncRenderer
from helpers import LoopbackListener, warm_start
from multiturn_trainer.environments import InProcessEnvironments

# The fast lane (`make test-fast`, `pytest -m "not slow"`) leaves out every test that needs a
# warm-started tiny policy (a minute of SFT per session, then real training steps) and the
# tests measured at over 5 s on the 2-core machine; `make test` and CI run everything.
SLOW_FIXTURES = {"dense_policy", "moe_policy"}
# Measured over 5 s each (`pytest --durations=0`, 2 cores), without those fixtures.
SLOW_TESTS = {
    "test_revision_examples_show_real_failures_and_their_repair",  # 10 s (8 renders)
    "test_gpu_check_runs_every_phase_on_cpu_with_tiny_shapes",  # 306-342 s with other work running (load 12-14)
    "test_gpu_check_json_keeps_the_finished_phases_when_killed",  # 36-47 s, same conditions
    "test_gpu_check_under_the_gpu_images_versions",  # its own lane (make rehearse-device), 88-142 s
    "test_trainer_killed_with_sigkill_mid_step_resumes_without_losing_or_repeating_episodes",  # 23 s
    "test_load_from_client_processes_completes_every_session_and_counts_refusals",  # 22 s
    "test_no_request_leaves_the_page",  # 18 s
    "test_bench_serve_command_starts_its_own_server",  # 12 s
    "test_two_processes_run_their_own_groups_without_clashing",  # 11 s
    "test_first_cli_run_announces_the_tiny_model_and_keeps_trackio_in_the_run_directory",  # 10 s
    "test_train_command_line_runs_the_smoke_preset",  # 10 s
    "test_every_cause_a_sketch_can_produce_is_a_sketch_failure",  # 8 s for the bombs and the timeout
    "test_runtime_hostile_fixtures",  # 8 s for the infinite loop
    "test_score_finds_the_sketches_render_wrote_beside_its_paintings",  # 7 s
    "test_default_backend_accumulates_fill_masks_in_float16",  # 7 s
    "test_browser_killed_mid_render_is_an_infrastructure_error_and_is_replaced",  # 6 s
    "test_any_mix_of_hostile_statements_fails_with_a_reason",  # 6 s
    "test_three_concurrent_sessions_keep_independent_episodes",  # 5 s
    "test_runaway_loop_is_killed_and_pool_keeps_serving",  # 5 s
    "test_build_from_an_openai_compatible_endpoint",  # 5 s
    # The sandbox's repeated renders (each case rendered 3-4 times and compared) and its own pools.
    "test_what_a_sketch_observes_of_errors_and_stack_depth_renders_byte_identically",
    "test_a_rejection_nobody_awaits_reaches_the_verdict_every_time",
    "test_memory_held_through_any_route_is_over_budget_with_a_small_budget",
    "test_a_failing_sketchs_painting_does_not_depend_on_when_its_rejection_arrives",
    # The learning sanity checks train the untrained tiny model for real. Measured on the 2-core
    # machine while three other engineers' test runs shared it (quiet-machine times are lower);
    # test_environment_tokens_never_receive_gradient (5.8 s there, one small step) stays fast.
    "test_a_reward_preferring_a_sketch_feature_rises_and_its_negative_falls",  # 537 s: 2 runs of 6 steps
    "test_zero_learning_rate_moves_nothing",  # 84 s at 3 steps of 16; now 2 steps of 8
    "test_a_group_with_one_reward_gets_zero_advantages",  # 13 s
    # The real-vLLM lane (tests/test_vllm_real.py; skipped where vLLM is not installed): an
    # engine start compiles the model (minutes on 2 cores), a training run starts its own.
    "test_colocated_grpo_trains_against_the_real_engine",
    "test_vllm_renders_one_pad_per_image_into_exactly_the_hf_ids",
    "test_sampler_and_trainer_log_probs_mean_the_same_only_without_truncation",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())) or getattr(item, "originalname", "") in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def renderer():
    with SyncRenderer(size=2, deadline_s=60) as sync_renderer:
        yield sync_renderer


@pytest.fixture(scope="session")
def evaluator():
    with SketchEvaluator(size=2, deadline_s=60) as shared:
        yield shared


@pytest.fixture
def loopback_listener():
    listener = LoopbackListener()
    yield listener
    listener.close()


@pytest.fixture(scope="session")
def dense_policy(tmp_path_factory):
    return warm_start(tmp_path_factory, "dense")


@pytest.fixture(scope="session")
def moe_policy(tmp_path_factory):
    return warm_start(tmp_path_factory, "moe")


@pytest.fixture(scope="session")
def environments(evaluator):
    # The session's one evaluator (the default backend, llvmpipe-f16, is byte-deterministic, so
    # replay --verify holds to it); the trainer does not close an evaluator it was handed.
    return InProcessEnvironments(evaluator=evaluator, deadline_s=60)
