"""Polynomial schedule (Zhu & Gupta 2017): argument checks and values at known steps."""

from __future__ import annotations

import pytest

from edge_rl.compress.schedule import PolynomialSchedule, PruneDecision

GOOD = dict(initial_sparsity=0.0, final_sparsity=0.8, begin_step=100, end_step=500, frequency=100)


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"initial_sparsity": -0.1}, "initial_sparsity must be in"),
        ({"final_sparsity": 1.0}, "final_sparsity must be in"),
        ({"initial_sparsity": 0.5, "final_sparsity": 0.4}, "initial_sparsity must be <="),
        ({"begin_step": -1}, "begin_step must be >= 0"),
        ({"frequency": 0}, "frequency must be >= 1"),
        ({"end_step": 100}, "end_step must be > begin_step"),
        ({"end_step": 450}, "end_step - begin_step must be a multiple of frequency"),
        ({"power": 0.0}, "power must be > 0"),
    ],
)
def test_rejects_bad_arguments(overrides: dict, match: str) -> None:
    with pytest.raises(ValueError, match=f"PolynomialSchedule: {match}"):
        PolynomialSchedule(**{**GOOD, **overrides})


# s_t = 0.8 + (0 - 0.8) * (1 - (t - 100) / 400) ** 3
@pytest.mark.parametrize(
    ("step", "should_prune", "target"),
    [
        (0, False, 0.0),  # before t0: s_i, no pruning
        (100, True, 0.0),  # t0: the first update, at s_i
        (150, False, 0.8 - 0.8 * 0.875**3),  # between updates: the curve, but no update
        (200, True, 0.8 - 0.8 * 0.75**3),  # 0.4625
        (300, True, 0.8 - 0.8 * 0.5**3),  # 0.7
        (400, True, 0.8 - 0.8 * 0.25**3),  # 0.7875
        (500, True, 0.8),  # t0 + n*dt: exactly s_f
        (600, False, 0.8),  # after: held at s_f
    ],
)
def test_values_at_known_steps(step: int, should_prune: bool, target: float) -> None:
    decision = PolynomialSchedule(**GOOD)(step)
    assert isinstance(decision, PruneDecision)
    assert decision.should_prune is should_prune
    assert decision.target_sparsity == pytest.approx(target, abs=1e-12)


def test_targets_rise_monotonically_from_initial_to_final() -> None:
    schedule = PolynomialSchedule(0.2, 0.9, begin_step=0, end_step=1000, frequency=10)
    targets = [schedule(t).target_sparsity for t in range(0, 1001, 10)]
    assert targets[0] == pytest.approx(0.2) and targets[-1] == pytest.approx(0.9)
    assert all(a < b for a, b in zip(targets, targets[1:], strict=False))
