"""The safety shield (actor/safety.py): whatever is proposed, a real gymnasium env gets only
actions within the bounds and the rate."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_rl.actor.safety import SAFE_REASONS, Shield
from edge_rl.boards import Safety
from edge_rl.specs import EnvSpec


class Recorder(gym.Wrapper):
    """A real env that keeps every action it was stepped with."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.received: list[np.ndarray] = []

    def step(self, action):
        self.received.append(np.array(action, copy=True))
        return self.env.step(action)


_HOSTILE = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.sampled_from([np.nan, np.inf, -np.inf, 1e38, -1e38, 3e38, -3e38, 0.0]),
)


def _proposals(size: int) -> st.SearchStrategy:
    """What a policy, its exploration or an override might hand the shield."""
    vector = st.lists(_HOSTILE, min_size=size, max_size=size).map(
        lambda v: np.asarray(v, np.float32)
    )
    return st.one_of(
        vector,  # a policy's output: NaN, inf, huge
        st.lists(_HOSTILE, min_size=0, max_size=size + 2),  # an override of any length
        st.sampled_from([None, "left", 7, True, object()]),  # not an action at all
        st.sampled_from(["safe", "reset"]),  # a watchdog's safe action; an env reset
    )


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "Reacher-v5"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_no_action_outside_bounds_or_rate_reaches_the_env(env_id, data):
    env = Recorder(gym.make(env_id))
    spec = EnvSpec.from_gym(env.observation_space, env.action_space)
    size = len(spec.action_low)
    low, high = np.asarray(spec.action_low), np.asarray(spec.action_high)
    span = st.floats(0.05, 1.0)
    a_low = low + (high - low) * data.draw(span) / 3
    a_high = high - (high - low) * data.draw(span) / 3
    delta = data.draw(st.none() | st.floats(0.01, 2.0))
    cfg = Safety(
        action_low=a_low.tolist(),
        action_high=a_high.tolist(),
        max_delta=delta,
        nonfinite=data.draw(st.sampled_from(["hold", "zero"])),
        on_stale=data.draw(st.sampled_from(["hold", "zero", "stop"])),
    )
    shield = Shield(spec, cfg)
    # Alternating extremes, then anything at all.
    extremes = [np.full(size, (-1) ** i * 1e30, np.float32) for i in range(6)]
    proposals = extremes + data.draw(st.lists(_proposals(size), min_size=1, max_size=60))
    # The rate holds from rest (zero, within the bounds) after each reset, then from the
    # action the env received before: worked out here, not read from the shield.
    rest = np.clip(np.zeros(size), np.float32(a_low), np.float32(a_high))
    env.reset(seed=0)
    last, froms = rest, []
    for p in proposals:
        if isinstance(p, str) and p == "reset":
            env.reset()
            shield.reset()
            last = rest
            continue
        if isinstance(p, str) and p == "safe":
            applied, _ = shield.safe("learner_silent")
            if applied is None:  # on_stale stop: the env is not stepped
                continue
        else:
            applied, _ = shield.apply(p)
        froms.append(last)
        _, _, terminated, truncated, _ = env.step(applied)
        last = np.asarray(env.received[-1], np.float64).reshape(-1)
        if terminated or truncated:
            env.reset()
            shield.reset()
            last = rest
    got = np.asarray(env.received, np.float64).reshape(-1, size)
    assert all(a.shape == spec.action_shape for a in env.received)
    assert np.isfinite(got).all()
    assert (got >= np.float32(a_low)).all() and (got <= np.float32(a_high)).all()
    if delta is not None:
        froms = np.asarray(froms, np.float64).reshape(-1, size)
        ulp = np.finfo(np.float32).eps * 4 * np.maximum(1.0, np.abs(froms))
        assert (np.abs(got - froms) <= delta + ulp).all()


def test_each_change_is_counted_by_its_reason():
    spec = EnvSpec(obs_shape=(3,), action_shape=(1,), action_low=(-2.0,), action_high=(2.0,))
    shield = Shield(spec, Safety(action_high=1.0, max_delta=0.5, nonfinite="zero"))
    assert shield.apply(np.float32([0.25]))[1] == ()
    applied, why = shield.apply(np.float32([1.9]))  # above 1.0, and more than 0.5 away
    assert applied.tolist() == [0.75] and why == ("clipped", "rate_limited")
    applied, why = shield.apply(np.float32([np.nan]))  # zero, reached at 0.5 a step
    assert applied.tolist() == [0.25] and why == ("nonfinite", "rate_limited")
    counts = {k: v for k, v in shield.counts.items() if v}
    assert counts == {"clipped": 1, "rate_limited": 2, "nonfinite": 1}


def test_a_safe_action_ramps_to_zero_and_stop_steps_nothing():
    spec = EnvSpec(obs_shape=(3,), action_shape=(1,), action_low=(-2.0,), action_high=(2.0,))
    shield = Shield(spec, Safety(max_delta=0.5, on_stale="zero"))
    for _ in range(4):
        shield.apply(np.float32([2.0]))
    ramp = [shield.safe("broker_lost")[0].tolist() for _ in range(5)]
    assert ramp == [[1.5], [1.0], [0.5], [0.0], [0.0]]
    assert shield.counts["broker_lost"] == 5
    stopping = Shield(spec, Safety(on_stale="stop"))
    assert stopping.safe("estop") == (None, ("estop",))


def test_a_discrete_env_gets_a_valid_index_whatever_is_proposed():
    env = Recorder(gym.make("CartPole-v1"))
    spec = EnvSpec.from_gym(env.observation_space, env.action_space)
    shield = Shield(spec, Safety(nonfinite="hold", on_stale=[1]))
    env.reset(seed=0)
    for p in [np.int64(1), 2, -1, np.float32(np.nan), None, True, np.int64(0), "x", 1.0]:
        if env.step(shield.apply(p)[0])[2]:
            env.reset()
    env.step(shield.safe("learner_silent")[0])
    assert [int(a) for a in env.received] == [1, 1, 1, 1, 1, 1, 0, 0, 0, 1]
    assert shield.counts["nonfinite"] == 7 and shield.counts["learner_silent"] == 1


@pytest.mark.parametrize(
    ("safety", "words"),
    [
        (Safety(max_delta=0.1), "Box"),  # a discrete env has no rate
        (Safety(on_stale=[5]), "index"),
    ],
)
def test_a_discrete_env_refuses_box_settings(safety, words):
    spec = EnvSpec(obs_shape=(4,), num_actions=2)
    with pytest.raises(ValueError, match=words):
        Shield(spec, safety)


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"max_delta": 0}, "positive"),
        ({"on_stale": "brake"}, "on_stale"),
        ({"nonfinite": "stop"}, "nonfinite"),
        ({"action_low": float("nan")}, "finite"),
        ({"stale_after_s": 0}, "stale_after_s"),
    ],
)
def test_bad_safety_settings_are_refused(fields, words):
    with pytest.raises(ValueError, match=words):
        Safety(**fields)


def test_bounds_must_fit_the_env():
    spec = EnvSpec(
        obs_shape=(3,), action_shape=(2,), action_low=(-1.0,) * 2, action_high=(1.0,) * 2
    )
    with pytest.raises(ValueError, match="3 numbers for 2"):
        Shield(spec, Safety(action_low=[0.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="below"):
        Shield(spec, Safety(action_low=0.5, action_high=0.5))


def test_every_safe_reason_is_counted():
    spec = EnvSpec(obs_shape=(4,), num_actions=2)
    shield = Shield(spec, Safety())
    for r in SAFE_REASONS:
        shield.safe(r)
    assert all(shield.counts[r] == 1 for r in SAFE_REASONS)
