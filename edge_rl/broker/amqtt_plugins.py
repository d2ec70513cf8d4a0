"""The amqtt fallback's authentication and topic checks, loaded by ``amqtt_child`` from
the same two files the embedded Mosquitto reads: its password file (``passwords.py``)
and its ACL (``acl.py``). amqtt 0.12's own plugins do not fit: its password-file plugin
takes Argon2/bcrypt hashes only, and its ACL plugin neither reads an ACL file nor names
a username's topics by run.

What holds, as with Mosquitto's ``allow_anonymous false``, ``password_file`` and
``acl_file``: a client without a username and a matching password is refused at CONNECT;
one whose last will names a topic it may not write is refused too (amqtt publishes a will
without asking the topic check); a publish is routed only to a topic the ACL lets its
sender write (a denied QoS 1 publish is still acknowledged, as Mosquitto does in 3.1.1); a
subscription is granted only within topics the subscriber may read, and each message is
delivered only where the receiver may read it. Not held: amqtt has no
``use_username_as_clientid``, so a client with valid credentials can connect with another's
client id and take over (end) its session; it has no limit on packets, queues or memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from amqtt.contexts import Action
from amqtt.plugins.base import BaseAuthPlugin, BaseTopicPlugin
from amqtt.session import Session

from edge_rl.broker.acl import may_publish, may_read, may_subscribe, parse_acl
from edge_rl.broker.passwords import read_hashes, verify


class PasswordFileAuth(BaseAuthPlugin):
    """A username and its password, checked against a Mosquitto ``$7$`` password file."""

    @dataclass
    class Config:
        password_file: str
        acl_file: str

    def __init__(self, context) -> None:
        super().__init__(context)
        self._hashes = read_hashes(Path(self.config.password_file))
        self._grants = parse_acl(Path(self.config.acl_file).read_text(encoding="utf-8"))

    async def authenticate(self, *, session: Session) -> bool:
        user, password = session.username, session.password
        hashed = self._hashes.get(user or "")
        if not user or password is None or hashed is None:
            return False
        if not verify(password if isinstance(password, str) else password.decode(), hashed):
            return False
        will = session.will_topic if session.will_flag else None
        return will is None or may_publish(self._grants, user, will)


class AclFileTopics(BaseTopicPlugin):
    """Publish, subscribe and delivery checked against the Mosquitto ACL file."""

    @dataclass
    class Config:
        acl_file: str

    def __init__(self, context) -> None:
        super().__init__(context)
        self._grants = parse_acl(Path(self.config.acl_file).read_text(encoding="utf-8"))

    async def topic_filtering(
        self,
        *,
        session: Session | None = None,
        topic: str | None = None,
        action: Action | None = None,
    ) -> bool:
        user = session.username if session is not None else None
        if not user or not topic:
            return False
        if action == Action.PUBLISH:
            return may_publish(self._grants, user, topic)
        if action == Action.SUBSCRIBE:
            return may_subscribe(self._grants, user, topic)
        return may_read(self._grants, user, topic)
