"""``edge-rl deploy``'s work: a staged rollout of one policy to a run's serving fleet, over
MQTT (the decisions are ``rollout.py``'s; docs/fleet.md, Rollout).

    bundle = source_bundle(Path("runs/x"))                       # RUN_DIR or a .bundle file
    outcome = run_rollout(connect, topics, bundle, source_key, signer, plan)

The policy is re-signed for the fleet: its manifest names the fleet's run and run start
and a version above every one the fleet serves, and it is signed with the key the boards
trust, so a board checks it exactly as any policy of its run (docs/protocol.md §4.4, §6).
The bundle given is verified first, with the key that signed it.

Each board is sent its step on its own target topic (retained: a board that reconnects
gets it again). At the end the targets are cleared; a rollout that deployed also
publishes the policy, retained, on the run's policy topic, which a board that joins later
loads. Boards whose rollback is not confirmed keep their retained target. A rollout
first clears the target of every board the fleet's statuses name (what an interrupted
or aborted rollout left), and one interrupted (Ctrl-C, SIGTERM, a lost broker) clears the
targets it set before it ends: each board keeps what it serves. ``clear_targets`` does
the first alone (``edge-rl deploy --clear``).
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import time
from collections.abc import Callable
from pathlib import Path

from edge_rl.deploy.fleet_watch import FleetWatch
from edge_rl.deploy.rollout import Assign, Outcome, Revert, Rollout, RolloutPlan, Target
from edge_rl.learner.run_dir import RunDir
from edge_rl.transport.base import Connect, Transport
from edge_rl.types import PolicyBundle, PolicyTarget
from edge_rl.wire.messages import encode_target
from edge_rl.wire.policy import decode_policy, encode_policy
from edge_rl.wire.signing import Signer, Verifier
from edge_rl.wire.topics import Topics

log = logging.getLogger(__name__)

MAX_BUNDLE_BYTES = 16_000_000 + 64 * 1024  # the largest board limit (rpi5) plus the header


class NotServing(Exception):
    """The run's fleet is not serving a finished run: there is nothing to roll out to."""


def source_bundle(source: Path) -> Path:
    """The bundle file of ``source``: a run directory's deployed bundle, or the file."""
    path = RunDir(source).bundle if source.is_dir() else source
    if not path.is_file():
        raise FileNotFoundError(f"no policy bundle at {path}")
    return path


def repackage(
    payload: bytes, source_key: Verifier, signer: Signer, topics: Topics, run_id: str, version: int
) -> PolicyBundle:
    """The bundle as the fleet will check it: verified with ``source_key``, then its
    manifest made the fleet's (run, run start, ``version``); signed by ``encode_policy``."""
    bundle = decode_policy(payload, source_key, MAX_BUNDLE_BYTES)
    m = bundle.manifest
    origin = {"run": m.run, "run_id": m.run_id, "policy_version": m.policy_version}
    manifest = dataclasses.replace(
        m,
        run=topics.run,
        run_id=run_id,
        policy_version=version,
        created_unix=time.time(),
        extra={**m.extra, "deployed_from": origin},
    )
    return PolicyBundle(manifest, bundle.payload)


@dataclasses.dataclass(frozen=True)
class RolloutRun:
    """What was rolled out, and how it ended."""

    target: Target
    run_id: str
    outcome: Outcome
    seconds: float
    seed: int  # the canaries' draw: the same seed, the same canaries


def run_rollout(
    connect: Connect,
    topics: Topics,
    payload: bytes,
    source_key: Verifier,
    signer: Signer,
    plan: RolloutPlan,
    *,
    wait_s: float = 5.0,
    tick_s: float = 0.1,
    clock: Callable[[], float] = time.monotonic,
    seed: int | None = None,
) -> RolloutRun:
    """Roll the bundle ``payload`` out to the fleet serving ``topics``' run, as ``plan``
    says, canaries drawn with ``seed`` (``None``: a random one, in the result);
    ``NotServing`` if the run is not served, ``ConnectionError`` without a broker."""
    seed = secrets.randbits(32) if seed is None else seed
    with FleetWatch(connect, topics, clock, client_prefix="edge-rl-deploy") as watch:
        watch.wait_connected(wait_s)
        control = watch.wait_control(wait_s)
        if control is None or control.state != "serving":
            state = "nothing" if control is None else repr(control.state)
            raise NotServing(f"run {topics.run!r} says {state}: deploy needs a serving fleet")
        time.sleep(min(wait_s, 1.0))  # every retained status, after the control
        reports = watch.reports()
        version = 1 + max((r.policy_version for r in reports.values()), default=0)
        bundle = repackage(payload, source_key, signer, topics, control.run_id, version)
        signed = encode_policy(bundle, signer)
        target = Target(version, bundle.manifest.model_sha256)
        start = clock()
        rollout = Rollout(plan, target, reports, control.run_id, start, seed)
        log.info(
            "rolling v%d (%s) out to %d boards, canaries %s (seed %d)",
            version,
            target.digest[:12],
            len(rollout.boards),
            ", ".join(rollout.canaries),
            seed,
        )
        sender = _Sender(watch.transport, topics, control.run_id, f"v{version}", signed, wait_s)
        sender.clear(sorted(reports))  # what an earlier rollout left
        try:
            while rollout.outcome is None:
                for action in rollout.step(clock(), watch.reports()):
                    sender.send(action, target)
                time.sleep(tick_s)
        except BaseException:  # interrupted: leave no target on the broker
            sender.clear(sorted(rollout.assigned))
            raise
        sender.finish(rollout.outcome)
        return RolloutRun(target, control.run_id, rollout.outcome, clock() - start, seed)


def clear_targets(connect: Connect, topics: Topics, wait_s: float = 5.0) -> list[str]:
    """Clear the retained target of every board whose status the broker holds (what an
    interrupted rollout left); the boards', sorted. ``ConnectionError`` without a broker."""
    with FleetWatch(connect, topics, client_prefix="edge-rl-deploy") as watch:
        watch.wait_connected(wait_s)
        watch.wait_control(wait_s)
        time.sleep(min(wait_s, 1.0))  # every retained status, after the control
        boards = sorted(watch.reports())
        _Sender(watch.transport, topics, "", "", b"", wait_s).clear(boards)
        return boards


class _Sender:
    """Publishes a rollout's targets, and clears them at its end."""

    def __init__(
        self,
        transport: Transport,
        topics: Topics,
        run_id: str,
        name: str,
        signed: bytes,
        wait_s: float,
    ) -> None:
        self.transport = transport
        self.topics = topics
        self.run_id = run_id
        self.name = name
        self.signed = signed
        self.wait_s = wait_s

    def send(self, action: Assign | Revert, target: Target) -> None:
        if isinstance(action, Assign):
            msg = PolicyTarget(self.run_id, target.version, target.digest, self.name, self.signed)
            log.info("%s: policy v%d", action.actor_id, target.version)
        else:
            msg = PolicyTarget(self.run_id, action.to.version, action.to.digest, self.name)
            log.warning("%s: back to v%d", action.actor_id, action.to.version)
        self._publish(self.topics.target(action.actor_id), encode_target(msg))

    def clear(self, actor_ids: list[str]) -> None:
        for actor_id in actor_ids:
            self._publish(self.topics.target(actor_id), b"")

    def finish(self, outcome: Outcome) -> None:
        if outcome.result != "aborted":  # the canaries proved it: a board joining loads it
            self._publish(self.topics.policy, self.signed)
        for actor_id in outcome.assigned:
            if actor_id not in outcome.unconfirmed or outcome.result != "aborted":
                self._publish(self.topics.target(actor_id), b"")

    def _publish(self, topic: str, payload: bytes) -> None:
        if not self.transport.publish(topic, payload, qos=1, retain=True, wait=self.wait_s):
            log.warning("the broker took no message on %s", topic)
