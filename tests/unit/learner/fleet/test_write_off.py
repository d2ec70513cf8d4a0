"""Loss write-off (``WriteOff``): what a board reports dropped, and what the learner dropped
of its data, are lost at once; what it sent and did not arrive, only once its count has stood
still for the quiet bound."""

from __future__ import annotations

import pytest

from edge_rl.learner.fleet.timing import Quiet
from edge_rl.learner.fleet.write_off import WriteOff
from edge_rl.types import ActorStatus


def status(sent: int = 0, dropped: int = 0, oversize: int = 0) -> ActorStatus:
    return ActorStatus(
        "a",
        "running",
        transitions_sent=sent,
        transitions_dropped=dropped,
        transitions_oversize=oversize,
    )


@pytest.mark.parametrize(
    ("reported", "received", "at_learner", "later", "lost", "written_off"),
    [
        (status(), 0, 0, 0.0, 0, {}),
        (status(sent=10, dropped=3, oversize=2), 10, 0, 0.0, 5, {}),  # reported: at once
        (status(sent=10), 4, 0, 1.0, 0, {}),  # 6 in transit, within the bound
        (status(sent=10), 4, 2, 1.0, 2, {}),  # of which the learner dropped 2: at once
        (status(sent=10), 4, 9, 1.0, 6, {}),  # never more than is in transit
        (status(sent=10), 10, 3, 1.0, 0, {}),  # nothing in transit: nothing of it lost
        (status(sent=10), 4, 0, 5.0, 6, {"a": 6}),  # silent for the bound: written off
        (status(sent=10, dropped=1), 4, 2, 5.0, 7, {"a": 6}),  # all of it, not twice
    ],
)
def test_what_will_not_arrive(reported, received, at_learner, later, lost, written_off):
    write_off = WriteOff(Quiet(5.0))
    write_off.lost(reported, received, 0, now=100.0)  # the count as first seen
    assert write_off.lost(reported, received, at_learner, now=100.0 + later) == lost
    assert write_off.written_off == written_off
    assert write_off.total() == sum(written_off.values())


def test_a_count_that_moves_restarts_the_clock():
    write_off = WriteOff(Quiet(5.0))
    assert write_off.lost(status(sent=10), 2, 0, now=0.0) == 0
    assert write_off.lost(status(sent=10), 4, 0, now=4.0) == 0  # it delivered: from 4 s on
    assert write_off.delivered_at("a") == 4.0
    assert write_off.lost(status(sent=10), 4, 0, now=8.0) == 0
    assert write_off.lost(status(sent=10), 4, 0, now=9.0) == 6
    assert write_off.total() == 6


def test_the_learner_away_from_the_broker_writes_nothing_off_for_it():
    quiet = Quiet(5.0)
    write_off = WriteOff(quiet)
    write_off.lost(status(sent=10), 4, 0, now=0.0)
    quiet.heard_since = 20.0  # it reconnected at 20 s
    assert write_off.lost(status(sent=10), 4, 0, now=24.0) == 0
    assert write_off.lost(status(sent=10), 4, 0, now=25.0) == 6
