"""Run starts and actor identity (docs/protocol.md §5, §5.2, §5.3): the actor's RunControl
and the learner's Identities, each on its own, with an injected clock; and two real actor
processes with one id against a real, authenticated Mosquitto and a real learner."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from edge_rl.actor.run_control import RunControl
from edge_rl.learner.fleet.identity import Identities
from edge_rl.types import ControlMessage, CreditGrant
from edge_rl.wire.messages import encode_control, encode_credit
from tests.harness.configs import small_cartpole
from tests.harness.runs import fleet_and_learner
from tests.harness.waits import bound

ME = 4242


def control(state: str, run_id: str) -> bytes:
    return encode_control(ControlMessage(state, run_id))


def grant(run_id: str, credit: int, session: int = ME, refused=()) -> bytes:
    return encode_credit(CreditGrant(run_id, session, credit, tuple(refused)))


def test_an_actor_joins_the_run_start_of_the_newest_control_and_ignores_old_stops():
    rc = RunControl("pi", ME)
    rc.on_control(control("stopped", "old"))  # an earlier run's retained leftover
    assert rc.take_join() is None and rc.state == "waiting" and rc.status_state(0) == "starting"
    rc.on_credit(grant("new", 100))  # the grant may come before the control: kept
    rc.on_control(control("running", "new"))
    assert rc.run_id is None  # the loop joins, between two steps
    assert rc.take_join() == "new" and rc.credit == 100 and rc.may_step(99)
    assert not rc.may_step(100) and rc.status_state(100) == "paused"
    rc.on_credit(grant("new", 500, session=ME + 1))  # another process's credit: not ours
    rc.on_credit(grant("old", 900))  # another run start's: not ours
    assert rc.credit == 100
    rc.on_credit(b"")  # a cleared retained grant
    rc.on_credit(b"ERLG junk")
    assert rc.rejected == 1 and rc.credit == 100
    rc.on_control(control("stopped", "older-still"))  # not ours: ignored
    assert rc.state == "running"
    rc.on_control(control("running", "newer"))  # a new learner: join it, credit from 0
    assert rc.take_join() == "newer" and rc.credit == 0 and not rc.may_step(0)
    rc.on_control(control("stopped", "newer"))  # an operator ended it: idle, not gone
    assert not rc.done and rc.status_state(0) == "stopped" and not rc.may_step(0)
    rc.on_control(control("running", "newer"))  # stopped is final for this run start
    assert rc.take_join() is None and rc.state == "stopped"
    rc.on_control(control("running", "newest"))  # a new run start moves the board on
    assert rc.take_join() == "newest" and rc.state == "running"
    rc.stop()  # SIGTERM: only the process's own end is final for it
    rc.on_control(control("running", "newest-still"))
    assert rc.take_join() is None and rc.done and rc.status_state(0) == "stopped"


def test_an_actor_refused_in_its_grant_stops():
    rc = RunControl("pi", ME)
    rc.on_control(control("running", "r"))
    rc.take_join()
    rc.on_credit(grant("r", 50, session=77, refused=(ME,)))
    assert rc.state == "refused" and rc.done and not rc.may_step(0)
    rc.stop()  # SIGTERM after a refusal: still refused (the CLI exits 3)
    assert rc.state == "refused"


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_second_live_session_is_refused_and_a_restart_takes_over_after_the_window():
    clock = Clock()
    ids = Identities(window_s=10, clock=clock)
    assert ids.admit("pi", 1, "running")
    clock.t += 1
    assert not ids.admit("pi", 2, "starting")  # session 1 spoke 1 s ago: 2 is a duplicate
    assert ids.refused("pi") == (2,) and ids.owner("pi") == 1
    assert not ids.admit("pi", 2, "running") and ids.refusals == 2  # and stays refused
    # Session 1's board restarts: its last will, then a new session, which waits out the
    # window without credit, then owns the id.
    assert ids.admit("pi", 1, "offline")
    clock.t += 2
    assert not ids.admit("pi", 3, "starting") and ids.owner("pi") == 1
    clock.t += 10
    assert ids.admit("pi", 3, "running") and ids.owner("pi") == 3
    assert ids.refused("pi") == (2,)  # the refused duplicate stays refused


def test_two_boards_that_knock_each_other_off_end_with_the_newcomer_refused():
    """A broker that ties the client id to the username disconnects each for the other:
    every takeover publishes the kicked one's last will. The will alone frees nothing: when
    the owner speaks again while the newcomer waits, the newcomer was a duplicate."""
    clock = Clock()
    ids = Identities(window_s=10, clock=clock)
    assert ids.admit("pi", 1, "running")
    for _ in range(3):  # the newcomer connects: the owner's will, then its status
        assert ids.admit("pi", 1, "offline")
        assert not ids.admit("pi", 2, "starting")
        clock.t += 1  # the owner reconnects: the newcomer's will, then the owner's status
        assert not ids.admit("pi", 2, "offline")
        assert ids.admit("pi", 1, "starting")
        if ids.refused("pi"):
            break
    assert ids.refused("pi") == (2,) and ids.owner("pi") == 1


@pytest.mark.slow
def test_a_second_actor_process_with_the_same_id_exits_and_the_run_completes(
    tmp_path, policy_keys, fast_board, wait_for
):
    """Two real `edge-rl actor` processes log in as one board (same id, same password)
    to a real Mosquitto that ties client ids to usernames, next to a real learner: the
    second one is refused, says why, and exits with status 3; the run finishes."""
    from edge_rl.broker.config import BrokerAccounts
    from edge_rl.broker.embedded import EmbeddedBroker

    run = f"dup-{uuid.uuid4().hex[:8]}"
    cfg = small_cartpole(
        run,
        total_env_steps=2_000,
        learning_starts=200,
        max_lag_transitions=200,
        hidden=(16, 16),
        every_updates=100,
        sample=50,
        eval_episodes=2,
        select_every=2,
        select_episodes=2,
    )
    accounts = BrokerAccounts(actors=("sim-00",), root=cfg.transport.root, run=run)
    _signer, public_key = policy_keys
    with EmbeddedBroker(kind="mosquitto", accounts=accounts, log_dir=tmp_path) as broker:
        fleet, node = fleet_and_learner(cfg, broker, 1, fast_board, policy_keys, tmp_path)
        password = broker.auth("sim-00").password_file  # the board's own: the same login
        second = None

        def start_the_twin_once_the_first_steps(*args, **kwargs):
            nonlocal second
            if second is None and node.env_steps > 0:
                second = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "edge_rl.cli",
                        "actor",
                        "--board",
                        str(fast_board),
                        "--broker",
                        broker.url,
                        "--env",
                        cfg.env_id,
                        "--id",
                        "sim-00",
                        "--run",
                        run,
                        "--policy-key",
                        str(public_key),
                        "--password-file",
                        str(password),
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
            return real_update(*args, **kwargs)

        real_update = node.algo.update
        node.algo.update = start_the_twin_once_the_first_steps
        with fleet:
            summary = node.run()
            # The run is over: the actor serves its result until the fleet is stopped.
            assert all(c is None for c in fleet.exit_codes()), fleet.exit_codes()
            fleet.stop()
        assert second is not None
        try:
            out, _ = second.communicate(timeout=bound(60))
        finally:
            second.kill()
    assert second.returncode == 3, out
    assert "is in use by another live actor" in out, out
    assert summary["env_steps"] == cfg.total_env_steps
    assert summary["actor_sessions_refused"] == 1
    assert fleet.exit_codes() == [0]
