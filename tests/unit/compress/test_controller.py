"""Reward-aware controller: scripted return sequences in, decisions and targets out."""

from __future__ import annotations

import dataclasses

import pytest

from edge_rl.compress.controller import (
    Action,
    ControllerConfig,
    RewardAwareController,
    RewardAwareSchedule,
)

R, H, L = Action.RAISE, Action.HOLD, Action.LOWER

# window 1 (one decision per return), tolerance 5 %, steps of 0.1 up and 0.05 down.
BASE = dict(window=1, tolerance=0.05, step_up=0.1, step_down=0.05, max_sparsity=0.9)

CASES = [  # (name, config overrides, returns, actions, targets after each)
    ("rising", {}, [10, 20, 30, 40], [H, R, R, R], [0.0, 0.1, 0.2, 0.3]),
    ("flat within tolerance", {}, [100, 98, 99, 96], [H, R, R, R], [0.0, 0.1, 0.2, 0.3]),
    ("a drop stops the rise", {}, [100, 100, 80], [H, R, H], [0.0, 0.1, 0.1]),
    (
        "dropping further steps back, twice",
        {},
        [100, 100, 100, 80, 70, 60],
        [H, R, R, H, L, L],
        [0.0, 0.1, 0.2, 0.2, 0.15, 0.1],
    ),
    (
        "a drop that is recovering is not 'further'",
        {},
        [100, 100, 80, 90, 85],
        [H, R, H, H, L],
        [0.0, 0.1, 0.1, 0.1, 0.05],
    ),
    (
        "recovery resumes the rise",
        {},
        [100, 100, 100, 80, 70, 99, 120],
        [H, R, R, H, L, R, R],
        [0.0, 0.1, 0.2, 0.2, 0.15, 0.25, 0.35],
    ),
    (
        "best, not the previous window: a slow slide is caught",
        {},
        [100, 97, 94, 91, 88],  # each -3 % of its predecessor, -6 % of the best at 94
        [H, R, H, L, L],
        [0.0, 0.1, 0.1, 0.05, 0.0],
    ),
    (
        "clamped at max and min",
        {"initial_sparsity": 0.85, "min_sparsity": 0.82},
        [10, 20, 30, 0, -10, -20],
        [H, R, R, H, L, L],
        [0.85, 0.9, 0.9, 0.9, 0.85, 0.82],
    ),
    (
        "negative returns: the scale is |best|",
        {},
        [-1000, -1040, -900, -1000],  # gaps 0.04, -0.10, 0.11
        [H, R, R, H],
        [0.0, 0.1, 0.2, 0.2],
    ),
    ("min_scale floors the scale near zero", {}, [0.1, 0.08], [H, R], [0.0, 0.1]),
    ("without the floor the same dip drops", {"min_scale": 0.1}, [0.1, 0.08], [H, H], [0, 0]),
    (
        "step_down 0 never steps back",
        {"step_down": 0.0},
        [1, 1, 0.5, 0.2],
        [H, R, H, L],
        [0, 0.1, 0.1, 0.1],
    ),
]


@pytest.mark.parametrize(
    ("overrides", "returns", "actions", "targets"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_scripted_returns(overrides: dict, returns: list, actions: list, targets: list) -> None:
    controller = RewardAwareController(ControllerConfig(**{**BASE, **overrides}))
    decisions = [controller.observe(r) for r in returns]
    assert [d.action for d in decisions] == actions
    assert [d.target_sparsity for d in decisions] == pytest.approx(targets)
    assert controller.target_sparsity == pytest.approx(targets[-1])


def test_one_decision_per_window_on_its_mean() -> None:
    controller = RewardAwareController(ControllerConfig(**{**BASE, "window": 3}))
    out = [controller.observe(r) for r in [90, 100, 110, 0, 200, 100, 50, 60, 70]]
    assert out[0] is None and out[1] is None and out[3] is None and out[4] is None
    assert (out[2].action, out[2].window_mean) == (H, 100.0)
    assert (out[5].action, out[5].window_mean) == (R, 100.0)
    assert (out[8].action, out[8].window_mean, out[8].gap) == (H, 60.0, pytest.approx(0.4))


def test_non_finite_returns_are_rejected() -> None:
    controller = RewardAwareController(ControllerConfig())
    with pytest.raises(ValueError, match="finite"):
        controller.observe(float("nan"))


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("initial_sparsity", 0.95, "min_sparsity <= initial_sparsity <= max_sparsity"),
        ("min_sparsity", 0.1, "min_sparsity <= initial_sparsity"),
        ("max_sparsity", 1.0, "max_sparsity < 1"),
        ("step_up", 0.0, "step_up must be in"),
        ("step_down", -0.1, "step_down must be in"),
        ("window", 0, "window must be >= 1"),
        ("tolerance", -0.01, "tolerance must be >= 0"),
        ("min_scale", 0.0, "min_scale must be > 0"),
    ],
)
def test_config_rejects_bad_values(field: str, value: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ControllerConfig(**{field: value})


def test_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ControllerConfig().window = 3  # type: ignore[misc]


def test_schedule_prunes_from_begin_step_to_the_controller_target() -> None:
    controller = RewardAwareController(ControllerConfig(**BASE))
    schedule = RewardAwareSchedule(controller, begin_step=1000, frequency=500)
    assert [schedule(t).should_prune for t in (0, 999, 1000, 1250, 1500, 3000)] == [
        False,
        False,
        True,
        False,
        True,
        True,
    ]
    for r in (10, 20):
        controller.observe(r)
    assert schedule(1500).target_sparsity == pytest.approx(0.1)
    with pytest.raises(ValueError, match="frequency must be >= 1"):
        RewardAwareSchedule(controller, begin_step=0, frequency=0)
