"""edge-rl doctor on a real bundle against a real Mosquitto (host/mosquitto.conf with the
deployment's files): every check passes; each way a board can be broken fails that check
with a fix, and the exit status says so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

from edge_rl.credentials import CA, _cert_pem
from edge_rl.transport.address import free_port

CHECKS = ["board", "policy key", "litert", "xnnpack", "reference", "clock", "env", "auth",
          "broker"]  # fmt: skip


def doctor(bundle: Path, *args: str) -> tuple[int, dict[str, str]]:
    p = subprocess.run(
        [sys.executable, "-m", "edge_rl.cli", "doctor", "--config",
         str(bundle / "etc" / "board.yaml"), *args],
        capture_output=True, text=True, timeout=120, cwd=bundle,
    )  # fmt: skip
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
