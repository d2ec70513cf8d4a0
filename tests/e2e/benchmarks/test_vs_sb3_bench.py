"""benchmarks/vs_sb3.py: the like-for-like settings and the table from hand-made records
(fast), and a quick CartPole run whose table is checked against what both sides left (slow).

SB3 is optional in the slow test, and says so: the script never builds SB3's venv there
(``--no-sb3-install``, a pip install takes a minute), so SB3's side runs only when a ready
venv is on the machine already; without one the SB3 row must carry the "SB3 not run"
reason, and the edge-rl side and the table are checked either way (no skip).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from edge_rl.config import run_config_from_dict
from tests.harness.paths import REPO

SCRIPT = REPO / "benchmarks" / "vs_sb3.py"
sys.path.insert(0, str(SCRIPT.parent))
import vs_sb3  # noqa: E402
from _proc_cpu import TreeSampler, role_of  # noqa: E402


def parse_table(stdout: str) -> list[dict[str, str]]:
    """The first markdown table in ``stdout``: one dict per row, keyed by header."""
    lines = []
    for line in stdout.splitlines():
        if line.startswith("|"):
            lines.append(line)
        elif lines:
            break
    assert len(lines) >= 3, f"no markdown table in:\n{stdout[-3000:]}"
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]
    headers, rows = cells[0], cells[2:]
    assert all(len(r) == len(headers) for r in rows)
    return [dict(zip(headers, r, strict=True)) for r in rows]


def test_sb3_update_count_follows_its_rollouts():
    # RL Zoo's CartPole: 196 rollouts of 256 steps, the first 3 end before step 1000.
    assert vs_sb3.sb3_updates(50_000, 1000, 256, 128) == 193 * 128
    # TD3, one step a rollout: one update per step past the learning start.
    assert vs_sb3.sb3_updates(20_000, 1000, 1, 1) == 19_000


@pytest.mark.parametrize("task", sorted(vs_sb3.TASKS))
def test_like_for_like_sets_the_same_work_on_both_sides(task):
    args = vs_sb3.parse(["--tasks", task])
    pair = vs_sb3.make_pair(vs_sb3.TASKS[task], args)
    cfg = run_config_from_dict(pair.edge_config)  # edge-rl accepts the config it is given
    kw = pair.sb3_spec["kwargs"]
    assert cfg.total_env_steps == pair.sb3_spec["total_timesteps"] == vs_sb3.TASKS[task].budget
    assert cfg.updates_paid_by(cfg.total_env_steps) == pair.sb3_spec["expected_updates"]
    assert cfg.learning_starts == kw["learning_starts"]
    assert cfg.replay_capacity == kw["buffer_size"]
    assert cfg.eval_episodes == pair.sb3_spec["final_episodes"] == 10
    assert pair.sb3_spec["threads"] == 1
    if cfg.algo == "dqn":
        assert list(cfg.dqn.hidden) == kw["policy_kwargs"]["net_arch"]
        assert cfg.dqn.batch_size == kw["batch_size"]
        assert cfg.dqn.learning_rate == kw["learning_rate"]
    else:
        nets, section = kw["policy_kwargs"]["net_arch"], getattr(cfg, cfg.algo)
        assert list(section.actor_hidden) == nets["pi"]
        assert list(section.critic_hidden) == nets["qf"]
        assert section.batch_size == kw["batch_size"]
        assert section.actor_lr == section.critic_lr == kw["learning_rate"]
        assert section.exploration_sigma == pair.sb3_spec["noise_std"]
        assert (section.gamma, section.tau) == (kw["gamma"], kw["tau"])
    if cfg.algo == "sac":
        assert cfg.sac.alpha_lr == kw["learning_rate"]
        assert kw["ent_coef"] == f"auto_{cfg.sac.init_alpha}" and kw["target_entropy"] == "auto"
        assert pair.sb3_spec["explore"] == "policy"  # SB3's own exploration unless asked


def test_seeds_make_a_pair_each_with_that_seed_on_both_sides():
    args = vs_sb3.parse(["--tasks", "pendulum_sac", "--seeds", "0,2", "--budget", "9000"])
    pairs = [vs_sb3.make_pair(vs_sb3.TASKS["pendulum_sac"], args, s) for s in args.seeds]
    assert [p.task for p in pairs] == ["pendulum_sac s0", "pendulum_sac s2"]
    for seed, pair in zip(args.seeds, pairs, strict=True):
        cfg = run_config_from_dict(pair.edge_config)
        assert cfg.seed == pair.sb3_spec["seed"] == seed and cfg.run.endswith(f"-s{seed}")
        assert cfg.total_env_steps == pair.sb3_spec["total_timesteps"] == 9000
        assert cfg.updates_paid_by(9000) == pair.sb3_spec["expected_updates"] == 8000
    with pytest.raises(SystemExit):
        vs_sb3.parse(["--tasks", "pendulum_sac", "--tuned"])  # the zoo has no SAC settings here


def test_tuned_keeps_each_sides_own_settings():
    args = vs_sb3.parse(["--tasks", "pendulum", "--tuned"])
    pair = vs_sb3.make_pair(vs_sb3.TASKS["pendulum"], args)
    example = vs_sb3.yaml.safe_load((REPO / "examples" / "pendulum_td3.yaml").read_text())
    assert pair.edge_config["replay_ratio"] == example["replay_ratio"]
    assert pair.edge_config["td3"] == example["td3"]
    assert pair.sb3_spec["kwargs"]["policy_kwargs"] == {"net_arch": [400, 300]}
    assert pair.sb3_spec["expected_updates"] == 10_000  # 20k steps, learning starts at 10k
    assert pair.sb3_spec["select"] == vs_sb3.ZOO_EVAL


def _side(wall: float, ret: float) -> dict:
    measured = {"wall_s": wall, "cpu_s": 2 * wall, "load_start": 1.0, "load_end": 2.5}
    return {
        "env_steps": 50_000,
        "updates": 24_704,
        "final_return": ret,
        "final_return_std": 0.0,
        "breakdown_s": {"updates": wall / 2, "setup": 5.0},
        "fleet_s": {},
        "measured": measured,
    }


def test_table_rows_and_the_wall_ratio():
    records = [{"task": "cartpole", "edge-rl": _side(100.0, 500.0), "sb3": _side(250.0, 480.0)}]
    records.append({"task": "pendulum", "edge-rl": _side(40.0, -150.0)})
    rows = parse_table(vs_sb3.table(records, "SB3 not run (--no-sb3)"))
    assert [(r["task"], r["side"]) for r in rows] == [
        ("cartpole", "edge-rl"),
        ("cartpole", "SB3"),
        ("pendulum", "edge-rl"),
        ("pendulum", "SB3"),
    ]
    assert rows[0]["SB3 wall / edge-rl wall"] == "2.50"
    assert rows[0]["wall s"] == "100.0" and rows[1]["wall s"] == "250.0"
    assert rows[0]["CPU s"] == "200.0"
    assert rows[0]["final return"] == "500.0 ± 0.0" and rows[1]["final return"] == "480.0 ± 0.0"
    assert rows[0]["load start/end"] == "1.00/2.50"
    assert rows[3]["final return"] == "SB3 not run (--no-sb3)"
    assert rows[2]["SB3 wall / edge-rl wall"] == "-"


def test_breakdown_lists_edge_rls_cpu_by_process():
    edge = _side(100.0, 500.0)
    edge["measured"]["cpu_by_role"] = {"learner other threads": 75.0, "actors": 6.5}
    text = vs_sb3.breakdown([{"task": "pendulum", "edge-rl": edge}])
    rows = {r["side"]: r["seconds by bucket"] for r in parse_table(text)}
    assert rows["edge-rl CPU s by process (/proc)"] == "learner other threads 75.0, actors 6.5"


def test_roles_of_an_edge_rl_learn_tree():
    assert role_of("python3 /x/edge-rl learn --config c.yaml", is_root=True) == "learner"
    assert role_of("python3 -m edge_rl.export.worker 9 13", False) == "export worker"
    assert role_of("python3 -m edge_rl.cli actor --id sim-00", False) == "actors"
    assert role_of("python3 -m edge_rl.cli actors --boards-file b.json", False) == "board groups"
    assert role_of("/usr/sbin/mosquitto -c mosquitto.conf", False) == "broker"
    assert role_of("python3 cpuinfo.py --json", False) == "other: python3 cpuinfo.py"


def test_tree_sampler_splits_a_real_tree_by_process_and_thread():
    # A root whose second thread burns ~0.6 s and whose child (an "actor") burns ~0.4 s.
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"
    child = [sys.executable, "-c", burn.format(s=0.4), "actor"]
    root_code = (
        "import subprocess, sys, threading, time\n"
        f"c = subprocess.Popen({child!r})\n"
        f"th = threading.Thread(target=exec, args=({burn.format(s=0.6)!r},))\n"
        "th.start(); th.join(); c.wait(); time.sleep(0.5)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", root_code])
    sampler = TreeSampler(proc.pid, every_s=0.1)
    sampler.start()
    proc.wait(timeout=60)
    sampler.stop()
    cpu = sampler.by_role()
    assert cpu["learner other threads"] >= 0.45  # the burning thread, not the main one
    assert cpu["learner main thread"] < cpu["learner other threads"]
    assert cpu["actors"] >= 0.25  # sampled up to 0.1 s before the child exited


@pytest.mark.slow
@pytest.mark.bench
@pytest.mark.timeout(660)  # measured 2.6 and 4.9 min on a machine at a load of 30-100
def test_quick_cartpole_run(tmp_path, mosquitto_available):
    out = tmp_path / "out"
    cmd = [sys.executable, str(SCRIPT), "--quick", "--tasks", "cartpole", "--out", str(out)]
    proc = subprocess.run(
        [*cmd, "--no-sb3-install"], capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {r["side"]: r for r in parse_table(proc.stdout)}
    summary = json.loads((out / "cartpole" / "edge-rl-run" / "summary.json").read_text())
    edge = rows["edge-rl"]
    assert edge["env steps"] == f"{summary['env_steps']:,}"
    assert summary["env_steps"] == vs_sb3.TASKS["cartpole"].quick_budget
    assert edge["updates"] == f"{summary['updates']:,}"
    assert edge["final return"].startswith(f"{summary['final_eval_return']:.1f} ±")
    assert summary["eval_episodes"] == 2  # --quick: 2 greedy episodes a side
    # The process tree's wall covers the learner's, and it spent CPU time.
    assert float(edge["wall s"]) >= summary["wall_s"]
    assert float(edge["CPU s"]) > 0
    spec = json.loads((out / "cartpole" / "sb3-spec.json").read_text())
    assert summary["updates"] == spec["expected_updates"]  # the same updates as SB3's side
    result = out / "cartpole" / "sb3-result.json"
    if result.exists():  # SB3's venv was there: its row is its result's
        sb3 = json.loads(result.read_text())
        assert rows["SB3"]["updates"] == f"{sb3['updates']:,}" == f"{spec['expected_updates']:,}"
        assert rows["SB3"]["final return"].startswith(f"{sb3['final_return']:.1f} ±")
        ratio = float(rows["SB3"]["wall s"]) / float(edge["wall s"])
        assert float(edge["SB3 wall / edge-rl wall"]) == pytest.approx(ratio, abs=0.02)
    else:  # no SB3 venv on this machine: said in the row, not skipped
        assert rows["SB3"]["final return"].startswith("SB3 not run")
