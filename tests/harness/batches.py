"""A small transition batch of a 2-float observation and 3 discrete actions: what the
learner's ingest and replay tests feed in."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from edge_rl.types import TransitionBatch


def small_batch(
    actor: str = "a",
    session: int = 1,
    seq: int = 0,
    n: int = 4,
    version: int = 0,
    *,
    start: float = 0.0,
    reward: float = 1.0,
    done_at: Iterable[int] = (),
    run_id: str = "",
) -> TransitionBatch:
    """``n`` transitions, observations ``start, start + 1, ...`` (next: each + 1), actions
    ``i % 3``, each with ``reward``; terminal at the rows ``done_at``."""
    obs = (start + np.arange(n * 2, dtype=np.float32)).reshape(n, 2)
    term = np.zeros(n, bool)
    term[list(done_at)] = True
    return TransitionBatch(
        actor,
        session,
        seq,
        version,
        obs,
        np.arange(n, dtype=np.int64) % 3,
        np.full(n, reward, np.float32),
        obs + 1,
        term,
        np.zeros(n, bool),
        run_id,
    )
