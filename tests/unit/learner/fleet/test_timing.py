"""When a silence says something (``Quiet``): credit_timeout_s, at least two stated status
intervals, timed from the learner's last (re)connect at the earliest."""

from __future__ import annotations

import pytest

from edge_rl.learner.fleet.timing import STATE_WAIT_S, Quiet


@pytest.mark.parametrize(
    ("timeout", "stated", "bound"),
    [
        (5.0, 0.0, 5.0),  # each board's own interval: credit_timeout_s
        (5.0, 2.0, 5.0),  # two intervals are shorter: credit_timeout_s
        (5.0, 10.0, 20.0),  # a board reports every 10 s: two of them
    ],
)
def test_the_bound_is_the_timeout_or_two_stated_intervals(timeout, stated, bound):
    quiet = Quiet(timeout)
    quiet.stated = stated
    assert quiet.bound_s() == bound
    assert quiet.state_wait_s() == STATE_WAIT_S + 2 * stated


@pytest.mark.parametrize(
    ("since", "heard_since", "now", "silent"),
    [
        (0.0, 0.0, 4.9, False),
        (0.0, 0.0, 5.0, True),  # the bound reached
        (3.0, 0.0, 7.0, False),  # timed from the last sign of life
        (0.0, 10.0, 12.0, False),  # the learner was away until 10 s: timed from there
        (0.0, 10.0, 15.0, True),
        (20.0, 10.0, 24.0, False),  # heard after the reconnect: from then
    ],
)
def test_silence_is_timed_from_the_later_of_a_sign_of_life_and_the_reconnect(
    since, heard_since, now, silent
):
    quiet = Quiet(5.0)
    quiet.heard_since = heard_since
    assert quiet.silent(since, now) is silent
