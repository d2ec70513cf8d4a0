"""Hypothesis profiles for the fuzz suite.

Two budgets (``BUDGETS``): every decoder test runs 1,000 cases in the normal suite and
10,000 in its ``deep``-marked variant (``make test-deep``). Both are derandomized (CI sees
the same cases every run) and have no deadline (no timing asserts).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

_COMMON = dict(
    derandomize=True,
    deadline=None,
    database=None,  # derandomized: nothing to replay from a database
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("fuzz", max_examples=1_000, **_COMMON)
settings.register_profile("fuzz-slow", max_examples=10_000, **_COMMON)
NORMAL, SLOW = settings.get_profile("fuzz"), settings.get_profile("fuzz-slow")
BUDGETS = pytest.mark.parametrize(
    "budget",
    [
        pytest.param(NORMAL, id="1000"),
        pytest.param(SLOW, id="10000", marks=[pytest.mark.slow, pytest.mark.deep]),
    ],
)
