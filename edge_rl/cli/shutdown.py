"""How a long-running board command (``edge-rl actor``, ``actors``) ends on SIGTERM, and
how a process the learner started ends when the learner is already gone.

    exit_if_orphaned()                # first thing: the learner died while this one started
    stop_on_sigterm(node.stop, BOARD_STOP_BOUND_S)  # SIGTERM: node.stop(), exit within 25 s

A Python signal handler runs on the main thread between two bytecodes, possibly while
that thread holds a lock the handler needs, or inside the handler itself: a second
SIGTERM arrives while the first one's handler holds an ``Event``'s lock (a learner killed
with ``kill -9`` sends its children's ``pdeathsig`` once for each of its threads as they
die). It then waits for itself, forever, and no later signal runs. So the handler here
does nothing; the signal's number reaches a thread of its own through
``signal.set_wakeup_fd`` (written by the interpreter's C handler, no lock), and that
thread calls ``stop``. From the first SIGTERM on, faulthandler's watchdog (a C thread,
without the GIL) ends the process after ``bound_s`` whatever holds it: every thread's
stack to stderr, exit status 1.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
from collections.abc import Callable

from edge_rl.broker.executables import PARENT_ENV

# How long a board command has from SIGTERM to its exit: its boards' own shutdown (a
# spool flush of 10 s at most, then 5 s for the ``stopped`` status: actor/node.py) fits,
# and the fleet's SIGKILL (sim/fleet.py's STOP_GRACE_S, 30 s) comes after it.
BOARD_STOP_BOUND_S = 25.0


def exit_if_orphaned() -> None:
    """Exit at once if the process that started this one (``PARENT_ENV``) is already gone.

    ``setpriv --pdeathsig`` (broker/executables.py) arms the signal just before it execs
    this program: a parent that died before that moment sends nothing, and this process
    has been re-parented already. Checked after the exec, it leaves no gap."""
    expected = os.environ.get(PARENT_ENV)
    if expected and expected.isdigit() and os.getppid() != int(expected):
        sys.exit(f"edge-rl: the process that started this one ({expected}) is gone; exiting")


def stop_on_sigterm(stop: Callable[[], None], bound_s: float) -> threading.Thread:
    """On SIGTERM, call ``stop`` on a thread of this module's, once, and end the process
    within ``bound_s`` seconds of it. Call it from the main thread (``signal`` requires it)
    once ``stop`` can run. Returns the thread that waits for the signal (a daemon)."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)  # the C handler must never block on a full pipe
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    # A Python-level handler must be installed for the C handler to write the number;
    # it does nothing itself, so it can neither block nor be re-entered halfway.
    signal.signal(signal.SIGTERM, _ignore)

    def wait_for_sigterm() -> None:
        while signal.SIGTERM not in os.read(read_fd, 64):  # other handled signals: skip
            pass
        faulthandler.dump_traceback_later(bound_s, exit=True)
        stop()

    thread = threading.Thread(target=wait_for_sigterm, name="sigterm", daemon=True)
    thread.start()
    return thread


def _ignore(signum: int, frame: object) -> None:
    """The Python-level SIGTERM handler: the work is on the ``sigterm`` thread."""
