"""A board whose data is plausible by the env's spec but far off the fleet's is
quarantined in a real run: Mosquitto with the run's ACL, a real learner, three honest
actor processes on CartPole, and a board with its own valid password that plays by the
credit rules and sends perfect-looking episodes (obs at the centre, reward 1, every episode
truncated at 100 steps: a return of 100 while the honest fleet's is ~20).

Each transition passes every check of ingest (inside the observation space, CartPole's
reward of exactly 1, within its grant); only its distribution against the fleet's gives
it away (learner/quarantine.py). The test holds: it is quarantined by the return rule and
no honest board is; its credit stops at once; its rows leave replay; the run reaches its
budget.
"""

from __future__ import annotations

import threading
import time
import uuid

import numpy as np
import pytest

from edge_rl.agents.dqn.config import DQNConfig
from edge_rl.broker.config import BrokerAccounts
from edge_rl.broker.embedded import EmbeddedBroker
from edge_rl.config import CheckpointConfig, ExportConfig, FleetConfig, RunConfig
from edge_rl.learner.node import LearnerNode
from edge_rl.sim.fleet import Fleet
from edge_rl.transport.mqtt import MqttTransport, mqtt_connect
from edge_rl.types import ActorStatus, TransitionBatch
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.messages import decode_credit, encode_status
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import encode_transitions

HONEST = ("sim-00", "sim-01", "sim-02")
OUTLIER = "outlier"
EPISODE = 100  # the outlier's episodes: always truncated here, never fallen
BUDGET = 4_000


def real_config(run: str) -> RunConfig:
    return RunConfig(
        env_id="CartPole-v1",
        run=run,
        total_env_steps=BUDGET,
        learning_starts=500,
        replay_ratio=0.25,
        max_lag_transitions=600,
        eval_episodes=2,
        select_every=0,
        dqn=DQNConfig(hidden=(32, 32), batch_size=32),
        fleet=FleetConfig(actors=0),
        export=ExportConfig(
            every_updates=100, calibration_size=100, parity_size=100, min_greedy_agreement=0.0
        ),
        checkpoint=CheckpointConfig(every_s=0),
    )


class PerfectBoard:
    """A board that follows its credit like an honest one, with data no honest board of
    the fleet sends."""

    def __init__(self, broker, topics: Topics, run_id: str) -> None:
        self.topics, self.run_id, self.session = topics, run_id, 31337
        self.credit = 0
        self.sent = 0
        self.refused_grants = 0
        self._stop = threading.Event()
        self.t = MqttTransport(
            broker.url,
            f"actor-{OUTLIER}",
            subscriptions=[(topics.credit(OUTLIER), 1)],
            on_message=self._on_credit,
            auth=broker.auth(OUTLIER),
        )
        self.t.start()
        assert self.t.wait_connected(15)
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
            OUTLIER,
            state,
            run_id=self.run_id,
            session=self.session,
            env_steps=self.sent,
            transitions_sent=self.sent,
        )
        self.t.publish(self.topics.status(OUTLIER), encode_status(status), retain=True)

    def _loop(self) -> None:
        seq = 0
        while not self._stop.wait(0.05):
            n = min(self.credit - self.sent, 50)
            if n <= 0:
                continue
            step = self.sent + np.arange(n)
            obs = np.zeros((n, 4), np.float32)
            b = TransitionBatch(
                OUTLIER,
                self.session,
                seq,
                0,
                obs,
                (step % 2).astype(np.int64),
                np.ones(n, np.float32),
                obs,
                np.zeros(n, bool),
                step % EPISODE == EPISODE - 1,
                run_id=self.run_id,
            )
            self.t.publish(self.topics.transitions(OUTLIER), encode_transitions(b))
            seq, self.sent = seq + 1, self.sent + n
            self._status("running")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.t.stop()


@pytest.mark.slow
def test_an_outlying_board_is_quarantined_its_rows_evicted_and_the_run_finishes(
    tmp_path, policy_keys, fast_board, wait_for
):
    cfg = real_config(f"q-{uuid.uuid4().hex[:8]}")
    signer, public_key = policy_keys
    topics = Topics(cfg.transport.root, cfg.run)
    accounts = BrokerAccounts(actors=(*HONEST, OUTLIER), root=cfg.transport.root, run=cfg.run)
    with EmbeddedBroker(kind="mosquitto", accounts=accounts, log_dir=tmp_path) as broker:
        assert broker.authenticated
        fleet = Fleet(
            len(HONEST),
            fast_board,
            broker.url,
            cfg.env_id,
            policy_key=public_key,
            run=cfg.run,
            log_dir=tmp_path / "fleet",
            auth=broker.auth,
        )
        node = LearnerNode(
            cfg,
            mqtt_connect(broker.url, broker.auth("learner")),
            tmp_path / "run",
            signer=signer,
            fleet_alive=fleet.alive,
        )
        board = PerfectBoard(broker, topics, node.run_id)
        watch = node.ingest.watch
        assert watch is not None
        seen: dict = {}

        def note_quarantine() -> None:  # the grant when it was quarantined, and after
            if wait_for(lambda: watch.is_quarantined(OUTLIER), 300):
                seen["grant_then"] = node.grants.of(OUTLIER)
                seen["steps_then"] = node.env_steps

        board.start()
        watcher = threading.Thread(target=note_quarantine, daemon=True)
        watcher.start()
        t0 = time.monotonic()
        with fleet:
            summary = node.run()
            fleet.stop()
        wall = time.monotonic() - t0
        board.stop()
        watcher.join(5)
    assert fleet.exit_codes() == [0, 0, 0]
    assert summary["env_steps"] == BUDGET  # the run reached its budget
    verdict = summary["quarantined"][OUTLIER]
    assert set(summary["quarantined"]) == {OUTLIER}  # no honest board
    assert verdict["rule"] == "return" and verdict["value"] == EPISODE and verdict["z"] > 5
    assert seen["steps_then"] < BUDGET
    # Its credit stopped: no grant after the quarantine.
    assert node.grants.of(OUTLIER) == seen["grant_then"]
    # Its rows left replay; what is left is the honest boards' (replay holds the budget).
    assert verdict["rows_evicted"] >= cfg.quarantine.min_transitions
    assert set(node.replay.rows_by_source()) <= set(HONEST)
    taken_from_outlier = summary["boards"][OUTLIER]["transitions"]
    assert verdict["rows_evicted"] == taken_from_outlier  # all of them (replay never wrapped)
    assert len(node.replay) == BUDGET - taken_from_outlier
    assert summary["boards"][OUTLIER]["replay_rows"] == 0
    assert all(summary["boards"][a]["replay_rows"] > 0 for a in HONEST)
    print(
        f"quarantine run: {verdict}, {wall:.0f} s, batches_rejected {summary['batches_rejected']}"
    )
