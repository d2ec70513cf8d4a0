"""What a run cost, read back from ``summary.json``: its runtime breakdown and its energy.

Either block may be absent (or ``null``: a run that did not record it) and the run
still loads; a block that is present but malformed is a ``ValueError`` whose
message names the block, which ``runs.py`` turns into a ``RunDirError`` naming the file.
The writers are ``edge_rl/telemetry/breakdown.py`` (``runtime_breakdown``) and
``edge_rl/telemetry/energy.py`` (``energy``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# An actor's policy-slot thread runs beside its loop: these buckets are outside the loop's
# ``wall`` (edge_rl/telemetry/energy.py), so they are not a share of it.
SLOT_BUCKETS = ("policy_receive", "model_load")


@dataclass(frozen=True)
class Clock:
    """One thread's wall time split into buckets (seconds); the loop's buckets sum to wall."""

    buckets: dict[str, float]  # bucket -> seconds, without "wall"
    wall: float  # seconds

    def percent(self, bucket: str) -> float:
        """``bucket`` as % of ``wall`` (0 for a bucket this clock does not have)."""
        return 100.0 * self.buckets.get(bucket, 0.0) / self.wall if self.wall > 0 else 0.0

    def busy_percent(self) -> float:
        """% of ``wall`` not in ``idle``: the thread was doing something."""
        return 100.0 - self.percent("idle") if self.wall > 0 else 0.0


@dataclass(frozen=True)
class RuntimeBreakdown:
    """``summary.json``'s ``runtime_breakdown``."""

    learner: dict[str, Clock]  # thread ("main", "ingest", "exporter") -> its clock
    actors: dict[str, Clock]  # actor id -> its loop's clock (slot buckets included)
    fleet_total: Clock | None  # bucket-wise sum over actors (actor-seconds); None: no actor


@dataclass(frozen=True)
class LearnerEnergy:
    """The learner host, as codecarbon measured it."""

    kwh: float | None  # None: not measured (see ``missing``)
    kg_co2e: float | None  # None: not measured, or no carbon intensity
    method: str  # one line: tool, scope, how CPU and RAM power were obtained
    missing: str | None  # why ``kwh`` is None


@dataclass(frozen=True)
class FleetEnergy:
    """The actors' boards, priced by a power model on their busy and idle seconds."""

    kwh: float | None  # None: no actor's board has a power model
    kg_co2e: float | None
    board: str  # the run's fleet.board
    idle_w: float | None
    busy_w: float | None
    actors: int  # how many actors were priced
    missing: dict[str, str]  # actor id -> why it has no energy

    @property
    def method(self) -> str:
        """``"power model (rpi5: 2.8 W idle, 9.7 W busy)"``."""
        if self.idle_w is None or self.busy_w is None:
            return f"power model ({self.board}: none known)"
        return f"power model ({self.board}: {self.idle_w:g} W idle, {self.busy_w:g} W busy)"


@dataclass(frozen=True)
class Energy:
    """``summary.json``'s ``energy``."""

    learner: LearnerEnergy
    fleet: FleetEnergy
    g_co2e_per_kwh: float | None  # the grid's carbon intensity; None: unknown
    intensity_source: str
    country: str


def parse_breakdown(raw: Any) -> RuntimeBreakdown | None:
    """The block as written, or None for a run without one; ``ValueError`` if malformed."""
    if raw is None:
        return None
    block = _mapping(raw, "runtime_breakdown")
    learner = _mapping(block.get("learner", {}), "runtime_breakdown.learner")
    actors = _mapping(block.get("actors", {}), "runtime_breakdown.actors")
    fleet = _mapping(block.get("fleet_total") or {}, "runtime_breakdown.fleet_total")
    return RuntimeBreakdown(
        learner={str(k): _clock(v, f"runtime_breakdown.learner.{k}") for k, v in learner.items()},
        actors={str(k): _clock(v, f"runtime_breakdown.actors.{k}") for k, v in actors.items()},
        fleet_total=_clock(fleet, "runtime_breakdown.fleet_total") if fleet else None,
    )


def parse_energy(raw: Any) -> Energy | None:
    """The block as written, or None for a run without one; ``ValueError`` if malformed."""
    if raw is None:
        return None
    block = _mapping(raw, "energy")
    host = _mapping(block.get("learner"), "energy.learner")
    fleet = _mapping(block.get("fleet"), "energy.fleet")
    missing = _mapping(fleet.get("missing") or {}, "energy.fleet.missing")
    return Energy(
        learner=LearnerEnergy(
            kwh=_opt_number(host.get("kwh"), "energy.learner.kwh"),
            kg_co2e=_opt_number(host.get("kg_co2e"), "energy.learner.kg_co2e"),
            method=str(host.get("method") or "unknown"),
            missing=None if host.get("missing") is None else str(host["missing"]),
        ),
        fleet=FleetEnergy(
            kwh=_opt_number(fleet.get("kwh"), "energy.fleet.kwh"),
            kg_co2e=_opt_number(fleet.get("kg_co2e"), "energy.fleet.kg_co2e"),
            board=str(fleet.get("board") or "unknown"),
            idle_w=_opt_number(fleet.get("idle_w"), "energy.fleet.idle_w"),
            busy_w=_opt_number(fleet.get("busy_w"), "energy.fleet.busy_w"),
            actors=len(_mapping(fleet.get("actors") or {}, "energy.fleet.actors")),
            missing={str(k): str(v) for k, v in missing.items()},
        ),
        g_co2e_per_kwh=_opt_number(
            block.get("carbon_intensity_g_per_kwh"), "energy.carbon_intensity_g_per_kwh"
        ),
        intensity_source=str(block.get("intensity_source") or "unknown"),
        country=str(block.get("country") or "unknown"),
    )


def _clock(raw: Any, where: str) -> Clock:
    buckets = {str(k): _nonnegative(v, f"{where}.{k}") for k, v in _mapping(raw, where).items()}
    if "wall" not in buckets:
        raise ValueError(f"{where}: no wall")
    wall = buckets.pop("wall")
    return Clock(buckets, wall)


def _mapping(raw: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        got = "nothing" if raw is None else type(raw).__name__
        raise ValueError(f"{where}: expected an object, got {got}")
    return raw


def _nonnegative(raw: Any, where: str) -> float:
    # bool is an int: true would read as 1 s
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ValueError(f"{where}: {raw!r} is not a number")
    x = float(raw)
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"{where}: {raw!r} is not a finite number >= 0")
    return x


def _opt_number(raw: Any, where: str) -> float | None:
    return None if raw is None else _nonnegative(raw, where)
