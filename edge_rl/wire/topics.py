"""Every MQTT topic string of protocol v5, in one place (see docs/protocol.md §2)."""

from __future__ import annotations

from dataclasses import dataclass

_FORBIDDEN = set("+#/\x00")  # MQTT: a level separator, its wildcards, NUL
# nats-server maps a topic level to a subject token: "." separates tokens, "*" and ">" are
# its wildcards, and a token holds no whitespace; such a level has no subject there.
_NOT_NATS = set(".*>")

DEFAULT_ROOT = "edge-rl"  # the topic root every run lives under unless configured
DEFAULT_RUN = "default"  # the run name, one topic level under the root


def check_name(kind: str, name: str) -> str:
    """A run name, topic root level or actor id is one topic level: non-empty, no
    wildcards or slashes; and, so that every broker edge-rl ships carries it (nats-server's
    MQTT too, docs/scale.md), a NATS subject token: no '.', '*', '>' or whitespace."""
    if not name or any(c in _FORBIDDEN for c in name) or len(name) > 128:
        raise ValueError(f"invalid {kind} {name!r}: 1-128 chars, no '/', '+', '#'")
    if any(c in _NOT_NATS or c.isspace() for c in name):
        raise ValueError(
            f"invalid {kind} {name!r}: no '.', '*', '>' or whitespace (a topic level must "
            "also be a NATS subject token, for a nats-server cluster: docs/scale.md)"
        )
    return name


@dataclass(frozen=True)
class Topics:
    """Topics of one run: ``<root>/<run>/...``."""

    root: str = DEFAULT_ROOT
    run: str = DEFAULT_RUN

    def __post_init__(self) -> None:
        check_name("run name", self.run)
        for level in self.root.split("/"):
            check_name("topic root level", level)

    @property
    def base(self) -> str:
        return f"{self.root}/{self.run}"

    @property
    def policy(self) -> str:  # learner -> actors, QoS 1, retained
        return f"{self.base}/policy"

    @property
    def control(self) -> str:  # learner -> actors, QoS 1, retained
        return f"{self.base}/control"

    def transitions(self, actor_id: str) -> str:  # actor -> learner, QoS 1
        return f"{self.base}/actors/{check_name('actor id', actor_id)}/transitions"

    def status(self, actor_id: str) -> str:  # actor -> learner, QoS 1, retained, last will
        return f"{self.base}/actors/{check_name('actor id', actor_id)}/status"

    def credit(self, actor_id: str) -> str:  # learner -> that actor only, QoS 1, retained
        return f"{self.base}/actors/{check_name('actor id', actor_id)}/credit"

    def target(self, actor_id: str) -> str:  # a rollout -> that actor only, QoS 1, retained
        return f"{self.base}/actors/{check_name('actor id', actor_id)}/target"

    @property
    def hello(self) -> str:  # learner -> actors, QoS 1, not retained: "say who you are"
        return f"{self.base}/hello"

    def actor_hello(self, actor_id: str) -> str:  # actor -> learner, QoS 1, not retained
        return f"{self.base}/actors/{check_name('actor id', actor_id)}/hello"

    def welcome(self, actor_id: str) -> str:  # learner -> that actor only, QoS 1, not retained
        return f"{self.base}/actors/{check_name('actor id', actor_id)}/welcome"

    @property
    def all_hello(self) -> str:  # the learner's subscription
        return f"{self.base}/actors/+/hello"

    @property
    def all_transitions(self) -> str:  # the learner's subscription
        return f"{self.base}/actors/+/transitions"

    @property
    def all_status(self) -> str:
        return f"{self.base}/actors/+/status"

    def actor_of(self, topic: str) -> str | None:
        """The actor id in ``<base>/actors/<id>/...``, or None for any other topic."""
        prefix = f"{self.base}/actors/"
        if not topic.startswith(prefix):
            return None
        rest = topic[len(prefix) :].split("/")
        return rest[0] if len(rest) == 2 and rest[0] else None


# The broker's own counter of messages it dropped (queue full); the learner watches it.
SYS_DROPPED = "$SYS/broker/publish/messages/dropped"
