"""A clustered broker: nats-server's MQTT gateway, three nodes, configured from the same
rules as Mosquitto's ACL (acl.py), so that one deployment has one set of permissions.

    users = run_acl(Topics("edge-rl", "r1"), "learner", ["pi-01", "pi-02"])
    text = nats_accounts(users, {"learner": "...", "pi-01": "...", "pi-02": "..."})
    node = nats_node(ClusterNode("a", "127.0.0.1", 4222, 6222, 1883), nodes, store_dir)

nats-server (2.9) speaks MQTT 3.1.1 with QoS 0 and 1, keeps MQTT sessions, retained
messages and QoS 1 messages in JetStream streams it replicates over the cluster (R3 on
three nodes: any one node may go), and maps an MQTT topic to a NATS subject: ``/`` to
``.``, ``+`` to ``*``, ``#`` to ``>``. A topic level holding ``.`` has no subject (2.9
refuses it): ``subject`` refuses such names. Each user's permissions are its ACL rules
as subjects (write: publish, read: subscribe) plus ``$MQTT.sub.>``, the subjects on which
the server itself delivers QoS 1 subscriptions to the client's connection; every user may
connect over MQTT only, so that no one reads those subjects with a NATS client.
Passwords are written as given: the file is the deployment's secret (mode 0600).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from edge_rl.broker.acl import UserGrants

ACCOUNT = "EDGE"  # every MQTT user of the deployment, JetStream on
MQTT_DELIVERY = "$MQTT.sub.>"  # the server's own delivery subjects of QoS 1 subscriptions
MAX_PAYLOAD = 4 * 1024 * 1024  # above transport.max_packet_bytes (2,000,000) with room


class ClusterNode(NamedTuple):
    name: str  # server_name: unique in the cluster, and JetStream's peer name
    host: str  # the address every listener of this node binds
    client_port: int  # NATS clients (the operator's tools)
    cluster_port: int  # routes between the nodes
    mqtt_port: int  # boards and the learner


def subject(topic_filter: str) -> str:
    """The NATS subject (filter) of an MQTT topic (filter)."""
    levels = topic_filter.split("/")
    if any("." in level or not level for level in levels):
        raise ValueError(f"{topic_filter!r}: a level with '.' or an empty one has no NATS subject")
    return ".".join({"+": "*", "#": ">"}.get(level, level) for level in levels)


def nats_permissions(user: UserGrants) -> dict[str, list[str]]:
    """``{"publish": [...], "subscribe": [...]}`` of one user's ACL rules. ``$SYS`` topics
    (Mosquitto's counters) have no equivalent here and are left out."""
    rules = [g for g in user.grants if not g.topic.startswith("$")]
    publish = [subject(g.topic) for g in rules if g.access == "write"]
    subscribe = [subject(g.topic) for g in rules if g.access == "read"]
    return {"publish": publish, "subscribe": [*subscribe, MQTT_DELIVERY]}


def nats_accounts(users: Iterable[UserGrants], passwords: Mapping[str, str]) -> str:
    """The ``accounts`` block (and the system account) for ``include`` in each node's
    config: one user per ACL user, with its password and permissions."""
    entries = []
    for user in users:
        if user.user not in passwords:
            raise ValueError(f"no password for {user.user!r}")
        entry = {
            "user": user.user,
            "password": passwords[user.user],
            "allowed_connection_types": ["MQTT"],
            "permissions": nats_permissions(user),
        }
        entries.append("      " + json.dumps(entry))
    return (
        "# Made by edge_rl/broker/nats_conf.py: a password and permissions per user, from\n"
        "# the same ACL rules as Mosquitto's (edge_rl/broker/acl.py). Secret: mode 0600.\n"
        "accounts {\n"
        f"  {ACCOUNT}: {{\n"
        "    jetstream: enabled\n"
        "    users: [\n" + "\n".join(entries) + "\n    ]\n"
        "  }\n"
        "  SYS: {}\n"
        "}\n"
        "system_account: SYS\n"
    )


def nats_node(
    node: ClusterNode,
    nodes: Sequence[ClusterNode],
    store_dir: str,
    *,
    accounts_file: str = "accounts.conf",
    max_payload: int = MAX_PAYLOAD,
) -> str:
    """One node's config: its listeners, routes to every node, JetStream, MQTT."""
    routes = ", ".join(f"nats-route://{n.host}:{n.cluster_port}" for n in nodes)
    return (
        f"server_name: {node.name}\n"
        f"listen: {node.host}:{node.client_port}\n"
        f"max_payload: {max_payload}\n"
        f'jetstream {{ store_dir: "{store_dir}", max_memory_store: 256MB, '
        "max_file_store: 4GB }\n"
        "cluster {\n"
        "  name: edge-rl\n"
        f"  listen: {node.host}:{node.cluster_port}\n"
        f"  routes: [ {routes} ]\n"
        "}\n"
        f"mqtt {{ listen: {node.host}:{node.mqtt_port} }}\n"
        f'include "{accounts_file}"\n'
    )
