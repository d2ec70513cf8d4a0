"""The actor's runtime breakdown on a real short run against a real Mosquitto.

The buckets partition the loop's wall time by construction (laps), so adding up alone
proves little. What can fail: every piece the actor does is timed here by an outside
stopwatch wrapped around it, and the bucket it belongs to must hold at least that much;
since the buckets also sum to ``wall`` and ``wall`` matches the test's own clock, time
charged to the wrong bucket leaves its right one short. The breakdown is read from the
actor's final status as the learner would: off the broker, through the codec.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from edge_rl.edge.board import BoardConfig, Emulation
from edge_rl.edge.exploration import random_action
from edge_rl.edge.runtime import TFLitePolicy
from edge_rl.nodes import actor_node
from edge_rl.nodes.actor_node import ActorNode, ActorOptions
from edge_rl.specs import EnvSpec
from edge_rl.transport import codec
from edge_rl.transport.topics import Topics
from edge_rl.types import (
    ACTOR_LOOP_BUCKETS,
    ActorStatus,
    ControlMessage,
    PolicyBundle,
    PolicyManifest,
)

CARTPOLE = EnvSpec(obs_shape=(4,), num_actions=2)
US = 2e-6  # every value is rounded to 1 µs on the wire


@dataclass
class Stopwatch:
    """Outside clock: total time spent inside the functions it wraps."""

    seconds: float = 0.0
    calls: int = 0

    def wrap(self, fn):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0
                self.calls += 1

        return timed


class TimedEnv:
    def __init__(self, env, watch: Stopwatch) -> None:
        self.env = env
        self.step, self.reset = watch.wrap(env.step), watch.wrap(env.reset)

    def close(self) -> None:
        self.env.close()


@dataclass
class Watches:
    env: Stopwatch = field(default_factory=Stopwatch)
    inference: Stopwatch = field(default_factory=Stopwatch)
    exploration: Stopwatch = field(default_factory=Stopwatch)
    publish: Stopwatch = field(default_factory=Stopwatch)
    receive: Stopwatch = field(default_factory=Stopwatch)


def instrument(node: ActorNode, monkeypatch) -> Watches:
    """Wrap every piece of the loop in the stopwatch of the bucket it belongs to."""
    w = Watches()
    node.env = TimedEnv(node.env, w.env)
    monkeypatch.setattr(TFLitePolicy, "__call__", w.inference.wrap(TFLitePolicy.__call__))
    node._explore = w.exploration.wrap(node._explore)
    monkeypatch.setattr(actor_node, "random_action", w.exploration.wrap(random_action))
    for name in ("add", "ready", "take"):
        setattr(node.batcher, name, w.publish.wrap(getattr(node.batcher, name)))
    node._ship = w.publish.wrap(node._ship)
    node.slot._verify = w.receive.wrap(node.slot._verify)
    return w


def start(node: ActorNode) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def target() -> None:
        out["t_unix"] = time.time()
        try:
            node.run()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            out["error"] = e

    thread = threading.Thread(target=target, name="actor-under-test", daemon=True)
    thread.start()
    return thread, out


def status_inbox(client, topic: str) -> list[ActorStatus | codec.CodecError]:
    """Every status the actor publishes, decoded as the learner decodes it."""
    got: list[ActorStatus | codec.CodecError] = []

    def on_message(_client, _userdata, msg) -> None:
        try:
            got.append(codec.decode_status(msg.payload))
        except codec.CodecError as e:  # must not happen: the test fails on it below
            got.append(e)

    client.on_message = on_message
    client.subscribe(topic, qos=1)
    return got


def publish(client, topic: str, payload: bytes) -> None:
    client.publish(topic, payload, qos=1, retain=True).wait_for_publish(5)


def wait_for(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def final_breakdown(node, thread, out, inbox) -> tuple[dict[str, float], float]:
    """The breakdown of the actor's final ``stopped`` status, and the test's wall clock
    from just before ``run()`` to when that status was made."""
    thread.join(30)
    assert not thread.is_alive() and "error" not in out, out.get("error")
    wait_for(lambda: any(getattr(s, "state", "") == "stopped" for s in inbox), 5, "stopped")
    assert all(isinstance(s, ActorStatus) for s in inbox), inbox
    final = [s for s in inbox if s.state == "stopped"][-1]
    assert final.env_steps == node.env_steps
    return final.breakdown, final.time_unix - out["t_unix"]


def assert_adds_up(b: dict[str, float], outside_wall: float) -> None:
    assert sum(b[k] for k in ACTOR_LOOP_BUCKETS) == pytest.approx(b["wall"], abs=6 * US)
    # wall starts as run() begins and ends at the last lap, just before the status is made.
    assert outside_wall - 0.05 < b["wall"] <= outside_wall + 0.01


def make_board(slowdown: float) -> BoardConfig:
    return BoardConfig(
        board="test-board",
        batch_size=16,
        flush_interval_s=0.1,
        status_interval_s=0.2,
        emulation=Emulation(compute_slowdown=slowdown),
    )


def test_breakdown_without_a_policy(mosquitto, mqtt_client_factory, monkeypatch, policy_keys):
    run = f"bd-{uuid.uuid4().hex[:8]}"
    topics = Topics("edge-rl", run)
    client = mqtt_client_factory(mosquitto)
    inbox = status_inbox(client, topics.status("a0"))
    publish(client, topics.control, codec.encode_control(ControlMessage("running")))
    opts = ActorOptions("a0", "CartPole-v1", mosquitto.url, run=run, seed=1, max_env_steps=3000,
                        policy_key=str(policy_keys[1]))  # fmt: skip
    node = ActorNode(make_board(1.0), opts)
    assert node._status("offline").breakdown == {}  # the last will has none: nothing ran
    w = instrument(node, monkeypatch)
    thread, out = start(node)
    b, outside_wall = final_breakdown(node, thread, out, inbox)

    assert_adds_up(b, outside_wall)
    assert b["env_step"] >= w.env.seconds - US and w.env.calls > 3000
    assert b["exploration"] >= w.exploration.seconds - US and w.exploration.calls == 3000
    assert b["publish"] >= w.publish.seconds - US and node.batches_sent >= 3000 // 16
    # No policy: no model call. The bucket still holds the lap's own few µs per step, and
    # whatever preemption lands there on a loaded machine, so bound it loosely.
    assert w.inference.calls == 0 and b["inference"] < b["exploration"] + b["env_step"]
    assert b["emulation"] == 0.0  # a board that is not emulated
    assert b["idle"] > 0  # connecting, at least
    assert b["policy_receive"] == b["model_load"] == 0.0


def _bundle(exported, version: int, signer, run: str, sha: str | None = None) -> bytes:
    manifest = PolicyManifest(
        policy_version=version,
        algo="dqn",
        env_id="CartPole-v1",
        env_spec=CARTPOLE,
        precision=exported.precision,
        input_quant=exported.input_quant,
        output_quant=exported.output_quant,
        obs_mean=exported.obs_mean,
        obs_std=exported.obs_std,
        exploration={"epsilon": 0.1},
        learner_step=0,
        model_sha256=sha or hashlib.sha256(exported.tflite).hexdigest(),
        model_size=len(exported.tflite),
        codec="zlib",
        run_id=run,
    )
    return codec.encode_policy(
        PolicyBundle(manifest, codec.compress_model(exported.tflite, "zlib")), signer
    )


@pytest.mark.slow
def test_breakdown_with_a_policy_a_rejected_one_and_emulation(
    mosquitto, mqtt_client_factory, monkeypatch, policy_keys
):
    from edge_rl.agents.dqn.networks import make_q_network
    from edge_rl.export.tflite import export_policy

    obs = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
    exported = export_policy(make_q_network(4, 2, (32, 32), seed=0), obs, "int8")
    run = f"bd-{uuid.uuid4().hex[:8]}"
    topics = Topics("edge-rl", run)
    client = mqtt_client_factory(mosquitto)
    inbox = status_inbox(client, topics.status("a1"))
    # Paused first: the actor waits (idle) while a bad and then a good policy arrive.
    publish(client, topics.control, codec.encode_control(ControlMessage("paused")))
    signer, public_key = policy_keys
    publish(client, topics.policy, _bundle(exported, 1, signer, run, sha="00" * 32))
    opts = ActorOptions("a1", "CartPole-v1", mosquitto.url, run=run, seed=2, max_env_steps=3000,
                        policy_key=str(public_key))  # fmt: skip
    node = ActorNode(make_board(1.5), opts)
    w = instrument(node, monkeypatch)
    thread, out = start(node)
    wait_for(lambda: node.slot.rejected["bad_hash"] == 1, 20, "the bad policy's rejection")
    publish(client, topics.policy, _bundle(exported, 2, signer, run))
    wait_for(lambda: node.slot.version == 2, 20, "the good policy")
    time.sleep(0.3)  # paused a while longer: idle, with a 10 ms sleep per loop turn
    paused_s = time.time() - out["t_unix"]
    publish(client, topics.control, codec.encode_control(ControlMessage("running")))
    b, outside_wall = final_breakdown(node, thread, out, inbox)

    assert_adds_up(b, outside_wall)
    assert b["env_step"] >= w.env.seconds - US and w.env.calls > 3000
    assert b["inference"] >= w.inference.seconds - US and w.inference.calls == 3000
    assert b["exploration"] >= w.exploration.seconds - US and w.exploration.calls == 3000
    assert b["publish"] >= w.publish.seconds - US
    # The throttle slept 0.5 × (inference + exploration + env step), give or take its
    # 2 ms threshold and one oversleep, which it pays back.
    assert b["emulation"] >= node.throttle.slept_s - US
    compute = b["inference"] + b["exploration"] + b["env_step"]  # (resets are not charged)
    assert b["emulation"] == pytest.approx(0.5 * compute, rel=0.3, abs=0.02)
    assert b["idle"] >= 0.5 * paused_s  # waiting, paused, for the policies
    # The loader thread: both payloads verified, one interpreter built, all inside wall.
    assert w.receive.calls == 2 and b["policy_receive"] >= w.receive.seconds - US
    assert b["model_load"] >= node.slot.current.runner.load_seconds - US > 0
    assert b["policy_receive"] + b["model_load"] < b["wall"]
