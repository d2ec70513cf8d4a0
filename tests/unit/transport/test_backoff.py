"""The reconnect schedule: bounded, jittered, exponential (transport/backoff.py)."""

from __future__ import annotations

import random

import pytest

from edge_rl.transport.backoff import Backoff


def test_envelope_doubles_from_base_up_to_the_cap() -> None:
    b = Backoff(base_s=0.25, cap_s=8.0, jitter=0.5)
    assert [b.envelope(k) for k in range(8)] == [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert b.envelope(10_000) == 8.0  # no overflow far past the cap


def test_every_delay_lies_between_the_jittered_floor_and_the_envelope() -> None:
    b = Backoff(base_s=0.1, cap_s=5.0, jitter=0.5, rng=random.Random(7))
    for k in range(40):
        for _ in range(50):
            d = b.delay(k)
            assert 0.5 * b.envelope(k) <= d <= b.envelope(k)
            assert d <= 5.0


def test_jitter_spreads_the_delays_of_a_fleet() -> None:
    """Boards that lost their node at one instant do not retry at one instant."""
    delays = [Backoff(rng=random.Random(seed)).delay(3) for seed in range(200)]
    envelope = Backoff().envelope(3)
    assert len(set(delays)) == 200
    assert min(delays) < 0.6 * envelope and max(delays) > 0.9 * envelope


def test_no_jitter_is_the_envelope_itself() -> None:
    b = Backoff(base_s=1.0, cap_s=4.0, jitter=0.0)
    assert [b.delay(k) for k in range(4)] == [1.0, 2.0, 4.0, 4.0]


def test_a_seeded_schedule_repeats() -> None:
    first = [Backoff(rng=random.Random(3)).delay(k) for k in range(10)]
    again = [Backoff(rng=random.Random(3)).delay(k) for k in range(10)]
    assert first == again


@pytest.mark.parametrize(
    "kwargs",
    [{"base_s": 0.0}, {"base_s": 2.0, "cap_s": 1.0}, {"jitter": -0.1}, {"jitter": 1.5}],
)
def test_bad_settings_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)


def test_a_negative_attempt_is_refused() -> None:
    with pytest.raises(ValueError):
        Backoff().delay(-1)
