"""A numpy ring replay buffer of single transitions.

Stores ``terminated`` only: a truncated step (time limit) is a normal transition whose
target bootstraps from ``next_obs`` (Gymnasium 1.x semantics; Pardo et al. 2018).

Each row also holds the index of its source (the board that sent it; -1: none named), so
that a quarantined board's rows can be counted and evicted (learner/fleet/quarantine.py),
whether the episode was cut there by a time limit (``truncated``, not sampled: it lets
``edge-rl record`` split a board's rows into episodes) and whether an intervention acted
(``intervention``: a person or a teacher took over, docs/protocol.md §3.1).

The learner keeps two: the online buffer of everything the fleet sent, and the
demonstration buffer (learner/demos.py) of interventions and loaded datasets.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

from edge_rl.specs import EnvSpec
from edge_rl.types import PartState, ReplaySample

# Columns a checkpoint from before they were kept lacks: restored as zeros.
OPTIONAL = frozenset({"truncated", "intervention"})


class Rows(NamedTuple):
    """Rows of a buffer in the order they were added (``ReplayBuffer.rows``)."""

    obs: np.ndarray  # [n, *obs_shape] float32
    action: np.ndarray  # [n] int64 or [n, *action_shape] float32
    reward: np.ndarray  # [n] float32
    next_obs: np.ndarray  # [n, *obs_shape] float32
    terminated: np.ndarray  # [n] bool
    truncated: np.ndarray  # [n] bool
    intervention: np.ndarray  # [n] bool
    source: list[str]  # [n] the board each row came from ("": none named)


class ReplayBuffer:
    """Fixed-capacity FIFO of transitions; ``add`` and ``sample`` are thread-safe."""

    def __init__(self, spec: EnvSpec, capacity: int, seed: int = 0) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.spec = spec
        self.capacity = capacity
        self._obs = np.zeros((capacity, *spec.obs_shape), np.float32)
        self._next_obs = np.zeros((capacity, *spec.obs_shape), np.float32)
        act_shape = () if spec.discrete else spec.action_shape
        self._action = np.zeros((capacity, *act_shape), spec.action_dtype)
        self._reward = np.zeros(capacity, np.float32)
        self._terminated = np.zeros(capacity, np.float32)
        self._truncated = np.zeros(capacity, np.uint8)
        self._intervention = np.zeros(capacity, np.uint8)
        self._source = np.full(capacity, -1, np.int32)  # index into _sources; -1: none
        self._sources: list[str] = []
        self._source_index: dict[str, int] = {}
        self._next = 0  # index the next transition goes to
        self._size = 0
        self.added = 0  # total ever added
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._size

    def add(
        self,
        obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        source: str | None = None,
        truncated: np.ndarray | None = None,
        intervention: np.ndarray | None = None,
    ) -> None:
        """Add ``n`` transitions (leading axis); the oldest are overwritten when full.
        ``source``: the board they came from; ``truncated`` and ``intervention``: [n] flags
        (None: none set)."""
        n = int(reward.shape[0])
        truncated = np.zeros(n, np.uint8) if truncated is None else truncated
        intervention = np.zeros(n, np.uint8) if intervention is None else intervention
        if n > self.capacity:  # only the newest `capacity` can survive anyway
            obs, action, reward = (
                obs[-self.capacity :],
                action[-self.capacity :],
                reward[-self.capacity :],
            )
            next_obs, terminated = next_obs[-self.capacity :], terminated[-self.capacity :]
            truncated, intervention = truncated[-self.capacity :], intervention[-self.capacity :]
            n = self.capacity
        with self._lock:
            idx = (self._next + np.arange(n)) % self.capacity  # [n]
            self._source[idx] = -1 if source is None else self._index_of(source)
            self._obs[idx] = obs
            self._action[idx] = action
            self._reward[idx] = reward
            self._next_obs[idx] = next_obs
            self._terminated[idx] = terminated
            self._truncated[idx] = truncated
            self._intervention[idx] = intervention
            self._next = int((self._next + n) % self.capacity)
            self._size = min(self._size + n, self.capacity)
            self.added += n

    def sample(self, batch_size: int) -> ReplaySample:
        """``batch_size`` transitions drawn uniformly with replacement."""
        with self._lock:
            if self._size == 0:
                raise ValueError("cannot sample from an empty replay buffer")
            idx = self._rng.integers(0, self._size, size=batch_size)
            return ReplaySample(
                self._obs[idx],
                self._action[idx],
                self._reward[idx],
                self._next_obs[idx],
                self._terminated[idx],
            )

    def interventions(self) -> int:
        """Rows an intervention acted."""
        with self._lock:
            return int(self._intervention[: self._size].sum())

    def rows(self, source: str | None = None) -> Rows:
        """Every row (or ``source``'s), the oldest first: for ``edge-rl record``."""
        with self._lock:
            order = np.arange(self._size)
            if self._size == self.capacity:
                order = np.roll(order, -self._next)  # oldest first
            if source is not None:
                i = self._source_index.get(source, -2)
                order = order[self._source[order] == i]
            cols = self._columns()
            return Rows(
                cols["obs"][order],
                cols["action"][order],
                cols["reward"][order],
                cols["next_obs"][order],
                cols["terminated"][order] > 0,
                cols["truncated"][order] > 0,
                cols["intervention"][order] > 0,
                [self._sources[j] if j >= 0 else "" for j in cols["source"][order]],
            )

    def sources(self) -> list[str]:
        with self._lock:
            return list(self._sources)

    def rows_by_source(self) -> dict[str, int]:
        """Rows in replay of each named source (a board's share of replay)."""
        with self._lock:
            counts = np.bincount(self._source[: self._size] + 1, minlength=len(self._sources) + 1)
        return {s: int(counts[i + 1]) for i, s in enumerate(self._sources) if counts[i + 1]}

    def evict(self, source: str) -> int:
        """Drop every row of ``source``; how many. The rows kept stay in their order, the
        oldest first, so that the ring overwrites the oldest next."""
        with self._lock:
            i = self._source_index.get(source)
            if i is None:
                return 0
            order = np.arange(self._size)
            if self._size == self.capacity:
                order = np.roll(order, -self._next)  # oldest first
            keep = order[self._source[order] != i]
            dropped = self._size - len(keep)
            if dropped:
                for column in self._columns().values():
                    column[: len(keep)] = column[keep]
                self._size = len(keep)
                self._next = self._size % self.capacity
            return dropped

    def _index_of(self, source: str) -> int:  # holds _lock
        i = self._source_index.get(source)
        if i is None:
            i = self._source_index[source] = len(self._sources)
            self._sources.append(source)
        return i

    def observations(self, n: int, rng: np.random.Generator | None = None) -> np.ndarray:
        """Up to ``n`` distinct stored observations (for calibration and parity checks),
        drawn across sources: ``drawn``'s observations."""
        return self.drawn(n, rng)[0]

    def drawn(self, n: int, rng: np.random.Generator | None = None) -> tuple[np.ndarray, list[str]]:
        """Up to ``n`` distinct stored observations and the board each came from ("" for
        none named). No source gives more than its share, ``ceil(n / sources)``, however
        many rows it holds: one board's data must not make up an export's calibration."""
        with self._lock:
            rng = rng or self._rng
            source = self._source[: self._size]
            ids = np.unique(source)  # [k] source indices, -1 included
            share = -(-n // max(len(ids), 1))
            picked = []
            for i in ids:
                rows = np.flatnonzero(source == i)
                picked.append(rng.choice(rows, size=min(share, len(rows)), replace=False))
            idx = np.concatenate(picked) if picked else np.zeros(0, np.int64)
            idx = rng.permutation(idx)[:n]
            names = [self._sources[j] if j >= 0 else "" for j in source[idx]]
            return self._obs[idx].copy(), names

    # --- durable runs (edge_rl/learner/durable.py) ----------------------------------------

    def state(self) -> PartState:
        """The filled part as it lies (slots 0..len-1, so that sampling after a restore
        draws the same transitions), and the ring's position and sampling rng."""
        with self._lock:
            n = self._size
            arrays = {name: column[:n].copy() for name, column in self._columns().items()}
            meta = {
                "next": self._next,
                "size": n,
                "added": self.added,
                "capacity": self.capacity,
                "rng": self._rng.bit_generator.state,
                "sources": list(self._sources),
            }
        return PartState(meta, arrays)

    def load_state(self, state: PartState) -> None:
        meta, arrays = state.json, state.arrays
        n = int(meta["size"])
        if n > self.capacity or arrays["reward"].shape != (n,):
            raise ValueError(f"replay of {n} transitions does not fit capacity {self.capacity}")
        with self._lock:
            for name, dest in self._columns().items():
                if name in OPTIONAL and name not in arrays:  # saved before it was kept
                    dest[:n] = 0
                    continue
                if arrays[name].shape[1:] != dest.shape[1:]:
                    raise ValueError(
                        f"replay {name}: shape {arrays[name].shape[1:]} saved, "
                        f"{dest.shape[1:]} expected"
                    )
                dest[:n] = arrays[name]
            self._size = n
            self._next = int(meta["next"]) % self.capacity
            self._sources = [str(s) for s in meta.get("sources", [])]
            self._source_index = {s: i for i, s in enumerate(self._sources)}
            self.added = meta["added"]
            self._rng.bit_generator.state = meta["rng"]

    def _columns(self) -> dict[str, np.ndarray]:
        return {
            "obs": self._obs,
            "action": self._action,
            "reward": self._reward,
            "next_obs": self._next_obs,
            "terminated": self._terminated,
            "truncated": self._truncated,
            "intervention": self._intervention,
            "source": self._source,
        }
