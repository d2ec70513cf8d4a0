"""An MQTT broker the host can start for itself: Mosquitto when installed, else amqtt.

Used by tests (a real broker on a free loopback port) and by ``edge-rl learn`` when
no ``--broker`` is given::

    with EmbeddedBroker() as broker:          # kind="auto": Mosquitto if found, else amqtt
        ...                                   # clients connect to broker.url; stopped on exit

    accounts = BrokerAccounts(actors=("sim-00", "sim-01"), run="r1")
    with EmbeddedBroker(accounts=accounts) as broker:   # authenticated, with the run's ACL
        connect = mqtt_connect(broker.url, broker.auth("learner"))

Without ``accounts`` the broker is anonymous (the test fixtures). With them, either broker
refuses anonymous clients and applies the run's ACL (config.py, acl.py): Mosquitto from its
config, amqtt through ``amqtt_plugins.py`` reading the same password file and ACL. The
amqtt fallback listens on loopback only: it has no TLS and no bound on connections,
queues or memory (Mosquitto's are in ``mosquitto_conf``).

Both brokers run in a child process, so a busy learner never shares a GIL or an
event loop with its broker. Stopping is terminate → wait → kill; ``atexit`` (via
``weakref.finalize``) stops a broker whose owner forgot to. Either child also exits
when its owner dies, however it died (``kill -9`` included): amqtt watches its stdin
pipe, Mosquitto is started under ``setpriv --pdeathsig TERM`` (see ``die_with_parent``).

Differences that matter to callers:

* amqtt 0.12 speaks MQTT 3.1.1 only: it answers an MQTT 5 CONNECT with
  "unacceptable protocol version". Check ``broker.supports_mqtt5``.
* amqtt enforces no maximum packet size; Mosquitto disconnects a client that
  sends a packet above ``max_packet_size``. Check sizes before publishing either way.
* Neither keeps retained messages across a restart (Mosquitto runs with
  ``persistence false``): a publisher must republish what it retains on reconnect.

Standard library only (amqtt only inside the child, ``amqtt_child``).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path
from types import TracebackType

from edge_rl.broker.config import AccountStore, BrokerAccounts, mosquitto_conf
from edge_rl.broker.executables import die_with_parent, find_mosquitto
from edge_rl.transport.address import free_port, is_loopback
from edge_rl.transport.auth import BrokerAuth

logger = logging.getLogger(__name__)

_KINDS = ("auto", "mosquitto", "amqtt")
# A connect alone is not proof (whoever holds the port answers): the log must say so too.
_READY_MARKERS = {
    "mosquitto": re.compile(r"mosquitto version \S+ running"),
    "amqtt": re.compile(r"amqtt broker listening on"),
}


class BrokerError(RuntimeError):
    """The broker could not be found, started or stopped."""


class EmbeddedBroker:
    """A broker child process on ``host:port``; a context manager.

    ``port=None`` picks a free port at the first ``start()``; later restarts
    (``stop(); start()``) reuse it so clients can reconnect to the same URL.
    """

    def __init__(
        self,
        kind: str = "auto",
        host: str = "127.0.0.1",
        port: int | None = None,
        max_packet_size: int = 2_000_000,
        log_dir: Path | None = None,
        start_timeout: float = 10.0,
        accounts: BrokerAccounts | None = None,
    ) -> None:
        if kind not in _KINDS:
            raise ValueError(f"broker kind must be one of {_KINDS}, got {kind!r}")
        mosquitto = find_mosquitto()
        if kind == "mosquitto" and mosquitto is None:
            raise BrokerError(
                "mosquitto not found on PATH or in /usr/sbin: apt-get install mosquitto"
            )
        self.kind = (
            "mosquitto" if kind == "mosquitto" or (kind == "auto" and mosquitto) else "amqtt"
        )
        self.host = host
        self.port = port if port is not None else 0
        self.max_packet_size = max_packet_size
        self.supports_mqtt5 = self.kind == "mosquitto"
        if self.kind == "amqtt" and not is_loopback(host):
            raise BrokerError(
                f"the amqtt fallback has no TLS and no resource limits: loopback only: {host}"
            )
        self.authenticated = accounts is not None
        self._store = AccountStore(accounts) if accounts is not None else None
        if self._store is not None:  # the passwords' files go at exit at the latest
            weakref.finalize(self, self._store.remove)
        self.config_path: Path | None = None
        self.log_path: Path | None = None
        self._mosquitto = mosquitto
        self._log_dir = Path(log_dir) if log_dir is not None else None
        self._start_timeout = start_timeout
        self._port_pinned = port is not None
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None
        self._finalizer: weakref.finalize | None = None
        self._log_offset = 0

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"mqtt://{host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def auth(self, user: str) -> BrokerAuth:
        """The credentials of account ``user`` (files in a private temp dir)."""
        if self._store is None:
            raise BrokerError("this broker has no accounts: EmbeddedBroker(accounts=...)")
        return self._store.auth(user)

    def start(self) -> EmbeddedBroker:
        if self.running:
            return self
        self.stop()  # a broker that died on its own: reap it and drop its temp dir
        if not self._port_pinned:
            self.port = free_port(self.host)
        try:
            self._spawn_and_wait()
        except BrokerError as exc:
            # Someone may have taken the port between free_port() and the bind: retry once.
            if "address already in use" not in str(exc).lower():
                raise
            if self._port_pinned:
                time.sleep(0.5)
            else:
                self.port = free_port(self.host)
            logger.warning("broker port busy, retrying on %s:%d", self.host, self.port)
            self._spawn_and_wait()
        self._port_pinned = True
        logger.info(
            "started %s broker at %s (pid %d, log %s)", self.kind, self.url, self.pid, self.log_path
        )
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate the broker (SIGTERM, then SIGKILL after ``timeout`` s)."""
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._proc is not None:
            _terminate(self._proc, self._workdir, timeout)
            logger.info("stopped %s broker at %s", self.kind, self.url)
        self._proc = None
        self._workdir = None

    def kill(self) -> None:
        """Crash the broker (SIGKILL): no clean disconnects, like a power cut."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self.stop()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if self._store is not None:  # the passwords go with the broker (kept across restarts)
            self._store.remove()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        auth = ", authenticated" if self.authenticated else ""
        return f"EmbeddedBroker(kind={self.kind!r}, url={self.url!r}, {state}{auth})"

    # -- internals ----------------------------------------------------------------

    def _spawn_and_wait(self) -> None:
        workdir = Path(tempfile.mkdtemp(prefix=f"edge-rl-{self.kind}-"))
        log_dir = self._log_dir or workdir
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{self.kind}-{self.port}.log"
        try:  # authenticated: writes the accounts' files once
            argv = self._mosquitto_argv(workdir) if self.kind == "mosquitto" else self._amqtt_argv()
        except (OSError, RuntimeError) as e:
            shutil.rmtree(workdir, ignore_errors=True)
            raise BrokerError(f"cannot write the broker's accounts: {e}") from None
        env = dict(os.environ)
        # The amqtt child runs `-m edge_rl.broker.amqtt_child`: make this checkout importable.
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()  # a restart appends to the same log: read only ours
            proc = subprocess.Popen(
                die_with_parent(argv),
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # Ctrl-C reaches the learner, which stops it last
            )
        self._proc = proc
        self._workdir = workdir
        self._finalizer = weakref.finalize(self, _terminate, proc, workdir, 5.0)
        try:
            self._wait_ready()
        except BrokerError:
            self.stop()
            raise

    def _mosquitto_argv(self, workdir: Path) -> list[str]:
        assert self._mosquitto is not None
        conf = workdir / "mosquitto.conf"
        conf.write_text(mosquitto_conf(self.host, self.port, self.max_packet_size, self._store))
        self.config_path = conf
        return [self._mosquitto, "-c", str(conf)]

    def _amqtt_argv(self) -> list[str]:
        argv = [sys.executable, "-m", "edge_rl.broker.amqtt_child", self.host, str(self.port)]
        if self._store is not None:
            self._store.write()
            argv += ["--password-file", str(self._store.password_file)]
            argv += ["--acl-file", str(self._store.acl_file)]
        return argv

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self._start_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrokerError(
                    f"{self.kind} broker exited with code {self._proc.returncode} before "
                    f"listening on {self.host}:{self.port}; log tail:\n{self._log_tail()}"
                )
            if _READY_MARKERS[self.kind].search(self._read_log()):
                try:
                    with socket.create_connection((self.host, self.port), timeout=0.5):
                        return
                except OSError:
                    pass
            time.sleep(0.02)
        raise BrokerError(
            f"{self.kind} broker not listening on {self.host}:{self.port} after "
            f"{self._start_timeout:.0f} s; log tail:\n{self._log_tail()}"
        )

    def _read_log(self) -> str:
        if self.log_path is None:
            return ""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_offset)
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def _log_tail(self, lines: int = 20) -> str:
        return "\n".join(self._read_log().splitlines()[-lines:]) or "(empty log)"


def _terminate(proc: subprocess.Popen[bytes], workdir: Path | None, timeout: float) -> None:
    """SIGTERM → wait → SIGKILL; then remove the temp dir. Safe to call twice."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdin is not None:
        proc.stdin.close()
    if workdir is not None:
        shutil.rmtree(workdir, ignore_errors=True)
