"""Model selection scores in the export worker's process: the same returns as on the
calling thread, the envs kept in the child between policies, and a worker that fails
replaced by the calling thread; and a candidate that provably cannot enter the top list
is not scored to the end."""

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


def test_scoring_stops_for_a_policy_that_cannot_enter_the_full_top_list() -> None:
    selection = ModelSelection(every=1, episodes=5, seed=3)
    evaluators: dict = {}
    good = [published("good", v) for v in range(1, 6)]
    assert [selection.score(p) for p in good] == [500.0] * 5  # the top list is full
    weak = published("random", 6)
    full = evaluate_policy(weak, 5, 3)
    assert full.mean < 500.0
    assert selection.score(weak) is None and 6 not in selection.scores  # cut, not recorded
    # Its episodes stopped early: fewer steps than the whole score, and flagged.
    cut = evaluate_policy(weak, 5, 3, evaluators, stop_below=500.0)
    assert not cut.complete and sum(cut.lengths) < sum(full.lengths)
    # A policy that ties the list's last score is scored to the end and enters it (newest
    # first among equals), and the last policy is scored in full when the run ends.
    assert (
        selection.score(published("good", 7)) == 500.0
        and selection.top[0][0].bundle.manifest.policy_version == 7
    )
    assert selection.better_than(weak) is not None and selection.scores[6] == full.mean


def test_an_evaluation_that_can_still_reach_stop_below_is_the_full_one() -> None:
    weak = published("random", 1)
    evaluators: dict = {}
    full = evaluate_policy(weak, 10, 0, evaluators)
    for floor in (full.mean, full.mean - 1.0, 0.0):
        again = evaluate_policy(weak, 10, 0, evaluators, stop_below=floor)
        assert again.complete and again == full
    assert not evaluate_policy(weak, 10, 0, evaluators, stop_below=full.mean + 0.1).complete
