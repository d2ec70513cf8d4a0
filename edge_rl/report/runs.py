"""A run directory (written by ``edge-rl learn``) read back as typed records.

Only what the report shows is read: ``summary.json`` (with its runtime breakdown and
energy blocks when the run wrote them, see ``costs.py``), ``metrics.csv`` and, when the run
wrote one, ``publishes.jsonl``; anything missing (but not optional) or malformed is a
``RunDirError`` that names the file, so a person knows which of several run directories
to look at.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edge_rl.learner.run_dir import RunDir
from edge_rl.report.costs import Energy, RuntimeBreakdown, parse_breakdown, parse_energy

# What the report needs; a run may carry more (ignored) but not less.
REQUIRED_SUMMARY = ("env_id", "algo", "seed", "env_steps", "updates", "wall_s", "final_eval_return")
REQUIRED_METRICS = ("wall_s", "env_steps", "recent_return", "policy_version")


class RunDirError(ValueError):
    """A run directory the report cannot read; the message names the path."""


@dataclass(frozen=True)
class BoardSafety:
    """One board's safety shield counts and fixed-rate figures (summary ``actors``)."""

    safety: dict[str, int]  # reason -> count (docs/protocol.md §5.6)
    control_periods: int
    deadline_misses: int
    jitter_p50_ms: float
    jitter_p99_ms: float

    @property
    def shown(self) -> bool:
        """Whether the board had a shield change, a safe action or a control rate."""
        return bool(self.safety) or self.control_periods > 0


@dataclass(frozen=True)
class RunSummary:
    """The report's slice of ``summary.json``; ``None`` where the run did not record it."""

    env_id: str
    algo: str
    seed: int
    env_steps: int
    updates: int
    wall_s: float
    final_eval_return: float | None
    final_eval_return_std: float | None
    policy_precision: str | None
    policy_model_bytes: int | None
    policy_payload_bytes: int | None
    exports_failed: int | None
    selection_scores: dict[int, float]  # policy version -> greedy return (model selection)
    runtime_breakdown: RuntimeBreakdown | None = None  # None: the run did not record it
    energy: Energy | None = None  # None: the run did not record it
    boards: dict[str, BoardSafety] = field(default_factory=dict)  # actor id -> its figures


@dataclass(frozen=True)
class Metrics:
    """Columns of ``metrics.csv`` (one row per second of the learner), float arrays [rows]."""

    wall_s: np.ndarray
    env_steps: np.ndarray
    recent_return: np.ndarray  # nan until the first episodes end
    policy_version: np.ndarray


@dataclass(frozen=True)
class Publish:
    """One line of ``publishes.jsonl``: a policy broadcast and what it cost on the wire."""

    policy_version: int
    env_steps: int
    payload_bytes: int
    compression: float | None  # network compression ratio; None without compression


@dataclass(frozen=True)
class SelectionPoint:
    """One greedy score of a published policy, placed on the run's env-step axis."""

    policy_version: int
    env_steps: int | None  # None when metrics.csv never shows this version
    score: float


@dataclass(frozen=True)
class Run:
    path: Path
    summary: RunSummary
    metrics: Metrics
    publishes: tuple[Publish, ...] = ()  # empty when the run has no publishes.jsonl

    @property
    def name(self) -> str:
        return self.path.resolve().name

    def label(self, name: str | None = None) -> str:
        """``"hc-int8-s0 (int8, seed 0)"``: what a legend shows for this run."""
        s = self.summary
        detail = f"{s.policy_precision}, seed {s.seed}" if s.policy_precision else f"seed {s.seed}"
        return f"{name or self.name} ({detail})"

    def selection(self) -> list[SelectionPoint]:
        """Selection scores by version, with the env steps at which each version appeared.

        A version is scored right after it is published, so the first metrics row (one a
        second) showing it gives its env steps to within a second of collection.
        """
        versions = self.metrics.policy_version  # non-decreasing: versions are only assigned up
        points = []
        for v, score in sorted(self.summary.selection_scores.items()):
            i = int(np.searchsorted(versions, v, side="left"))
            steps = int(self.metrics.env_steps[i]) if i < len(versions) else None
            points.append(SelectionPoint(v, steps, score))
        return points


def run_labels(runs: list[Run]) -> list[str]:
    """One legend label per run; directories of the same name are told apart by their path."""
    names = [r.name for r in runs]
    return [r.label(str(r.path) if names.count(r.name) > 1 else None) for r in runs]


def load_run(path: Path) -> Run:
    """Read ``path/summary.json`` and ``path/metrics.csv``; ``RunDirError`` if unusable."""
    path = Path(path)
    if not path.is_dir():
        raise RunDirError(f"{path}: not a directory")
    run = RunDir(path)
    summary = _load_summary(run.summary)
    return Run(path, summary, _load_metrics(run.metrics), _load_publishes(run.publishes))


def _load_summary(file: Path) -> RunSummary:
    if not file.is_file():
        raise RunDirError(f"{file}: missing (is this a run directory of `edge-rl learn`?)")
    try:
        raw = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RunDirError(f"{file}: not readable JSON ({e})") from None
    if not isinstance(raw, dict):
        raise RunDirError(f"{file}: expected a JSON object")
    missing = [k for k in REQUIRED_SUMMARY if k not in raw]
    if missing:
        raise RunDirError(f"{file}: missing {', '.join(missing)}")
    try:
        breakdown = parse_breakdown(raw.get("runtime_breakdown"))
        energy = parse_energy(raw.get("energy"))
    except ValueError as e:
        raise RunDirError(f"{file}: malformed {e}") from None
    try:
        return RunSummary(
            env_id=str(raw["env_id"]),
            algo=str(raw["algo"]),
            seed=int(raw["seed"]),
            env_steps=int(raw["env_steps"]),
            updates=int(raw["updates"]),
            wall_s=float(raw["wall_s"]),
            final_eval_return=_opt(float, raw["final_eval_return"]),
            final_eval_return_std=_opt(float, raw.get("final_eval_return_std")),
            policy_precision=_opt(str, raw.get("policy_precision")),
            policy_model_bytes=_opt(int, raw.get("policy_model_bytes")),
            policy_payload_bytes=_opt(int, raw.get("policy_payload_bytes")),
            exports_failed=_opt(int, raw.get("exports_failed")),
            # JSON object keys are strings: {"10": 820.3} -> {10: 820.3}
            selection_scores={
                int(k): float(v) for k, v in (raw.get("selection_scores") or {}).items()
            },
            runtime_breakdown=breakdown,
            energy=energy,
            boards=_boards(raw.get("actors") or {}),
        )
    except (TypeError, ValueError, AttributeError) as e:
        raise RunDirError(f"{file}: malformed value ({e})") from None


def _boards(actors: dict[str, Any]) -> dict[str, BoardSafety]:
    """Each actor's shield and rate figures; a run from before protocol v5 has none."""
    return {
        str(a): BoardSafety(
            safety={str(k): int(v) for k, v in (d.get("safety") or {}).items()},
            control_periods=int(d.get("control_periods", 0)),
            deadline_misses=int(d.get("deadline_misses", 0)),
            jitter_p50_ms=float(d.get("jitter_p50_ms", 0.0)),
            jitter_p99_ms=float(d.get("jitter_p99_ms", 0.0)),
        )
        for a, d in sorted(actors.items())
    }


def _load_publishes(file: Path) -> tuple[Publish, ...]:
    if not file.is_file():
        return ()
    out = []
    try:
        lines = file.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise RunDirError(f"{file}: not readable ({e})") from None
    for n, line in enumerate(lines, 1):
        try:
            d = json.loads(line)
            out.append(
                Publish(
                    int(d["policy_version"]),
                    int(d["env_steps"]),
                    int(d["payload_bytes"]),
                    _opt(float, d.get("compression")),
                )
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise RunDirError(f"{file}, line {n}: malformed ({e})") from None
    return tuple(out)


def _opt(kind: type, value: Any) -> Any:
    return None if value is None else kind(value)


def _load_metrics(file: Path) -> Metrics:
    if not file.is_file():
        raise RunDirError(f"{file}: missing (is this a run directory of `edge-rl learn`?)")
    try:
        with open(file, newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in REQUIRED_METRICS if c not in (reader.fieldnames or ())]
            if missing:
                raise RunDirError(f"{file}: no column {', '.join(missing)}")
            columns: dict[str, list[float]] = {c: [] for c in REQUIRED_METRICS}
            for row in reader:
                for c in REQUIRED_METRICS:
                    columns[c].append(_number(row[c], file, reader.line_num, c))
    except (OSError, UnicodeDecodeError) as e:
        raise RunDirError(f"{file}: not readable ({e})") from None
    if not columns["wall_s"]:
        raise RunDirError(f"{file}: no rows")
    return Metrics(**{c: np.asarray(v, dtype=np.float64) for c, v in columns.items()})


def _number(text: str | None, file: Path, line: int, column: str) -> float:
    try:
        x = float(text)  # type: ignore[arg-type]  # None (short row) is caught below
    except (TypeError, ValueError):
        raise RunDirError(f"{file}, line {line}: {column}={text!r} is not a number") from None
    if column != "recent_return" and math.isnan(x):
        raise RunDirError(f"{file}, line {line}: {column} is nan")
    return x
