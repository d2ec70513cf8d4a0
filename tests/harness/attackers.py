"""Attackers that hold a board's own valid credentials, for the security tests and
benchmarks/attacks.py.

    board = PerfectBoard(url, auth, topics, run_id, "outlier", episode=200)
    board.start()      # announces itself, then sends within each credit grant it gets
    board.stop()

``PerfectBoard`` plays by every rule ingest checks (its run id, its own topic, inside the
observation space, CartPole's reward of exactly 1, within its grant) and sends data no
honest board of the fleet sends: the pole never falls, every episode is truncated at
``episode`` steps, so every return is ``episode``. Only the quarantine rule (its returns
against the fleet's) tells it apart.
"""

from __future__ import annotations

import threading

import numpy as np

from edge_rl.transport.auth import BrokerAuth
from edge_rl.transport.mqtt import MqttTransport
from edge_rl.types import ActorStatus, TransitionBatch
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.messages import decode_credit, encode_status
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import encode_transitions


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
        self.t = MqttTransport(
            url,
            f"actor-{actor}",
            subscriptions=[(topics.credit(actor), 1)],
            on_message=self._on_credit,
            auth=auth,
        )
        self.t.start()
        if not self.t.wait_connected(15):
            raise ConnectionError(f"{actor}: cannot reach the broker at {url}")
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
            step = self.sent + np.arange(n)
            obs = np.zeros((n, 4), np.float32)
            b = TransitionBatch(
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
            self.t.publish(self.topics.transitions(self.actor), encode_transitions(b))
            seq, self.sent = seq + 1, self.sent + n
            self._status("running")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.t.stop()
