"""The board's intervention source (actor/teleop.py): what it may override, what it may
not, and the scripted teacher's schedule, with a real int8 model in LiteRT."""

from __future__ import annotations

import numpy as np
import pytest

from edge_rl.actor.teleop import Teleop, scripted_teacher
from edge_rl.specs import EnvSpec
from tests.harness.cartpole_policies import MODELS

CARTPOLE = EnvSpec(obs_shape=(4,), num_actions=2)
PENDULUM = EnvSpec((3,), 0, (1,), (-2.0,), (2.0,))
OBS = np.zeros(4, np.float32)


@pytest.mark.parametrize(
    ("spec", "override", "taken"),
    [
        (CARTPOLE, None, None),  # the policy acts
        (CARTPOLE, 1, np.int64(1)),
        (CARTPOLE, np.int64(0), np.int64(0)),
        (CARTPOLE, 2, None),  # not an action of CartPole
        (CARTPOLE, 0.5, None),
        (PENDULUM, np.array([1.5]), np.array([1.5], np.float32)),
        (PENDULUM, [-2.0], np.array([-2.0], np.float32)),
        (PENDULUM, np.array([2.5]), None),  # outside the bounds
        (PENDULUM, np.array([np.nan]), None),
        (PENDULUM, np.array([1.0, 1.0]), None),  # the wrong shape
        (PENDULUM, "left", None),
    ],
)
def test_an_override_is_taken_only_if_the_env_could_take_it(spec, override, taken):
    teleop = Teleop(lambda obs, action: override, spec)
    policy_action = np.int64(0) if spec.discrete else np.array([0.25], np.float32)
    action, acted = teleop(OBS, policy_action)
    if taken is None:
        assert action is policy_action and not acted
        assert teleop.refused == (override is not None) and teleop.interventions == 0
    else:
        np.testing.assert_array_equal(action, taken)
        assert acted and teleop.interventions == 1 and teleop.refused == 0
        assert np.asarray(action).dtype == spec.action_dtype


def test_a_source_that_raises_leaves_the_policy_acting():
    def broken(obs, action):
        raise OSError("device unplugged")

    teleop = Teleop(broken, CARTPOLE)
    assert teleop(OBS, np.int64(1)) == (np.int64(1), False)
    assert teleop.refused == 1


def test_the_teacher_takes_over_on_its_schedule_with_its_model():
    teacher = scripted_teacher(
        CARTPOLE, str(MODELS["good"]), every_steps=10, for_steps=3, stop_after=25
    )
    teleop = Teleop(teacher, CARTPOLE)
    pole_right = np.array([0.0, 0.0, 0.1, 0.5], np.float32)  # the controller pushes right
    acted = []
    for _ in range(40):
        action, took = teleop(pole_right, np.int64(0))
        acted.append(took)
        assert action == (1 if took else 0)
    # steps 0-2, 10-12, 20-22 of every 10; none from step 25 on
    assert [i for i, a in enumerate(acted) if a] == [0, 1, 2, 10, 11, 12, 20, 21, 22]
    assert teleop.interventions == 9


def test_a_bad_teleop_name_is_a_clear_error():
    with pytest.raises(ValueError, match="module:callable"):
        Teleop.load("no_colon", CARTPOLE)
    with pytest.raises(ValueError, match="cannot start teleop"):
        Teleop.load("edge_rl.actor.teleop:nothing_here", CARTPOLE)
    with pytest.raises(ValueError, match="cannot start teleop"):
        Teleop.load("edge_rl.actor.teleop:scripted_teacher", CARTPOLE, {"model": "/nope"})
