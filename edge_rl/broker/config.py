"""What the embedded broker runs with: Mosquitto's mosquitto.conf, and in authenticated mode
the accounts of one run (a password per user, the password file and the run's ACL, which
the amqtt fallback reads too).

    accounts = BrokerAccounts(actors=("sim-00", "sim-01"), root="edge-rl", run="cartpole")
    store = AccountStore(accounts)    # passwords made here, kept in memory for the broker's life
    store.write()                     # private temp dir: passwords (0600), password file, acl
    store.auth("sim-00")              # BrokerAuth(username="sim-00", password_file=...)

The ACL is ``acl.run_acl``: the learner alone writes the run's policy, control and credit
and reads everything under the run and ``$SYS``; each actor writes only its own transitions
and status in this run and reads the run's policy and control and its own credit. Anonymous
clients are refused and the client id is the username, so that no client can take over
another's session. The password file is Mosquitto's ``$7$`` format, hashed in Python
(``passwords.py``): no password on a command line, and no ``mosquitto_passwd`` needed for
the amqtt fallback.

``mosquitto_conf`` bounds what any client, logged in or not, can take from the broker:
connections below the process's file-descriptor limit, bytes and messages queued per
client, the packet size, and the broker's heap (``limits`` in docs/security.md).
"""

from __future__ import annotations

import os
import pwd
import resource
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from edge_rl.broker.acl import mosquitto_acl, run_acl
from edge_rl.broker.executables import find_mosquitto_passwd
from edge_rl.broker.passwords import hash_line
from edge_rl.transport.auth import BrokerAuth, write_private
from edge_rl.wire.topics import DEFAULT_ROOT, DEFAULT_RUN, Topics, check_name

# File descriptors the broker keeps for itself (listeners, log, password and ACL files).
_SPARE_FDS = 64
# Per client: queued bytes, at least this, and this many of the largest packet.
_MIN_QUEUED_BYTES = 64 * 2**20
_QUEUED_PACKETS = 16
# Per client: queued QoS 1 messages (on top of the bytes bound): the learner's backlog.
MAX_QUEUED_MESSAGES = 100_000
# The broker's heap: at least this, and room for this many clients' full queues.
_MIN_MEMORY = 2**30
_FULL_QUEUES = 4


def check_username(name: str) -> str:
    """A username is one topic level (the ACL's %u) without ':' or whitespace."""
    check_name("username", name)
    if ":" in name or any(c.isspace() for c in name):
        raise ValueError(f"invalid username {name!r}: no ':' or whitespace")
    return name


@dataclass(frozen=True)
class BrokerAccounts:
    """Who may use an embedded broker: one learner and these actors, in one run."""

    actors: tuple[str, ...]
    root: str = DEFAULT_ROOT
    run: str = DEFAULT_RUN
    learner: str = "learner"

    def __post_init__(self) -> None:
        Topics(self.root, self.run)  # checks the run name and root levels
        for name in (self.learner, *self.actors):
            check_username(name)
        if len(set(self.actors)) != len(self.actors) or self.learner in self.actors:
            raise ValueError(f"account names must be unique: {self.learner}, {self.actors}")

    @property
    def users(self) -> tuple[str, ...]:
        return (self.learner, *self.actors)


def hash_password_file(plain: Path) -> None:
    """``user:password`` lines → Mosquitto's hashed format, in place (``mosquitto_passwd -U``)."""
    result = subprocess.run(
        [find_mosquitto_passwd(), "-U", str(plain)], capture_output=True, text=True, timeout=60
    )
    if result.returncode != 0:
        raise RuntimeError(f"mosquitto_passwd -U {plain} failed: {result.stderr.strip()}")


class AccountStore:
    """The passwords of ``accounts`` (made at construction) and their files, once written."""

    def __init__(self, accounts: BrokerAccounts) -> None:
        self.accounts = accounts
        self._passwords = {u: secrets.token_urlsafe(24) for u in accounts.users}
        self.dir: Path | None = None

    @property
    def password_file(self) -> Path:
        assert self.dir is not None, "AccountStore.write() first"
        return self.dir / "mosquitto.passwd"

    @property
    def acl_file(self) -> Path:
        assert self.dir is not None, "AccountStore.write() first"
        return self.dir / "acl"

    def write(self) -> Path:
        """A private temp dir (0700) with every file; once (later calls return it)."""
        if self.dir is not None:
            return self.dir
        self.dir = Path(tempfile.mkdtemp(prefix="edge-rl-auth-"))
        try:
            for user, password in self._passwords.items():
                write_private(self.dir / f"{user}.password", password + "\n")
            lines = "".join(hash_line(u, p) + "\n" for u, p in self._passwords.items())
            write_private(self.password_file, lines)
            accounts = self.accounts
            topics = Topics(accounts.root, accounts.run)
            acl = run_acl(topics, accounts.learner, accounts.actors)
            write_private(self.acl_file, mosquitto_acl(acl, [f"run {topics.run}"]))
        except BaseException:
            self.remove()
            raise
        return self.dir

    def auth(self, user: str) -> BrokerAuth:
        """How ``user`` logs in: its username and its password file."""
        if user not in self._passwords:
            raise KeyError(f"no account {user!r}; accounts: {list(self._passwords)}")
        directory = self.write()
        return BrokerAuth(username=user, password_file=str(directory / f"{user}.password"))

    def remove(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def queue_limits(max_packet_size: int) -> tuple[int, int]:
    """(max_queued_bytes per client, memory_limit of the broker) for this packet size."""
    queued = max(_MIN_QUEUED_BYTES, _QUEUED_PACKETS * max_packet_size)
    return queued, max(_MIN_MEMORY, _FULL_QUEUES * queued)


def raise_fd_limit(needed: int) -> int:
    """Raise this process's soft open-files limit towards ``needed`` (at most the hard
    limit): a board's connection is one socket in its process and one in the broker,
    which inherits the limit. Returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        soft = want
    return soft


def max_connections() -> int:
    """Connections the broker may accept: below this process's file-descriptor limit
    (inherited by the broker), so that a flood of sockets is refused at ``accept`` by
    Mosquitto, not by the kernel in the middle of a logged-in client's work."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 65536
    return max(16, soft - _SPARE_FDS)


def mosquitto_conf(
    host: str, port: int, max_packet_size: int, store: AccountStore | None = None
) -> str:
    """The embedded Mosquitto's config: one listener; anonymous unless ``store`` is given."""
    queued_bytes, memory = queue_limits(max_packet_size)
    lines = [f"listener {port} {host}", f"max_connections {max_connections()}"]
    if store is None:
        lines.append("allow_anonymous true")
    else:
        store.write()
        lines += [
            "allow_anonymous false",
            f"password_file {store.password_file}",
            f"acl_file {store.acl_file}",
            "use_username_as_clientid true",
        ]
    lines += [
        f"max_packet_size {max_packet_size}",
        # Mosquitto drops (silently, for QoS 1) past 1000 queued messages per client. The
        # learner is the one client that falls behind: at a fleet's join burst (every
        # board's status, hello and first batches while it traces and compiles) 10,000
        # was ~15 s of 500 boards' traffic. The bytes bound below keeps a client's queue
        # to 64 MB whatever the count (~100,000 statuses).
        f"max_queued_messages {MAX_QUEUED_MESSAGES}",
        "max_inflight_messages 100",  # as host/mosquitto.conf (Mosquitto's default: 20)
        f"max_queued_bytes {queued_bytes}",
        f"memory_limit {memory}",
        "persistence false",
        "log_dest stderr",
        "log_type error",
        "log_type warning",
        "log_type notice",
        "log_type information",
        "log_timestamp_format %Y-%m-%dT%H:%M:%S",
    ]
    if os.geteuid() == 0:
        # As root, Mosquitto otherwise switches to user "mosquitto", which may not exist.
        lines.append(f"user {pwd.getpwuid(os.geteuid()).pw_name}")
    return "\n".join(lines) + "\n"
