"""A thin, careful paho-mqtt adapter (paho 2.x, callback API v2, MQTT 3.1.1): the
``Transport`` of transport/base.py for a real broker.

    transport = MqttTransport(url, client_id, subscriptions=[(topic, 1)], on_message=handle,
                              auth=BrokerAuth(ca_file=..., username=..., password_file=...))
    transport.start()                 # connect_async + loop_start: returns at once
    transport.wait_connected(10)
    transport.publish(topic, payload, qos=1, retain=False)  # False when not sent
    transport.stop()

``on_message`` runs on paho's network thread: it must only hand the bytes on (to a
bounded queue). Exceptions raised in it are caught and counted, because an exception
escaping a callback kills paho's network thread.

Protocol 3.1.1, not 5: the protocol uses no MQTT 5 feature (no session expiry, no
properties), and 3.1.1 is what every broker speaks, the embedded amqtt fallback included
(amqtt 0.12 refuses MQTT 5 connections).

``mqtts://`` URLs connect with TLS: Python's default client context (TLS 1.2 or later,
the broker's certificate checked against ``auth.ca_file`` or the system's CAs, and its
name against the URL's host), plus the client certificate of ``auth`` if it has one.
A broker that refuses the credentials is logged as such and retried with back-off.
``apply_auth`` puts the same TLS context and credentials on any paho client (the doctor's
one-off login, deploy/broker_check.py).

``owner_io=True``: no network thread. The owner serves the connection on its own thread,
calling ``poll(timeout)`` at least every few seconds (``loop`` of paho: reads, writes,
keep-alive), and its callbacks run there, inside ``poll``. A publish writes to the socket
at once on the calling thread. One lock keeps every use of the socket (the owner's poll,
a publish from another thread, a connect) to one thread at a time, as TLS requires. An
actor loop uses it: with paho's thread, the loop handed the GIL to it for every publish
and every PUBACK, ~4 blocks of ~40 µs a batch (docs/benchmarks.md).

``net=NetLoop``: no thread of its own either. The process's one network loop (netloop.py,
what a board group gives its boards) serves the connection, and connects it; callbacks
run on that loop's thread. ``owner_io`` is then ignored (False): the owner's ``poll`` only
waits, and a publish queues the packet for the loop to write.

``url`` may be a list, ``URL[,URL...]``: the nodes of one clustered broker. The transport's
own thread connects to one node at a time, and paho's network thread (with ``owner_io``,
the owner's polls) serves that connection (paho's own reconnect is off). When an attempt
fails (no CONNACK, or a refusal) it moves on to the next node of the list, round and
round, and waits between attempts by ``Backoff`` (backoff.py: bounded, jittered,
exponential). A node that dropped an established connection is tried once more first (a
restart of a single broker), then the others. It does not fall back to an earlier node
while connected.

A clean close (``stop``, ``replace_will``) leaves nothing unread on the socket before the
DISCONNECT: it unsubscribes and waits for the UNSUBACK (the broker handles one client's
packets in order, so every PUBACK and forwarded message before it has been read), or, with
no subscriptions, for the PUBACK of the last QoS 1 publish. Closed with bytes unread, the
kernel resets the connection; Mosquitto 2.0, writing its PUBACK into the reset socket,
drops the client before it reads the DISCONNECT ("disconnected due to out of memory",
eclipse-mosquitto/mosquitto#3253, fixed in 2.0.22) and publishes its last will.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence

import paho.mqtt.client as mqtt

from edge_rl.transport.address import parse_broker_list, split_broker_urls
from edge_rl.transport.auth import AuthError, BrokerAuth
from edge_rl.transport.backoff import Backoff
from edge_rl.transport.base import Connect, MessageHandler
from edge_rl.transport.netloop import NetLoop

log = logging.getLogger(__name__)

# What paho's publish returns for a QoS > 0 message it keeps in its queue but could not write.
KEPT_BY_PAHO = (mqtt.MQTT_ERR_NO_CONN, mqtt.MQTT_ERR_CONN_LOST)


class MqttTransport:
    def __init__(
        self,
        url: str,
        client_id: str,
        *,
        subscriptions: Sequence[tuple[str, int]] = (),
        on_message: MessageHandler | None = None,
        will: tuple[str, bytes] | None = None,
        on_connect: Callable[[], None] | None = None,
        max_queued_messages: int = 1000,
        max_packet_size: int = 2_000_000,
        keepalive: int = 30,
        auth: BrokerAuth | None = None,
        backoff: Backoff | None = None,
        owner_io: bool = False,
        net: NetLoop | None = None,
    ) -> None:
        self.addresses = parse_broker_list(url)
        self.urls = split_broker_urls(url)
        self.tls = self.addresses[0].tls
        self.auth = auth or BrokerAuth()
        self.auth.check_url(url)
        self.url = url
        self.backoff = backoff or Backoff()
        self._index = 0  # the node of ``addresses`` tried or connected now
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._net = net
        self._attempt = 0  # net: connect attempts since the last accepted connection
        self.owner_io = owner_io and net is None
        self._io = threading.RLock()  # owner_io: the socket, one thread at a time
        # Around every use of the socket off paho's thread; with paho's thread, nothing.
        self._guard = self._io if self.owner_io else contextlib.nullcontext()
        self._live = threading.Event()  # owner_io: a connection for ``poll`` to serve
        self._was_up = False  # this attempt got a CONNACK that accepted us
        self._ended = threading.Event()  # this attempt's connection closed
        self.failovers = 0  # moves to another node of the list after an attempt failed
        self.subscribe_failures = 0  # SUBACKs that refused a subscription (retried)
        self._subs_lock = threading.Lock()
        self._pending_subs: dict[int, tuple[str, int]] = {}  # SUBSCRIBE mid -> (topic, qos)
        self._unsubscribed = threading.Event()  # the UNSUBACK of a clean close
        self._unsub_mid = -1
        self._last_qos1: mqtt.MQTTMessageInfo | None = None  # a clean close waits for its ack
        self._renewing = False  # replace_will: reconnect at once after the clean close
        self._sub_attempts: dict[str, int] = {}  # topic -> refusals in a row
        self.client_id = client_id
        self._subscriptions = list(subscriptions)
        self._handler = on_message
        self._after_connect = on_connect
        self.max_packet_size = max_packet_size
        self._keepalive = keepalive
        self._connected = threading.Event()
        self.callback_errors = 0
        self.publish_failures = 0
        self.connects = 0
        self.refusals = 0  # CONNACKs that refused us (bad credentials, not authorised)
        self.connect_failures = 0  # no CONNACK at all: network, or the TLS handshake failed
        self._refused = False  # this attempt's CONNACK refused us (network thread only)
        self.last_failure = ""  # why the last attempt failed, for an error message
        self._client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=mqtt.MQTTv311,
            clean_session=True,
            reconnect_on_failure=False,  # the next attempt, and its node, are ours to choose
        )
        # Bound paho's in-memory queue of unacknowledged QoS>0 messages; past it publish
        # fails and the caller keeps the data in its own (byte-bounded) spool.
        self._client.max_queued_messages_set(max_queued_messages)
        if will is not None:  # retained last will: published by the broker if we vanish
            self._client.will_set(will[0], will[1], qos=1, retain=True)
        apply_auth(self._client, self.auth, self.tls)
        self._client.on_connect = self._on_connect
        self._client.on_subscribe = self._on_subscribe
        self._client.on_unsubscribe = self._on_unsubscribe
        self._client.on_disconnect = self._on_disconnect
        self._client.on_message = self._on_message
        if net is not None:
            net.attach(self._client)

    # --- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        """Connect in the background (the transport's own thread, or the net loop's) and
        stay connected."""
        if self._net is not None:
            self._net.call_later(0.0, self._net_attempt)
            return
        self._thread = threading.Thread(
            target=self._supervise, name=f"mqtt-{self.client_id}", daemon=True
        )
        self._thread.start()

    def wait_connected(self, timeout: float) -> bool:
        if not self.owner_io:
            return self._connected.wait(timeout)
        deadline = time.monotonic() + timeout  # the CONNACK is read by a poll
        while not self._connected.is_set() and (left := deadline - time.monotonic()) > 0:
            self.poll(min(left, 0.05))
        return self._connected.is_set()

    def poll(self, timeout: float = 0.0) -> None:
        """``owner_io``: serve the connection on this thread, waiting up to ``timeout`` s for
        traffic (callbacks run here). Without a connection, or with the socket in another
        thread's use (a connect), it waits ``timeout`` instead. Without ``owner_io``, paho's
        thread serves the connection and this only waits."""
        if not self.owner_io or not self._live.is_set() or not self._io.acquire(blocking=False):
            if timeout > 0:
                self._stopping.wait(timeout)
            return
        try:
            rc = self._client.loop(timeout)
        finally:
            self._io.release()
        if rc != mqtt.MQTT_ERR_SUCCESS and timeout > 0:  # the connection is gone
            self._stopping.wait(timeout)

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    @property
    def current_url(self) -> str:
        """The node connected now, or the one being tried."""
        return self.urls[self._index]

    def stop(self, drain_s: float = 5.0) -> None:
        """A clean close (nothing left unread, then DISCONNECT: no last will), waiting up to
        ``drain_s`` for the broker's acknowledgements; then the transport's thread ends."""
        self._stopping.set()
        if self._net is not None:
            self._net_stop()
            return
        try:
            self._drain(drain_s)
            with self._guard:
                self._client.disconnect()  # the loop sends it, then the socket closes
            if self.owner_io:  # no network thread to see the socket close
                self._ended.set()
        finally:
            if self._thread is not None:
                self._thread.join(timeout=10)
            self._connected.clear()

    def replace_will(self, topic: str, payload: bytes, timeout: float = 15.0) -> bool:
        """Make ``(topic, payload)`` the last will (retained): the connection is closed
        cleanly (the old will is not published) and made again with the new one at once.
        True once connected again within ``timeout``. MQTT 3.1.1 fixes a will at CONNECT."""
        self._client.will_set(topic, payload, qos=1, retain=True)
        if not self._connected.is_set():
            return self.wait_connected(timeout)  # the next connect carries it
        deadline = time.monotonic() + timeout
        self._drain(min(5.0, timeout))
        before = self.connects
        self._renewing = True
        with self._guard:
            self._client.disconnect()
        if self.owner_io:  # no network thread to see the socket close
            self._ended.set()
        again = lambda: self.connects > before and self._connected.is_set()  # noqa: E731
        until(again, deadline, self.poll if self.owner_io else None)
        return again()

    def _drain(self, timeout: float) -> None:
        """Before a DISCONNECT, nothing left for the broker to send us (bounded): the UNSUBACK
        of every subscription, or without any, the PUBACK of the last QoS 1 publish."""
        if not self._connected.is_set() or timeout <= 0:
            return
        deadline = time.monotonic() + timeout
        poll = self.poll if self.owner_io else None
        topics = [topic for topic, _ in self._subscriptions]
        if topics:
            self._unsubscribed.clear()
            with self._guard:
                rc, self._unsub_mid = self._client.unsubscribe(topics)
            if rc == mqtt.MQTT_ERR_SUCCESS:
                until(lambda: self._unsubscribed.is_set() or not self.connected, deadline, poll)
            return
        last = self._last_qos1
        if last is not None:
            until(lambda: last.is_published() or not self.connected, deadline, poll)

    # --- the connection, node after node (the transport's thread) ------------------------

    def _supervise(self) -> None:
        attempt = 0
        while not self._stopping.is_set():
            up = self._session()
            if self._stopping.is_set():
                break
            if up and self._renewing:  # replace_will: again at once, with the new will
                self._renewing = False
                attempt = 0
                continue
            if up:
                attempt = 0  # a drop: this node once more first, soon
            else:
                self._next_node()
            self._stopping.wait(self.backoff.delay(attempt))
            attempt += 1

    def _session(self) -> bool:
        """One connection to the current node, until it ends; True if the broker accepted
        us. Callbacks run on paho's network thread, started for this connection."""
        host, port, _ = self.addresses[self._index]
        self._was_up = self._refused = False
        self._ended.clear()
        try:
            with self._guard:
                self._client.connect(host, port, keepalive=self._keepalive)
        except OSError as e:  # refused, unreachable, timed out, or the TLS handshake failed
            self.last_failure = connect_error(e)
            self._attempt_failed()
            return False
        if self.owner_io:  # the owner's polls serve it, until it ends
            self._live.set()
            self._ended.wait()
            self._live.clear()
            with self._io:  # a poll in progress is over
                self._connected.clear()
            return self._was_up
        # paho's own network thread, for this connection only (no reconnect of its own):
        # with it running, every write to the socket happens on it, which TLS requires.
        self._client.loop_start()
        self._ended.wait()  # on_disconnect: the connection, or the attempt, is over
        self._client.loop_stop()
        self._connected.clear()
        return self._was_up

    # --- the same, on a net loop: attempts on its connect thread, I/O on its io thread --

    def _net_attempt(self) -> None:
        """One connect attempt (net-connect); its end, whenever, calls ``_net_retry``."""
        if self._stopping.is_set():
            return
        host, port, _ = self.addresses[self._index]
        self._was_up = self._refused = False
        self._ended.clear()
        try:
            self._client.connect(host, port, keepalive=self._keepalive)
        except OSError:  # refused, unreachable, timed out, or the TLS handshake failed
            self._attempt_failed()
            self._net_retry(False)
            return
        if self._stopping.is_set():  # stopped while connecting: say goodbye at once
            self._client.disconnect()

    def _net_retry(self, up: bool) -> None:
        """The next attempt, as ``_supervise`` waits for it: a dropped connection's node once
        more first, soon; a failed attempt's next node, after a longer back-off."""
        if self._stopping.is_set():
            return
        if up:
            self._attempt = 0
        else:
            self._next_node()
        delay = self.backoff.delay(self._attempt)
        self._attempt += 1
        self._net.call_later(delay, self._net_attempt)

    def _net_stop(self, timeout: float = 2.0) -> None:
        """DISCONNECT written by the loop, and the socket closed (bounded)."""
        if self._client.disconnect() == mqtt.MQTT_ERR_SUCCESS:
            self._ended.wait(timeout)
        self._connected.clear()
        self._net.detach(self._client)

    def _next_node(self) -> None:
        if len(self.addresses) == 1:
            return
        before = self.current_url
        self._index = (self._index + 1) % len(self.addresses)
        self.failovers += 1
        log.info("%s: %s failed; trying %s", self.client_id, before, self.current_url)

    # --- publishing -------------------------------------------------------------------

    def publish(
        self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False, wait: float = 0.0
    ) -> bool:
        """Queue one message for sending; False (and counted) when it cannot be sent now.

        Never publishes into a closed connection: paho would queue it without bound.
        Sizes are checked against the broker's limit, because an oversize QoS 1 publish
        makes the broker disconnect us and paho resend it forever.
        """
        if len(payload) + len(topic) + 64 > self.max_packet_size:
            raise ValueError(
                f"payload of {len(payload)} bytes exceeds max_packet_size {self.max_packet_size}"
            )
        if not self._connected.is_set():
            self.publish_failures += 1
            return False
        with self._guard:  # owner_io: written at once, on this thread
            info = self._client.publish(topic, payload, qos=qos, retain=retain)
            if qos > 0:
                self._last_qos1 = info
        if info.rc != mqtt.MQTT_ERR_SUCCESS:
            if qos > 0 and info.rc in KEPT_BY_PAHO:
                # A QoS 1 message whose write found the connection gone (owner_io: the
                # owner's poll has not seen it close yet). paho keeps it and sends it after
                # the reconnect, as any message in flight: it is sent, and a caller that
                # kept it too (a spool) would count it dropped when it arrives after all.
                return wait <= 0
            self.publish_failures += 1
            return False
        if wait > 0 and self.owner_io:  # its PUBACK is read by a poll
            deadline = time.monotonic() + wait
            while not info.is_published() and (left := deadline - time.monotonic()) > 0:
                if not self._connected.is_set():
                    return False
                self.poll(min(left, 0.05))
            return info.is_published()
        if wait > 0:
            try:
                info.wait_for_publish(wait)
            except (RuntimeError, ValueError):
                return False
            return info.is_published()
        return True

    # --- paho callbacks (network thread) ------------------------------------------------

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        try:
            if reason_code.is_failure:
                self.refusals += 1
                self._refused = True
                who = f"user {self.auth.username!r}" if self.auth.username else "anonymous"
                self.last_failure = f"refused the login ({reason_code}, {who})"
                if self.refusals == 1:
                    log.warning(
                        "%s: broker %s refused the connection (%s, %s); retrying",
                        self.client_id,
                        self.current_url,
                        reason_code,
                        who,
                    )
                return
            self.connects += 1
            self._was_up = True
            if len(self.addresses) > 1:
                log.info("%s: connected to %s", self.client_id, self.current_url)
            # Subscribing here means a reconnect re-subscribes.
            for topic, qos in self._subscriptions:
                self._subscribe(topic, qos)
            self._connected.set()
            if self._after_connect is not None:
                self._after_connect()
        except Exception:  # noqa: BLE001 - must not kill paho's thread
            self.callback_errors += 1
            log.exception("%s: error in on_connect", self.client_id)

    def _subscribe(self, topic: str, qos: int) -> None:
        with self._guard:  # owner_io: a retry comes from a timer's thread
            rc, mid = self._client.subscribe(topic, qos=qos)
        if rc == mqtt.MQTT_ERR_SUCCESS:
            with self._subs_lock:
                self._pending_subs[mid] = (topic, qos)

    def _on_subscribe(self, client, userdata, mid, reason_codes, properties) -> None:
        """A refused subscription is tried again, with back-off, while connected: a node of a
        clustered broker refuses one while its replicated state is being re-elected (the
        subscription would otherwise be missing until the next reconnect). ``$`` topics are
        a broker's own extras ($SYS), not on every broker: a refusal there is final."""
        with self._subs_lock:
            sub = self._pending_subs.pop(mid, None)
            if sub is None:
                return
            topic, qos = sub
            if not any(rc.is_failure for rc in reason_codes):
                self._sub_attempts.pop(topic, None)
                return
            if topic.startswith("$"):
                return
            attempt = self._sub_attempts[topic] = self._sub_attempts.get(topic, 0) + 1
            self.subscribe_failures += 1
            first = self.subscribe_failures == 1
        if first:
            log.warning(
                "%s: %s refused the subscription to %s; retrying",
                self.client_id,
                self.current_url,
                topic,
            )
        retry = threading.Timer(self.backoff.delay(attempt - 1), self._resubscribe, (topic, qos))
        retry.daemon = True
        retry.start()

    def _on_unsubscribe(self, client, userdata, mid, reason_codes, properties) -> None:
        if mid == self._unsub_mid:
            self._unsubscribed.set()

    def _resubscribe(self, topic: str, qos: int) -> None:
        if self._connected.is_set() and not self._stopping.is_set():
            self._subscribe(topic, qos)

    def _attempt_failed(self) -> None:
        """No CONNACK: unreachable, or the TLS handshake failed or was cut (TLS 1.3 refuses a
        client certificate after the handshake). Logged once; retried with back-off."""
        self.connect_failures += 1
        if self.connect_failures == 1:
            tls = ", or TLS failed (CA, client certificate, host name)" if self.tls else ""
            log.warning(
                "%s: cannot connect to %s: unreachable%s; retrying",
                self.client_id,
                self.current_url,
                tls,
            )

    def _on_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        was_connected = self._connected.is_set()
        self._connected.clear()
        self._ended.set()
        if self._net is not None:
            self._net_retry(self._was_up)
        if reason_code == 0:
            return
        if was_connected:
            log.warning(
                "%s: disconnected from %s (%s); reconnecting",
                self.client_id,
                self.current_url,
                reason_code,
            )
        elif self._refused:  # logged in _on_connect
            log.debug("%s: closed after a refusal (%s)", self.client_id, reason_code)
        else:  # closed before any CONNACK
            self.last_failure = (
                "the connection closed before an MQTT answer (no MQTT broker there, or it "
                "refused the TLS handshake)"
            )
            self._attempt_failed()
        self._refused = False

    def _on_message(self, client, userdata, message) -> None:
        try:
            if self._handler is not None:
                self._handler(message.topic, message.payload)
        except Exception:  # noqa: BLE001 - must not kill paho's thread
            self.callback_errors += 1
            if self.callback_errors == 1:
                log.exception("%s: error handling a message on %s", self.client_id, message.topic)


def connect_error(e: OSError) -> str:
    """One line for an ``OSError`` of a connect: what failed, in words."""
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"TLS: the broker's certificate was not accepted ({e.verify_message or e})"
    if isinstance(e, ssl.SSLError):
        return f"TLS handshake failed ({e.reason or e})"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused: nothing listens on that port"
    if isinstance(e, TimeoutError):
        return "no answer (timed out)"
    if isinstance(e, socket.gaierror):
        return f"the host name does not resolve ({e.strerror or e})"
    return f"{e.strerror or e}"


def until(done: Callable[[], bool], deadline: float, poll: Callable[[float], None] | None) -> None:
    """Wait until ``done()`` or the monotonic ``deadline``; ``poll``: the owner_io transport's,
    which reads the socket meanwhile (paho's own thread does otherwise)."""
    while not done() and (left := deadline - time.monotonic()) > 0:
        if poll is not None:
            poll(min(left, 0.02))
        else:
            time.sleep(min(left, 0.01))


def apply_auth(client: mqtt.Client, auth: BrokerAuth, tls: bool) -> None:
    """TLS context and username/password on a paho client; ``AuthError`` when unusable."""
    auth.check_files()
    if tls:
        try:
            context = ssl.create_default_context(cafile=auth.ca_file)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            if auth.cert_file is not None:
                context.load_cert_chain(auth.cert_file, auth.key_file)
        except (ssl.SSLError, OSError) as e:
            files = ", ".join(f for f in (auth.ca_file, auth.cert_file, auth.key_file) if f)
            raise AuthError(f"cannot load the TLS files ({files or 'system CAs'}): {e}") from None
        client.tls_set_context(context)
    if auth.username is not None:
        client.username_pw_set(auth.username, auth.password())


def mqtt_connect(url: str, auth: BrokerAuth | None = None, net: NetLoop | None = None) -> Connect:
    """The ``Connect`` (transport/base.py) for the broker at ``url``, with ``auth`` if given;
    with ``net``, its connections are served by that network loop (netloop.py)."""
    return functools.partial(MqttTransport, url, auth=auth, net=net)
