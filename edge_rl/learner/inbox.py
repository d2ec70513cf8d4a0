"""The learner's inbox: transition payloads from the transport's thread to the ingest thread.

    inbox = Inbox(ingest, maxsize, clock, on_accepted=check_budget)
    inbox.offer(topic, payload)   # transport thread: never blocks, never works
    inbox.start() ... inbox.stop(timeout=10)   # drains what is queued, then the thread ends

Mosquitto drops messages past its per-client queue without telling the publisher, so the
transport's thread must only hand bytes over; decoding, validation and replay happen on
the ingest thread (``Ingest.handle`` never raises). A full queue drops the payload and
counts it (and tells ingest, whose lost transitions fleet control writes off at once); the
actor's sequence gap shows it too.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from edge_rl.learner.ingest.ingest import Ingest
from edge_rl.telemetry.breakdown import LapClock

log = logging.getLogger(__name__)


class Inbox:
    def __init__(
        self,
        ingest: Ingest,
        maxsize: int,
        clock: LapClock,
        on_accepted: Callable[[], None] = lambda: None,
    ) -> None:
        self.ingest = ingest
        self._clock = clock
        self._on_accepted = on_accepted
        self._queue: queue.Queue[tuple[str, bytes]] = queue.Queue(maxsize)
        self.dropped = 0
        self.dropped_transitions = 0  # in those payloads, as their headers claim
        self.errors = 0  # payloads that raised past Ingest.handle (a bug: logged once)
        self._stop = threading.Event()
        # Held while a payload is ingested: ``with inbox.paused:`` sees replay and the
        # ingest counters agree (a checkpoint; the transport keeps queueing meanwhile).
        self.paused = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="ingest", daemon=True)

    def offer(self, topic: str, payload: bytes) -> None:
        try:
            self._queue.put_nowait((topic, payload))
        except queue.Full:
            self.dropped += 1
            self.dropped_transitions += self.ingest.learner_losses.dropped_unread(topic, payload)

    def empty(self) -> bool:
        return self._queue.empty()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        lap = self._clock.lap
        while not (self._stop.is_set() and self._queue.empty()):
            try:
                topic, payload = self._queue.get(timeout=0.05)
            except queue.Empty:
                continue
            lap("idle")
            try:
                with self.paused:
                    accepted = self.ingest.handle(topic, payload)
                if accepted:
                    self._on_accepted()
            except Exception:  # noqa: BLE001 - this thread must outlive any payload
                self.errors += 1
                if self.errors == 1:
                    log.exception("ingest failed on a payload from %s", topic)
            lap("ingest")
