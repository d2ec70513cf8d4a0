"""The embedded Mosquitto's per-client queue is sized for a learner behind a fleet's join
burst (100,000 messages, 100 in flight), bounded in bytes, and the shipped
host/mosquitto.conf says the same."""

from __future__ import annotations

from edge_rl.broker.config import MAX_QUEUED_MESSAGES, mosquitto_conf, queue_limits
from tests.harness.paths import REPO


def _settings(conf: str) -> dict[str, str]:
    pairs = (line.split(None, 1) for line in conf.splitlines() if line and line[0] != "#")
    return {p[0]: p[1] for p in pairs if len(p) == 2}


def test_the_learners_queue_holds_a_join_burst_within_its_bytes():
    conf = _settings(mosquitto_conf("127.0.0.1", 1883, 2_000_000))
    assert int(conf["max_queued_messages"]) == MAX_QUEUED_MESSAGES >= 100_000
    assert int(conf["max_inflight_messages"]) == 100
    assert int(conf["max_queued_bytes"]) == queue_limits(2_000_000)[0] <= 64 * 2**20


def test_the_shipped_broker_config_agrees():
    host = _settings((REPO / "host" / "mosquitto.conf").read_text())
    assert int(host["max_queued_messages"]) == MAX_QUEUED_MESSAGES
    assert int(host["max_inflight_messages"]) == 100
