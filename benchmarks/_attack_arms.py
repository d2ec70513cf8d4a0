"""The arms of benchmarks/attacks.py: one run of the CartPole example each, clean or under
attack; each returns a JSON-able dict of what the table reports.

Every arm: the example's config (``fleet.actors: 0``, no periodic checkpoint), a learner in
this process, three honest simulated Pi 4 actor processes, Mosquitto with the run's ACL
and a password per client. The embedded broker (loopback) for ``clean``, ``wire`` and the
outlier arms; for ``deploy`` the shipped ``host/mosquitto.conf`` (TLS on 8883, its limits)
with a deployment's generated password file and ACL, and ``host/edge-rl.nft``, in a network
namespace, the run itself in a second one (``deploy_child``, started by ``deploy``).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from edge_rl.boards import board_file
from edge_rl.broker.config import BrokerAccounts
from edge_rl.broker.embedded import EmbeddedBroker
from edge_rl.config import RunConfig, load_run_config
from edge_rl.deploy.credentials import make_credentials
from edge_rl.deploy.ids import Registry
from edge_rl.learner.node import LearnerNode
from edge_rl.sim.fleet import Fleet, fleet_ids
from edge_rl.transport.auth import BrokerAuth
from edge_rl.transport.mqtt import MqttTransport, mqtt_connect
from edge_rl.types import ActorStatus
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.messages import decode_status, decode_target, encode_status
from edge_rl.wire.policy import encode_policy
from edge_rl.wire.signing import Signer
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import encode_transitions
from tests.harness.attackers import (
    MAX_SEQ,
    BankingBoard,
    CompromisedBoard,
    DriftingBoard,
    FlippedDoneBoard,
    HelloFlood,
    PerfectBoard,
    board_transport,
    cartpole_batch,
)
from tests.harness.floods import (
    BROKER_IP,
    NFT,
    HeldFlood,
    Namespaces,
    installed_conf,
    rss_mb,
    run,
    shipped_fd_limit,
    start_broker,
    stop,
)
from tests.harness.paths import REPO
from tests.harness.stalls import Progress, flat_stretches

HONEST = tuple(fleet_ids(3))
INTRUDER = "intruder"  # a board of the run whose password the attacker holds
OUTLIER = "outlier"
PROBE = "probe"  # a board of the run that only logs in, during the idle flood
STRANGER = "other-01"  # a board of another run, with its own password
OTHER_RUN = "other"
ATTACK_AT = 0.2  # the wire and payload attacks start at this share of the budget
PAYLOADS, PAYLOAD_BYTES = 400, 1_990_000
WIRE_REASONS = ("implausible_reward", "over_credit", "not_owner")


@dataclass(frozen=True)
class Access:
    """How the run's clients reach its broker: its URL and each user's login."""

    url: str
    login: Callable[[str], BrokerAuth | None]


Hook = Callable[[LearnerNode, dict], None]  # the attack, on a thread of its own


def arm_config(arm: str, seed: int, steps: int, run: str = "") -> RunConfig:
    overrides = {
        "seed": seed,
        "total_env_steps": steps,
        "run": run or f"atk-{seed}-{arm.split(',')[0]}-{os.getpid()}",
        "fleet.actors": 0,
        "checkpoint.every_s": 0,
        "quarantine.enabled": arm != "outlier, no quarantine",
    }
    return load_run_config(REPO / "examples" / "cartpole_dqn.yaml", overrides)


def wait_until(cond: Callable[[], bool], timeout: float, node: LearnerNode) -> bool:
    """Poll ``cond`` until it holds, ``timeout`` passes or the run reaches its budget."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        if node.env_steps >= node.cfg.total_env_steps:
            return cond()
        time.sleep(0.1)
    return cond()


def train(
    cfg: RunConfig,
    access: Access,
    work: Path,
    hook: Hook | None,
    served: Callable[[LearnerNode], dict] | None = None,
) -> dict:
    """One run of ``cfg`` with the honest fleet and ``hook`` attacking; its result.
    ``served``: run once the run has ended and while the fleet still serves it (its
    result under ``"served"``)."""
    signer = Signer.load_or_create(work / "learner.key")
    signer.write_public(work / "learner.pub")
    fleet = Fleet(
        len(HONEST),
        board_file(cfg.fleet.board),
        access.url,
        cfg.env_id,
        policy_key=work / "learner.pub",
        run=cfg.run,
        seed=cfg.seed,
        log_dir=work / "fleet",
        auth=access.login,
    )
    node = LearnerNode(
        cfg,
        mqtt_connect(access.url, access.login("learner")),
        work / "run",
        signer=signer,
        fleet_alive=fleet.alive,
    )
    log: dict = {}
    attack = None
    if hook is not None:
        attack = threading.Thread(target=_guarded, args=(hook, node, log), daemon=True)
        attack.start()
    t0 = time.monotonic()
    progress = Progress(lambda: node.env_steps)
    with fleet:
        summary = node.run()
        log["fleet_exit_before_stop"] = fleet.exit_codes()
        if served is not None:
            log["served"] = served(node)
        fleet.stop()
    progress.stop()
    if attack is not None:
        attack.join(120)
    log["summary_strict_json"] = strict_json_ok(work / "run" / "summary.json")
    stepping = [s for s in progress.samples if s[1] > 0]  # from the first env step on
    flat = flat_stretches(stepping, cfg.total_env_steps)
    return outcome(cfg, node, summary, log, flat, time.monotonic() - t0)


def strict_json_ok(path: Path) -> bool:
    """Whether ``path`` parses with a strict parser: NaN and infinities raise."""

    def refuse(name: str) -> float:
        raise ValueError(f"not JSON: {name}")

    try:
        json.loads(path.read_text(), parse_constant=refuse)
    except (OSError, ValueError):
        return False
    return True


def _guarded(hook: Hook, node: LearnerNode, log: dict) -> None:
    try:
        hook(node, log)
    except Exception as e:  # the table says the attack failed, the run goes on
        log["attack_error"] = f"{type(e).__name__}: {e}"


def outcome(
    cfg: RunConfig, node: LearnerNode, summary: dict, log: dict, flat: list, wall: float
) -> dict:
    stats = node.ingest.stats()
    rows = node.replay.rows_by_source()
    granted = {a: g[1] for a in (INTRUDER, OUTLIER) if (g := node.grants.of(a)) is not None}
    return {
        "env_steps": summary["env_steps"],
        "budget": cfg.total_env_steps,
        "return": summary["final_eval_return"],
        "return_std": summary["final_eval_return_std"],
        "taken_by_actor": dict(stats.total_by_actor),
        "replay_rows": rows,
        "granted": granted,
        "rejected": dict(summary["batches_rejected"]),
        "status_over_credit": summary["status_over_credit"],
        "actor_sessions_refused": summary["actor_sessions_refused"],
        "actors": sorted(summary["actors"]),
        "quarantined": summary["quarantined"],
        "status_clamped": summary["status_clamped"],
        "exports_failed": summary["exports_failed"],
        "credit_withheld": summary["credit_withheld"],
        "credit_written_off": summary["credit_written_off"],
        "transitions_over_budget": summary["transitions_over_budget"],
        "intruder_figures": summary["boards"].get(INTRUDER, {}),
        "hellos": {k: summary.get(k, 0) for k in ("hellos_answered", "hellos_throttled")},
        **stalls(flat, cfg),
        "wall_s": round(wall),
        **log,
    }


def stalls(flat: list[tuple[int, float]], cfg: RunConfig) -> dict:
    """Stalls: env steps standing still longer than 3 credit timeouts (where, how long)."""
    longest = max(flat, key=lambda f: f[1], default=(0, 0.0))
    return {
        "stalls": [[at, round(s, 1)] for at, s in flat if s > 3 * cfg.credit_timeout_s],
        "longest_flat": [longest[0], round(longest[1], 1)],
    }


# --- the arms on the embedded broker --------------------------------------------------


def embedded(arm: str, seed: int, steps: int, out: Path, hook_for) -> dict:
    cfg = arm_config(arm, seed, steps)
    work = Path(tempfile.mkdtemp(prefix=f"{arm.replace(' ', '').replace(',', '-')}-", dir=out))
    extra = () if arm == "clean" else (OUTLIER,) if arm.startswith("outlier") else (INTRUDER,)
    accounts = BrokerAccounts(actors=(*HONEST, *extra), root=cfg.transport.root, run=cfg.run)
    with EmbeddedBroker(kind="mosquitto", accounts=accounts, log_dir=work) as broker:
        access = Access(broker.url, broker.auth)
        topics = Topics(cfg.transport.root, cfg.run)
        return train(cfg, access, work, hook_for(access, topics))


def no_attack(_access: Access, _topics: Topics) -> None:
    return None


def outlier_hook(access: Access, topics: Topics) -> Hook:
    def hook(node: LearnerNode, log: dict) -> None:
        board = PerfectBoard(access.url, access.login(OUTLIER), topics, node.run_id, OUTLIER)
        board.start()
        wait_until(lambda: False, 3600, node)  # it plays until the budget
        board.stop()
        log["outlier_sent"] = board.sent

    return hook


def wire_hook(access: Access, topics: Topics) -> Hook:
    """(a) a 19,000-transition batch of +-1e6 rewards and a plausible one over its grant,
    (b) a retained status of 2^53-1 env steps, (c) a second session under a live id with
    its password, (g) seq 2^53-1, an old session's batch, rewards 1e6 on a truncated
    episode: once the attacker holds a grant and a fifth of the budget is stepped."""

    def hook(node: LearnerNode, log: dict) -> None:
        evil = CompromisedBoard(access.url, access.login, topics, node.run_id, INTRUDER, HONEST[1])
        try:
            evil.announce()
            at = int(ATTACK_AT * node.cfg.total_env_steps)

            def granted() -> bool:
                return node.grants.of(INTRUDER) is not None and node.env_steps >= at

            if not wait_until(granted, 3600, node):
                log["attack_error"] = "the run ended before the attacker was granted"
                return
            grant = node.grants.of(INTRUDER)[1]
            log["attacked_at"], log["grant_at_attack"] = node.env_steps, grant
            evil.play(grant)
            evil.extras(grant)

            def counted() -> bool:
                rejected = node.ingest.stats().rejected
                return all(rejected.get(r, 0) >= 1 for r in WIRE_REASONS)

            log["counted"] = wait_until(counted, 60, node)
        finally:
            evil.stop()

    return hook


def board_hook(make: Callable[..., PerfectBoard], key: str) -> Callable[[Access, Topics], Hook]:
    """A board of the run that follows its credit with ``make``'s data until the budget;
    what it sent goes to the result under ``key``."""

    def hook_for(access: Access, topics: Topics) -> Hook:
        def hook(node: LearnerNode, log: dict) -> None:
            board = make(access.url, access.login(INTRUDER), topics, node.run_id, INTRUDER)
            board.start()
            wait_until(lambda: False, 3600, node)  # it plays until the budget
            board.stop()
            log[key] = board.sent

        return hook

    return hook_for


def banking_hook(access: Access, topics: Topics) -> Hook:
    """Claims its whole grant as sent, delivers nothing until half the budget, then sends
    every transition it claimed at once."""

    def hook(node: LearnerNode, log: dict) -> None:
        board = BankingBoard(
            access.url,
            access.login(INTRUDER),
            topics,
            node.run_id,
            INTRUDER,
            steps_now=lambda: node.env_steps,
            dump_at=node.cfg.total_env_steps // 2,
        )
        board.start()
        wait_until(lambda: False, 3600, node)
        board.stop()
        log["banked_claimed"], log["banked_dumped"] = board.claimed, board.dumped

    return hook


HELLO_RATE = 200.0  # hellos a second from the flooding board


def hello_hook(access: Access, topics: Topics) -> Hook:
    """A board of the run says hello 200 times a second from the start to the budget: each
    asks for the control, its credit and the policy again. The honest boards go on beside
    it; none of them may be quarantined for the disorder it makes."""

    def hook(node: LearnerNode, log: dict) -> None:
        flood = HelloFlood(
            access.url, access.login(INTRUDER), topics, node.run_id, INTRUDER, HELLO_RATE
        )
        flood.start()
        wait_until(lambda: False, 3600, node)
        flood.stop()
        log["hellos_sent"] = flood.sent

    return hook


def spoof_hook(access: Access, topics: Topics) -> Hook:
    """Statuses within its grant with returns of 1e300 and 1e308, 1e308 s in every runtime
    bucket and 1e308 steps a second, every 2 s from its first grant to the budget."""

    def hook(node: LearnerNode, log: dict) -> None:
        evil = CompromisedBoard(access.url, access.login, topics, node.run_id, INTRUDER)
        try:
            evil.announce()
            sent = 0
            while node.env_steps < node.cfg.total_env_steps:
                if node.grants.of(INTRUDER) is not None:
                    evil.spoof_figures()
                    sent += 2
                time.sleep(2.0)
            log["spoofed_statuses"] = sent
        finally:
            evil.stop()

    return hook


# --- rollouts: edge-rl deploy with a lying board among the served fleet ------------------

LIAR = "liar"
DEPLOY_FLAGS = (  # a short health window and quick waves, as tests/e2e/test_rollout.py
    "--canary 0.25 --window 20 --min-episodes 3 --max-drop 0.1 --batch 3 --rate 6 --confirm 20"
).split()


def rollout(arm: str, seed: int, steps: int, out: Path) -> dict:
    """The run of the example, clean; then, while its three boards serve it, five
    ``edge-rl deploy`` calls, each attack after the same deploy without it: a random
    network (clean; a board claiming a return of -1e300 for the policy served), a good
    one (clean; a board claiming 1e300 and refusing what it is sent), a good one again
    after the board leaves a retained status of version 2^53-1 and goes."""
    cfg = arm_config(arm, seed, steps)
    work = Path(tempfile.mkdtemp(prefix="rollout-", dir=out))
    accounts = BrokerAccounts(actors=(*HONEST, LIAR), root=cfg.transport.root, run=cfg.run)
    with EmbeddedBroker(kind="mosquitto", accounts=accounts, log_dir=work) as broker:
        access = Access(broker.url, broker.auth)
        topics = Topics(cfg.transport.root, cfg.run)
        return train(cfg, access, work, None, lambda node: deploys(node, access, topics, work))


def deploys(node: LearnerNode, access: Access, topics: Topics, work: Path) -> dict:
    from tests.harness.cartpole_policies import MODELS, policy_bundle

    signer = Signer.load_or_create(work / "learner.key")
    learner = access.login("learner")

    def deploy(model: str) -> dict:
        bundle = policy_bundle(MODELS[model].read_bytes(), run="lab", run_id="lab-1", version=40)
        path = work / f"{model}.bundle"
        path.write_bytes(encode_policy(bundle, signer))
        cmd = [str(Path(sys.executable).with_name("edge-rl")), "deploy", str(path)]
        cmd += ["--broker", access.url, "--run", node.cfg.run, "--signing-key"]
        cmd += [str(work / "learner.key"), "--bundle-key", str(work / "learner.pub")]
        cmd += ["--username", learner.username, "--password-file", learner.password_file]
        done = subprocess.run(
            [*cmd, *DEPLOY_FLAGS, "--seed", str(node.cfg.seed), "--json"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        try:
            got = json.loads(done.stdout)
        except ValueError:
            return {"exit": done.returncode, "error": done.stderr.strip()[-500:]}
        keys = ("result", "version", "measured_candidate", "measured_baseline", "serving_new")
        return {
            "exit": done.returncode,
            **{k: got.get(k) for k in keys},
            "flagged": got.get("flagged", {}),
        }

    served = wait_serving(node, access, topics, 60)
    if served is None:
        return {"error": "the boards did not report serving"}
    liar = Liar(access, topics, node.run_id, served)
    try:
        got = {"bad, clean": deploy("random")}
        liar.say(-1e300)
        got["bad, liar claims -1e300"] = deploy("random")
        liar.say(None)  # it leaves the serving fleet while the clean deploy runs
        got["good, clean"] = deploy("good2")
        liar.serving = wait_serving(node, access, topics, 30) or liar.serving
        liar.say(1e300, refuse=1)
        got["good, liar claims 1e300 and refuses"] = deploy("good")
        liar.serving = (MAX_SEQ, "c" * 64)
        liar.say(500.0)
        liar.leave()
        got["good, liar's retained v2^53-1, liar gone"] = deploy("good2")
    finally:
        liar.leave()
    return got


class Liar:
    """A serving board's statuses, told by the attacker on its own account (the liar of
    ``LyingServer`` of tests/harness/attackers.py, on this script's transport)."""

    def __init__(self, access: Access, topics: Topics, run_id: str, serving: tuple[int, str]):
        self.topics, self.run_id, self.serving = topics, run_id, serving
        self.claim: float | None = None
        self.refuse_on_target, self.refused = 0, 0
        self.t = board_transport(
            access.url,
            LIAR,
            access.login(LIAR),
            subscriptions=[(topics.target(LIAR), 1)],
            on_message=self._on_target,
        )

    def say(self, claim: float | None, refuse: int = 0) -> None:
        """Claim ``claim`` as the return of what it serves (None: say nothing, its retained
        status cleared)."""
        self.claim, self.refuse_on_target = claim, refuse
        if claim is None:
            self.t.publish(self.topics.status(LIAR), b"", retain=True, wait=5)
            return
        version, digest = self.serving
        status = ActorStatus(
            LIAR,
            "serving",
            run_id=self.run_id,
            session=1,
            policy_version=version,
            policy_digest=digest,
            recent_return=claim,
            served_episodes=100,
            policies_failed=self.refused,
        )
        self.t.publish(self.topics.status(LIAR), encode_status(status), retain=True, wait=5)

    def _on_target(self, _topic: str, payload: bytes) -> None:
        if not payload or self.claim is None:
            return
        try:
            target = decode_target(payload, 32 * 1024 * 1024)
        except CodecError:
            return
        self.serving = (target.policy_version, target.model_sha256)
        self.refused += self.refuse_on_target if target.bundle else 0
        threading.Thread(target=self.say, args=(self.claim, self.refuse_on_target)).start()

    def leave(self) -> None:
        self.t.stop()


def wait_serving(
    node: LearnerNode, access: Access, topics: Topics, timeout: float
) -> tuple[int, str] | None:
    """(version, digest) the honest boards all report serving, once they agree."""
    seen: dict[str, tuple[str, int, str]] = {}

    def on_status(topic: str, payload: bytes) -> None:
        with contextlib.suppress(CodecError):
            s = decode_status(payload)
            seen[s.actor_id] = (s.state, s.policy_version, s.policy_digest)

    t = MqttTransport(
        access.url,
        "watch-serving",
        subscriptions=[(topics.status(a), 1) for a in HONEST],
        on_message=on_status,
        auth=access.login("learner"),
    )
    t.start()
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = {v for a, v in seen.items() if a in HONEST}
            if len(seen.keys() & set(HONEST)) == len(HONEST) and len(got) == 1:
                state, version, digest = got.pop()
                if state == "serving":
                    return version, digest
            time.sleep(0.5)
        return None
    finally:
        t.stop()


# --- the deployment's broker, in namespaces: floods and another run's board -------------


def deploy(arm: str, seed: int, steps: int, out: Path) -> dict:
    """(d) a board of another run writing into this run's topics, (e) 1,100 idle TCP
    connections from one address while the boards connect and 8 valid logins are tried
    from another, (f) 400 x 1.99 MB from a board of the run: the broker in one namespace,
    the run (this script again, ``--child``) in another."""
    cfg = arm_config(arm, seed, steps)
    work = Path(tempfile.mkdtemp(prefix="deploy-", dir=out))
    creds = work / "creds"
    ours = [*HONEST, INTRUDER, PROBE]
    make_credentials(creds, [*ours, STRANGER], tls=True, passwords=True, server_names=[BROKER_IP])
    with Registry.open(creds) as reg:
        reg.enroll(ours, run=cfg.run, root=cfg.transport.root)
        reg.enroll([STRANGER], run=OTHER_RUN, root=cfg.transport.root)
        reg.write_acl()
    with Namespaces(f"a{os.getpid() % 10000}") as (broker_ns, client_ns):
        run("ip", "netns", "exec", broker_ns, "nft", "-f", str(NFT))
        conf = installed_conf(creds, work, limits=True)
        broker = start_broker(broker_ns, conf, shipped_fd_limit(), work / "mosquitto.log")
        try:
            argv = [sys.executable, str(Path(__file__).parent / "attacks.py"), "--child"]
            job = {"seed": seed, "steps": steps, "run": cfg.run, "work": str(work)}
            argv += [json.dumps(job)]
            argv += ["--broker-pid", str(broker.pid)]
            child = subprocess.run(
                ["ip", "netns", "exec", client_ns, *argv],
                capture_output=True,
                text=True,
                timeout=3600,
            )
            alive = broker.poll() is None
        finally:
            stop(broker)
    if child.returncode != 0:
        raise RuntimeError(f"deploy arm failed:\n{child.stdout[-2000:]}\n{child.stderr[-4000:]}")
    result = json.loads(child.stdout.strip().splitlines()[-1])
    return {**result, "broker_alive": alive}


def deploy_child(job: dict, broker_pid: int) -> dict:
    """The run of ``deploy`` (``job``: its seed, steps, run and work directory), in the
    client namespace (every board connects from 10.231.0.3; the flood from 10.231.0.2)."""
    cfg = arm_config("deploy", job["seed"], job["steps"], job["run"])
    work = Path(job["work"])
    creds = work / "creds"
    login = BrokerAuth.from_directory
    access = Access(
        f"mqtts://{BROKER_IP}:8883",
        lambda u: login(creds / "learner", u) if u == "learner" else login(creds / "boards" / u, u),
    )
    flood = HeldFlood("", creds, work, PROBE)  # started first: the run starts under it
    topics = Topics(cfg.transport.root, cfg.run)
    result = train(cfg, access, work, deploy_hook(access, topics, flood, broker_pid))
    result["flood_open_at_end"] = flood.close()
    return result


def deploy_hook(access: Access, topics: Topics, flood: HeldFlood, broker_pid: int) -> Hook:
    def hook(node: LearnerNode, log: dict) -> None:
        log["flood"] = flood.result()
        at = int(ATTACK_AT * node.cfg.total_env_steps)
        if not wait_until(lambda: node.env_steps >= at, 3600, node):
            log["attack_error"] = "the run ended before the attacks"
            return
        another_runs_board(access, topics, node.run_id)
        log["stranger_at"] = log["payload_at"] = node.env_steps
        log["rss_mb"] = payload_flood(access, topics, broker_pid)

    return hook


def another_runs_board(access: Access, topics: Topics, run_id: str) -> None:
    """A board of run OTHER_RUN, logged in with its own password, writes into this run:
    batches and statuses under its id and an honest one's, a control and a policy."""
    t = MqttTransport(access.url, f"actor-{STRANGER}", auth=access.login(STRANGER))
    t.start()
    try:
        if not t.wait_connected(30):
            raise ConnectionError(f"{STRANGER}: cannot reach the broker")
        for actor in (STRANGER, HONEST[0]):
            b = cartpole_batch(actor, 77, 0, 16, run_id=run_id)
            t.publish(topics.transitions(actor), encode_transitions(b), wait=5)
            status = ActorStatus(actor, "running", run_id=run_id, session=77)
            t.publish(topics.status(actor), encode_status(status), retain=True, wait=5)
        t.publish(topics.control, b'{"state": "stopped"}', retain=True, wait=5)
        t.publish(topics.policy, b"not a policy", retain=True, wait=5)
    finally:
        t.stop()


def payload_flood(access: Access, topics: Topics, broker_pid: int) -> dict:
    """PAYLOADS x PAYLOAD_BYTES from the intruder (a board of the run) on its own
    transitions topic, each waited for; the broker's resident MB before, peak, after."""
    before, _ = rss_mb(broker_pid)
    t = MqttTransport(access.url, f"actor-{INTRUDER}", auth=access.login(INTRUDER))
    t.start()
    acked = 0
    try:
        if not t.wait_connected(30):
            raise ConnectionError(f"{INTRUDER}: cannot reach the broker")
        payload = os.urandom(PAYLOAD_BYTES)
        deadline = time.monotonic() + 300
        for _ in range(PAYLOADS):
            acked += t.publish(topics.transitions(INTRUDER), payload, wait=10)
            if time.monotonic() > deadline:
                break
    finally:
        t.stop()
    _, peak = rss_mb(broker_pid)
    time.sleep(5)
    after, _ = rss_mb(broker_pid)
    return {"acked": acked, "before": round(before), "peak": round(peak), "after": round(after)}


# --- the status stall across a SIGKILL of the learner and --resume ----------------------

CHECKPOINTS = 10  # checkpoints over the budget: the kill loses at most a tenth


def stall_resume(arm: str, seed: int, steps: int, out: Path) -> dict:
    """(b) across a kill: the intruder, granted credit, leaves a retained status of
    2^53-1 env steps; the learner (``edge-rl learn``, a process of its own) is killed by
    PID (SIGKILL) half-way and resumed with ``--resume``; the fleet runs on throughout."""
    cfg = arm_config(arm, seed, steps)
    work = Path(tempfile.mkdtemp(prefix="stall-", dir=out))
    accounts = BrokerAccounts(actors=(*HONEST, INTRUDER), root=cfg.transport.root, run=cfg.run)
    signer = Signer.load_or_create(work / "learner.key")
    signer.write_public(work / "learner.pub")
    rundir = work / "run"
    sets = {"total_env_steps": steps, "checkpoint.every_s": 0, "fleet.actors": 0}
    sets["checkpoint.every_env_steps"] = steps // CHECKPOINTS
    t0 = time.monotonic()
    with EmbeddedBroker(kind="mosquitto", accounts=accounts, log_dir=work) as broker:
        common = ["--broker", broker.url, *broker.auth("learner").argv(), "--json"]
        first = [*_learn, "--config", str(REPO / "examples" / "cartpole_dqn.yaml")]
        first += ["--out", str(rundir), "--seed", str(seed), "--run", cfg.run]
        first += ["--signing-key", str(work / "learner.key")]
        first += [x for k, v in sets.items() for x in ("--set", f"{k}={v}")]
        fleet = Fleet(
            len(HONEST),
            board_file(cfg.fleet.board),
            broker.url,
            cfg.env_id,
            policy_key=work / "learner.pub",
            run=cfg.run,
            seed=seed,
            log_dir=work / "fleet",
            auth=broker.auth,
        )
        with fleet:
            log = _kill_under_stall(first + common, rundir, Access(broker.url, broker.auth), cfg)
            resumed = subprocess.run(
                [*_learn, "--resume", str(rundir), *common],
                capture_output=True,
                text=True,
                timeout=3600,
                cwd=REPO,
            )
            fleet.stop()
    if resumed.returncode != 0:
        raise RuntimeError(f"the resumed learner failed:\n{resumed.stderr[-4000:]}")
    summary = json.loads(resumed.stdout[resumed.stdout.index("{") :])
    return {**_from_summary(summary, cfg, rundir), **log, "wall_s": round(time.monotonic() - t0)}


_learn = [sys.executable, "-m", "edge_rl.cli", "learn"]


def _header(rundir: Path) -> dict:
    try:
        return json.loads((rundir / "checkpoint" / "header.json").read_text())
    except (OSError, ValueError):
        return {}


def _granted(rundir: Path, actor: str) -> int:
    try:
        return json.loads((rundir / "grants.json").read_text())["grants"][actor][1]
    except (OSError, ValueError, KeyError):
        return 0


def _poll(cond: Callable[[], bool], proc: subprocess.Popen, timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the learner ended or timed out (exit {proc.poll()})")
        time.sleep(0.2)


def _kill_under_stall(argv: list[str], rundir: Path, access: Access, cfg: RunConfig) -> dict:
    """The first part: run until the stall status is retained and half the budget is
    checkpointed, then SIGKILL the learner."""
    learner = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    evil = None
    try:
        _poll(lambda: bool(_header(rundir)), learner)
        run_id = _header(rundir)["identity"]["run_id"]
        topics = Topics(cfg.transport.root, cfg.run)
        evil = CompromisedBoard(access.url, access.login, topics, run_id, INTRUDER, HONEST[1])
        evil.announce()
        _poll(lambda: _granted(rundir, INTRUDER) > 0, learner)
        stall = ActorStatus(INTRUDER, "running", run_id=run_id, session=evil.session)
        evil.status(dataclasses.replace(stall, env_steps=MAX_SEQ))
        stalled_at = _header(rundir).get("env_steps", 0)
        half = cfg.total_env_steps // 2
        _poll(lambda: _header(rundir).get("env_steps", 0) >= half, learner)
        os.kill(learner.pid, signal.SIGKILL)  # by PID: the learner only
        learner.wait(30)
        return {
            "attacked_at": stalled_at,
            "killed_at": _header(rundir)["env_steps"],
            "granted_before_resume": _granted(rundir, INTRUDER),
        }
    finally:
        if evil is not None:
            evil.stop()  # its retained status stays on the broker
        if learner.poll() is None:
            learner.kill()
            learner.wait()


def _from_summary(summary: dict, cfg: RunConfig, rundir: Path) -> dict:
    flat = []
    for part in _metrics_parts(rundir / "metrics.csv"):
        flat += flat_stretches([s for s in part if s[1] > 0], cfg.total_env_steps)
    return {
        "env_steps": summary["env_steps"],
        "budget": cfg.total_env_steps,
        "return": summary["final_eval_return"],
        "return_std": summary["final_eval_return_std"],
        "taken_by_actor": summary["transitions_received_by_actor"],
        "replay_rows": {},
        "granted": {INTRUDER: _granted(rundir, INTRUDER)},
        "rejected": summary["batches_rejected"],
        "status_over_credit": summary["status_over_credit"],
        "actor_sessions_refused": summary["actor_sessions_refused"],
        "actors": sorted(summary["actors"]),
        "quarantined": summary["quarantined"],
        "resumed_from_env_steps": summary["resumed_from_env_steps"],
        **stalls(flat, cfg),
    }


def _metrics_parts(path: Path) -> list[list[tuple[float, int]]]:
    """metrics.csv's (wall s, env steps) rows, one list per part of the run (a resumed
    part appends rows from its own wall clock's 0)."""
    parts: list[list[tuple[float, int]]] = [[]]
    with open(path) as f:
        for row in csv.DictReader(f):
            sample = (float(row["wall_s"]), int(row["env_steps"]))
            if parts[-1] and sample[0] < parts[-1][-1][0]:
                parts.append([])
            parts[-1].append(sample)
    return parts


EMBEDDED_HOOKS = {
    "clean": no_attack,
    "wire": wire_hook,
    "outlier": outlier_hook,
    "outlier, no quarantine": outlier_hook,
    "observations": board_hook(DriftingBoard, "drifting_sent"),
    "done-flags": board_hook(FlippedDoneBoard, "flipped_sent"),
    "banked-credit": banking_hook,
    "spoofed-figures": spoof_hook,
    "hello-flood": hello_hook,
}
ARMS = (*EMBEDDED_HOOKS, "rollout", "stall-resume", "deploy")


def run_arm(arm: str, seed: int, steps: int, out: Path) -> dict:
    if arm == "rollout":
        return rollout(arm, seed, steps, out)
    if arm == "deploy":
        return deploy(arm, seed, steps, out)
    if arm == "stall-resume":
        return stall_resume(arm, seed, steps, out)
    return embedded(arm, seed, steps, out, EMBEDDED_HOOKS[arm])
