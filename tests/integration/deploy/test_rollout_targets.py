"""What a rollout leaves on a real Mosquitto: an interrupted ``run_rollout`` clears the
targets it set, the next one clears what an earlier one left, and ``clear_targets``
(``edge-rl deploy --clear``) clears every board's. The boards are their retained statuses
only (the one seam): the targets' effect on a board is tests/e2e/test_rollout.py's."""

from __future__ import annotations

import queue
import time

import pytest

from edge_rl.deploy.rollout import RolloutPlan
from edge_rl.deploy.rollout_run import clear_targets, run_rollout
from edge_rl.transport.mqtt import mqtt_connect
from edge_rl.types import ActorStatus, ControlMessage
from edge_rl.wire.messages import decode_target, encode_control, encode_status
from edge_rl.wire.policy import encode_policy
from edge_rl.wire.topics import Topics
from tests.harness.cartpole_policies import MODELS, policy_bundle

RUN_ID = "served-start"
BOARDS = [f"tb-{i}" for i in range(4)]
WAIT_S = 10.0


@pytest.fixture
def fleet(mosquitto, mqtt_client_factory, request):
    """Four boards serving v3 of a run of this test's own (retained statuses and control),
    and a subscriber to every board's target: ``(topics, url, targets)``; every retained
    message cleared at the end."""
    topics = Topics("edge-rl", f"targets-{request.node.name[:40].replace('[', '-')}")
    learner = mqtt_client_factory(mosquitto)
    retained = [(topics.control, encode_control(ControlMessage("serving", RUN_ID)))]
    for a in BOARDS:
        status = ActorStatus(a, "serving", run_id=RUN_ID, policy_version=3, policy_digest="c" * 64)
        retained.append((topics.status(a), encode_status(status)))
    for topic, payload in retained:
        learner.publish(topic, payload, qos=1, retain=True).wait_for_publish(5)
    targets: queue.Queue[tuple[str, bytes]] = queue.Queue()
    watcher = mqtt_client_factory(mosquitto)
    watcher.on_message = lambda _c, _u, m: targets.put((m.topic, m.payload))
    watcher.subscribe(f"{topics.base}/actors/+/target", qos=1)
    yield topics, mosquitto.url, targets
    for topic in [t for t, _ in retained] + [topics.target(a) for a in BOARDS] + [topics.policy]:
        learner.publish(topic, b"", qos=1, retain=True).wait_for_publish(5)


def retained_targets(url: str, topics: Topics, mqtt_client_factory) -> dict[str, bytes]:
    """What a new subscriber gets at once: the retained targets (empty ones are none)."""
    got: queue.Queue[tuple[str, bytes]] = queue.Queue()
    client = mqtt_client_factory(url)
    client.on_message = lambda _c, _u, m: got.put((m.topic, m.payload))
    client.subscribe(f"{topics.base}/actors/+/target", qos=1)
    out, deadline = {}, time.monotonic() + 1.0  # a retained message comes at once
    while time.monotonic() < deadline:
        try:
            topic, payload = got.get(timeout=0.1)
        except queue.Empty:
            continue
        if payload:
            out[topics.actor_of(topic)] = payload
    return out


def rollout(url, topics, policy_keys, **kw):
    signer, _ = policy_keys
    payload = encode_policy(
        policy_bundle(MODELS["good2"].read_bytes(), run="lab", run_id="lab-1", version=9), signer
    )
    plan = RolloutPlan(canary=0.5, window_s=1.0, confirm_s=1.0)  # no board answers
    return run_rollout(
        mqtt_connect(url), topics, payload, signer.verifier(), signer, plan, wait_s=2.0, **kw
    )


def test_an_interrupted_rollout_clears_the_targets_it_set(fleet, policy_keys, mqtt_client_factory):
    topics, url, targets = fleet
    sent: list[str] = []

    def clock() -> float:  # Ctrl-C once the canaries' targets are out
        while not targets.empty():
            topic, payload = targets.get()
            if payload:
                sent.append(topics.actor_of(topic))
        if len(sent) == 3:  # three canaries of four boards (at least three)
            raise KeyboardInterrupt
        return time.monotonic()

    with pytest.raises(KeyboardInterrupt):
        rollout(url, topics, policy_keys, clock=clock, seed=5)
    assert len(sent) == 3 and set(sent) <= set(BOARDS)
    assert retained_targets(url, topics, mqtt_client_factory) == {}


def test_the_next_rollout_and_clear_clear_what_an_earlier_one_left(
    fleet, policy_keys, mqtt_client_factory
):
    topics, url, _ = fleet
    learner = mqtt_client_factory(url)

    def leave(board: str) -> None:  # what a rollout killed outright (kill -9) leaves
        learner.publish(topics.target(board), b"ERLD left", qos=1, retain=True).wait_for_publish(5)

    leave("tb-1")
    leave("tb-2")
    assert sorted(retained_targets(url, topics, mqtt_client_factory)) == ["tb-1", "tb-2"]
    assert clear_targets(mqtt_connect(url), topics, wait_s=2.0) == BOARDS
    assert retained_targets(url, topics, mqtt_client_factory) == {}

    leave("tb-3")
    done = rollout(url, topics, policy_keys, seed=11)  # no board answers: rolled back
    left = retained_targets(url, topics, mqtt_client_factory)
    assert "tb-3" not in left or tb3_is_this_rollouts(left["tb-3"], done)
    assert set(left) <= set(done.outcome.unconfirmed)  # only its own unconfirmed rollbacks


def tb3_is_this_rollouts(payload: bytes, done) -> bool:
    return decode_target(payload, 16_000_000).rollout == f"v{done.target.version}"
