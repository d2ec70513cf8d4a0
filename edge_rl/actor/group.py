"""Many boards in one process: each an ``ActorNode`` on a thread of its own.

    group = BoardGroup(board_cfg, [opts_a, opts_b, ...], connect_for=lambda o: mqtt_connect(...))
    group.run()         # until group.stop() (SIGTERM) or every board has ended

What each board keeps to itself is everything a board on its own has: its MQTT client
(session, client id, credentials, last will), its policy slot (every bundle decoded and
its signature verified by the board), its env, RNG, batcher and spool, its run control
and credit, its status. What the boards of one process share is only what is the same
for all of them and cannot be told apart: the imported modules, and one LiteRT
interpreter per verified model (``SharedModels``: keyed by the SHA-256 each board checked
itself). docs/fleet.md says why that is safe.

Threads: a board's loop and its policy slot, two per board. The boards' MQTT connections
are not a board's own threads: ``edge-rl actors`` hands the group a ``connect_for`` whose
transports share the process's one network loop (transport/netloop.py), which serves every
socket from one thread and connects them from another. A board waiting for credit or a
control sleeps on its run control's news (a grant, a control, a stop wakes it), never on
its socket.
Boards start ``start_spread_s`` apart at most (uniformly at random): a group of a thousand
boards does not knock on the broker with a thousand CONNECTs in one instant.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Sequence

from edge_rl.actor.node import ActorNode, ActorOptions
from edge_rl.actor.shared_models import SharedModels
from edge_rl.boards import BoardConfig
from edge_rl.transport.base import Connect

log = logging.getLogger(__name__)


class BoardGroup:
    def __init__(
        self,
        board: BoardConfig,
        boards: Sequence[ActorOptions],
        connect_for: Callable[[ActorOptions], Connect],
        *,
        share_models: bool = True,
        start_spread_s: float = 0.0,
        seed: int | None = None,
    ) -> None:
        if not boards:
            raise ValueError("a board group needs at least one board")
        self.models = SharedModels() if share_models else None
        self.nodes = [ActorNode(board, o, connect_for(o), models=self.models) for o in boards]
        rng = random.Random(seed)
        self.start_delays = [rng.uniform(0.0, start_spread_s) for _ in boards]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def run(self) -> None:
        """Start every board (each after its start delay) and wait until all have ended."""
        for node, delay in zip(self.nodes, self.start_delays, strict=True):
            t = threading.Thread(
                target=self._board, args=(node, delay), name=f"board-{node.opts.actor_id}"
            )
            t.start()
            self._threads.append(t)
        log.info("board group: %d boards started", len(self.nodes))
        self.join()

    def join(self) -> None:
        for t in self._threads:
            t.join()

    def _board(self, node: ActorNode, delay: float) -> None:
        if self._stop.wait(delay):
            return  # stopped before this board's turn: it never connected
        try:
            node.run()
        except Exception:  # one board's crash is its own: the others go on
            log.exception("board %s crashed", node.opts.actor_id)

    def stop(self) -> None:
        """Every board flushes, says ``stopped`` and disconnects (any thread; signal-safe)."""
        self._stop.set()
        for node in self.nodes:
            node.stop()

    def states(self) -> dict[str, str]:
        """Each board's run-control state (``refused``: another process has its id)."""
        return {n.opts.actor_id: n.rc.state for n in self.nodes}

    def alive(self) -> int:
        return sum(t.is_alive() for t in self._threads)
