"""Env-step credit: how far each actor may run ahead of what the learner has trained on.

    ledger = CreditLedger()
    credits = ledger.grant(allowed, received_total, by_actor, known_actors, lost)
    # -> {actor_id: env-step count (since the actor's process start) it may step up to}

Credit, once granted, cannot be taken back (an actor may already have used it), so a
grant only ever grows. What is neither received nor outstanding is shared evenly among the
known actors (a remainder to those granted least). Outstanding credit is what an actor was
granted and has not delivered, less what is known to be ``lost`` on the way (dropped by the
actor's full spool or size limit, or sent and never received: write_off.py decides):
lost credit goes back to the pool, so a lost batch can no longer stall a run. The ingest
side caps the budget itself (a written-off batch that arrives after all is not counted
twice). No TensorFlow, no I/O: a pure ledger.

``Grants`` is what was granted, as published: the record ingest and the status check bound
an actor's data and claims by.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path


class CreditLedger:
    def __init__(self) -> None:
        self.granted: dict[str, int] = {}  # actor id -> env steps it may take in all
        self._received_from: dict[str, int] = {}  # actor id -> transitions counted so far
        self.withheld = 0  # the most steps held back at once for want of delivery (``trust`` < 1)

    def grant(
        self,
        allowed: int,
        received: int,
        by_actor: Mapping[str, int],
        known: Sequence[str],
        lost: Mapping[str, int] | None = None,
        frozen: Collection[str] = (),
        stepped: Mapping[str, int] | None = None,
        max_outstanding: int | None = None,
        min_share: int = 1,
        trust: Mapping[str, float] | None = None,
    ) -> dict[str, int]:
        """Credits for ``known`` actors, given ``received`` transitions of ``allowed``.

        ``by_actor`` counts what each actor's current process delivered; a count that goes
        down means the actor restarted (new session), and its grant restarts from there.
        ``lost``: of each actor's current process, transitions that will never arrive.
        ``frozen``: known actors whose grant does not grow (it still counts as outstanding).
        ``stepped``: each actor's env steps, by its status: it was granted at least that much,
        if by an earlier learner (one resumed from a checkpoint: its grants below what the
        actors had stepped freed no step, and its run stalled).
        ``max_outstanding``: what one actor may hold granted and not delivered (None: all
        that is available). Credit cannot be taken back: without a cap, a board that never
        delivers takes a share of every grant until it holds the whole lead (it is frozen
        only after credit_timeout_s), and no one else is granted again.
        ``min_share``: the fewest steps one actor is granted at a time while there is less
        than that for every actor; the rest waits for the next call (pass 1 once ``allowed``
        is the whole budget, so that the last steps are granted).
        ``trust``: each actor's share of ``max_outstanding``, in [0, 1] (write_off.py's
        ``delivery``: a board that claims steps it never delivers holds less); what it
        withholds stays in the pool for the others; ``withheld`` is the most held back in
        one call (a sum over calls would count the same steps every round).
        """
        lost, stepped, trust = lost or {}, stepped or {}, trust or {}
        known = sorted(known)
        for a in known:
            got = by_actor.get(a, 0)
            if got < self._received_from.get(a, 0):
                self.granted[a] = got
            self._received_from[a] = got
            self.granted[a] = max(self.granted.get(a, 0), got, stepped.get(a, 0))
        outstanding = sum(
            max(0, self.granted[a] - by_actor.get(a, 0) - lost.get(a, 0)) for a in known
        )
        available = allowed - received - outstanding
        growing = [a for a in known if a not in frozen]
        if available > 0 and growing:
            withheld = 0
            for a, more in self._shares(available, growing, min_share).items():
                if max_outstanding is not None:
                    held = max(0, self.granted[a] - by_actor.get(a, 0) - lost.get(a, 0))
                    # Rounded up: near the budget a board may hold 1 step, and 1 x 0.97
                    # floored to 0 withheld the run's last steps for ever.
                    cap = math.ceil(max_outstanding * trust.get(a, 1.0))
                    capped = max(0, min(more, cap - held))
                    withheld += max(0, min(more, max_outstanding - held)) - capped
                    more = capped
                self.granted[a] += more
            self.withheld = max(self.withheld, withheld)
        return {a: self.granted[a] for a in known}

    def _shares(self, available: int, growing: list[str], min_share: int) -> dict[str, int]:
        """How ``available`` steps are split among ``growing`` actors. Evenly, the remainder
        to the actors granted least so far (giving it to the first in name order starved
        the others when a slow learner freed 1-2 steps per grant: sim-00 and sim-01 took
        every one). While the even share is below ``min_share``, ``min_share`` each to as
        many of those granted least as it covers: an actor closes its batch when its
        credit runs out, so a share of 4 steps was a message of 4 transitions."""
        by_least = sorted(growing, key=lambda a: (self.granted[a], a))
        if available < min_share * len(growing):
            return {a: min_share for a in by_least[: available // min_share]}
        share, extra = divmod(available, len(growing))
        return {a: share + (i < extra) for i, a in enumerate(by_least)}


class Grants:
    """What the learner granted each actor id: the session it was granted to, and the env
    steps that session may take. The bound on what ingest takes from an actor, and on what a
    status may claim. Fleet control writes a grant here before it publishes it (main
    thread); ingest and the status check read it (their threads): every access holds a lock.

        grants = Grants(run_dir / "grants.json", run_id, reserve=125)
        grants.set("pi-01", session, 900)     # before the grant is published
        grants.of("pi-01")                    # (session, 900), or None: never granted

    With a ``path``, the grants outlive the process: ``path`` holds, per actor, a ceiling at
    least every grant published, rewritten (atomically) only when a grant passes it, to that
    grant plus ``reserve``. A learner resumed with the same run id loads the ceilings
    (``load``): what was granted before still bounds the data, past its checkpoint too, and
    a status can claim at most ``reserve`` steps more than the actor was really granted.
    """

    def __init__(self, path: Path | None = None, run_id: str = "", reserve: int = 0) -> None:
        self.path = path
        self.run_id = run_id
        self.reserve = reserve
        self._lock = threading.Lock()
        self._grants: dict[str, tuple[int, int]] = {}  # actor id -> (session, credit)
        self._ceilings: dict[str, tuple[int, int]] = {}  # ... as written to ``path``
        self.writes = 0

    def set(self, actor: str, session: int, credit: int) -> None:
        with self._lock:
            self._grants[actor] = (session, credit)
            if self.path is None:
                return
            ceiling = self._ceilings.get(actor)
            if ceiling is not None and ceiling[0] == session and credit <= ceiling[1]:
                return
            self._ceilings[actor] = (session, credit + self.reserve)
            self._write()

    def of(self, actor: str) -> tuple[int, int] | None:
        """``(session, credit)`` of ``actor``'s grant, or None if it was never granted."""
        with self._lock:
            return self._grants.get(actor)

    def bound(self, actor: str, session: int) -> int:
        """The env steps ``actor``'s process ``session`` may have taken: 0 if not granted."""
        grant = self.of(actor)
        return grant[1] if grant is not None and grant[0] == session else 0

    def load(self) -> int:
        """The ceilings a learner of this run id wrote before, as grants; how many."""
        if self.path is None or not self.path.exists():
            return 0
        try:
            saved = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return 0
        if not isinstance(saved, dict) or saved.get("run_id") != self.run_id:
            return 0
        grants = saved.get("grants")
        loaded = {
            a: (g[0], g[1])
            for a, g in (grants.items() if isinstance(grants, dict) else ())
            if isinstance(g, list) and len(g) == 2 and _count(g[0]) and _count(g[1])
        }
        with self._lock:
            self._grants.update(loaded)
            self._ceilings.update(loaded)
        return len(loaded)

    def _write(self) -> None:  # holds _lock
        assert self.path is not None
        data = {"run_id": self.run_id, "grants": {a: list(g) for a, g in self._ceilings.items()}}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.path)
        self.writes += 1


def _count(v: object) -> bool:
    return type(v) is int and 0 <= v < 2**53
