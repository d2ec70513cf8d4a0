"""Statuses over a large fleet: the learner states a status interval in its control message
(online boards / ``fleet.max_statuses_per_s``, in 0.25 s steps) and boards keep to it."""

from __future__ import annotations

import pytest

from edge_rl.config import FleetConfig, RunConfig
from edge_rl.learner.fleet.control import FleetControl
from edge_rl.learner.fleet.timing import status_interval
from edge_rl.types import ActorStatus, ControlMessage
from edge_rl.wire.messages import decode_control, encode_status
from edge_rl.wire.topics import Topics

RUN_ID = "s-start"
TOPICS = Topics("edge-rl", "statuses")


@pytest.mark.parametrize(
    ("boards", "rate", "interval"),
    [
        (4, 200.0, 0.0),  # 0.02 s each would do: the boards' own interval keeps the bound
        (10, 200.0, 0.0),  # 0.05 s: the least interval a board file accepts
        (11, 200.0, 0.25),  # just past it: one step
        (200, 200.0, 1.0),
        (201, 200.0, 1.25),  # rounded up, never down: the bound holds
        (1000, 200.0, 5.0),
        (1000, 0.0, 0.0),  # no bound
        (10**7, 1.0, 3600.0),  # at most an hour (what a control message may carry)
    ],
)
def test_the_interval_keeps_the_fleet_under_the_rate(boards, rate, interval):
    got = status_interval(boards, rate)
    assert got == interval
    if got:
        assert boards / got <= rate or got == 3600.0


def control_of(sent: list[tuple[str, bytes]], topic: str = TOPICS.control) -> ControlMessage:
    """The last control message published on ``topic``."""
    return decode_control([p for t, p in sent if t == topic][-1])


def fleet_with(rate: float) -> tuple[FleetControl, list[tuple[str, bytes]]]:
    sent: list[tuple[str, bytes]] = []

    def publish(topic: str, payload: bytes, **_) -> bool:
        if not topic.endswith("/credit"):
            sent.append((topic, payload))
        return True

    cfg = RunConfig(
        env_id="CartPole-v1",
        run="statuses",
        total_env_steps=10**9,
        learning_starts=0,
        fleet=FleetConfig(max_statuses_per_s=rate),
    )
    return FleetControl(cfg.fleet, cfg.pacing, TOPICS, publish, lambda: (0, {}), RUN_ID), sent


def announce(fleet: FleetControl, first: int, last: int, state: str = "running") -> None:
    for i in range(first, last):
        status = ActorStatus(f"b-{i:04d}", state, run_id=RUN_ID, session=5000 + i)
        fleet.on_status(TOPICS.status(f"b-{i:04d}"), encode_status(status))


def test_the_control_message_states_the_interval_as_the_fleet_grows_and_shrinks():
    fleet, controls = fleet_with(rate=100.0)
    fleet.send("running")
    assert control_of(controls) == ControlMessage("running", RUN_ID, "", 0.0)
    announce(fleet, 0, 1000)
    fleet.send("running")
    assert control_of(controls).status_interval_s == 10.0  # 1,000 boards at 100/s
    published = len(controls)
    fleet.send("running")
    assert len(controls) == published  # unchanged: not sent again
    announce(fleet, 0, 500, state="stopped")  # half the fleet leaves
    fleet.send("running")
    assert control_of(controls).status_interval_s == 5.0
    # A board that (re)joins gets the same interval in its welcome.
    fleet.welcome("b-0999")
    assert control_of(controls, TOPICS.welcome("b-0999")).status_interval_s == 5.0


def test_without_a_bound_the_learner_states_no_interval():
    fleet, controls = fleet_with(rate=0.0)
    announce(fleet, 0, 1000)
    fleet.send("running")
    assert control_of(controls).status_interval_s == 0.0
    with pytest.raises(ValueError):
        FleetConfig(max_statuses_per_s=-1.0)
