"""What a deployment's broker and boards need to trust each other: ``edge-rl credentials``.

    make_credentials(Path("creds"), actors=["pi-01", "pi-02"], tls=True,
                     server_names=["learner.lan", "192.168.1.10"], passwords=True)

Layout (every private key and password mode 0600, every directory 0700; docs/security.md)::

    creds/
      ca.crt  ca.key             the CA (EC P-256); ca.key signs, keep it off the boards
      broker/ ca.crt server.crt server.key mosquitto.passwd   for host/mosquitto.conf
      learner/ ca.crt client.crt client.key password          the learner's identity
      boards/<actor id>/ ca.crt client.crt client.key password   one directory per board

A client certificate's common name is its identity: the actor id for a board, ``learner``
for the learner (Mosquitto's ``use_identity_as_username`` makes it the ACL's ``%u``). A
password's username is the same name. Nothing existing is overwritten: a later call with new
actor ids reuses the CA and adds their directories; an actor that already has a key or a
password is an error, and then nothing is written.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from edge_rl.broker.config import check_username, hash_password_file
from edge_rl.broker.executables import find_mosquitto_passwd
from edge_rl.transport.auth import check_private, write_private

LEARNER = "learner"


@dataclass
class Written:
    """What ``make_credentials`` created, and what it found and kept."""

    created: list[Path] = field(default_factory=list)
    updated: list[Path] = field(default_factory=list)  # the broker's password file, appended to
    kept: list[Path] = field(default_factory=list)


def _mkdir(path: Path) -> Path:
    """``path`` and its missing parents, each created with mode 0700."""
    for p in reversed([path, *path.parents]):
        if not p.exists():
            p.mkdir(mode=0o700)
    return path


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),  # a board starts unattended: file mode protects it
    ).decode()


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "edge-rl"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _builder(subject: x509.Name, issuer: x509.Name, public_key, days: int):
    now = dt.datetime.now(dt.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def _key_usage(*, sign_certs: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not sign_certs,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=sign_certs,
        crl_sign=sign_certs,
        encipher_only=False,
        decipher_only=False,
    )


class CA:
    """A certificate authority: its key and self-signed certificate."""

    def __init__(self, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
        self.key = key
        self.cert = cert

    @classmethod
    def create(cls, days: int = 3650) -> CA:
        key = _new_key()
        name = _name("edge-rl CA")
        cert = (
            _builder(name, name, key.public_key(), days)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(sign_certs=True), critical=True)
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    @classmethod
    def load(cls, directory: Path) -> CA:
        check_private(directory / "ca.key", "CA key")
        key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{directory / 'ca.key'} is not an EC key made by edge-rl")
        return cls(key, x509.load_pem_x509_certificate((directory / "ca.crt").read_bytes()))

    def issue(self, common_name: str, days: int, server_names: list[str] | None = None):
        """A new key and a certificate for it: a client's, or with ``server_names`` a broker's."""
        key = _new_key()
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server_names else ExtendedKeyUsageOID.CLIENT_AUTH
        ski = self.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        builder = (
            _builder(_name(common_name), self.cert.subject, key.public_key(), days)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(sign_certs=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False
            )
        )
        if server_names:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([_general_name(n) for n in server_names]),
                critical=False,
            )
        return key, builder.sign(self.key, hashes.SHA256())


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _write_identity(ca: CA, directory: Path, common_name: str, days: int, out: Written) -> None:
    _mkdir(directory)
    key, cert = ca.issue(common_name, days)
    write_private(directory / "client.key", _key_pem(key))
    (directory / "client.crt").write_bytes(_cert_pem(cert))
    out.created += [directory / "client.key", directory / "client.crt"]


def _copy_ca(ca: CA, directory: Path) -> None:
    path = _mkdir(directory) / "ca.crt"
    if not path.exists():
        path.write_bytes(_cert_pem(ca.cert))


def _add_passwords(root: Path, identities: dict[str, Path], out: Written) -> None:
    """A password file per identity, and their hashes appended to broker/mosquitto.passwd."""
    passwd = _mkdir(root / "broker") / "mosquitto.passwd"
    plain = root / "broker" / f".new-{secrets.token_hex(4)}.passwd"
    entries = {user: secrets.token_urlsafe(24) for user in identities}
    write_private(plain, "".join(f"{u}:{p}\n" for u, p in entries.items()))
    try:
        hash_password_file(plain)  # mosquitto_passwd -U: no password on any command line
        for user, directory in identities.items():
            write_private(_mkdir(directory) / "password", entries[user] + "\n")
            out.created.append(directory / "password")
        existed = passwd.exists()
        fd = os.open(passwd, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(plain.read_text(encoding="utf-8"))
        (out.updated if existed else out.created).append(passwd)
    finally:
        plain.unlink(missing_ok=True)


def _passwd_users(root: Path) -> set[str]:
    path = root / "broker" / "mosquitto.passwd"
    if not path.exists():
        return set()
    return {line.split(":", 1)[0] for line in path.read_text().splitlines() if ":" in line}


def _check(
    root: Path, actors: list[str], tls: bool, passwords: bool, server_names: list[str], days: int
) -> None:
    """Everything that would make ``make_credentials`` fail, before it writes anything."""
    if not (tls or passwords):
        raise ValueError("nothing to make: ask for --tls, --passwords or both")
    if passwords:
        find_mosquitto_passwd()  # FileNotFoundError that says how to install it
    _check_arguments(actors, server_names, days)
    _check_existing(root, actors, tls, passwords, server_names)


def _check_arguments(actors: list[str], server_names: list[str], days: int) -> None:
    """Actor ids, ``--days`` and ``--server-name`` values that no certificate or passwd
    entry could be made for."""
    if not actors:
        raise ValueError("name at least one actor id (--actors pi-01,pi-02)")
    if len(set(actors)) != len(actors) or LEARNER in actors:
        raise ValueError(f"actor ids must be unique and not {LEARNER!r}: {actors}")
    for name in actors:
        check_username(name)
    if not 1 <= days <= 3650:
        raise ValueError(f"--days must be in [1, 3650], got {days}")
    for name in server_names:
        if not name or any(c.isspace() for c in name):
            raise ValueError(f"invalid --server-name {name!r}")


def _check_existing(
    root: Path, actors: list[str], tls: bool, passwords: bool, server_names: list[str]
) -> None:
    """Files under ``root`` that making these credentials would overwrite or contradict."""
    secrets_ = [("client.key", tls), ("password", passwords)]
    clashes = [
        root / "boards" / a / f
        for a in actors
        for f, wanted in secrets_
        if wanted
        if (root / "boards" / a / f).exists()
    ]
    users = _passwd_users(root)
    if passwords:
        clashes += [f"{u} in {root / 'broker' / 'mosquitto.passwd'}" for u in users & set(actors)]
        if LEARNER not in users and (root / LEARNER / "password").exists():
            clashes.append(root / LEARNER / "password")
    if clashes:
        raise FileExistsError("refusing to overwrite: " + ", ".join(map(str, clashes)))
    server_key = root / "broker" / "server.key"
    if tls and server_names and server_key.exists():
        raise FileExistsError(f"refusing to overwrite {server_key} (drop --server-name)")
    if tls and not server_names and not server_key.exists():
        raise ValueError("--tls needs --server-name: the name or IP boards reach the broker by")
    if (root / "ca.crt").exists() != (root / "ca.key").exists():
        raise FileExistsError(f"{root} has one of ca.crt and ca.key but not the other")


def make_credentials(
    root: Path,
    actors: list[str],
    *,
    tls: bool = False,
    passwords: bool = False,
    server_names: list[str] | None = None,
    days: int = 825,
) -> Written:
    """Create what is missing for the broker, the learner and ``actors`` (see the module)."""
    root = Path(root)
    boards = {a: root / "boards" / a for a in actors}
    learner_dir = root / "learner"
    server_key = root / "broker" / "server.key"
    _check(root, actors, tls, passwords, server_names or [], days)
    out = Written()
    _mkdir(root)
    if tls:
        if (root / "ca.key").exists():
            ca = CA.load(root)
            out.kept += [root / "ca.key", root / "ca.crt"]
        else:
            ca = CA.create()
            write_private(root / "ca.key", _key_pem(ca.key))
            (root / "ca.crt").write_bytes(_cert_pem(ca.cert))
            out.created += [root / "ca.key", root / "ca.crt"]
        for directory in (root / "broker", learner_dir, *boards.values()):
            _copy_ca(ca, directory)
        if server_names:
            key, cert = ca.issue(server_names[0], days, server_names)
            write_private(server_key, _key_pem(key))
            (root / "broker" / "server.crt").write_bytes(_cert_pem(cert))
            out.created += [server_key, root / "broker" / "server.crt"]
        if (learner_dir / "client.key").exists():
            out.kept.append(learner_dir / "client.key")
        else:
            _write_identity(ca, learner_dir, LEARNER, days, out)
        for actor, directory in boards.items():
            _write_identity(ca, directory, actor, days, out)
    if passwords:
        identities = dict(boards)
        if LEARNER in _passwd_users(root):
            out.kept.append(learner_dir / "password")
        else:
            identities = {LEARNER: learner_dir, **identities}
        _add_passwords(root, identities, out)
    return out
