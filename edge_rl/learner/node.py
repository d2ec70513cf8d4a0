"""The learner node: ingest from the fleet, train at the replay ratio, publish policies.

    node = LearnerNode(cfg, mqtt_connect(url), run_dir)   # or MemoryBroker().connect
    summary = node.run()          # until total_env_steps transitions have been received

The run ends with its fleet serving the result: the deployed (best) policy stays retained
and signed on the policy topic (and in RUN_DIR/policy.bundle), and the control says
``serving`` (from then on the learner's last will says ``serving`` too). A stop request
(SIGTERM, Ctrl-C) or a learner that vanishes before that (its last will) leaves the run
``paused``: the boards hold their policy and wait for ``--resume``.

threads:  transport --(Inbox: bounded queue)--> ingest: decode, validate, dedup, replay.add
          main: update at the replay ratio; every K updates an export (exporter.py);
                env-step credit for the fleet (fleet/control.py); progress and metrics
          exporter: conversion, parity, broadcast and scoring, while training goes on
Each thread's wall time is split into buckets by its own LapClock (telemetry/breakdown.py).
This module only wires the parts and runs the loop; each part says what it does, keeps
its own checkpointed state (durable.py) and reports its own figures (summary.py).
``node.algo`` is the algorithm adapter (agents/<algo>/adapter.py), ``node.algo.learner`` its
TensorFlow learner.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from edge_rl.agents.algo import Algo, AlgoSetup, ParityGate
from edge_rl.agents.registry import make_algo
from edge_rl.config import RunConfig
from edge_rl.envs import env_spec
from edge_rl.export.worker import default_worker
from edge_rl.learner.checkpoint import header_for
from edge_rl.learner.datasets import load_demos
from edge_rl.learner.demos import BatchMixer, ExportObservations
from edge_rl.learner.durable import Durable, Headline, JsonPart, StopRequest, saved_run_id
from edge_rl.learner.fleet.control import FleetControl, control_will
from edge_rl.learner.fleet.credit import Grants
from edge_rl.learner.fleet.figures import status_limits
from edge_rl.learner.fleet.join import JoinDesk
from edge_rl.learner.fleet.quarantine import BoardWatch
from edge_rl.learner.inbox import Inbox
from edge_rl.learner.ingest.ingest import Ingest
from edge_rl.learner.ingest.plausible import bounds_for_env
from edge_rl.learner.metrics import METRICS, Meter
from edge_rl.learner.outbound.broadcast import PolicyBroadcast
from edge_rl.learner.outbound.exporter import Exporter
from edge_rl.learner.outbound.packager import PolicyPackager, Stamp
from edge_rl.learner.outbound.selection import ModelSelection, evaluate_policy
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.learner.run_dir import RunDir
from edge_rl.learner.summary import InboxCounts, RunRecord, write_summary
from edge_rl.learner.trainer import Trainer
from edge_rl.sim.fleet import fleet_ids
from edge_rl.specs import EnvSpec
from edge_rl.telemetry import breakdown
from edge_rl.telemetry.carbon import HostCarbon
from edge_rl.telemetry.logs import MetricsLog
from edge_rl.telemetry.progress import LiveView
from edge_rl.transport.base import Connect, unreachable
from edge_rl.types import Saveable
from edge_rl.wire.signing import Signer
from edge_rl.wire.topics import SYS_DROPPED, Topics

log = logging.getLogger(__name__)


def algo_for_run(cfg: RunConfig, spec: EnvSpec) -> Algo:
    """The run's algorithm adapter, given only the sections of the config it needs."""
    e = cfg.export
    gate = ParityGate(
        e.min_greedy_agreement, e.max_action_error, e.mean_action_error, e.action_error_quantile
    )
    setup = AlgoSetup(cfg.seed, cfg.total_env_steps, cfg.total_updates, gate, cfg.compression)
    return make_algo(cfg.algo, getattr(cfg, cfg.algo), spec, setup)


def ingest_for(
    cfg: RunConfig,
    spec: EnvSpec,
    replay: ReplayBuffer,
    latest_version: Callable[[], int],
    run_id: str,
    grants: Grants,
    demos: BatchMixer | None = None,
) -> Ingest:
    """The learner's ingest: limits from the run config, data bounded by ``grants``,
    plausibility from the env (``bounds_for_env`` may step it: a warm-up)."""
    return Ingest(
        spec,
        replay,
        Topics(cfg.transport.root, cfg.run),
        latest_version,
        max_payload_bytes=cfg.transport.max_payload_bytes,
        max_policy_lag=cfg.max_policy_lag,
        max_abs_observation=cfg.max_abs_observation,
        max_abs_reward=cfg.max_abs_reward,
        max_actors=cfg.fleet.max_actors,
        max_transitions=cfg.total_env_steps,
        run_id=run_id,
        grants=grants,
        bounds=bounds_for_env(cfg.env_id, cfg.ingest, cfg.seed, cfg.max_abs_reward),
        watch=BoardWatch(cfg.quarantine, cfg.fleet.max_actors),
        evict=cfg.quarantine.evict,
        demos=demos,
    )


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
        keep_quarantine: bool = False,
        release: Collection[str] = (),
    ) -> None:
        """``signer``: the policy signing key (default: the run's, RunDir.signing_key_for,
        made if missing). ``stop``: set by a signal, ends the run early; ``resume``: from
        the run directory's checkpoint, with the run id it had (its actors keep their place)."""
        self.cfg = cfg
        self.run_dir = run_dir = RunDir(run_dir)
        self.stop = stop or StopRequest()
        self.interrupted = False  # the loop ended by a signal before the budget
        self.resume = resume
        # A quarantine is for its run start: a resumed run lifts each one unless the
        # operator keeps them (and then lifts only ``release``).
        self.keep_quarantine = keep_quarantine
        self.release = tuple(release)
        self.run_id = run_id or (resume and saved_run_id(run_dir)) or secrets.token_hex(8)
        run_dir.mkdir()
        self.signer = signer or Signer.load_or_create(run_dir.signing_key_for(cfg.signing_key))
        self.spec = env_spec(cfg.env_id)
        self.topics = topics = Topics(cfg.transport.root, cfg.run)
        self.clocks = breakdown.learner_clocks()  # per thread: main, ingest, exporter
        self.carbon = HostCarbon(cfg.energy, run_dir.path)  # fails here on an unknown country
        # In data-flow order. The transport first: every part that sends is handed its
        # publish; its handlers are bound to parts made below, before it starts.
        subscriptions = [
            (t, 1) for t in (topics.all_transitions, topics.all_status, topics.all_hello)
        ]
        subscriptions.append((SYS_DROPPED, 0))  # Mosquitto's drops past its queue limits
        self.transport = connect(
            f"learner-{cfg.run}",
            subscriptions=subscriptions,
            on_message=self._on_message,
            on_connect=self._on_connect,
            will=control_will(topics, self.run_id),
            max_packet_size=cfg.transport.max_packet_bytes,
        )
        publish = self.transport.publish
        # actors -> transitions -> inbox -> ingest -> replay
        self.replay = ReplayBuffer(self.spec, cfg.replay_capacity, seed=cfg.seed)
        # interventions -> demonstrations; a batch draws from both (demos.py)
        demos = ReplayBuffer(self.spec, cfg.replay.demo_capacity, seed=cfg.seed + 1)
        self.mixer = BatchMixer(self.replay, demos, cfg.replay.online_ratio, seed=cfg.seed + 2)
        if cfg.demos and not resume:  # a resumed run has them in its checkpoint
            load_demos(cfg.demos, cfg.env_id, demos)
        rid, latest = self.run_id, lambda: self.broadcast.version
        # What fleet control granted, as published: the bound on each actor's data and claims
        # (kept in run_dir, so that a resumed learner is bound by it too).
        reserve = max(64, cfg.max_lag_transitions // 8)
        self.grants = Grants(run_dir.grants, rid, reserve)
        if resume:
            self.grants.load()
        self.ingest = ingest_for(cfg, self.spec, self.replay, latest, rid, self.grants, self.mixer)
        ingest_lost = self.ingest.lost  # what the learner itself lost: written off at once
        # Credit stops the fleet at the budget: no step is granted past it.
        self.inbox = Inbox(self.ingest, cfg.transport.ingest_queue, self.clocks["ingest"])
        # replay -> updates -> export -> policy topic -> actors
        self.algo = algo_for_run(cfg, self.spec)
        paid = cfg.updates_paid_by  # the updates a count of received transitions pays for
        self.trainer = Trainer(
            self.algo,
            self.mixer,
            paid,
            lambda: self.env_steps,
            self.clocks,
            head_start=lambda: self.mixer.pretrained,
        )
        # Exports calibrate on online replay; until it fills, on the demonstrations too.
        observations = ExportObservations(self.replay, demos)
        self.packager = PolicyPackager(
            cfg.export,
            Stamp(cfg.algo, cfg.env_id, cfg.run, rid),
            self.spec,
            observations,
            run_dir,
            self.signer,
            seed=cfg.seed,
            max_packet_bytes=cfg.transport.max_packet_bytes,
            bounds=self.ingest.validate.bounds,
        )
        self.packager.prepare(self.algo.policy_network)  # its template, while we set up
        self.broadcast = PolicyBroadcast(topics, publish, self.packager, cfg.transport)
        self.selection = ModelSelection(
            cfg.select_every,
            cfg.select_episodes,
            cfg.seed + 20_000,  # scoring episodes of their own, not the fleet's seeds
            cfg.select_recheck,
            self.packager,
            default_worker(),
        )
        self.exporter = Exporter(
            self.algo,
            observations,
            self.packager,
            self.broadcast,
            self.selection,
            self.clocks,
            lambda: self.env_steps,
            cfg.export.every_updates,
            cfg.export.max_busy_share,
        )
        # statuses in, control and credit out
        self.fleet = FleetControl(
            cfg.fleet,
            cfg.pacing,
            topics,
            publish,
            self.ingest.received,
            rid,
            ingest_lost,
            self.grants,
            self.ingest.accounting.session_of,
            self.ingest.watch.is_quarantined if self.ingest.watch else lambda _a: False,
            connected=lambda: self.transport.connected,
            limits=status_limits(cfg.env_id, self.ingest.validate.bounds),
            quarantine_reason=self.ingest.watch.reason if self.ingest.watch else lambda _a: "",
        )
        # boards that (re)connect anywhere: their control, policy and grant, on their topics
        self.join = JoinDesk(topics, self.fleet, self.broadcast.send_to, cfg.fleet.max_actors)
        self.meter = Meter(
            self.ingest,
            self.trainer,
            self.broadcast,
            self.fleet,
            self.inbox,
            view,
            self.selection.last_score,
            exports_failed=lambda: self.packager.failed + self.broadcast.refused,
        )
        self._fleet_alive = fleet_alive or (lambda: True)
        self.broker_dropped = 0  # $SYS counter of the whole broker, when it publishes one
        self.durable = Durable(  # checkpoints: schedule, save, restore (durable.py)
            self._saveable_parts(),
            run_dir,
            header_for(cfg, rid),
            cfg.checkpoint,
            pause=self.inbox.paused,
            headline=self._headline,
        )

    def _saveable_parts(self) -> dict[str, Saveable]:
        """What a checkpoint holds, by part, in the order the states are taken: the
        exporter first (it waits for an export in flight, so that the broadcast and the
        selection hold still)."""
        # The learner's own simulated fleet restarts with it: those actors' sessions are new.
        restarted = set(fleet_ids(self.cfg.fleet.actors)) if self.cfg.fleet.actors else set()
        ingest = JsonPart(self.ingest.state, lambda s: self.ingest.load_state(s, restarted))
        return {
            "exporter": self.exporter,
            "algo": self.algo,
            "replay": self.replay,
            "demos": self.mixer,
            "ingest": ingest,
            "broadcast": self.broadcast,
            "selection": self.selection,
            "packager": self.packager,
            "meter": self.meter,
        }

    def _headline(self) -> Headline:
        return Headline(
            self.env_steps, self.algo.updates, self.broadcast.version, self.meter.elapsed()
        )

    # --- transport thread: hand over, never work ---------------------------------------

    def _on_message(self, topic: str, payload: bytes) -> None:
        if topic.endswith("/transitions"):
            self.inbox.offer(topic, payload)
        elif topic.endswith("/status"):
            self.fleet.on_status(topic, payload)
        elif topic.endswith("/hello"):
            self.join.on_hello(topic, payload)
        elif topic == SYS_DROPPED:
            self.broker_dropped = int(payload) if payload.isdigit() else self.broker_dropped

    def _on_connect(self) -> None:
        # The broker may have restarted without persistence, or this may be another node
        # of a cluster: republish what actors need, and ask every board to announce itself
        # (the learner's view of the fleet does not hang on retained statuses).
        self.broadcast.republish()
        self.fleet.republish()
        self.join.hello()

    # --- main thread ----------------------------------------------------------------

    @property
    def env_steps(self) -> int:
        return self.ingest.transitions

    def run(self) -> dict[str, Any]:
        for clock in self.clocks.values():  # every thread's wall time starts here
            clock.restart()
        self.carbon.start()  # codecarbon, until the summary: the whole run is measured
        self.algo.compile()  # trace before any data flows: tracing holds the GIL for seconds
        if self.resume:  # before the transport: versions, counters and replay go on
            self.durable.restore()
            if self.ingest.watch is not None:
                self.ingest.watch.release(self.release if self.keep_quarantine else None)
        self.packager.wait_ready(timeout=120)  # the export worker, started in the background
        self.transport.start()
        if not self.transport.wait_connected(15):
            self.transport.stop()
            raise unreachable(self.transport)
        if not self.resume:  # an earlier run's retained policy is no one's to load
            self.broadcast.clear()  # (resumed: its own, republished on connect)
        self.broadcast.continue_after_manifest()
        if not self.resume and self.cfg.replay.pretrain_updates:
            self._pretrain()  # the boards' first policy: pretrained on the demonstrations
        self.inbox.start()
        self.fleet.send("running", self.trainer.online_updates)
        run_dir = self.run_dir
        metrics = MetricsLog(run_dir.metrics, run_dir.tensorboard, METRICS, append=self.resume)
        self.clocks["main"].lap("setup")
        self.meter.start()
        # From here to the command's end a signal is a request (durable.StopRequest): before
        # the budget it ends the loop (paused, checkpointed); after it, it cuts the finishing
        # short; in the shutdown after this returns (bounded), it changes nothing.
        self.stop.armed = True
        try:
            while self.env_steps < self.cfg.total_env_steps and not self.stop.is_set():
                self.trainer.train_for(0.05)
                self.algo.feed_returns(self.ingest.returns_since)
                self.fleet.send("running", self.trainer.online_updates)  # new credit
                self.exporter.maybe_export(self.algo.compression())
                self.meter.tick(metrics)
                if not self._fleet_alive():
                    raise RuntimeError("every fleet actor process has exited; see fleet logs")
                self.durable.maybe_save()
            self.interrupted = self.stop.is_set()
            if self.interrupted:  # pause the fleet, checkpoint, summary
                self.fleet.send("paused", reason="the learner was interrupted")
                self.fleet.wait_for_actors(self.inbox.empty, timeout=10)  # last batches
                self.fleet.wait_for_state("paused")  # bounded; the summary shows it
                self.durable.save()
            else:
                self._finish(metrics)
        finally:
            self.exporter.shutdown()
            self.selection.close()
            # An error: the boards hold and wait, as for a stop (no-op once serving).
            self.fleet.send("paused", reason="the learner stopped")
            self.inbox.stop(timeout=10)
            metrics.close()
        summary = write_summary(self.run_dir, self._record())
        # The retained policy stays: the deployed one to serve, or the one to hold.
        self.fleet.clear()
        self.transport.stop()
        return summary

    def _pretrain(self) -> None:
        """``replay.pretrain_updates`` on the demonstrations alone, then an export (on this
        thread), before the fleet is told to run."""
        lap = self.clocks["main"].lap
        lap("setup")
        total, said = self.cfg.replay.pretrain_updates, time.monotonic()

        def progress(done: int) -> None:  # a line every 5 s: it can take minutes
            nonlocal said
            if time.monotonic() - said >= 5.0:
                said = time.monotonic()
                log.info("pretraining: %d of %d updates", done, total)

        self.mixer.pretrain(self.algo, total, progress)
        lap("updates")
        self.exporter.export(self.algo.compression(), wait=True)
        if self.broadcast.version == 0:
            log.warning("the pretrained policy was not published; the boards start without it")

    def _finish(self, metrics: MetricsLog) -> None:
        """The budget is in (credit stops the fleet there): pay the replay ratio in full (a
        signal stops the paying), last export, deploy the best policy, then the fleet
        serves it."""
        lap = self.clocks["main"].lap
        lap("other")
        self.fleet.wait_for_actors(self.inbox.empty, timeout=15)
        lap("idle")
        log.info(
            "budget met: %d updates still owed, then the final evaluation "
            "(Ctrl-C or SIGTERM skips both; the run still finishes)",
            max(0, self.trainer.target() - self.algo.updates),
        )
        self.trainer.pay_in_full(stop=self.stop.is_set)
        if self.stop.is_set():
            owed = self.trainer.target() - self.algo.updates
            log.warning("interrupted after the budget: finishing without %d updates owed", owed)
        self.exporter.export(self.algo.compression(), wait=True)
        self.exporter.deploy_best()  # published, signed and retained: what the fleet serves
        self.meter.tick(metrics, force=True)
        self.durable.save(finished=True)
        # The run is final from here: the last will becomes ``serving`` (a clean reconnect),
        # so that a close that is not clean later (a crash while the policy is evaluated, a
        # reset socket) republishes it rather than leaving the boards paused.
        if not self.transport.replace_will(*self.fleet.will_for("serving")):
            log.warning("the learner did not reconnect with its final last will")
        self.fleet.send("serving")  # after the save: a finished run is never resumed
        self.fleet.wait_for_state("serving")  # bounded: a few of the stated status intervals

    def _record(self) -> RunRecord:
        """The run at its end, from each part's own figures, and the deployed policy's
        final evaluation: of a finished run not interrupted before it starts."""
        lap = self.clocks["main"].lap
        lap("other")
        cfg, published = self.cfg, self.broadcast.current
        result, skipped = None, False
        if published is not None and not self.interrupted:
            skipped = self.stop.is_set()
            if skipped:
                log.warning("interrupted after the budget: the final evaluation is skipped")
            else:
                result = evaluate_policy(published, cfg.eval_episodes, cfg.seed + 10_000)
        lap("evaluate")  # the main thread's breakdown ends here
        fleet = self.fleet.stats()
        return RunRecord(
            cfg=cfg,
            run_id=self.run_id,
            wall_s=self.meter.elapsed(),
            algo=self.algo.stats(),
            ingest=self.ingest.stats(),
            batches_missing=self.ingest.missing_batches,
            inbox=InboxCounts(self.inbox.dropped, self.inbox.dropped_transitions),
            broker_dropped=self.broker_dropped,
            fleet=fleet,
            broadcast=self.broadcast.stats(),
            selection=self.selection.stats(),
            exporter=self.exporter.stats(),
            packager=self.packager.stats(),
            runtime_breakdown=breakdown.runtime_breakdown(self.clocks, fleet.breakdowns),
            host_energy=self.carbon.stop(),
            intensity=self.carbon.intensity,
            final_eval=result,
            durable=self.durable.stats(),
            interrupted=self.interrupted,
            eval_skipped=skipped,
            quarantine=self.ingest.watch.stats() if self.ingest.watch else None,
            replay_rows=self.replay.rows_by_source(),
            demos=self.mixer.stats(),
            join=self.join.stats(),
        )
