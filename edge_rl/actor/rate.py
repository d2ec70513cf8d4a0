"""Fixed-rate control: one env step per period, taken at its deadline (docs/robots.md).

    rate = Rate(control_hz)
    loop:  rate.tick()            # sleep to this step's deadline; a late one is counted
           action = ...; env.step(action)
    rate.periods, rate.misses, rate.jitter_ms(50), rate.jitter_ms(99)

Deadlines are ``t0 + k / hz`` on the monotonic clock, so sleeps do not drift. A period in
which no step started (the step before ran past it) is a **miss**: the schedule moves on
to the last deadline passed, skipping the missed periods rather than catching up in a
burst (a late action is a wrong action), and each one skipped counts. **Jitter** is how
late each step started after its deadline (the sleep's wake-up error, or what a long step
left over). The loop never waits on the network inside a period: it sleeps here only.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

import numpy as np

WINDOW = 4096  # periods whose jitter the percentiles are over


class Rate:
    def __init__(
        self,
        hz: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.period = 1.0 / hz
        self._clock = clock
        self._sleep = sleep
        self._next: float | None = None  # the next step's deadline; None: not started
        self.periods = 0  # steps taken at a deadline
        self.misses = 0  # periods in which no step started: the step before ran past them
        self._jitter: deque[float] = deque(maxlen=WINDOW)

    def restart(self) -> None:
        """The next tick starts a new schedule (after a pause in stepping)."""
        self._next = None

    def tick(self) -> None:
        """Sleep to this step's deadline; count it, and a miss if it had passed."""
        now = self._clock()
        if self._next is None:
            self._next = now
        late = now - self._next
        if late < 0:
            self._sleep(-late)
            now = self._clock()
            late = now - self._next
        elif late >= self.period:  # the step before ran past this deadline too
            skipped = math.floor(late / self.period)  # periods with no step started
            self.misses += skipped
            self._next += skipped * self.period  # the last deadline passed: no burst
            late = now - self._next
        self._jitter.append(max(0.0, late))
        self.periods += 1
        self._next += self.period

    def jitter_ms(self, q: float) -> float:
        """The ``q``-th percentile of the recent steps' lateness, in ms (0 before any)."""
        if not self._jitter:
            return 0.0
        return round(float(np.percentile(np.fromiter(self._jitter, float), q)) * 1000, 3)
