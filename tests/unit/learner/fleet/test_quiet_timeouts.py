"""Timeouts that read statuses follow the status interval the learner states, and a board's
idle clock starts when it comes to hold credit: a board that reports its steps once every
10 s is not judged stalled after 5 s, and one that waited long for its first grant is not
judged idle the moment it gets one. Either mistake freed credit the board still held and
granted it again: the lead was overcommitted and a 1,000-board run went to a few boards."""

from __future__ import annotations

import types

import pytest

from edge_rl.config import FleetConfig, RunConfig
from edge_rl.learner.fleet import control as fleet_control
from edge_rl.learner.fleet.control import FleetControl
from edge_rl.types import ActorStatus
from edge_rl.wire.messages import decode_control, decode_credit, encode_status
from edge_rl.wire.topics import Topics

RUN_ID = "q-start"
TOPICS = Topics("edge-rl", "quiet")
LEAD = 100


class Fleet:
    """A FleetControl on a clock the test moves, with the boards' deliveries in hand."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, max_statuses_per_s: float) -> None:
        self.now = 0.0
        fake = types.SimpleNamespace(monotonic=lambda: self.now, sleep=lambda _s: None)
        monkeypatch.setattr(fleet_control, "time", fake)
        self.credit: dict[str, int] = {}
        self.interval = 0.0
        self.delivered: dict[str, int] = {}
        self.refuse: set[str] = set()  # boards whose grants the transport refuses
        self.up = True  # the learner's transport is connected
        cfg = RunConfig(
            env_id="CartPole-v1",
            run="quiet",
            total_env_steps=10**6,
            learning_starts=0,
            max_lag_transitions=LEAD,
            credit_timeout_s=5.0,
            fleet=FleetConfig(
                min_grant=1, max_grants_per_s=0.0, max_statuses_per_s=max_statuses_per_s
            ),
        )
        self.fc = FleetControl(
            cfg.fleet,
            cfg.pacing,
            TOPICS,
            self._publish,
            self._received,
            RUN_ID,
            connected=lambda: self.up,
        )

    def _publish(self, topic: str, payload: bytes, **_) -> bool:
        if not self.up or TOPICS.actor_of(topic) in self.refuse:
            return False
        if topic.endswith("/credit") and payload:
            self.credit[TOPICS.actor_of(topic)] = decode_credit(payload).credit
        elif topic == TOPICS.control:
            self.interval = decode_control(payload).status_interval_s
        return True

    def _received(self) -> tuple[int, dict[str, int]]:
        return sum(self.delivered.values()), dict(self.delivered)

    def status(self, actor: str, steps: int = 0, sent: int | None = None) -> None:
        sent = steps if sent is None else sent
        s = ActorStatus(
            actor, "running", run_id=RUN_ID, session=7, env_steps=steps, transitions_sent=sent
        )
        self.fc.on_status(TOPICS.status(actor), encode_status(s))

    def deliver(self, actor: str, n: int) -> None:
        self.delivered[actor] = self.delivered.get(actor, 0) + n

    def outstanding(self) -> int:
        """Granted and not delivered, over the fleet: at most the lead, unless boards that
        still hold credit were wrongly written off as idle."""
        return sum(c - self.delivered.get(a, 0) for a, c in self.credit.items())


def test_boards_that_report_every_stated_interval_are_not_stalled_between_two(monkeypatch):
    fleet = Fleet(monkeypatch, max_statuses_per_s=0.2)  # 2 boards: one status each 10 s
    fleet.status("a")
    fleet.status("c")
    fleet.fc.send("running")
    assert fleet.interval == 10.0
    assert fleet.credit == {"a": 50, "c": 50}
    # The bounds that read statuses: two stated intervals, not credit_timeout_s (5 s).
    assert fleet.fc.ids.window_s == 20.0
    # 6 s on, neither has reported yet (their next status is due at 10 s) and a third board
    # joins: what a and c hold is theirs still, so there is nothing to grant it.
    fleet.now = 6.0
    fleet.status("b")
    fleet.fc.send("running")
    assert fleet.credit["b"] == 0
    assert fleet.outstanding() <= LEAD
    # Silent past two intervals (15 s each with three boards): they are idle, and what
    # they hold is granted again.
    assert fleet.interval == 15.0
    fleet.now = 31.0
    fleet.fc.send("running")
    assert fleet.credit["b"] > 0
    # The summary says how far the lead was overcommitted: what a and c held, unstepped.
    assert fleet.fc.stats().credit_reclaimed == 100
    # a moves again: its spell is over and counted; a second spell of c's counts once.
    fleet.now = 32.0
    fleet.status("a", steps=50)
    fleet.deliver("a", 50)
    fleet.fc.send("running")
    fleet.fc.send("running")
    assert fleet.fc.stats().credit_reclaimed == 100


def test_a_board_that_waited_for_its_first_grant_is_not_idle_when_it_gets_one(monkeypatch):
    fleet = Fleet(monkeypatch, max_statuses_per_s=0.0)  # no stated interval: 5 s
    fleet.status("a")
    fleet.status("c")
    fleet.fc.send("running")
    fleet.status("b")  # the lead is out: b waits
    fleet.fc.send("running")
    assert fleet.credit == {"a": 50, "c": 50, "b": 0}
    # 10 s later a and c have stepped and delivered it all; the updates pay for it.
    fleet.now = 10.0
    for actor in ("a", "c"):
        fleet.status(actor, steps=50)
        fleet.deliver(actor, 50)
    fleet.fc.send("running", updates=50)  # 100 steps paid: 100 more allowed
    assert fleet.credit["b"] > 0
    assert fleet.outstanding() <= LEAD
    # A moment later b has not stepped yet: it is not idle, its credit is not granted again.
    fleet.now = 10.05
    fleet.fc.send("running", updates=50)
    assert fleet.outstanding() <= LEAD


def test_a_grant_the_transport_refused_is_sent_again(monkeypatch):
    fleet = Fleet(monkeypatch, max_statuses_per_s=0.0)
    fleet.refuse.add("a")  # the learner's queue is full when a's first grant goes out
    fleet.status("a")
    fleet.fc.send("running")
    assert "a" not in fleet.credit and fleet.fc.stats().grants_unsent == 1
    fleet.refuse.clear()
    fleet.fc.send("running")  # nothing changed in the ledger: the grant goes out all the same
    assert fleet.credit["a"] == 50


def test_the_learner_away_from_the_broker_judges_no_board_by_its_own_deafness(monkeypatch):
    """A learner cut off from its broker (its node of a cluster killed) hears no status and
    no batch. Timed across that gap, every board looked idle when it came back: the first to
    report was granted what the others still held, and batches on their way were written
    off before they came. Boards that used that credit sent past the budget, and what the
    learner did not wait for was lost with nothing to account for it."""
    fleet = Fleet(monkeypatch, max_statuses_per_s=0.0)  # quiet_s: credit_timeout_s, 5 s
    for actor in ("a", "b"):
        fleet.status(actor)
    fleet.fc.send("running")
    assert fleet.credit == {"a": 50, "b": 50}
    fleet.now = 1.0
    fleet.up = False  # both boards step their credit out while the learner is away
    for t in range(2, 30):
        fleet.now = float(t)
        fleet.fc.send("running", updates=t)
    fleet.now = 30.0
    fleet.up = True
    fleet.fc.republish()  # the learner's on-connect
    # a reports first: it stepped 40 of its 50 and sent 30, which are on their way; b has
    # not reported yet. Neither is idle, nothing is written off.
    fleet.status("a", steps=40, sent=30)
    fleet.fc.send("running")
    assert fleet.outstanding() <= LEAD
    assert fleet.fc.stats().credit_written_off == 0
    # a's 30 arrive and b reports: the run goes on as before the gap.
    fleet.now = 31.0
    fleet.deliver("a", 30)
    fleet.status("b", steps=50, sent=50)
    fleet.deliver("b", 50)
    fleet.fc.send("running", updates=30)
    assert fleet.outstanding() <= LEAD
    assert fleet.fc.stats().credit_written_off == 0
    # What never comes is written off once the boards have been heard for the bound.
    fleet.status("a", steps=50, sent=50)  # 20 more sent; they were lost
    fleet.now = 36.5
    fleet.fc.send("running", updates=30)
    assert fleet.fc.stats().credit_written_off == 20
