"""Mosquitto's password-file format (``user:$7$<iterations>$<salt>$<hash>``, PBKDF2-SHA512,
what ``mosquitto_passwd`` writes in 2.0), read and checked in Python for the amqtt fallback,
which runs where ``mosquitto_passwd`` may not be installed. Standard library only.

Every password edge-rl makes is 24 random bytes (``secrets.token_urlsafe``), so the
iteration count is Mosquitto's own (101), not a slow hash's: nothing here is guessable.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from pathlib import Path

_ITERATIONS = 101
_SALT_BYTES = 12


def _pbkdf2(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)


def hash_line(user: str, password: str) -> str:
    """One password-file line, as ``mosquitto_passwd -U`` would write it."""
    salt = secrets.token_bytes(_SALT_BYTES)
    digest = _pbkdf2(password, salt, _ITERATIONS)
    b64 = base64.b64encode
    return f"{user}:$7${_ITERATIONS}${b64(salt).decode()}${b64(digest).decode()}"


def verify(password: str, hashed: str) -> bool:
    """Whether ``password`` is the one ``hashed`` (a ``$7$`` entry) was made from."""
    parts = hashed.split("$")
    if len(parts) != 5 or parts[:2] != ["", "7"] or not parts[2].isdigit():
        return False
    try:
        salt, digest = base64.b64decode(parts[3]), base64.b64decode(parts[4])
    except ValueError:
        return False
    return hmac.compare_digest(_pbkdf2(password, salt, int(parts[2])), digest)


def read_hashes(path: Path) -> dict[str, str]:
    """``user → hash`` of a password file (blank lines and ``#`` comments skipped)."""
    out: dict[str, str] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#") and ":" in line:
            user, hashed = line.split(":", 1)
            out[user] = hashed.strip()
    return out
