"""The learner node: ingest from the fleet, train at the replay ratio, publish policies.

node = LearnerNode(cfg, broker_url, run_dir)
summary = node.run()          # until total_env_steps transitions have been received

threads:  paho network  --(bounded queue)-->  ingest: decode, validate, dedup, replay.add
          main: update at the replay ratio; every K updates export int8 -> parity -> publish
                flow control (pause the fleet when updates fall behind); progress + logs
          exporter: conversion, parity, publish and scoring, while training goes on
Each thread's wall time is split into buckets by its own LapClock (telemetry/breakdown.py).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from edge_rl.config import RunConfig
from edge_rl.edge.envs import make_env
from edge_rl.edge.evaluate import evaluate
from edge_rl.nodes.algos import make_algo
from edge_rl.nodes.credit import CreditLedger
from edge_rl.nodes.publisher import PolicyPublisher, Published, snapshot
from edge_rl.nodes.summary import run_summary
from edge_rl.replay.buffer import ReplayBuffer
from edge_rl.replay.ingest import Ingest
from edge_rl.specs import EnvSpec
from edge_rl.telemetry import breakdown
from edge_rl.telemetry.carbon import HostCarbon
from edge_rl.telemetry.logs import MetricsLog, write_json_atomic
from edge_rl.telemetry.progress import LiveView
from edge_rl.transport import codec
from edge_rl.transport.mqtt import MqttTransport
from edge_rl.transport.topics import SYS_DROPPED, Topics
from edge_rl.types import ActorStatus, ControlMessage, RunState

log = logging.getLogger(__name__)

METRICS = [
    "wall_s", "env_steps", "episodes", "recent_return", "updates", "updates_per_s", "loss",
    "mean_q", "policy_version", "actors_online", "transitions_rejected",
    "transitions_duplicate", "ingest_queue_dropped", "fleet_state", "compression",
    "policy_bytes", "epsilon", "sigma",
]  # fmt: skip


class LearnerNode:
    def __init__(
        self,
        cfg: RunConfig,
        broker_url: str,
        run_dir: Path,
        *,
        fleet_alive: Callable[[], bool] | None = None,
        view: LiveView | None = None,
    ) -> None:
        self.cfg, self.run_dir = cfg, run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        env = make_env(cfg.env_id)
        self.spec = EnvSpec.from_gym(env.observation_space, env.action_space)
        env.close()
        self.topics = Topics(cfg.transport.root, cfg.run)
        self.replay = ReplayBuffer(self.spec, cfg.replay_capacity, seed=cfg.seed)
        self.agent = make_algo(cfg, self.spec)
        self.publisher = PolicyPublisher(cfg, self.spec, self.replay, run_dir)
        self.version = 0  # of the last published policy; 0 = none yet (actors act randomly)
        self._published: Published | None = None  # the policy actors run now
        self._last_export_updates = 0
        self._exporter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="exporter")
        self._export_job: Future | None = None
        self._next_tick = 0.0
        self._best: tuple[Published, float] | None = None  # model selection (select_every)
        self.selection_scores: dict[int, float] = {}  # policy version -> greedy return
        self.deployed_from: int | None = None  # version whose weights were redeployed
        self.ingest = Ingest(
            self.spec,
            self.replay,
            self.topics,
            latest_version=lambda: self.version,
            max_payload_bytes=cfg.transport.max_payload_bytes,
            max_policy_lag=cfg.max_policy_lag,
        )
        self.inbox: queue.Queue[tuple[str, bytes]] = queue.Queue(cfg.transport.ingest_queue)
        self.inbox_dropped = 0
        self.actors: dict[str, ActorStatus] = {}
        # The last runtime breakdown of each actor: kept apart because the last will says
        # "offline" without one (it is made before the actor starts).
        self.breakdowns: dict[str, dict[str, float]] = {}
        self.status_rejected = 0
        self.broker_dropped = 0  # $SYS counter of the whole broker, when it publishes one
        self.fleet_state: RunState = "running"
        self._fleet_alive = fleet_alive or (lambda: True)
        self.view = view
        self._stop = threading.Event()
        self._control_lock = threading.Lock()
        self._last_control: ControlMessage | None = None
        self._ledger = CreditLedger()
        self._metrics: dict[str, float] = {"loss": float("nan"), "mean_q": float("nan")}
        self._episodes_seen = 0  # fleet episodes whose return the compressor has seen
        self.policy_bytes_total = 0  # payload bytes of every policy published (per subscriber)
        self.publishes = 0
        self._clocks = breakdown.learner_clocks()  # per thread: main, ingest, exporter
        self._clock = self._clocks["main"]
        self.carbon = HostCarbon(cfg.energy, run_dir)  # fails here on an unknown country
        self.transport = MqttTransport(
            broker_url,
            client_id=f"learner-{cfg.run}",
            subscriptions=[
                (self.topics.all_transitions, 1),
                (self.topics.all_status, 1),
                (self.topics.policy, 1),
                (SYS_DROPPED, 0),  # Mosquitto drops past its queue limits without telling us
            ],
            on_message=self._on_message,
            on_connect=self._on_connect,
            max_packet_size=cfg.transport.max_packet_bytes,
        )

    # --- network thread: hand over, never work ---------------------------------------

    def _on_message(self, topic: str, payload: bytes) -> None:
        if topic.endswith("/transitions"):
            try:
                self.inbox.put_nowait((topic, payload))
            except queue.Full:  # bounded: count it, the actor's seq gap shows it too
                self.inbox_dropped += 1
        elif topic.endswith("/status"):
            try:
                status = codec.decode_status(payload)
            except codec.CodecError:
                self.status_rejected += 1
                return
            if status.actor_id == self.topics.actor_of(topic):
                self.actors[status.actor_id] = status
                if status.breakdown:
                    self.breakdowns[status.actor_id] = status.breakdown
            else:
                self.status_rejected += 1
        elif topic == SYS_DROPPED:
            try:
                self.broker_dropped = int(payload)
            except ValueError:
                pass
        elif topic == self.topics.policy:
            # A retained policy from an earlier learner of this run: keep versions monotonic.
            try:
                bundle = codec.decode_policy(payload, self.cfg.transport.max_packet_bytes)
                v = bundle.manifest.policy_version
                self.version = max(self.version, v)
            except codec.CodecError:
                pass

    def _on_connect(self) -> None:
        # The broker may have restarted without persistence: republish what actors need.
        if self._published is not None:
            self.transport.publish(self.topics.policy, self._published.payload, retain=True)
        self._send_control(self.fleet_state, force=True)

    def _send_control(self, state: RunState, force: bool = False) -> None:
        with self._control_lock:
            if self.fleet_state == "stopped" and state != "stopped":
                return  # stopping is final for this run
            msg = ControlMessage(state) if state == "stopped" else self._credit()
            if msg == self._last_control and not force:
                return
            self.fleet_state, self._last_control = state, msg
            self.transport.publish(self.topics.control, codec.encode_control(msg), retain=True)

    def _credit(self) -> ControlMessage:
        """Env-step credit (see ``CreditLedger``): the fleet may have produced at most
        ``learning_starts + max_lag + updates / replay_ratio`` transitions in all, never more
        than the budget. An actor not known yet gets none: it announces itself with its
        status on connect and is granted credit in the next control message (~50 ms)."""
        cfg = self.cfg
        allowed = cfg.learning_starts + cfg.max_lag_transitions
        allowed += math.ceil(self.agent.updates / cfg.replay_ratio)
        allowed = min(allowed, cfg.total_env_steps)
        with self.ingest.lock:
            received, by_actor = self.ingest.stats.transitions, dict(self.ingest.stats.by_actor)
        online = {a for a, st in self.actors.items() if st.state not in ("offline", "stopped")}
        known = online | {a for a in by_actor if a not in self.actors}
        credits = self._ledger.grant(allowed, received, by_actor, sorted(known))
        return ControlMessage("running", credits=credits, default_credit=0)

    def _ingest_loop(self) -> None:
        lap = self._clocks["ingest"].lap
        while not (self._stop.is_set() and self.inbox.empty()):
            try:
                topic, payload = self.inbox.get(timeout=0.05)
            except queue.Empty:
                continue
            lap("idle")
            if self.ingest.handle(topic, payload):
                if self.env_steps >= self.cfg.total_env_steps and self.fleet_state != "stopped":
                    self._send_control("stopped")  # at once, next to the data
            lap("ingest")

    # --- main thread ----------------------------------------------------------------

    @property
    def env_steps(self) -> int:
        return self.ingest.stats.transitions

    def _target_updates(self) -> int:
        return int(self.cfg.replay_ratio * max(0, self.env_steps - self.cfg.learning_starts))

    def run(self) -> dict[str, Any]:
        for clock in self._clocks.values():  # every thread's wall time starts here
            clock.restart()
        self.carbon.start()  # codecarbon, until the summary: the whole run is measured
        self.agent.compile()  # trace before any data flows: tracing holds the GIL for seconds
        self.transport.start()
        if not self.transport.wait_connected(15):
            self.transport.stop()
            raise ConnectionError(f"cannot reach the MQTT broker at {self.transport.url}")
        time.sleep(0.3)  # a retained policy of this run, if any, arrives first
        self.version = max(self.version, self._version_on_disk())
        ingest = threading.Thread(target=self._ingest_loop, name="ingest", daemon=True)
        ingest.start()
        self._send_control("running")
        log_ = MetricsLog(self.run_dir, METRICS)
        self._clock.lap("setup")
        self._t0 = time.monotonic()
        self._rate = (self._t0, 0)
        try:
            while self.env_steps < self.cfg.total_env_steps:
                self._train_for(0.05)
                self._feed_returns()
                self._send_control("running")  # new credit, if there is any to grant
                if self.agent.updates - self._last_export_updates >= self.cfg.export.every_updates:
                    self._export_and_publish()
                self._tick(log_)
                if self.fleet_state != "stopped" and not self._fleet_alive():
                    raise RuntimeError("every fleet actor process has exited; see fleet logs")
            self._send_control("stopped")  # (the ingest thread usually did already)
            self._clock.lap("other")
            self._wait_for_actors(timeout=15)
            self._clock.lap("idle")
            while self.agent.updates < self._target_updates():  # pay the replay ratio in full
                self._train_for(0.5)
            self._export_and_publish(wait=True)
            self._deploy_best()
            self._tick(log_, force=True)
        finally:
            self._exporter.shutdown(wait=True)
            if self.fleet_state != "stopped":
                self._send_control("stopped")
            self._stop.set()
            ingest.join(timeout=10)
            log_.close()
        summary = self._summary()
        write_json_atomic(self.run_dir / "summary.json", summary)
        breakdown.write_report(self.run_dir, summary["runtime_breakdown"])
        self.transport.stop()
        return summary

    def _train_for(self, seconds: float) -> None:
        self._clock.lap("other")  # what the main thread did since its last lap: control, ticks
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.agent.updates >= self._target_updates() or len(self.replay) == 0:
                time.sleep(0.002)
                self._clock.lap("idle")
                return
            self._metrics = self.agent.update(self.replay)
            self._clock.lap("updates")

    def _feed_returns(self) -> None:
        """GST's reward-aware controller follows the fleet's episode returns."""
        compressor = self.agent.compressor
        if compressor is None:
            return
        returns, self._episodes_seen = self.ingest.returns_since(self._episodes_seen)
        for r in returns:
            compressor.observe_return(r)

    def _compression(self) -> float | None:
        c = self.agent.compressor
        return None if c is None else round(c.ratios().network, 4)

    def _export_and_publish(self, wait: bool = False) -> None:
        """Export the policy network; in the background unless ``wait``.

        The network is snapshotted here (milliseconds); conversion, the LiteRT parity check,
        publishing and scoring (~0.5 s and more) run on the exporter thread while training
        goes on. One export at a time: while one is in flight, the next is skipped.
        """
        self._last_export_updates = self.agent.updates
        if len(self.replay) < 20:
            return
        lap = self._clock.lap
        lap("other")
        if self._export_job is not None and not self._export_job.done():
            if not wait:
                return
            self._export_job.result()
            lap("idle")
        args = (
            snapshot(self.agent.policy_network),
            self.version + 1,
            self.agent.updates,
            self.agent.exploration(self.env_steps),
            self._compression(),  # of the snapshot: the compressor changes only here
        )
        lap("export")  # the snapshot
        if wait:
            self._export_job_body(*args, clock=self._clock)
        else:
            clock = self._clocks["exporter"]
            self._export_job = self._exporter.submit(self._export_job_body, *args, clock=clock)

    def _export_job_body(
        self,
        model: Any,
        version: int,
        step: int,
        exploration: dict[str, float],
        compression: float | None,
        *,
        clock: breakdown.LapClock,  # of the thread this runs on
    ) -> None:
        clock.lap("idle")  # waiting for this job (on the main thread: ~0, it just lapped)
        try:
            published = self.publisher.export(self.agent, model, version, step, exploration)
        except Exception:  # noqa: BLE001 - a failed export must not end the run
            published = None
            self.publisher.failed += 1
            log.exception("export v%d failed", version)
        clock.lap("export")
        if published is not None:
            published = dataclasses.replace(published, compression=compression)
        if published is not None and self._publish(published):
            self._log_publish(published)
            clock.lap("publish")
            every = self.cfg.select_every
            if every and version % every == 0:
                self._score(published)
                clock.lap("evaluate")
        clock.lap("publish")  # a refused publish, if any

    def _publish(self, published: Published) -> bool:
        version = published.bundle.manifest.policy_version
        try:
            sent = self.transport.publish(self.topics.policy, published.payload, retain=True)
        except ValueError as e:  # larger than the broker accepts: keep the previous policy
            self.publisher.failed += 1
            log.warning("policy v%d not published: %s (transport.max_packet_bytes)", version, e)
            return False
        if not sent:
            log.warning("policy v%d not published: broker not connected", version)
            return False
        # Assign, don't increment: the broker's echo of this publish may already have
        # raised self.version on the network thread.
        self.version = version
        self._published = published
        self.publisher.save(published)
        return True

    def _log_publish(self, published: Published) -> None:
        """One line per publish in publishes.jsonl: what every broadcast cost on the wire."""
        m = published.bundle.manifest
        self.policy_bytes_total += len(published.payload)
        self.publishes += 1
        record = {
            "policy_version": m.policy_version,
            "learner_step": m.learner_step,
            "env_steps": self.env_steps,
            "payload_bytes": len(published.payload),
            "model_bytes": m.model_size,
            "codec": m.codec,
            "compression": published.compression,
        }
        with open(self.run_dir / "publishes.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")
        log.info(
            "published v%d: %d bytes on the wire (model %d), compression %s",
            m.policy_version, len(published.payload), m.model_size, record["compression"],
        )  # fmt: skip

    def _score(self, published: Published) -> float:
        """Greedy return of a published int8 model in LiteRT on the learner's own env.

        Model selection, like SB3's EvalCallback: these episodes are not training env steps
        and use seeds apart from the final evaluation's, so the final figure is not the one
        the selection was made on.
        """
        result = evaluate(
            published.model,
            self.cfg.env_id,
            self.cfg.select_episodes,
            manifest=published.bundle.manifest,
            seed=self.cfg.seed + 20_000,
        )
        v = published.bundle.manifest.policy_version
        self.selection_scores[v] = result.mean
        if self._best is None or result.mean >= self._best[1]:
            self._best = (published, result.mean)
        log.info("policy v%d scores %.1f (best so far %.1f)", v, result.mean, self._best[1])
        return result.mean

    def _deploy_best(self) -> None:
        """At the end, republish the best-scoring policy if the last one scores lower."""
        if not self.cfg.select_every or self._published is None:
            return
        last = self._published
        v_last = last.bundle.manifest.policy_version
        score = self.selection_scores.get(v_last)
        if score is None:
            score = self._score(last)
            self._clock.lap("evaluate")
        best, best_score = self._best  # set: the last one has been scored at least
        if best is last or best_score <= score:
            return
        again = self.publisher.reversion(best, self.version + 1)
        published = self._publish(again)
        self._clock.lap("publish")
        if published:
            self.deployed_from = best.bundle.manifest.policy_version
            self._log_publish(again)
            log.info(
                "deployed v%d: the weights of v%d (score %.1f) over the last v%d (%.1f)",
                self.version, self.deployed_from, best_score, v_last, score,
            )  # fmt: skip

    def _version_on_disk(self) -> int:
        path = self.run_dir / "manifest.json"
        if not path.exists():
            return 0
        return int(json.loads(path.read_text()).get("policy_version", 0))

    def _wait_for_actors(self, timeout: float) -> None:
        """After "stopped": let running actors flush their last batches (bounded)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            busy = [a for a in self.actors.values() if a.state in ("running", "paused", "starting")]
            if not busy and self.inbox.empty():
                break
            time.sleep(0.1)
        time.sleep(0.2)
        while not self.inbox.empty() and time.monotonic() < deadline + 5:
            time.sleep(0.05)

    def _tick(self, log_: MetricsLog, force: bool = False) -> None:
        now = time.monotonic()
        if now < self._next_tick and not force:
            return
        self._next_tick = now + 1.0
        t_prev, u_prev = self._rate
        self._rate = (now, self.agent.updates)
        row = self._row(now, (self.agent.updates - u_prev) / max(now - t_prev, 1e-9))
        log_.write(row, step=row["env_steps"])
        if self.view is not None:
            self.view.update(row, dict(self.actors))

    def _row(self, now: float, updates_per_s: float) -> dict[str, Any]:
        s = self.ingest.stats
        ret = self.ingest.recent_return()
        return {
            "wall_s": round(now - self._t0, 2),
            "env_steps": s.transitions,
            "episodes": s.episodes,
            "recent_return": float("nan") if ret is None else ret,
            "updates": self.agent.updates,
            "updates_per_s": round(updates_per_s, 1),
            "loss": self._metrics.get("loss", float("nan")),
            "mean_q": self._metrics.get("mean_q", float("nan")),
            "policy_version": self.version,
            "actors_online": sum(a.state != "offline" for a in self.actors.values()),
            "transitions_rejected": s.rejected_transitions,
            "transitions_duplicate": s.duplicate_transitions,
            "ingest_queue_dropped": self.inbox_dropped,
            "fleet_state": self.fleet_state,
            "compression": self._compression(),
            "policy_bytes": len(self._published.payload) if self._published else 0,
            **self.agent.exploration(s.transitions),
        }

    def _summary(self) -> dict[str, Any]:
        result = None
        self._clock.lap("other")
        if self._published is not None:
            result = evaluate(
                self._published.model,
                self.cfg.env_id,
                self.cfg.eval_episodes,
                manifest=self._published.bundle.manifest,
                seed=self.cfg.seed + 10_000,
            )
        self._clock.lap("evaluate")  # the main thread's breakdown ends here
        self.carbon.stop()
        return run_summary(self, result)
