"""The learner's control plane without training: its real ``FleetControl`` (statuses,
identity, credit grants) on a real MQTT client, publishing signed policies. What the
many-boards e2e test and ``benchmarks/control_plane.py`` drive a fleet with.

    with ControlPlane(url, auth, topics, run_id, signer, env_steps=...) as cp:
        cp.publish_policy(version=1, codec="zlib")
        cp.wait(lambda: cp.loaded(1) == n, timeout=60)

It counts what a learner spends on the fleet: statuses and grants (messages, and CPU
seconds on the transport thread inside ``FleetControl``), the time each board first said
it was connected, and when each board's status first named a policy version.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable

import numpy as np

from edge_rl.config import FleetConfig, RunConfig
from edge_rl.learner.fleet.control import FleetControl
from edge_rl.specs import EnvSpec
from edge_rl.transport.auth import BrokerAuth
from edge_rl.transport.mqtt import MqttTransport
from edge_rl.types import ActorStatus, PolicyBundle
from edge_rl.wire.messages import decode_status
from edge_rl.wire.policy import compress_model, encode_policy
from edge_rl.wire.signing import Signer
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import decode_transitions
from tests.harness.cartpole_policies import cartpole_manifest
from tests.harness.waits import bound, until

CARTPOLE = EnvSpec(obs_shape=(4,), num_actions=2)


class Models:
    """A 4-32-32-2 CartPole Q-network as the learner exports it: int8 (``zlib``) and
    GST-pruned int8 (``blocks``) payloads of the same kind the learner publishes."""

    def __init__(self) -> None:
        from edge_rl.agents.dqn.networks import make_q_network
        from edge_rl.export.tflite import export_policy

        self._obs = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
        self.int8 = export_policy(make_q_network(4, 2, (32, 32), seed=0), self._obs, "int8")

    @functools.cached_property
    def gst(self):
        """The GST-pruned export, made when first asked for."""
        from edge_rl.agents.dqn.networks import make_q_network
        from edge_rl.compress.compressor import Compressor
        from edge_rl.compress.config import CompressionConfig
        from edge_rl.export.tflite import export_policy

        net = make_q_network(4, 2, (32, 32), seed=0)
        comp = Compressor(CompressionConfig(method="gst", s_shift=0.0), net, total_updates=10)
        comp.on_updates(1)
        return export_policy(net, self._obs, "int8", per_channel=False)

    @functools.cached_property
    def gst_blocks(self) -> bytes:
        from edge_rl.export.regions import weight_regions

        return compress_model(self.gst.tflite, "blocks", weight_regions(self.gst.tflite))

    def bundle(self, kind: str, version: int, run: str, run_id: str, signer: Signer) -> bytes:
        """``kind``: ``int8`` (zlib) or ``gst`` (blocks)."""
        exported = self.int8 if kind == "int8" else self.gst
        codec, payload = (
            ("zlib", compress_model(exported.tflite, "zlib"))
            if kind == "int8"
            else ("blocks", self.gst_blocks)
        )
        manifest = cartpole_manifest(
            exported.tflite,
            exported,
            version=version,
            epsilon=0.2,
            codec=codec,
            run=run,
            run_id=run_id,
            learner_step=version,
        )
        return encode_policy(PolicyBundle(manifest, payload), signer)


class ControlPlane:
    def __init__(
        self,
        url: str,
        auth: BrokerAuth | None,
        topics: Topics,
        run_id: str,
        signer: Signer,
        *,
        env_steps: int = 1_000_000,
        lag_per_board: int = 256,
        boards: int = 1,
        grant_every_s: float = 0.05,
        max_grants_per_s: float = 200.0,
    ) -> None:
        self.topics = topics
        self.run_id = run_id
        self.signer = signer
        cfg = RunConfig(
            env_id="CartPole-v1",
            run=topics.run,
            total_env_steps=env_steps,
            max_lag_transitions=lag_per_board * boards,
            learning_starts=0,
            fleet=FleetConfig(max_grants_per_s=max_grants_per_s),
        )
        self.cfg = cfg
        self.fleet = FleetControl(
            cfg.fleet, cfg.pacing, topics, self._publish, self._received, run_id
        )
        self.grant_every_s = grant_every_s
        self._lock = threading.Lock()
        self.sent: Counter[str] = Counter()  # grant / control / policy messages published
        self.statuses = 0
        self.status_by: Counter[str] = Counter()
        self.status_cpu_s = 0.0  # thread CPU inside FleetControl.on_status
        self.grant_cpu_s = 0.0  # thread CPU inside FleetControl.send (the grants)
        self.by_actor: Counter[str] = Counter()  # transitions received
        self.batches = 0
        self.first_seen: dict[str, float] = {}  # actor -> monotonic time of its first status
        self.last: dict[str, ActorStatus] = {}  # actor -> its last status
        self.sessions: dict[str, set[int]] = defaultdict(set)
        self.version_at: dict[int, dict[str, float]] = defaultdict(dict)  # v -> actor -> t
        self.published_at: dict[int, float] = {}
        self.t0 = time.monotonic()
        self.transport = MqttTransport(
            url,
            f"learner-{topics.run}",
            subscriptions=[(topics.all_status, 1), (topics.all_transitions, 1)],
            on_message=self._on_message,
            auth=auth,
            max_queued_messages=0,  # unbounded: the grants of a thousand boards at once
        )
        self._stop = threading.Event()
        self._pump = threading.Thread(target=self._grant_loop, name="grants", daemon=True)

    def __enter__(self) -> ControlPlane:
        self.transport.start()
        if not self.transport.wait_connected(10):
            raise RuntimeError("the control plane cannot connect")
        self._pump.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._pump.join(5)
        self.transport.stop()

    # --- what the learner publishes -------------------------------------------------

    def _publish(self, topic: str, payload: bytes, **kwargs) -> bool:
        kind = "grant" if topic.endswith("/credit") else "control"
        self.sent[kind] += 1
        return self.transport.publish(topic, payload, **kwargs)

    def _received(self) -> tuple[int, dict[str, int]]:
        with self._lock:
            return sum(self.by_actor.values()), dict(self.by_actor)

    def _grant_loop(self) -> None:
        """The learner's main thread's share: ``send("running")`` every ``grant_every_s``,
        as a learner whose updates keep up with what it receives (credit flows on)."""
        cfg = self.cfg
        while not self._stop.wait(self.grant_every_s):
            updates = int(self._received()[0] * cfg.replay_ratio)
            t = time.thread_time()
            self.fleet.send("running", updates=updates)
            self.grant_cpu_s += time.thread_time() - t

    def publish_policy(self, payload: bytes, version: int) -> None:
        self.published_at[version] = time.monotonic()
        self.sent["policy"] += 1
        self.transport.publish(self.topics.policy, payload, qos=1, retain=True)

    # --- what it receives (transport thread) ----------------------------------------

    def _on_message(self, topic: str, payload: bytes) -> None:
        if topic.endswith("/status"):
            t = time.thread_time()
            self.fleet.on_status(topic, payload)
            self.status_cpu_s += time.thread_time() - t
            self._record_status(payload)
        elif payload:
            batch = decode_transitions(payload, CARTPOLE)  # the boards send compact headers
            with self._lock:
                self.by_actor[batch.actor_id] += len(batch)
                self.batches += 1

    def _record_status(self, payload: bytes) -> None:
        if not payload:
            return
        s = decode_status(payload)
        now = time.monotonic()
        with self._lock:
            self.statuses += 1
            self.status_by[s.actor_id] += 1
            self.last[s.actor_id] = s
            if s.state != "offline":
                self.first_seen.setdefault(s.actor_id, now)
                self.sessions[s.actor_id].add(s.session)
            if s.policy_version:
                self.version_at[s.policy_version].setdefault(s.actor_id, now)

    # --- questions ------------------------------------------------------------------

    def loaded(self, version: int) -> int:
        with self._lock:
            return len(self.version_at[version])

    def fan_out_s(self, version: int) -> list[float]:
        """Per board: seconds from the policy's publish to the first status naming it."""
        t = self.published_at[version]
        with self._lock:
            return sorted(v - t for v in self.version_at[version].values())

    def statuses_now(self) -> dict[str, ActorStatus]:
        with self._lock:
            return dict(self.last)

    def fleet_received(self) -> int:
        """Transitions received from every board so far."""
        return self._received()[0]

    def stepping(self) -> int:
        with self._lock:
            return len(self.by_actor)


def wait(cond: Callable[[], bool], timeout: float, step: float = 0.1) -> bool:
    """True once ``cond()`` holds, False after ``timeout`` s stretched by the load."""
    return until(cond, bound(timeout), step)
