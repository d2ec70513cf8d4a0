"""The fleet's clocks: the status interval the learner states in its control, and how long
a board may be silent before the learner concludes anything from it.

    status_interval(boards, fleet.max_statuses_per_s)   # the interval every board is asked for
    quiet = Quiet(credit_timeout_s)
    quiet.stated = interval        # a control that states a new interval went out
    quiet.heard_since = now        # the learner (re)connected, or hears nothing now
    quiet.bound_s()                # credit_timeout_s, at least two stated intervals
    quiet.silent(since, now)       # silent for the bound, timed from ``heard_since`` at most

Pure bookkeeping: FleetControl calls it under its lock, with its clock's ``now``.
"""

from __future__ import annotations

import math

from edge_rl.wire.messages import MAX_STATUS_INTERVAL_S

# Below this interval the boards' own (at least 0.05 s, docs/protocol.md §5) keeps the bound.
MIN_STATED_INTERVAL_S = 0.05
STATUS_INTERVAL_STEP_S = 0.25  # stated intervals are whole steps: the control rarely changes
# Timeouts that read statuses (idle credit, written-off transitions, an id's silence) last at
# least this many stated status intervals: one status late or lost is not silence.
QUIET_INTERVALS = 2
# The least time the learner waits for one more board to report a control's new state (a
# board reports one at once); state_wait_s adds stated status intervals to it. While boards
# keep coming over it waits on, at most this many times that in all.
STATE_WAIT_S = 5.0
STATE_WAIT_ROUNDS = 4


def status_interval(boards: int, max_statuses_per_s: float) -> float:
    """The status interval the learner asks of every board so that ``boards`` of them send
    at most ``max_statuses_per_s`` periodic statuses a second in all: boards / rate, rounded
    up to a 0.25 s step (at most an hour); 0 (each board's own) while that is at most 0.05 s
    or there is no bound."""
    if max_statuses_per_s <= 0:
        return 0.0
    need = boards / max_statuses_per_s
    if need <= MIN_STATED_INTERVAL_S:
        return 0.0
    steps = math.ceil(need / STATUS_INTERVAL_STEP_S - 1e-9)
    return min(MAX_STATUS_INTERVAL_S, steps * STATUS_INTERVAL_STEP_S)


class Quiet:
    """When a silence says something of a board. ``stated``: the status interval stated in
    the last control (0 before the first, or while each board keeps its own).
    ``heard_since``: the learner's last (re)connect, or the last round it could not hear:
    away from the broker it heard no status and no batch, and that gap says nothing of a
    board, so silence is timed from there at the earliest."""

    def __init__(self, credit_timeout_s: float) -> None:
        self.credit_timeout_s = credit_timeout_s
        self.stated = 0.0
        self.heard_since = 0.0

    def bound_s(self) -> float:
        """How long an actor may be silent before the learner concludes anything from it
        (credit idle, transitions written off): ``credit_timeout_s``, and at least
        ``QUIET_INTERVALS`` of the stated status interval: a board reports its steps only
        that often, so a shorter bound judged every board stalled."""
        return max(self.credit_timeout_s, QUIET_INTERVALS * self.stated)

    def silent(self, since: float, now: float) -> bool:
        """Whether nothing was heard from ``since`` (or the learner's ``heard_since``, if
        later) to ``now`` for ``bound_s``."""
        return now - max(since, self.heard_since) >= self.bound_s()

    def state_wait_s(self) -> float:
        """How long the learner waits for one more board to report a new control state:
        ``STATE_WAIT_S`` for the report a board sends at once, plus ``QUIET_INTERVALS`` of
        the stated status interval. A board that misses the report at once sends its next
        periodic status within one stated interval, and the fleet's statuses reach the
        learner at about ``fleet.max_statuses_per_s``, so a whole fleet reporting at once
        takes one interval (5 s at 1,000 boards). Simulated boards on a loaded host take
        longer still, coming over one by one (at 1,000 boards on 2 cores, 14 s to over
        25 s: docs/scale.md), hence ``FleetControl.wait_for_state`` waits on while they do."""
        return STATE_WAIT_S + QUIET_INTERVALS * self.stated
