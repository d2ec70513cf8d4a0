"""The clustered broker's configs (edge_rl/broker/nats_conf.py, host/cluster/): the same
permissions as Mosquitto's ACL, as NATS subjects."""

from __future__ import annotations

import pytest

from edge_rl.broker.acl import UserGrants, run_acl
from edge_rl.broker.nats_conf import (
    MQTT_DELIVERY,
    ClusterNode,
    nats_accounts,
    nats_node,
    nats_permissions,
    subject,
)
from edge_rl.wire.topics import Topics
from tests.harness.paths import REPO

RUN = Topics("edge-rl", "r1")


def test_topics_become_subjects_and_names_with_dots_are_refused() -> None:
    assert subject("edge-rl/r1/actors/+/credit") == "edge-rl.r1.actors.*.credit"
    assert subject("edge-rl/#") == "edge-rl.>"
    for bad in ("edge-rl/r.1/policy", "edge-rl//policy"):
        with pytest.raises(ValueError):
            subject(bad)


def test_a_board_may_do_what_the_acl_lets_it_and_nothing_else() -> None:
    users = {u.user: u for u in run_acl(RUN, "learner", ["pi-01"])}
    board = nats_permissions(users["pi-01"])
    assert board["publish"] == [
        "edge-rl.r1.actors.pi-01.transitions",
        "edge-rl.r1.actors.pi-01.status",
        "edge-rl.r1.actors.pi-01.hello",
    ]
    assert board["subscribe"] == [
        "edge-rl.r1.policy",
        "edge-rl.r1.control",
        "edge-rl.r1.hello",
        "edge-rl.r1.actors.pi-01.credit",
        "edge-rl.r1.actors.pi-01.target",
        "edge-rl.r1.actors.pi-01.welcome",
        MQTT_DELIVERY,
    ]
    learner = nats_permissions(users["learner"])
    assert "edge-rl.r1.actors.*.welcome" in learner["publish"]
    assert "edge-rl.r1.actors.*.target" in learner["publish"]
    assert "edge-rl.r1.>" in learner["subscribe"]
    assert not any(s.startswith("$SYS") for s in learner["subscribe"])  # Mosquitto's own


def test_every_user_gets_its_password_and_mqtt_only() -> None:
    users = run_acl(RUN, "learner", ["pi-01"])
    text = nats_accounts(users, {"learner": "pw-l", "pi-01": "pw-1"})
    assert text.count('"allowed_connection_types": ["MQTT"]') == 2
    assert '"password": "pw-1"' in text and "jetstream: enabled" in text
    with pytest.raises(ValueError):
        nats_accounts([UserGrants("pi-02", ())], {})


def test_the_shipped_loopback_configs_are_what_the_code_makes() -> None:
    nodes = [ClusterNode(n, "127.0.0.1", 4222 + i, 6222 + i, 1893 + i) for i, n in enumerate("abc")]
    for node in nodes:
        shipped = (REPO / "host" / "cluster" / f"node-{node.name}.conf").read_text()
        made = nats_node(node, nodes, f"/var/lib/edge-rl/cluster/{node.name}")
        assert shipped.endswith(made)
