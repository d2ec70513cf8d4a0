"""What a serving board reports of its work: the policy version it serves and the returns
of the episodes it ended with that version (docs/protocol.md §5.4).

    served = ServedReturns()
    served.begin(version, digest)  # a policy served from a fresh episode: its returns only
    served.step(reward, ended)     # after each env step
    served.version, served.digest, served.recent_return, served.episodes

The return of an episode counts for the version that acted every step of it, so a status
that names a version reports that version's greedy return (a rollback may serve a lower
version again, so a policy is told by its digest), which ``edge-rl eval`` and the
learner's final evaluation measure on the same model.
"""

from __future__ import annotations

from collections import deque

import numpy as np


class ServedReturns:
    def __init__(self, window: int = 20) -> None:
        self.version = 0  # the policy version served; 0 = none yet
        self.digest = ""  # its model_sha256
        self.episodes = 0  # ended with that version
        self._returns: deque[float] = deque(maxlen=window)
        self._episode = 0.0

    def begin(self, version: int, digest: str = "") -> None:
        self.version = version
        self.digest = digest
        self.episodes = 0
        self._returns.clear()
        self._episode = 0.0

    def step(self, reward: float, ended: bool) -> None:
        self._episode += reward
        if ended:
            self._returns.append(self._episode)
            self.episodes += 1
            self._episode = 0.0

    @property
    def recent_return(self) -> float | None:
        """Mean return of the last ``window`` episodes served with ``version``."""
        return float(np.mean(self._returns)) if self._returns else None
