"""One profile for the fleet, as a user gives it, against a real Mosquitto: ``edge-rl
--profile FILE fleet`` starts real actor processes with the profile's broker, run, env and
key; ``fleet-status`` given the same by ``EDGE_RL_*`` variables lists them; a flag
overrides the variable; ``--version`` answers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.harness.paths import REPO
from tests.harness.procs import children, survivors
from tests.harness.waits import bound, wait_for

RUN = "profile-e2e"


def test_a_profile_and_variables_reach_fleet_and_fleet_status(
    mosquitto, policy_keys, cli, tmp_path, monkeypatch
):
    _, pub = policy_keys
    profile = tmp_path / "fleet.yaml"
    profile.write_text(
        f"broker: {mosquitto.url}\nrun: {RUN}\nenv: CartPole-v1\npolicy_key: {pub}\n"
    )
    argv = [sys.executable, "-m", "edge_rl.cli", "--profile", str(profile), "fleet"]
    argv += ["-n", "2", "--id-prefix", "pf"]
    fleet = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        monkeypatch.setenv("EDGE_RL_BROKER", mosquitto.url)
        monkeypatch.setenv("EDGE_RL_RUN", RUN)
        listing: list[str] = []

        def listed() -> bool:
            out = cli("fleet-status", "--wait", "1", timeout=60)
            assert out.returncode == 0, out.stderr
            listing[:] = out.stdout.splitlines()
            return {"pf-00", "pf-01"} <= {line.split()[0] for line in listing if line}

        wait_for(listed, 60, "both boards in fleet-status", 0.5, lambda: "\n".join(listing))
        assert listing[0].startswith(f"run {RUN!r}:"), listing
        other = cli("fleet-status", "--run", "another-run", "--wait", "1", timeout=60)
        # The flag wins over the profile's run: nothing of that run, said so (exit 1).
        assert other.returncode == 1 and "pf-00" not in other.stdout, other.stdout
        assert "nothing of run 'another-run'" in other.stderr, other.stderr
    finally:
        actors = children(fleet.pid)
        fleet.send_signal(signal.SIGINT)  # the fleet's Ctrl-C: it stops its actors
        try:
            fleet.wait(bound(60))
        except subprocess.TimeoutExpired:  # never left running: its boards die with it
            fleet.kill()
            fleet.wait()
            raise
    assert survivors(actors, bound(30)) == {}
    assert fleet.returncode == 0, fleet.stderr.read()[-2000:]


def test_version_and_a_bad_profile(cli, tmp_path):
    version = cli("--version", timeout=30)
    assert version.returncode == 0 and version.stdout.startswith("edge-rl "), version
    bad = tmp_path / "bad.yaml"
    bad.write_text("brokr: mqtt://127.0.0.1:1883\n")
    for command in ("fleet-status", "stop", "deploy", "fleet", "actor", "doctor"):
        out = cli("--profile", str(bad), command, timeout=30)
        assert out.returncode == 1, (command, out)
        assert out.stderr.strip().splitlines() == [
            f"Error: profile {bad}: unknown key brokr; known: broker, run, root, credentials, "
            "ca_file, cert, key, username, password_file, password_env, signing_key, "
            "policy_key, env, board, run_dir"
        ], (command, out.stderr)
    other = cli("--profile", str(bad), "keygen", str(tmp_path / "k.key"), timeout=30)
    assert other.returncode == 0, other.stderr  # not one of the fleet's commands


def test_a_simulated_fleet_s_members_ignore_the_user_s_profile(monkeypatch, tmp_path):
    """learn's and fleet's member processes get their settings on the command line: a CA
    in the user's profile variables must not reach an actor of a plain mqtt:// broker."""
    from edge_rl.sim.fleet import member_env

    monkeypatch.setenv("EDGE_RL_CA_FILE", str(tmp_path / "ca.crt"))
    monkeypatch.setenv("EDGE_RL_PROFILE", str(tmp_path / "mine.yaml"))
    env = member_env()
    assert "EDGE_RL_CA_FILE" not in env and env["EDGE_RL_PROFILE"] == os.devnull
    from edge_rl.cli.profile import resolve

    assert resolve(None, env) == {}
