"""Run logs a person can plot: ``metrics.csv`` (one row per tick) and TensorBoard scalars."""

from __future__ import annotations

import csv
import json
import logging
import math
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class MetricsLog:
    """Appends rows of scalars to a CSV file and to TensorBoard scalars (if TF is there)."""

    def __init__(
        self,
        path: Path,
        tensorboard_dir: Path | None,
        fields: list[str],
        append: bool = False,
    ) -> None:
        """``path``: the CSV file; ``tensorboard_dir``: None for no TensorBoard; ``append``:
        a resumed run's rows go after the ones there (the header once)."""
        self.fields = fields
        fresh = not (append and path.exists() and path.stat().st_size > 0)
        self._file = open(path, "w" if fresh else "a", newline="")  # noqa: SIM115
        self._csv = csv.DictWriter(self._file, fieldnames=fields, extrasaction="ignore")
        if fresh:
            self._csv.writeheader()
        elif _last_byte(path) != b"\n":  # a row torn by a kill -9 stays one bad row
            self._file.write("\n")
        self._tb = None
        if tensorboard_dir is not None:
            import tensorflow as tf  # the learner host has it; boards never log here

            self._tb = tf.summary.create_file_writer(str(tensorboard_dir))

    def write(self, row: dict[str, Any], step: int) -> None:
        self._csv.writerow(row)
        self._file.flush()
        if self._tb is not None:
            import tensorflow as tf

            with self._tb.as_default(step=step):
                for k, v in row.items():
                    if isinstance(v, (int, float)) and v is not None and k != "env_steps":
                        tf.summary.scalar(k, float(v))

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.flush()
            self._tb.close()


def _last_byte(path: Path) -> bytes:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1)


def finite(data: Any) -> tuple[Any, int]:
    """``data`` with every NaN or infinite float replaced by None, and how many were.

    Figures from boards are bounded where they are recorded (learner/fleet/figures.py), so
    none should be left here; this is the last line before a JSON writer that refuses them.
    """
    if isinstance(data, float):
        return (data, 0) if math.isfinite(data) else (None, 1)
    if isinstance(data, dict):
        out, n = {}, 0
        for k, v in data.items():
            out[k], m = finite(v)
            n += m
        return out, n
    if isinstance(data, (list, tuple)):
        items = [finite(v) for v in data]
        return [v for v, _ in items], sum(m for _, m in items)
    return data, 0


def strict_json(data: Any, **kwargs: Any) -> str:
    """JSON text any strict parser reads: NaN and infinities become null (counted in a
    warning), and the writer itself refuses any that are left (``allow_nan=False``)."""
    clean, replaced = finite(data)
    if replaced:
        log.warning("%d non-finite numbers written as null", replaced)
    return json.dumps(clean, allow_nan=False, **kwargs)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write strict JSON (``strict_json``) so a reader never sees half a file (write to a
    temp, then rename)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(strict_json(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
