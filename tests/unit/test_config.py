"""Run config: the ``energy`` block is validated on load (unknown keys, codes, ranges)."""

from __future__ import annotations

import pytest

from edge_rl.config import run_config_from_dict
from edge_rl.telemetry.carbon import EnergyConfig


def _cfg(energy: dict):
    return run_config_from_dict({"env_id": "CartPole-v1", "energy": energy})


def test_energy_defaults_and_a_full_block():
    assert run_config_from_dict({"env_id": "CartPole-v1"}).energy == EnergyConfig()
    e = _cfg(
        {
            "enabled": False,
            "country_iso_code": "CAN",
            "region": "ontario",
            "carbon_intensity_g_per_kwh": 120,
            "tracking_mode": "machine",
        }
    ).energy
    assert (e.enabled, e.country_iso_code, e.region) == (False, "CAN", "ontario")
    assert e.carbon_intensity_g_per_kwh == 120 and e.tracking_mode == "machine"


@pytest.mark.parametrize(
    "energy,match",
    [
        ({"country_iso_code": "US"}, "country_iso_code"),  # alpha-2, not alpha-3
        ({"country_iso_code": "usa"}, "country_iso_code"),
        ({"country_iso_code": "U5A"}, "country_iso_code"),
        ({"country_iso_code": "USAA"}, "country_iso_code"),
        ({"region": " "}, "region"),
        ({"carbon_intensity_g_per_kwh": -1}, "carbon_intensity"),
        ({"carbon_intensity_g_per_kwh": 5000}, "carbon_intensity"),
        ({"tracking_mode": "gpu"}, "tracking_mode"),
        ({"contry_iso_code": "FRA"}, "contry_iso_code"),  # a typo must not pass silently
        ({"enabled": "yes"}, "enabled"),
    ],
)
def test_bad_energy_config_is_rejected(energy, match):
    with pytest.raises(ValueError, match=match):
        _cfg(energy)


@pytest.mark.parametrize("q", [0.4, 1.01])
def test_action_error_quantile_out_of_range_is_refused(q):
    with pytest.raises(ValueError, match="action_error_quantile"):
        run_config_from_dict({"env_id": "Pendulum-v1", "export": {"action_error_quantile": q}})
