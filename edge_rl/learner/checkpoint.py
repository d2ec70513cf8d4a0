"""One checkpoint directory per run, written atomically: ``RUN_DIR/checkpoint/``.

    ck = Checkpoint(RunDir(path), header_for(cfg))
    ck.save({"replay": PartState(meta, arrays), "broadcast": PartState(meta, blobs=...)})
    saved = ck.load()        # CheckpointError: none there, or another edge-rl version/config
    saved.header, saved.parts["replay"]

Layout (format 2): ``header.json`` (edge_rl_version, format, algo, env_id, run,
config_hash, identity, and the counters a person looks for), ``state.json`` (each part's
JSON, by part name), one ``PART.npz`` per part with arrays, ``blobs/PART/`` (a part's byte
strings as they are: policy bundles and models as sent).

Atomic: everything goes to ``checkpoint.tmp/`` (each file fsynced), then the previous
``checkpoint/`` is renamed to ``checkpoint.old/``, the new one into place, the directory
fsynced, and only then is the old one removed. A crash at any point leaves a complete
checkpoint: ``checkpoint/``, or ``checkpoint.old/`` when it came between the two renames
(``load`` falls back to it). No TensorFlow here: what the arrays are is durable.py's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge_rl import __version__
from edge_rl.config import RunConfig
from edge_rl.learner.run_dir import RunDir
from edge_rl.types import PartState

FORMAT = 2  # of the directory's layout; bump it when a reader of the last one cannot read it


class CheckpointError(ValueError):
    """No usable checkpoint: missing, unreadable, or from another edge-rl or config."""


def config_hash(cfg: RunConfig) -> str:
    text = json.dumps(dataclasses.asdict(cfg), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def header_for(cfg: RunConfig, run_id: str | None = None) -> dict[str, Any]:
    """What a checkpoint must agree on with the learner that loads it; ``identity`` is who
    the fleet knows the run as: its name and the run id of its start (protocol §5), which
    a resumed learner keeps."""
    return {
        "format": FORMAT,
        "edge_rl_version": __version__,
        "algo": cfg.algo,
        "env_id": cfg.env_id,
        "run": cfg.run,
        "config_hash": config_hash(cfg),
        "identity": {"run": cfg.run, "run_id": run_id},
    }


@dataclass(frozen=True)
class Saved:
    header: dict[str, Any]
    parts: dict[str, PartState]  # by part name


class Checkpoint:
    def __init__(self, run_dir: RunDir, header: dict[str, Any]) -> None:
        self.run_dir = run_dir
        self.header = header
        self.path = run_dir.checkpoint
        self._tmp = run_dir.checkpoint_tmp
        self._old = run_dir.checkpoint_old

    @staticmethod
    def exists(run_dir: Path) -> bool:
        run = RunDir(run_dir)
        return any((p / "header.json").exists() for p in (run.checkpoint, run.checkpoint_old))

    def save(
        self,
        parts: dict[str, PartState],
        **counters: Any,  # into the header too: env_steps, updates, policy_version, ...
    ) -> float:
        """Write a complete checkpoint; the seconds it took."""
        t0 = time.perf_counter()
        shutil.rmtree(self._tmp, ignore_errors=True)  # a save that died half-way
        (self._tmp / "blobs").mkdir(parents=True)
        for name, part in parts.items():
            if part.arrays:
                with open(self._tmp / f"{name}.npz", "wb") as f:
                    np.savez(f, **part.arrays)
                    _sync(f)
            if part.blobs:
                (self._tmp / "blobs" / name).mkdir()
                for key, data in part.blobs.items():
                    _write(self._tmp / "blobs" / name / key, data)
                _sync_dir(self._tmp / "blobs" / name)
        state = {name: part.json for name, part in parts.items()}
        _write(self._tmp / "state.json", json.dumps(state, default=_item).encode())
        header = {**self.header, **counters, "saved_unix": time.time()}
        text = json.dumps(header, indent=2, default=_item)
        _write(self._tmp / "header.json", text.encode())  # last: its presence means complete
        _sync_dir(self._tmp / "blobs")
        _sync_dir(self._tmp)
        if self.path.exists():
            shutil.rmtree(self._old, ignore_errors=True)
            os.replace(self.path, self._old)
        os.replace(self._tmp, self.path)
        _sync_dir(self.run_dir.path)
        shutil.rmtree(self._old, ignore_errors=True)
        return time.perf_counter() - t0

    def load(self) -> Saved:
        path = self.path if (self.path / "header.json").exists() else self._old
        if not (path / "header.json").exists():
            raise CheckpointError(
                f"no checkpoint in {self.run_dir.path} (no {self.path.name}/header.json)"
            )
        try:
            header = json.loads((path / "header.json").read_text())
        except (OSError, ValueError) as e:
            raise CheckpointError(f"{path}/header.json is unreadable: {e}") from None
        self.check(header, path)
        try:
            return Saved(header, _read_parts(path))
        except (OSError, ValueError) as e:
            raise CheckpointError(f"checkpoint {path} is damaged: {e}") from None

    def check(self, header: dict[str, Any], path: Path) -> None:
        """A clear error naming both sides when the checkpoint is not this learner's."""
        mine = self.header
        if header.get("format") != mine["format"]:
            raise CheckpointError(
                f"checkpoint {path} has layout format {header.get('format')!r}; this edge-rl "
                f"reads format {mine['format']} only: resume it with the edge-rl that wrote it"
            )
        for key, what in (
            ("edge_rl_version", "edge-rl version"),
            ("algo", "algo"),
            ("env_id", "env_id"),
            ("config_hash", "config (hash)"),
            ("identity", "identity (run, run id)"),
        ):
            if header.get(key) != mine[key]:
                raise CheckpointError(
                    f"checkpoint {path} was written with {what} {header.get(key)!r}; this "
                    f"learner has {mine[key]!r}: resume it with the edge-rl and the config "
                    f"(RUN_DIR/config.yaml) that wrote it"
                )


def _read_parts(path: Path) -> dict[str, PartState]:
    state = json.loads((path / "state.json").read_text())
    parts = {}
    for name, meta in state.items():
        arrays: dict[str, np.ndarray] = {}
        if (path / f"{name}.npz").exists():
            with np.load(path / f"{name}.npz", allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        blob_dir = path / "blobs" / name
        blobs = (
            {f.name: f.read_bytes() for f in sorted(blob_dir.iterdir())}
            if blob_dir.is_dir()
            else {}
        )
        parts[name] = PartState(meta, arrays, blobs)
    return parts


def _item(x: Any) -> Any:
    """numpy scalars (a parity figure, a counter) as Python numbers."""
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"{type(x).__name__} is not JSON-able")


def _write(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        _sync(f)


def _sync(f) -> None:
    f.flush()
    os.fsync(f.fileno())


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
