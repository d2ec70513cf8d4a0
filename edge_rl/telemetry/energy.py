"""Energy and carbon of a run: the fleet's board power model, and summary.json's ``energy``.

Pure arithmetic on typed records: no codecarbon (carbon.py measures the learner host and
looks up the grid's intensity), no numpy, no files.

    busy_s, idle_s = busy_idle(breakdown)             # an actor's runtime breakdown (seconds)
    kwh = energy_kwh(board.power, busy_s, idle_s)     # busy_w·busy_s + idle_w·idle_s, in kWh
    kg = kg_co2e(kwh, intensity.g_per_kwh)

An actor's board is powered for its loop's ``wall``; each of those seconds is either busy or
idle. Busy buckets (docs/protocol.md §5.1):

* ``env_step``, ``inference``, ``exploration``, ``publish``: the actor's own work.
* ``emulation``: on a simulated board, the sleep that stands for the extra ``inference`` +
  ``exploration`` + ``env_step`` time of the slower board. The emulated board would be
  computing then, not idling, so it is busy; a real board reports 0.
* ``policy_receive``, ``model_load``: the policy slot's thread (decode, SHA-256, zlib,
  interpreter load). It runs beside the loop, so its seconds are outside ``wall``; they are
  charged busy instead of idle, which keeps the board's powered time equal to ``wall``.

Idle is the rest: ``wall`` − busy (the loop's ``idle`` bucket less the slot thread's work):
waiting for the broker, the learner's credit, a paused fleet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edge_rl.boards import Power

BUSY_BUCKETS = (
    "env_step",
    "inference",
    "exploration",
    "publish",
    "emulation",
    "policy_receive",
    "model_load",
)
J_PER_KWH = 3.6e6


def busy_idle(breakdown: Mapping[str, float]) -> tuple[float, float]:
    """(busy, idle) seconds of one actor's breakdown; idle = wall − busy, never below 0."""
    busy = sum(breakdown.get(k, 0.0) for k in BUSY_BUCKETS)
    return busy, max(0.0, breakdown["wall"] - busy)


def energy_kwh(power: Power, busy_s: float, idle_s: float) -> float:
    """The board's energy: busy_w · busy_s + idle_w · idle_s, in kWh (1 kWh = 3.6 MJ)."""
    if busy_s < 0 or idle_s < 0:
        raise ValueError(f"seconds must be >= 0, got busy {busy_s}, idle {idle_s}")
    return (power.busy_w * busy_s + power.idle_w * idle_s) / J_PER_KWH


def kg_co2e(kwh: float | None, g_per_kwh: float | None) -> float | None:
    """kg CO2e of ``kwh`` at a grid intensity in g CO2e/kWh; None if either is unknown."""
    if kwh is None or g_per_kwh is None:
        return None
    return kwh * g_per_kwh / 1000.0


@dataclass(frozen=True)
class CarbonIntensity:
    g_per_kwh: float | None  # None: no figure (the summary's kg CO2e are then null)
    source: str  # where the figure comes from, or why there is none


@dataclass(frozen=True)
class HostEnergy:
    """What codecarbon measured on the learner host (carbon.py), or why nothing was."""

    kwh: float | None
    kg_co2e: float | None
    method: str  # one line: tool, scope, how CPU and RAM power were obtained
    missing: str | None = None  # why kwh is None
    detail: dict[str, Any] = field(default_factory=dict)  # codecarbon's own figures


@dataclass(frozen=True)
class ActorEnergy:
    board: str
    busy_s: float
    idle_s: float
    kwh: float


@dataclass(frozen=True)
class FleetEnergy:
    kwh: float | None  # sum over the actors with a power model; None if there is none
    actors: dict[str, ActorEnergy]
    missing: dict[str, str]  # actor id -> why it has no energy


def fleet_energy(
    breakdowns: Mapping[str, Mapping[str, float]],
    boards: Mapping[str, str],
    powers: Mapping[str, Power | None],
) -> FleetEnergy:
    """``breakdowns``: actor -> its last runtime breakdown; ``boards``: actor -> board name;
    ``powers``: board name -> its power model (None: the board file has no ``power``)."""
    actors: dict[str, ActorEnergy] = {}
    missing: dict[str, str] = {}
    for actor, breakdown in sorted(breakdowns.items()):
        board = boards.get(actor, "")
        power = powers.get(board)
        if "wall" not in breakdown:
            missing[actor] = "no runtime breakdown in its status"
        elif power is None:
            missing[actor] = f"no power model for board {board!r}"
        else:
            busy, idle = busy_idle(breakdown)
            actors[actor] = ActorEnergy(board, busy, idle, energy_kwh(power, busy, idle))
    total = sum(a.kwh for a in actors.values()) if actors else None
    return FleetEnergy(total, actors, missing)


def sig(x: float | None, digits: int = 6) -> float | None:
    """``x`` to ``digits`` significant digits: a tiny run's energy is ~1e-5 kWh."""
    return None if x is None else float(f"{x:.{digits}g}")


def energy_block(
    host: HostEnergy,
    fleet: FleetEnergy,
    board: str,
    power: Power | None,
    intensity: CarbonIntensity,
    country: str,
    region: str | None,
) -> dict[str, Any]:
    """summary.json's ``energy``. ``board``/``power``: the run's fleet board (``fleet.board``);
    an actor that reports another board is priced with that board's own figures."""
    actors = {
        a: {
            "board": e.board,
            "busy_s": round(e.busy_s, 3),
            "idle_s": round(e.idle_s, 3),
            "kwh": sig(e.kwh),
        }
        for a, e in fleet.actors.items()
    }
    return {
        "country": country,
        "region": region,
        "carbon_intensity_g_per_kwh": intensity.g_per_kwh,
        "intensity_source": intensity.source,
        "learner": {
            "kwh": sig(host.kwh),
            "kg_co2e": sig(host.kg_co2e),
            "method": host.method,
            "missing": host.missing,
            **host.detail,
        },
        "fleet": {
            "kwh": sig(fleet.kwh),
            "kg_co2e": sig(kg_co2e(fleet.kwh, intensity.g_per_kwh)),
            "method": "power model",
            "board": board,
            **(asdict(power) if power else dict.fromkeys(("idle_w", "busy_w", "source"))),
            "busy_buckets": list(BUSY_BUCKETS),
            "actors": actors,
            "missing": fleet.missing,
        },
    }
