"""A broker that stays available: the shipped host/mosquitto.conf, its systemd drop-in and
host/edge-rl.nft, against floods, for real.

The idle-connection floods run inside two network namespaces the test creates (a broker
side and a client side joined by a veth pair, 10.231.x.0/24): nothing reaches the host's
own interfaces or firewall. They need root (``ip netns``, ``nft``). Every load loop is
bounded in count and time; the broker is stopped by its PID.

Measured numbers go to stdout (``pytest -s``) and into the test's ``record_property``.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import resource
import shutil
import ssl
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from edge_rl.broker.executables import find_mosquitto
from edge_rl.deploy.credentials import make_credentials
from edge_rl.deploy.ids import Registry
from edge_rl.wire.topics import Topics
from tests.harness.paths import REPO

CONF = REPO / "host" / "mosquitto.conf"
NFT = REPO / "host" / "edge-rl.nft"
DROP_IN = REPO / "host" / "systemd" / "mosquitto.service.d" / "edge-rl.conf"
RUN = Topics("edge-rl", "limits")
FLOOD = 1100  # the idle connections
LOGINS = 8  # valid logins tried during a flood


def _setting(text: str, key: str) -> int:
    found = re.findall(rf"^{key}[ =](\d+)$", text, re.MULTILINE)
    assert len(found) == 1, (key, found)
    return int(found[0])


def test_shipped_limits_are_consistent() -> None:
    conf = CONF.read_text()
    fd_limit = _setting(DROP_IN.read_text(), "LimitNOFILE")
    assert _setting(conf, "max_connections") < fd_limit - 64
    packet = _setting(conf, "max_packet_size")
    queued = _setting(conf, "max_queued_bytes")
    inflight = _setting(conf, "max_inflight_bytes")
    assert packet <= inflight < queued < _setting(conf, "memory_limit")
    assert "tcp dport 8883" in NFT.read_text() and "listener 8883\n" in conf


# -- the deployment, in namespaces -------------------------------------------------------


@pytest.fixture(scope="module")
def creds(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("creds")
    make_credentials(root, ["pi-01"], tls=True, passwords=True, server_names=["10.231.0.1"])
    with Registry.open(root) as reg:
        reg.enroll(["pi-01"], run=RUN.run)
    return root


def _installed_conf(creds: Path, workdir: Path, *, limits: bool) -> Path:
    """host/mosquitto.conf with the creds' broker files; ``limits=False``: the issue's
    deployment (no max_connections, no byte bounds)."""
    etc = workdir / "etc"
    shutil.copytree(creds / "broker", etc)
    (workdir / "persist").mkdir()
    text = CONF.read_text().replace("/etc/mosquitto/edge-rl/", f"{etc}/")
    text = text.replace("/var/lib/mosquitto/", f"{workdir / 'persist'}/")
    if not limits:
        for key in ("max_connections", "max_inflight_bytes", "max_queued_bytes", "memory_limit"):
            text = re.sub(rf"^{key} .*$", "", text, flags=re.MULTILINE)
    logs = ("error", "warning", "notice", "information")
    text += "\nlog_dest stderr\n" + "".join(f"log_type {t}\n" for t in logs)
    text += f"user {pwd.getpwuid(os.geteuid()).pw_name}\n"
    conf = workdir / "mosquitto.conf"
    conf.write_text(text)
    return conf


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=30)


@pytest.fixture
def namespaces():
    """(broker namespace, client namespace), veth-joined; deleted at teardown."""
    if os.geteuid() != 0:
        pytest.skip("ip netns and nft need root (CI runs as root)")
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed (scripts/ensure-mosquitto installs it)")
    tag = f"{os.getpid() % 100000}"
    broker, client = f"erl-b{tag}", f"erl-c{tag}"
    _run("ip", "netns", "add", broker)
    try:
        _run("ip", "netns", "add", client)
        _run("ip", "-n", broker, "link", "add", "vb", "type", "veth", "peer", "vc", "netns", client)
        _run("ip", "-n", broker, "addr", "add", "10.231.0.1/24", "dev", "vb")
        for address in ("10.231.0.2/24", "10.231.0.3/24"):  # the flooder, the board
            _run("ip", "-n", client, "addr", "add", address, "dev", "vc")
        for ns, dev in ((broker, "vb"), (client, "vc")):
            _run("ip", "-n", ns, "link", "set", dev, "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        yield broker, client
    finally:
        subprocess.run(["ip", "netns", "del", client], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", broker], capture_output=True, timeout=30)


def _start_broker(ns: str, conf: Path, fd_limit: int, log: Path) -> subprocess.Popen:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))

    mosquitto = find_mosquitto()
    assert mosquitto is not None
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, mosquitto, "-c", str(conf)],
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=limit,
        )
    deadline = time.monotonic() + 10
    while not re.search(r"mosquitto version \S+ running", log.read_text()):
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc)
            pytest.fail(f"mosquitto did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.05)
    return proc


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# The client side, run in the client namespace: FLOOD idle sockets from 10.231.0.2 (never a
# byte sent), then valid logins from 10.231.0.3 while they stay open. The logins run in a
# child process of their own: paho's select() cannot watch a descriptor above 1023.
FLOOD_SCRIPT = textwrap.dedent(
    """
    import json, selectors, socket, subprocess, sys, time

    def login(ca, user, password):
        import paho.mqtt.client as mqtt
        got = []
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
        c.username_pw_set(user, password)
        c.tls_set(ca_certs=ca)
        c.on_connect = lambda *a: got.append(not a[3].is_failure)
        try:
            c.connect("10.231.0.1", 8883, bind_address="10.231.0.3")
        except OSError:
            return False
        end = time.monotonic() + 5
        while not got and time.monotonic() < end:
            c.loop(timeout=0.2)
        c.disconnect()
        return bool(got and got[0])

    def flood(count):
        sel, socks, opened = selectors.DefaultSelector(), [], []
        for _ in range(count):
            s = socket.socket()
            s.setblocking(False)
            s.bind(("10.231.0.2", 0))
            s.connect_ex(("10.231.0.1", 8883))
            sel.register(s, selectors.EVENT_WRITE)
            socks.append(s)
        deadline = time.monotonic() + 8  # SYNs the rate limit dropped are retried meanwhile
        pending = len(socks)
        while pending and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=0.5):
                sel.unregister(key.fileobj)
                pending -= 1
                if key.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    opened.append(key.fileobj)
        time.sleep(3)  # the broker accepts the backlog (about 600 a second)
        return socks, opened

    if sys.argv[1] == "login":
        print(sum(login(*sys.argv[3:6]) for _ in range(int(sys.argv[2]))))
        sys.exit(0)
    socks, opened = flood(int(sys.argv[1]))
    logins = int(sys.argv[2])
    child = subprocess.run([sys.executable, sys.argv[0], "login", *sys.argv[2:]],
                           capture_output=True, text=True, timeout=20 + 6 * logins)
    ok = int(child.stdout.strip() or 0)
    still_open = 0
    for s in opened:
        try:
            still_open += s.recv(1) != b""
        except BlockingIOError:
            still_open += 1
        except OSError:
            pass
    print(json.dumps({"flood_opened": len(opened), "flood_open_at_end": still_open,
                      "logins_ok": ok, "logins_refused": logins - ok}))
    """
)


def _flood(client_ns: str, creds: Path, workdir: Path) -> dict:
    script = workdir / "flood.py"
    script.write_text(FLOOD_SCRIPT)
    password = (creds / "boards" / "pi-01" / "password").read_text().strip()
    args = [str(FLOOD), str(LOGINS), str(creds / "ca.crt"), "pi-01", password]
    result = subprocess.run(
        ["ip", "netns", "exec", client_ns, sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=180,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096)),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_idle_flood_refuses_no_valid_login_with_the_shipped_limits(
    namespaces, creds, tmp_path, mosquitto_available, record_property
) -> None:
    """host/mosquitto.conf, the drop-in's fd limit and host/edge-rl.nft, loaded unchanged:
    one address gets 16 sockets, and every valid login from another address succeeds."""
    broker_ns, client_ns = namespaces
    _run("ip", "netns", "exec", broker_ns, "nft", "-f", str(NFT))
    conf = _installed_conf(creds, tmp_path, limits=True)
    fd_limit = _setting(DROP_IN.read_text(), "LimitNOFILE")
    proc = _start_broker(broker_ns, conf, fd_limit, tmp_path / "mosquitto.log")
    try:
        got = _flood(client_ns, creds, tmp_path)
        alive = proc.poll() is None
    finally:
        _stop(proc)
    print(f"shipped limits and host rules, {FLOOD} idle sockets: {got}")
    for key, value in got.items():
        record_property(key, value)
    assert alive
    assert got["flood_opened"] == 16 and got["flood_open_at_end"] <= 16
    assert got["logins_refused"] == 0 and got["logins_ok"] == LOGINS


# -- the payload flood, on loopback ------------------------------------------------------


def _rss_peak_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024


@pytest.mark.slow
def test_payload_flood_leaves_the_broker_bounded(
    mosquitto_with, creds, shipped_config, record_property
) -> None:
    """400 publishes of 1.99 MB from a board, to a learner subscription that never reads:
    Mosquitto keeps at most max_inflight_bytes + max_queued_bytes for it, drops the rest."""
    lines = shipped_config(creds, certificates=False)
    generated = f"acl_file {creds / 'broker' / 'acl'}"
    lines = [generated if line.startswith("acl_file") else line for line in lines]
    broker = mosquitto_with(lines, tls=True)
    tls = ssl.create_default_context(cafile=str(creds / "ca.crt"))
    tls.check_hostname = False  # the certificate names 10.231.0.1; this broker is 127.0.0.1

    def client(user: str, directory: Path) -> mqtt.Client:
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=user, protocol=mqtt.MQTTv311)
        c.username_pw_set(user, (directory / "password").read_text().strip())
        c.tls_set_context(tls)
        c.connect(broker.host, broker.port)
        return c

    slow = client("learner", creds / "learner")
    slow.subscribe(f"{RUN.base}/#", qos=1)
    for _ in range(20):  # CONNACK and SUBACK, then this client never reads again
        slow.loop(timeout=0.1)
    board = client("pi-01", creds / "boards" / "pi-01")
    board.loop_start()
    payload = os.urandom(1_990_000)
    sent = 0
    deadline = time.monotonic() + 120
    try:
        for _ in range(400):
            info = board.publish(RUN.transitions("pi-01"), payload, qos=1)
            info.wait_for_publish(max(0.1, deadline - time.monotonic()))
            sent += info.is_published()
            if time.monotonic() > deadline:
                break
        time.sleep(1)
        peak = _rss_peak_mb(broker.proc.pid)
        alive = broker.proc.poll() is None
    finally:
        board.loop_stop()
        board.disconnect()
        threading.Thread(target=slow.disconnect, daemon=True).start()
    print(f"payload flood: {sent} x 1.99 MB acknowledged; broker peak RSS {peak:.0f} MB")
    record_property("payload_flood_sent", sent)
    record_property("broker_peak_rss_mb", round(peak))
    assert alive and sent == 400
    # 16 MB in flight + 64 MB queued for the slow reader, plus the broker's own: not 800 MB.
    assert peak < 200, peak
