"""The end of a run as fleet control sees it: the learner waits for every board to report
the final state for as long as the stated status interval needs, and on while boards keep
coming over (a 1,000-board fleet asked for one status every 5 s had a tenth of its boards
still reported ``paused`` after a flat 5 s), and the grants the transport refused are
counted for the summary."""

from __future__ import annotations

import types

import pytest

from edge_rl.config import FleetConfig, RunConfig
from edge_rl.learner.fleet import control as fleet_control
from edge_rl.learner.fleet import timing
from edge_rl.learner.fleet.control import FleetControl
from edge_rl.types import ActorState, ActorStatus
from edge_rl.wire.messages import decode_control, encode_status
from edge_rl.wire.topics import Topics

RUN_ID = "end-start"
TOPICS = Topics("edge-rl", "end")


class Fleet:
    """A FleetControl on a clock that its own waits move; statuses due at a given time
    arrive while the learner waits, as the transport's thread would hand them in."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, max_statuses_per_s: float) -> None:
        self.now = 0.0
        self.due: list[tuple[float, str, ActorState]] = []  # (when, actor, state)
        fake = types.SimpleNamespace(monotonic=lambda: self.now, sleep=self._sleep)
        monkeypatch.setattr(fleet_control, "time", fake)
        self.interval = 0.0
        self.refuse = False  # the transport refuses every grant (its queue is full)
        cfg = RunConfig(
            env_id="CartPole-v1",
            run="end",
            total_env_steps=10**6,
            learning_starts=0,
            max_lag_transitions=100,
            fleet=FleetConfig(
                min_grant=1, max_grants_per_s=0.0, max_statuses_per_s=max_statuses_per_s
            ),
        )
        self.fc = FleetControl(
            cfg.fleet, cfg.pacing, TOPICS, self._publish, lambda: (0, {}), RUN_ID
        )

    def _publish(self, topic: str, payload: bytes, **_) -> bool:
        if topic == TOPICS.control:
            self.interval = decode_control(payload).status_interval_s
        return not (self.refuse and topic.endswith("/credit"))

    def _sleep(self, s: float) -> None:
        self.now += s
        for when, actor, state in [d for d in self.due if d[0] <= self.now]:
            self.due.remove((when, actor, state))
            self.status(actor, state)

    def status(self, actor: str, state: ActorState) -> None:
        s = ActorStatus(actor, state, run_id=RUN_ID, session=7)
        self.fc.on_status(TOPICS.status(actor), encode_status(s))


def test_the_end_waits_for_boards_that_report_within_the_stated_interval(monkeypatch):
    fleet = Fleet(monkeypatch, max_statuses_per_s=0.2)  # 2 boards: one status each 10 s
    for actor in ("a", "b"):
        fleet.status(actor, "paused")  # out of credit at the budget
    fleet.fc.send("serving")
    assert fleet.interval == 10.0
    # a reports at once, late on a loaded host; b missed it and reports with its next
    # periodic status, within one stated interval: both past a flat 5 s.
    fleet.due = [(6.0, "a", "serving"), (12.0, "b", "serving")]
    assert fleet.fc.state_wait_s() == 25.0  # 5 s and two stated intervals
    assert fleet.fc.wait_for_state("serving")
    assert 12.0 <= fleet.now < 12.5  # it returns once the last board said so
    assert {s.state for s in fleet.fc.actors().values()} == {"serving"}


def test_the_end_wait_is_bounded_by_the_stated_interval(monkeypatch, caplog):
    fleet = Fleet(monkeypatch, max_statuses_per_s=0.2)
    for actor in ("a", "b"):
        fleet.status(actor, "paused")
    fleet.fc.send("serving")
    fleet.due = [(1.0, "a", "serving")]  # b never reports again
    assert not fleet.fc.wait_for_state("serving")
    assert 26.0 <= fleet.now < 26.5  # 25 s after the last board came over
    assert "1 of 2 boards online had not reported 'serving'" in caplog.text


def test_the_end_waits_on_while_boards_keep_coming_over(monkeypatch):
    fleet = Fleet(monkeypatch, max_statuses_per_s=0.3)  # 3 boards: one status each 10 s
    boards = ("a", "b", "c")
    for actor in boards:
        fleet.status(actor, "paused")
    fleet.fc.send("serving")
    assert fleet.interval == 10.0 and fleet.fc.state_wait_s() == 25.0
    # A loaded host's boards, one every 20 s: the last well past 25 s from the start.
    fleet.due = [(20.0 * (i + 1), actor, "serving") for i, actor in enumerate(boards)]
    assert fleet.fc.wait_for_state("serving")
    assert 60.0 <= fleet.now < 60.5


def test_the_end_waits_four_rounds_at_most(monkeypatch):
    fleet = Fleet(monkeypatch, max_statuses_per_s=0.6)  # 6 boards: one status each 10 s
    boards = [f"b{i}" for i in range(6)]
    for actor in boards:
        fleet.status(actor, "paused")
    fleet.fc.send("serving")
    assert fleet.fc.state_wait_s() == 25.0
    # One board every 20 s, and the last one never: the wait ends at 4 x 25 s.
    fleet.due = [(20.0 * (i + 1), actor, "serving") for i, actor in enumerate(boards[:5])]
    assert not fleet.fc.wait_for_state("serving")
    assert timing.STATE_WAIT_ROUNDS * 25.0 <= fleet.now < 100.5


def test_a_small_fleet_waits_the_least_time(monkeypatch):
    fleet = Fleet(monkeypatch, max_statuses_per_s=200.0)  # 2 boards: no stated interval
    fleet.status("a", "paused")
    fleet.status("b", "offline")  # gone: not waited for
    fleet.fc.send("serving")
    assert fleet.interval == 0.0 and fleet.fc.state_wait_s() == timing.STATE_WAIT_S
    fleet.due = [(0.3, "a", "serving")]
    assert fleet.fc.wait_for_state("serving")
    assert fleet.now < 0.5


def test_grants_the_transport_refused_are_in_the_fleet_stats(monkeypatch):
    fleet = Fleet(monkeypatch, max_statuses_per_s=0.0)
    fleet.status("a", "running")
    fleet.refuse = True
    fleet.fc.send("running")
    fleet.fc.send("running")  # sent again, refused again
    assert fleet.fc.stats().grants_unsent == 2
    fleet.refuse = False
    fleet.fc.send("running")  # goes out: the count stays what was refused
    assert fleet.fc.stats().grants_unsent == 2
