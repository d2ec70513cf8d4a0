"""The board file's episode rules (actor/episodes.py): a time limit on the monotonic clock
that truncates as gymnasium's TimeLimit does, and success/failure info keys that
terminate; on a clock the test sets, and on a real gymnasium env."""

from __future__ import annotations

import threading
import time

import gymnasium as gym
import numpy as np
import pytest

from edge_rl.actor.episodes import EpisodeRules, ResetHook
from edge_rl.actor.safety import Shield
from edge_rl.actor.watchdog import EStop, Watchdog
from edge_rl.boards import BoardConfig, Episode, Safety, load_board
from edge_rl.specs import EnvSpec
from tests.harness.waits import wait_for


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.mark.parametrize(
    ("elapsed", "env_says", "ends_as"),
    [
        (0.99, (False, False), (False, False)),  # within the limit: the env's word
        (1.0, (False, False), (False, True)),  # at the limit: truncated, not terminated
        (5.0, (False, False), (False, True)),
        (5.0, (True, False), (True, False)),  # the env terminated: that stands, not truncated
        (5.0, (False, True), (False, True)),  # the env truncated itself: no timeout counted
    ],
)
def test_the_time_limit_truncates_like_gymnasium_s_time_limit(elapsed, env_says, ends_as):
    clock = Clock()
    rules = EpisodeRules(Episode(time_limit_s=1.0), clock)
    rules.begin()
    clock.t += elapsed
    assert rules.end({}, *env_says) == ends_as
    assert rules.timed_out == int(ends_as == (False, True) and env_says == (False, False))


def test_the_limit_runs_from_the_last_reset():
    clock = Clock()
    rules = EpisodeRules(Episode(time_limit_s=2.0), clock)
    clock.t += 10.0  # long before the episode began: not counted
    rules.begin()
    clock.t += 1.5
    assert rules.end({}, False, False) == (False, False)
    clock.t += 0.5
    assert rules.end({}, False, False) == (False, True)


def test_without_rules_nothing_changes():
    rules = EpisodeRules(Episode())
    assert not rules.active
    assert rules.end({"is_success": True}, False, False) == (False, False)


@pytest.mark.parametrize(
    ("info", "ends_as", "succeeded", "failed"),
    [
        ({}, (False, False), 0, 0),
        ({"is_success": False, "crashed": 0}, (False, False), 0, 0),
        ({"is_success": True}, (True, False), 1, 0),
        ({"is_success": np.float32(1.0)}, (True, False), 1, 0),
        ({"is_success": np.array([True])}, (True, False), 1, 0),
        ({"crashed": 1}, (True, False), 0, 1),
        ({"is_success": True, "crashed": True}, (True, False), 0, 1),  # both: a failure
        ({"is_success": "yes"}, (False, False), 0, 0),  # not a flag: ignored (logged once)
        ({"is_success": [1, 0]}, (False, False), 0, 0),
        ("not a dict", (False, False), 0, 0),
    ],
)
def test_success_and_failure_keys_terminate_and_are_counted(info, ends_as, succeeded, failed):
    rules = EpisodeRules(Episode(success_key="is_success", failure_key="crashed"))
    assert rules.end(info, False, False) == ends_as
    assert (rules.succeeded, rules.failed) == (succeeded, failed)
    rules.end(info, False, False, count=False)  # a served episode: ends, not counted
    assert (rules.succeeded, rules.failed) == (succeeded, failed)


class Reach(gym.Env):
    """A real gymnasium env: reach x >= 1 (info is_success) without going below -1
    (info fell); never terminates by itself."""

    observation_space = gym.spaces.Box(-10, 10, (1,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = 0.0
        return np.array([self.x], np.float32), {}

    def step(self, action):
        self.x += float(action[0]) * 0.25
        info = {"is_success": self.x >= 1.0, "fell": self.x <= -1.0}
        return np.array([self.x], np.float32), 0.0, False, False, info


def test_a_real_env_s_info_ends_its_episodes():
    env = Reach()
    rules = EpisodeRules(Episode(success_key="is_success", failure_key="fell"))
    ends = []
    for push in (1.0, -1.0, 1.0):
        env.reset()
        rules.begin()
        for n in range(1, 100):
            *_, terminated, truncated, info = env.step(np.array([push], np.float32))
            terminated, truncated = rules.end(info, terminated, truncated)
            if terminated or truncated:
                ends.append((n, terminated, truncated))
                break
    assert ends == [(4, True, False), (4, True, False), (4, True, False)]
    assert (rules.succeeded, rules.failed) == (2, 1)


def test_episode_settings_are_checked(tmp_path):
    for bad in (
        {"time_limit_s": 0},
        {"time_limit_s": -1.0},
        {"success_key": ""},
        {"success_key": "done", "failure_key": "done"},
        {"reset_timeout_s": 0},
        {"reset_hook": "no_colon"},
    ):
        with pytest.raises(ValueError, match="episode"):
            Episode(**bad)
    f = tmp_path / "b.yaml"
    f.write_text("board: b\nepisode:\n  time_limit_s: 20\n  success_key: is_success\n")
    ep = load_board(f).episode
    assert (ep.time_limit_s, ep.success_key, ep.failure_key) == (20.0, "is_success", None)
    f.write_text("board: b\nepisode:\n  time_limt_s: 20\n")
    with pytest.raises(ValueError, match="time_limt_s"):
        load_board(f)
    assert BoardConfig(board="b").episode == Episode()


# --- the reset hook: a real thread around a real gymnasium env ------------------------

CALLS: list[tuple[object, threading.Event]] = []
GATE = threading.Event()


def quick_hook(env, cancel) -> None:
    CALLS.append((env, cancel))


def failing_hook(env, cancel) -> None:
    raise RuntimeError("the gripper did not open")


def gated_hook(env, cancel) -> None:
    """Returns once GATE opens or the board cancels it (bounded: a test never hangs)."""
    CALLS.append((env, cancel))
    deadline = time.monotonic() + 30
    while not GATE.is_set() and not cancel.is_set() and time.monotonic() < deadline:
        GATE.wait(0.005)  # back at once when it opens, to look at cancel too


def _outcome(hook: ResetHook) -> str:
    wait_for(lambda: not hook.running, 10, "the hook's thread to end", 0.005)
    return hook.outcome(time.monotonic())


def test_a_hook_runs_then_the_env_resets():
    CALLS.clear()
    env = Reach()
    hook = ResetHook(Episode(reset_hook=f"{__name__}:quick_hook"))
    hook.start(env, 7, time.monotonic())
    assert _outcome(hook) == "done"
    assert CALLS[0][0] is env and not CALLS[0][1].is_set()
    assert hook.obs.tolist() == [0.0]  # Reach's reset


def test_a_hook_that_raises_is_reset_failed_and_the_env_is_not_reset():
    env = Reach()
    env.x = 5.0
    hook = ResetHook(Episode(reset_hook=f"{__name__}:failing_hook"))
    hook.start(env, None, time.monotonic())
    assert _outcome(hook) == "reset_failed"
    assert "gripper" in hook.error and env.x == 5.0


def test_a_hook_past_its_timeout_is_cancelled_and_never_resets():
    CALLS.clear()
    GATE.clear()
    env = Reach()
    env.x = 5.0
    hook = ResetHook(Episode(reset_hook=f"{__name__}:gated_hook", reset_timeout_s=0.05))
    t0 = time.monotonic()
    hook.start(env, None, t0)
    assert hook.outcome(t0) == ""  # within its time
    assert hook.outcome(t0 + 0.05) == "reset_timeout" and hook.running
    with pytest.raises(RuntimeError):  # never a second hook beside a running one
        hook.start(env, None, t0)
    hook.cancel()
    assert CALLS[-1][1].is_set()  # the hook sees the cancel
    wait_for(lambda: not hook.running, 10, "the cancelled hook's end", 0.005)
    assert env.x == 5.0  # no reset after a cancel
    assert hook.outcome(time.monotonic()) == "reset_failed"


def test_a_reset_hook_must_load():
    with pytest.raises(ValueError, match="cannot load"):
        ResetHook(Episode(reset_hook="tests.nowhere:hook"))
    with pytest.raises(ValueError, match="not callable"):
        ResetHook(Episode(reset_hook=f"{__name__}:CALLS"))


def test_a_latched_reset_failure_holds_as_the_estop_until_released(tmp_path):
    estop = EStop(str(tmp_path / "estop"))
    dog = Watchdog(1.0, estop, now=0.0)
    dog.latch("reset_timeout")
    assert (tmp_path / "estop").exists()
    for t in (0.1, 100.0):
        dog.heard(t)  # the learner speaks: no release
        assert dog.reason(t, training=True, has_policy=True, connected=True) == "reset_timeout"
    (tmp_path / "estop").unlink()  # released on the board
    assert dog.reason(100.0, training=True, has_policy=True, connected=True) == ""
    estop.engage()  # a later stop is the e-stop's own
    assert dog.reason(100.0, training=True, has_policy=True, connected=True) == "estop"


def test_the_hold_before_a_reset_is_the_safe_action_uncounted():
    spec = EnvSpec.from_gym(Reach.observation_space, Reach.action_space)
    shield = Shield(spec, Safety(on_stale="zero", max_delta=0.5))
    shield.apply(np.array([0.5], np.float32))
    action, why = shield.safe(None)
    assert action.tolist() == [0.0] and why == ()
    assert sum(shield.counts.values()) == 0


def test_the_realtime_mujoco_example_s_hook_settles_then_the_board_resets():
    """examples/realtime_mujoco.py's ``settle`` on a real MuJoCo Hopper: it runs the world
    under the held action for SETTLE_S of wall time; cancelled, it ends at once."""
    from examples import realtime_mujoco as rt

    env = rt.hopper()
    env.reset(seed=0)
    env.hold(np.zeros(3, np.float32))
    hook = ResetHook(Episode(reset_hook="examples.realtime_mujoco:settle", reset_timeout_s=30))
    sim = env.unwrapped.data
    t0 = time.monotonic()
    hook.start(env, 1, t0)
    wait_for(lambda: sim.time > 0.1, 10, "the settling world to move on")
    assert _outcome(hook) == "done" and time.monotonic() - t0 >= rt.SETTLE_S
    assert hook.obs.shape == (11,) and sim.time == 0.0  # env.reset() after the hook
    assert env.held is None  # the reset let go of the held action
    slow = ResetHook(Episode(reset_hook="examples.realtime_mujoco:settle", reset_timeout_s=0.05))
    slow.start(env, None, time.monotonic())
    wait_for(lambda: sim.time > 0.0, 10, "the hook under way")
    slow.cancel()
    wait_for(lambda: not slow.running, 5, "the cancelled hook's end", 0.005)
    assert sim.time > 0.0  # cancelled: the board's reset never came
    env.close()
