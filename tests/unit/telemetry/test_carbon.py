"""The learner host's codecarbon wrapper: offline intensity, and a run that goes on when
codecarbon is missing or fails (no broker, no TensorFlow)."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import socket
import sys
import time
from importlib import resources
from pathlib import Path

import codecarbon  # a declared dependency: a missing one fails these tests, not skips them
import pytest

from edge_rl.telemetry import carbon
from edge_rl.telemetry.carbon import EnergyConfig, HostCarbon, carbon_intensity
from edge_rl.telemetry.progress import CurrentStderrHandler
from tests.harness.paths import REPO


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


class _PublicOnly:
    """A tracker with codecarbon 3.3's public surface only: reading any private attribute
    fails. It logs what the real one logs at a measurement, and returns a real EmissionsData."""

    private_reads: list[str] = []  # over every instance

    def __init__(self, **kwargs) -> None:
        self.kwargs = kwargs

    def __getattribute__(self, name: str):
        if name.startswith("_") and not name.startswith("__"):
            _PublicOnly.private_reads.append(name)
            raise AttributeError(f"private attribute {name} read")
        return super().__getattribute__(name)

    def start(self) -> None:
        log = logging.getLogger("codecarbon")
        log.warning("We will use the default power consumption of 4 W per thread")
        log.info("Delta energy consumed for CPU with cpu_load : 0.000001 kWh, power : 3.0 W")

    def stop(self) -> float:
        from codecarbon.output_methods.emissions_data import EmissionsData

        fields = {f.name: 0.0 for f in dataclasses.fields(EmissionsData)}
        fields.update(
            duration=2.0,
            emissions=4e-6,
            cpu_energy=2e-6,
            ram_energy=8e-6,
            energy_consumed=1e-5,
            codecarbon_version=codecarbon.__version__,
            tracking_mode="process",
            cpu_model="Some CPU",
            cpu_count=2,
            ram_total_size=16.0,
        )
        self.final_emissions_data = EmissionsData(**fields)
        return self.final_emissions_data.emissions

    def get_detected_hardware(self) -> dict:
        return {"cpu_model": "Some CPU", "cpu_count": 2}


def test_only_codecarbons_public_interface_is_used(monkeypatch, tmp_path):
    monkeypatch.setattr(codecarbon, "OfflineEmissionsTracker", _PublicOnly)
    monkeypatch.setattr(_PublicOnly, "private_reads", [])
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append
    cc_log = logging.getLogger("codecarbon")
    cc_log.addHandler(handler)
    try:
        host = HostCarbon(EnergyConfig(), tmp_path)
        host.start()
        energy = host.stop()
    finally:
        cc_log.removeHandler(handler)
    assert _PublicOnly.private_reads == []
    assert energy.missing is None and energy.kwh == 1e-5 and energy.kg_co2e == 4e-6
    d = energy.detail
    assert d["cpu_method"] == "cpu_load" and "CPU load x TDP" in energy.method
    assert d["hardware"] == {"cpu_model": "Some CPU", "cpu_count": 2}
    assert d["cpu_mean_w"] == pytest.approx(2e-6 * 3.6e6 / 2.0)
    assert any("4 W per thread" in n for n in d["notes"])
    assert [r.levelno for r in seen] == [logging.WARNING]  # its INFO lines reached no handler
    assert cc_log.filters == [] and cc_log.level == logging.WARNING  # nothing left behind


class _OwnHandler(_PublicOnly):
    """As codecarbon 3.3's tracker does in its constructor: a stderr handler of its own on
    its logger (and no propagation), before the hardware warnings of its start()."""

    def __init__(self, **kwargs) -> None:
        from codecarbon.external.logger import set_logger_format

        set_logger_format()
        logging.getLogger("codecarbon").propagate = False
        super().__init__(**kwargs)


def test_codecarbons_records_reach_the_log_file_and_not_the_terminal(monkeypatch, tmp_path):
    monkeypatch.setattr(codecarbon, "OfflineEmissionsTracker", _OwnHandler)
    terminal_out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", terminal_out)  # what codecarbon's handler writes to
    in_file: list[logging.LogRecord] = []
    file = logging.Handler()
    file.emit = in_file.append
    root = logging.getLogger()
    terminal = CurrentStderrHandler()
    root.addHandler(terminal)
    root.addHandler(file)
    try:
        # An unknown region: codecarbon logs its fallback while the intensity is looked up.
        host = HostCarbon(EnergyConfig(region="atlantis"), tmp_path)
        host.start()
        energy = host.stop()
    finally:
        root.removeHandler(terminal)
        root.removeHandler(file)
    messages = [r.getMessage() for r in in_file if r.name == "codecarbon"]
    assert any("Regional emissions retrieval failed" in m for m in messages), messages
    assert any("4 W per thread" in m for m in messages), messages
    assert terminal_out.getvalue() == ""
    cc_log = logging.getLogger("codecarbon")
    assert [h for h in cc_log.handlers if type(h) is logging.StreamHandler] == []
    assert "CPU load x TDP" in energy.method  # what the result line says instead


@pytest.mark.slow
def test_a_real_measurement_offline_without_files(tmp_path, monkeypatch):
    before = set(REPO.glob("*.csv"))
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
    assert not list(tmp_path.iterdir()) and set(REPO.glob("*.csv")) == before  # no emissions.csv
    assert attempts == []
    # A second tracker in this process reuses codecarbon's cached hardware set-up (and logs
    # no set-up report): its CPU mode is still known.
    again = HostCarbon(EnergyConfig(), tmp_path)
    again.start()
    second = again.stop()
    assert second.missing is None and second.detail["cpu_method"] == d["cpu_method"]
