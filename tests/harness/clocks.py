"""A clock for tests that moves only when told to: every interval it measures is exact."""

from __future__ import annotations


class FakeClock:
    """Call it for the time; set ``t`` to move it. ``reads`` counts the calls."""

    def __init__(self, t: float = 100.0) -> None:
        self.t = t
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.t
