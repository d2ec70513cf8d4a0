"""The fleet's board power model and summary.json's energy block: pure arithmetic, no
codecarbon, no broker."""

from __future__ import annotations

import pytest

from edge_rl.boards import Power
from edge_rl.telemetry.energy import (
    BUSY_BUCKETS,
    CarbonIntensity,
    HostEnergy,
    busy_idle,
    energy_block,
    energy_kwh,
    fleet_energy,
    kg_co2e,
)
from edge_rl.types import BREAKDOWN_KEYS

PI4 = Power(idle_w=1.6, busy_w=5.0, source="test")
PI5 = Power(idle_w=2.8, busy_w=9.7, source="test")

# (power, busy s, idle s, g CO2e/kWh) -> (kWh, kg CO2e), worked by hand: W·s / 3.6e6 = kWh.
CASES = [
    (PI4, 3600.0, 0.0, 400.0, 0.005, 0.002),  # one busy hour: 5 Wh
    (PI4, 0.0, 3600.0, 400.0, 0.0016, 0.00064),  # one idle hour: 1.6 Wh
    (PI4, 1800.0, 1800.0, 1000.0, 0.0033, 0.0033),  # (9000 + 2880) J
    (PI5, 360.0, 3240.0, 56.039, 0.00349, 0.000195576),  # (3492 + 9072) J, France's grid
    (PI5, 0.0, 0.0, 369.473, 0.0, 0.0),
    (PI4, 36.0, 0.0, 0.0, 0.00005, 0.0),  # a carbon-free grid
]


@pytest.mark.parametrize("power,busy,idle,g_per_kwh,kwh,kg", CASES)
def test_power_model_arithmetic(power, busy, idle, g_per_kwh, kwh, kg):
    got = energy_kwh(power, busy, idle)
    assert got == pytest.approx(kwh, rel=1e-9, abs=1e-15)
    assert kg_co2e(got, g_per_kwh) == pytest.approx(kg, rel=1e-6, abs=1e-15)


def test_every_actor_bucket_is_classified():
    # A new bucket in the actor's breakdown must be declared busy or idle here, not dropped.
    assert {*BUSY_BUCKETS, "idle", "wall"} == BREAKDOWN_KEYS


def test_negative_seconds_and_unknown_figures():
    with pytest.raises(ValueError, match="seconds"):
        energy_kwh(PI4, -1.0, 0.0)
    assert kg_co2e(None, 400.0) is None and kg_co2e(1.0, None) is None


def _b(**buckets: float) -> dict[str, float]:
    return {k: 0.0 for k in BUSY_BUCKETS} | {"idle": 0.0} | buckets


# breakdown -> (busy, idle): emulation and the policy slot's work are busy; idle is the rest
# of the loop's wall (the slot thread runs beside the loop, outside its wall).
SPLITS = [
    (_b(env_step=2, inference=1, exploration=0.5, publish=0.5, idle=6, wall=10), (4.0, 6.0)),
    (_b(env_step=1, inference=1, emulation=8, wall=10), (10.0, 0.0)),  # a simulated Pi 4
    (_b(env_step=1, idle=9, policy_receive=0.5, model_load=1.5, wall=10), (3.0, 7.0)),
    (_b(env_step=5, idle=5, model_load=6, wall=10), (11.0, 0.0)),  # idle never below 0
    (_b(idle=3, wall=3), (0.0, 3.0)),
]


@pytest.mark.parametrize("breakdown,expected", SPLITS)
def test_busy_idle_split(breakdown, expected):
    assert busy_idle(breakdown) == pytest.approx(expected)


def test_fleet_energy_prices_each_actor_with_its_board_and_says_who_is_missing():
    breakdowns = {
        "pi4-a": _b(env_step=3600, wall=3600),
        "pi5-a": _b(idle=3600, wall=3600),
        "odd": _b(env_step=1, wall=1),
        "old": {},  # an actor that predates the breakdown
    }
    boards = {"pi4-a": "rpi4", "pi5-a": "rpi5", "odd": "jetson", "old": "rpi4"}
    fleet = fleet_energy(breakdowns, boards, {"rpi4": PI4, "rpi5": PI5, "jetson": None})
    assert fleet.actors["pi4-a"].kwh == pytest.approx(0.005)
    assert fleet.actors["pi5-a"].kwh == pytest.approx(0.0028)
    assert fleet.kwh == pytest.approx(0.0078)
    assert set(fleet.missing) == {"odd", "old"}
    assert "jetson" in fleet.missing["odd"] and "breakdown" in fleet.missing["old"]
    assert fleet_energy({}, {}, {}).kwh is None  # no actors: no figure, not 0


def test_energy_block_fields():
    half = _b(env_step=1800, idle=1800, wall=3600)
    fleet = fleet_energy({"a": half}, {"a": "rpi4"}, {"rpi4": PI4})
    host = HostEnergy(0.01, 0.004, "codecarbon x", None, {"cpu_method": "cpu_load"})
    block = energy_block(host, fleet, "rpi4", PI4, CarbonIntensity(400.0, "src"), "USA", None)
    assert block["carbon_intensity_g_per_kwh"] == 400.0 and block["intensity_source"] == "src"
    assert block["country"] == "USA" and block["region"] is None
    learner, fl = block["learner"], block["fleet"]
    assert learner["kwh"] == 0.01 and learner["cpu_method"] == "cpu_load"
    assert fl["kwh"] == pytest.approx(0.0033) and fl["kg_co2e"] == pytest.approx(0.00132)
    assert (fl["method"], fl["board"]) == ("power model", "rpi4")
    assert (fl["idle_w"], fl["busy_w"], fl["source"]) == (1.6, 5.0, "test")
    assert fl["actors"]["a"] == {"board": "rpi4", "busy_s": 1800, "idle_s": 1800, "kwh": 0.0033}
    # No intensity: energy is still reported, CO2e is not.
    block = energy_block(host, fleet, "rpi4", None, CarbonIntensity(None, "none"), "USA", None)
    assert block["fleet"]["kg_co2e"] is None and block["fleet"]["idle_w"] is None
