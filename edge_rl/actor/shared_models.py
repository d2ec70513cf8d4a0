"""One LiteRT interpreter per model, shared by the boards of one board group (one process).

    models = SharedModels()                      # one per process (actor/group.py)
    slot = PolicySlot(spec, verifier, run=..., models=models)
    # in the slot, after the signature, run, version, spec and sha256 checks have held:
    runner = models.runner(model_bytes, sha256_hex, num_threads=1, runtime="ai_edge_litert")

What is shared, and why that is safe: the key is the SHA-256 of the model bytes that the
asking board has itself verified (signature, then the manifest's hash over the
decompressed bytes), plus the interpreter settings. Two boards that get the same key hold
the same bytes, so one interpreter built from them answers both. Nothing before that
point is shared: every board still decodes and verifies every bundle itself, and a board
that refuses a bundle never reaches the cache. The interpreter is not thread-safe, so
each call runs under the entry's lock (a tiny MLP's invoke takes microseconds; boards in
one process take turns on the GIL anyway).

Only ``capacity`` models are kept (newest first); a board still holding an older one
keeps it alive until it loads the next.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from edge_rl.runtime.litert import TFLitePolicy


class SharedRunner:
    """A ``TFLitePolicy`` several boards call: each call under one lock."""

    def __init__(self, policy: TFLitePolicy) -> None:
        self._policy = policy
        self._lock = threading.Lock()
        self.runtime = policy.runtime
        self.input_shape = policy.input_shape
        self.output_shape = policy.output_shape
        self.load_seconds = policy.load_seconds

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        with self._lock:
            return self._policy(obs)

    def output_shape_on_zeros(self) -> tuple[int, ...]:
        with self._lock:
            return self._policy.output_shape_on_zeros()


class SharedModels:
    """Verified model bytes' digest (and settings) -> one ``SharedRunner``."""

    def __init__(self, capacity: int = 4) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._entries: OrderedDict[tuple, SharedRunner] = OrderedDict()
        self._lock = threading.Lock()
        self.built = 0  # interpreters constructed
        self.reused = 0  # loads answered from the cache

    def __len__(self) -> int:
        return len(self._entries)

    def runner(
        self,
        model: bytes,
        sha256: str,
        *,
        num_threads: int = 1,
        runtime: str = "ai_edge_litert",
        max_tensor_bytes: int | None = None,
    ) -> SharedRunner:
        """The shared interpreter of ``model``, whose SHA-256 the caller has checked is
        ``sha256``; built on the first ask. Raises what ``TFLitePolicy`` raises (nothing
        is cached then)."""
        key = (sha256, len(model), num_threads, runtime, max_tensor_bytes)
        # One lock around the build too: a policy reaching hundreds of boards at once is
        # built once, the others wait milliseconds for it.
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                self.reused += 1
                return hit
            policy = TFLitePolicy(
                model, num_threads=num_threads, runtime=runtime, max_tensor_bytes=max_tensor_bytes
            )
            runner = SharedRunner(policy)
            self._entries[key] = runner
            self.built += 1
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
            return runner
