"""The documented real-board path, end to end, as a user runs it (README, docs/boards.md,
host/mosquitto.conf), every step a real command with the shipped files:

  edge-rl credentials --run -> Mosquitto from host/mosquitto.conf over TLS (its generated
  ACL, on a loopback port, files in a temp dir) -> edge-rl keygen -> edge-rl flash -> the
  new password file installed and the broker reloaded -> the board started from its bundle
  -> edge-rl learn --fleet 0 (a small budget) -> every board serving -> edge-rl deploy of a
  good policy (exit 0) and of a bad one (exit 2) -> edge-rl fleet-status -> edge-rl stop.

Each step's key output is printed (``pytest -s``) for the record.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edge_rl.boards import load_board
from edge_rl.deploy.broker_check import check_brokers
from edge_rl.wire.policy import encode_policy
from edge_rl.wire.signing import Signer
from tests.harness.cartpole_policies import MODELS, policy_bundle
from tests.harness.mosquitto_auth import Mosquitto
from tests.harness.paths import REPO
from tests.harness.waits import bound, exit_code, wait_for

RUN = "journey"
BOARD = "pi-01"
DEPLOY = "--canary 1 --window 60 --min-episodes 2 --max-drop 0.1 --rate 5 --confirm 30"
TINY = [
    *("--set", "total_env_steps=1000", "--set", "learning_starts=300"),
    *("--set", "export.every_updates=100", "--set", "select_every=2"),
    *("--set", "select_episodes=1", "--set", "eval_episodes=2"),
    *("--set", "export.calibration_size=50", "--set", "export.parity_size=50"),
    *("--set", "dqn.hidden=[32, 32]", "--set", "export.min_greedy_agreement=0"),
]


def edge_rl(*args: str, cwd: Path = REPO, timeout: float = 240) -> subprocess.CompletedProcess:
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "edge_rl.cli", *args],
        capture_output=True,
        text=True,
        timeout=bound(timeout),
        cwd=cwd,
    )
    took = time.monotonic() - t0
    print(f"\n$ edge-rl {args[0]} ...  (exit {p.returncode}, {took:.1f} s)")
    return p


def show(text: str, keep: tuple[str, ...] = ()) -> None:
    """The lines of ``text`` that hold one of ``keep`` (all without)."""
    for line in text.splitlines():
        if not keep or any(k in line for k in keep):
            print(f"  {line}")


def start(argv: list[str], out: Path, cwd: Path = REPO) -> subprocess.Popen:
    with open(out, "w") as f:  # a file, not a pipe: nothing blocks on a full pipe
        return subprocess.Popen(
            [sys.executable, "-m", "edge_rl.cli", *argv],
            cwd=cwd,
            stdout=f,
            stderr=subprocess.STDOUT,
        )


def end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # systemd's stop
        try:
            proc.wait(bound(60))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(1500)
def test_the_documented_real_board_path(kit, tmp_path) -> None:
    t_start = time.monotonic()
    creds, keys = tmp_path / "creds", tmp_path / "keys"
    # 1. The deployment's files: a CA, the broker's certificate, the learner's login, the ACL.
    p = edge_rl(
        *("credentials", str(creds), "--actors", "pi-00", "--tls", "--passwords"),
        *("--server-name", "127.0.0.1", "--run", RUN),
    )
    assert p.returncode == 0, p.stderr
    # 2. Mosquitto from host/mosquitto.conf: only the port and the paths changed.
    etc = tmp_path / "etc"
    shutil.copytree(creds / "broker", etc)
    (tmp_path / "persist").mkdir()
    text = (REPO / "host" / "mosquitto.conf").read_text()
    text = text.replace("listener 8883\n", "listener {PORT} 127.0.0.1\n")
    text = text.replace("/etc/mosquitto/edge-rl/", f"{etc}/")
    text = text.replace("/var/lib/mosquitto/", f"{tmp_path / 'persist'}/")
    broker = Mosquitto(tmp_path, text.splitlines(), tls=True)
    procs: list[subprocess.Popen] = []
    try:
        # 3. The policy signing key; 4. a board's bundle for that broker and run.
        p = edge_rl("keygen", str(keys / "learner.key"))
        assert p.returncode == 0, p.stderr
        p = edge_rl(
            *("flash", "--board", "rpi4", "--broker", broker.url, "--run", RUN),
            *("--env", "CartPole-v1", "--policy-key", str(keys / "learner.pub")),
            *("--credentials", str(creds), "--ids", BOARD, "--out", str(tmp_path / "sd")),
            *("--wheel", str(kit.wheel), "--wheelhouse", str(kit.wheelhouse)),
            *("--wheelhouse-cache", str(kit.cache)),
        )
        assert p.returncode == 0, p.stderr
        show(p.stdout, (BOARD, "bundle"))
        # 5. The broker takes the new board: its password file and ACL again, and SIGHUP.
        for name in ("mosquitto.passwd", "acl"):
            shutil.copy(creds / "broker" / name, etc / name)
        broker.proc.send_signal(signal.SIGHUP)
        bundle = tmp_path / "sd" / BOARD
        cfg = load_board(bundle / "etc" / "board.yaml")
        wait_for(
            lambda: all(c.ok for c in check_brokers(cfg, 2.0)),
            10,
            "the reloaded broker to take the board's login",
            0.1,
        )
        # 6. The board, started from its bundle as its systemd unit does.
        board = start(["actor", "--config", "etc/board.yaml"], tmp_path / "board.out", bundle)
        procs.append(board)
        # 7. The learner, real boards only.
        run = tmp_path / "run"
        learner = start(
            [
                *("learn", "--config", str(REPO / "examples" / "cartpole_dqn.yaml")),
                *("--out", str(run), "--fleet", "0", "--run", RUN, "--broker", broker.url),
                *("--credentials", str(creds / "learner")),
                *("--signing-key", str(keys / "learner.key"), *TINY),
            ],
            tmp_path / "learn.out",
        )
        procs.append(learner)
        learn_log = (tmp_path / "learn.out").read_text
        code = exit_code(learner, 600, "the learner's run", lambda: learn_log()[-4000:])
        print(f"\n$ edge-rl learn --fleet 0 ...  (exit {code})")
        show(learn_log(), ("return", "policy", "serving", "boards", "env steps"))
        assert code == 0, learn_log()[-4000:]
        assert board.poll() is None, (tmp_path / "board.out").read_text()[-3000:]
        # 8. Every board serving the run's policy: the status view.
        login = ["--broker", broker.url, "--run", RUN, "--credentials", str(creds / "learner")]
        wait_for(
            lambda: (
                f"{BOARD}" in (s := edge_rl("fleet-status", *login).stdout)
                and "serving" in s.split(BOARD)[1].split()[0]
            ),
            60,
            "the board to report serving",
        )
        p = edge_rl("fleet-status", *login)
        show(p.stdout)
        assert p.returncode == 0 and "'journey': serving" in p.stdout, p.stdout
        # 9. deploy: a good policy reaches every board (exit 0), a bad one is rolled back (2).
        signer = Signer.load_or_create(keys / "learner.key")
        for quality, expected in (("good", 0), ("random", 2)):
            made = policy_bundle(MODELS[quality].read_bytes(), run="lab", run_id="lab-1", version=9)
            source = tmp_path / f"{quality}.bundle"
            source.write_bytes(encode_policy(made, signer))
            p = edge_rl(
                *("deploy", str(source), *login, "--signing-key", str(keys / "learner.key")),
                *DEPLOY.split(),
                timeout=240,
            )
            show(p.stdout)
            assert p.returncode == expected, p.stdout + p.stderr
        p = edge_rl("fleet-status", *login)
        show(p.stdout)
        assert p.returncode == 0 and BOARD in p.stdout
        # 10. stop: the run ends; the board waits, connected, for the next run start.
        p = edge_rl("stop", *login)
        show(p.stdout + p.stderr, ("stop",))
        assert p.returncode == 0, p.stderr
        wait_for(
            lambda: "stopped" in edge_rl("fleet-status", *login).stdout.split(BOARD)[-1],
            60,
            "the board to report stopped",
        )
        assert board.poll() is None
    finally:
        for proc in procs:
            end(proc)
        broker.stop()
    print(f"\njourney: {time.monotonic() - t_start:.0f} s in all")
