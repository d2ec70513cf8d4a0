"""The one thing a board group's boards share: a LiteRT interpreter per verified model.

Each board's slot still verifies every bundle itself; only after the signature and the
model's hash hold does it ask the cache, keyed by that hash."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from edge_rl.actor.policy_slot import PolicySlot
from edge_rl.actor.shared_models import SharedModels
from edge_rl.runtime.litert import TFLitePolicy
from edge_rl.wire.signing import Signer
from tests.harness.control_plane import CARTPOLE, Models

RUN, RUN_ID = "r1", "s1"


@pytest.fixture(scope="module")
def models() -> Models:
    return Models()


def slot(signer: Signer, shared: SharedModels | None) -> PolicySlot:
    return PolicySlot(CARTPOLE, signer.verifier(), run=RUN, run_id=RUN_ID, models=shared)


def test_boards_of_one_process_share_one_interpreter_per_verified_model(models, policy_keys):
    signer, _ = policy_keys
    shared = SharedModels()
    a, b = slot(signer, shared), slot(signer, shared)
    bundle = models.bundle("int8", 1, RUN, RUN_ID, signer)
    la, lb = a.load(bundle), b.load(bundle)
    assert la.runner is lb.runner
    assert (shared.built, shared.reused, len(shared)) == (1, 1, 1)
    reference = TFLitePolicy(models.int8.tflite)
    obs = np.random.default_rng(1).normal(size=(20, 4)).astype(np.float32)
    for x in obs:
        np.testing.assert_array_equal(lb.runner(x), reference(x))
    # A board of its own (no cache) builds its own interpreter.
    alone = slot(signer, None).load(bundle)
    assert alone.runner is not la.runner and isinstance(alone.runner, TFLitePolicy)


def test_a_bundle_of_another_key_is_refused_though_its_model_is_cached(models, policy_keys):
    signer, _ = policy_keys
    shared = SharedModels()
    slot(signer, shared).load(models.bundle("int8", 1, RUN, RUN_ID, signer))
    victim = slot(signer, shared)
    forged = models.bundle("int8", 1, RUN, RUN_ID, Signer.generate())  # same model bytes
    victim.offer(forged)
    victim.load_pending()
    assert victim.current is None and sum(victim.rejected.values()) == 1
    assert (shared.built, shared.reused) == (1, 0)  # refused before the cache was asked


def test_another_model_gets_its_own_interpreter_and_old_ones_are_evicted(models, policy_keys):
    signer, _ = policy_keys
    shared = SharedModels(capacity=1)
    int8 = slot(signer, shared).load(models.bundle("int8", 1, RUN, RUN_ID, signer))
    gst = slot(signer, shared).load(models.bundle("gst", 2, RUN, RUN_ID, signer))
    assert int8.runner is not gst.runner and len(shared) == 1 and shared.built == 2
    again = slot(signer, shared).load(models.bundle("int8", 3, RUN, RUN_ID, signer))
    assert again.runner is not int8.runner and shared.built == 3  # evicted, built anew
    np.testing.assert_array_equal(again.runner(np.ones(4, np.float32)), int8.runner(np.ones(4)))
    with pytest.raises(ValueError):
        SharedModels(capacity=0)


def test_boards_calling_one_interpreter_at_once_get_their_own_answers(models, policy_keys):
    signer, _ = policy_keys
    shared = SharedModels()
    runner = slot(signer, shared).load(models.bundle("int8", 1, RUN, RUN_ID, signer)).runner
    reference = TFLitePolicy(models.int8.tflite)
    obs = np.random.default_rng(2).normal(size=(8, 4)).astype(np.float32)
    want = [reference(x) for x in obs]
    wrong = []

    def board(i: int) -> None:
        for _ in range(300):
            if not np.array_equal(runner(obs[i]), want[i]):
                wrong.append(i)

    threads = [threading.Thread(target=board, args=(i,)) for i in range(len(obs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not wrong and not any(t.is_alive() for t in threads)
