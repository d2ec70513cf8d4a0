"""Fixed-rate control in a real ActorNode (actor/rate.py): a 50 Hz board with a real int8
CartPole policy in LiteRT steps at its deadlines; the same board with its inference slowed
past the period on purpose counts its deadline misses, in its status."""

from __future__ import annotations

import threading
import time

import pytest

from edge_rl.actor.node import ActorNode, ActorOptions
from edge_rl.boards import BoardConfig
from edge_rl.runtime.litert import TFLitePolicy
from edge_rl.transport.memory import MemoryBroker
from edge_rl.types import ControlMessage, CreditGrant
from edge_rl.wire.messages import decode_status, encode_control, encode_credit
from edge_rl.wire.policy import encode_policy
from edge_rl.wire.topics import Topics
from tests.harness.cartpole_policies import MODELS, policy_bundle
from tests.harness.waits import wait_for

RUN, RUN_ID = "rate", "rate-start"
HZ = 50
STEPS = 100  # two seconds at 50 Hz


def _run_board(policy_keys, slow_s: float, monkeypatch) -> tuple[ActorNode, list, float]:
    """A 50 Hz board taking STEPS steps with a loaded policy whose invoke takes at least
    ``slow_s`` more: its node, the statuses it sent, and the seconds its steps took."""
    signer, public_key = policy_keys
    if slow_s:
        invoke = TFLitePolicy.__call__

        def slowed(self, obs):
            time.sleep(slow_s)  # a board too slow for its rate, on purpose
            return invoke(self, obs)

        monkeypatch.setattr(TFLitePolicy, "__call__", slowed)
    broker = MemoryBroker()
    topics = Topics("edge-rl", RUN)
    statuses: list[bytes] = []
    learner = broker.connect(
        "learner",
        subscriptions=[(topics.status("a0"), 1)],
        on_message=lambda t, p: statuses.append(p),
    )
    learner.start()
    assert learner.wait_connected(5)
    board = BoardConfig(board="test-board", control_hz=HZ, status_interval_s=0.2)
    opts = ActorOptions(
        "a0", "CartPole-v1", "memory://", run=RUN, seed=1, max_env_steps=STEPS,
        policy_key=str(public_key),
    )  # fmt: skip
    node = ActorNode(board, opts, connect=broker.connect)
    bundle = policy_bundle(MODELS["good"].read_bytes(), run=RUN, run_id=RUN_ID, version=1)
    learner.publish(topics.policy, encode_policy(bundle, signer), retain=True)
    learner.publish(topics.control, encode_control(ControlMessage("paused", RUN_ID)), retain=True)
    grant = encode_credit(CreditGrant(RUN_ID, node.session, STEPS))
    learner.publish(topics.credit("a0"), grant, retain=True)
    thread = threading.Thread(target=node.run, name="actor-under-test", daemon=True)
    thread.start()
    try:
        wait_for(lambda: node.slot.version == 1, 60, "the policy loaded")
        t0 = time.monotonic()
        learner.publish(topics.control, encode_control(ControlMessage("running", RUN_ID)))
        wait_for(lambda: not thread.is_alive(), 60, "the board's steps, then its exit")
        elapsed = time.monotonic() - t0
    finally:
        node.stop()
        thread.join(10)
        broker.close()
    return node, [decode_status(p) for p in statuses], elapsed


def test_a_50_hz_board_steps_at_its_rate(policy_keys, monkeypatch):
    node, statuses, elapsed = _run_board(policy_keys, 0.0, monkeypatch)
    assert node.env_steps == STEPS and node.rate.periods == STEPS
    # Deadlines every 20 ms: the steps take at least (STEPS - 1) periods, not a burst.
    assert elapsed >= (STEPS - 1) / HZ
    assert statuses[-1].control_periods == STEPS


@pytest.mark.parametrize("slow_s", [0.03])
def test_a_50_hz_board_with_slowed_inference_counts_its_misses(policy_keys, monkeypatch, slow_s):
    node, statuses, _ = _run_board(policy_keys, slow_s, monkeypatch)
    assert node.env_steps == STEPS
    # Each step takes over 1.5 periods: at least one period in three has no step start.
    last = statuses[-1]
    assert last.deadline_misses >= STEPS // 3, last
    assert last.deadline_misses == node.rate.misses
    assert last.jitter_p99_ms >= 10.0  # steps start 10 ms or more after their deadlines
