"""The actor's runtime breakdown on a real short run against a real Mosquitto.

The buckets partition the loop's wall time by construction (laps), so adding up alone
proves little. What can fail: every piece the actor does is timed here by an outside
stopwatch wrapped around it, and the bucket it belongs to must hold at least that much;
since the buckets also sum to ``wall`` and ``wall`` lies between outside instants taken
around and inside ``run()``, time charged to the wrong bucket leaves its right one short.
Every comparison is an inequality that holds exactly: the stopwatches read the actor's
own clock (``perf_counter``) and each timed call lies inside the lap it is charged to;
no duration is compared with a tolerance. The breakdown is read from the actor's final
status as the learner would: off the broker, through the codec.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from edge_rl.actor import node as actor_node
from edge_rl.actor.node import ActorNode, ActorOptions
from edge_rl.boards import BoardConfig, Emulation
from edge_rl.runtime.litert import TFLitePolicy
from edge_rl.specs import EnvSpec
from edge_rl.types import (
    ACTOR_LOOP_BUCKETS,
    ActorStatus,
    PolicyBundle,
)
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.messages import decode_status
from edge_rl.wire.policy import compress_model, encode_policy
from edge_rl.wire.topics import Topics
from tests.harness.cartpole_policies import cartpole_manifest
from tests.harness.waits import wait_for

CARTPOLE = EnvSpec(obs_shape=(4,), num_actions=2)
US = 2e-6  # every value is rounded to 1 µs on the wire


@dataclass
class Stopwatch:
    """Outside clock: total time spent inside the functions it wraps, how many calls, and
    when the first call began and the last one ended (``perf_counter``, the actor's clock).
    """

    seconds: float = 0.0
    calls: int = 0
    first_in: float | None = None
    last_out: float = 0.0

    def wrap(self, fn):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            if self.first_in is None:
                self.first_in = t0
            try:
                return fn(*args, **kwargs)
            finally:
                self.last_out = time.perf_counter()
                self.seconds += self.last_out - t0
                self.calls += 1

        return timed


class TimedEnv:
    def __init__(self, env, step: Stopwatch, reset: Stopwatch) -> None:
        self.env = env
        self.step = step.wrap(env.step)
        self.reset = reset.wrap(env.reset)

    def close(self) -> None:
        self.env.close()


class TimedSleep:
    """``actor_node``'s ``time`` module with its ``sleep`` timed (the rest passes through)."""

    def __init__(self, watch: Stopwatch) -> None:
        self.sleep = watch.wrap(time.sleep)

    def __getattr__(self, name: str):
        return getattr(time, name)


@dataclass
class Watches:
    env_step: Stopwatch = field(default_factory=Stopwatch)
    env_reset: Stopwatch = field(default_factory=Stopwatch)
    inference: Stopwatch = field(default_factory=Stopwatch)
    exploration: Stopwatch = field(default_factory=Stopwatch)  # the step's action
    exploration_plan: Stopwatch = field(default_factory=Stopwatch)  # a block's RNG draws
    publish: Stopwatch = field(default_factory=Stopwatch)
    receive: Stopwatch = field(default_factory=Stopwatch)
    connect: Stopwatch = field(default_factory=Stopwatch)  # waiting for the CONNACK
    sleep: Stopwatch = field(default_factory=Stopwatch)  # the loop's and shutdown's sleeps
    charges: list[float] = field(default_factory=list)  # compute charged to the throttle

    def compute(self) -> float:
        """What the throttle is owed for: inference, exploration, env steps (not resets)."""
        return self.inference.seconds + self.exploration.seconds + self.env_step.seconds


def instrument(node: ActorNode, monkeypatch) -> Watches:
    """Wrap every piece of the loop in the stopwatch of the bucket it belongs to."""
    w = Watches()
    node.env = TimedEnv(node.env, w.env_step, w.env_reset)
    monkeypatch.setattr(TFLitePolicy, "__call__", w.inference.wrap(TFLitePolicy.__call__))
    node.explorer.act = w.exploration.wrap(node.explorer.act)  # once per step
    node.explorer.plan = w.exploration_plan.wrap(node.explorer.plan)  # once per block
    for name in ("open", "room", "append", "ready", "take"):
        setattr(node.batcher, name, w.publish.wrap(getattr(node.batcher, name)))
    node._ship = w.publish.wrap(node._ship)
    node.slot._verify = w.receive.wrap(node.slot._verify)
    node.transport.wait_connected = w.connect.wrap(node.transport.wait_connected)
    monkeypatch.setattr(actor_node, "time", TimedSleep(w.sleep))
    node._wait = w.sleep.wrap(node._wait)  # a waiting turn's wait (a poll of its connection)
    charge = node.throttle.charge
    node.throttle.charge = lambda seconds: (w.charges.append(seconds), charge(seconds))[1]
    return w


def start(node: ActorNode) -> tuple[threading.Thread, dict[str, Any]]:
    """Run the node on a thread; ``out`` gets ``perf_counter`` just before and after."""
    out: dict[str, Any] = {}

    def target() -> None:
        out["t0"] = time.perf_counter()
        try:
            node.run()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            out["error"] = e
        finally:
            out["t1"] = time.perf_counter()

    thread = threading.Thread(target=target, name="actor-under-test", daemon=True)
    thread.start()
    return thread, out


def status_inbox(client, topic: str) -> list[ActorStatus | CodecError]:
    """Every status the actor publishes, decoded as the learner decodes it."""
    got: list[ActorStatus | CodecError] = []

    def on_message(_client, _userdata, msg) -> None:
        try:
            got.append(decode_status(msg.payload))
        except CodecError as e:  # must not happen: the test fails on it below
            got.append(e)

    client.on_message = on_message
    client.subscribe(topic, qos=1)
    return got


def publish(client, topic: str, payload: bytes) -> None:
    client.publish(topic, payload, qos=1, retain=True).wait_for_publish(5)


def final_breakdown(node, thread, out, inbox) -> dict[str, float]:
    """The breakdown of the actor's final ``stopped`` status."""
    thread.join(30)
    assert not thread.is_alive() and "error" not in out, out.get("error")
    wait_for(lambda: any(getattr(s, "state", "") == "stopped" for s in inbox), 5, "stopped")
    assert all(isinstance(s, ActorStatus) for s in inbox), inbox
    final = [s for s in inbox if s.state == "stopped"][-1]
    assert final.env_steps == node.env_steps
    return final.breakdown


def assert_adds_up(b: dict[str, float], w: Watches, out: dict[str, Any]) -> None:
    assert sum(b[k] for k in ACTOR_LOOP_BUCKETS) == pytest.approx(b["wall"], abs=6 * US)
    # wall runs from run()'s start (before its first wait for the broker) to the last lap
    # (after its last shipment), so it lies between these outside instants, exactly.
    outside_in, outside_around = w.publish.last_out - w.connect.first_in, out["t1"] - out["t0"]
    assert outside_in - US <= b["wall"] <= outside_around + US
    # Every sleep of the loop and of the shutdown, and the wait for the broker, is idle.
    assert b["idle"] >= w.connect.seconds + w.sleep.seconds - US > 0


def make_board(slowdown: float) -> BoardConfig:
    return BoardConfig(
        board="test-board",
        batch_size=16,
        flush_interval_s=0.1,
        status_interval_s=0.2,
        emulation=Emulation(compute_slowdown=slowdown),
    )


def test_breakdown_without_a_policy(
    mosquitto, mqtt_client_factory, monkeypatch, policy_keys, grant_run
):
    run = f"bd-{uuid.uuid4().hex[:8]}"
    topics = Topics("edge-rl", run)
    client = mqtt_client_factory(mosquitto)
    inbox = status_inbox(client, topics.status("a0"))
    opts = ActorOptions(
        "a0",
        "CartPole-v1",
        mosquitto.url,
        run=run,
        seed=1,
        max_env_steps=3000,
        policy_key=str(policy_keys[1]),
    )
    node = ActorNode(make_board(1.0), opts)
    grant_run(client, topics, "a0", node.session)
    assert node._status("offline").breakdown == {}  # the last will has none: nothing ran
    # A broker slow to answer: the first 3 waits for the CONNACK time out (100 ms each).
    connected, waits = node.transport.wait_connected, []

    def slow_broker(timeout: float) -> bool:
        waits.append(timeout)
        if len(waits) <= 3:
            time.sleep(timeout)  # the slow broker: no CONNACK within the wait
            return False
        return connected(timeout)

    node.transport.wait_connected = slow_broker
    w = instrument(node, monkeypatch)  # times slow_broker as the wait for the broker
    thread, out = start(node)
    b = final_breakdown(node, thread, out, inbox)

    assert_adds_up(b, w, out)  # idle: at least those 300 ms (and the rest of the wait)
    assert len(waits) >= 4 and w.connect.seconds >= 3 * 0.1
    assert w.env_step.calls == 3000 and w.env_reset.calls >= 1
    assert b["env_step"] >= w.env_step.seconds + w.env_reset.seconds - US
    assert b["exploration"] >= w.exploration.seconds + w.exploration_plan.seconds - US
    assert w.exploration.calls == 3000
    assert b["publish"] >= w.publish.seconds - US and node.batches_sent >= 3000 // 16
    # No policy: no model call (the bucket holds only the laps' own µs, and whatever
    # preemption lands there: its size is no test). Random actions are exploration, which
    # the bound above checks: charged to inference, they would leave exploration short.
    assert w.inference.calls == 0
    assert b["emulation"] == 0.0 and w.charges == []  # a board that is not emulated
    assert b["policy_receive"] == b["model_load"] == 0.0 and w.receive.calls == 0


def _bundle(exported, version: int, signer, run: str, sha: str | None = None) -> bytes:
    manifest = cartpole_manifest(
        exported.tflite,
        exported,
        version=version,
        epsilon=0.1,
        run=run,
        run_id="test-run-start",  # grant_run's run start (tests/conftest.py)
        **({"model_sha256": sha} if sha else {}),
    )
    return encode_policy(PolicyBundle(manifest, compress_model(exported.tflite, "zlib")), signer)


@pytest.mark.slow
def test_breakdown_with_a_policy_a_rejected_one_and_emulation(
    mosquitto, mqtt_client_factory, monkeypatch, policy_keys, grant_run
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
    signer, public_key = policy_keys
    publish(client, topics.policy, _bundle(exported, 1, signer, run, sha="00" * 32))
    opts = ActorOptions(
        "a1",
        "CartPole-v1",
        mosquitto.url,
        run=run,
        seed=2,
        max_env_steps=3000,
        policy_key=str(public_key),
        emulate=True,
    )
    node = ActorNode(make_board(1.5), opts)
    grant_run(client, topics, "a1", node.session, state="paused")
    w = instrument(node, monkeypatch)
    thread, out = start(node)
    wait_for(lambda: node.slot.rejected["bad_hash"] == 1, 20, "the bad policy's rejection")
    publish(client, topics.policy, _bundle(exported, 2, signer, run))
    wait_for(lambda: node.slot.version == 2, 20, "the good policy")
    paused_turns = w.sleep.calls + 20  # paused a while longer: 20 more idle loop turns
    wait_for(lambda: w.sleep.calls >= paused_turns, 20, "20 paused loop turns")
    assert node.env_steps == 0  # paused: not one step yet
    grant_run(client, topics, "a1", node.session)
    b = final_breakdown(node, thread, out, inbox)

    assert_adds_up(b, w, out)  # idle: at least the paused turns' sleeps
    assert w.env_step.calls == 3000 and w.env_reset.calls >= 1
    assert b["env_step"] >= w.env_step.seconds + w.env_reset.seconds - US
    assert b["inference"] >= w.inference.seconds - US and w.inference.calls == 3000
    assert b["exploration"] >= w.exploration.seconds + w.exploration_plan.seconds - US
    assert w.exploration.calls == 3000
    assert b["publish"] >= w.publish.seconds - US
    # The throttle is charged once per env step with that step's inference + exploration
    # + env step (laps that contain the stopwatches' calls; resets are not charged) ...
    assert len(w.charges) == 3000
    charged = sum(w.charges)
    compute_buckets = b["inference"] + b["exploration"] + b["env_step"]
    assert w.compute() - US <= charged <= compute_buckets + 3 * US
    # ... owes 0.5 × that, and has slept all of it but less than its 2 ms threshold (it
    # sleeps the whole debt once the debt passes it; real sleeps never run short), all of
    # which is in the emulation bucket.
    t = node.throttle
    assert t.factor == 0.5 and t.slept_s > t.factor * charged - t.min_sleep_s
    assert b["emulation"] >= t.slept_s - US
    # The loader thread: both payloads verified, one interpreter built, all inside wall.
    assert w.receive.calls == 2 and b["policy_receive"] >= w.receive.seconds - US
    assert b["model_load"] >= node.slot.current.runner.load_seconds - US > 0
    assert b["policy_receive"] + b["model_load"] < b["wall"]
