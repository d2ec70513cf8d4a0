"""Every figure a board reports is bounded before it is stored, summed or shown
(learner/fleet/figures.py), and every JSON the run writes is strict (telemetry/logs.py)."""

from __future__ import annotations

import json
import math

import pytest

from edge_rl.boards import Power
from edge_rl.config import FleetConfig, RunConfig
from edge_rl.learner.fleet.control import FleetControl
from edge_rl.learner.fleet.credit import Grants
from edge_rl.learner.fleet.figures import (
    MAX_SECONDS,
    MAX_STEPS_PER_S,
    UNKNOWN_EPISODE_STEPS,
    StatusLimits,
    bound_status,
    limits_for_env,
)
from edge_rl.telemetry import energy
from edge_rl.telemetry.logs import strict_json, write_json_atomic
from edge_rl.types import BREAKDOWN_KEYS, ActorStatus
from edge_rl.wire.messages import encode_status
from edge_rl.wire.topics import Topics

PENDULUM_STEP = math.pi**2 + 0.1 * 8**2 + 0.001 * 2**2


def refuse(name: str) -> float:
    raise ValueError(f"{name} is not strict JSON")


def strict_load(text: str):
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    ("env_id", "low", "high"),
    [
        ("CartPole-v1", 0.0, 500.0),  # reward 1 per step, 500 steps
        ("Pendulum-v1", -PENDULUM_STEP * 200, 0.0),
        ("no.such.module:make", -1e6 * UNKNOWN_EPISODE_STEPS, 1e6 * UNKNOWN_EPISODE_STEPS),
    ],
)
def test_the_return_range_is_the_per_step_range_times_the_episode_limit(env_id, low, high):
    limits = limits_for_env(env_id)
    assert (limits.return_low, limits.return_high) == (pytest.approx(low), pytest.approx(high))


SPOOFED = ActorStatus(
    "pi",
    "running",
    env_steps=100,
    episodes=10**15,
    transitions_sent=90,
    batches_sent=10**15,
    env_steps_per_s=1e308,
    recent_return=1e300,
    time_unix=1e308,
    breakdown={k: 1e308 for k in BREAKDOWN_KEYS},
)


def test_a_spoofed_status_is_clamped_to_what_is_possible_field_by_field():
    bounded, changed = bound_status(SPOOFED, limits_for_env("CartPole-v1"))
    assert changed == (
        "batches_sent",
        "breakdown",
        "env_steps_per_s",
        "episodes",
        "recent_return",
        "time_unix",
    )
    assert bounded.recent_return == 500.0 and bounded.episodes == 100
    assert bounded.batches_sent == 90 and bounded.env_steps_per_s == MAX_STEPS_PER_S
    assert max(bounded.breakdown.values()) == MAX_SECONDS
    low, _ = bound_status(
        ActorStatus("pi", "running", recent_return=-1e300), limits_for_env("CartPole-v1")
    )
    assert low.recent_return == 0.0


def test_an_honest_status_is_kept_as_it_is():
    honest = ActorStatus(
        "pi", "running", env_steps=100, episodes=4, recent_return=-812.5, time_unix=1.7e9
    )
    assert bound_status(honest, limits_for_env("Pendulum-v1")) == (honest, ())


def test_summed_breakdowns_stay_finite_once_clamped():
    """1e308 s in a board's buckets: their sum overflowed to inf, which a JSON writer wrote
    as ``Infinity``; clamped, the fleet's energy is a (large) finite number."""
    power = Power(idle_w=2.0, busy_w=6.0, source="test")
    raw = energy.fleet_energy({"pi": SPOOFED.breakdown}, {"pi": "b"}, {"b": power})
    assert raw.kwh is not None and not math.isfinite(raw.kwh)  # what the clamp prevents
    bounded, _ = bound_status(SPOOFED, limits_for_env("CartPole-v1"))
    kept = energy.fleet_energy({"pi": bounded.breakdown}, {"pi": "b"}, {"b": power})
    assert kept.kwh is not None and math.isfinite(kept.kwh)


def test_fleet_control_records_the_bounded_status_and_counts_it():
    topics, rid = Topics("edge-rl", "figures"), "r1"
    cfg = RunConfig(env_id="CartPole-v1", run="figures", fleet=FleetConfig(actors=0))
    grants = Grants()
    grants.set("pi", 7, 100)
    fleet = FleetControl(
        cfg.fleet,
        cfg.pacing,
        topics,
        lambda *_a, **_k: True,
        lambda: (0, {}),
        rid,
        grants=grants,
        limits=limits_for_env("CartPole-v1"),
    )
    spoofed = ActorStatus("pi", "running", run_id=rid, session=7, env_steps=50, recent_return=1e308)
    fleet.on_status(topics.status("pi"), encode_status(spoofed))
    assert fleet.actors()["pi"].recent_return == 500.0
    assert fleet.stats().status_clamped == 1


def test_strict_json_writes_no_nan_or_infinity(tmp_path):
    data = {"energy": {"kwh": math.inf}, "x": [math.nan, -math.inf, 1.5], "n": 3}
    assert strict_load(strict_json(data)) == {
        "energy": {"kwh": None},
        "x": [None, None, 1.5],
        "n": 3,
    }
    write_json_atomic(tmp_path / "s.json", data)
    assert strict_load((tmp_path / "s.json").read_text())["x"] == [None, None, 1.5]
    with pytest.raises(ValueError):  # what the writer refuses if the sanitiser is bypassed
        json.dumps({"kwh": math.inf}, allow_nan=False)


def test_limits_refuse_an_infinite_or_inverted_range():
    with pytest.raises(ValueError):
        StatusLimits(0.0, math.inf)
    with pytest.raises(ValueError):
        StatusLimits(1.0, 0.0)
