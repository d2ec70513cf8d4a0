"""Real gymnasium envs that keep every action they were stepped with: what reached the
"actuator", for tests of the safety shield and the watchdogs (``--env
tests.harness.robot_envs:pendulum``).

In-process, each env made is in ``MADE``; in another process (an ``edge-rl actor``), set
``EDGE_RL_TEST_ACTIONS`` to a file and each step appends a line ``<monotonic s> <action
values...>`` to it (CLOCK_MONOTONIC is the machine's, so a test reads it against its own).
"""

from __future__ import annotations

import os
import time

import gymnasium as gym
import numpy as np

MADE: list[Recorder] = []


class Recorder(gym.Wrapper):
    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.received: list[np.ndarray] = []
        self.resets = 0
        path = os.environ.get("EDGE_RL_TEST_ACTIONS")
        self._log = open(path, "a", buffering=1) if path else None  # noqa: SIM115 (lives with the env)

    def step(self, action):
        a = np.array(action, copy=True)
        self.received.append(a)
        if self._log is not None:
            values = " ".join(repr(float(x)) for x in np.asarray(a, np.float64).reshape(-1))
            self._log.write(f"{time.monotonic()!r} {values}\n")
        return self.env.step(action)

    def reset(self, **kwargs):
        self.resets += 1
        return self.env.reset(**kwargs)

    def close(self):
        if self._log is not None:
            self._log.close()
        super().close()


def pendulum() -> Recorder:
    MADE.append(Recorder(gym.make("Pendulum-v1")))
    return MADE[-1]


def cartpole() -> Recorder:
    MADE.append(Recorder(gym.make("CartPole-v1")))
    return MADE[-1]


def push_to_the_limit(spec, **_):
    """A teleop source (``teleop: tests.harness.robot_envs:push_to_the_limit``) that takes
    over every step with the top of the env's action space."""
    top = np.asarray(spec.action_high, np.float32)
    return lambda obs, action: top


def read_actions(path: str | os.PathLike) -> list[tuple[float, list[float]]]:
    """``(monotonic time, action)`` of every step the env logged, in order."""
    out = []
    with open(path) as f:
        for line in f:
            t, *values = line.split()
            out.append((float(t), [float(v) for v in values]))
    return out
