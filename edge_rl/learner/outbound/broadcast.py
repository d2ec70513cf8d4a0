"""The policy topic: what the actors run now, published retained, and what each publish cost.

    broadcast = PolicyBroadcast(topics, publish, packager, cfg.transport)
    broadcast.publish(published, env_steps)   # True once the broker has it (retained)
    broadcast.republish()                     # after a reconnect
    broadcast.send_to(topic)                  # to one board that said hello (join.py)
    broadcast.clear()                         # at the start and end of the run
    broadcast.version                         # of the last publish; 0 = none yet

Every publish appends one line to ``publishes.jsonl``: version, learner step, env steps,
bytes on the wire, codec and compression ratio. Safe to call from the exporter and the
main thread (one lock). Versions go on past every one the run directory records
(``continue_after_manifest``; a resumed run's ``load_state``).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from edge_rl.config import TransportConfig
from edge_rl.learner.outbound.packager import (
    PolicyPackager,
    Published,
    policies_state,
    version_of,
)
from edge_rl.types import PartState
from edge_rl.wire.topics import Topics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BroadcastStats:
    version: int  # of the last publish; 0 = none
    current: Published | None  # what the actors run now
    bytes_total: int  # payload bytes of every policy published (per subscriber)
    count: int  # publishes
    refused: int  # larger than the broker accepts


class PolicyBroadcast:
    def __init__(
        self,
        topics: Topics,
        publish: Callable[..., bool],  # Transport.publish
        packager: PolicyPackager,  # its run directory, its save() and its reopen()
        transport: TransportConfig,
    ) -> None:
        self.topic = topics.policy
        self._publish = publish
        self._packager = packager
        self.run_dir = packager.run_dir
        self.max_policy_bytes = transport.max_packet_bytes
        self._lock = threading.Lock()
        self.version = 0  # of the last published policy; 0 = none yet (actors act randomly)
        self.current: Published | None = None  # the policy actors run now
        self.refused = 0  # larger than the broker accepts
        self.bytes_total = 0  # payload bytes of every policy published (per subscriber)
        self.count = 0

    def publish(self, published: Published, env_steps: int) -> bool:
        version = published.bundle.manifest.policy_version
        with self._lock:
            try:
                sent = self._publish(self.topic, published.payload, retain=True)
            except ValueError as e:  # larger than the broker accepts: keep the previous one
                self.refused += 1
                log.warning("policy v%d not published: %s (transport.max_packet_bytes)", version, e)
                return False
            if not sent:
                log.warning("policy v%d not published: broker not connected", version)
                return False
            self.version = version
            self.current = published
            self._packager.save(published)
            self._log(published, env_steps)
            return True

    def republish(self) -> None:
        """The broker may have restarted without persistence: actors need the policy."""
        with self._lock:
            if self.current is not None:
                self._publish(self.topic, self.current.payload, retain=True)

    def send_to(self, topic: str) -> bool:
        """The current policy, not retained, on ``topic`` (one board's welcome); False when
        there is none yet or it cannot be sent now."""
        with self._lock:
            if self.current is None:
                return False
            return self._publish(topic, self.current.payload)

    def clear(self) -> None:
        """Clear the retained policy (an empty retained payload): at the start, what an
        earlier run left there; at the end, this run's, which no board should load now."""
        with self._lock:
            self._publish(self.topic, b"", retain=True)

    def continue_after_manifest(self) -> None:
        """Versions go on past the run directory's last published policy, if any."""
        version = manifest_version(self.run_dir.manifest)
        with self._lock:
            self.version = max(self.version, version)

    def stats(self) -> BroadcastStats:
        with self._lock:
            return BroadcastStats(
                self.version, self.current, self.bytes_total, self.count, self.refused
            )

    # --- durable runs (edge_rl/learner/durable.py) ----------------------------------------

    def state(self) -> PartState:
        with self._lock:
            current = [] if self.current is None else [self.current]
            policies = policies_state(current)
            meta = {
                "version": self.version,
                "bytes_total": self.bytes_total,
                "count": self.count,
                "current": version_of(self.current) if self.current else None,
                "policies": policies.json,
            }
        return PartState(meta, blobs=policies.blobs)

    def load_state(self, state: PartState) -> None:
        """``CodecError``: the saved policy is not signed by the run's key."""
        s = state.json
        kept = self._packager.reopen(PartState(s["policies"], blobs=state.blobs))
        with self._lock:
            # Past every version published, also after the checkpoint (publishes.jsonl).
            self.version = max(s["version"], last_published(self.run_dir.publishes))
            self.bytes_total = s["bytes_total"]
            self.count = s["count"]
            self.current = kept.get(s["current"])

    def _log(self, published: Published, env_steps: int) -> None:
        m = published.bundle.manifest
        self.bytes_total += len(published.payload)
        self.count += 1
        record = {
            "policy_version": m.policy_version,
            "learner_step": m.learner_step,
            "env_steps": env_steps,
            "payload_bytes": len(published.payload),
            "model_bytes": m.model_size,
            "codec": m.codec,
            "compression": published.compression,
        }
        with open(self.run_dir.publishes, "a") as f:
            f.write(json.dumps(record) + "\n")
        log.info(
            "published v%d: %d bytes on the wire (model %d), compression %s",
            m.policy_version,
            len(published.payload),
            m.model_size,
            record["compression"],
        )


def manifest_version(path: Path) -> int:
    """The policy version of a run directory's ``manifest.json`` (0: none there); a
    ValueError for one that is not an int in [0, 2^53): absurd numbers are never converted."""
    if not path.exists():
        return 0
    version = json.loads(path.read_text()).get("policy_version", 0)
    if type(version) is not int or not 0 <= version < 2**53:
        raise ValueError(f"{path}: policy_version {version!r} is not an int in [0, 2^53)")
    return version


def last_published(path: Path) -> int:
    """The highest policy version in a ``publishes.jsonl`` (0: none); a torn last line (a
    kill -9 mid-write) is skipped, and so is a version that is not an int in [1, 2^53):
    absurd numbers are never converted (``int("1e400")``, ``int(1.5)``)."""
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
