"""edge-rl doctor on a real bundle against a real Mosquitto (host/mosquitto.conf with the
deployment's files): every check passes; each way a board can be broken fails that check
with a fix, and the exit status says so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

from edge_rl.deploy.credentials import CA, _cert_pem
from edge_rl.transport.address import free_port
from tests.harness.waits import wait_for

CHECKS = ["board", "policy key", "litert", "xnnpack", "reference", "clock", "env", "auth", "broker"]


def doctor(bundle: Path, *args: str) -> tuple[int, dict[str, str]]:
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "edge_rl.cli",
            "doctor",
            "--config",
            str(bundle / "etc" / "board.yaml"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=bundle,
    )
    lines = {}
    for line in p.stdout.splitlines()[:-1]:  # the last line is the tally
        status, rest = line[:4].strip(), line[6:]
        lines[rest[:10].strip()] = f"{status} {rest[10:].strip()}"
    return p.returncode, lines


def test_every_check_passes_on_a_flashed_board(bundle):
    rc, lines = doctor(bundle)
    assert list(lines) == CHECKS
    assert all(v.startswith("ok ") for v in lines.values()), lines
    assert rc == 0
    assert "64 of 64 outputs bit-identical" in lines["reference"]
    assert "over TLS" in lines["broker"] and "pi-doc" in lines["broker"]


def test_a_tampered_reference_output_fails_the_reference_check(bundle):
    path = bundle / "reference" / "expected.npz"
    with np.load(path) as z:
        saved = {k: z[k] for k in z.files}
    outputs = saved["outputs"].copy()
    outputs.view(np.uint32)[5, 1] ^= 1  # one bit of one output: the last bit of a float
    np.savez(path, **{**saved, "outputs": outputs})
    rc, lines = doctor(bundle, "--skip-broker")
    assert rc == 1 and "broker" not in lines
    assert lines["reference"].startswith("FAIL 1 of 64 outputs differ")
    assert "fix: " in lines["reference"] and "re-flash" in lines["reference"]
    assert all(v.startswith("ok ") for k, v in lines.items() if k != "reference")


def test_a_wrong_ca_fails_the_broker_check_with_its_fix(bundle):
    (bundle / "etc" / "credentials" / "ca.crt").write_bytes(_cert_pem(CA.create().cert))
    rc, lines = doctor(bundle)
    assert rc == 1 and lines["broker"].startswith("FAIL TLS: ")
    assert "certificate" in lines["broker"]  # OpenSSL's reason, e.g. "self-signed ... chain"
    assert "fix: the broker's certificate must chain to" in lines["broker"]
    assert lines["auth"].startswith("ok ")  # the files are fine: the CA is the wrong one


def test_a_broker_that_is_not_running_fails_the_broker_check(bundle):
    cfg = bundle / "etc" / "board.yaml"
    data = yaml.safe_load(cfg.read_text())
    data["actor"]["broker"] = f"mqtts://127.0.0.1:{free_port()}"  # nothing listens there
    cfg.write_text(yaml.safe_dump(data))
    rc, lines = doctor(bundle)
    assert rc == 1 and lines["broker"].startswith("FAIL nothing listens on 127.0.0.1:")
    assert "fix: start the broker" in lines["broker"]


def test_each_broker_of_a_url_list_is_checked_and_reported(bundle):
    cfg = bundle / "etc" / "board.yaml"
    data = yaml.safe_load(cfg.read_text())
    live = data["actor"]["broker"]
    dead = f"mqtts://127.0.0.1:{free_port()}"  # a cluster node that is down
    data["actor"]["broker"] = f"{dead},{live}"
    cfg.write_text(yaml.safe_dump(data))
    rc, lines = doctor(bundle)
    assert [k for k in lines if k.startswith("broker")] == ["broker 1", "broker 2"]
    assert lines["broker 1"].startswith(f"FAIL nothing listens on {dead.removeprefix('mqtts://')}")
    assert lines["broker 2"].startswith("ok logged in") and "over TLS" in lines["broker 2"]
    assert lines["broker 2"].endswith(live.removeprefix("mqtts://") + " as pi-doc over TLS")
    assert rc == 1


def test_a_password_the_broker_does_not_know_is_refused(bundle):
    pw = bundle / "etc" / "credentials" / "password"
    pw.write_text("not-the-password\n")
    rc, lines = doctor(bundle)
    assert rc == 1 and "refused the login as 'pi-doc'" in lines["broker"]
    assert "mosquitto.passwd" in lines["broker"]


def test_a_clock_before_the_bundle_a_missing_env_and_open_secrets_fail(bundle):
    path = bundle / "reference" / "expected.npz"
    with np.load(path) as z:
        saved = {k: z[k] for k in z.files}
    np.savez(path, **{**saved, "made_unix": saved["made_unix"] + 86400})  # "made tomorrow"
    cfg = bundle / "etc" / "board.yaml"
    data = yaml.safe_load(cfg.read_text())
    data["actor"]["env"] = "no_such_package.envs:make"
    cfg.write_text(yaml.safe_dump(data))
    (bundle / "etc" / "credentials" / "client.key").chmod(0o644)
    rc, lines = doctor(bundle, "--skip-broker")
    assert rc == 1
    assert lines["clock"].startswith("FAIL the clock says") and "NTP" in lines["clock"]
    assert lines["env"].startswith("FAIL cannot make 'no_such_package.envs:make'")
    assert lines["auth"].startswith("FAIL") and "chmod 600" in lines["auth"]
    assert lines["reference"].startswith("ok ")


def test_a_bad_board_file_says_which_key_and_skips_what_needs_it(bundle):
    cfg = bundle / "etc" / "board.yaml"
    cfg.write_text(cfg.read_text() + "batch_sise: 3\n")
    rc, lines = doctor(bundle)
    assert rc == 1 and lines["board"].startswith("FAIL") and "batch_sise" in lines["board"]
    for name in ("policy key", "env", "auth", "broker"):
        assert lines[name].startswith("FAIL not checked"), lines[name]
    assert lines["reference"].startswith("ok ")  # the runtime is still checked


def test_the_flashed_board_acts_from_its_board_file_alone(deployed, bundle, grant_run):
    """``edge-rl actor --config board.yaml``: id, run, env, broker, credentials and key all
    from the bundle; it logs in over TLS as itself and reports under its own id."""
    import ssl
    import threading

    import paho.mqtt.client as mqtt

    from edge_rl.wire.messages import decode_status
    from edge_rl.wire.topics import Topics

    creds = deployed[0].parents[1] / "creds"
    _, broker = deployed
    learner = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    learner.tls_set_context(ssl.create_default_context(cafile=str(creds / "ca.crt")))
    learner.username_pw_set("learner", (creds / "learner" / "password").read_text().strip())
    got, connected = [], threading.Event()
    learner.on_connect = lambda *_a: connected.set()
    learner.on_message = lambda _c, _u, m: got.append(decode_status(m.payload))
    learner.connect(broker.host, broker.port)
    topics = Topics("edge-rl", "r1")
    learner.loop_start()
    p = None
    try:
        assert connected.wait(10)
        learner.subscribe(topics.status("pi-doc"), qos=1)
        p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "edge_rl.cli",
                "actor",
                "--config",
                str(bundle / "etc" / "board.yaml"),
                "--max-env-steps",
                "300",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=bundle,
        )
        wait_for(
            lambda: any(s.session for s in got) or p.poll() is not None,
            60,
            "the board's status with its session",
        )
        assert p.poll() is None, p.stderr
        grant_run(learner, topics, "pi-doc", next(s.session for s in got if s.session))
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        wait_for(
            lambda: any(s.state == "stopped" for s in got),
            10,
            "the board's stopped status",
            detail=lambda: str(got),
        )
    finally:
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()
        for topic in (topics.control, topics.credit("pi-doc")):  # clear what we retained
            learner.publish(topic, b"", qos=1, retain=True).wait_for_publish(5)
        learner.disconnect()
        learner.loop_stop()
    final = next(s for s in got if s.state == "stopped")
    assert final.actor_id == "pi-doc" and final.board == "rpi4" and final.env_steps == 300
    assert final.breakdown["emulation"] == 0.0
