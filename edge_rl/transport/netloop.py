"""One network loop for the MQTT connections of many transports in one process: what a
board group (``edge-rl actors``) serves its boards' connections with.

    net = NetLoop().start()
    transport = MqttTransport(url, client_id, ..., net=net)  # (mqtt_connect(url, net=net))
    ...
    net.stop()

paho-mqtt's external event loop (its ``on_socket_open``/``close``/``register_write``/
``unregister_write`` callbacks and ``loop_read``/``loop_write``/``loop_misc``): every socket
of the process is in one selector (epoll on Linux), served by one thread, ``net-io``. A
connection with nothing to read or write costs nothing: the thread sleeps in the selector
until a socket has traffic or the next tick (``TICK_S``: paho's keep-alive bookkeeping,
``loop_misc``, for every client at once). Every read and write of a socket happens on
``net-io``, so a TLS socket is only ever used by one thread. A publish from a board's
thread queues the packet in paho and marks the socket for writing (paho's own locks
guard its queues, as with its network thread); ``net-io`` writes it.

Connecting (the TCP connect and a TLS handshake block) and the waits between attempts
happen on a second thread, ``net-connect``: ``call_later`` runs a function there after a
delay, in order. Each transport decides its own next attempt (transport/mqtt.py); this
loop only runs it. Callbacks of paho (``on_connect``, ``on_message``, ``on_disconnect``)
run on ``net-io``: they must be short, and only hand work on.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable

import paho.mqtt.client as mqtt

log = logging.getLogger(__name__)

# How often every client's keep-alive is looked after (paho's loop_misc): its PINGREQ is
# due after ``keepalive`` s of quiet, and a broker silent for that long again is gone.
TICK_S = 1.0


class NetLoop:
    def __init__(self, tick_s: float = TICK_S) -> None:
        self.tick_s = tick_s
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()  # the selector's registrations, from any thread
        self._clients: set[mqtt.Client] = set()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._stopping = threading.Event()
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._timers_cv = threading.Condition()
        self._seq = itertools.count()
        self.callback_errors = 0  # exceptions out of a client's read, write or tick
        self.wakeups = 0  # returns from the selector: what a quiet host costs
        self._io = threading.Thread(target=self._serve, name="net-io", daemon=True)
        self._connect = threading.Thread(target=self._run_timers, name="net-connect", daemon=True)

    def start(self) -> NetLoop:
        self._io.start()
        self._connect.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """End both threads (the connections are their transports' to close first)."""
        self._stopping.set()
        with self._timers_cv:
            self._timers_cv.notify_all()
        self._wake()
        for t in (self._io, self._connect):
            if t.is_alive() and t is not threading.current_thread():
                t.join(timeout)
        with self._lock:
            self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    # --- clients ------------------------------------------------------------------------

    def attach(self, client: mqtt.Client) -> None:
        """Serve ``client``'s connections (each new socket registers itself when opened)."""
        client.on_socket_open = self._opened
        client.on_socket_close = self._closed
        client.on_socket_register_write = self._want_write
        client.on_socket_unregister_write = self._written
        with self._lock:
            self._clients.add(client)

    def detach(self, client: mqtt.Client) -> None:
        with self._lock:
            self._clients.discard(client)

    def _opened(self, client: mqtt.Client, userdata, sock) -> None:
        with self._lock, contextlib.suppress(RuntimeError):  # (closed by stop())
            if not self._stopping.is_set():
                self._selector.register(sock, selectors.EVENT_READ, client)

    def _closed(self, client: mqtt.Client, userdata, sock) -> None:
        # At once, on whichever thread closes it: the fd's number may be reused next.
        with self._lock, contextlib.suppress(KeyError, ValueError, OSError, RuntimeError):
            self._selector.unregister(sock)

    def _want_write(self, client: mqtt.Client, userdata, sock) -> None:
        self._set_events(sock, client, selectors.EVENT_READ | selectors.EVENT_WRITE)

    def _written(self, client: mqtt.Client, userdata, sock) -> None:
        # A packet queued by another thread between paho's check and this call keeps the
        # socket marked (paho's own flag would swallow that thread's request).
        if not client.want_write():
            self._set_events(sock, client, selectors.EVENT_READ)

    def _set_events(self, sock, client: mqtt.Client, events: int) -> None:
        # epoll and kqueue take a change while another thread waits in them.
        with self._lock, contextlib.suppress(KeyError, ValueError, OSError, RuntimeError):
            if self._selector.get_key(sock).events != events:
                self._selector.modify(sock, events, client)

    # --- net-io ---------------------------------------------------------------------------

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    def _serve(self) -> None:
        next_tick = time.monotonic() + self.tick_s
        while not self._stopping.is_set():
            try:
                events = self._selector.select(max(0.0, next_tick - time.monotonic()))
            except (OSError, ValueError):  # closed by stop()
                return
            self.wakeups += 1
            for key, mask in events:
                client = key.data
                if client is None:
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                    continue
                self._serve_one(client, mask)
            if time.monotonic() >= next_tick:
                self._tick()
                next_tick = time.monotonic() + self.tick_s

    def _serve_one(self, client: mqtt.Client, mask: int) -> None:
        try:
            if mask & selectors.EVENT_READ:
                client.loop_read()
                sock = client.socket()
                # TLS: records already decrypted wait in the SSL object, not the socket.
                while sock is not None and getattr(sock, "pending", _none)() > 0:
                    client.loop_read()
                    sock = client.socket()
            if mask & selectors.EVENT_WRITE:
                client.loop_write()
        except Exception:  # noqa: BLE001 - one client's fault must not end the loop
            self._count_error()

    def _tick(self) -> None:
        with self._lock:
            clients = list(self._clients)
        for client in clients:
            try:
                client.loop_misc()
                sock = client.socket()
                if sock is not None and client.want_write():  # nothing queued is left behind
                    self._want_write(client, None, sock)
            except Exception:  # noqa: BLE001
                self._count_error()

    def _count_error(self) -> None:
        self.callback_errors += 1
        if self.callback_errors == 1:
            log.exception("net loop: error serving a connection")

    # --- net-connect ------------------------------------------------------------------------

    def call_later(self, delay: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` on ``net-connect`` after ``delay`` s (a connect attempt)."""
        with self._timers_cv:
            heapq.heappush(self._timers, (time.monotonic() + delay, next(self._seq), fn))
            self._timers_cv.notify()

    def _run_timers(self) -> None:
        while True:
            with self._timers_cv:
                while not self._stopping.is_set():
                    now = time.monotonic()
                    if self._timers and self._timers[0][0] <= now:
                        break
                    self._timers_cv.wait(self._timers[0][0] - now if self._timers else None)
                if self._stopping.is_set():
                    return
                _, _, fn = heapq.heappop(self._timers)
            try:
                fn()
            except Exception:  # noqa: BLE001 - the next attempt is the transport's own
                self.callback_errors += 1
                log.exception("net loop: a connect attempt raised")


def _none() -> int:
    return 0
