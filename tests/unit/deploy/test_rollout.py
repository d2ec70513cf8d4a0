"""The staged rollout's decisions (deploy/rollout.py) from made-up reports and a made-up
clock: the one seam is what the boards say."""

from __future__ import annotations

import dataclasses

import pytest

from edge_rl.deploy.rollout import (
    Assign,
    BoardReport,
    Revert,
    Rollout,
    RolloutPlan,
    Target,
    serving_boards,
)

OLD = Target(5, "a" * 64)
NEW = Target(6, "b" * 64)
RUN = "start-1"
PLAN = RolloutPlan(canary=0.25, window_s=10, min_episodes=3, max_drop=0.1, batch=2, rate=1.0)


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
    assert r.step(0.0, reports) == [Assign("b0"), Assign("b1")]  # 25 % of 8
    assert r.step(1.0, reports) == []  # no evidence yet: wait
    serve(reports, ["b0", "b1"], NEW, 495.0, episodes=2)
    assert r.step(2.0, reports) == [] and r.phase == "canary"  # too few episodes
    serve(reports, ["b0", "b1"], NEW, 495.0)
    assert r.step(3.0, reports) == [Assign("b2"), Assign("b3")]  # healthy: first wave
    assert r.phase == "waves" and r.canary_return == 495.0
    assert r.step(4.0, reports) == []  # 2 boards at 1 board/s: the next wave at 5 s
    assert r.step(5.0, reports) == [Assign("b4"), Assign("b5")]
    assert r.step(7.0, reports) == [Assign("b6"), Assign("b7")]
    assert r.outcome is None  # sent, not yet confirmed
    serve(reports, [f"b{i}" for i in range(2, 8)], NEW, 500.0)
    assert r.step(8.0, reports) == []
    out = r.outcome
    assert out is not None and out.result == "deployed" and r.phase == "done"
    assert out.serving_new == tuple(f"b{i}" for i in range(8)) and out.unconfirmed == ()
    assert out.baseline_return == 500.0 and out.rolled_back == ()


def test_a_bad_policy_is_stopped_at_the_canary_and_every_canary_rolled_back():
    reports = fleet(8)
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0)
    r.step(0.0, reports)
    serve(reports, ["b0", "b1"], NEW, 9.5)
    actions = r.step(1.0, reports)
    assert actions == [Revert("b0", OLD), Revert("b1", OLD)]
    assert r.phase == "rollback" and r.outcome is None
    serve(reports, ["b0"], OLD, 500.0)
    assert r.step(2.0, reports) == [] and r.outcome is None  # b1 not back yet
    serve(reports, ["b1"], OLD, 500.0)
    r.step(3.0, reports)
    out = r.outcome
    assert out.result == "aborted" and "below" in out.reason
    assert out.assigned == ("b0", "b1") and out.rolled_back == ("b0", "b1")
    assert out.unconfirmed == () and out.canary_return == 9.5
    assert r.step(4.0, reports) == []  # done: nothing more is sent


def test_the_threshold_is_a_share_of_the_previous_return_for_either_sign():
    for old, ok, bad in [(500.0, 451.0, 449.0), (-200.0, -219.0, -221.0)]:
        for ret, expected in [(ok, "waves"), (bad, "rollback")]:
            reports = {a: report(a, ret=old) for a in ("b0", "b1", "b2", "b3")}
            r = Rollout(PLAN, NEW, reports, RUN, now=0.0)
            r.step(0.0, reports)
            serve(reports, ["b0"], NEW, ret)
            r.step(1.0, reports)
            assert r.phase == expected, (old, ret)


def test_any_verification_failure_aborts_at_once_even_in_the_waves():
    reports = fleet(4)
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0)
    r.step(0.0, reports)
    reports["b0"] = report("b0", policies_failed=1)  # b0 refused it (bad signature, hash...)
    assert r.step(0.5, reports) == [Revert("b0", OLD)]
    r.step(1.0, reports)  # b0 still serves OLD: back at once
    assert r.outcome.result == "aborted" and "refused by b0" in r.outcome.reason

    reports = fleet(4)
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0)
    r.step(0.0, reports)
    serve(reports, ["b0"], NEW, 500.0)
    assert r.step(1.0, reports) == [Assign("b1"), Assign("b2")]
    reports["b2"] = report("b2", policies_failed=3)
    assert r.step(1.5, reports) == [Revert("b0", OLD), Revert("b1", OLD), Revert("b2", OLD)]
    assert r.rest == []  # b3 is never sent it


def test_failures_from_before_the_rollout_do_not_count():
    reports = {a: report(a, policies_failed=7) for a in ("b0", "b1")}
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0)
    r.step(0.0, reports)
    assert r.phase == "canary" and r.step(1.0, reports) == []


def test_a_silent_canary_aborts_at_the_window_s_end():
    reports = fleet(4)
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0)
    r.step(0.0, reports)
    serve(reports, ["b0"], NEW, 500.0, episodes=1)  # too slow, then silent
    assert r.step(9.9, reports) == []
    assert r.step(10.0, reports) == [Revert("b0", OLD)]
    assert r.step(39.9, reports) == [] and r.outcome is None
    r.step(40.0, reports)  # not back within confirm_s: said so
    assert r.outcome.result == "aborted" and r.outcome.unconfirmed == ("b0",)
    assert r.outcome.rolled_back == () and "within 10 s" in r.outcome.reason


def test_a_board_that_never_confirms_a_wave_leaves_the_rollout_incomplete():
    reports = fleet(3)
    plan = dataclasses.replace(PLAN, canary=0.3, batch=5)
    r = Rollout(plan, NEW, reports, RUN, now=0.0)
    r.step(0.0, reports)
    serve(reports, ["b0"], NEW, 500.0)
    assert r.step(1.0, reports) == [Assign("b1"), Assign("b2")]
    serve(reports, ["b1"], NEW, 500.0)
    r.step(30.9, reports)
    assert r.outcome is None
    r.step(31.0, reports)
    assert r.outcome.result == "incomplete" and r.outcome.unconfirmed == ("b2",)
    assert r.outcome.serving_new == ("b0", "b1") and r.outcome.rolled_back == ()


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
    reports = {a: report(a, ret=None) for a in ("b0", "b1")}
    r = Rollout(PLAN, NEW, reports, RUN, now=0.0)
    assert r.baseline is None
    r.step(0.0, reports)
    serve(reports, ["b0"], NEW, 1.0)
    assert r.step(1.0, reports) == [Assign("b1")]


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
