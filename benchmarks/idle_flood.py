#!/usr/bin/env python
"""Idle sockets from many addresses against the shipped broker: what its settings hold.

    sudo .venv/bin/python benchmarks/idle_flood.py                 # every arm, ~1 min each
    sudo .venv/bin/python benchmarks/idle_flood.py --arms shipped-70 --addresses 70

As root, in two network namespaces joined by a veth pair (tests/harness/floods.py; nothing
reaches the host's interfaces or firewall): Mosquitto with host/mosquitto.conf (TLS on
8883, a deployment's password file and ACL) under the systemd drop-in's fd limit, and
host/edge-rl.nft loaded, in one; in the other, a flooder with ``--addresses`` source
addresses (10.231.1.1, ...) that opens ``--per-address`` TCP connections from each and
never sends a byte (no TLS ClientHello, no CONNECT), then, while they are held, valid
logins of a board from another address. The flooder tops each address up to
``--per-address`` open sockets in rounds (at most 6, 60 s), as one that retries would:
nftables can reset a connection below its count in a burst, and a retry gets it in.
Arms (``--arms``):

* shipped-A: the shipped files, A addresses
* connections-M-A: ``max_connections M`` (and an fd limit of 2M, at most the hard limit)
  instead of the shipped value, A addresses

Columns: the flood's sockets open when its rounds end (nft lets 16 in per address),
accepted by Mosquitto (its log's count; the logins wait for it, up to 60 s: it accepts
~600 a second), still open when the logins were done, valid logins refused (of 8),
Mosquitto's RSS before and with the flood held (and its growth per held socket), and the
share of ``max_connections`` held. Nothing here asserts a number;
tests/e2e/security/test_broker_limits.py holds the one-address flood at the shipped
limits, tests/e2e/benchmarks/test_idle_flood_bench.py the 300-address arms.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from _common import md_table  # noqa: E402

from edge_rl.deploy.credentials import make_credentials  # noqa: E402
from edge_rl.deploy.ids import Registry  # noqa: E402
from tests.harness.floods import (  # noqa: E402
    LOGIN_SCRIPT,
    NFT,
    Namespaces,
    installed_conf,
    namespaces_missing,
    rss_mb,
    run,
    shipped_fd_limit,
    start_broker,
    stop,
)

LOGINS = 8
HEADERS = ["arm", "addresses", "max_connections", "opened", "accepted", "open at logins"]
HEADERS += ["logins refused"]
HEADERS += ["broker RSS MB before / held", "KB per held socket", "max_connections held %"]

# In the client namespace: sockets from each source address, held; then the logins from
# the namespace's first address, in a child (paho's select() cannot watch fd > 1023); a
# result line, then the sockets are closed.
SCRIPT = LOGIN_SCRIPT + textwrap.dedent(
    """

    if sys.argv[1] == "login":
        print(sum(login(*sys.argv[3:6]) for _ in range(int(sys.argv[2]))))
        sys.exit(0)
    addresses, per = sys.argv[1].split(","), int(sys.argv[2])

    # Rounds: each address tops up to `per` open sockets, as a flooder that retries would.
    # A retry is what gets the last few in: when many SYNs from one address arrive in the
    # same jiffy, nftables' `ct count` can count one connection twice and reset it below
    # its limit (23 of 4,800 on a loaded host; 616 once in CI).
    sel, held = selectors.DefaultSelector(), {a: [] for a in addresses}
    t0, rounds, refused = time.monotonic(), 0, 0
    deadline = t0 + 60
    while rounds < 6 and time.monotonic() < deadline:
        rounds += 1
        pending, gained = 0, 0
        for a in addresses:
            held[a] = [s for s in held[a] if alive(s) or s.close()]
            for _ in range(per - len(held[a])):
                s = socket.socket()
                s.setblocking(False)
                s.bind((a, 0))
                s.connect_ex(("10.231.0.1", 8883))
                sel.register(s, selectors.EVENT_WRITE, a)
                pending += 1
        # A SYN dropped (the broker's accept queue full, or the rate limit) is retried 1,
        # 3, 7, 15 and 31 s after the first: the round waits up to the fifth retry.
        end = min(deadline, time.monotonic() + 40)
        while pending and time.monotonic() < end:
            for key, _ in sel.select(timeout=0.5):
                sel.unregister(key.fileobj)
                pending -= 1
                if key.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    held[key.data].append(key.fileobj)
                    gained += 1
                else:
                    key.fileobj.close()
                    refused += 1
        if not gained:  # every address at what the firewall lets in
            break
        time.sleep(1)
    time.sleep(5)  # the broker accepts its backlog
    opened = [s for a in addresses for s in held[a]]
    took = time.monotonic() - t0
    print(json.dumps({"opened": len(opened), "rounds": rounds, "refused": refused,
                      "open_s": round(took, 1)}), flush=True)
    sys.stdin.readline()  # the broker's RSS is read meanwhile
    child = subprocess.run([sys.executable, sys.argv[0], "login", *sys.argv[3:7]],
                           capture_output=True, text=True, timeout=30 + 6 * int(sys.argv[3]))
    ok = int(child.stdout.strip() or 0)
    print(json.dumps({"open_at_logins": sum(map(alive, opened)), "logins_ok": ok}), flush=True)
    """
)


def _many_fds() -> None:
    """The flooder's fd limit: as many as the hard limit allows (one per socket)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def accepted_by(log: Path, want: int, timeout: float = 60.0) -> int:
    """Connections Mosquitto's log says it accepted, once ``want`` or ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        n = log.read_text(errors="replace").count("New connection from")
        if n >= want or time.monotonic() > deadline:
            return n
        time.sleep(0.5)


def flood_addresses(n: int) -> list[str]:
    return [f"10.231.{1 + i // 250}.{1 + i % 250}" for i in range(n)]


def one(arm: str, addresses: int, max_conn: int | None, per: int, creds: Path) -> list:
    with tempfile.TemporaryDirectory(prefix="idle-flood-") as tmp, Namespaces() as (b, c):
        work = Path(tmp)
        run("ip", "-n", b, "route", "add", "10.231.0.0/16", "dev", "vb")
        sources = flood_addresses(addresses)
        for a in sources:
            run("ip", "-n", c, "addr", "add", f"{a}/16", "dev", "vc")
        run("ip", "netns", "exec", b, "nft", "-f", str(NFT))
        conf = installed_conf(creds, work, limits=True)
        fd_limit = shipped_fd_limit()
        if max_conn is not None:
            text = re.sub(
                r"^max_connections \d+$",
                f"max_connections {max_conn}",
                conf.read_text(),
                flags=re.M,
            )
            conf.write_text(text)
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            fd_limit = max(fd_limit, min(2 * max_conn, hard))
        limit = int(re.search(r"^max_connections (\d+)$", conf.read_text(), re.M).group(1))
        broker = start_broker(b, conf, fd_limit, work / "mosquitto.log")
        try:
            before = rss_mb(broker.pid)[0]
            script = work / "flood.py"
            script.write_text(SCRIPT)
            password = (creds / "boards" / "pi-01" / "password").read_text().strip()
            args = [",".join(sources), str(per), str(LOGINS), str(creds / "ca.crt"), "pi-01"]
            flood = subprocess.Popen(
                ["ip", "netns", "exec", c, sys.executable, str(script), *args, password],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                preexec_fn=_many_fds,
            )
            first = json.loads(flood.stdout.readline() or "{}")
            print(f"{arm}: flood {first}", flush=True)
            # The kernel completes the handshakes; Mosquitto accepts them at its own pace
            # (~600 a second): the logins wait until it has taken every one it will.
            accepted = accepted_by(work / "mosquitto.log", min(first.get("opened", 0), limit))
            held = rss_mb(broker.pid)[0]
            out, err = flood.communicate("go\n", timeout=300)
            lines = out.strip().splitlines()
            if not lines or "opened" not in first:
                raise RuntimeError(f"flood failed: {err[-2000:]}")
            last = json.loads(lines[-1])
            alive = broker.poll() is None
        finally:
            stop(broker)
    opened = first["opened"]
    per_socket = 1024 * (held - before) / opened if opened else 0.0
    refused = LOGINS - last["logins_ok"]
    return [
        arm,
        addresses,
        f"{limit:,}",
        f"{opened:,}",
        f"{accepted:,}",
        f"{last['open_at_logins']:,}",
        f"{refused} of {LOGINS}" + ("" if alive else " (broker died)"),
        f"{before:.1f} / {held:.1f}",
        f"{per_socket:.1f}",
        f"{100 * opened / limit:.0f}",
    ]


ARMS = {  # arm: (addresses, max_connections or None for the shipped value)
    "shipped-70": (70, None),
    "shipped-300": (300, None),
    "connections-4000-300": (300, 4_000),  # the value shipped before
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--arms", default=",".join(ARMS))
    p.add_argument("--per-address", type=int, default=20, help="sockets tried per address")
    args = p.parse_args()
    missing = namespaces_missing()
    if missing:
        p.error(missing)
    rows = []
    with tempfile.TemporaryDirectory(prefix="idle-flood-creds-") as tmp:
        creds = Path(tmp)
        make_credentials(creds, ["pi-01"], tls=True, passwords=True, server_names=["10.231.0.1"])
        with Registry.open(creds) as reg:
            reg.enroll(["pi-01"], run="limits")
        for arm in args.arms.split(","):
            addresses, max_conn = ARMS[arm]
            t0 = time.monotonic()
            rows.append(one(arm, addresses, max_conn, args.per_address, creds))
            print(" | ".join(map(str, rows[-1])), f"({time.monotonic() - t0:.0f} s)", flush=True)
    print()
    print(md_table(HEADERS, rows))


if __name__ == "__main__":
    main()
