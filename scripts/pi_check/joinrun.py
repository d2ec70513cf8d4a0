"""The board joins a short run of a host learner, and the run's policy is compared bit for bit.

    summary = run(pi)      # learner (--fleet 0) on the host + the installed unit on the board
    n = parity(pi)         # the deployed policy's outputs: board == host, on n observations

The learner is ``edge-rl learn`` against the TLS broker with the learner's credentials and
signing key; the board runs the installed unit's ExecStart as its User= (unit.py), so what
runs is what boots. What must hold is read from the learner's summary.json (what it
accepted) and the actor's own counters in it (what it loaded and refused).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np

from .check import ACTOR_ID, DOCTOR_TIMEOUT_S, HERE, RUN, CheckFailed, PiCheck, expect
from .chroot import as_user, check_no_mounts, stop
from .host import cli_popen, stop_process
from .outputs import differing, observations
from .outputs import run as host_outputs
from .unit import command

LEARN_TIMEOUT_S = 900
ACTOR_STOP_S = 60  # SIGTERM to the serving board, as systemd stops the unit
# A short run (tests/conftest.py's TINY): small nets, an export every 100 updates, gates that
# always pass. What is checked is the board's part in it, not what the learner learns.
SHORT_RUN = {
    "learning_starts": 500,
    "export.every_updates": 100,
    "select_every": 2,
    "select_episodes": 1,
    "select_recheck": 0,
    "eval_episodes": 2,
    "export.calibration_size": 50,
    "export.parity_size": 50,
    "dqn.hidden": "[32, 32]",
    "export.min_greedy_agreement": 0,
}


def run(pi: PiCheck) -> dict:
    assert pi.broker is not None
    w = pi.work
    learner = cli_popen(
        pi.repo,
        [
            "learn",
            "--config",
            str(pi.repo / "examples/cartpole_dqn.yaml"),
            "--out",
            str(w / "run"),
            "--run",
            RUN,
            "--fleet",
            "0",
            "--broker",
            pi.broker.url,
            "--credentials",
            str(w / "creds/learner"),
            "--signing-key",
            str(w / "learner.key"),
            "--set",
            f"total_env_steps={pi.steps}",
            *(a for k, v in SHORT_RUN.items() for a in ("--set", f"{k}={v}")),
        ],
        pi.log("learner"),
    )
    argv = as_user(pi.root, pi.service.user, command(pi.service))
    actor = pi.board.popen(argv, pi.log("actor"))
    try:
        try:
            rc = learner.wait(LEARN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise CheckFailed(
                f"the learner did not finish in {LEARN_TIMEOUT_S} s; see "
                f"{pi.log('learner')} and {pi.log('actor')}"
            ) from None
        expect(rc == 0, f"the learner exited {rc}; see {pi.log('learner')}")
        # The run is over and the board serves its result: the unit keeps running (it never
        # ends on a control message) until it is stopped, as systemd would stop it.
        expect(
            actor.poll() is None, f"the board's actor exited after the run; see {pi.log('actor')}"
        )
        actor_rc = stop(actor, ACTOR_STOP_S)
        expect(
            actor_rc == 0, f"the board's actor exited {actor_rc} on SIGTERM; see {pi.log('actor')}"
        )
    finally:
        stop_process(learner)
        stop(actor)
        check_no_mounts(pi.root)
    log = pi.broker.log.read_text()
    expect(f"u'{ACTOR_ID}'" in log, f"the board never logged in as {ACTOR_ID}; see {pi.broker.log}")
    return check_summary(pi.work / "run/summary.json")


def check_summary(summary_file: Path) -> dict:
    summary = json.loads(summary_file.read_text())
    a = summary["actors"].get(ACTOR_ID)
    expect(a is not None, f"the learner never heard of {ACTOR_ID}: {list(summary['actors'])}")
    expect(
        summary["transitions_received"] > 0 and a["transitions_sent"] > 0,
        f"no transitions accepted from the board: {summary['transitions_received']}",
    )
    expect(
        summary["transitions_rejected"] == 0 and not summary["batches_rejected"],
        f"the learner rejected the board's data: {summary['batches_rejected']}",
    )
    expect(a["policy_version"] > 0, f"the board loaded no policy: {a}")
    expect(a["policies_rejected"] == 0, f"the board refused policies: {a}")
    return {
        k: summary[k]
        for k in ("env_steps", "transitions_received", "transitions_rejected", "policy_version")
    } | {"actor": a}


def parity(pi: PiCheck) -> int:
    """The deployed policy on 2,000 observations, on the board and on this host."""
    model = pi.work / "run/policy.tflite"
    here = pi.work / "parity"
    here.mkdir()
    np.savez(here / "inputs.npz", inputs=observations(4))  # [2000, 4]: CartPole's obs
    host_outputs(model, here / "inputs.npz", here / "host.npz")
    on_board = pi.root / "root/pi-check"
    on_board.mkdir(parents=True)
    for f in (model, here / "inputs.npz", HERE / "outputs.py"):
        shutil.copy(f, on_board / f.name)
    argv = [
        "/opt/edge-rl/venv/bin/python",
        "/root/pi-check/outputs.py",
        "/root/pi-check/policy.tflite",
        "/root/pi-check/inputs.npz",
        "/root/pi-check/out.npz",
    ]
    rc = pi.board.run(argv, pi.log("parity"), DOCTOR_TIMEOUT_S)
    expect(rc == 0, f"the policy did not run on the board; see {pi.log('parity')}")
    want = np.load(here / "host.npz")["outputs"]
    got = np.load(on_board / "out.npz")["outputs"]
    n = differing(got, want)
    expect(n == 0, f"{n} of {len(want)} policy outputs differ between the board and the host")
    return len(want)
