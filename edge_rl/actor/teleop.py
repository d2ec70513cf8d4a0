"""Interventions on the board: a person or a scripted teacher takes over the action.

    teleop = Teleop.load("edge_rl.actor.teleop:scripted_teacher", spec, {"model": "t.tflite"})
    per step:  action = explorer.act(out, i)          # the policy's, explored
               action, acted = teleop(obs, action)    # an override, if the source gives one
               (the safety shield, then env.step(action); the row carries ``acted``)

The board file's ``teleop:`` names a ``module:callable``, called once with the env's
``EnvSpec`` and the board file's ``teleop_args`` as keywords; what it returns is called on
every step with the observation and the action the policy chose, and returns an action
to take instead, or None to leave the policy's (LeRobot HIL-SERL's teleoperator swap).
A transition it acted is marked (``intervention``, docs/protocol.md §3.1); the learner
keeps it as a demonstration (docs/demonstrations.md).

An override the env could not take (outside the action space, not finite, of the wrong
shape) is not taken: the policy's action stays, the step is not marked, and the
refusal is counted (``refused``) and logged once. A source that raises is treated the
same way. Shipped sources: ``scripted_teacher`` below (a policy file and a rule for when it
takes over: tests and benchmarks) and ``edge_rl.actor.gamepad:gamepad`` (evdev).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from edge_rl.specs import EnvSpec

log = logging.getLogger(__name__)

Override = Callable[[np.ndarray, Any], Any]  # (obs, policy's action) -> action | None


class Teleop:
    """One board's intervention source, checked; counts what it did."""

    def __init__(self, source: Override, spec: EnvSpec) -> None:
        self.source = source
        self.spec = spec
        self._low = np.asarray(spec.action_low, np.float32)
        self._high = np.asarray(spec.action_high, np.float32)
        self.interventions = 0  # steps an override acted (since the run start joined)
        self.refused = 0  # overrides not taken: not an action of this env, or an error

    @classmethod
    def load(cls, name: str, spec: EnvSpec, args: Mapping[str, Any] | None = None) -> Teleop:
        """``module:callable`` called with ``spec`` and ``args``; ValueError naming it if it
        cannot be imported or made."""
        module_name, _, attr = name.partition(":")
        if not module_name or not attr:
            raise ValueError(f"teleop must be 'module:callable', got {name!r}")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
            return cls(factory(spec, **dict(args or {})), spec)
        except (ImportError, AttributeError, TypeError, OSError, ValueError) as e:
            raise ValueError(f"cannot start teleop {name!r}: {e}") from None

    def __call__(self, obs: np.ndarray, action: Any) -> tuple[Any, bool]:
        """The action to take and whether an override chose it."""
        try:
            override = self.source(obs, action)
        except Exception as e:  # noqa: BLE001 - a teleop device must not stop the board
            return self._refuse(action, f"raised {type(e).__name__}: {e}")
        if override is None:
            return action, False
        checked = self._checked(override)
        if checked is None:
            return self._refuse(action, f"gave {override!r}, not an action of this env")
        self.interventions += 1
        return checked, True

    def _checked(self, override: Any) -> Any | None:
        spec = self.spec
        a = np.asarray(override)
        if spec.discrete:
            if a.size != 1 or a.dtype.kind not in "iu" or not 0 <= int(a) < spec.num_actions:
                return None
            return np.int64(a.reshape(()))
        if a.dtype.kind not in "fiu" or a.size != self._low.size:
            return None
        a = a.astype(np.float32).reshape(-1)
        if not np.all(np.isfinite(a)) or np.any(a < self._low) or np.any(a > self._high):
            return None
        return a.reshape(spec.action_shape)

    def _refuse(self, action: Any, why: str) -> tuple[Any, bool]:
        self.refused += 1
        if self.refused == 1:
            log.warning("teleop override not taken (counted from here on): %s", why)
        return action, False


class ScriptedTeacher:
    """A trained policy that takes over on a schedule: for ``for_steps`` steps out of every
    ``every_steps`` of the board's steps (a share of ``for_steps / every_steps``), and
    never after ``stop_after`` steps (0: never stops). It acts greedily with its model
    (an edge-rl export, ``.tflite``) in LiteRT, as a served board would."""

    def __init__(
        self, spec: EnvSpec, model: bytes, every_steps: int, for_steps: int, stop_after: int
    ) -> None:
        from edge_rl.runtime.litert import TFLitePolicy

        if not 0 <= for_steps <= every_steps or every_steps < 1 or stop_after < 0:
            raise ValueError("teacher: 0 <= for_steps <= every_steps, every_steps >= 1")
        self.spec = spec
        self.policy = TFLitePolicy(model)
        self.every_steps = every_steps
        self.for_steps = for_steps
        self.stop_after = stop_after
        self.steps = 0

    def __call__(self, obs: np.ndarray, action: Any) -> Any:
        t = self.steps
        self.steps += 1
        if self.stop_after and t >= self.stop_after or t % self.every_steps >= self.for_steps:
            return None
        out = self.policy(obs)
        if self.spec.discrete:
            return np.int64(np.argmax(out))
        low = np.asarray(self.spec.action_low, np.float32)
        high = np.asarray(self.spec.action_high, np.float32)
        return np.clip(np.asarray(out, np.float32), low, high).reshape(self.spec.action_shape)


def scripted_teacher(
    spec: EnvSpec,
    model: str,
    every_steps: int = 200,
    for_steps: int = 20,
    stop_after: int = 0,
) -> ScriptedTeacher:
    """``teleop: edge_rl.actor.teleop:scripted_teacher``; ``teleop_args``: ``model`` (a
    ``.tflite`` path), ``every_steps``, ``for_steps``, ``stop_after``."""
    with open(model, "rb") as f:
        return ScriptedTeacher(spec, f.read(), every_steps, for_steps, stop_after)
