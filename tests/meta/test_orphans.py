"""A learner killed outright (``kill -9``) takes its broker and simulated fleet with it.

A parent process starts an embedded Mosquitto and a one-actor fleet the way ``edge-rl
learn`` does, prints their pids and waits; the test kills it with SIGKILL and watches
both children go.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading

from edge_rl.wire.topics import Topics
from tests.harness.procs import alive
from tests.harness.waits import bound, until, wait_for

PARENT = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from edge_rl.boards import board_file
    from edge_rl.sim.fleet import Fleet
    from edge_rl.broker.embedded import EmbeddedBroker

    broker = EmbeddedBroker(kind="mosquitto").start()
    fleet = Fleet(1, board_file("rpi4"), broker.url, "CartPole-v1", run="orphans",
                  policy_key=Path(sys.argv[1])).start()
    pids = {"broker": broker.pid, "actor": fleet.procs[0].pid}
    print(json.dumps({"url": broker.url, "pids": pids}), flush=True)
    time.sleep(120)  # the learner's life: it ends by the test's kill -9
    """
)


def test_broker_and_fleet_exit_when_the_learner_is_killed(
    mosquitto_available, setpriv_available, mqtt_client_factory, policy_keys
):
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(policy_keys[1])], stdout=subprocess.PIPE, text=True
    )
    pids: dict[str, int] = {}
    try:
        started = json.loads(parent.stdout.readline())  # bounded by the broker's start timeout
        pids = started["pids"]
        # Mid-life, not at exec: wait for the actor's retained status (it has connected).
        client = mqtt_client_factory(started["url"])
        statuses: list[bytes] = []
        client.on_message = lambda _c, _u, msg: statuses.append(msg.payload)
        client.subscribe(Topics("edge-rl", "orphans").status("sim-00"), qos=1)
        # The actor process imports and connects.
        wait_for(lambda: bool(statuses), 60, "the actor's retained status")
        assert all(alive(p) for p in pids.values()), pids
        parent.send_signal(signal.SIGKILL)
        parent.wait(5)
        # The broker goes at once; the actor stops, tries to say goodbye (5 s) and exits.
        until(lambda: not any(alive(p) for p in pids.values()), bound(30), step=0.1)
        assert not any(alive(p) for p in pids.values()), {k: alive(p) for k, p in pids.items()}
    finally:
        parent.kill()
        for pid in pids.values():
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_an_actor_told_to_stop_does_not_wait_for_its_broker(policy_keys):
    """SIGTERM calls ``node.stop()``; with no broker to connect to, the actor must
    not sit out its 30 s connect wait first (a fleet whose learner died would linger)."""
    from edge_rl.actor.node import ActorNode, ActorOptions
    from edge_rl.boards import BoardConfig
    from edge_rl.transport.address import free_port

    url = f"mqtt://127.0.0.1:{free_port()}"  # nothing listens there
    opts = ActorOptions("a0", "CartPole-v1", url, policy_key=str(policy_keys[1]))
    node = ActorNode(BoardConfig(board="test-board"), opts)
    waits: list[float] = []
    wait_connected = node.transport.wait_connected

    def counted_wait(timeout: float) -> bool:
        waits.append(timeout)
        if len(waits) == 3:  # mid-wait, as a signal would land
            node.stop()  # what the actor's SIGTERM handler does
        return wait_connected(timeout)

    node.transport.wait_connected = counted_wait
    thread = threading.Thread(target=node.run, daemon=True)
    thread.start()
    thread.join(60)  # the goodbye status waits up to 5 s for a broker, then gives up
    assert not thread.is_alive() and node.env_steps == 0
    assert len(waits) == 3, len(waits)  # the wait ended at the stop, not after its 30 s
