"""A run's deployment history: one JSON line per ``edge-rl deploy`` that reached the fleet,
in ``deployments.jsonl`` beside the policy it rolled out (the run directory, or the bundle
file's directory), and what ``edge-rl fleet-status --run-dir`` shows.

    append(history_file(source), DeployRecord(...))
    last(history_file(run_dir), 5)        # the newest five, oldest first; bad lines skipped

Each record says which deployment (``id``), what (the source bundle's SHA-256, and the
version and model digest the fleet was sent), to whom first (the canaries), how it ended
(``deployed``, ``aborted``, ``incomplete`` or ``interrupted``, with the reason) and when.
Appends are one ``write`` of one line, so a reader never sees half a record from a
finished deploy; a line that does not parse (a disk filled mid-write) is counted and
skipped, never fatal.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from edge_rl.learner.run_dir import RunDir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeployRecord:
    id: str  # this deployment's, e.g. 20261203T171502Z-3fa9c2d1
    time_unix: float  # when it ended
    run: str
    run_id: str  # the run start it rolled out to ("" when interrupted before it knew)
    source: str  # the bundle file rolled out
    source_sha256: str  # of that file's bytes
    version: int  # what the fleet was sent (0 when interrupted before it was known)
    digest: str  # the model's SHA-256 (the boards' policy_digest)
    outcome: str  # deployed | aborted | incomplete | interrupted
    reason: str
    canaries: tuple[str, ...] = ()
    serving_new: int = 0  # boards that reported it
    rolled_back: int = 0
    unconfirmed: int = 0
    seed: int | None = None  # the canaries' draw
    seconds: float = 0.0


def new_id(now: float | None = None) -> str:
    """A deployment id: its UTC start time, then 8 random hex digits."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{secrets.token_hex(4)}"


def history_file(source: Path) -> Path:
    """Where a deploy of ``source`` records itself: in the run directory it names, or the
    directory of the bundle file."""
    return RunDir(source if source.is_dir() else source.parent).deployments


def append(path: Path, record: DeployRecord) -> None:
    line = json.dumps(dataclasses.asdict(record), sort_keys=True) + "\n"
    with path.open("a") as f:
        f.write(line)


def last(path: Path, n: int) -> list[DeployRecord]:
    """The newest ``n`` records of ``path``, oldest first; none if it does not exist. A line
    that is not a record is skipped, logged once per call."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    names = {f.name for f in dataclasses.fields(DeployRecord)}
    out, bad = [], 0
    for line in lines:
        try:
            data = json.loads(line)
            data["canaries"] = tuple(data["canaries"])
            out.append(DeployRecord(**{k: v for k, v in data.items() if k in names}))
        except (ValueError, TypeError, KeyError):
            bad += 1
    if bad:
        log.warning("%s: %d lines that are not deployment records skipped", path, bad)
    return out[-n:] if n > 0 else []
