"""``edge-rl deploy``'s work: a staged rollout of one policy to a run's serving fleet, over
MQTT (the decisions are ``rollout.py``'s; docs/fleet.md, Rollout).

    bundle = source_bundle(Path("runs/x"))                       # RUN_DIR or a .bundle file
    outcome = run_rollout(connect, topics, bundle, source_key, signer, plan)

The policy is re-signed for the fleet: its manifest names the fleet's run and run start
and the version one above the run's newest (its retained policy's, signed by the key the
boards trust: evidence.py's ``next_version``; never a board's word), and it is signed
with the key the boards trust, so a board checks it exactly as any policy of its run
(docs/protocol.md §4.4, §6). The bundle given is verified first, with the key that signed
it. The health of the rollout is judged on the deployer's own greedy episodes of the new
policy and of the run's retained one, in LiteRT (``plan.eval_episodes``; evidence.py), and
each board's report is clamped to the env's return range (rollout.py).

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

from edge_rl.deploy.evidence import measure, next_version
from edge_rl.deploy.fleet_watch import MAX_BUNDLE_BYTES, FleetWatch
from edge_rl.deploy.rollout import (
    Assign,
    Evidence,
    Outcome,
    Revert,
    Rollout,
    RolloutPlan,
    Target,
)
from edge_rl.learner.fleet.figures import limits_for_env
from edge_rl.learner.run_dir import RunDir
from edge_rl.transport.base import Connect, Transport
from edge_rl.types import PolicyBundle, PolicyTarget
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.messages import encode_target
from edge_rl.wire.policy import decode_policy, encode_policy
from edge_rl.wire.signing import Signer, Verifier
from edge_rl.wire.topics import Topics

log = logging.getLogger(__name__)


class NotServing(Exception):
    """The run's fleet is not serving a finished run: there is nothing to roll out to."""


class WrongEnv(ValueError):
    """The bundle is for another env than the one the fleet serves: every board would
    refuse it (its env spec, protocol.md §6), so nothing is sent."""


def check_same_env(
    payload: bytes, source_key: Verifier, served: bytes, fleet_key: Verifier, topics: Topics
) -> None:
    """``WrongEnv`` unless the bundle's env (id and spec) is the one of the policy the fleet
    serves (its retained policy, signed by ``fleet_key``). Without a retained policy (a
    broker that lost it), the boards' own checks decide."""
    if not served:
        log.info("no retained policy for run %r: its env is not checked here", topics.run)
        return
    new = decode_policy(payload, source_key, MAX_BUNDLE_BYTES).manifest
    try:
        now = decode_policy(served, fleet_key, MAX_BUNDLE_BYTES).manifest
    except CodecError as e:
        log.info(
            "the retained policy of run %r does not verify (%s): env not checked", topics.run, e
        )
        return
    if (new.env_id, new.env_spec) != (now.env_id, now.env_spec):
        raise WrongEnv(
            f"the policy is for {new.env_id} but run {topics.run!r} serves {now.env_id} "
            f"(observation {now.env_spec.obs_shape} vs {new.env_spec.obs_shape}): every board "
            "would refuse it; deploy a policy of a run of that env"
        )


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
    source = decode_policy(payload, source_key, MAX_BUNDLE_BYTES)
    limits = limits_for_env(source.manifest.env_id)
    with FleetWatch(
        connect,
        topics,
        clock,
        client_prefix="edge-rl-deploy",
        limits=limits,
        policy=True,
        policy_key=signer.verifier(),
    ) as watch:
        watch.wait_connected(wait_s)
        control = watch.wait_control(wait_s)
        if control is None or control.state != "serving":
            state = "nothing" if control is None else repr(control.state)
            raise NotServing(f"run {topics.run!r} says {state}: deploy needs a serving fleet")
        time.sleep(min(wait_s, 1.0))  # every retained status and policy, after the control
        check_same_env(payload, source_key, watch.policy_payload, signer.verifier(), topics)
        reports = watch.reports()
        retained = watch.policy
        if retained is not None and retained.manifest.run_id != control.run_id:
            retained = None  # another run start's: not this run's counter, nor its policy
        version = next_version(retained, reports, control.run_id)
        bundle = repackage(payload, source_key, signer, topics, control.run_id, version)
        signed = encode_policy(bundle, signer)
        target = Target(version, bundle.manifest.model_sha256)
        evidence = Evidence(
            limits,
            measure(retained, plan.eval_episodes, seed) if retained else None,
            measure(bundle, plan.eval_episodes, seed),
            version - 1 if retained is not None else None,
        )
        start = clock()
        rollout = Rollout(plan, target, reports, control.run_id, start, seed, evidence)
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
