"""The safety shield in a real ActorNode: random exploration over Pendulum's whole action
range, a board file that allows a small part of it and a slow rate. The env (a real
gymnasium env) records what it received; the learner's side decodes what was sent."""

from __future__ import annotations

import threading

import numpy as np

from edge_rl.actor.node import ActorNode, ActorOptions
from edge_rl.boards import BoardConfig, Safety
from edge_rl.transport.memory import MemoryBroker
from edge_rl.types import ControlMessage, CreditGrant
from edge_rl.wire.messages import decode_status, encode_control, encode_credit
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import decode_transitions
from tests.harness import robot_envs
from tests.harness.waits import wait_for

RUN, RUN_ID = "shield", "shield-start"
STEPS = 1_500


def _run_board(board: BoardConfig, public_key, steps: int):
    """``board`` on a real Pendulum for ``steps`` training steps under random exploration
    over the whole action range; its env, and the batches and statuses it sent."""
    broker = MemoryBroker()
    topics = Topics("edge-rl", RUN)
    batches, statuses = [], []
    learner = broker.connect(
        "learner",
        subscriptions=[(topics.transitions("a0"), 1), (topics.status("a0"), 1)],
        on_message=lambda t, p: (batches if "transitions" in t else statuses).append(p),
    )
    learner.start()
    assert learner.wait_connected(5)
    opts = ActorOptions(
        "a0",
        "tests.harness.robot_envs:pendulum",
        "memory://",
        run=RUN,
        seed=5,
        max_env_steps=steps,
        policy_key=str(public_key),
    )
    node = ActorNode(board, opts, connect=broker.connect)
    env = robot_envs.MADE[-1]
    learner.publish(topics.control, encode_control(ControlMessage("running", RUN_ID)), retain=True)
    grant = encode_credit(CreditGrant(RUN_ID, node.session, steps))
    learner.publish(topics.credit("a0"), grant, retain=True)
    thread = threading.Thread(target=node.run, name="actor-under-test", daemon=True)
    thread.start()
    try:
        wait_for(lambda: not thread.is_alive(), 20, "the actor's steps, then its exit")
    finally:
        node.stop()
        thread.join(10)
        broker.close()
    sent = [decode_transitions(p, node.spec) for p in batches]
    return env, sent, [decode_status(p) for p in statuses]


def _assert_within(got: np.ndarray, high: float, delta: float, steps: int) -> None:
    """Every action in [-high, high] and within ``delta`` of the one before (from rest, 0,
    after each of Pendulum's 200-step episodes), float32 aside."""
    assert len(got) == steps
    assert got.min() >= -high and got.max() <= high
    ends = np.cumsum([200] * (steps // 200))
    before = np.concatenate([[0.0], got[:-1]])
    before[ends[ends < steps]] = 0.0
    assert np.abs(got - before).max() <= delta + 1e-6


def test_the_env_gets_and_the_learner_learns_only_shielded_actions(policy_keys):
    _, public_key = policy_keys
    safety = Safety(action_low=-0.5, action_high=0.5, max_delta=0.1)
    board = BoardConfig(board="test-board", batch_size=100, safety=safety)
    env, sent, statuses = _run_board(board, public_key, STEPS)

    got = np.asarray(env.received, np.float64).reshape(-1)
    _assert_within(got, 0.5, 0.1, STEPS)
    # What the learner trains on is what the env got, row for row.
    sent_actions = np.concatenate([b.action.reshape(-1) for b in sent]).astype(np.float64)
    assert np.array_equal(sent_actions, got)
    # Uniform exploration over [-2, 2]: most actions clipped and rate-limited, counted.
    last = statuses[-1]
    assert last.safety["clipped"] > STEPS // 2 and last.safety["rate_limited"] > STEPS // 2
    assert "nonfinite" not in last.safety


def test_a_person_s_override_passes_the_shield_too(policy_keys):
    """A teleop source pushing the env's limit (2.0) on every step: the env gets at most the
    board's bound, at its rate, and the rows are the interventions with what the env got."""
    _, public_key = policy_keys
    safety = Safety(action_low=-0.5, action_high=0.5, max_delta=0.1)
    board = BoardConfig(
        board="test-board",
        batch_size=100,
        safety=safety,
        teleop="tests.harness.robot_envs:push_to_the_limit",
    )
    steps = 400
    env, sent, statuses = _run_board(board, public_key, steps)
    got = np.asarray(env.received, np.float64).reshape(-1)
    _assert_within(got, 0.5, 0.1, steps)
    assert got.max() == np.float32(0.5)  # the override reached the bound, not past it
    assert np.array_equal(np.concatenate([b.action.reshape(-1) for b in sent]), got)
    assert all(np.all(b.intervention) for b in sent)
    assert statuses[-1].interventions == steps


def test_the_learner_s_last_will_is_not_a_sign_of_life(policy_keys):
    """The broker sends a dead learner's will, a ``paused`` control: the board must not take
    it for the learner speaking, or its silence watchdog starts late by the time the broker
    took to notice (a board took 3.16 s to its safe action against a bound of 3.05)."""
    _, public_key = policy_keys
    broker = MemoryBroker()
    topics = Topics("edge-rl", RUN)
    learner = broker.connect("learner", subscriptions=[], on_message=lambda t, p: None)
    learner.start()
    assert learner.wait_connected(5)
    board = BoardConfig(board="test-board", safety=Safety(stale_after_s=30.0))
    opts = ActorOptions(
        "a0",
        "tests.harness.robot_envs:pendulum",
        "memory://",
        run=RUN,
        seed=5,
        policy_key=str(public_key),
    )
    node = ActorNode(board, opts, connect=broker.connect)
    env = robot_envs.MADE[-1]
    learner.publish(topics.control, encode_control(ControlMessage("running", RUN_ID)), retain=True)
    grant = encode_credit(CreditGrant(RUN_ID, node.session, 10**6))
    learner.publish(topics.credit("a0"), grant, retain=True)
    thread = threading.Thread(target=node.run, name="actor-under-test", daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(env.received) > 10, 20, "the board stepping")
        spoke = node.watchdog.last_heard
        assert spoke > 0  # the running control and the grant were heard
        will = ControlMessage("paused", RUN_ID, "the learner is gone")
        learner.publish(topics.control, encode_control(will), retain=True)
        wait_for(lambda: node.rc.state == "paused", 10, "the board paused by the will")
        assert node.watchdog.last_heard == spoke
        # ... and the learner back, running: heard again.
        learner.publish(topics.control, encode_control(ControlMessage("running", RUN_ID)))
        wait_for(lambda: node.watchdog.last_heard > spoke, 10, "the learner heard again")
    finally:
        node.stop()
        thread.join(10)
        broker.close()
