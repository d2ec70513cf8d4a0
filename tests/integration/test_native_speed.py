"""A board file on a real board adds no sleep; the simulated fleet still emulates the board.

The Pi 4 file says ``compute_slowdown: 6``. ``edge-rl actor --board rpi4`` (what a board
runs) must not apply it; a fleet member (``--emulate``, set by the fleet) must. Checked from
what each actor reports: its final status's runtime breakdown (``emulation`` seconds).
"""

from __future__ import annotations

import subprocess
import sys
import uuid

from edge_rl.actor.node import ActorNode, ActorOptions
from edge_rl.boards import board_file, load_board
from edge_rl.sim.fleet import Fleet
from edge_rl.transport.memory import MemoryBroker
from edge_rl.wire.messages import decode_status
from edge_rl.wire.topics import Topics

STEPS = "2000"


def test_the_node_throttles_only_when_told_it_is_simulated(policy_keys):
    board = load_board(board_file("rpi4"))
    assert board.emulation.compute_slowdown == 6.0  # the file still describes the emulation
    key = str(policy_keys[1])
    for emulate, factor in ((False, 0.0), (True, 5.0)):
        opts = ActorOptions("a", "CartPole-v1", "mqtt://unused", policy_key=key, emulate=emulate)
        node = ActorNode(board, opts, connect=MemoryBroker().connect)
        assert node.throttle.factor == factor
        node.env.close()


def statuses(client, topics: Topics, actor_id: str) -> list:
    got: list = []
    client.on_message = lambda _c, _u, msg: got.append(decode_status(msg.payload))
    client.subscribe(topics.status(actor_id), qos=1)
    return got


def be_the_learner(client, topics, actor_id, got, grant_run, wait_for) -> None:
    """Protocol v3: run the actor process whose session its first status names."""
    assert wait_for(lambda: any(s.session for s in got), 60), "no status with a session"
    grant_run(client, topics, actor_id, next(s.session for s in got if s.session))


def final(got, wait_for):
    assert wait_for(lambda: any(s.state == "stopped" for s in got), 120), got[-1:]
    return next(s for s in got if s.state == "stopped")


def test_edge_rl_actor_on_a_board_applies_no_emulation(
    mosquitto, mqtt_client_factory, policy_keys, wait_for, grant_run
):
    run = f"native-{uuid.uuid4().hex[:8]}"
    topics = Topics("edge-rl", run)
    client = mqtt_client_factory(mosquitto)
    got = statuses(client, topics, "pi-n")
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "edge_rl.cli",
            "actor",
            "--board",
            "rpi4",
            "--broker",
            mosquitto.url,
            "--env",
            "CartPole-v1",
            "--id",
            "pi-n",
            "--run",
            run,
            "--policy-key",
            str(policy_keys[1]),
            "--max-env-steps",
            STEPS,
            "--seed",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        be_the_learner(client, topics, "pi-n", got, grant_run, wait_for)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    status = final(got, wait_for)
    assert status.board == "rpi4" and status.env_steps == int(STEPS)
    assert status.breakdown["emulation"] == 0.0


def test_the_fleet_still_emulates_its_board(
    mosquitto, mqtt_client_factory, policy_keys, wait_for, grant_run, tmp_path
):
    run = f"sim-{uuid.uuid4().hex[:8]}"
    topics = Topics("edge-rl", run)
    client = mqtt_client_factory(mosquitto)
    got = statuses(client, topics, "sim-00")
    fleet = Fleet(
        1,
        board_file("rpi4"),
        mosquitto.url,
        "CartPole-v1",
        policy_key=policy_keys[1],
        run=run,
        log_dir=tmp_path,
        extra_args=("--max-env-steps", STEPS),
    )
    with fleet:
        be_the_learner(client, topics, "sim-00", got, grant_run, wait_for)
        assert fleet.wait(120), "the fleet's actor did not finish"
    assert fleet.exit_codes() == [0]
    status = final(got, wait_for)
    b = status.breakdown
    assert status.env_steps == int(STEPS)
    # It slept 5x its compute: the emulation bucket dwarfs the compute it stands for.
    assert b["emulation"] > 2 * (b["inference"] + b["exploration"] + b["env_step"]) > 0
