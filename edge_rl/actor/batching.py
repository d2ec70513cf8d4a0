"""Outbound side of an actor: batch transitions by count or time, spool while offline."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

import numpy as np

from edge_rl.types import TransitionBatch


class Batcher:
    """Collects transitions of one policy version; ``ready`` by count or by age."""

    def __init__(self, actor_id: str, session: int, batch_size: int, flush_interval_s: float):
        self.actor_id = actor_id
        self.session = session
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self.seq = 0
        self.run_id = ""  # the run start the transitions are stepped for (RunControl)
        self._rows: list[tuple] = []
        self._version = 0
        self._first_t = 0.0

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, policy_version: int, obs, action, reward, next_obs, terminated, truncated):
        """Add one transition. Returns a finished batch when the policy version changes."""
        done = None
        if self._rows and policy_version != self._version:
            done = self.take()  # a batch carries exactly one policy version
        if not self._rows:
            self._version = policy_version
            self._first_t = time.monotonic()
        self._rows.append((obs, action, reward, next_obs, terminated, truncated))
        return done

    def ready(self) -> bool:
        return len(self._rows) >= self.batch_size or (
            bool(self._rows) and time.monotonic() - self._first_t >= self.flush_interval_s
        )

    def take(self) -> TransitionBatch | None:
        if not self._rows:
            return None
        obs, action, reward, next_obs, term, trunc = zip(*self._rows, strict=True)
        batch = TransitionBatch(
            actor_id=self.actor_id,
            session=self.session,
            seq=self.seq,
            policy_version=self._version,
            run_id=self.run_id,
            obs=np.asarray(obs, np.float32),
            action=np.asarray(action),
            reward=np.asarray(reward, np.float32),
            next_obs=np.asarray(next_obs, np.float32),
            terminated=np.asarray(term, bool),
            truncated=np.asarray(trunc, bool),
        )
        self.seq += 1
        self._rows.clear()
        return batch


class Spool:
    """Encoded batches waiting to be published, bounded in bytes; drops the oldest first.

    Oldest first because DQN/TD3 are off-policy but fresher data is worth more, and the
    learner's sequence accounting reports the gap either way.
    """

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self._items: deque[tuple[bytes, int]] = deque()  # (payload, transitions in it)
        self.bytes = 0
        self.dropped_batches = 0
        self.dropped_transitions = 0

    def __len__(self) -> int:
        return len(self._items)

    def push(self, payload: bytes, n: int) -> None:
        self._items.append((payload, n))
        self.bytes += len(payload)
        while self.bytes > self.limit_bytes and len(self._items) > 1:
            old, old_n = self._items.popleft()
            self.bytes -= len(old)
            self.dropped_batches += 1
            self.dropped_transitions += old_n

    def drain(self, send: Callable[[bytes], bool]) -> int:
        """Send in order until ``send`` refuses one; returns the transitions sent."""
        sent = 0
        while self._items and send(self._items[0][0]):
            payload, n = self._items.popleft()
            self.bytes -= len(payload)
            sent += n
        return sent
