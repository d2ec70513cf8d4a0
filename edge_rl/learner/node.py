"""The learner node: ingest from the fleet, train at the replay ratio, publish policies.

    node = LearnerNode(cfg, mqtt_connect(url), run_dir)   # or MemoryBroker().connect
    summary = node.run()          # until total_env_steps transitions have been received

threads:  transport --(Inbox: bounded queue)--> ingest: decode, validate, dedup, replay.add
          main: update at the replay ratio; every K updates an export (exporter.py);
                env-step credit for the fleet (fleet_control.py); progress and metrics
          exporter: conversion, parity, broadcast and scoring, while training goes on
Each thread's wall time is split into buckets by its own LapClock (telemetry/breakdown.py).
This module only wires the parts and runs the loop; each part says what it does.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edge_rl.agents.algo import make_algo
from edge_rl.config import RunConfig
from edge_rl.envs import env_spec
from edge_rl.learner.credit import Grants
from edge_rl.learner.durable import Durable, StopRequest, saved_run_id
from edge_rl.learner.fleet_control import FleetControl
from edge_rl.learner.inbox import Inbox
from edge_rl.learner.ingest.ingest import Ingest
from edge_rl.learner.metrics import METRICS, Meter
from edge_rl.learner.outbound.broadcast import PolicyBroadcast
from edge_rl.learner.outbound.exporter import Exporter
from edge_rl.learner.outbound.packager import PolicyPublisher
from edge_rl.learner.outbound.selection import ModelSelection
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.learner.summary import record_of, write_summary
from edge_rl.learner.trainer import Trainer
from edge_rl.telemetry import breakdown
from edge_rl.telemetry.carbon import HostCarbon
from edge_rl.telemetry.logs import MetricsLog
from edge_rl.telemetry.progress import LiveView
from edge_rl.transport.base import Connect
from edge_rl.wire.signing import Signer
from edge_rl.wire.topics import SYS_DROPPED, Topics

log = logging.getLogger(__name__)


class LearnerNode:
    def __init__(
        self,
        cfg: RunConfig,
        connect: Connect,
        run_dir: Path,
        *,
        signer: Signer | None = None,
        fleet_alive: Callable[[], bool] | None = None,
        view: LiveView | None = None,
        run_id: str | None = None,  # this start of the run (protocol §5); default: a new one
        stop: StopRequest | None = None,
        resume: bool = False,
    ) -> None:
        """``signer``: the policy signing key (default: run_dir/signing.key, made if missing).
        ``stop``: set by a signal, ends the run early; ``resume``: from run_dir/checkpoint,
        with the run id it had (its actors keep their place)."""
        self.cfg = cfg
        self.run_dir = run_dir
        self.stop = stop or StopRequest()
        self.resume = resume
        self.run_id = run_id or (resume and saved_run_id(run_dir)) or secrets.token_hex(8)
        run_dir.mkdir(parents=True, exist_ok=True)
        self.signer = signer or Signer.load_or_create(run_dir / "signing.key")
        self.spec = env_spec(cfg.env_id)
        self.topics = topics = Topics(cfg.transport.root, cfg.run)
        self.clocks = breakdown.learner_clocks()  # per thread: main, ingest, exporter
        self.carbon = HostCarbon(cfg.energy, run_dir)  # fails here on an unknown country
        # In data-flow order. The transport first: every part that sends is handed its
        # publish; its handlers are bound to parts made below, before it starts.
        subscriptions = [(t, 1) for t in (topics.all_transitions, topics.all_status)]
        subscriptions.append((SYS_DROPPED, 0))  # Mosquitto's drops past its queue limits
        self.transport = connect(
            f"learner-{cfg.run}",
            subscriptions=subscriptions,
            on_message=self._on_message,
            on_connect=self._on_connect,
            max_packet_size=cfg.transport.max_packet_bytes,
        )
        publish = self.transport.publish
        # actors -> transitions -> inbox -> ingest -> replay
        self.replay = ReplayBuffer(self.spec, cfg.replay_capacity, seed=cfg.seed)
        rid, latest = self.run_id, lambda: self.broadcast.version
        # What fleet control granted, as published: the bound on each actor's data and claims
        # (kept in run_dir, so that a resumed learner is bound by it too).
        reserve = max(64, cfg.max_lag_transitions // 8)
        self.grants = Grants(run_dir / "grants.json", rid, reserve)
        if resume:
            self.grants.load()
        self.ingest = Ingest.for_run(cfg, self.spec, self.replay, latest, rid, self.grants)
        ingest_lost = self.ingest.lost  # what the learner itself lost: written off at once
        self.inbox = Inbox(
            self.ingest, cfg.transport.ingest_queue, self.clocks["ingest"], self._check_budget
        )
        # replay -> updates -> export -> policy topic -> actors
        self.agent = make_algo(cfg, self.spec)
        self.trainer = Trainer(self.agent, self.replay, cfg, lambda: self.env_steps, self.clocks)
        self.publisher = PolicyPublisher(cfg, self.spec, self.replay, run_dir, self.signer, rid)
        self.broadcast = PolicyBroadcast(topics, publish, self.publisher, cfg.transport)
        self.selection = ModelSelection.for_run(cfg)
        self.exporter = Exporter(
            self.agent,
            self.replay,
            self.publisher,
            self.broadcast,
            self.selection,
            self.clocks,
            lambda: self.env_steps,
            cfg.export.every_updates,
        )
        # statuses in, control and credit out
        self.fleet = FleetControl(
            cfg,
            topics,
            publish,
            self.ingest.received,
            rid,
            ingest_lost,
            self.grants,
            self.ingest.accounting.session_of,
        )
        self.meter = Meter(self.ingest, self.trainer, self.broadcast, self.fleet, self.inbox, view)
        self._fleet_alive = fleet_alive or (lambda: True)
        self.deployed_from: int | None = None  # version whose weights were redeployed
        self.broker_dropped = 0  # $SYS counter of the whole broker, when it publishes one
        self.durable = Durable(self)  # checkpoints: schedule, save, restore (durable.py)

    # --- transport thread: hand over, never work ---------------------------------------

    def _on_message(self, topic: str, payload: bytes) -> None:
        if topic.endswith("/transitions"):
            self.inbox.offer(topic, payload)
        elif topic.endswith("/status"):
            self.fleet.on_status(topic, payload)
        elif topic == SYS_DROPPED:
            self.broker_dropped = int(payload) if payload.isdigit() else self.broker_dropped

    def _on_connect(self) -> None:
        # The broker may have restarted without persistence: republish what actors need.
        self.broadcast.republish()
        self.fleet.republish()

    def _check_budget(self) -> None:  # ingest thread, after each accepted batch
        if self.env_steps >= self.cfg.total_env_steps and self.fleet.state != "stopped":
            self.fleet.send("stopped")  # at once, next to the data

    # --- main thread ----------------------------------------------------------------

    @property
    def env_steps(self) -> int:
        return self.ingest.transitions

    def run(self) -> dict[str, Any]:
        for clock in self.clocks.values():  # every thread's wall time starts here
            clock.restart()
        self.carbon.start()  # codecarbon, until the summary: the whole run is measured
        self.agent.compile()  # trace before any data flows: tracing holds the GIL for seconds
        if self.resume:  # before the transport: versions, counters and replay go on
            self.durable.restore()
        self.publisher.wait_ready(timeout=120)  # the export worker, started in the background
        self.transport.start()
        if not self.transport.wait_connected(15):
            self.transport.stop()
            raise ConnectionError(f"cannot reach the MQTT broker at {self.transport.url}")
        if not self.resume:  # an earlier run's retained policy is no one's to load
            self.broadcast.clear()  # (resumed: its own, republished on connect)
        self.broadcast.continue_after_manifest(self.run_dir / "manifest.json")
        self.inbox.start()
        self.fleet.send("running", self.agent.updates)
        metrics = MetricsLog(self.run_dir, METRICS, append=self.resume)
        self.clocks["main"].lap("setup")
        self.meter.start(self.durable.wall_before)
        self.stop.armed = True  # a signal now ends the loop (durable.StopRequest)
        try:
            while self.env_steps < self.cfg.total_env_steps and not self.stop.is_set():
                self.trainer.train_for(0.05)
                self.agent.feed_returns(self.ingest.returns_since)
                self.fleet.send("running", self.agent.updates)  # new credit, if any
                self.exporter.maybe_export(self.agent.compression())
                self.meter.tick(metrics)
                if self.fleet.state != "stopped" and not self._fleet_alive():
                    raise RuntimeError("every fleet actor process has exited; see fleet logs")
                self.durable.maybe_save()
            self.stop.armed = False
            if self.stop.is_set():  # SIGTERM/SIGINT: stop the fleet, checkpoint, summary
                self.fleet.send("stopped")
                self.fleet.wait_for_actors(self.inbox.empty, timeout=10)  # their last batches
                self.durable.save()
            else:
                self._finish(metrics)
        finally:
            self.stop.armed = False
            self.exporter.shutdown()
            self.fleet.send("stopped")  # (no-op when already stopped)
            self.inbox.stop(timeout=10)
            metrics.close()
        summary = write_summary(self.run_dir, record_of(self, evaluate=not self.stop.is_set()))
        # this process is done: nothing to load
        self.broadcast.clear()
        self.fleet.clear()
        self.transport.stop()
        return summary

    def _finish(self, metrics: MetricsLog) -> None:
        """The budget is in: stop the fleet, pay the replay ratio in full, last export."""
        lap = self.clocks["main"].lap
        self.fleet.send("stopped")  # (the ingest thread usually did already)
        lap("other")
        self.fleet.wait_for_actors(self.inbox.empty, timeout=15)
        lap("idle")
        self.trainer.pay_in_full()
        self.exporter.export(self.agent.compression(), wait=True)
        self.deployed_from = self.exporter.deploy_best()
        self.meter.tick(metrics, force=True)
        self.durable.save(finished=True)
