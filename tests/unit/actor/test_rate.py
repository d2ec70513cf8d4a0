"""Fixed-rate control (actor/rate.py) on a clock the test drives: steps at their deadlines,
misses counted when a step runs past whole periods, no burst to catch up."""

from __future__ import annotations

import pytest

from edge_rl.actor.rate import Rate


class FakeTime:
    """A clock that moves only when the test's work or the rate's sleep moves it."""

    def __init__(self) -> None:
        self.t = 1000.0
        self.starts: list[float] = []

    def clock(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        assert s > 0
        self.t += s


def run(hz: float, work: list[float]) -> tuple[Rate, FakeTime]:
    ft = FakeTime()
    rate = Rate(hz, clock=ft.clock, sleep=ft.sleep)
    for w in work:
        rate.tick()
        ft.starts.append(ft.t)
        ft.t += w  # the step's inference and env step
    return rate, ft


def test_steps_start_at_their_deadlines_whatever_their_work():
    rate, ft = run(50, [0.001, 0.015, 0.0, 0.019])
    assert [round(t - 1000, 6) for t in ft.starts] == [0.0, 0.02, 0.04, 0.06]
    assert rate.misses == 0 and rate.periods == 4 and rate.jitter_ms(99) == 0.0


def test_a_step_that_runs_past_whole_periods_is_a_miss_and_the_next_skips_ahead():
    rate, ft = run(50, [0.001, 0.050, 0.001, 0.001])  # step 2 takes two and a half periods
    starts = [round(t - 1000, 6) for t in ft.starts]
    # Deadlines 0.02 and 0.04 passed during step 2 (which ends at 0.07): step 3 starts at
    # once, late by 10 ms after 0.06, and step 4 keeps the schedule at 0.08: no burst.
    assert starts == [0.0, 0.02, 0.07, 0.08]
    assert rate.misses == 1
    assert rate.jitter_ms(100) == pytest.approx(10.0)


def test_a_slow_loop_misses_in_proportion():
    rate, _ = run(50, [0.03] * 100)  # 1.5 periods of work per step
    assert 45 <= rate.misses <= 55  # one period in three has no step start


def test_restart_begins_a_new_schedule():
    ft = FakeTime()
    rate = Rate(10, clock=ft.clock, sleep=ft.sleep)
    rate.tick()
    ft.t += 5.0  # paused: no steps for a while
    rate.restart()
    rate.tick()
    assert rate.misses == 0 and rate.periods == 2
