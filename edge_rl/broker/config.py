"""What the embedded Mosquitto runs with: its mosquitto.conf, and in authenticated mode
the accounts of one run (a password per user, Mosquitto's password file and its ACL).

    accounts = BrokerAccounts(actors=("sim-00", "sim-01"), root="edge-rl", run="cartpole")
    store = AccountStore(accounts)    # passwords made here, kept in memory for the broker's life
    store.write()                     # private temp dir: passwords (0600), password file, acl
    store.auth("sim-00")              # BrokerAuth(username="sim-00", password_file=...)

The ACL (the same rules as host/acl, for one run): the learner alone writes the run's
policy and control and reads everything under the run and ``$SYS``; an actor writes only
under ``actors/<its username>/`` and reads policy and control. Anonymous clients are
refused and the client id is the username, so that no client can take over another's
session. Mosquitto's password file is hashed by ``mosquitto_passwd -U`` (PBKDF2-SHA512):
the passwords never appear on a command line.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from edge_rl.broker.executables import find_mosquitto_passwd
from edge_rl.transport.auth import BrokerAuth, write_private
from edge_rl.wire.topics import DEFAULT_ROOT, DEFAULT_RUN, Topics, check_name


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


def acl_lines(accounts: BrokerAccounts) -> list[str]:
    """Mosquitto ACL of one run: see the module's docstring and docs/security.md."""
    base = Topics(accounts.root, accounts.run).base
    lines = [
        f"user {accounts.learner}",
        f"topic write {base}/policy",
        f"topic write {base}/control",
        f"topic write {base}/actors/+/credit",
        f"topic read {base}/#",
        "topic read $SYS/#",
    ]
    for actor in accounts.actors:  # each by name: the run's accounts are known (host/acl: %u)
        lines += [
            "",
            f"user {actor}",
            f"topic write {base}/actors/{actor}/transitions",
            f"topic write {base}/actors/{actor}/status",
            f"topic read {base}/policy",
            f"topic read {base}/control",
            f"topic read {base}/actors/{actor}/credit",
        ]
    return lines


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
            lines = "".join(f"{u}:{p}\n" for u, p in self._passwords.items())
            write_private(self.password_file, lines)
            hash_password_file(self.password_file)
            write_private(self.acl_file, "\n".join(acl_lines(self.accounts)) + "\n")
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


def mosquitto_conf(
    host: str, port: int, max_packet_size: int, store: AccountStore | None = None
) -> str:
    """The embedded Mosquitto's config: one listener; anonymous unless ``store`` is given."""
    lines = [f"listener {port} {host}"]
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
        # Mosquitto drops (silently, for QoS 1) past 1000 queued messages per client.
        "max_queued_messages 10000",
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
