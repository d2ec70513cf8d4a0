"""``edge-rl stop``'s ``stop_run`` on a MemoryBroker: it ends the run start the retained
control names, retained, and refuses a run with nothing to end or a learner running; on a
broker that keeps no retained message, the run start the boards' statuses (asked by a
hello) or the run directory name."""

from __future__ import annotations

import json
import threading

import pytest

from edge_rl.actor.node import ActorNode, ActorOptions
from edge_rl.boards import BoardConfig
from edge_rl.cli.stop import NothingToStop, current_run_start, run_start_in, stop_run
from edge_rl.learner.fleet.control import control_will
from edge_rl.transport.memory import MemoryBroker
from edge_rl.types import ActorStatus, ControlMessage
from edge_rl.wire.messages import decode_control, encode_control
from edge_rl.wire.signing import Signer
from edge_rl.wire.topics import Topics
from tests.harness.waits import wait_for

TOPICS = Topics("edge-rl", "stop-test")
WAIT_S = 10.0


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


# --- a broker that keeps no retained control (a cluster node that lost it) ---------------


@pytest.fixture
def board(tmp_path):
    """A real actor on a MemoryBroker that delivers retained messages to nobody later, joined
    (live) to run start r5, paused; its own statuses far apart, so that a status in time
    answers a hello."""
    broker = MemoryBroker(keeps_retained=False)
    Signer.load_or_create(tmp_path / "k").write_public(tmp_path / "k.pub")
    opts = ActorOptions(
        "b0", "CartPole-v1", broker.url, run=TOPICS.run, policy_key=str(tmp_path / "k.pub")
    )
    slow = BoardConfig(board="test-board", status_interval_s=60, serving_status_interval_s=60)
    actor = ActorNode(slow, opts, connect=broker.connect)
    thread = threading.Thread(target=actor.run, name="actor", daemon=True)
    thread.start()
    try:
        assert actor.transport.wait_connected(WAIT_S) and broker.wait_idle(WAIT_S)
        learner = broker.connect("learner")
        learner.start()
        assert learner.wait_connected(WAIT_S)
        learner.publish(TOPICS.control, encode_control(ControlMessage("paused", "r5")))
        learner.stop()
        wait_for(lambda: actor.rc.run_id == "r5", WAIT_S, "the board joining r5", 0.01)
        assert broker.wait_idle(WAIT_S) and TOPICS.control not in broker.retained
        yield broker, actor
    finally:
        actor.stop()
        thread.join(WAIT_S)
        broker.close()


def test_with_no_retained_control_the_boards_name_the_run_start_and_it_stops(board):
    broker, actor = board
    ended = stop_run(broker.connect, TOPICS, wait_s=1.0)
    assert ended == ControlMessage("stopped", "r5", "edge-rl stop")
    wait_for(lambda: actor.rc.state == "stopped", WAIT_S, "the board stopped", 0.01)
    assert actor.rc.run_id == "r5"


def test_the_run_directory_names_the_run_start_when_no_board_answers(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with pytest.raises(ValueError, match="names no run start"):
        run_start_in(run_dir, TOPICS.run)
    (run_dir / "summary.json").write_text(json.dumps({"run": TOPICS.run, "run_id": "r7"}))
    assert run_start_in(run_dir, TOPICS.run) == "r7"
    with pytest.raises(ValueError, match="not 'other'"):
        run_start_in(run_dir, "other")
    broker = MemoryBroker(keeps_retained=False)
    try:
        with pytest.raises(NothingToStop, match="--run-dir"):
            stop_run(broker.connect, TOPICS, wait_s=0.5)
        heard: list[bytes] = []
        listener = broker.connect(
            "board", subscriptions=[(TOPICS.control, 1)], on_message=lambda _t, p: heard.append(p)
        )
        listener.start()
        assert listener.wait_connected(WAIT_S)
        ended = stop_run(broker.connect, TOPICS, wait_s=0.5, run_id="r7")
        assert broker.wait_idle(WAIT_S)
        assert ended == ControlMessage("stopped", "r7", "edge-rl stop")
        assert [decode_control(p) for p in heard] == [ended]
    finally:
        broker.close()


def test_the_boards_statuses_decide_a_run_start_and_its_state():
    def st(actor: str, state: str, run_id: str) -> ActorStatus:
        return ActorStatus(actor, state, run_id=run_id)

    paused = [st("a", "paused", "r1"), st("b", "serving", "r1"), st("c", "offline", "")]
    assert current_run_start([], paused, None, TOPICS) == ControlMessage("paused", "r1")
    running = [*paused, st("d", "running", "r1")]
    assert current_run_start([], running, None, TOPICS).state == "running"
    assert current_run_start([], running, "r1", TOPICS).state == "running"
    ended = [st("a", "stopped", "r1")]
    assert current_run_start([], ended, None, TOPICS).state == "stopped"
    with pytest.raises(NothingToStop, match="run starts r1, r2"):
        current_run_start([], [*paused, st("e", "paused", "r2")], None, TOPICS)
    control = ControlMessage("serving", "r2")
    assert current_run_start([control], running, None, TOPICS) == control  # it comes first
    with pytest.raises(NothingToStop, match="that run start is over"):
        current_run_start([control], [], "r1", TOPICS)


def test_the_command_stops_the_run_start_its_run_directory_names(
    tmp_path, mosquitto, mqtt_client_factory, cli
):
    """``edge-rl stop --run-dir`` on a real Mosquitto holding no control for the run (a
    cluster node's view) and no board to answer: the run directory's run start is stopped."""
    topics = Topics("edge-rl", "stop-run-dir")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "summary.json").write_text(json.dumps({"run": topics.run, "run_id": "r9"}))
    refused = cli("stop", "--broker", mosquitto.url, "--run", topics.run, "--wait", "1")
    assert refused.returncode != 0 and "--run-dir" in refused.stderr
    args = ["--broker", mosquitto.url, "--run", topics.run, "--wait", "1"]
    done = cli("stop", *args, "--run-dir", str(run_dir))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"run {topics.run!r}, start r9: stopped"
    heard: list[bytes] = []
    probe = mqtt_client_factory(mosquitto)
    probe.on_message = lambda _c, _u, m: heard.append(m.payload)
    probe.subscribe(topics.control, qos=1)
    wait_for(lambda: bool(heard), WAIT_S, "the retained control")
    assert decode_control(heard[0]) == ControlMessage("stopped", "r9", "edge-rl stop")
    probe.publish(topics.control, b"", qos=1, retain=True).wait_for_publish(5)
