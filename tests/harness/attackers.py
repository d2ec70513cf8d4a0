"""Attackers that hold a board's own valid credentials, for the security tests and
benchmarks/attacks.py.

    board = PerfectBoard(url, auth, topics, run_id, "outlier", episode=200)
    board.start()      # announces itself, then sends within each credit grant it gets
    board.stop()

    evil = CompromisedBoard(url, login, topics, run_id)   # login: user -> BrokerAuth
    evil.announce()    # a status like a board's: it is granted credit
    evil.play(grant)   # every game a board's password allows, once
    evil.extras(grant) # rewards of 1e6 on a truncated episode, a status stall of its own
    evil.spoof_figures()  # returns of 1e300, 1e308; 1e308 s in every runtime bucket

    DriftingBoard(...), FlippedDoneBoard(...)  # as PerfectBoard, with other data
    BankingBoard(..., steps_now=lambda: node.env_steps, dump_at=n)  # claims, then dumps
    HelloFlood(url, auth, topics, run_id, "intruder", rate=200).start()  # hellos, no end

``PerfectBoard`` plays by every rule ingest checks (its run id, its own topic, inside the
observation space, CartPole's reward of exactly 1, within its grant) and sends data no
honest board of the fleet sends: the pole never falls, every episode is truncated at
``episode`` steps, so every return is ``episode``. Only the quarantine rule (its returns
against the fleet's) tells it apart.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

import numpy as np

from edge_rl.transport.auth import BrokerAuth
from edge_rl.transport.mqtt import MqttTransport
from edge_rl.types import BREAKDOWN_KEYS, ActorStatus, TransitionBatch
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.messages import decode_credit, decode_target, encode_status
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import encode_transitions

MAX_SEQ = 2**53 - 1  # the largest count a status or a seq may hold


def cartpole_batch(
    actor: str = "pi",
    session: int = 7,
    seq: int = 0,
    n: int = 4,
    reward: float = 1.0,
    obs: float = 0.0,
    run_id: str = "",
) -> TransitionBatch:
    """``n`` CartPole transitions, every observation ``obs``, the last one truncated (so the
    episode's return, ``n * reward``, counts when the batch is taken)."""
    o = np.full((n, 4), obs, np.float32)
    return TransitionBatch(
        actor,
        session,
        seq,
        0,
        o,
        np.zeros(n, np.int64),
        np.full(n, reward, np.float32),
        o,
        np.zeros(n, bool),
        np.arange(n) == n - 1,
        run_id=run_id,
    )


def board_transport(url: str, actor: str, auth: BrokerAuth | None, **kwargs) -> MqttTransport:
    """A started transport under board ``actor``'s client id, connected (15 s at most)."""
    t = MqttTransport(url, f"actor-{actor}", auth=auth, **kwargs)
    t.start()
    if not t.wait_connected(15):
        t.stop()
        raise ConnectionError(f"{actor}: cannot reach the broker at {url}")
    return t


class PerfectBoard:
    """A board that follows its credit like an honest one, with data no honest board of
    the fleet sends."""

    def __init__(
        self,
        url: str,
        auth: BrokerAuth | None,
        topics: Topics,
        run_id: str,
        actor: str = "outlier",
        episode: int = 200,
    ) -> None:
        self.topics, self.run_id, self.session = topics, run_id, 31337
        self.actor, self.episode = actor, episode
        self.credit = 0
        self.sent = 0
        self._stop = threading.Event()
        self.t = board_transport(
            url, actor, auth, subscriptions=[(topics.credit(actor), 1)], on_message=self._on_credit
        )
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _on_credit(self, _topic: str, payload: bytes) -> None:
        try:
            grant = decode_credit(payload)
        except CodecError:
            return  # an empty retained payload: the grant was cleared
        if grant.run_id == self.run_id and grant.session == self.session:
            self.credit = max(self.credit, grant.credit)

    def start(self) -> None:
        self._status("running")
        self._thread.start()

    def _status(self, state: str) -> None:
        status = ActorStatus(
            self.actor,
            state,
            run_id=self.run_id,
            session=self.session,
            env_steps=self.sent,
            transitions_sent=self.sent,
        )
        self.t.publish(self.topics.status(self.actor), encode_status(status), retain=True)

    def _loop(self) -> None:
        seq = 0
        while not self._stop.wait(0.05):
            n = min(self.credit - self.sent, 50)
            if n <= 0:
                continue
            b = self.batch(seq, self.sent + np.arange(n))
            self.t.publish(self.topics.transitions(self.actor), encode_transitions(b))
            seq, self.sent = b.seq + 1, self.sent + n
            self._status("running")

    def batch(self, seq: int, step: np.ndarray) -> TransitionBatch:
        """The batch of env steps ``step`` [n]: the pole never falls."""
        n = len(step)
        obs = np.zeros((n, 4), np.float32)
        return TransitionBatch(
            self.actor,
            self.session,
            seq,
            0,
            obs,
            (step % 2).astype(np.int64),
            np.ones(n, np.float32),
            obs,
            np.zeros(n, bool),
            step % self.episode == self.episode - 1,
            run_id=self.run_id,
        )

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.t.stop()


class DriftingBoard(PerfectBoard):
    """Within every bound the space sets: CartPole's two velocities (unbounded in its
    space) at ±9.9e5, under ``max_abs_observation``; episodes of 20 steps, reward 1. Its
    rows, taken, would widen the int8 export's calibration until no export passed."""

    def batch(self, seq: int, step: np.ndarray) -> TransitionBatch:
        b = super().batch(seq, step)
        rng = np.random.default_rng(seq)
        obs = rng.normal(0.0, 0.05, (len(step), 4)).astype(np.float32)
        obs[:, 1::2] = rng.choice([-9.9e5, 9.9e5], (len(step), 2))
        ends = step % 20 == 19
        return dataclasses.replace(
            b, obs=obs, next_obs=obs, terminated=ends, truncated=np.zeros_like(ends)
        )


class FlippedDoneBoard(PerfectBoard):
    """Done flags inverted: every row but the last of a batch ends an episode, and its
    batches skip a seq each (as if one were lost), so no episode's return is whole."""

    def batch(self, seq: int, step: np.ndarray) -> TransitionBatch:
        b = super().batch(seq + 1, step)
        rng = np.random.default_rng(seq)
        obs = rng.normal(0.0, 0.05, (len(step), 4)).astype(np.float32)
        done = np.ones(len(step), bool)
        done[-1] = False
        return dataclasses.replace(
            b, obs=obs, next_obs=obs, terminated=done, truncated=np.zeros_like(done)
        )


class BankingBoard(PerfectBoard):
    """Claims its whole grant as stepped and sent, delivers nothing; from ``dump_at`` of
    the budget on, sends what it claimed, at once (its credit written off meanwhile)."""

    def __init__(self, *args, steps_now: Callable[[], int], dump_at: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.steps_now, self.dump_at = steps_now, dump_at
        self.claimed = 0
        self.dumped = 0

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            if self.steps_now() < self.dump_at:
                self.claimed = max(self.claimed, self.credit)
                self.sent = self.claimed  # what its statuses say it sent
                self._status("running")
                continue
            if self.dumped:
                continue
            seq, left = 0, self.claimed
            while left > 0:
                n = min(left, 256)
                b = self.batch(seq, np.arange(self.claimed - left, self.claimed - left + n))
                self.t.publish(self.topics.transitions(self.actor), encode_transitions(b))
                seq, left = seq + 1, left - n
            self.dumped = self.claimed


class HelloFlood:
    """A board of the run that says hello ``rate`` times a second on its own hello topic
    (each asks the learner for its control, credit and policy again), until ``stop()``."""

    def __init__(
        self,
        url: str,
        auth: BrokerAuth | None,
        topics: Topics,
        run_id: str,
        actor: str,
        rate: float,
    ) -> None:
        self.topics, self.run_id, self.actor, self.rate = topics, run_id, actor, rate
        self.sent = 0
        self._stop = threading.Event()
        self.t = board_transport(url, actor, auth)
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        hello = encode_status(ActorStatus(self.actor, "starting", run_id="", session=777))
        topic = self.topics.actor_hello(self.actor)
        while not self._stop.wait(1.0 / self.rate):
            self.sent += bool(self.t.publish(topic, hello))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.t.stop()


class CompromisedBoard:
    """The process of a board whose password the attacker holds: it announces itself (so
    it is granted credit), then plays every game its credentials allow inside its own
    namespace, and a second session under a live honest id with that board's password.
    ``login(user)`` gives any board's credentials (the attacker holds both passwords)."""

    def __init__(
        self,
        url: str,
        login: Callable[[str], BrokerAuth | None],
        topics: Topics,
        run_id: str,
        actor: str = "intruder",
        twin_of: str = "sim-01",
    ) -> None:
        self.url, self.login, self.topics, self.run_id = url, login, topics, run_id
        self.actor, self.twin_of = actor, twin_of
        self.session = 4242
        self.own = board_transport(url, actor, login(actor))

    def announce(self) -> None:
        status = ActorStatus(self.actor, "running", run_id=self.run_id, session=self.session)
        self.status(status)

    def status(self, status: ActorStatus) -> None:
        topic = self.topics.status(self.actor)
        if not self.own.publish(topic, encode_status(status), retain=True, wait=5):
            raise ConnectionError(f"{self.actor}: status not acknowledged")

    def send(self, b: TransitionBatch, transport: MqttTransport | None = None) -> None:
        t = transport or self.own
        if not t.publish(self.topics.transitions(b.actor_id), encode_transitions(b), wait=5):
            raise ConnectionError(f"{b.actor_id}: batch not acknowledged")

    def mine(self, seq: int, n: int, reward: float = 1.0) -> TransitionBatch:
        return cartpole_batch(self.actor, self.session, seq, n, reward, run_id=self.run_id)

    def play(self, grant: int) -> None:
        small = max(1, min(16, grant // 4))
        self.send(self.mine(0, small))  # within its grant: taken
        self.send(self.mine(1, 19_000, reward=1e6))  # replay takeover, +-1e6
        self.send(self.mine(2, grant + 1))  # plausible, more than granted
        self.send(self.mine(MAX_SEQ, 1))  # sequence games
        old = cartpole_batch(self.actor, self.session - 1, 0, small, run_id=self.run_id)
        self.send(old)  # an old session of its id
        self.status(
            ActorStatus(
                self.actor, "running", run_id=self.run_id, session=self.session, env_steps=MAX_SEQ
            )
        )
        self.second_session_under(self.twin_of, small)
        self.spoof_figures()

    def spoof_figures(self) -> None:
        """Statuses within its grant whose figures no board can have: returns of 1e300
        and 1e308, 1e308 s in every runtime bucket, 1e308 steps a second (their sums were
        infinite: ``summary.json`` held ``Infinity``)."""
        for ret in (1e300, 1e308):
            self.status(
                ActorStatus(
                    self.actor,
                    "running",
                    run_id=self.run_id,
                    session=self.session,
                    recent_return=ret,
                    env_steps_per_s=1e308,
                    breakdown={k: 1e308 for k in BREAKDOWN_KEYS},
                )
            )

    def extras(self, grant: int) -> None:
        """A short episode of rewards of 1e6, truncated (its return would drive the
        exploration schedule and the live view), at the next seq."""
        self.send(self.mine(3, max(1, min(16, grant // 4)), reward=1e6))

    def second_session_under(self, actor: str, n: int) -> None:
        """With ``actor``'s password: the broker hands the connection over (one client id
        per username), so the twin says its piece and leaves."""
        twin = MqttTransport(self.url, f"actor-{actor}", auth=self.login(actor))
        twin.start()
        try:
            if not twin.wait_connected(15):
                raise ConnectionError(f"{actor}'s twin: cannot reach the broker")
            status = ActorStatus(actor, "running", run_id=self.run_id, session=99)
            if not twin.publish(self.topics.status(actor), encode_status(status), wait=5):
                raise ConnectionError(f"{actor}'s twin: status not acknowledged")
            self.send(cartpole_batch(actor, 99, 0, n, run_id=self.run_id), twin)
        finally:
            twin.stop()

    def stop(self) -> None:
        self.own.stop()


class LyingServer:
    """A serving board's statuses, told by an attacker during ``edge-rl deploy``: it claims
    ``claim`` as its recent return, takes every target it is sent as served (with that
    return, and ``refuse`` added to its ``policies_failed``), so it looks like a board."""

    def __init__(
        self,
        client,  # a connected paho client (tests' mqtt_client_factory)
        topics: Topics,
        run_id: str,
        actor: str,
        serving: tuple[int, str],  # (version, digest) it says it serves
        claim: float,
        refuse: int = 0,
    ) -> None:
        self.client, self.topics, self.run_id, self.actor = client, topics, run_id, actor
        self.serving, self.claim, self.refuse = serving, claim, 0
        self.refuse_on_target = refuse
        self.targets = 0
        client.on_message = self._on_target
        client.subscribe(topics.target(actor), qos=1)
        self.say()

    def say(self, wait: bool = True) -> None:
        """Publish its status (``wait``: for the broker's ack; never on paho's thread)."""
        version, digest = self.serving
        status = ActorStatus(
            self.actor,
            "serving",
            run_id=self.run_id,
            session=1,
            policy_version=version,
            policy_digest=digest,
            recent_return=self.claim,
            served_episodes=100,
            policies_failed=self.refuse,
        )
        sent = self.client.publish(
            self.topics.status(self.actor), encode_status(status), qos=1, retain=True
        )
        if wait:
            sent.wait_for_publish(5)

    def _on_target(self, _client, _userdata, message) -> None:
        if not message.payload:
            return  # a cleared target
        try:
            target = decode_target(message.payload, 32 * 1024 * 1024)
        except CodecError:
            return
        self.targets += 1
        self.serving = (target.policy_version, target.model_sha256)
        self.refuse += self.refuse_on_target if target.bundle else 0
        self.say(wait=False)
