"""``edge-rl`` as a user runs it from the repository root, and the flags of a smoke run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.harness.paths import REPO
from tests.harness.waits import bound


def learn_argv(config: str | Path, out: str | Path, *args: str) -> list[str]:
    """``edge-rl learn --config CONFIG --out OUT ARGS`` as a subprocess's argv (run it
    from the repository root: ``cwd=REPO``)."""
    return [
        sys.executable,
        "-m",
        "edge_rl.cli",
        "learn",
        "--config",
        str(config),
        "--out",
        str(out),
        *args,
    ]


def run_cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``python -m edge_rl.cli ARGS`` from the repository root, output captured;
    ``timeout`` (for a quiet machine) stretched by the machine's load (``waits.bound``)."""
    return subprocess.run(
        [sys.executable, "-m", "edge_rl.cli", *args],
        capture_output=True,
        text=True,
        timeout=bound(timeout),
        cwd=REPO,
    )


# `edge-rl learn` as a smoke run: a tiny budget, small networks, gates that always pass.
TINY = [
    "--fleet",
    "2",
    "--board",
    "rpi5",
    "--set",
    "total_env_steps=1200",
    "--set",
    "learning_starts=400",
    "--set",
    "export.every_updates=100",
    "--set",
    "select_every=2",
    "--set",
    "select_episodes=1",
    "--set",
    "eval_episodes=2",
    "--set",
    "export.calibration_size=50",
    "--set",
    "export.parity_size=50",
    "--set",
    "replay_capacity=5000",
]
SMALL_NETS = {
    "dqn": ["--set", "dqn.hidden=[32, 32]", "--set", "export.min_greedy_agreement=0"],
    "td3": [
        "--set",
        "td3.actor_hidden=[32, 32]",
        "--set",
        "td3.critic_hidden=[32, 32]",
        "--set",
        "td3.batch_size=64",
        "--set",
        "td3.updates_per_call=1",
        "--set",
        "export.max_action_error=2",
        "--set",
        "export.mean_action_error=2",
    ],
}
# SAC's networks and gates as TD3's (its deployed head is TD3's actor network).
SMALL_NETS["sac"] = [x.replace("td3.", "sac.") for x in SMALL_NETS["td3"]]
