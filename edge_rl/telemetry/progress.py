"""The live terminal view of ``edge-rl learn`` (run progress, one row per actor), the
terminal it owns, and the short result the run ends with."""

from __future__ import annotations

import logging
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from edge_rl.telemetry.carbon import cpu_method_text, not_codecarbon
from edge_rl.types import ACTOR_LOOP_BUCKETS, ActorStatus

log = logging.getLogger(__name__)


def claim_terminal(log_path: Path) -> bool:
    """Keep the terminal for the live view: when stderr is a terminal, file descriptor 2
    becomes ``log_path`` (appended) for the rest of the process, and ``sys.stderr`` a
    stream on a duplicate of the terminal. Returns whether stderr was a terminal.

    Native code writes to fd 2 past Python: TensorFlow's start-up lines (absl, ``cuInit``),
    LiteRT's "Created TensorFlow Lite XNNPACK delegate" at every evaluation. A line the live
    display does not know of moves the cursor and leaves its last frame behind (the view
    stacks); these go to the log. Python's own writes (tracebacks, click's errors, logging)
    still reach the terminal through ``sys.stderr``, which rich's ``Live`` redirects above
    the view while it is up.
    """
    try:  # not under click's CliRunner or a test's captured stderr
        if sys.stderr.fileno() != 2 or not os.isatty(2):
            return False
    except (AttributeError, OSError, ValueError):
        return False
    sys.stderr.flush()
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    terminal = os.fdopen(os.dup(2), "w", buffering=1, encoding=encoding, errors="replace")
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    sys.stderr = terminal
    return True


class CurrentStderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record comes: while rich's ``Live`` is up,
    its proxy, which prints the line above the view instead of over it. (A plain
    ``StreamHandler(sys.stderr)`` keeps the stream it was made with and writes past it.)

    codecarbon's records never reach it: its warnings say how it estimates power (an unknown
    CPU model, no RAPL files, a TDP fallback) on every run of such a host; they stay in the
    log file, and ``result_lines`` states the method once."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.addFilter(not_codecarbon)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


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

    def update(
        self,
        row: dict[str, Any],
        actors: dict[str, ActorStatus],
        greedy: tuple[int, float] | None = None,
    ) -> None:
        """``row``: the meter's; ``greedy``: the newest scored policy's version and greedy
        return, shown beside the fleet's (exploring) return."""
        self._progress.update(self._task, completed=row["env_steps"])
        scored = "-" if greedy is None else f"{greedy[1]:.1f} (v{greedy[0]})"
        if self._live is not None:
            stats = _stats(row, scored)
            self._live.update(Group(self._progress, stats, _actors(actors, row["fleet_state"])))
        elif time.monotonic() - self._last_line >= 5.0:
            self._last_line = time.monotonic()
            log.info(
                "env_steps=%d episodes=%d return=%s greedy=%s updates=%d (%.0f/s) policy=v%d "
                "actors=%d",
                row["env_steps"],
                row["episodes"],
                _fmt(row["recent_return"]),
                scored,
                row["updates"],
                row["updates_per_s"],
                row["policy_version"],
                row["actors_online"],
            )


def _fmt(x: float | None) -> str:
    return "-" if x is None or x != x else f"{x:.1f}"


def _stats(row: dict[str, Any], scored: str) -> Table:
    """The run's figures: ``recent return`` is the fleet's, exploring (epsilon-greedy or
    with action noise); ``greedy`` is the newest scored policy's, as it would be deployed."""
    t = Table(show_header=True, header_style="bold", box=None)
    row = row | {"greedy": scored}
    cols = [
        ("episodes", "episodes"),
        ("recent return", "recent_return"),
        ("greedy", "greedy"),
        ("updates", "updates"),
        ("updates/s", "updates_per_s"),
        ("policy", "policy_version"),
        ("actors online", "actors_online"),
        ("rejected", "transitions_rejected"),
        ("duplicate", "transitions_duplicate"),
        ("fleet", "fleet_state"),
        ("quarantined", "quarantined"),
        ("exports failed", "exports_failed"),
    ]
    for title, _ in cols:
        t.add_column(title, justify="right")
    values = [row.get(k, "-") for _, k in cols]
    t.add_row(*[_fmt(v) if isinstance(v, float) else str(v) for v in values])
    return t


def _actors(actors: dict[str, ActorStatus], fleet_state: str) -> Table:
    """One row per actor. While the fleet runs, a board that has used its credit for the
    moment says ``paused`` until its next grant (a second or less): it is shown running,
    so the view does not flicker; a pause of the run itself shows as the fleet's."""
    t = Table(title="actors", box=None, header_style="bold")
    columns = ("id", "state", "board", "policy", "env steps", "steps/s", "recent return")
    for c in (*columns, "intervened", "safety", _SHARES):
        t.add_column(c, justify="right")
    for a in sorted(actors.values(), key=lambda s: s.actor_id):
        state = "running" if fleet_state == "running" and a.state == "paused" else a.state
        t.add_row(
            a.actor_id,
            state,
            a.board,
            f"v{a.policy_version}",
            str(a.env_steps),
            f"{a.env_steps_per_s:.0f}",
            _fmt(a.recent_return),
            f"{a.interventions / a.env_steps:.0%}" if a.interventions and a.env_steps else "-",
            _safety(a),
            _shares(a.breakdown),
        )
    return t


def _safety(a: ActorStatus) -> str:
    """The shield's counts, by reason (docs/protocol.md §5.6), and why the board is safe."""
    counts = " ".join(f"{k} {n}" for k, n in sorted(a.safety.items()))
    why = f"[{a.safe_reason}] " if a.safe_reason else ""
    return (why + counts) or "-"


# The loop's runtime breakdown as % of its wall time (docs/protocol.md §5.1).
_SHARES = "% env/inf/expl/pub/emu/idle"


def _shares(breakdown: dict[str, float]) -> str:
    wall = breakdown.get("wall", 0.0)
    if wall <= 0:
        return "-"
    return "/".join(f"{100 * breakdown.get(k, 0.0) / wall:.0f}" for k in ACTOR_LOOP_BUCKETS)


def result_lines(
    summary: dict[str, Any], run_dir: Path, total_s: float | None = None, prog: str = "edge-rl"
) -> list[str]:
    """What ``edge-rl learn`` prints at the end: the result and the commands to go on with,
    each run with ``prog`` (how this ``edge-rl`` was run: ``cli.common.runnable_prog``).
    ``total_s``: the command's wall time, start-up included (the summary's ``wall_s`` is the
    training loop's)."""
    run = shlex.quote(str(run_dir))
    env = shlex.quote(str(summary["env_id"]))
    ret, std = summary.get("final_eval_return"), summary.get("final_eval_return_std")
    if ret is None and summary.get("final_eval_skipped"):
        result = "final return: not evaluated (interrupted after the budget; see next:)"
    elif ret is None:
        result = "final return: not evaluated (no policy was deployed)"
    else:
        result = (
            f"final return {ret:.1f} ± {std or 0.0:.1f} ({summary['eval_episodes']} greedy "
            f"episodes, {summary.get('policy_precision', 'int8')} in LiteRT)"
        )
    wall = f"  wall time {_duration(summary['wall_s'])} training"
    lines = [
        f"{summary['env_id']} {summary['algo']}: {result}",
        f"  env steps {summary['env_steps']:,}, updates {summary['updates']:,}, "
        f"policy v{summary['policy_version']}",
        wall if total_s is None else f"{wall}, {_duration(total_s)} in all",
        f"  run directory {run_dir} (summary.json, learner.log; TensorBoard: tb/)",
    ]
    energy = _energy_line(summary)
    if energy is not None:
        lines.append(energy)
    lines.append("next:")
    if summary.get("policy_version", 0) > 0:
        lines.append(f"  {prog} eval {run}/policy.tflite --env {env} --episodes 10")
    lines.append(f"  {prog} report {run}")
    return lines


def _energy_line(summary: dict[str, Any]) -> str | None:
    """How the learner host's energy was had (summary.json's ``energy.learner``), the
    figure itself left to summary.json; None for a summary without it."""
    learner = summary.get("energy", {}).get("learner", {})
    if "method" not in learner:
        return None
    if learner.get("kwh") is None:
        return "  learner energy: not measured (summary.json says why)"
    return f"  learner energy by codecarbon: CPU {cpu_method_text(learner.get('cpu_method'))}"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"
