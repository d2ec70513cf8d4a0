"""Make a host behave like a slower board: sleep in proportion to the compute just done."""

from __future__ import annotations

import time
from collections.abc import Callable


class Throttle:
    """Owes ``(slowdown - 1) × t`` seconds for every ``t`` seconds of compute charged.

    Sleeps only once the debt passes ``min_sleep_s``: ``time.sleep`` of a few µs costs far
    more than that, so a per-step sleep would over-throttle fast steps like CartPole's.
    ``clock`` and ``sleep`` default to the real ones; a test passes a fake pair.
    """

    def __init__(
        self,
        slowdown: float,
        min_sleep_s: float = 0.002,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.factor = max(0.0, slowdown - 1.0)
        self.min_sleep_s = min_sleep_s
        self._clock = clock
        self._sleep = sleep
        self._debt = 0.0
        self.slept_s = 0.0

    def charge(self, seconds: float) -> None:
        if self.factor == 0.0:
            return
        self._debt += self.factor * seconds
        if self._debt >= self.min_sleep_s:
            t0 = self._clock()
            self._sleep(self._debt)
            slept = self._clock() - t0
            self._debt -= slept  # oversleep is paid back by the next charges
            self.slept_s += slept
