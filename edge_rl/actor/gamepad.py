"""A keyboard or gamepad as a board's intervention source (Linux evdev): an example.

    # board file
    teleop: edge_rl.actor.gamepad:gamepad
    teleop_args: {device: /dev/input/event3, axis: ABS_X, hold: BTN_TL}

While the ``hold`` button (a gamepad's shoulder, or a key such as ``KEY_SPACE``) is held,
the person drives: a Box action is the ``axis`` scaled to the action's bounds (one
dimension; the others keep the policy's), a discrete one the last of ``keys`` pressed
(``keys[i]`` is action ``i``). Released, the policy acts. Events are read without
blocking, so a step never waits for the device. Needs ``pip install evdev`` and read
access to the device (the ``input`` group); not used by the tests (no device there).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from edge_rl.specs import EnvSpec


class Gamepad:
    def __init__(
        self, spec: EnvSpec, device: str, axis: str, hold: str, keys: tuple[str, ...]
    ) -> None:
        try:
            import evdev  # optional: only a board with a person at it needs it
        except ImportError:
            raise ValueError("the gamepad teleop needs evdev: pip install evdev") from None
        self.spec = spec
        self.dev = evdev.InputDevice(device)
        codes = evdev.ecodes.ecodes
        self.axis = codes[axis]
        self.hold = codes[hold]
        self.keys = [codes[k] for k in keys]
        info = self.dev.absinfo(self.axis) if not spec.discrete else None
        self.range = (info.min, info.max) if info else (0, 1)
        self.value = (self.range[0] + self.range[1]) / 2
        self.held = False
        self.pressed: int | None = None
        self.ev_abs = evdev.ecodes.EV_ABS
        self.ev_key = evdev.ecodes.EV_KEY

    def __call__(self, obs: np.ndarray, action: Any) -> Any:
        self._read()
        if not self.held:
            return None
        if self.spec.discrete:
            return None if self.pressed is None else np.int64(self.pressed)
        lo, hi = self.range
        u = (self.value - lo) / max(hi - lo, 1)  # [0, 1]
        a = np.asarray(action, np.float32).reshape(-1).copy()
        low, high = self.spec.action_low[0], self.spec.action_high[0]
        a[0] = low + u * (high - low)
        return a.reshape(self.spec.action_shape)

    def _read(self) -> None:
        try:
            events = list(self.dev.read())
        except BlockingIOError:  # nothing new since the last step
            return
        for e in events:
            if e.type == self.ev_abs and e.code == self.axis:
                self.value = e.value
            elif e.type == self.ev_key and e.code == self.hold:
                self.held = e.value != 0
            elif e.type == self.ev_key and e.code in self.keys and e.value:
                self.pressed = self.keys.index(e.code)


def gamepad(
    spec: EnvSpec,
    device: str,
    axis: str = "ABS_X",
    hold: str = "BTN_TL",
    keys: tuple[str, ...] | list[str] = ("KEY_LEFT", "KEY_RIGHT"),
) -> Gamepad:
    return Gamepad(spec, device, axis, hold, tuple(keys))
