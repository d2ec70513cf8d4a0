"""Run logs a person can plot: ``metrics.csv`` (one row per tick) and TensorBoard scalars."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any


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


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so a reader never sees half a file (write to a temp, then rename)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
