"""The credit ledger: grants only grow, never exceed what is allowed, and follow restarts."""

from __future__ import annotations

import numpy as np
import pytest

from edge_rl.learner.fleet.credit import CreditLedger


def test_first_grant_shares_what_is_allowed():
    ledger = CreditLedger()
    assert ledger.grant(1000, 0, {}, ["b", "a", "c"]) == {"a": 334, "b": 333, "c": 333}


def test_grants_never_shrink_and_never_exceed_allowed():
    ledger = CreditLedger()
    ledger.grant(100, 0, {}, ["a", "b"])  # 50 each
    # "a" delivered 50, "b" nothing yet; nothing more is allowed: nobody loses credit.
    assert ledger.grant(100, 50, {"a": 50}, ["a", "b"]) == {"a": 50, "b": 50}
    # more allowed: only what is neither received nor granted is shared out
    assert ledger.grant(160, 50, {"a": 50}, ["a", "b"]) == {"a": 80, "b": 80}


def test_a_restarted_actor_counts_from_zero_again():
    ledger = CreditLedger()
    ledger.grant(1000, 0, {}, ["a"])
    ledger.grant(1000, 900, {"a": 900}, ["a"])
    credits = ledger.grant(1000, 900, {"a": 0}, ["a"])  # new session: its counter is 0
    assert credits["a"] == 100  # only what is left of the budget, from its new zero


@pytest.mark.parametrize("seed", range(5))
def test_random_schedules_stay_within_budget(seed):
    """Simulated fleets: actors use all their credit at random speeds; total <= allowed."""
    rng = np.random.default_rng(seed)
    ledger, actors = CreditLedger(), ["a", "b", "c"]
    produced = dict.fromkeys(actors, 0)
    delivered = dict.fromkeys(actors, 0)
    allowed = 0
    for _ in range(200):
        allowed = min(allowed + int(rng.integers(0, 40)), 3000)
        credits = ledger.grant(allowed, sum(delivered.values()), delivered, actors)
        for a in actors:
            assert credits[a] >= delivered[a]
            produced[a] = max(produced[a], min(credits[a], produced[a] + int(rng.integers(0, 30))))
            delivered[a] = min(produced[a], delivered[a] + int(rng.integers(0, 30)))
        assert sum(produced.values()) <= allowed


def test_a_trickle_of_credit_reaches_every_actor():
    """A slow learner frees fewer steps per grant than there are actors: each actor must
    still get its turn (the remainder once always went to the first names)."""
    ledger, actors = CreditLedger(), ["sim-00", "sim-01", "sim-02", "sim-03"]
    delivered = dict.fromkeys(actors, 0)
    allowed = 2000
    for tick in range(3000):
        allowed += 1 + tick % 2  # 1-2 steps per grant
        credits = ledger.grant(allowed, sum(delivered.values()), delivered, actors)
        delivered = dict(credits)  # every actor uses all it has at once
    steps = sorted(delivered.values())
    assert sum(steps) == allowed and steps[-1] - steps[0] <= 1, delivered


def test_lost_credit_goes_back_to_the_pool():
    """a0 was granted 50, delivered 40 and lost 10 on the way: with the loss reported, its
    10 are free again; without it, nothing more can be granted (the old stall)."""
    ledger = CreditLedger()
    assert ledger.grant(100, 0, {}, ["a0", "a1"]) == {"a0": 50, "a1": 50}
    by_actor = {"a0": 40, "a1": 50}
    assert ledger.grant(100, 90, by_actor, ["a0", "a1"]) == {"a0": 50, "a1": 50}
    assert ledger.grant(100, 90, by_actor, ["a0", "a1"], lost={"a0": 10}) == {"a0": 55, "a1": 55}
    # Never more in flight than allowed: what is granted and not received or lost.
    granted = ledger.granted
    assert sum(granted[a] - by_actor[a] for a in granted) - 10 == 100 - 90


def test_an_actor_ahead_of_a_resumed_learner_is_granted_past_its_own_steps():
    """A learner resumed from a checkpoint has received 375 of a0's 962 steps (the rest went
    to the killed learner after the checkpoint, and are written off as lost): its grants
    start from a0's own step count, else every grant below 962 frees no step (the stall)."""
    ledger = CreditLedger()
    by_actor, stepped = {"a0": 375}, {"a0": 962}
    first = ledger.grant(900, 375, by_actor, ["a0"], stepped=stepped)
    assert first == {"a0": 962}  # its 587 outstanding fill what is allowed, until lost
    again = ledger.grant(900, 375, by_actor, ["a0"], lost={"a0": 587}, stepped=stepped)
    assert again == {"a0": 962 + 900 - 375}  # past its own steps: it steps again


def test_a_trickle_goes_out_in_slices_of_min_share():
    """1-2 steps freed per grant among 4 actors: with min_share 16, each grant that changes
    gives one actor 16 steps (a batch of 16 transitions), in turn, and nothing is lost."""
    ledger, actors = CreditLedger(), ["sim-00", "sim-01", "sim-02", "sim-03"]
    delivered = ledger.grant(2000, 0, {}, actors, min_share=16)  # plenty: even shares
    assert set(delivered.values()) == {500}
    allowed, slices = 2000, []
    for tick in range(3000):
        allowed += 1 + tick % 2
        credits = ledger.grant(allowed, sum(delivered.values()), delivered, actors, min_share=16)
        slices += [credits[a] - delivered[a] for a in actors if credits[a] != delivered[a]]
        delivered = dict(credits)  # every actor uses all it has at once
    assert set(slices) == {16}
    steps = sorted(delivered.values())
    assert allowed - 16 < sum(steps) <= allowed  # what waits is less than one slice
    assert steps[-1] - steps[0] <= 16, delivered
    # Once the whole budget is allowed, min_share 1 grants the rest.
    credits = ledger.grant(allowed, sum(steps), delivered, actors, min_share=1)
    assert sum(credits.values()) == allowed


def test_min_share_does_not_change_plentiful_grants():
    for min_share in (1, 64):
        assert CreditLedger().grant(1000, 0, {}, ["b", "a", "c"], min_share=min_share) == {
            "a": 334,
            "b": 333,
            "c": 333,
        }
