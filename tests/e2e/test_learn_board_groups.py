"""``edge-rl learn --fleet 40 --fleet-procs 2``: the learner's simulated fleet as two board
groups (``edge-rl actors``), each of the 40 boards its own actor, and every one of them
contributes to a run that ends at exactly its budget (docs/fleet.md, docs/scale.md)."""

from __future__ import annotations

import json

import pytest

from edge_rl.sim.fleet import fleet_ids
from tests.harness.learn import SMALL_NETS, TINY, run_cli
from tests.harness.paths import REPO

N, PROCS, BUDGET = 40, 2, 2400


def _without_fleet(flags: list[str]) -> list[str]:
    """TINY's flags less its ``--fleet 2``: this run sets its own."""
    i = flags.index("--fleet")
    return flags[:i] + flags[i + 2 :]


@pytest.mark.slow
@pytest.mark.long
def test_learn_runs_forty_boards_in_two_groups_and_each_contributes(tmp_path, mosquitto_available):
    run = tmp_path / "run"
    flags = [
        *_without_fleet(TINY),
        *SMALL_NETS["dqn"],
        "--fleet",
        str(N),
        "--fleet-procs",
        str(PROCS),
        "--set",
        f"total_env_steps={BUDGET}",
        # 16-step slices for 40 boards (min_grant at most lead / (2 x boards)).
        "--set",
        "max_lag_transitions=1280",
        "--set",
        "fleet.start_spread_s=2",
        # 40 boards at 20 statuses/s: the learner asks each for one every 2 s.
        "--set",
        "fleet.max_statuses_per_s=20",
        "--run",
        "grouped",
    ]
    proc = run_cli(
        "learn",
        "--config",
        str(REPO / "examples" / "cartpole_dqn.yaml"),
        "--out",
        str(run),
        *flags,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] == BUDGET
    by_actor = summary["transitions_received_by_actor"]
    ids = fleet_ids(N)
    assert sorted(by_actor) == ids and min(by_actor.values()) > 0, by_actor
    assert sum(by_actor.values()) == BUDGET
    assert sorted(summary["actors"]) == ids
    # Two `edge-rl actors` processes, each with its boards file and log; none per board.
    fleet_dir = run / "fleet"
    assert sorted(p.name for p in fleet_dir.glob("actors-*.log")) == [
        "actors-0.log",
        "actors-1.log",
    ]
    assert len(list(fleet_dir.glob("actors-*.boards.json"))) == PROCS
    assert not list(fleet_dir.glob("sim-*.log"))
