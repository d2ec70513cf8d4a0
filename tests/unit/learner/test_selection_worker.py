"""Model selection scores in the export worker's process: the same returns as on the
calling thread, the envs kept in the child between policies, and a worker that fails
replaced by the calling thread."""

from __future__ import annotations

import os

import pytest

from edge_rl.export.worker import ExportWorker
from edge_rl.learner.outbound.packager import Published
from edge_rl.learner.outbound.selection import ModelSelection, evaluate_policy
from tests.harness.cartpole_policies import MODELS, policy_bundle


def published(quality: str, version: int) -> Published:
    model = MODELS[quality].read_bytes()
    bundle = policy_bundle(model, run="r", run_id="s", version=version)
    return Published(bundle, b"", model, {}, 0.0)


def _pid_and_kept() -> tuple[int, list[str]]:
    from edge_rl.runtime import evaluate

    return os.getpid(), sorted(evaluate._kept)


@pytest.fixture
def worker():
    w = ExportWorker()
    yield w
    w.close()


def test_scores_in_the_worker_equal_the_calling_threads(worker) -> None:
    selection = ModelSelection(every=1, episodes=5, seed=3, recheck=4, worker=worker)
    policies = [published("random", 1), published("good", 2), published("random", 3)]
    for p in policies:
        here = evaluate_policy(p, 5, 3).mean
        assert selection.score(p) == here
    assert worker.pid is not None and worker.pid != os.getpid()  # the scoring started it
    pid, kept = worker.call(_pid_and_kept)
    assert pid == worker.pid and kept == ["CartPole-v1"]  # the child keeps the envs
    # The recheck too: the good policy stays the best after 4 more episodes each.
    assert selection.better_than(policies[-1])[0] is policies[1]
    assert selection.scores[2] == 500.0


def test_a_hung_worker_is_replaced_by_the_calling_thread() -> None:
    worker = ExportWorker(call_timeout=0.001)  # no scoring answers that fast: killed
    try:
        selection = ModelSelection(every=1, episodes=3, seed=0, worker=worker)
        p = published("good", 1)
        assert selection.score(p) == evaluate_policy(p, 3, 0).mean == 500.0
        assert selection.worker is None and worker.pid is None
    finally:
        worker.close()
