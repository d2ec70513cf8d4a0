"""benchmarks/attacks.py at a tiny budget, the outlier and wire arms: the outlying board is
quarantined (or holds a share, not all), the wire attacks are each refused and counted, the
attacker holds no more than its grant, and each run reaches its budget without a stall
(the clean arm, the deploy arm and the deployed returns side by side take minutes:
docs/security.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.harness.paths import REPO

STEPS = 4000


def run_attacks(tmp_path, steps: int, arms: str) -> tuple[subprocess.CompletedProcess, list]:
    """benchmarks/attacks.py on seed 1 at ``steps`` with ``arms``: its output and results."""
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "attacks.py"),
            *("--seeds", "1", "--steps", str(steps), "--arms", arms, "--out", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    return proc, [json.loads(x) for x in lines]


@pytest.mark.slow
@pytest.mark.bench
@pytest.mark.timeout(1000)
def test_attacks_outlier_and_wire_arms(tmp_path, mosquitto_available):
    proc, results = run_attacks(tmp_path, STEPS, "outlier,wire")
    outlier, wire = results
    assert (outlier["seed"], outlier["arm"], outlier["env_steps"]) == (1, "outlier", STEPS)
    # At 4,000 steps the outlier (200-step episodes, a quarter of the credit at most) may
    # not finish the 5 episodes the rule needs before the budget: the table must say
    # which. Detection itself: tests/e2e/security/test_quarantine_run.py.
    left = outlier["replay_rows"].get("outlier", 0)
    if outlier["quarantined"]:
        assert set(outlier["quarantined"]) == {"outlier"}
        assert left == 0  # every row of a quarantined board evicted
    else:
        assert 0 < left < STEPS  # a share of the run, not all of it
    assert outlier["return"] >= 0

    assert (wire["arm"], wire["env_steps"], wire["budget"]) == ("wire", STEPS, STEPS)
    assert "attack_error" not in wire and wire["counted"], wire
    assert wire["rejected"]["implausible_reward"] == 2  # 19,000 of 1e6; (g)'s truncated 1e6
    assert wire["rejected"]["over_credit"] == 2  # grant + 1; seq 2^53-1
    assert wire["rejected"]["not_owner"] == 2  # the old session; the twin under sim-01
    assert wire["status_over_credit"] >= 1 and wire["actor_sessions_refused"] == 1
    assert 0 < wire["taken_by_actor"]["intruder"] <= wire["granted"]["intruder"]
    assert wire["stalls"] == [] and wire["return"] >= 0

    # One row an attack, the arm's figures in it.
    rows = [x for x in proc.stdout.splitlines() if x.startswith("| (")]
    assert [r.split("|")[1].strip()[:3] for r in rows] == ["(a)"] * 2 + [
        "(b)",
        "(c)",
        "(g)",
        "(h)",
    ]
    quarantined = rows[-1].split("|")[3]
    assert ("quarantine at" in quarantined) == bool(outlier["quarantined"])


@pytest.mark.slow
@pytest.mark.bench
@pytest.mark.timeout(1000)
def test_attacks_observation_done_flag_and_rollout_arms(tmp_path, mosquitto_available):
    """Issue 32's attacks at a tiny budget: velocities of ±9.9e5 are refused by reason and
    none of the board's rows is taken; a board with its done flags inverted holds no more
    than its grant; a board lying during `edge-rl deploy` neither lets a random network
    through nor vetoes a good policy, nor numbers the next one."""
    proc, results = run_attacks(tmp_path, 3000, "observations,done-flags,rollout")
    drift, flipped, rollout = results
    assert drift["rejected"].get("implausible_obs", 0) >= 1, drift
    assert drift["taken_by_actor"].get("intruder", 0) == 0 and drift["exports_failed"] == 0
    assert 0 < flipped["flipped_sent"] and (
        flipped["taken_by_actor"].get("intruder", 0) <= flipped["granted"]["intruder"]
    )
    assert all(r["env_steps"] == r["budget"] and r["summary_strict_json"] for r in results)
    served = rollout["served"]
    bad, bad_liar = served["bad, clean"], served["bad, liar claims -1e300"]
    assert bad["result"] == bad_liar["result"] == "aborted", served
    assert "liar" in bad_liar["flagged"]
    good = served["good, liar claims 1e300 and refuses"]
    assert good["result"] == "deployed" and "liar" in good["flagged"], served
    last = served["good, liar's retained v2^53-1, liar gone"]
    assert last["result"] == "deployed" and last["version"] == good["version"] + 1, served
    assert "rollouts after the run" in proc.stdout
