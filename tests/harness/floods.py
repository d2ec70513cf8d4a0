"""Floods against a broker that runs the shipped host files, for
tests/e2e/security/test_broker_limits.py and benchmarks/attacks.py.

    with Namespaces() as (broker_ns, client_ns):          # root: ip netns, veth, 10.231.x
        run("ip", "netns", "exec", broker_ns, "nft", "-f", str(NFT))
        conf = installed_conf(creds, workdir, limits=True)
        proc = start_broker(broker_ns, conf, fd_limit, workdir / "mosquitto.log")
        got = idle_flood(client_ns, creds, workdir, "pi-01")   # 1,100 idle sockets + logins
        stop(proc)

The broker side is 10.231.0.1 (port 8883, as shipped); the client side has 10.231.0.3
(its first address: what a client that binds nothing connects from) and 10.231.0.2, the
flooder's. Nothing reaches the host's own interfaces or firewall. Every wait is bounded;
processes are stopped by their PID.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import resource
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from edge_rl.broker.executables import find_mosquitto
from tests.harness.paths import REPO
from tests.harness.waits import bound, until

CONF = REPO / "host" / "mosquitto.conf"
NFT = REPO / "host" / "edge-rl.nft"
DROP_IN = REPO / "host" / "systemd" / "mosquitto.service.d" / "edge-rl.conf"
BROKER_IP = "10.231.0.1"
FLOODER_IP = "10.231.0.2"
CLIENT_IP = "10.231.0.3"
FLOOD = 1100  # the idle connections
LOGINS = 8  # valid logins tried during a flood


def setting(text: str, key: str) -> int:
    """The one ``key N`` (or ``key=N``) line of a config's text."""
    found = re.findall(rf"^{key}[ =](\d+)$", text, re.MULTILINE)
    if len(found) != 1:
        raise ValueError(f"{key}: {found}")
    return int(found[0])


def shipped_fd_limit() -> int:
    return setting(DROP_IN.read_text(), "LimitNOFILE")


def installed_conf(creds: Path, workdir: Path, *, limits: bool) -> Path:
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


def run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=30)


def namespaces_missing() -> str | None:
    """Why the namespaced floods cannot run here, or None."""
    if os.geteuid() != 0:
        return "ip netns and nft need root (CI runs as root)"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (scripts/ensure-mosquitto installs it)"
    return None


class Namespaces:
    """(broker namespace, client namespace), veth-joined; deleted on exit."""

    def __init__(self, tag: str = "") -> None:
        tag = tag or f"{os.getpid() % 100000}"
        self.broker, self.client = f"erl-b{tag}", f"erl-c{tag}"

    def __enter__(self) -> tuple[str, str]:
        run("ip", "netns", "add", self.broker)
        try:
            run("ip", "netns", "add", self.client)
            b, c = self.broker, self.client
            run("ip", "-n", b, "link", "add", "vb", "type", "veth", "peer", "vc", "netns", c)
            run("ip", "-n", b, "addr", "add", f"{BROKER_IP}/24", "dev", "vb")
            for address in (CLIENT_IP, FLOODER_IP):  # the first is the clients' source
                run("ip", "-n", c, "addr", "add", f"{address}/24", "dev", "vc")
            for ns, dev in ((b, "vb"), (c, "vc")):
                run("ip", "-n", ns, "link", "set", dev, "up")
                run("ip", "-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.__exit__()
            raise
        return self.broker, self.client

    def __exit__(self, *exc: object) -> None:
        for ns in (self.client, self.broker):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def start_broker(ns: str, conf: Path, fd_limit: int, log: Path) -> subprocess.Popen:
    """Mosquitto with ``conf`` in namespace ``ns`` (``ip netns exec`` execs it: the PID is
    Mosquitto's), under an fd limit of ``fd_limit``; returns once it says it runs."""

    def limit() -> None:
        # Raising the hard limit needs CAP_SYS_RESOURCE, which a container may not give
        # root: then the hard limit it has (20,000 on the dev box) is the broker's.
        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))
        except (ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(fd_limit, hard), hard))

    mosquitto = find_mosquitto()
    if mosquitto is None:
        raise RuntimeError("mosquitto not installed")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, mosquitto, "-c", str(conf)],
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=limit,
        )
    running = re.compile(r"mosquitto version \S+ running")
    until(lambda: running.search(log.read_text()) or proc.poll() is not None, bound(10))
    if not running.search(log.read_text()):
        stop(proc)
        raise RuntimeError(f"mosquitto did not start:\n{log.read_text()[-3000:]}")
    return proc


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def rss_mb(pid: int) -> tuple[float, float]:
    """(resident, peak resident) MB of process ``pid``."""
    status = Path(f"/proc/{pid}/status").read_text()

    def field(name: str) -> float:
        return int(re.search(rf"{name}:\s+(\d+) kB", status).group(1)) / 1024

    return field("VmRSS"), field("VmHWM")


# The client side, run in the client namespace: FLOOD idle sockets from FLOODER_IP (never a
# byte sent), then valid logins from CLIENT_IP while they stay open. The logins run in a
# child process of their own: paho's select() cannot watch a descriptor above 1023. With
# "hold" last, the sockets stay open after the result line until stdin closes, and a last
# line says how many were still open then.
# A valid login of a board from the client namespace's first address, True if it got in,
# and whether a held socket is still open: the flood scripts' (and
# benchmarks/idle_flood.py's) ``login`` and ``alive``.
LOGIN_SCRIPT = textwrap.dedent(
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

    def alive(s):  # a held socket the broker has not closed (nothing comes on an idle one)
        try:
            return s.recv(1, socket.MSG_PEEK) != b""
        except BlockingIOError:
            return True
        except OSError:
            return False
    """
)
FLOOD_SCRIPT = LOGIN_SCRIPT + textwrap.dedent(
    """

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

    def still_open(opened):
        return sum(map(alive, opened))

    if sys.argv[1] == "login":
        print(sum(login(*sys.argv[3:6]) for _ in range(int(sys.argv[2]))))
        sys.exit(0)
    socks, opened = flood(int(sys.argv[1]))
    logins = int(sys.argv[2])
    child = subprocess.run([sys.executable, sys.argv[0], "login", *sys.argv[2:6]],
                           capture_output=True, text=True, timeout=20 + 6 * logins)
    ok = int(child.stdout.strip() or 0)
    print(json.dumps({"flood_opened": len(opened), "flood_open_at_end": still_open(opened),
                      "logins_ok": ok, "logins_refused": logins - ok}), flush=True)
    if sys.argv[-1] == "hold":
        sys.stdin.read()
        print(json.dumps({"flood_open_at_end": still_open(opened)}), flush=True)
    """
)


def _flood_argv(client_ns: str, creds: Path, workdir: Path, user: str, hold: bool) -> list[str]:
    """The flood script's command line; in namespace ``client_ns``, or this process's when
    it is empty."""
    script = workdir / "flood.py"
    script.write_text(FLOOD_SCRIPT)
    password = (creds / "boards" / user / "password").read_text().strip()
    args = [str(FLOOD), str(LOGINS), str(creds / "ca.crt"), user, password]
    argv = [sys.executable, str(script), *args]
    argv = ["ip", "netns", "exec", client_ns, *argv] if client_ns else argv
    return [*argv, "hold"] if hold else argv


def _many_fds() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))


def idle_flood(client_ns: str, creds: Path, workdir: Path, user: str) -> dict:
    """FLOOD idle sockets, then LOGINS valid logins of board ``user`` from another
    address: what was opened, still open, logged in and refused."""
    result = subprocess.run(
        _flood_argv(client_ns, creds, workdir, user, hold=False),
        capture_output=True,
        text=True,
        timeout=180,
        preexec_fn=_many_fds,
    )
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


class HeldFlood:
    """The idle flood of ``idle_flood``, its sockets held open until ``close()``: a run
    goes on under it (``client_ns`` "": in this process's namespace). ``result()`` is its
    first line, after the logins; ``close()`` returns how many of its sockets were still
    open at the end."""

    def __init__(self, client_ns: str, creds: Path, workdir: Path, user: str) -> None:
        self.proc = subprocess.Popen(
            _flood_argv(client_ns, creds, workdir, user, hold=True),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_many_fds,
        )

    def result(self) -> dict:
        """Blocks until the logins are done (bounded by the script's own timeouts)."""
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"flood ended early: {self.proc.stderr.read()[-3000:]}")
        return json.loads(line)

    def close(self) -> int:
        try:
            out, _err = self.proc.communicate("", timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return -1
        lines = out.strip().splitlines()
        return json.loads(lines[-1])["flood_open_at_end"] if lines else -1
