"""The live terminal view of ``edge-rl learn``: run progress and one row per actor."""

from __future__ import annotations

import logging
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from edge_rl.types import ACTOR_LOOP_BUCKETS, ActorStatus

log = logging.getLogger(__name__)


class LiveView:
    """Redraws in place on a terminal; elsewhere (CI, files) logs a line every few seconds."""

    def __init__(self, total_env_steps: int, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.interactive = self.console.is_terminal
        self._progress = Progress(
            TextColumn("env steps"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
        )
        self._task = self._progress.add_task("env steps", total=total_env_steps)
        self._live: Live | None = None
        self._last_line = 0.0

    def __enter__(self) -> LiveView:
        if self.interactive:
            self._live = Live(console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def update(self, row: dict[str, Any], actors: dict[str, ActorStatus]) -> None:
        self._progress.update(self._task, completed=row["env_steps"])
        if self._live is not None:
            self._live.update(Group(self._progress, _stats(row), _actors(actors)))
        elif time.monotonic() - self._last_line >= 5.0:
            self._last_line = time.monotonic()
            log.info(
                "env_steps=%d episodes=%d return=%s updates=%d (%.0f/s) policy=v%d actors=%d",
                row["env_steps"],
                row["episodes"],
                _fmt(row["recent_return"]),
                row["updates"],
                row["updates_per_s"],
                row["policy_version"],
                row["actors_online"],
            )


def _fmt(x: float | None) -> str:
    return "-" if x is None or x != x else f"{x:.1f}"


def _stats(row: dict[str, Any]) -> Table:
    t = Table(show_header=True, header_style="bold", box=None)
    cols = [
        ("episodes", "episodes"),
        ("recent return", "recent_return"),
        ("updates", "updates"),
        ("updates/s", "updates_per_s"),
        ("policy", "policy_version"),
        ("actors online", "actors_online"),
        ("rejected", "transitions_rejected"),
        ("duplicate", "transitions_duplicate"),
        ("fleet", "fleet_state"),
    ]
    for title, _ in cols:
        t.add_column(title, justify="right")
    t.add_row(*[_fmt(row[k]) if isinstance(row[k], float) else str(row[k]) for _, k in cols])
    return t


def _actors(actors: dict[str, ActorStatus]) -> Table:
    t = Table(title="actors", box=None, header_style="bold")
    for c in ("id", "state", "board", "policy", "env steps", "steps/s", "recent return", _SHARES):
        t.add_column(c, justify="right")
    for a in sorted(actors.values(), key=lambda s: s.actor_id):
        t.add_row(
            a.actor_id,
            a.state,
            a.board,
            f"v{a.policy_version}",
            str(a.env_steps),
            f"{a.env_steps_per_s:.0f}",
            _fmt(a.recent_return),
            _shares(a.breakdown),
        )
    return t


# The loop's runtime breakdown as % of its wall time (docs/protocol.md §5.1).
_SHARES = "% env/inf/expl/pub/emu/idle"


def _shares(breakdown: dict[str, float]) -> str:
    wall = breakdown.get("wall", 0.0)
    if wall <= 0:
        return "-"
    return "/".join(f"{100 * breakdown.get(k, 0.0) / wall:.0f}" for k in ACTOR_LOOP_BUCKETS)
