"""``edge-rl actor`` says what it does, one line per change (actor/node.py ``_say``):
waiting for a learner, running, paused, running again, serving its policy and then the
next one, against a real Mosquitto, with a small credit it runs out of (its status flips to
``paused`` meanwhile; its terminal says nothing of that)."""

from __future__ import annotations

import re
import threading

from edge_rl.sim.fleet import Fleet
from edge_rl.types import ControlMessage, CreditGrant
from edge_rl.wire.messages import decode_status, encode_control, encode_credit
from edge_rl.wire.policy import encode_policy
from edge_rl.wire.topics import Topics
from tests.harness.cartpole_policies import MODELS, policy_bundle
from tests.harness.waits import wait_for

RUN, START = "actor-lines", "lines-start"
BOARD = "board: test-board\nnum_threads: 1\nstatus_interval_s: 0.2\nserving_status_interval_s: 1\n"


def test_one_line_per_state_change(mosquitto, mqtt_client_factory, policy_keys, tmp_path):
    signer, pub = policy_keys
    topics = Topics("edge-rl", RUN)
    board = tmp_path / "board.yaml"
    board.write_text(BOARD)
    learner = mqtt_client_factory(mosquitto)
    statuses: list = []
    lock = threading.Lock()
    watcher = mqtt_client_factory(mosquitto)

    def on_message(_c, _u, m) -> None:
        if m.payload:
            with lock:
                statuses.append(decode_status(m.payload))

    watcher.on_message = on_message
    watcher.subscribe(topics.all_status, qos=1)

    def publish(topic: str, payload: bytes) -> None:
        learner.publish(topic, payload, qos=1, retain=True).wait_for_publish(5)

    def said() -> list[str]:
        text = (tmp_path / "fleet" / "al-00.log").read_text()
        return re.findall(r"edge_rl\.actor\.node: al-00: (\w+)", text)

    def log_tail() -> str:
        return (tmp_path / "fleet" / "al-00.log").read_text()[-3000:]

    def wait_said(words: list[str]) -> None:
        wait_for(lambda: said() == words, 30, f"the lines {words}", 0.1, log_tail)

    fleet = Fleet(1, board, mosquitto.url, "CartPole-v1", policy_key=pub, run=RUN,
                  id_prefix="al", log_dir=tmp_path / "fleet")  # fmt: skip
    try:
        with fleet:
            wait_said(["waiting"])
            wait_for(lambda: bool(statuses), 30, "a status")
            session = statuses[-1].session
            policy = policy_bundle(MODELS["good"].read_bytes(), run=RUN, run_id=START, version=3)
            publish(topics.policy, encode_policy(policy, signer))
            publish(topics.credit("al-00"), encode_credit(CreditGrant(START, session, 300)))
            publish(topics.control, encode_control(ControlMessage("running", START)))
            wait_said(["waiting", "running"])
            # 300 steps go fast: the status says paused (no credit), the terminal nothing
            wait_for(
                lambda: statuses[-1].env_steps == 300 and statuses[-1].state == "paused",
                30,
                "the credit used up",
            )
            assert said() == ["waiting", "running"], log_tail()
            publish(topics.control, encode_control(ControlMessage("paused", START)))
            wait_said(["waiting", "running", "paused"])
            publish(topics.control, encode_control(ControlMessage("running", START)))
            wait_said(["waiting", "running", "paused", "running"])
            publish(topics.control, encode_control(ControlMessage("serving", START)))
            wait_said(["waiting", "running", "paused", "running", "serving"])
            policy = policy_bundle(MODELS["good2"].read_bytes(), run=RUN, run_id=START, version=4)
            publish(topics.policy, encode_policy(policy, signer))  # a newer one: served too
            wait_said(["waiting", "running", "paused", "running", "serving", "serving"])
    finally:
        for topic in (topics.policy, topics.control, topics.credit("al-00")):
            publish(topic, b"")
    text = log_tail()
    assert f"al-00: waiting for run {RUN!r} on {mosquitto.url}: no learner" in text
    assert f"al-00: serving policy v3 of run {RUN!r}" in text
    assert f"al-00: serving policy v4 of run {RUN!r}" in text
