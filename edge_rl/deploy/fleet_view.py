"""One view of a run and its fleet (``edge-rl fleet-status``): the run's state, its boards
by state, which policies they serve (version and digest, with how many boards), one line
per board, and the run's last deployments with their outcome (deploy/history.py).

    view = FleetView.of(run, control, watch.statuses(), last(history_file(run_dir), 5))
    print("\\n".join(view.lines(time.time())))   # or view.as_dict(time.time()) for --json

Built from what the broker holds (the retained control and statuses) and the run's
deployment history; it knows no MQTT and no clock of its own.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from edge_rl.deploy.history import DeployRecord
from edge_rl.types import ActorStatus, ControlMessage


@dataclass(frozen=True)
class FleetView:
    run: str
    control: ControlMessage | None
    boards: tuple[ActorStatus, ...]  # sorted by id
    deployments: tuple[DeployRecord, ...]  # oldest first

    @classmethod
    def of(
        cls,
        run: str,
        control: ControlMessage | None,
        statuses: Mapping[str, tuple[ActorStatus, float]],
        deployments: list[DeployRecord],
    ) -> FleetView:
        boards = tuple(statuses[a][0] for a in sorted(statuses))
        return cls(run, control, boards, tuple(deployments))

    def by_state(self) -> dict[str, int]:
        """Boards per state, most first (ties by name)."""
        counts = Counter(b.state for b in self.boards)
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def served(self) -> list[tuple[int, str, int]]:
        """(version, digest, boards) of every policy some board serves or holds, newest
        version first; a board with none is left out."""
        counts = Counter(
            (b.policy_version, b.policy_digest) for b in self.boards if b.policy_digest
        )
        return [(v, d, n) for (v, d), n in sorted(counts.items(), key=lambda kv: -kv[0][0])]

    def lines(self, now: float) -> list[str]:
        if self.control is None:
            state = "none (no retained control)"
        else:
            state = f"{self.control.state} (start {self.control.run_id})"
        states = ", ".join(f"{n} {s}" for s, n in self.by_state().items())
        out = [
            f"run {self.run!r}: {state}; {len(self.boards)} boards" + (f": {states}" * bool(states))
        ]
        out.append(
            f"{'id':<20} {'state':<9} {'policy':>7} {'digest':<12} {'return':>9} {'seen':>8}"
        )
        for s in self.boards:
            ret = "-" if s.recent_return is None else f"{s.recent_return:.1f}"
            seen = f"{max(0.0, now - s.time_unix):.0f}s ago" if s.time_unix else "-"
            digest, version = s.policy_digest[:12] or "-", s.policy_version
            out.append(
                f"{s.actor_id:<20} {s.state:<9} {version:>7} {digest:<12} {ret:>9} {seen:>8}"
            )
        served = self.served()
        if served:
            out.append("")
            out.append("served: " + "; ".join(f"v{v} {d[:12]} on {n} boards" for v, d, n in served))
        if self.deployments:
            out.append("")
            out.append(f"last {len(self.deployments)} deployments:")
            for r in self.deployments:
                out.append("  " + _deployment_line(r))
        return out

    def as_dict(self, now: float) -> dict:
        return {
            "run": self.run,
            "control": None if self.control is None else dataclasses.asdict(self.control),
            "by_state": self.by_state(),
            "served": [{"version": v, "digest": d, "boards": n} for v, d, n in self.served()],
            "boards": [
                {
                    "id": s.actor_id,
                    "state": s.state,
                    "policy_version": s.policy_version,
                    "policy_digest": s.policy_digest,
                    "recent_return": s.recent_return,
                    "seen_s_ago": round(max(0.0, now - s.time_unix), 1) if s.time_unix else None,
                }
                for s in self.boards
            ],
            "deployments": [dataclasses.asdict(r) for r in self.deployments],
        }


def _deployment_line(r: DeployRecord) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.time_unix))
    what = f"v{r.version} {r.digest[:12]}" if r.version else "-"
    canaries = ", ".join(r.canaries) or "-"
    return (
        f"{when} {r.id} {what} {r.outcome}: {r.reason}; canaries {canaries}; "
        f"source {r.source_sha256[:12] or '-'}"
    )
