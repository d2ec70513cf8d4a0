"""Who may read and write which topic, as Mosquitto ACL text; the amqtt fallback reads the
same text (``amqtt_plugins.py``), so both brokers apply one set of rules.

Two ACLs are made: the embedded broker's, for one run (``run_acl``), and a deployment's,
for every board enrolled by ``edge-rl credentials --run`` or ``edge-rl flash --run``
(``deployment_acl``). Both name each board in a ``user`` section of its own with its run
spelt out: a board writes only its own transitions, status and hello in its run, and reads
only its run's policy, control and hello and its own credit, welcome and deployment target.
The learner writes every policy, control, hello, welcome, credit and target and reads
everything under its root (a deployment's learner serves every run).
There are no ``pattern`` lines: a username the ACL does not name may do nothing.

    text = mosquitto_acl(run_acl(Topics("edge-rl", "cartpole"), "learner", ["sim-00"]))
    grants = parse_acl(text)            # {"learner": (Grant("write", ...), ...), ...}
    may_publish(grants, "sim-00", "edge-rl/cartpole/actors/sim-00/transitions")  # True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from edge_rl.wire.topics import Topics

_ACCESS = ("read", "write")


class Grant(NamedTuple):
    """One ACL rule: ``access`` ("read" or "write") to the topic filter ``topic``."""

    access: str
    topic: str


class UserGrants(NamedTuple):
    """Every rule of one username (a Mosquitto ``user`` section)."""

    user: str
    grants: tuple[Grant, ...]


def learner_grants(base: str) -> tuple[Grant, ...]:
    """The learner's rules under ``base`` (``root/run``, or ``root/+`` for every run)."""
    return (
        Grant("write", f"{base}/policy"),
        Grant("write", f"{base}/control"),
        Grant("write", f"{base}/actors/+/credit"),
        Grant("write", f"{base}/actors/+/target"),  # edge-rl deploy, with the learner's login
        Grant("write", f"{base}/hello"),  # "boards, say who you are" (protocol §2.1)
        Grant("write", f"{base}/actors/+/welcome"),  # one board's policy and control
        Grant("read", f"{base}/#"),
        Grant("read", "$SYS/#"),  # the broker's counters ($SYS/broker/publish/messages/dropped)
    )


def actor_grants(topics: Topics, actor: str) -> tuple[Grant, ...]:
    """A board's rules: its own topics of its own run, nothing of another run or actor."""
    return (
        Grant("write", topics.transitions(actor)),
        Grant("write", topics.status(actor)),  # its last will too
        Grant("write", topics.actor_hello(actor)),
        Grant("read", topics.policy),
        Grant("read", topics.control),
        Grant("read", topics.hello),
        Grant("read", topics.credit(actor)),
        Grant("read", topics.target(actor)),
        Grant("read", topics.welcome(actor)),
    )


def run_acl(topics: Topics, learner: str, actors: Iterable[str]) -> tuple[UserGrants, ...]:
    """The ACL of one run: the learner and each actor, all in ``topics``' run."""
    users = [UserGrants(learner, learner_grants(topics.base))]
    users += [UserGrants(a, actor_grants(topics, a)) for a in actors]
    return tuple(users)


def deployment_acl(learner: str, boards: Mapping[str, Topics]) -> tuple[UserGrants, ...]:
    """The ACL of a deployment: the learner on every run of each root its boards use, and
    each board (actor id → the topics of the run it was enrolled in) on its run alone."""
    roots = sorted({t.root for t in boards.values()} or {"edge-rl"})
    learner_rules = tuple(g for root in roots for g in learner_grants(f"{root}/+"))
    learner_rules = tuple(dict.fromkeys(learner_rules))  # $SYS/# once
    users = [UserGrants(learner, learner_rules)]
    users += [UserGrants(a, actor_grants(boards[a], a)) for a in sorted(boards)]
    return tuple(users)


def mosquitto_acl(users: Iterable[UserGrants], header: Iterable[str] = ()) -> str:
    """The text of Mosquitto's ``acl_file``: ``header`` as comments, then a section a user."""
    lines = [f"# {line}" if line else "#" for line in header]
    for user in users:
        lines += ["", f"user {user.user}"] if lines else [f"user {user.user}"]
        lines += [f"topic {g.access} {g.topic}" for g in user.grants]
    return "\n".join(lines) + "\n"


def parse_acl(text: str) -> dict[str, tuple[Grant, ...]]:
    """``user`` sections of ``mosquitto_acl`` text. Anything else (``pattern`` lines, rules
    before the first ``user``) is an error: this reader applies exactly what it was given."""
    out: dict[str, list[Grant]] = {}
    user: str | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        words = raw.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "user" and len(words) == 2:
            user = words[1]
            out.setdefault(user, [])
        elif words[0] == "topic" and len(words) == 3 and words[1] in _ACCESS and user:
            out[user].append(Grant(words[1], words[2]))
        else:
            raise ValueError(f"ACL line {number} not understood: {raw!r}")
    return {u: tuple(g) for u, g in out.items()}


def matches(topic_filter: str, topic: str) -> bool:
    """MQTT's topic matching: ``+`` one level, ``#`` the rest (and the parent level)."""
    want, got = topic_filter.split("/"), topic.split("/")
    for i, level in enumerate(want):
        if level == "#":
            return True
        if i >= len(got) or (level != "+" and level != got[i]):
            return False
    return len(want) == len(got)


def within(requested: str, granted: str) -> bool:
    """Every topic the filter ``requested`` can match is matched by ``granted``."""
    want, have = requested.split("/"), granted.split("/")
    for i, level in enumerate(have):
        if level == "#":
            return True
        if i >= len(want) or want[i] == "#" or (level != "+" and level != want[i]):
            return False
    return len(want) == len(have)


def may_publish(grants: Mapping[str, tuple[Grant, ...]], user: str, topic: str) -> bool:
    return any(g.access == "write" and matches(g.topic, topic) for g in grants.get(user, ()))


def may_read(grants: Mapping[str, tuple[Grant, ...]], user: str, topic: str) -> bool:
    return any(g.access == "read" and matches(g.topic, topic) for g in grants.get(user, ()))


def may_subscribe(grants: Mapping[str, tuple[Grant, ...]], user: str, topic_filter: str) -> bool:
    return any(g.access == "read" and within(topic_filter, g.topic) for g in grants.get(user, ()))
