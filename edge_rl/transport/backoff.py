"""When to try the broker again: bounded, jittered exponential back-off.

    backoff = Backoff(base_s=0.25, cap_s=8.0, jitter=0.5)
    backoff.delay(0)   # in [0.125, 0.25]: the first retry comes quickly
    backoff.delay(10)  # in [4.0, 8.0]: never longer than cap_s

Attempt ``k`` (0 the first retry) waits ``d * u`` seconds, ``d = min(cap_s, base_s * 2**k)``
and ``u`` uniform in ``[1 - jitter, 1]``: the envelope doubles up to its cap, and the jitter
spreads a fleet that lost its broker node at one instant over the whole interval instead of
sending every board's CONNECT to the surviving nodes in one burst. Standard library only
(a board imports this).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Backoff:
    base_s: float = 0.25  # the envelope of the first retry
    cap_s: float = 8.0  # no wait is longer than this
    jitter: float = 0.5  # the share of the envelope drawn at random, in [0, 1]
    rng: random.Random = field(default_factory=random.Random, compare=False)

    def __post_init__(self) -> None:
        if not 0 < self.base_s <= self.cap_s:
            raise ValueError(f"back-off needs 0 < base_s <= cap_s, got {self.base_s}, {self.cap_s}")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"back-off jitter must be in [0, 1], got {self.jitter}")

    def envelope(self, attempt: int) -> float:
        """The longest wait before retry ``attempt`` (0-based)."""
        if attempt < 0:
            raise ValueError(f"attempt must be >= 0, got {attempt}")
        # 2**k overflows no float for the k at which it passes any cap: stop doubling there.
        doublings = min(attempt, 64)
        return min(self.cap_s, self.base_s * 2.0**doublings)

    def delay(self, attempt: int) -> float:
        """The wait before retry ``attempt``: its envelope times a uniform draw in
        ``[1 - jitter, 1]``."""
        top = self.envelope(attempt)
        return top * (1.0 - self.jitter * self.rng.random())
