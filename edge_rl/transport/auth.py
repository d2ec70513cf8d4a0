"""How a client proves who it is to the broker: TLS files and a username with a password.

    auth = BrokerAuth(ca_file="ca.crt", username="pi-01", password_file="pi-01/password")
    connect = mqtt_connect("mqtts://broker.lan", auth)     # transport/mqtt.py

Every field is a path or a name, never a secret: a ``BrokerAuth`` may be logged, written
to a run's config.yaml or put on a command line. The password itself is read when the
client is built, from ``password_file`` (refused when its group or others may read it) or
from the environment variable ``password_env``. TLS: ``ca_file`` is the CA the broker's
certificate must chain to (None: the system's CAs), ``cert_file``/``key_file`` the
client's own certificate, for a broker with ``require_certificate true``. Standard library
only (a board imports this).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, fields, replace
from pathlib import Path

from edge_rl.transport.address import parse_broker_list

_MAX_PASSWORD_BYTES = 65_535  # MQTT's limit on the password field


class AuthError(ValueError):
    """Credentials that cannot be used: a missing or readable-by-others file, no password."""


@dataclass(frozen=True)
class BrokerAuth:
    ca_file: str | None = None  # PEM CA bundle the broker's certificate must chain to
    cert_file: str | None = None  # PEM client certificate (with key_file)
    key_file: str | None = None  # PEM private key of cert_file, unencrypted, mode 0600
    username: str | None = None  # for an actor, its actor id (the broker's ACL keys on it)
    password_file: str | None = None  # the password on its first line; mode 0600
    password_env: str | None = None  # or: the name of an environment variable holding it

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise AuthError(f"auth {f.name} must be a non-empty string, got {value!r}")
        if (self.cert_file is None) != (self.key_file is None):
            raise AuthError("a client certificate needs both cert_file and key_file")
        if self.password_file and self.password_env:
            raise AuthError("give password_file or password_env, not both")

    @classmethod
    def from_directory(cls, directory: str | Path, username: str) -> BrokerAuth:
        """One identity's directory of ``edge-rl credentials``: ``ca.crt``, ``client.crt`` and
        ``client.key``, ``password``, whichever are there."""
        d = Path(directory)
        if not d.is_dir():
            raise AuthError(f"credentials directory {d} not found")
        files = {n: str(d / n) for n in ("ca.crt", "client.crt", "client.key", "password")}
        have = {n: p for n, p in files.items() if Path(p).is_file()}
        if not have:
            raise AuthError(f"{d} has none of ca.crt, client.crt, client.key, password")
        return cls(
            ca_file=have.get("ca.crt"),
            cert_file=have.get("client.crt"),
            key_file=have.get("client.key"),
            username=username,
            password_file=have.get("password"),
        )

    @property
    def has_password(self) -> bool:
        return bool(self.password_file or self.password_env)

    @property
    def tls_files(self) -> bool:
        """True when a CA or a client certificate is set (these need an mqtts:// URL)."""
        return bool(self.ca_file or self.cert_file)

    @property
    def empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self))

    def relative_to(self, base: Path) -> BrokerAuth:
        """The same, with relative file paths taken from ``base`` (a board file's directory)."""
        names = ("ca_file", "cert_file", "key_file", "password_file")
        paths = {n: getattr(self, n) for n in names if getattr(self, n) is not None}
        return replace(self, **{n: str(Path(base, p)) for n, p in paths.items()})

    def merged(self, override: BrokerAuth) -> BrokerAuth:
        """Fields set in ``override`` (the command line) win over ours (a config file)."""
        out = {f.name: getattr(override, f.name) or getattr(self, f.name) for f in fields(self)}
        if override.password_file or override.password_env:  # one password source only
            out["password_file"] = override.password_file
            out["password_env"] = override.password_env
        return BrokerAuth(**out)

    def password(self) -> str | None:
        """The password from its file or variable; ``AuthError`` says what is wrong."""
        if self.has_password and not self.username:
            raise AuthError("a password needs a username (--username)")
        if self.password_file:
            return read_password_file(self.password_file)
        if self.password_env:
            value = os.environ.get(self.password_env)
            if not value:
                raise AuthError(f"environment variable {self.password_env} is not set or empty")
            return _checked(value, f"${self.password_env}")
        return None

    def check_files(self) -> None:
        """Every file named exists (and the key and password file are private)."""
        for name in ("ca_file", "cert_file", "key_file"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise AuthError(f"auth {name} {path} not found")
        if self.key_file is not None:
            check_private(self.key_file, "client key")

    def check(self, url: str | None = None) -> None:
        """Every file there and private, the password readable, TLS files only with an
        ``mqtts://`` ``url``: fail now, not at connect."""
        if url is not None:
            self.check_url(url)
        self.check_files()
        self.password()

    def check_url(self, url: str) -> bool:
        """Whether ``url`` (or every URL of a ``URL[,URL...]`` list) is TLS; ``AuthError`` for
        TLS files with plain ``mqtt://`` ones."""
        tls = parse_broker_list(url)[0].tls
        if self.tls_files and not tls:
            raise AuthError(f"a CA file or client certificate needs an mqtts:// URL, not {url!r}")
        return tls

    def argv(self) -> list[str]:
        """The ``edge-rl actor`` options that give a child process these credentials."""
        flags = {
            "ca_file": "--ca-file",
            "cert_file": "--cert",
            "key_file": "--key",
            "username": "--username",
            "password_file": "--password-file",
            "password_env": "--password-env",
        }
        out: list[str] = []
        for name, flag in flags.items():
            if getattr(self, name) is not None:
                out += [flag, getattr(self, name)]
        return out


def check_private(path: str | Path, what: str) -> None:
    """Refuse a secret file that its group or others may read or write."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise AuthError(f"{what} {path} not found") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise AuthError(
            f"{what} {path} is accessible by group or others (mode {stat.S_IMODE(mode):04o}): "
            f"chmod 600 {path}"
        )


def read_password_file(path: str | Path) -> str:
    """The first line of a private (0600) file, without its line end."""
    check_private(path, "password file")
    text = Path(path).read_text(encoding="utf-8")
    return _checked(text.splitlines()[0] if text else "", str(path))


def _checked(password: str, where: str) -> str:
    if not password:
        raise AuthError(f"password in {where} is empty")
    if len(password.encode()) > _MAX_PASSWORD_BYTES:
        raise AuthError(f"password in {where} is longer than MQTT allows")
    return password


def write_private(path: Path, text: str) -> None:
    """Create ``path`` with mode 0600 and ``text``; an existing file is an error."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
