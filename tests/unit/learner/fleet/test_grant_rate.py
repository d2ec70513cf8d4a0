"""Credit grants over a large fleet: at most ``fleet.max_grants_per_s``, new sessions first,
and every actor's grant still goes out, oldest first, with all its credit."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from edge_rl.config import FleetConfig, RunConfig
from edge_rl.learner.fleet.control import FleetControl
from edge_rl.learner.fleet.publisher import RateBound
from edge_rl.learner.fleet.shares import held_at_most
from edge_rl.types import ActorStatus
from edge_rl.wire.messages import decode_credit, encode_status
from edge_rl.wire.topics import Topics
from tests.harness.waits import wait_for

RUN_ID = "r-start"
TOPICS = Topics("edge-rl", "rate")


def test_a_rate_bound_lets_through_its_rate_and_half_a_second_at_once():
    now = [0.0]
    bound = RateBound(10.0, clock=lambda: now[0])
    assert bound.take(100) == 5  # the burst: half a second's worth
    assert bound.take(100) == 0
    now[0] = 1.0
    assert bound.take(3) == 3 and bound.take(100) == 2  # 10 tokens, capped at the burst
    assert RateBound(0.0).take(12345) == 12345  # 0: no bound
    with pytest.raises(ValueError):
        FleetConfig(max_grants_per_s=-1)


def fleet_of(n: int, rate: float) -> tuple[FleetControl, Counter]:
    sent: Counter[str] = Counter()

    def publish(topic: str, payload: bytes, **_) -> bool:
        if topic.endswith("/credit"):
            sent[decode_credit(payload).session] += 1
        return True

    cfg = RunConfig(
        env_id="CartPole-v1",
        run="rate",
        total_env_steps=10**9,
        learning_starts=0,
        max_lag_transitions=100 * n,
        fleet=FleetConfig(max_grants_per_s=rate),
    )
    fleet = FleetControl(cfg.fleet, cfg.pacing, TOPICS, publish, lambda: (0, {}), RUN_ID)
    for i in range(n):
        status = ActorStatus(f"b-{i:03d}", "running", run_id=RUN_ID, session=1000 + i)
        fleet.on_status(TOPICS.status(f"b-{i:03d}"), encode_status(status))
    return fleet, sent


def test_new_sessions_get_their_grant_at_once_and_more_credit_waits_its_turn():
    fleet, sent = fleet_of(300, rate=100.0)
    fleet.send("running", updates=0)
    assert len(sent) == 300 and set(sent.values()) == {1}  # a new session is never held back
    t0 = time.monotonic()
    for updates in range(1, 6):  # five rounds, each raising every actor's credit
        fleet.send("running", updates=updates * 1000)
    refilled = (time.monotonic() - t0) * 100  # what the bucket refilled meanwhile
    more = sum(sent.values()) - 300
    assert 0 < more <= 50 + refilled + 1  # the burst (half a second of 100/s) and the refill
    assert more < 300  # however slow this machine: not every actor's

    # Oldest first: in time every actor gets its larger grant.
    def resent() -> bool:  # each round, the bucket's refill goes out
        fleet.send("running", updates=10_000)
        return min(sent.values()) >= 2

    wait_for(resent, 20, "every actor's larger grant")


def test_without_a_bound_every_changed_grant_goes_every_round():
    fleet, sent = fleet_of(50, rate=0.0)
    for updates in range(4):
        fleet.send("running", updates=updates * 1000)
    assert set(sent.values()) == {4}


def test_no_actor_of_a_large_fleet_holds_more_than_twice_an_even_share(monkeypatch):
    """990 of 1,000 boards hold their grants and do not step (a loaded host): what they hold
    is granted again to the 10 that work, but none of those holds more than twice an even
    share; with half the lead each, ten boards would take the whole lead."""
    import edge_rl.learner.fleet.control as fc

    now = [1000.0]
    monkeypatch.setattr(fc.time, "monotonic", lambda: now[0])
    credit: dict[str, int] = {}
    received: dict[str, int] = {}

    def publish(topic: str, payload: bytes, **_) -> bool:
        if topic.endswith("/credit"):
            credit[TOPICS.actor_of(topic)] = decode_credit(payload).credit
        return True

    cfg = RunConfig(
        env_id="CartPole-v1",
        run="rate",
        total_env_steps=10**9,
        learning_starts=0,
        max_lag_transitions=100_000,  # 100 a board
        credit_timeout_s=5.0,
        fleet=FleetConfig(max_grants_per_s=0.0, min_grant=8),
    )
    got = lambda: (sum(received.values()), dict(received))  # noqa: E731
    fleet = FleetControl(cfg.fleet, cfg.pacing, TOPICS, publish, got, RUN_ID)
    ids = [f"b-{i:04d}" for i in range(1000)]

    def report(actor: str, steps: int) -> None:
        status = ActorStatus(
            actor,
            "running",
            run_id=RUN_ID,
            session=ids.index(actor) + 1,
            env_steps=steps,
            transitions_sent=steps,
        )
        fleet.on_status(TOPICS.status(actor), encode_status(status))

    for a in ids:
        report(a, 0)
    fleet.send("running", updates=0)
    assert set(credit.values()) == {100}  # an even share each
    workers = ids[:10]
    for t in range(1, 30):  # the ten step and deliver all they hold; the rest are idle
        now[0] = 1000.0 + t
        for a in workers:
            received[a] = credit[a]
            report(a, credit[a])
        fleet.send("running", updates=0)
        assert all(credit[a] - received[a] <= 200 for a in workers)
    assert sum(received.values()) > 10 * 100  # the idle boards' credit went to the workers
    assert held_at_most(1000, 2, 1) == 500  # two boards: half the lead each, as before
    assert held_at_most(100_000, 1000, 32) == 200  # a thousand: twice an even share
    assert held_at_most(100, 1000, 32) == 32  # at least the slice, at most half the lead
    assert held_at_most(10, 1000, 32) == 5
