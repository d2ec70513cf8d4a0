"""A policy larger than MQTT's default packet limit goes out when the run config raises it.

``transport.max_packet_bytes`` sets both the embedded Mosquitto's ``max_packet_size`` and the
learner client's own limit; if either stayed at 2,000,000 bytes, a ~3.9 MB fp32 policy would
not be published (client refuses) or would cost the learner its connection (broker drops it).
"""

from __future__ import annotations

import json

import pytest

from edge_rl.config import run_config_from_dict

BIG = [  # fp32 DQN with 1024-1024 hidden layers: ~4.2 MB .tflite, ~3.9 MB after zlib
    "--set",
    "dqn.hidden=[1024, 1024]",
    "--set",
    "export.precision=fp32",
    "--set",
    "transport.max_packet_bytes=6000000",
    "--set",
    "run=big-policy",
]


@pytest.mark.slow
def test_policy_past_two_megabytes_is_published_and_loaded(
    tmp_path, mosquitto_available, cli, tiny_learn
):
    run = tmp_path / "run"
    proc = cli(
        "learn",
        "--config",
        "examples/cartpole_dqn.yaml",
        "--out",
        str(run),
        *tiny_learn("dqn"),
        *BIG,
        "--set",
        "max_lag_transitions=200",
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "not published" not in proc.stderr
    s = json.loads((run / "summary.json").read_text())
    pubs = [json.loads(x) for x in (run / "publishes.jsonl").read_text().splitlines()]
    assert len(pubs) == s["publishes"] >= 1
    assert min(p["payload_bytes"] for p in pubs) > 2_000_000
    assert s["policy_version"] >= 1


@pytest.mark.parametrize("value", [500_000, 1_000_000, 300_000_000])
def test_max_packet_bytes_out_of_range_is_refused(value):
    # below max_payload_bytes + 1024 (transition batches must fit) or above MQTT's limit
    with pytest.raises(ValueError, match="max_packet_bytes"):
        run_config_from_dict({"env_id": "CartPole-v1", "transport": {"max_packet_bytes": value}})


def test_max_packet_bytes_default_and_raised():
    cfg = run_config_from_dict({"env_id": "CartPole-v1"})
    assert cfg.transport.max_packet_bytes == 2_000_000
    big = run_config_from_dict(
        {"env_id": "CartPole-v1", "transport": {"max_packet_bytes": 36_000_000}}
    )
    assert big.transport.max_packet_bytes == 36_000_000
