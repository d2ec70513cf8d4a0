"""The staged rollout's decisions (deploy/rollout.py) from made-up reports and a made-up
clock: the one seam is what the boards say."""

from __future__ import annotations

import dataclasses

import pytest

from edge_rl.deploy.evidence import next_version
from edge_rl.deploy.rollout import (
    Assign,
    BoardReport,
    Evidence,
    Measured,
    Revert,
    Rollout,
    RolloutPlan,
    Target,
    serving_boards,
)
from edge_rl.learner.fleet.figures import limits_for_env
from edge_rl.types import PolicyBundle
from tests.harness.cartpole_policies import policy_bundle

OLD = Target(5, "a" * 64)
NEW = Target(6, "b" * 64)
RUN = "start-1"
PLAN = RolloutPlan(canary=0.25, window_s=10, min_episodes=3, max_drop=0.1, batch=2, rate=1.0)
CANARIES = ("b0", "b1", "b2")  # with no seed, the first three ids: at least three canaries


def report(actor: str, on: Target = OLD, ret: float | None = 500.0, **kw) -> BoardReport:
    base = BoardReport(
        actor_id=actor,
        state="serving",
        run_id=RUN,
        policy_version=on.version,
        digest=on.digest,
        recent_return=ret,
        served_episodes=20,
        policies_failed=0,
        seen=0.0,
    )
    return dataclasses.replace(base, **kw)


def fleet(n: int = 8) -> dict[str, BoardReport]:
    return {f"b{i}": report(f"b{i}") for i in range(n)}


def serve(reports: dict, actors, on: Target, ret: float, episodes: int = 3) -> None:
    for a in actors:
        reports[a] = report(a, on, ret, served_episodes=episodes)


def test_canaries_first_then_waves_at_the_rate_until_all_serve_it():
    reports = fleet(8)
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0)
    assert r.step(0.0, reports) == [Assign("b0"), Assign("b1"), Assign("b2")]  # at least 3
    assert r.step(1.0, reports) == []  # no evidence yet: wait
    serve(reports, CANARIES, NEW, 495.0, episodes=2)
    assert r.step(2.0, reports) == [] and r.phase == "canary"  # too few episodes
    serve(reports, CANARIES, NEW, 495.0)
    assert r.step(3.0, reports) == [Assign("b3"), Assign("b4")]  # healthy: first wave
    assert r.phase == "waves" and r.canary_return == 495.0
    assert r.step(4.0, reports) == []  # 2 boards at 1 board/s: the next wave at 5 s
    assert r.step(5.0, reports) == [Assign("b5"), Assign("b6")]
    assert r.step(7.0, reports) == [Assign("b7")]
    assert r.outcome is None  # sent, not yet confirmed
    serve(reports, [f"b{i}" for i in range(3, 8)], NEW, 500.0)
    assert r.step(8.0, reports) == []
    out = r.outcome
    assert out is not None and out.result == "deployed" and r.phase == "done"
    assert out.serving_new == tuple(f"b{i}" for i in range(8)) and out.unconfirmed == ()
    assert out.baseline_return == 500.0 and out.rolled_back == () and out.flagged == {}


def test_a_bad_policy_is_stopped_at_the_canary_and_every_canary_rolled_back():
    reports = fleet(8)
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0)
    r.step(0.0, reports)
    serve(reports, CANARIES, NEW, 9.5)
    actions = r.step(1.0, reports)
    assert actions == [Revert(a, OLD) for a in CANARIES]
    assert r.phase == "rollback" and r.outcome is None
    serve(reports, ["b0", "b1"], OLD, 500.0)
    assert r.step(2.0, reports) == [] and r.outcome is None  # b2 not back yet
    serve(reports, ["b2"], OLD, 500.0)
    r.step(3.0, reports)
    out = r.outcome
    assert out.result == "aborted" and "below" in out.reason
    assert out.assigned == CANARIES and out.rolled_back == CANARIES
    assert out.unconfirmed == () and out.canary_return == 9.5
    assert r.step(4.0, reports) == []  # done: nothing more is sent


def test_the_threshold_is_a_share_of_the_previous_return_for_either_sign():
    for old, ok, bad in [(500.0, 451.0, 449.0), (-200.0, -219.0, -221.0)]:
        for ret, expected in [(ok, "waves"), (bad, "rollback")]:
            reports = {a: report(a, ret=old) for a in ("b0", "b1", "b2", "b3")}
            r = Rollout(PLAN, NEW, reports, RUN, now=0.0)
            r.step(0.0, reports)
            serve(reports, CANARIES, NEW, ret)
            r.step(1.0, reports)
            assert r.phase == expected, (old, ret)


def test_refusals_by_most_of_the_assigned_boards_abort_even_in_the_waves():
    reports = fleet(4)
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0)
    r.step(0.0, reports)
    for a in ("b0", "b1"):  # 2 of 3 canaries refused it (bad signature, hash...)
        reports[a] = report(a, policies_failed=1)
    assert r.step(0.5, reports) == [Revert(a, OLD) for a in CANARIES]
    r.step(1.0, reports)  # b0 and b1 still serve OLD; b2 not back within confirm_s
    r.step(31.0, reports)
    assert r.outcome.result == "aborted" and "refused by b0, b1 of 3" in r.outcome.reason

    reports = fleet(6)
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0)
    r.step(0.0, reports)
    serve(reports, CANARIES, NEW, 500.0)
    assert r.step(1.0, reports) == [Assign("b3"), Assign("b4")]
    for a in ("b3", "b4", "b2"):
        reports[a] = report(a, policies_failed=3)
    assert r.step(1.5, reports) == [Revert(a, OLD) for a in ("b0", "b1", "b2", "b3", "b4")]
    assert r.rest == []  # b5 is never sent it


def test_one_board_that_says_it_refused_a_good_policy_vetoes_nothing():
    """The attack: a board adds 1 to its policies_failed during a rollout."""
    reports = fleet(4)
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0)
    r.step(0.0, reports)
    reports["b1"] = report("b1", policies_failed=1)
    serve(reports, ["b0", "b2"], NEW, 500.0)
    assert r.step(1.0, reports) == [Assign("b3")]  # the two others showed it: waves
    serve(reports, ["b3"], NEW, 500.0)
    r.step(2.0, reports)
    out = r.outcome
    assert out.result == "deployed" and out.serving_new == ("b0", "b2", "b3")
    assert out.flagged == {"b1": "refused a policy the other boards took"}


def test_failures_from_before_the_rollout_do_not_count():
    reports = {a: report(a, policies_failed=7) for a in ("b0", "b1")}
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0)
    r.step(0.0, reports)
    assert r.phase == "canary" and r.step(1.0, reports) == []


def test_the_window_s_end_aborts_unless_most_canaries_showed_it():
    reports = fleet(4)
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0)
    r.step(0.0, reports)
    serve(reports, ["b0"], NEW, 500.0)  # one of three shows it; b1 too slow; b2 silent
    serve(reports, ["b1"], NEW, 500.0, episodes=1)
    assert r.step(9.9, reports) == []
    assert r.step(10.0, reports) == [Revert(a, OLD) for a in CANARIES]
    serve(reports, ["b0"], OLD, 500.0)  # b1 still on NEW
    assert r.step(39.9, reports) == [] and r.outcome is None
    r.step(40.0, reports)  # b1 not back within confirm_s: said so
    assert r.outcome.result == "aborted" and r.outcome.unconfirmed == ("b1",)
    assert r.outcome.rolled_back == ("b0", "b2") and "within 10 s" in r.outcome.reason

    reports = fleet(4)  # two of three: the silent one is flagged, the rollout goes on
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0)
    r.step(0.0, reports)
    serve(reports, ["b0", "b1"], NEW, 500.0)
    assert r.step(9.9, reports) == []
    assert r.step(10.0, reports) == [Assign("b3")]
    assert r.flagged == {"b2": "showed no episodes within 10 s"}


def test_a_board_that_never_confirms_a_wave_leaves_the_rollout_incomplete():
    reports = fleet(5)
    plan = dataclasses.replace(PLAN, canary=0.3, batch=5)
    r = Rollout(plan, NEW, reports, RUN, now=0.0)
    r.step(0.0, reports)
    serve(reports, CANARIES, NEW, 500.0)
    assert r.step(1.0, reports) == [Assign("b3"), Assign("b4")]
    serve(reports, ["b3"], NEW, 500.0)
    r.step(30.9, reports)
    assert r.outcome is None
    r.step(31.0, reports)
    assert r.outcome.result == "incomplete" and r.outcome.unconfirmed == ("b4",)
    assert r.outcome.serving_new == ("b0", "b1", "b2", "b3") and r.outcome.rolled_back == ()


def test_only_boards_serving_the_run_start_take_part():
    reports = {
        "ok": report("ok"),
        "off": report("off", state="offline"),
        "other": report("other", run_id="another start"),
        "empty": report("empty", on=Target(0, "")),
    }
    assert serving_boards(reports, RUN) == ["ok"]
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0)
    assert r.skipped == ("empty", "off", "other") and r.canaries == ("ok",)
    with pytest.raises(ValueError, match="no board"):
        Rollout(PLAN, NEW, {"off": reports["off"]}, RUN, now=0.0)


def test_without_a_previous_return_only_evidence_and_refusals_decide():
    reports = {a: report(a, ret=None) for a in ("b0", "b1", "b2", "b3")}
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0)
    assert r.baseline is None
    r.step(0.0, reports)
    serve(reports, CANARIES, NEW, 1.0)
    assert r.step(1.0, reports) == [Assign("b3")]


@pytest.mark.parametrize(
    "bad",
    [
        {"canary": 0},
        {"canary": 1.5},
        {"window_s": 0},
        {"rate": 0},
        {"batch": 0},
        {"min_episodes": 0},
        {"max_drop": -0.1},
    ],
)
def test_a_plan_out_of_range_is_refused(bad):
    with pytest.raises(ValueError):
        RolloutPlan(**bad)


def test_the_canaries_are_drawn_by_the_seed_not_the_first_ids():
    reports = fleet(16)  # 4 canaries of 16
    draws = {s: Rollout(PLAN, NEW, reports, RUN, now=0.0, seed=s).canaries for s in range(20)}
    assert all(len(c) == 4 and set(c) <= set(reports) for c in draws.values())
    assert len(set(draws.values())) > 10  # 1,820 ways to pick 4 of 16
    assert sum(c == ("b0", "b1", "b10", "b11") for c in draws.values()) <= 1
    again = Rollout(PLAN, NEW, reports, RUN, now=0.0, seed=7)
    assert again.canaries == draws[7]  # the printed seed draws them again
    assert sorted([*again.canaries, *again.rest]) == sorted(reports)
    assert again.step(0.0, reports) == [Assign(a) for a in draws[7]]


# --- evidence: what the deployer measured itself, and the run's own version counter ------

CARTPOLE = limits_for_env("CartPole-v1")


def measured(on: Target, ret: float) -> Measured:
    return Measured(on.digest, (ret - 5.0, ret, ret + 5.0))


def test_a_board_claiming_minus_1e300_cannot_lower_the_bar_for_a_bad_policy():
    """The attack: the baseline was the plain mean of every board's claimed return."""
    reports = fleet(5)
    reports["b4"] = report("b4", ret=-1e300)
    evidence = Evidence(CARTPOLE, measured(OLD, 500.0), measured(NEW, 9.3), 5)
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0, evidence=evidence)
    assert r.baseline == 500.0 and r.reported_baseline == 500.0  # clamped to 0, then median
    r.step(0.0, reports)
    serve(reports, CANARIES, NEW, 480.0)  # even if the canaries said it was fine
    assert r.step(1.0, reports) == [Revert(a, OLD) for a in CANARIES]
    r.step(2.0, reports)
    serve(reports, CANARIES, OLD, 500.0)
    r.step(3.0, reports)
    assert r.outcome.result == "aborted" and "(measured) below" in r.outcome.reason
    assert r.outcome.measured_candidate == 9.3
    assert r.flagged["b4"] == "reports 0 for the previous policy, measured 500"
    assert set(r.flagged) == {"b4", *CANARIES}  # each canary's 480 against a measured 9.3


def test_a_board_claiming_1e300_cannot_veto_a_good_policy():
    reports = fleet(5)
    reports["b4"] = report("b4", ret=1e300)
    evidence = Evidence(CARTPOLE, measured(OLD, 300.0), measured(NEW, 490.0), 5)
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0, evidence=evidence)
    assert r.baseline == 300.0
    r.step(0.0, reports)
    serve(reports, CANARIES, NEW, 490.0)
    assert r.step(1.0, reports) == [Assign("b3"), Assign("b4")]  # healthy: waves
    assert "b4" in r.flagged  # 500 (clamped) for a policy measured at 300: outside


def test_without_measurements_the_median_of_clamped_reports_decides():
    reports = fleet(5)
    reports["b0"] = report("b0", ret=1e300)
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0, evidence=Evidence(CARTPOLE))
    assert r.baseline == 500.0
    r.step(0.0, reports)
    serve(reports, CANARIES, NEW, 495.0)
    reports["b0"] = report("b0", NEW, -1e300, served_episodes=3)  # one canary lies low
    assert r.step(1.0, reports) == [Assign("b3"), Assign("b4")]  # median 495 holds
    assert r.canary_return == 495.0


def test_a_board_claiming_a_version_above_the_runs_takes_no_part_and_is_flagged():
    reports = fleet(4)
    reports["ghost"] = report("ghost", Target(2**53 - 1, "c" * 64))
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0, evidence=Evidence(CARTPOLE, version_ceiling=5))
    assert "ghost" not in r.boards and "ghost" in r.skipped
    assert r.flagged == {"ghost": "claims v9007199254740991, above the run's newest v5"}


def retained(version: int, run_id: str = RUN) -> PolicyBundle:
    return policy_bundle(b"model", run="r", run_id=run_id, version=version)


def test_the_next_version_is_the_runs_own_counter_never_a_boards_word():
    reports = fleet(4)
    reports["ghost"] = report("ghost", Target(2**53 - 1, "c" * 64))
    assert next_version(retained(5), reports, RUN) == 6
    assert next_version(None, reports, RUN) == 6  # the median of the serving boards' 5s
    assert next_version(retained(9, "another start"), reports, RUN) == 6
    with pytest.raises(ValueError, match="no version is left"):
        next_version(retained(2**53 - 1), reports, RUN)
