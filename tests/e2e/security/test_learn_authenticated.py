"""The default `edge-rl learn` (embedded Mosquitto) is authenticated: a tiny real run, with
an anonymous client refused while it runs, no password on any command line, and the run
still completing with the simulated fleet's transitions."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from edge_rl.transport.address import parse_broker_address
from tests.harness.learn import learn_argv
from tests.harness.paths import REPO
from tests.harness.waits import bound, until

CONFIG = REPO / "examples" / "cartpole_dqn.yaml"
LINE = re.compile(r"embedded mosquitto broker on (mqtt://\S+) \(authenticated, config (\S+)\)")


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen):
    """``predicate()``'s first true value, while ``proc`` (edge-rl learn) runs."""
    value = None

    def found() -> bool:
        nonlocal value
        value = predicate()
        return bool(value) or proc.poll() is not None

    if not until(found, bound(timeout), step=0.1):
        pytest.fail(f"no {what} within {bound(timeout):.0f} s")
    if not value:
        pytest.fail(f"edge-rl learn exited ({proc.returncode}) before {what}")
    return value


def config_value(conf: str, key: str) -> str:
    return next(line.split(" ", 1)[1] for line in conf.splitlines() if line.startswith(key + " "))


def child_command_lines(pid: int) -> list[str]:
    """The command lines of ``pid``'s descendants, as ps shows them."""
    out = subprocess.run(
        ["ps", "-e", "-ww", "-o", "pid=,ppid=,args="], capture_output=True, text=True, check=True
    ).stdout
    rows = [line.split(None, 2) for line in out.splitlines() if len(line.split(None, 2)) == 3]
    family, lines = {pid}, []
    for _ in range(4):  # children, grandchildren (setpriv execs in place)
        for p, pp, args in rows:
            if int(pp) in family and int(p) not in family:
                family.add(int(p))
                lines.append(args)
    return lines


@pytest.mark.slow
def test_default_run_is_authenticated_and_completes(
    tmp_path, mosquitto_available, tiny_learn, clients
) -> None:
    run = tmp_path / "run"
    cmd = learn_argv(CONFIG, run, *tiny_learn("dqn"), "--set", "run=auth-smoke")
    out = open(tmp_path / "stdout", "w")  # noqa: SIM115 - files, not pipes: no pipe fills up
    err = open(tmp_path / "stderr", "w")  # noqa: SIM115
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=err)
    try:
        log = run / "learner.log"
        found = wait_for(
            lambda: log.exists() and LINE.search(log.read_text()),
            120,
            "authenticated embedded broker in learner.log",
            proc,
        )
        url, conf_path = found.group(1), Path(found.group(2))
        conf = conf_path.read_text()
        host, port, _ = parse_broker_address(url)
        assert host == "127.0.0.1" and f"listener {port} 127.0.0.1" in conf
        assert "allow_anonymous false" in conf
        password_file = Path(config_value(conf, "password_file"))
        acl_file = Path(config_value(conf, "acl_file"))
        acl = acl_file.read_text()
        assert (
            "user sim-01\ntopic write edge-rl/auth-smoke/actors/sim-01/transitions\n"
            "topic write edge-rl/auth-smoke/actors/sim-01/status\n"
        ) in acl
        assert "topic read edge-rl/auth-smoke/actors/sim-01/credit\n" in acl
        assert "user learner\ntopic write edge-rl/auth-smoke/policy" in acl
        users = [line.split(":")[0] for line in password_file.read_text().splitlines()]
        assert users == ["learner", "sim-00", "sim-01"]
        for path in (password_file, acl_file, password_file.parent / "sim-00.password"):
            assert path.stat().st_mode & 0o077 == 0, path

        class Broker:  # the running run's broker, for a raw client
            pass

        Broker.host = host
        Broker.port = port
        assert clients(Broker).first_outcome().startswith("refused")  # anonymous

        # The actors are running with their credentials, and no password is on a command line.
        fleet_log = run / "fleet" / "sim-00.log"
        wait_for(
            lambda: (
                (run / f"mosquitto-{port}.log").exists()
                and "u'sim-00'" in (run / f"mosquitto-{port}.log").read_text()
            ),
            120,
            "sim-00 logged in",
            proc,
        )
        passwords = [(password_file.parent / f"{u}.password").read_text().strip() for u in users]
        lines = child_command_lines(proc.pid)
        assert any("--password-file" in line and "sim-00" in line for line in lines), lines
        assert not [line for line in lines for pw in passwords if pw in line]

        proc.wait(timeout=240)
    finally:
        if proc.poll() is None:  # SIGTERM first: the learner removes its broker's credentials
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        out.close()
        err.close()
    assert proc.returncode == 0, (tmp_path / "stderr").read_text()[-4000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["transitions_received"] >= 1200
    assert set(summary["actors"]) == {"sim-00", "sim-01"}
    # Both ways through the ACL: the learner read their batches and statuses, and the actors
    # read its control messages (credit, then "serving": they serve the deployed policy).
    assert all(a["state"] == "serving" for a in summary["actors"].values()), summary["actors"]
    assert "Traceback" not in fleet_log.read_text()
    assert not password_file.parent.exists()  # the run's credentials are gone with its broker
    broker_log = (run / f"mosquitto-{port}.log").read_text()
    assert "not authorised" in broker_log  # our anonymous client, as the broker saw it
    assert "Warning: ACL" not in broker_log
