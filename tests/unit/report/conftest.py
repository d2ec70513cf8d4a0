"""Synthetic run directories, written the way ``edge-rl learn`` writes them."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

# metrics.csv as LearnerNode writes it (edge_rl/learner/node.py).
FIELDS = (
    "wall_s,env_steps,episodes,recent_return,updates,updates_per_s,loss,mean_q,policy_version,"
    "actors_online,transitions_rejected,transitions_duplicate,ingest_queue_dropped,fleet_state,"
    "epsilon,sigma"
).split(",")

MakeRun = Callable[..., Path]

# The energy block's methods as edge_rl/telemetry/energy.py writes them for a simulated rpi5.
LEARNER_METHOD = "codecarbon 3.3.2 offline, process tracking: CPU estimated as CPU load x TDP"
FLEET_POWER = {"board": "rpi5", "idle_w": 2.8, "busy_w": 9.7, "source": "sbc-reviews"}


def _breakdown_block(fleet: dict[str, float], main: dict[str, float]) -> dict:
    """``runtime_breakdown`` with ``fleet`` as fleet_total (two actors, a half each) and
    ``main`` as the learner's main thread (edge_rl/telemetry/breakdown.py)."""
    half = {k: v / 2 for k, v in fleet.items()}
    return {
        "learner": {
            "main": main,
            "ingest": {"ingest": 1.0, "idle": 9.0, "wall": 10.0},
            "exporter": {"export": 2.0, "publish": 0.5, "evaluate": 0.5, "idle": 7.0, "wall": 10.0},
        },
        "actors": {"sim-00": half, "sim-01": half},
        "fleet_total": fleet,
    }


def _energy_block(learner_kwh: float | None, fleet_kwh: float | None, g_per_kwh: float | None):
    """``energy`` as edge_rl/telemetry/energy.py writes it, kg CO2e = kWh x g/kWh / 1000."""

    def kg(kwh):
        return None if kwh is None or g_per_kwh is None else kwh * g_per_kwh / 1000

    return {
        "country": "USA",
        "region": None,
        "carbon_intensity_g_per_kwh": g_per_kwh,
        "intensity_source": "codecarbon 3.3.2 offline data: United States, 2023 energy mix",
        "learner": {
            "kwh": learner_kwh,
            "kg_co2e": kg(learner_kwh),
            "method": LEARNER_METHOD,
            "missing": None if learner_kwh is not None else "no codecarbon",
            "cpu_count": 2,
        },
        "fleet": {
            "kwh": fleet_kwh,
            "kg_co2e": kg(fleet_kwh),
            "method": "power model",
            **FLEET_POWER,
            "busy_buckets": ["env_step"],
            "actors": {"sim-00": {"board": "rpi5", "busy_s": 1.0, "idle_s": 9.0, "kwh": fleet_kwh}},
            "missing": {"sim-01": "no runtime breakdown in its status"},
        },
    }


@pytest.fixture
def make_run(tmp_path) -> MakeRun:
    """``make(name, precision=, seed=, scores=, final=, rows=, publishes=, breakdown=,
    energy=) -> run dir``.

    One metrics row per second, 100 env steps and a new policy version every 10 rows; the
    return climbs from -100 (nan for the first 5 rows, as before the first episode ends).
    ``breakdown=(fleet_total, learner main)``: bucket -> seconds (with ``wall``) of the
    runtime breakdown; ``energy=(learner kWh, fleet kWh, g CO2e/kWh)``. Without them the
    run looks like one from before issue 5.
    """

    def make(
        name: str,
        precision: str | None = "int8",
        seed: int = 0,
        scores: dict[int, float] | None = None,
        final: tuple[float | None, float | None] = (180.0, 12.5),
        rows: int = 60,
        publishes: list[tuple[int, int, int, float | None]] | None = None,
        breakdown: tuple[dict[str, float], dict[str, float]] | None = None,
        energy: tuple[float | None, float | None, float | None] | None = None,
    ) -> Path:
        run = tmp_path / name
        run.mkdir(parents=True)
        summary = {
            "env_id": "CartPole-v1",
            "algo": "dqn",
            "seed": seed,
            "env_steps": rows * 100,
            "updates": rows * 50,
            "wall_s": float(rows),
            "final_eval_return": final[0],
            "final_eval_return_std": final[1],
            "policy_precision": precision,
            "policy_model_bytes": 5120,
            "policy_payload_bytes": 3072,
            "exports_failed": 1,
            "selection_scores": {str(v): s for v, s in (scores or {}).items()},
            "actors": {"sim-00": {"env_steps": rows * 100}},
        }
        if precision is None:
            del summary["policy_precision"]
        if breakdown is not None:
            summary["runtime_breakdown"] = _breakdown_block(*breakdown)
        if energy is not None:
            summary["energy"] = _energy_block(*energy)
        (run / "summary.json").write_text(json.dumps(summary))
        with open(run / "metrics.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS)
            w.writeheader()
            for t in range(rows):
                w.writerow(
                    {
                        "wall_s": float(t),
                        "env_steps": t * 100,
                        "episodes": t // 5,
                        "recent_return": math.nan if t < 5 else -100.0 + 5 * t + seed,
                        "updates": t * 50,
                        "updates_per_s": 50.0,
                        "loss": 0.5,
                        "mean_q": 1.0,
                        "policy_version": t // 10,
                        "actors_online": 2,
                        "transitions_rejected": 0,
                        "transitions_duplicate": 0,
                        "ingest_queue_dropped": 0,
                        "fleet_state": "running",
                        "epsilon": 0.1,
                        "sigma": "",
                    }
                )
        if publishes is not None:  # (version, env_steps, payload_bytes, compression)
            lines = [
                json.dumps(
                    {
                        "policy_version": v,
                        "learner_step": 0,
                        "env_steps": e,
                        "payload_bytes": b,
                        "model_bytes": 5120,
                        "codec": "blocks",
                        "compression": c,
                    }
                )
                for v, e, b, c in publishes
            ]
            (run / "publishes.jsonl").write_text("\n".join(lines) + "\n")
        return run

    return make
