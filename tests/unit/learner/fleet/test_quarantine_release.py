"""A quarantine that the board is told of and an operator can lift (learner/fleet/
quarantine.py ``release`` and ``reason``, fleet control's ``paused`` control on the board's
welcome topic, ``edge-rl learn --keep-quarantine --release``)."""

from __future__ import annotations

import logging

import numpy as np

from edge_rl.actor.run_control import RunControl
from edge_rl.config import FleetConfig, QuarantineConfig, RunConfig
from edge_rl.learner.fleet.control import FleetControl
from edge_rl.learner.fleet.credit import Grants
from edge_rl.learner.fleet.quarantine import BoardWatch
from edge_rl.types import ActorStatus, ControlMessage
from edge_rl.wire.messages import decode_control, encode_control, encode_status
from edge_rl.wire.topics import Topics
from tests.harness.learn import run_cli

RULE = QuarantineConfig(min_transitions=100, window_transitions=200, min_episodes=2, max_z=5.0)
TOPICS = Topics("edge-rl", "release")
RID = "0123456789abcdef"


def quarantined_watch() -> BoardWatch:
    watch = BoardWatch(RULE, every_s=0.0)
    for actor, reward in (("a", -6.1), ("b", -5.4), ("c", -6.9), ("evil", 0.0)):
        watch.accepted(actor, np.full(200, reward, np.float32), [])
    watch.judge(800, now=1.0)
    assert set(watch.quarantined()) == {"evil"}
    return watch


def test_a_quarantined_board_is_released_and_judged_afresh():
    watch = quarantined_watch()
    assert "z " in watch.reason("evil") and "--release" in watch.reason("evil")
    assert watch.reason("a") == ""
    assert watch.release(["a", "evil"]) == ["evil"]  # only a quarantined board is released
    assert not watch.is_quarantined("evil") and watch.reason("evil") == ""
    assert "evil" not in watch.stats().boards  # its old figures are gone: judged afresh
    watch.accepted("evil", np.full(200, -6.0, np.float32), [])
    assert watch.judge(1_000, now=2.0) == []
    assert quarantined_watch().release(None) == ["evil"]  # None: every board


class Published:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []

    def __call__(self, topic: str, payload: bytes, retain: bool = False, **_kw) -> bool:
        self.sent.append((topic, payload))
        return True


def test_the_board_is_told_why_once_and_again_when_it_says_hello():
    watch = quarantined_watch()
    cfg = RunConfig(env_id="CartPole-v1", run="release", fleet=FleetConfig(actors=0))
    published = Published()
    fleet = FleetControl(
        cfg.fleet,
        cfg.pacing,
        TOPICS,
        published,
        lambda: (0, {}),
        RID,
        grants=Grants(),
        quarantined=watch.is_quarantined,
        quarantine_reason=watch.reason,
    )
    for actor, session in (("a", 1), ("evil", 2)):
        status = ActorStatus(actor, "running", run_id=RID, session=session)
        fleet.on_status(TOPICS.status(actor), encode_status(status))
    fleet.send("running", updates=0)
    fleet.send("running", updates=0)
    told = [decode_control(p) for t, p in published.sent if t == TOPICS.welcome("evil")]
    assert len(told) == 1 and told[0].state == "paused" and told[0].run_id == RID
    assert told[0].reason == watch.reason("evil")
    assert not [t for t, _ in published.sent if t == TOPICS.welcome("a")]
    fleet.welcome("evil")
    again = [p for t, p in published.sent if t == TOPICS.welcome("evil")]
    assert len(again) == 2 and decode_control(again[-1]).reason == watch.reason("evil")


def test_the_board_logs_the_reason_it_is_paused_for(caplog):
    rc = RunControl("evil", session=2)
    rc.on_control(encode_control(ControlMessage("running", RID)))
    rc.take_join()
    with caplog.at_level(logging.WARNING):
        rc.on_control(encode_control(ControlMessage("paused", RID, "quarantined at 800 ...")))
    assert rc.state == "paused" and "quarantined at 800" in caplog.text


def test_release_flags_need_a_resume():
    done = run_cli("learn", "--release", "pi-03")
    assert done.returncode == 2 and "go with --resume" in done.stderr
    assert "Traceback" not in done.stderr
