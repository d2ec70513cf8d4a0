"""A MuJoCo env that runs in wall-clock time: a stand-in for a robot (docs/robots.md).

    edge-rl actor --board rpi4-robot --env examples.realtime_mujoco:hopper ...

A robot does not wait for its controller: the world moves on while the board thinks. Each
``step(action)`` here advances the simulation by the wall time since the previous step
(whole control periods of ``env.dt``, at least one), holding ``action`` all along, as a
motor holds its last command; the rewards of those periods add up. A board that keeps its
``control_hz`` at the env's own rate advances it one period a step; a late board sees
the world jump. ``lag_steps`` counts the periods that passed with no new action.

Between episodes a robot is put back at its start, by a person or a script. ``settle``
is a reset hook for the board file's ``episode:`` (docs/robots.md, *The reset hook*)::

    episode:
      time_limit_s: 10
      reset_hook: examples.realtime_mujoco:settle
      reset_timeout_s: 5

It lets the world run on, holding the safe action the board gave through ``hold``, for
``SETTLE_S`` of wall time before the board's ``env.reset()``, and returns early when the
board cancels it.

The env plug-in contract (what a ``module:callable`` env provides) is in docs/robots.md.
"""

from __future__ import annotations

import threading
import time

import gymnasium as gym
import numpy as np

SETTLE_S = 0.5  # wall time a reset hook lets the robot come to rest


class RealTime(gym.Wrapper):
    """``env`` stepped by the wall clock: one ``env.dt`` of simulation per ``env.dt`` of
    real time, the last action held in between."""

    def __init__(self, env: gym.Env, max_catch_up: int = 50) -> None:
        super().__init__(env)
        self.dt = float(env.unwrapped.dt)
        self.max_catch_up = max_catch_up  # the most periods one step simulates
        self.lag_steps = 0  # periods simulated with an action held over from before
        self.held: np.ndarray | None = None  # the action ``hold`` put on the motors
        self._last: float | None = None

    def hold(self, action) -> None:
        """Put ``action`` on the motors without a step (the board's safe action before
        a reset hook runs): kept until the next step or reset."""
        self.held = np.asarray(action, np.float32).copy()

    def resume(self) -> None:
        """The world was paused (a benchmark's arms taking turns on one machine): the next
        step simulates one period, not the time the pause lasted."""
        self._last = None

    def reset(self, **kwargs):
        self._last = None  # the robot waits at its start pose
        self.held = None
        return self.env.reset(**kwargs)

    def step(self, action):
        now = time.monotonic()
        periods = 1 if self._last is None else int((now - self._last) / self.dt)
        periods = min(max(periods, 1), self.max_catch_up)
        self._last = now
        total = 0.0
        for _ in range(periods):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        self.lag_steps += periods - 1
        return obs, total, terminated, truncated, info


def settle(env: RealTime, cancel: threading.Event) -> None:
    """A reset hook: the world runs on in wall-clock time under the held action for
    ``SETTLE_S`` (a robot coming to rest before it is put back), or until the board
    cancels the hook. It never calls ``env.step``: it moves the simulation itself."""
    action = env.held if env.held is not None else np.zeros(env.action_space.shape, np.float32)
    end = time.monotonic() + SETTLE_S
    while not cancel.is_set() and time.monotonic() < end:
        env.unwrapped.do_simulation(action, env.unwrapped.frame_skip)
        cancel.wait(env.dt)  # one control period of wall time, or the cancel


def hopper() -> RealTime:
    """Hopper-v5 (dt 8 ms, 125 Hz) in wall-clock time."""
    return RealTime(gym.make("Hopper-v5"))


def halfcheetah() -> RealTime:
    """HalfCheetah-v5 (dt 50 ms, 20 Hz) in wall-clock time."""
    return RealTime(gym.make("HalfCheetah-v5"))
