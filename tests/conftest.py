"""Shared fixtures: one real renderer pool per test session (browsers are slow to start), the
warm-started tiny policies, and the check that keeps policy tests out of the fast lane. Helpers the
tests import live in helpers.py."""

from __future__ import annotations

import pytest

from env.core import SketchEvaluator
from env.renderer import SyncRenderer
from helpers import LoopbackListener, warm_start
from multiturn_trainer.env_backends import InProcessEnvironments

# The fast lane (`make test-fast`, `pytest -m "not slow"`) leaves out the tests marked
# `@pytest.mark.slow` where they are defined: every test that needs a warm-started tiny policy (a
# minute of SFT per session, then real training steps) and those measured at over 5 s on the 2-core
# machine (`pytest --durations=0`; the time is a comment beside each mark). `make test` and CI run
# everything. The check below keeps a policy test from joining the fast lane unmarked.
POLICY_FIXTURES = {"dense_policy", "moe_policy"}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects anything
def pytest_collection_modifyitems(config, items):
    unmarked = [item.nodeid for item in items
                if POLICY_FIXTURES & set(getattr(item, "fixturenames", ())) and item.get_closest_marker("slow") is None]
    if unmarked:
        raise pytest.UsageError("these tests use a warm-started tiny policy (" + ", ".join(sorted(POLICY_FIXTURES))
                                + ", directly or through another fixture) but lack @pytest.mark.slow:\n  "
                                + "\n  ".join(unmarked))


@pytest.fixture(scope="session")
def renderer():
    with SyncRenderer(renderers=2, deadline_s=60) as sync_renderer:
        yield sync_renderer


@pytest.fixture(scope="session")
def evaluator():
    with SketchEvaluator(renderers=2, deadline_s=60) as shared:
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
