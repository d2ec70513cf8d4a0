"""The actor's per-step path, counted rather than timed: what runs once per env step and
what once per batch. A per-step lap, RNG draw, control read or conversion creeping back
into the loop multiplies one of these counts by the batch size, whatever the machine's
load; a wall-time bound would not see it on a fast machine and flake on a busy one.

A real ActorNode on the in-memory broker, with a real int8 policy: it joins paused, loads
the policy, then steps N times while every piece it calls is counted.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import numpy as np

from edge_rl.actor import node as actor_node
from edge_rl.actor.node import ActorNode, ActorOptions
from edge_rl.agents.dqn.networks import make_q_network
from edge_rl.boards import BoardConfig
from edge_rl.export.tflite import export_policy
from edge_rl.runtime.litert import TFLitePolicy
from edge_rl.specs import EnvSpec
from edge_rl.telemetry.breakdown import LapClock
from edge_rl.transport.memory import MemoryBroker
from edge_rl.types import (
    ACTOR_LOOP_BUCKETS,
    ControlMessage,
    CreditGrant,
    PolicyBundle,
)
from edge_rl.wire.messages import encode_control, encode_credit
from edge_rl.wire.policy import compress_model, encode_policy
from edge_rl.wire.topics import Topics
from tests.harness.cartpole_policies import cartpole_manifest
from tests.harness.waits import wait_for

CARTPOLE = EnvSpec(obs_shape=(4,), num_actions=2)
RUN, RUN_ID = "steps", "steps-start"
BATCH = 64
BLOCKS = 100
N = BATCH * BLOCKS


class Calls(Counter):
    """Calls per name, counted by the wrappers it makes (a test's own bookkeeping)."""

    def wrap(self, name: str, fn):
        def counted(*args, **kwargs):
            self[name] += 1
            return fn(*args, **kwargs)

        return counted


class CountedRng:
    """A ``numpy`` Generator whose every draw is counted, whatever the method."""

    def __init__(self, rng: np.random.Generator, calls: Calls) -> None:
        self.rng = rng
        self.calls = calls

    def __getattr__(self, name: str):
        return self.calls.wrap("rng", getattr(self.rng, name))


class CountedSleep:
    """``actor_node``'s ``time`` module with its ``sleep`` counted (the rest passes through)."""

    def __init__(self, calls: Calls) -> None:
        self.sleep = calls.wrap("sleep", time.sleep)

    def __getattr__(self, name: str):
        return getattr(time, name)


def policy_payload(signer) -> bytes:
    obs = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
    exported = export_policy(make_q_network(4, 2, (16, 16), seed=0), obs, "int8")
    manifest = cartpole_manifest(exported.tflite, exported, epsilon=0.25, run=RUN, run_id=RUN_ID)
    return encode_policy(PolicyBundle(manifest, compress_model(exported.tflite, "zlib")), signer)


def instrument(node: ActorNode, calls: Calls, monkeypatch) -> None:
    """Count every piece the loop calls: the clock (laps and reads), control, the policy,
    exploration and its RNG, batching, and publishes."""
    now = calls.wrap("now", time.perf_counter)
    node.clock = LapClock(ACTOR_LOOP_BUCKETS, clock=now)
    node.clock.lap = calls.wrap("lap", node.clock.lap)
    node.clock.lap_split = calls.wrap("lap", node.clock.lap_split)
    for name in ("take_join", "may_step"):
        setattr(node.rc, name, calls.wrap("control", getattr(node.rc, name)))
    monkeypatch.setattr(TFLitePolicy, "__call__", calls.wrap("invoke", TFLitePolicy.__call__))
    node.explorer.rng = CountedRng(node.explorer.rng, calls)
    node.explorer.act = calls.wrap("act", node.explorer.act)
    node.batcher.append = calls.wrap("append", node.batcher.append)
    node.batcher.take = calls.wrap("take", node.batcher.take)
    node.transport.publish = calls.wrap("publish", node.transport.publish)
    node.transport.poll = calls.wrap("poll", node.transport.poll)
    monkeypatch.setattr(actor_node, "time", CountedSleep(calls))
    # A waiting turn's sleep: the run control's wait for news counts as one too.
    node.rc.wait_news = calls.wrap("sleep", node.rc.wait_news)


def test_per_step_work_is_the_step_and_per_batch_work_is_per_batch(policy_keys, monkeypatch):
    signer, public_key = policy_keys
    broker = MemoryBroker()
    topics = Topics("edge-rl", RUN)
    learner = broker.connect("learner")
    learner.start()
    assert learner.wait_connected(5)
    # Status and flush intervals far beyond the test: only the batch's room and the step
    # budget end a block of steps.
    board = BoardConfig(
        board="test-board", batch_size=BATCH, flush_interval_s=60.0, status_interval_s=60.0
    )
    opts = ActorOptions(
        "a0",
        "CartPole-v1",
        "memory://",
        run=RUN,
        seed=3,
        max_env_steps=N,
        policy_key=str(public_key),
    )
    node = ActorNode(board, opts, connect=broker.connect)
    calls = Calls()
    instrument(node, calls, monkeypatch)
    learner.publish(topics.policy, policy_payload(signer), retain=True)
    paused = encode_control(ControlMessage("paused", RUN_ID))
    learner.publish(topics.control, paused, retain=True)
    grant = encode_credit(CreditGrant(RUN_ID, node.session, 10**9))
    learner.publish(topics.credit("a0"), grant, retain=True)
    thread = threading.Thread(target=node.run, name="actor-under-test", daemon=True)
    thread.start()
    try:
        wait_for(lambda: node.slot.version == 1, 60, "the policy v1 loaded", step=0.01)
        assert node.slot.version == 1 and node.env_steps == 0, node.slot.rejected
        calls.clear()  # from here: the steps, and the paused turns before they begin
        t0 = time.monotonic()
        learner.publish(topics.control, encode_control(ControlMessage("running", RUN_ID)))
        thread.join(60)
        assert not thread.is_alive()
        elapsed = time.monotonic() - t0
    finally:
        node.stop()
        thread.join(10)
        broker.close()

    assert node.env_steps == N and node.transitions_sent == N and node.batches_sent == BLOCKS
    turns = calls["sleep"]  # paused turns seen after the release, and shutdown's waits
    # Once per step: the model, the action, the row.
    assert calls["invoke"] == calls["act"] == calls["append"] == N
    # Four clock reads per step (around the model, the action and the env step), two
    # around each reset, one per lap and one per block for its deadline: no lap per step.
    assert calls["now"] <= 4 * N + 2 * node.episodes + calls["lap"] + BLOCKS + 2
    assert calls["lap"] <= 6 * BLOCKS + 2 * turns + 8
    # Once per block (a batch here): the RNG, control, the batch's conversion, a publish.
    assert calls["rng"] <= BLOCKS
    assert calls["control"] <= 2 * (BLOCKS + turns + 1)
    assert calls["take"] <= BLOCKS + turns + 2
    assert calls["publish"] <= BLOCKS + 2  # the batches, and the final status
    # The transport is polled between blocks at most every POLL_S (a poll costs more than
    # the select it makes: PUBACKs, grants and control wait that long), not after each.
    assert calls["poll"] <= elapsed / actor_node.POLL_S + 1
