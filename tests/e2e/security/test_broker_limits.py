"""A broker that stays available: the shipped host/mosquitto.conf, its systemd drop-in and
host/edge-rl.nft, against floods, for real.

The idle-connection floods run inside two network namespaces the test creates (a broker
side and a client side joined by a veth pair, 10.231.x.0/24): nothing reaches the host's
own interfaces or firewall. They need root (``ip netns``, ``nft``). Every load loop is
bounded in count and time; the broker is stopped by its PID.

Measured numbers go to stdout (``pytest -s``) and into the test's ``record_property``.
"""

from __future__ import annotations

import os
import re
import ssl
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from edge_rl.deploy.credentials import make_credentials
from edge_rl.deploy.ids import Registry
from edge_rl.wire.topics import Topics
from tests.harness.floods import (
    CONF,
    DROP_IN,
    FLOOD,
    LOGINS,
    NFT,
    Namespaces,
    idle_flood,
    installed_conf,
    namespaces_missing,
    rss_mb,
    run,
    setting,
    shipped_fd_limit,
    start_broker,
    stop,
)

RUN = Topics("edge-rl", "limits")


def test_shipped_limits_are_consistent() -> None:
    conf = CONF.read_text()
    fd_limit = setting(DROP_IN.read_text(), "LimitNOFILE")
    assert setting(conf, "max_connections") < fd_limit - 64
    packet = setting(conf, "max_packet_size")
    queued = setting(conf, "max_queued_bytes")
    inflight = setting(conf, "max_inflight_bytes")
    assert packet <= inflight < queued < setting(conf, "memory_limit")
    assert "tcp dport 8883" in NFT.read_text() and "listener 8883\n" in conf
    # Idle sockets from 1,000 addresses, 16 each (what the nft rule lets in), fit under
    # max_connections: 250 addresses filled the 4000 shipped before (docs/security.md).
    per_address = int(re.search(r"ct count over (\d+)", NFT.read_text()).group(1))
    assert setting(conf, "max_connections") >= 1000 * per_address


# -- the deployment, in namespaces -------------------------------------------------------


@pytest.fixture(scope="module")
def creds(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("creds")
    make_credentials(root, ["pi-01"], tls=True, passwords=True, server_names=["10.231.0.1"])
    with Registry.open(root) as reg:
        reg.enroll(["pi-01"], run=RUN.run)
    return root


@pytest.fixture
def namespaces():
    """(broker namespace, client namespace), veth-joined; deleted at teardown."""
    missing = namespaces_missing()
    if missing:
        pytest.skip(missing)
    with Namespaces() as pair:
        yield pair


@pytest.mark.slow
def test_idle_flood_refuses_no_valid_login_with_the_shipped_limits(
    namespaces, creds, tmp_path, mosquitto_available, record_property
) -> None:
    """host/mosquitto.conf, the drop-in's fd limit and host/edge-rl.nft, loaded unchanged:
    one address gets 16 sockets, and every valid login from another address succeeds."""
    broker_ns, client_ns = namespaces
    run("ip", "netns", "exec", broker_ns, "nft", "-f", str(NFT))
    conf = installed_conf(creds, tmp_path, limits=True)
    proc = start_broker(broker_ns, conf, shipped_fd_limit(), tmp_path / "mosquitto.log")
    try:
        got = idle_flood(client_ns, creds, tmp_path, "pi-01")
        alive = proc.poll() is None
    finally:
        stop(proc)
    print(f"shipped limits and host rules, {FLOOD} idle sockets: {got}")
    for key, value in got.items():
        record_property(key, value)
    assert alive
    assert got["flood_opened"] == 16 and got["flood_open_at_end"] <= 16
    assert got["logins_refused"] == 0 and got["logins_ok"] == LOGINS


# -- the payload flood, on loopback ------------------------------------------------------


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
        time.sleep(1)  # the broker's memory after the flood: its peak, not mid-flood
        _rss, peak = rss_mb(broker.proc.pid)
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
