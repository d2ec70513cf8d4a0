"""Pruning schedules: ``step -> PruneDecision(should_prune, target_sparsity)``.

Pure Python (no TensorFlow), so that the reward-aware controller (``controller.py``, also
pure Python) implements the same protocol and the learner drives GST and the iterative
baseline with one loop (see ``pruning.py``).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol


class PruneDecision(NamedTuple):
    should_prune: bool  # re-rank blocks and update the masks at this step
    target_sparsity: float  # fraction of blocks to zero, in [0, 1)


class Schedule(Protocol):
    def __call__(self, step: int) -> PruneDecision: ...


class PolynomialSchedule:
    """Gradual pruning, Zhu & Gupta 2017 ("To prune, or not to prune"), eq. (1)::

        s_t = s_f + (s_i - s_f) * (1 - (t - t0) / (n * dt)) ** power     t0 <= t <= t0 + n*dt

    with ``t0 = begin_step``, ``n * dt = end_step - begin_step``, ``dt = frequency`` and
    ``power = 3`` in the paper. Masks are updated at ``t = t0, t0 + dt, ..., t0 + n*dt``; so
    that the last update reaches ``s_f`` exactly, ``end_step - begin_step`` must be a
    positive multiple of ``frequency``. Before ``t0`` the target is ``s_i``, after the end
    ``s_f``, and nothing is pruned.
    """

    def __init__(
        self,
        initial_sparsity: float,
        final_sparsity: float,
        begin_step: int,
        end_step: int,
        frequency: int,
        power: float = 3.0,
    ) -> None:
        _check(
            0.0 <= initial_sparsity < 1.0, "initial_sparsity must be in [0, 1)", initial_sparsity
        )
        _check(0.0 <= final_sparsity < 1.0, "final_sparsity must be in [0, 1)", final_sparsity)
        _check(
            initial_sparsity <= final_sparsity,
            "initial_sparsity must be <= final_sparsity",
            (initial_sparsity, final_sparsity),
        )
        _check(begin_step >= 0, "begin_step must be >= 0", begin_step)
        _check(frequency >= 1, "frequency must be >= 1", frequency)
        _check(end_step > begin_step, "end_step must be > begin_step", (begin_step, end_step))
        _check(
            (end_step - begin_step) % frequency == 0,
            "end_step - begin_step must be a multiple of frequency",
            (begin_step, end_step, frequency),
        )
        _check(power > 0, "power must be > 0", power)
        self.initial_sparsity = float(initial_sparsity)
        self.final_sparsity = float(final_sparsity)
        self.begin_step = int(begin_step)
        self.end_step = int(end_step)
        self.frequency = int(frequency)
        self.power = float(power)

    def __call__(self, step: int) -> PruneDecision:
        t = min(max(step, self.begin_step), self.end_step)
        progress = (t - self.begin_step) / (self.end_step - self.begin_step)  # [0, 1]
        s_i, s_f = self.initial_sparsity, self.final_sparsity
        target = s_f + (s_i - s_f) * (1.0 - progress) ** self.power
        in_range = self.begin_step <= step <= self.end_step
        return PruneDecision(in_range and (step - self.begin_step) % self.frequency == 0, target)


def _check(ok: bool, message: str, value: object) -> None:
    if not ok:
        raise ValueError(f"PolynomialSchedule: {message}, got {value!r}")
