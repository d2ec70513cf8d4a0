"""Array and environment specs: what an observation and an action look like.

Numpy only (no gymnasium import), so that the wire codec and the learner's ingest can check
a batch against the spec on a board or a learner alike. ``EnvSpec.from_gym`` duck-types
the gymnasium spaces it is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class EnvSpec:
    """Observation and action spaces of one environment, in a wire-friendly form.

    Discrete actions: ``num_actions`` > 0 and ``action_shape == ()`` (int64 on the wire).
    Box actions: ``num_actions == 0``, ``action_low``/``action_high`` give the bounds.
    """

    obs_shape: tuple[int, ...]
    num_actions: int = 0
    action_shape: tuple[int, ...] = ()
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not self.obs_shape or any(d <= 0 for d in self.obs_shape):
            raise ValueError(f"obs_shape must be non-empty and positive, got {self.obs_shape}")
        if self.discrete:
            if self.action_shape != ():
                raise ValueError("a discrete action space has action_shape ()")
        else:
            size = int(np.prod(self.action_shape)) if self.action_shape else 0
            if size <= 0:
                raise ValueError("a continuous action space needs a non-empty action_shape")
            if len(self.action_low) != size or len(self.action_high) != size:
                raise ValueError("action_low/high must have one entry per action dimension")
            if any(lo >= hi for lo, hi in zip(self.action_low, self.action_high, strict=True)):
                raise ValueError("action_low must be below action_high")

    @property
    def discrete(self) -> bool:
        return self.num_actions > 0

    @property
    def obs_dtype(self) -> np.dtype:
        return np.dtype(np.float32)

    @property
    def action_dtype(self) -> np.dtype:
        return np.dtype(np.int64) if self.discrete else np.dtype(np.float32)

    @classmethod
    def from_gym(cls, observation_space: Any, action_space: Any) -> EnvSpec:
        """Build a spec from gymnasium ``Box``/``Discrete`` spaces (duck-typed)."""
        obs_shape = tuple(int(d) for d in observation_space.shape)
        if hasattr(action_space, "n"):
            if int(getattr(action_space, "start", 0)) != 0:
                raise ValueError("Discrete action spaces must start at 0")
            return cls(obs_shape=obs_shape, num_actions=int(action_space.n))
        low = np.asarray(action_space.low, dtype=np.float64).reshape(-1)
        high = np.asarray(action_space.high, dtype=np.float64).reshape(-1)
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            raise ValueError("continuous action spaces must be bounded")
        return cls(
            obs_shape=obs_shape,
            action_shape=tuple(int(d) for d in action_space.shape),
            action_low=tuple(float(x) for x in low),
            action_high=tuple(float(x) for x in high),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "obs_shape": list(self.obs_shape),
            "num_actions": self.num_actions,
            "action_shape": list(self.action_shape),
            "action_low": list(self.action_low),
            "action_high": list(self.action_high),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EnvSpec:
        return cls(
            obs_shape=tuple(int(x) for x in d["obs_shape"]),
            num_actions=int(d.get("num_actions", 0)),
            action_shape=tuple(int(x) for x in d.get("action_shape", ())),
            action_low=tuple(float(x) for x in d.get("action_low", ())),
            action_high=tuple(float(x) for x in d.get("action_high", ())),
        )
