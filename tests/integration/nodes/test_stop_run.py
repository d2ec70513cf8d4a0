"""``edge-rl stop``'s ``stop_run`` on a MemoryBroker: it ends the run start the retained
control names, retained, and refuses a run with nothing to end or a learner running."""

from __future__ import annotations

import pytest

from edge_rl.cli.stop import NothingToStop, stop_run
from edge_rl.learner.fleet_control import control_will
from edge_rl.transport.memory import MemoryBroker
from edge_rl.types import ControlMessage
from edge_rl.wire.messages import decode_control, encode_control
from edge_rl.wire.topics import Topics

TOPICS = Topics("edge-rl", "stop-test")


@pytest.fixture
def broker():
    b = MemoryBroker()
    yield b
    b.close()


def retained(broker: MemoryBroker) -> ControlMessage:
    assert broker.wait_idle(2.0)  # what was published is routed
    return decode_control(broker.retained[TOPICS.control])


@pytest.mark.parametrize("state", ["serving", "paused"])
def test_a_served_or_paused_run_is_stopped_under_its_own_run_start(broker, state):
    broker.retained[TOPICS.control] = encode_control(ControlMessage(state, "r1"))
    ended = stop_run(broker.connect, TOPICS, wait_s=2.0)
    assert ended == ControlMessage("stopped", "r1", "edge-rl stop") == retained(broker)
    assert stop_run(broker.connect, TOPICS, wait_s=2.0) == ended  # again: nothing changes


def test_a_run_whose_learner_runs_or_no_run_at_all_is_not_stopped(broker):
    with pytest.raises(NothingToStop, match="nothing to stop"):
        stop_run(broker.connect, TOPICS, wait_s=0.5)
    broker.retained[TOPICS.control] = encode_control(ControlMessage("running", "r2"))
    with pytest.raises(NothingToStop, match="stop its learner first"):
        stop_run(broker.connect, TOPICS, wait_s=2.0)
    assert retained(broker).state == "running"


def test_a_vanished_learner_s_will_pauses_its_run_and_can_be_stopped(broker):
    topic, payload = control_will(TOPICS, "r3")
    assert topic == TOPICS.control
    assert decode_control(payload) == ControlMessage("paused", "r3", "the learner is gone")
    learner = broker.connect("learner", will=(topic, payload))
    learner.start()
    assert learner.wait_connected(2.0)
    broker.drop("learner")  # gone without a goodbye: the broker publishes its will
    assert retained(broker).state == "paused"
    assert stop_run(broker.connect, TOPICS, wait_s=2.0).run_id == "r3"
