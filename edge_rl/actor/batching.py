"""Outbound side of an actor: batch transitions by count or time, spool while offline."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

import numpy as np

from edge_rl.types import TransitionBatch


class Batcher:
    """Collects transitions of one policy version; ``ready`` by count or by age.

    Per transition, ``add``; or, in a loop that steps a block at a time: ``open`` once per
    block, then ``append`` one row ``(obs, action, reward, next_obs, terminated,
    truncated, intervention)`` per step, at most ``room()`` of them (one list append: nothing is
    checked or converted per step; ``take`` converts a batch's rows at once).
    """

    def __init__(self, actor_id: str, session: int, batch_size: int, flush_interval_s: float):
        self.actor_id = actor_id
        self.session = session
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self.seq = 0
        self.run_id = ""  # the run start the transitions are stepped for (RunControl)
        self._rows: list[tuple] = []
        self.append = self._rows.append  # the open batch's rows (one list for all batches)
        self._version = 0
        self._first_t = 0.0

    def __len__(self) -> int:
        return len(self._rows)

    def open(self, policy_version: int) -> TransitionBatch | None:
        """Make the open batch one of ``policy_version``, before rows of it are appended.
        Returns the finished batch of another version, if one was open: a batch carries
        exactly one policy version."""
        done = None
        if self._rows and policy_version != self._version:
            done = self.take()
        if not self._rows:
            self._version = policy_version
            self._first_t = time.monotonic()  # its age counts from its first transition
        return done

    def room(self) -> int:
        """Rows the open batch takes before it is full (``ready`` by count)."""
        return self.batch_size - len(self._rows)

    def due(self) -> float:
        """When (``time.monotonic``) the open batch is ``ready`` by age; a batch opened
        now if none is open."""
        start = self._first_t if self._rows else time.monotonic()
        return start + self.flush_interval_s

    def add(
        self,
        policy_version: int,
        obs,
        action,
        reward,
        next_obs,
        terminated,
        truncated,
        intervention: bool = False,
    ):
        """Add one transition. Returns a finished batch when the policy version changes."""
        done = self.open(policy_version)
        self.append((obs, action, reward, next_obs, terminated, truncated, intervention))
        return done

    def ready(self) -> bool:
        return len(self._rows) >= self.batch_size or (
            bool(self._rows) and time.monotonic() - self._first_t >= self.flush_interval_s
        )

    def take(self) -> TransitionBatch | None:
        if not self._rows:
            return None
        obs, action, reward, next_obs, term, trunc, acted = zip(*self._rows, strict=True)
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
            intervention=np.asarray(acted, bool) if any(acted) else None,
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
