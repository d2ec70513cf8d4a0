"""One real ``edge-rl learn`` of the CartPole example per session, shared by the checks that
only read what it leaves: summary.json, the run directory's files, the report, eval, the
runtime breakdown, energy.

A run costs ~30 s on 2 cores (TensorFlow imported twice, a broker, a fleet); one serves
every reader. Its flags are the smoke run's (``TINY``, small networks) with what each reader
needs of it:

* the config's own ``eval_episodes`` (10): the CLI check reads that the summary says so;
* ``max_lag_transitions=100``, ``replay_ratio=1`` and an export every 50 updates: the fleet
  waits for updates, so that policies go out and actors load them during the run (the
  breakdown check reads the policy-slot buckets and at least two publishes);
* ``select_every=2`` (from ``TINY``): the learner scores policies, so the report draws every
  plot;
* ``energy.region=atlantis``: codecarbon warns that it has no such region, on any host (the
  CLI check reads that its warnings reach learner.log and not the terminal).

A test that needs a run of another shape (a fault, a signal, a different config) starts its
own; a test that writes into the shared run directory would make the others depend on order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.harness.learn import SMALL_NETS, TINY, run_cli
from tests.harness.paths import REPO

CONFIG = REPO / "examples" / "cartpole_dqn.yaml"
BUDGET = 1200  # TINY's total_env_steps
NAME = "cartpole-tiny"  # the run directory's name, which the report shows


def _without(flags: list[str], key: str) -> list[str]:
    """``flags`` less the ``--set KEY=...`` pair for ``key``."""
    out: list[str] = []
    for flag in flags:
        if flag.startswith(key + "=") and out and out[-1] == "--set":
            out.pop()
        else:
            out.append(flag)
    return out


FLAGS = [
    *_without(TINY, "eval_episodes"),
    *SMALL_NETS["dqn"],
    *("--set", "max_lag_transitions=100"),
    *("--set", "replay_ratio=1"),
    *("--set", "export.every_updates=50"),
    *("--set", f"run={NAME}"),
    *("--set", "energy.region=atlantis"),
]


@dataclass(frozen=True)
class LearnRun:
    """A finished run: where it wrote, its budget, its output, and the repository's CSV
    files before it started (codecarbon must write none)."""

    run_dir: Path
    config: Path
    budget: int
    stdout: str
    stderr: str
    repo_csvs_before: frozenset[Path]


@pytest.fixture(scope="session")
def cartpole_run(tmp_path_factory, mosquitto_available) -> LearnRun:
    """The CartPole example at a tiny budget, run once; it must exit 0."""
    assert f"total_env_steps={BUDGET}" in FLAGS
    run = tmp_path_factory.mktemp("shared-run") / NAME
    csvs = frozenset(REPO.glob("*.csv"))
    proc = run_cli("learn", "--config", str(CONFIG), "--out", str(run), *FLAGS)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return LearnRun(run, CONFIG, BUDGET, proc.stdout, proc.stderr, csvs)
