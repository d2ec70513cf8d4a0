"""Idleness (``IdleWatch``): a board that holds credit and neither steps nor delivers for the
quiet bound is idle; the clock starts when it comes to hold credit; what idle boards hold is
counted lost (free for the others) and the lead's overcommit is counted once per spell."""

from __future__ import annotations

import pytest

from edge_rl.learner.fleet.idle import IdleWatch
from edge_rl.learner.fleet.timing import Quiet


@pytest.mark.parametrize(
    ("rounds", "idle"),
    [
        # (now, env steps, holds credit, delivered at) per round; idle after the last?
        ([(0.0, 0, True, 0.0), (5.0, 0, True, 0.0)], True),
        ([(0.0, 0, True, 0.0), (4.9, 0, True, 0.0)], False),  # within the bound
        ([(0.0, 0, True, 0.0), (3.0, 5, True, 0.0), (7.0, 5, True, 0.0)], False),  # stepped
        ([(0.0, 0, True, 0.0), (6.0, 0, True, 3.0)], False),  # delivered at 3 s
        ([(0.0, 0, False, 0.0), (9.0, 0, False, 0.0)], False),  # holds nothing
        # Waited 9 s for its first grant: its clock starts at the last round it held none.
        (
            [(0.0, 0, False, 0.0), (8.9, 0, False, 0.0), (9.0, 0, True, 0.0), (13.8, 0, True, 0.0)],
            False,
        ),
        (
            [(0.0, 0, False, 0.0), (8.9, 0, False, 0.0), (9.0, 0, True, 0.0), (14.0, 0, True, 0.0)],
            True,
        ),
    ],
)
def test_idle_holds_credit_and_neither_steps_nor_delivers(rounds, idle):
    watch = IdleWatch(Quiet(5.0))
    for now, steps, holds, delivered_at in rounds:
        got = watch.idle("a", steps, holds, delivered_at, now)
    assert got is idle


def test_what_idle_boards_hold_is_lost_and_each_spell_counts_once():
    watch = IdleWatch(Quiet(5.0))
    lost = watch.reclaim({"a", "b"}, {"a": 40, "b": 10}, {"a": 5, "b": 10, "c": 3})
    assert lost == {"a": 40, "b": 10, "c": 3}  # b's held was lost already: nothing more
    assert watch.reclaimed() == 35
    watch.reclaim({"a"}, {"a": 50}, {"a": 5})  # a's spell goes on: its most counts
    assert watch.reclaimed() == 45
    watch.reclaim(set(), {}, {"a": 0})  # a moved again: the spell ends, counted once
    watch.reclaim(set(), {}, {"a": 0})
    assert watch.reclaimed() == 45
    watch.reclaim({"a"}, {"a": 8}, {"a": 0})  # a second spell adds to it
    assert watch.reclaimed() == 53
