"""Episodes for the real world: when one ends besides the env's own say, and the reset
hook that runs before each (the board file's ``episode:``; docs/robots.md).

    rules = EpisodeRules(board.episode)
    rules.begin()                                   # after each env.reset
    obs, r, terminated, truncated, info = env.step(action)
    terminated, truncated = rules.end(info, terminated, truncated)
    rules.succeeded, rules.failed                   # episodes each key ended (training)

    hook = ResetHook(board.episode)                 # only with a reset_hook
    hook.start(env, seed, now)                      # a thread: hook(env, cancel), env.reset()
    hook.outcome(now)                               # "", "done", "reset_failed", "reset_timeout"
    hook.obs                                        # the reset's observation once "done"
    hook.cancel()                                   # the board waits for it no longer

What holds, as gymnasium's ``TimeLimit`` does it: a time limit *truncates* (the MDP did
not end: the learner bootstraps from the last observation) and leaves ``terminated`` as
the env said; success or failure *terminates*. The time limit is read on the monotonic
clock from ``begin`` (the end of the reset), so a board paused mid-episode (no credit, a
safe state) finds the episode truncated at its next step once the limit has passed.

The hook runs on a thread of its own, so that the board's loop goes on serving the
network, reporting ``resetting`` and watching the emergency stop while a person resets
the robot. A Python thread cannot be killed: a hook past its timeout is told to stop
(``cancel`` is set) and waited for no longer; its ``env.reset()`` is never called after a
cancel, and no second hook starts while one still runs (``running``).
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from edge_rl.boards import Episode

log = logging.getLogger(__name__)


class EpisodeRules:
    def __init__(self, cfg: Episode, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = cfg.time_limit_s
        self.success_key = cfg.success_key
        self.failure_key = cfg.failure_key
        self.active = any(v is not None for v in (self.limit, self.success_key, self.failure_key))
        self._clock = clock
        self._start = clock()
        self.succeeded = self.failed = self.timed_out = 0
        self._warned: set[str] = set()  # info keys whose value was not a flag: said once

    def begin(self) -> None:
        """An episode starts now (the env was just reset)."""
        self._start = self._clock()

    def end(
        self, info: Any, terminated: bool, truncated: bool, *, count: bool = True
    ) -> tuple[bool, bool]:
        """``(terminated, truncated)`` of this step under the board's rules; ``count``:
        a training step's episode (serving's are not the run's, as its env steps)."""
        failed = self._flag(info, self.failure_key)
        succeeded = not failed and self._flag(info, self.success_key)  # both: a failure
        if failed or succeeded:
            if count:
                self.failed += failed
                self.succeeded += succeeded
            terminated = True
        if (
            self.limit is not None
            and not terminated
            and not truncated
            and self._clock() - self._start >= self.limit
        ):
            truncated = True
            if count:
                self.timed_out += 1
        return bool(terminated), bool(truncated)

    def _flag(self, info: Any, key: str | None) -> bool:
        """Whether ``info[key]`` is a true flag: a bool or a number, or a one-element array
        of one. Anything else is not a flag: logged once, and the episode goes on."""
        if key is None or not isinstance(info, dict) or key not in info:
            return False
        v = info[key]
        try:
            a = np.asarray(v)
            if a.size == 1 and a.dtype.kind in "biuf":
                return bool(a.reshape(-1)[0])
        except (TypeError, ValueError):
            pass
        if key not in self._warned:
            self._warned.add(key)
            log.warning("info[%r] is %r, not a true/false flag: ignored", key, type(v).__name__)
        return False

    def reset_counts(self) -> None:
        """A new run start: its episodes are counted from zero, as ``episodes`` are."""
        self.succeeded = self.failed = self.timed_out = 0


def load_hook(spec: str) -> Callable[..., Any]:
    """``package.module:callable`` -> the callable (the board file's ``reset_hook``)."""
    module, _, attr = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as e:
        raise ValueError(f"cannot load episode.reset_hook {spec!r}: {e}") from None
    if not callable(fn):
        raise ValueError(f"episode.reset_hook {spec!r} is not callable")
    return fn


class ResetHook:
    def __init__(self, cfg: Episode) -> None:
        if cfg.reset_hook is None:
            raise ValueError("ResetHook needs episode.reset_hook")
        self.fn = load_hook(cfg.reset_hook)
        self.timeout_s = cfg.reset_timeout_s
        self.obs: Any = None
        self.error = ""
        self.deadline = 0.0
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()

    @property
    def running(self) -> bool:
        """A hook still runs: this one, or an earlier one that ignored its cancel."""
        return self._thread is not None and self._thread.is_alive()

    def start(self, env: Any, seed: int | None, now: float) -> None:
        """``hook(env, cancel)`` then ``env.reset()`` on a thread, due by ``now +
        reset_timeout_s``. Never while one still runs (``running``)."""
        if self.running:
            raise RuntimeError("a reset hook still runs")
        self.obs = None
        self.error = ""
        self.deadline = now + self.timeout_s
        self._cancel = cancel = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(env, seed, cancel), name="reset-hook", daemon=True
        )
        self._thread.start()

    def _run(self, env: Any, seed: int | None, cancel: threading.Event) -> None:
        try:
            self.fn(env, cancel)
            if cancel.is_set():  # the board stopped waiting: no reset it did not ask for
                return
            obs, _ = env.reset() if seed is None else env.reset(seed=seed)
            self.obs = obs
        except Exception as e:  # noqa: BLE001 (whatever the hook raises is reset_failed)
            self.error = f"{type(e).__name__}: {e}"

    def outcome(self, now: float) -> str:
        """``""`` while it runs within its time; then ``done`` (``obs`` holds the reset's
        observation), ``reset_failed`` (it raised: ``error``) or ``reset_timeout``."""
        if self.running:
            return "reset_timeout" if now >= self.deadline else ""
        if self.error or self.obs is None:  # raised, or returned only once cancelled
            return "reset_failed"
        return "done"

    def wait(self, seconds: float) -> bool:
        """Up to ``seconds`` for a running hook to return; whether none runs now."""
        if self._thread is not None:
            self._thread.join(seconds)
        return not self.running

    def cancel(self) -> None:
        """The board waits for it no longer: the hook sees ``cancel`` set."""
        self._cancel.set()
