"""The boards one ``edge-rl actors`` process runs: its boards file.

    write_boards_file(path, [BoardEntry("sim-000", seed=1000, auth=BrokerAuth(...)), ...])
    boards = read_boards_file(path)         # edge-rl actors --boards-file PATH

A JSON list, one object per board: ``id``, ``seed`` and ``auth`` (the ``BrokerAuth``
fields that are set: file paths and variable names, never a password). Each board keeps
its own id and credentials; only the command line's settings (board file, broker, env,
run, policy key) are the process's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from edge_rl.transport.auth import BrokerAuth


@dataclass(frozen=True)
class BoardEntry:
    actor_id: str
    seed: int
    auth: BrokerAuth | None = None


def write_boards_file(path: Path, boards: Sequence[BoardEntry]) -> None:
    rows = []
    for b in boards:
        auth = {k: v for k, v in asdict(b.auth).items() if v is not None} if b.auth else None
        rows.append({"id": b.actor_id, "seed": b.seed, "auth": auth})
    path.write_text(json.dumps(rows, indent=1))


def read_boards_file(path: Path) -> list[BoardEntry]:
    """The boards of ``path``; ``ValueError`` for anything but a list of such objects."""
    try:
        rows = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"boards file {path}: {e}") from None
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"boards file {path}: a non-empty JSON list expected")
    boards = []
    for row in rows:
        if not isinstance(row, dict) or set(row) != {"id", "seed", "auth"}:
            raise ValueError(f"boards file {path}: each entry has exactly id, seed and auth")
        if not isinstance(row["id"], str) or not isinstance(row["seed"], int):
            raise ValueError(f"boards file {path}: id is a string and seed an integer")
        try:
            auth = BrokerAuth(**row["auth"]) if row["auth"] else None
        except TypeError as e:  # a key BrokerAuth has not
            raise ValueError(f"boards file {path}: auth of {row['id']}: {e}") from None
        boards.append(BoardEntry(row["id"], row["seed"], auth))
    ids = [b.actor_id for b in boards]
    if len(set(ids)) != len(ids):
        raise ValueError(f"boards file {path}: an actor id appears twice")
    return boards
