"""The board's states of docs/protocol.md §5.4 in RunControl alone: a run ends served,
a pause holds the policy (idle, or served on a board whose on_pause says so) and voids
the credit, and only a new run start or the process's own end moves a board on."""

from __future__ import annotations

import numpy as np
import pytest

from edge_rl.actor.exploration import greedy
from edge_rl.actor.run_control import RunControl
from edge_rl.actor.serving import ServedReturns
from edge_rl.boards import BoardConfig
from edge_rl.specs import EnvSpec
from edge_rl.types import ControlMessage, CreditGrant
from edge_rl.wire.messages import encode_control, encode_credit

ME = 99


def control(state: str, run_id: str) -> bytes:
    return encode_control(ControlMessage(state, run_id))


def joined(run_id: str = "r", credit: int = 100, **kw) -> RunControl:
    rc = RunControl("pi", ME, **kw)
    rc.on_credit(encode_credit(CreditGrant(run_id, ME, credit)))
    rc.on_control(control("running", run_id))
    assert rc.take_join() == run_id and rc.may_step(0)
    return rc


def test_a_run_that_ends_is_served_and_a_new_run_start_is_joined_from_serving():
    rc = joined()
    rc.on_control(control("serving", "r"))
    assert rc.serves() and not rc.may_step(0) and rc.status_state(0) == "serving"
    rc.on_control(control("paused", "r"))  # serving is final for its run start: a late
    rc.on_control(control("running", "r"))  # will, or a resumed learner, is ignored
    assert rc.serves() and rc.state == "serving"
    rc.on_control(control("running", "next"))  # a new run start is joined
    assert not rc.serves()  # a join waits: the training loop takes it
    assert rc.take_join() == "next" and rc.state == "running" and rc.credit == 0
    rc.on_control(control("serving", "later"))  # a board that meets a served run serves it
    assert rc.take_join() == "later" and rc.serves()


def test_a_pause_holds_the_policy_idle_by_default_and_voids_the_credit():
    rc = joined(credit=100)
    rc.on_control(control("paused", "r"))
    assert not rc.serves() and not rc.may_step(0) and rc.status_state(0) == "paused"
    assert rc.credit == 0  # the learner that comes back grants anew
    rc.on_credit(encode_credit(CreditGrant("r", ME, 40)))  # it did: before its "running"
    rc.on_control(control("running", "r"))  # the same run start comes back
    assert rc.run_id == "r" and rc.may_step(39) and not rc.may_step(40) and not rc.done


def test_a_board_that_serves_while_paused_serves_its_last_policy():
    rc = joined(serve_paused=True)
    rc.on_control(control("paused", "r"))
    assert rc.serves() and rc.status_state(0) == "serving" and not rc.may_step(0)
    rc.on_control(control("running", "r"))
    assert not rc.serves() and rc.state == "running"


def test_a_stop_of_a_run_start_not_joined_yet_cancels_the_join():
    rc = joined()
    rc.on_control(control("running", "next"))
    rc.on_control(control("stopped", "next"))
    assert rc.take_join() is None and rc.run_id == "r"


def test_the_board_file_says_what_a_paused_board_does():
    assert BoardConfig(board="x").on_pause == "idle"
    assert BoardConfig(board="x", on_pause="serve").on_pause == "serve"
    with pytest.raises(ValueError):
        BoardConfig(board="x", on_pause="stop")


def test_served_returns_are_those_of_the_version_served():
    served = ServedReturns(window=3)
    served.begin(4)
    assert served.recent_return is None
    for reward, ended in [(1.0, False), (2.0, True), (5.0, True)]:
        served.step(reward, ended)
    assert (served.version, served.episodes, served.recent_return) == (4, 2, 4.0)
    served.begin(5)  # a new version: its own episodes only
    assert (served.version, served.episodes, served.recent_return) == (5, 0, None)
    for _ in range(5):
        served.step(1.0, True)
    assert served.recent_return == 1.0 and served.episodes == 5


def test_greedy_is_the_model_s_own_choice():
    discrete = EnvSpec(obs_shape=(4,), num_actions=3)
    assert greedy(np.array([[0.1, 0.7, 0.7]], np.float32), discrete) == 1  # lowest on a tie
    box = EnvSpec(obs_shape=(3,), action_shape=(2,), action_low=(-1.0, 0.0), action_high=(1.0, 2.0))
    out = greedy(np.array([[1.5, 0.5]], np.float32), box)
    assert out.dtype == np.float32 and out.tolist() == [1.0, 0.5]
