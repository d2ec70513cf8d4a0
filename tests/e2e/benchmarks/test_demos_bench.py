"""benchmarks/demos.py's table: the env steps to a return, with and without a full window,
and whether an arm stays there, read from a metrics.csv as the learner writes it."""

from __future__ import annotations

import csv
import sys

from edge_rl.learner.metrics import METRICS
from tests.harness.paths import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import demos  # noqa: E402


def _metrics(run, rows):
    """metrics.csv with the learner's columns; ``rows``: (env_steps, episodes, recent)."""
    run.mkdir()
    with open(run / "metrics.csv", "w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=list(METRICS))
        out.writeheader()
        for steps, episodes, recent in rows:
            out.writerow({"env_steps": steps, "episodes": episodes, "recent_return": recent})


def test_steps_to_a_return_over_a_full_window_and_the_lowest_after(tmp_path):
    run = tmp_path / "pretrained-s0"
    _metrics(
        run,
        [
            (0, 0, "nan"),  # before any episode ends
            (1_000, 4, -150.0),  # four good episodes: reached, the window not full
            (3_000, 15, -250.0),
            (4_200, 21, -190.0),  # reached over 20 episodes
            (6_000, 30, -205.0),  # a dip after it
            (8_000, 40, -160.0),
        ],
    )
    rows = demos.returns(run)
    assert demos.steps_to(rows, -200.0) == 1_000
    assert demos.steps_to(rows, -200.0, window=20) == 4_200
    assert demos.lowest_after(rows, 4_200) == -205.0
    assert demos.steps_to(rows, -100.0) is None and demos.lowest_after(rows, None) is None
