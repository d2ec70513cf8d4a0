"""Env steps over a run's time, sampled: a stall is a long stretch in which they do not grow.

progress = Progress(lambda: node.env_steps)   # samples every 0.2 s until stop()
...
progress.stop()
longest_flat_s(progress.samples, until=budget)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Progress:
    """``(monotonic time, count)`` samples of ``count()`` every ``every`` s, on a thread."""

    def __init__(self, count: Callable[[], int], every: float = 0.2) -> None:
        self.samples: list[tuple[float, int]] = []
        self._count, self._every = count, every
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.wait(self._every):
            self.samples.append((time.monotonic(), self._count()))

    def stop(self) -> None:
        self._done.set()
        self._thread.join(5)


def flat_stretches(progress: list[tuple[float, int]], until: int) -> list[tuple[int, float]]:
    """Each stretch in which the count did not grow, before it reached ``until``: the
    count it stood at and for how long (s)."""
    stretches: list[tuple[int, float]] = []
    since, last, at = None, 0.0, 0
    for (t0, n0), (t1, n1) in zip(progress, progress[1:], strict=False):
        if n0 >= until:
            break
        if n1 == n0:
            since, last, at = (t0 if since is None else since), t1, n0
        elif since is not None:
            stretches.append((at, last - since))
            since = None
    if since is not None:
        stretches.append((at, last - since))
    return stretches


def longest_flat_s(progress: list[tuple[float, int]], until: int) -> float:
    """The longest time the count did not grow, before it reached ``until``."""
    return max((s for _at, s in flat_stretches(progress, until)), default=0.0)
