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
    "test_gpu_check_script_runs_its_path_on_cpu_with_tiny_shapes",  # 35 s
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
