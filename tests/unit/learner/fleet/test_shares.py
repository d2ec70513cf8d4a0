"""Shares: the fleet's lead from the updates done and the budget, the least share, and no
actor holding more than half the lead or twice an even share."""

from __future__ import annotations

import pytest

from edge_rl.config import Pacing
from edge_rl.learner.fleet.shares import Shares, held_at_most

PACING = Pacing(
    total_env_steps=10_000,
    learning_starts=100,
    replay_ratio=0.5,
    max_lag_transitions=1_000,
    credit_timeout_s=5.0,
)


@pytest.mark.parametrize(
    ("updates", "allowed"),
    [
        (0, 1_100),  # learning_starts and the lead
        (50, 1_200),  # 50 updates at 0.5 a transition paid for 100
        (51, 1_202),  # rounded up: the fewest transitions that pay for them
        (10**6, 10_000),  # never past the budget
    ],
)
def test_allowed_is_what_the_updates_paid_for_and_the_lead(updates, allowed):
    assert Shares(PACING, min_grant=32).allowed(updates) == allowed


@pytest.mark.parametrize(
    ("min_grant", "allowed", "online", "share"),
    [
        (32, 1_100, 1, 32),
        (32, 1_100, 20, 25),  # at most half the lead per actor: 1,000 // 40
        (32, 1_100, 5_000, 1),
        (32, 10_000, 1, 1),  # the budget is allowed: the last steps must be granted
    ],
)
def test_the_least_share(min_grant, allowed, online, share):
    assert Shares(PACING, min_grant).min_share(allowed, online) == share


@pytest.mark.parametrize(
    ("lead", "online", "min_share", "most"),
    [
        (100, 1, 1, 50),  # half the lead
        (100, 2, 1, 50),
        (100_000, 1_000, 8, 200),  # twice an even share
        (100_000, 1_000, 500, 500),  # ... at least the least share
        (1, 1, 1, 1),  # at least 1
    ],
)
def test_held_at_most(lead, online, min_share, most):
    assert held_at_most(lead, online, min_share) == most


def test_grant_shares_the_lead_and_keeps_what_was_granted():
    shares = Shares(PACING, min_grant=1)
    first = shares.grant(0, 0, {}, ["a", "b"], {}, (), {})
    assert first == {"a": 550, "b": 550}  # 1,100 allowed, half each (half the lead each)
    assert shares.held("a", 500) == 50
    # a delivered 500 and 500 updates are done (2,100 allowed); b is idle (frozen): it
    # keeps its 550, and a holds at most half the lead of 1,600.
    again = shares.grant(500, 500, {"a": 500}, ["a", "b"], {}, {"b"}, {})
    assert again == {"a": 500 + 800, "b": 550}
