"""The learner host's codecarbon wrapper: offline intensity, and a run that goes on when
codecarbon is missing or fails (no broker, no TensorFlow)."""

from __future__ import annotations

import json
import socket
import sys
import time
from importlib import resources
from pathlib import Path

import pytest

from edge_rl.config import EnergyConfig
from edge_rl.telemetry import carbon
from edge_rl.telemetry.carbon import HostCarbon, carbon_intensity

codecarbon = pytest.importorskip("codecarbon")
ROOT = Path(__file__).resolve().parents[2]


def _shipped_mix() -> dict:
    path = resources.files("codecarbon") / "data" / "private_infra" / "global_energy_mix.json"
    return json.loads(path.read_text())


@pytest.mark.parametrize("country", ["USA", "FRA", "IND"])
def test_intensity_is_codecarbons_own_offline_figure(country):
    intensity = carbon_intensity(EnergyConfig(country_iso_code=country))
    mix = _shipped_mix()[country]
    assert intensity.g_per_kwh == pytest.approx(mix["carbon_intensity"], abs=1e-3)
    assert codecarbon.__version__ in intensity.source and mix["country_name"] in intensity.source


def test_regions_use_regional_data_or_say_they_fell_back():
    usa = carbon_intensity(EnergyConfig()).g_per_kwh
    california = carbon_intensity(EnergyConfig(region="california"))
    assert california.g_per_kwh < usa and "california" in california.source
    unknown = carbon_intensity(EnergyConfig(region="atlantis"))
    assert unknown.g_per_kwh == usa and "Falling back" in unknown.source


def test_an_unknown_country_fails_before_the_run():
    with pytest.raises(ValueError, match="XYZ"):
        HostCarbon(EnergyConfig(country_iso_code="XYZ"), Path("."))


def test_without_codecarbon_the_run_goes_on_and_says_why(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "codecarbon", None)  # every import of it now fails
    fallback = carbon_intensity(EnergyConfig(carbon_intensity_g_per_kwh=250.0))
    assert fallback.g_per_kwh == 250.0 and "not installed" in fallback.source
    host = HostCarbon(EnergyConfig(), tmp_path)
    assert host.intensity.g_per_kwh is None and "unset" in host.intensity.source
    host.start()
    energy = host.stop()
    assert energy.kwh is None and energy.kg_co2e is None and "not installed" in energy.missing


def test_disabled_measures_nothing_but_keeps_the_intensity(tmp_path):
    host = HostCarbon(EnergyConfig(enabled=False), tmp_path)
    host.start()
    energy = host.stop()
    assert energy.kwh is None and energy.missing == "energy.enabled is false"
    assert host.intensity.g_per_kwh is not None


class _Refusing:
    def __init__(self, **kwargs) -> None:
        pass

    def start(self) -> None:
        raise PermissionError("/sys/class/powercap: permission denied")


class _Silent(_Refusing):
    """codecarbon mostly logs its own failures and returns: nothing measured, no exception."""

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


@pytest.mark.parametrize("tracker,why", [(_Refusing, "PermissionError"), (_Silent, "nothing")])
def test_a_failing_tracker_leaves_a_reason(monkeypatch, tmp_path, tracker, why):
    monkeypatch.setattr(codecarbon, "OfflineEmissionsTracker", tracker)
    host = HostCarbon(EnergyConfig(), tmp_path)
    host.start()
    energy = host.stop()
    assert energy.kwh is None and why in energy.missing
    assert host.stop() is energy  # idempotent


@pytest.mark.slow
def test_a_real_measurement_offline_without_files(tmp_path, monkeypatch):
    before = set(ROOT.glob("*.csv"))
    attempts: list[object] = []  # offline: any connection or name lookup is a failure

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network is off in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    host = HostCarbon(EnergyConfig(), tmp_path)
    host.start()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 1.0:
        sum(i * i for i in range(10_000))
    energy = host.stop()
    assert energy.missing is None and energy.kwh > 0
    assert energy.kg_co2e == pytest.approx(energy.kwh * host.intensity.g_per_kwh / 1000, rel=1e-6)
    d = energy.detail
    assert d["cpu_method"] in carbon._CPU_METHODS and d["tracking_mode"] == "process"
    assert d["cpu_energy_kwh"] + d["ram_energy_kwh"] + d["gpu_energy_kwh"] == pytest.approx(
        energy.kwh, rel=1e-3
    )
    assert energy.method.startswith(f"codecarbon {codecarbon.__version__} offline")
    assert not list(tmp_path.iterdir()) and set(ROOT.glob("*.csv")) == before  # no emissions.csv
    assert attempts == []
