"""The learner host's energy, measured offline by codecarbon, and the grid's carbon intensity.

    host = HostCarbon(cfg.energy, run_dir)   # looks up the intensity; fails on an unknown country
    host.start()                             # LearnerNode.run() begins
    ...                                      # training, exports, the final evaluation
    energy = host.stop()                     # HostEnergy; never raises: a failure says why
    host.intensity                           # CarbonIntensity: g CO2e/kWh and its source

codecarbon is imported in these calls only (not on boards, not at import time). Offline: its
``OfflineEmissionsTracker`` reads the country's energy mix from files it ships, and we turn
every output off (no ``emissions.csv``, no API). How it gets CPU power depends on the host:
RAPL energy counters where ``/sys/class/powercap/intel-rapl`` is readable; otherwise its CPU
load times a TDP from its table of CPU models (4 W per thread when the model is unknown, as
on this 2-vCPU VM); RAM power is estimated from memory size (we never force a RAM power). The
summary records which (``cpu_method``) and codecarbon's own warnings (``notes``), because the
difference is large.

Public interface only (codecarbon is pinned to the range tested, see pyproject.toml): the
tracker's constructor, ``start()``, ``stop()``, its ``final_emissions_data``
(``EmissionsData``) and ``get_detected_hardware()``, and its log. codecarbon has no accessor
for how it measures the CPU; it names the mode in the INFO line it logs at every measurement
(``Delta energy consumed for CPU with cpu_load : ...``, also on a tracker that reuses the
process's cached hardware set-up, which logs no set-up report), read by a filter on its
``codecarbon`` logger (``_Log``) that also drops its INFO lines from every handler.

codecarbon gives its logger a stderr handler of its own and stops it propagating, at import
and again in every tracker's constructor (``codecarbon/external/logger.py``). On a host
without RAPL and with a CPU model it does not know, that handler prints five warning lines
over the live view on every run. ``_to_our_log`` takes the handler away after each of those
and lets the records propagate: they reach the process's own log handlers (``edge-rl learn``:
learner.log), and ``not_codecarbon`` keeps them off the terminal's (telemetry/progress.py),
where the result states the method once instead (``cpu_method_text``).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_rl.telemetry.energy import J_PER_KWH, CarbonIntensity, HostEnergy, sig

log = logging.getLogger(__name__)

# codecarbon samples power this often. CPU load and RAPL are integrated between samples, so
# the period sets the resolution of its log, not the total; 10 s keeps its thread cheap.
MEASURE_POWER_SECS = 10.0
# codecarbon 3.3 logs this at every measurement (EmissionsTracker._measure_power_and_energy).
_CPU_MODE_LINE = re.compile(r"Delta energy consumed for CPU with (\w+) :")
CODECARBON_LOGGER = "codecarbon"  # the one logger codecarbon 3.3 logs to
_CPU_METHODS = {  # codecarbon's CPU modes (3.x) -> what they mean
    "intel_rapl": "measured by RAPL energy counters",
    "cpu_load": "estimated as CPU load x TDP",
    "constant": "estimated as a constant share of TDP",
    "intel_power_gadget": "measured by Intel Power Gadget",
    "apple_powermetrics": "measured by powermetrics",
    "windows_emi": "measured by the Windows Energy Meter Interface",
}


def cpu_method_text(mode: str | None) -> str:
    """What codecarbon's CPU mode means: ``cpu_load`` -> ``estimated as CPU load x TDP``."""
    return _CPU_METHODS.get(mode or "", mode or "unknown")


def not_codecarbon(record: logging.LogRecord) -> bool:
    """A handler's filter: codecarbon's records are for the log file, not the terminal."""
    return record.name != CODECARBON_LOGGER and not record.name.startswith("codecarbon.")


def _to_our_log() -> logging.Logger:
    """codecarbon's logger without its own stderr handler (file handlers stay, as codecarbon
    keeps them), propagating to the process's handlers."""
    cc_log = logging.getLogger(CODECARBON_LOGGER)
    for handler in list(cc_log.handlers):
        if type(handler) is logging.StreamHandler:  # codecarbon's, on stderr
            cc_log.removeHandler(handler)
    cc_log.propagate = True
    return cc_log


@dataclass(frozen=True)
class EnergyConfig:
    """Energy and carbon of a run (edge_rl.telemetry: carbon.py on the host, energy.py for the
    fleet's boards). Offline: nothing is fetched at run time."""

    enabled: bool = True  # measure the learner host with codecarbon (the fleet model always runs)
    # Where the learner host draws its power: ISO 3166-1 alpha-3 (codecarbon's energy-mix data
    # has ~200 countries), and optionally a region it has data for (US states, Canadian
    # provinces, e.g. "california"). Its grid intensity also prices the fleet's energy.
    country_iso_code: str = "USA"
    region: str | None = None
    # g CO2e/kWh, used only when codecarbon or its data cannot be loaded (not installed).
    carbon_intensity_g_per_kwh: float | None = None
    # codecarbon's scope: "process" is the `edge-rl learn` process and its children (the
    # embedded broker, a simulated fleet); "machine" is everything on the host.
    tracking_mode: str = "process"

    def __post_init__(self) -> None:
        code = self.country_iso_code
        if not (len(code) == 3 and code.isascii() and code.isalpha() and code.isupper()):
            raise ValueError(f"energy.country_iso_code must be 3 capital letters: {code!r}")
        if self.region is not None and not self.region.strip():
            raise ValueError("energy.region must be a name or null")
        intensity = self.carbon_intensity_g_per_kwh
        if intensity is not None and not 0.0 <= intensity <= 2000.0:
            raise ValueError(f"energy.carbon_intensity_g_per_kwh must be in [0, 2000]: {intensity}")
        if self.tracking_mode not in ("process", "machine"):
            raise ValueError(
                f"energy.tracking_mode: process or machine, not {self.tracking_mode!r}"
            )


class _Notes(logging.Handler):
    """codecarbon's warnings while we run it: they are where it says how it estimated power
    ("we don't know [this CPU] ... default power consumption of 4 W per thread")."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(" ".join(record.getMessage().split()))


class _Log(logging.Filter):
    """On the ``codecarbon`` logger while a tracker runs. Its warnings are kept as notes (they
    say how it estimated power: "we don't know [this CPU] ... default power consumption of
    4 W per thread"), except the one that several trackers may run at once: we allow that
    (see ``HostCarbon.start``), so it says nothing. Its INFO lines (one every few seconds)
    reach no handler; the CPU mode is read from them."""

    def __init__(self) -> None:
        super().__init__()
        self.notes: list[str] = []
        self.cpu_mode: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.levelno < logging.WARNING:
            found = _CPU_MODE_LINE.match(message)
            if found:
                self.cpu_mode = found.group(1)
            return False
        if message.startswith("Multiple instances of codecarbon"):
            return False
        self.notes.append(" ".join(message.split()))
        return True


def carbon_intensity(cfg: EnergyConfig) -> CarbonIntensity:
    """Grid intensity from codecarbon's offline data for the configured country (and region),
    computed by its own code path; else ``carbon_intensity_g_per_kwh``; else none."""
    try:
        from codecarbon import __version__
        from codecarbon.core.emissions import Emissions
        from codecarbon.core.units import Energy
        from codecarbon.external.geography import GeoMetadata
        from codecarbon.input import DataSource
    except ImportError as e:
        return _fallback(cfg, f"codecarbon is not installed ({e})")
    try:
        data = DataSource()
        mix = data.get_global_energy_mix_data()
    except Exception as e:  # noqa: BLE001 - a broken install must not stop the run
        return _fallback(cfg, f"codecarbon's data cannot be read ({e!r})")
    code = cfg.country_iso_code
    if code not in mix:  # codecarbon would quietly use its world average
        raise ValueError(
            f"energy.country_iso_code {code!r} is not in codecarbon's energy-mix data "
            f"(known: {', '.join(sorted(mix)[:8])}, ...)"
        )
    notes = _Notes()
    cc_log = _to_our_log()  # (codecarbon was imported above: its handler is there now)
    cc_log.addHandler(notes)
    try:
        geo = GeoMetadata(code, country_name=mix[code]["country_name"], region=cfg.region)
        kg = Emissions(data).get_private_infra_emissions(Energy.from_energy(kWh=1.0), geo)
    finally:
        cc_log.removeHandler(notes)
    where = f"{mix[code]['country_name']}, {mix[code].get('year', '?')} energy mix"
    if cfg.region is not None:
        # codecarbon has regional figures for some countries only, and falls back to the
        # country's with a warning for an unknown region (kept in the source).
        where += f"; region {cfg.region!r}" + (f": {notes.messages[-1]}" if notes.messages else "")
    return CarbonIntensity(round(kg * 1000.0, 3), f"codecarbon {__version__} offline data: {where}")


def _fallback(cfg: EnergyConfig, why: str) -> CarbonIntensity:
    if cfg.carbon_intensity_g_per_kwh is not None:
        return CarbonIntensity(
            cfg.carbon_intensity_g_per_kwh, f"config energy.carbon_intensity_g_per_kwh ({why})"
        )
    return CarbonIntensity(None, f"none: {why}, and energy.carbon_intensity_g_per_kwh is unset")


class HostCarbon:
    """codecarbon's ``OfflineEmissionsTracker`` around the learner's run. A run must complete
    without it: every failure (not installed, no permission, its own errors, which it mostly
    logs instead of raising) ends up in ``HostEnergy.missing``."""

    def __init__(self, cfg: EnergyConfig, run_dir: Path) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        self.intensity = carbon_intensity(cfg)
        self._tracker: Any = None
        self._missing: str | None = None if cfg.enabled else "energy.enabled is false"
        self._log = _Log()
        self._result: HostEnergy | None = None

    def start(self) -> None:
        if self._missing is not None or self._tracker is not None:
            return
        try:
            from codecarbon import OfflineEmissionsTracker
        except ImportError as e:
            self._missing = f"codecarbon is not installed ({e}): pip install 'edge-rl[host]'"
            return
        cc_log = _to_our_log()
        cc_log.addFilter(self._log)
        cc_log.setLevel(logging.INFO)  # for the CPU mode; ``_Log`` keeps INFO from handlers
        try:
            self._tracker = OfflineEmissionsTracker(
                country_iso_code=self.cfg.country_iso_code,
                region=self.cfg.region,
                tracking_mode=self.cfg.tracking_mode,
                measure_power_secs=MEASURE_POWER_SECS,
                output_methods=[],  # no emissions.csv in the working directory, no API
                output_dir=str(self.run_dir),  # (were a method to write anyway: the run dir)
                emissions_endpoint=None,
                electricitymaps_api_token=None,  # offline: no live grid data
                # Else its lock file fails parallel runs, and its lock installs SIGINT and
                # SIGTERM handlers over the CLI's (which stop the fleet and the broker).
                allow_multiple_runs=True,
                project_name="edge-rl",
                log_level="info",  # (else it sets its logger's level back to WARNING)
            )
            _to_our_log()  # the constructor gave it a stderr handler again
            self._tracker.start()  # the first start looks up the CPU model: 1-10 s here
        except Exception as e:  # noqa: BLE001 - the run goes on without a measurement
            self._missing = f"codecarbon failed to start: {e!r}"
            self._tracker = None
            self._release_log()

    def _release_log(self) -> None:
        cc_log = logging.getLogger(CODECARBON_LOGGER)
        cc_log.removeFilter(self._log)
        cc_log.setLevel(logging.WARNING)  # without our filter: no INFO lines in our logs

    def stop(self) -> HostEnergy:
        """Stop measuring (idempotent) and return what was measured, or why nothing was."""
        if self._result is None:
            self._result = self._stop()
            self._release_log()
            log.info("learner energy: %s kWh (%s)", self._result.kwh, self._result.method)
        return self._result

    def _stop(self) -> HostEnergy:
        notes = {"notes": self._log.notes}
        if self._tracker is None:
            return HostEnergy(None, None, "none", self._missing or "never started", notes)
        try:
            # stop() returns kg CO2e, or None when it failed (it logs instead of raising)
            # and then it leaves no final_emissions_data either.
            kg = self._tracker.stop()
            data = getattr(self._tracker, "final_emissions_data", None)
            if kg is None or data is None or not data.energy_consumed > 0:
                why = "; ".join(self._log.notes[-3:]) or "no energy recorded"
                return HostEnergy(None, None, "none", f"codecarbon measured nothing: {why}", notes)
            detail = self._detail(data)
        except Exception as e:  # noqa: BLE001
            return HostEnergy(None, None, "none", f"codecarbon failed to stop: {e!r}", notes)
        return HostEnergy(data.energy_consumed, data.emissions, _method(detail), None, detail)

    def _detail(self, data: Any) -> dict[str, Any]:
        """codecarbon's final figures (``EmissionsData``), what it detected, and the CPU mode
        from its log (``_Log``)."""
        duration = max(float(data.duration), 1e-9)
        return {
            "codecarbon_version": data.codecarbon_version,
            "tracking_mode": data.tracking_mode,
            "cpu_method": self._log.cpu_mode,
            "hardware": self._tracker.get_detected_hardware(),
            "cpu_model": data.cpu_model,
            "cpu_count": data.cpu_count,
            "ram_total_gb": round(float(data.ram_total_size), 3),
            "duration_s": round(duration, 3),
            "cpu_energy_kwh": sig(data.cpu_energy),
            "ram_energy_kwh": sig(data.ram_energy),
            "gpu_energy_kwh": sig(data.gpu_energy),
            "cpu_mean_w": round(data.cpu_energy * J_PER_KWH / duration, 3),
            "ram_mean_w": round(data.ram_energy * J_PER_KWH / duration, 3),
            "notes": self._log.notes,
        }


def _method(d: dict[str, Any]) -> str:
    """One line: ``codecarbon 3.3.2 offline, process tracking: CPU estimated as CPU load x TDP,
    RAM estimated from memory size (23.5 GB)``."""
    cpu = cpu_method_text(d["cpu_method"])
    return (
        f"codecarbon {d['codecarbon_version']} offline, {d['tracking_mode']} tracking: "
        f"CPU {cpu}, RAM estimated from memory size ({d['ram_total_gb']:g} GB)"
    )
