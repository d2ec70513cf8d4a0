"""A flashed board's credentials, from the deployment's ``edge-rl credentials`` directory.

What a board gets follows what the directory has: a client certificate when it holds the
CA's key (``ca.key``), a password when it holds the broker's password file
(``broker/mosquitto.passwd``), both when both. A board whose directory
(``boards/<id>/``) already holds them (made by ``edge-rl credentials --actors``, never
flashed) keeps them. ``retire`` moves a board's directory to ``retired/<id>-<time>/`` and
takes its line out of the broker's password file: that is how ``--rotate`` starts and how a
board is retired (a certificate stays valid until it expires: see docs/boards.md).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from edge_rl.deploy.credentials import make_credentials


@dataclass
class Issued:
    created: list[str] = field(default_factory=list)  # actor ids given new credentials
    kept: list[str] = field(default_factory=list)  # ids whose existing ones were taken
    passwd_updated: bool = False  # the broker's password file changed: re-install it


def kinds(creds: Path) -> tuple[bool, bool]:
    """(certificates, passwords): what this credentials directory can issue."""
    tls = (creds / "ca.key").exists()
    passwords = (creds / "broker" / "mosquitto.passwd").exists()
    if not (tls or passwords):
        raise ValueError(
            f"{creds} holds neither a CA (ca.key) nor the broker's password file: make it "
            f"first, e.g. edge-rl credentials {creds} --actors pi-01 --tls --passwords "
            "--server-name learner.lan"
        )
    return tls, passwords


def issue(creds: Path, ids: list[str]) -> Issued:
    tls, passwords = kinds(creds)
    out = Issued()
    need_cert = [a for a in ids if tls and not (creds / "boards" / a / "client.key").exists()]
    need_pw = [a for a in ids if passwords and not (creds / "boards" / a / "password").exists()]
    if need_cert:
        make_credentials(creds, need_cert, tls=True)
    if need_pw:
        make_credentials(creds, need_pw, passwords=True)
        out.passwd_updated = True
    new = set(need_cert) | set(need_pw)
    out.created = [a for a in ids if a in new]
    out.kept = [a for a in ids if a not in new]
    return out


def retire(creds: Path, actor_id: str) -> Path | None:
    """Move ``boards/<id>/`` aside and drop the id from the broker's password file; returns
    where the old files went (None: there were none)."""
    moved = None
    board = creds / "boards" / actor_id
    if board.exists():
        moved = creds / "retired" / f"{actor_id}-{time.strftime('%Y%m%d-%H%M%S')}"
        moved.parent.mkdir(mode=0o700, exist_ok=True)
        shutil.move(board, moved)
    passwd = creds / "broker" / "mosquitto.passwd"
    if passwd.exists():
        lines = passwd.read_text().splitlines(keepends=True)
        kept = [line for line in lines if line.split(":", 1)[0] != actor_id]
        if len(kept) != len(lines):
            tmp = passwd.with_name(f".{passwd.name}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.writelines(kept)
            tmp.replace(passwd)
    return moved
