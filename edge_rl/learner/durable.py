"""Durable runs: what of the learner goes into its checkpoint, when, and how it comes back.

    durable = Durable(node)       # node: a LearnerNode, its parts built
    durable.restore()             # `edge-rl learn --resume`: before the transport starts
    durable.maybe_save()          # main loop: on the config's schedule (checkpoint.every_*)
    durable.save()                # at SIGTERM/SIGINT and at the end of the run

Saved (checkpoint.py writes it): the agent's networks, target networks, optimiser slots
and graph-side counters and rng (every Keras model, optimiser, tf.Variable and
tf.random.Generator among its attributes, by name, so the next update after a restore is
the one the run would have taken); the filled part of the replay buffer as it lies, and
its rng; ingest's counters, sessions and sequence trackers; the broadcast's version,
bytes and count, the last published policy and the selection's scored ones (bundles as
sent, signed); exporter and publisher state; a compressor's masks, schedule and
controller; the run's wall time so far.
Not saved: the credit ledger (an actor that kept running gets credit again once what it
sent to the killed learner is written off, after credit_timeout_s) and codecarbon's
measurement (each process measures its own part).
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from typing import Any

import numpy as np

from edge_rl.learner.checkpoint import Checkpoint, CheckpointError, Saved, header_for
from edge_rl.learner.outbound.packager import Published
from edge_rl.sim.fleet import fleet_ids
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.policy import decode_policy

log = logging.getLogger(__name__)


class StopRequest:
    """The signal handler of ``edge-rl learn``: while the learner's loop runs (``armed``),
    the first SIGTERM/SIGINT asks it to checkpoint, stop the fleet and write its summary;
    before that, or a second time, it raises KeyboardInterrupt as Python's own does."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.armed = False
        self.signum: int | None = None

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self)
        # SIGINT explicitly too: a shell starts a background job (`&`) with SIGINT ignored.
        signal.signal(signal.SIGINT, self)

    def __call__(self, signum: int, frame: Any) -> None:
        if self.armed and not self.event.is_set():
            self.signum = signum
            self.event.set()
            return
        raise KeyboardInterrupt(f"signal {signum}")

    def is_set(self) -> bool:
        return self.event.is_set()


def agent_variables(agent: Any) -> dict[str, list]:
    """Every piece of an agent's TensorFlow state, by attribute name, in a stable order."""
    import keras
    import tensorflow as tf

    found: dict[str, list] = {}
    for name, v in sorted(vars(agent).items()):
        if isinstance(v, keras.Model):
            found[name] = list(v.weights)  # trainable and not (a frozen rescale layer)
        elif isinstance(v, keras.optimizers.Optimizer):
            found[name] = list(v.variables)  # iterations and the Adam slots
        elif isinstance(v, tf.random.Generator):
            found[name] = [v.state]
        elif isinstance(v, tf.Variable):
            found[name] = [v]
    return found


def agent_arrays(agent: Any) -> dict[str, np.ndarray]:
    return {
        f"{name}/{i}": np.asarray(var.numpy())
        for name, variables in agent_variables(agent).items()
        for i, var in enumerate(variables)
    }


def load_agent_arrays(agent: Any, arrays: dict[str, np.ndarray]) -> None:
    variables = agent_variables(agent)
    expected = {f"{n}/{i}" for n, vs in variables.items() for i in range(len(vs))}
    if expected != set(arrays):
        raise CheckpointError(f"the agent's variables differ: {sorted(expected ^ set(arrays))}")
    for name, vs in variables.items():
        for i, var in enumerate(vs):
            value = arrays[f"{name}/{i}"]
            if tuple(value.shape) != tuple(var.shape):
                raise CheckpointError(f"{name}/{i}: shape {value.shape} saved, {var.shape} here")
            var.assign(value)


class Durable:
    def __init__(self, node: Any) -> None:
        self.node, cfg = node, node.cfg
        self.checkpoint = Checkpoint(node.run_dir, header_for(cfg, node.run_id))
        self.every_s = cfg.checkpoint.every_s
        self.every_steps = cfg.checkpoint.every_env_steps
        self.saves = 0
        self.last_seconds = 0.0
        self.resumed_from: int | None = None  # env steps of the checkpoint resumed from
        self.wall_before = 0.0  # wall time of the run before this process (resumed)
        self._last = (time.monotonic(), 0)  # (when, env steps) of the last save

    def maybe_save(self) -> None:
        when, steps = self._last
        by_time = self.every_s and time.monotonic() - when >= self.every_s
        by_steps = self.every_steps and self.node.env_steps - steps >= self.every_steps
        if by_time or by_steps:
            self.save()

    def save(self, finished: bool = False) -> None:
        node = self.node
        node.exporter.wait()  # no export in flight: broadcast and selection hold still
        t0 = time.perf_counter()  # what the main thread spends on it: copies and the write
        with node.inbox.paused:  # replay and the ingest counters agree
            replay, replay_meta = node.replay.snapshot()
            ingest = node.ingest.state()
        state, blobs = self._state(replay_meta, ingest)
        arrays = {"agent": agent_arrays(node.agent.agent), "replay": replay}
        if node.agent.compressor is not None:
            arrays["compressor"], state["compressor"] = node.agent.compressor.state()
            state["episodes_seen"] = node.agent._episodes_seen
        self._last = (time.monotonic(), node.env_steps)
        self.checkpoint.save(
            arrays,
            state,
            blobs,
            env_steps=ingest["stats"]["transitions"],
            updates=node.agent.updates,
            policy_version=node.broadcast.version,
            wall_s=state["wall_s"],
            finished=finished,
        )
        self.last_seconds = time.perf_counter() - t0
        self.saves += 1
        log.info(
            "checkpoint at %d env steps, %d updates, v%d: %.3f s",
            node.env_steps,
            node.agent.updates,
            node.broadcast.version,
            self.last_seconds,
        )

    def _state(self, replay_meta: dict, ingest: dict) -> tuple[dict, dict[str, bytes]]:
        node = self.node
        b, sel = node.broadcast, node.selection
        kept = {p.bundle.manifest.policy_version: p for p, _ in sel.top}
        if sel.best is not None:
            kept[sel.best[0].bundle.manifest.policy_version] = sel.best[0]
        if b.current is not None:
            kept[b.current.bundle.manifest.policy_version] = b.current
        blobs, policies = {}, {}
        for v, p in kept.items():
            blobs[f"v{v}.bundle"], blobs[f"v{v}.tflite"] = p.payload, p.model
            policies[str(v)] = {
                "parity": p.parity,
                "export_seconds": p.export_seconds,
                "compression": p.compression,
            }
        version_of = lambda p: p.bundle.manifest.policy_version  # noqa: E731
        state = {
            "updates": node.agent.updates,
            "replay": replay_meta,
            "ingest": ingest,
            "broadcast": {
                "version": b.version,
                "bytes_total": b.bytes_total,
                "count": b.count,
                "current": version_of(b.current) if b.current else None,
            },
            "selection": {
                "scores": {str(v): s for v, s in sel.scores.items()},
                "best": [version_of(sel.best[0]), sel.best[1]] if sel.best else None,
                "top": [[version_of(p), s] for p, s in sel.top],
            },
            "policies": policies,
            "exporter_last_updates": node.exporter._last_updates,
            "publisher": {
                "rng": node.publisher.rng.bit_generator.state,
                "failed": node.publisher.failed,
            },
            "wall_s": self.wall_before + node.meter.elapsed(),
        }
        return state, blobs

    def restore(self) -> dict[str, Any]:
        """Put the checkpoint back into the node's parts; its header."""
        node, cfg = self.node, self.node.cfg
        saved = self.checkpoint.load()
        if saved.header.get("finished"):
            raise CheckpointError(
                f"{node.run_dir} is a finished run ({saved.header['env_steps']} env steps)"
            )
        s = saved.state
        load_agent_arrays(node.agent.agent, saved.arrays["agent"])
        node.agent.agent.updates = int(s["updates"])
        if node.agent.compressor is not None:
            node.agent.compressor.load_state(saved.arrays["compressor"], s["compressor"])
            node.agent._episodes_seen = int(s["episodes_seen"])
        node.replay.restore(saved.arrays["replay"], s["replay"])
        restarted = set(fleet_ids(cfg.fleet.actors)) if cfg.fleet.actors else set()
        node.ingest.load_state(s["ingest"], restarted)
        self._restore_policies(saved)
        node.exporter._last_updates = int(s["exporter_last_updates"])
        node.publisher.rng.bit_generator.state = s["publisher"]["rng"]
        node.publisher.failed = int(s["publisher"]["failed"])
        self.wall_before = float(s["wall_s"])
        self.resumed_from = int(saved.header["env_steps"])
        self._last = (time.monotonic(), self.resumed_from)
        log.info(
            "resumed from %s: %d env steps, %d updates, policy v%d",
            self.checkpoint.path,
            self.resumed_from,
            node.agent.updates,
            node.broadcast.version,
        )
        return saved.header

    def _restore_policies(self, saved: Saved) -> None:
        node, s = self.node, saved.state
        max_bytes = node.cfg.transport.max_packet_bytes
        kept = {}
        for v, meta in s["policies"].items():
            payload = saved.blobs[f"v{v}.bundle"]
            try:
                bundle = decode_policy(payload, node.signer.verifier(), max_bytes)
            except CodecError as e:  # e.g. another signing key than the run's
                raise CheckpointError(f"checkpoint policy v{v}: {e}") from None
            kept[int(v)] = Published(
                bundle,
                payload,
                saved.blobs[f"v{v}.tflite"],
                meta["parity"],
                meta["export_seconds"],
                meta["compression"],
            )
        b, sel = node.broadcast, node.selection
        # Versions go on past every one published, also after the checkpoint (publishes.jsonl).
        b.version = max(s["broadcast"]["version"], last_published(node.run_dir))
        b.bytes_total = s["broadcast"]["bytes_total"]
        b.count = s["broadcast"]["count"]
        b.current = kept.get(s["broadcast"]["current"])
        sel.scores = {int(v): score for v, score in s["selection"]["scores"].items()}
        sel.best = (
            (kept[s["selection"]["best"][0]], s["selection"]["best"][1])
            if (s["selection"]["best"])
            else None
        )
        sel.top = [(kept[v], score) for v, score in s["selection"]["top"]]


def saved_run_id(run_dir: Any) -> str | None:
    """The run id of the checkpoint in ``run_dir`` (its header's identity), or None."""
    for name in ("checkpoint", "checkpoint.old"):
        try:
            header = json.loads((run_dir / name / "header.json").read_text())
            return header["identity"].get("run_id")
        except (OSError, ValueError, KeyError, AttributeError):
            continue
    return None


def last_published(run_dir: Any) -> int:
    """The highest policy version in ``publishes.jsonl`` (0: none); a torn last line (a
    kill -9 mid-write) is skipped, and so is a version that is not an int in [1, 2^53):
    absurd numbers are never converted (``int("1e400")``, ``int(1.5)``)."""
    path = run_dir / "publishes.jsonl"
    best = 0
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                v = json.loads(line)["policy_version"]
            except (ValueError, KeyError, TypeError):
                continue
            if type(v) is int and 1 <= v < 2**53:
                best = max(best, v)
    return best
