"""A control message the transport refuses (disconnected, its queue full) is not lost:
the next ``send`` or wait publishes it again, so a board always hears the pause."""

from __future__ import annotations

import types

from edge_rl.config import RunConfig
from edge_rl.learner.fleet import control as fleet_control
from edge_rl.learner.fleet.control import FleetControl
from edge_rl.types import ActorStatus
from edge_rl.wire.messages import decode_control, encode_status
from edge_rl.wire.topics import Topics

RUN_ID = "r-start"
TOPICS = Topics("edge-rl", "resend")


class Transport:
    def __init__(self) -> None:
        self.refuse = False
        self.controls: list[str] = []

    def publish(self, topic: str, payload: bytes, **_) -> bool:
        if self.refuse:
            return False
        if topic == TOPICS.control:
            self.controls.append(decode_control(payload).state)
        return True


def fleet() -> tuple[FleetControl, Transport]:
    cfg = RunConfig(env_id="CartPole-v1", run="resend", total_env_steps=10_000)
    transport = Transport()
    return FleetControl(
        cfg.fleet, cfg.pacing, TOPICS, transport.publish, lambda: (0, {}), RUN_ID
    ), transport


def test_a_refused_control_goes_out_with_the_next_send():
    control, transport = fleet()
    control.send("running")
    transport.refuse = True
    control.send("paused", reason="interrupted")
    assert transport.controls == ["running"] and control.channel.unsent == 1
    assert control.stats().control_unsent == 1  # summary.json's count
    transport.refuse = False
    control.send("paused", reason="interrupted")
    control.send("paused", reason="interrupted")  # sent: not again
    assert transport.controls == ["running", "paused"]


def test_a_wait_for_the_boards_resends_a_refused_pause(monkeypatch):
    clock = [0.0]
    fake = types.SimpleNamespace(
        monotonic=lambda: clock[0], sleep=lambda s: clock.__setitem__(0, clock[0] + s)
    )
    monkeypatch.setattr(fleet_control, "time", fake)  # the wait's seconds pass at once
    control, transport = fleet()
    control.send("running")
    status = ActorStatus("b-1", "running", run_id=RUN_ID, session=7)
    control.on_status(TOPICS.status("b-1"), encode_status(status))
    transport.refuse = True
    control.send("paused", reason="interrupted")
    transport.refuse = False
    assert not control.wait_for_state("paused")  # the board never answers
    assert transport.controls == ["running", "paused"]
