"""50 boards in 2 ``edge-rl actors`` processes on a real, authenticated Mosquitto: each board
is its own actor. Its own MQTT session and password (the broker's ACL keys on it), its
own status and session id, its own last will (a process killed outright leaves exactly
its boards offline), and its own policy slot that verifies every signature (a bundle of
another key is refused by every board, the cached interpreter notwithstanding)."""

from __future__ import annotations

import os
import signal

import pytest

from edge_rl.boards import board_file
from edge_rl.broker.config import BrokerAccounts
from edge_rl.broker.embedded import EmbeddedBroker
from edge_rl.sim.boards_file import read_boards_file
from edge_rl.sim.fleet import Fleet, fleet_ids
from edge_rl.wire.signing import Signer
from edge_rl.wire.topics import Topics
from tests.harness.control_plane import ControlPlane, Models, wait

N, PROCS = 50, 2
RUN, RUN_ID = "groups", "groups-start"


@pytest.mark.slow
@pytest.mark.long
def test_fifty_boards_in_two_processes_are_fifty_actors(tmp_path, mosquitto_available):
    models = Models()
    signer = Signer.generate()
    signer.write_public(tmp_path / "signing.pub")
    ids = fleet_ids(N)
    accounts = BrokerAccounts(ids, root="edge-rl", run=RUN)
    with (
        EmbeddedBroker(kind="mosquitto", accounts=accounts, log_dir=tmp_path) as broker,
        ControlPlane(
            broker.url, broker.auth("learner"), Topics("edge-rl", RUN), RUN_ID, signer, boards=N
        ) as cp,
    ):
        cp.fleet.send("running")
        fleet = Fleet(
            N,
            board_file("rpi4"),
            broker.url,
            "CartPole-v1",
            policy_key=tmp_path / "signing.pub",
            run=RUN,
            log_dir=tmp_path / "fleet",
            auth=broker.auth,
            procs=PROCS,
        )
        with fleet:
            assert len(fleet.procs) == PROCS
            assert wait(lambda: len(cp.first_seen) == N, 90), sorted(set(ids) - set(cp.first_seen))
            cp.publish_policy(models.bundle("int8", 1, RUN, RUN_ID, signer), 1)
            assert wait(lambda: cp.loaded(1) == N and cp.stepping() == N, 90)
            # Every board: its own session, and transitions on its own (ACL-bound) topic.
            sessions = [s for a in ids for s in cp.sessions[a]]
            assert len(sessions) == N and len(set(sessions)) == N
            assert set(cp.by_actor) == set(ids)

            # A bundle of another key: every board verifies it, and every board refuses it.
            forged = models.bundle("int8", 2, RUN, RUN_ID, Signer.generate())
            cp.publish_policy(forged, 2)
            assert wait(
                lambda: all(s.policies_rejected >= 1 for s in cp.statuses_now().values()), 60
            )
            assert cp.loaded(2) == 0
            assert {s.policy_version for s in cp.statuses_now().values()} == {1}

            # Process 0 killed outright: the broker sends exactly its boards' last wills.
            mine = {b.actor_id for b in read_boards_file(tmp_path / "fleet/actors-0.boards.json")}
            assert len(mine) == N // PROCS
            os.kill(fleet.procs[0].pid, signal.SIGKILL)

            def offline() -> set[str]:
                return {a for a, s in cp.statuses_now().items() if s.state == "offline"}

            assert wait(lambda: offline() == mine, 60), (sorted(offline() ^ mine), "differ")
        # The other process stopped on SIGTERM: its boards each said goodbye.
        assert fleet.exit_codes()[1] == 0, "the SIGTERM'd group was killed, not stopped"
        states = {a: s.state for a, s in cp.statuses_now().items()}
        assert {states[a] for a in set(ids) - mine} == {"stopped"}
