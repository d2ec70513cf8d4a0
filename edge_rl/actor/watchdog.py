"""The board's watchdogs: when it must give its env the safe action, and why
(docs/robots.md, docs/protocol.md §5.6).

    dog = Watchdog(stale_after_s, estop)      # the board file's safety: section
    dog.heard(now)                            # a control, credit, policy or welcome came
    reason = dog.reason(now, training=..., has_policy=..., connected=...)
    if reason: shield.safe(reason)            # else the policy's action, through the shield

Pure decisions on a monotonic clock the caller reads; the loop asks once per control
period, so a watchdog acts within ``stale_after_s`` plus one period. In order (the first
that holds is the reason):

* ``estop``: the local emergency stop is engaged (``EStop``); only a local action
  releases it, whatever the network says. A failed reset (``latch``) engages it too and
  is reported under its own reason (``reset_failed``, ``reset_timeout``) until released.
* ``broker_lost``: while training, the connection to the broker is down.
* ``learner_silent``: while training, nothing came from the learner (control, credit,
  policy, hello or welcome) for ``stale_after_s``. A lost connection whose socket did not
  close (a cut cable) shows here.
* ``no_policy``: serving with no verified policy to serve.

Serving needs no network: a served policy is the run's result, evaluated and deployed, and
a board serves it with the learner gone (that is what serving after a run is). Training
does: its credit, policy and control come from a learner that may have vanished.
``inference_late`` is decided per step by the loop (an inference over its deadline).
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)


class EStop:
    """The local emergency stop: engaged by SIGUSR2 (``install_signal``), while
    ``file`` exists, or while ``pressed()`` (a ``module:callable`` reading a GPIO pin, say)
    returns true. SIGUSR2 writes ``file`` if there is one, so it is released as the file
    is: by removing it, on the board. Without a file, a signal's stop holds until the
    process restarts. Nothing that comes over the network releases it."""

    def __init__(self, file: str | None = None, pressed: Callable[[], bool] | None = None) -> None:
        self.file = Path(file) if file else None
        self.pressed = pressed
        self._signalled = threading.Event()

    def install_signal(self) -> None:
        """SIGUSR2 engages the stop (main thread only, as ``signal.signal`` requires)."""
        signal.signal(signal.SIGUSR2, lambda *_: self.engage())

    def engage(self) -> None:
        if self.file is not None:
            self.file.touch()  # held on disk: released by removing the file
        else:
            self._signalled.set()
        log.warning("emergency stop engaged")

    def engaged(self) -> bool:
        if self._signalled.is_set():
            return True
        if self.file is not None and os.path.exists(self.file):
            return True
        return bool(self.pressed is not None and self.pressed())


class Watchdog:
    def __init__(self, stale_after_s: float | None, estop: EStop, now: float) -> None:
        """``stale_after_s`` None: no network watchdog (the e-stop and deadline only)."""
        self.stale_after_s = stale_after_s
        self.estop = estop
        self._heard = now  # the learner's last word; the start counts as one
        self._latched = ""  # why the board engaged its own e-stop (a failed reset)

    def heard(self, now: float) -> None:
        """A message from the learner: control, credit, policy, hello or welcome."""
        self._heard = now

    @property
    def last_heard(self) -> float:
        """When the learner last spoke (``time.monotonic()``; at first: the start)."""
        return self._heard

    def latch(self, reason: str) -> None:
        """The board engages its own emergency stop for ``reason`` (the reset hook failed:
        the robot may be anywhere, a person may be at it). It is released as any e-stop
        is, on the board: by removing ``estop_file`` (without one, by a restart)."""
        self._latched = reason
        self.estop.engage()

    def reason(self, now: float, *, training: bool, has_policy: bool, connected: bool) -> str:
        """Why the env must get the safe action now, or ``""``."""
        if self.estop.engaged():
            return self._latched or "estop"
        self._latched = ""  # released: a later stop is the e-stop's own
        if training and self.stale_after_s is not None:
            if not connected:
                return "broker_lost"
            if now - self._heard > self.stale_after_s:
                return "learner_silent"
        elif not training and not has_policy:
            return "no_policy"
        return ""


def load_input(spec: str | None) -> Callable[[], bool] | None:
    """``package.module:callable`` -> the callable (an e-stop input); None stays None."""
    if spec is None:
        return None
    module, _, attr = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as e:
        raise ValueError(f"cannot load safety.estop_input {spec!r}: {e}") from None
