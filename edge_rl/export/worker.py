"""One long-lived child process that runs TFLite conversions for this process.

The learner also has it do each version's export and parity outputs
(``edge_rl.export.remote``) and the scoring of candidate policies
(``runtime.evaluate.evaluate_kept``): work that would otherwise wait for the learner's GIL.

The converter is not a good neighbour: its C++ quantiser prints to file descriptor 2, the
Python side needs ``warnings`` filters and quiet loggers, and per-tensor int8 needs a private
converter flag. In a child process all of that is the child's own: nothing the conversion
does can reach another thread of the learner (its live view, the ingest thread's logs)::

    worker = default_worker()            # the process-wide one; started on its first call
    tflite = worker.call(convert, config, weights, obs, "int8", True)   # picklable in/out
    worker.warm_up(convert.warm_up)      # start it and import TensorFlow, in the background
    worker.pid                           # None until started, or after it died
    shutdown()                           # also registered with atexit

The child is ``python -m edge_rl.export.worker`` (a fresh interpreter: no fork of a threaded
learner, and unlike a ``multiprocessing`` spawn it does not re-import the caller's
``__main__``), started lazily and reused for every call; it imports TensorFlow once, on its
first conversion. Requests and replies are pickles on two pipes of its own. Errors come
back as exceptions on the caller's side: the function's own exception (the remote
traceback as ``__cause__``), ``WorkerDied`` when the child dies mid-call (a new one starts
on the next call), ``TimeoutError`` when a call outlives its bound (the child is killed).
The child exits when its request pipe closes, however the parent died (``kill -9``
included: the kernel closes the parent's end and the child's read sees EOF), and, in the
middle of a call, within half a second of its parent's death (it watches its parent PID).

This module imports only the standard library, so that the child's start-up is cheap.
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

# Generous bounds: they exist so that a wedged child cannot hang the learner, not to police
# speed. A first call includes the child's TensorFlow import (~5 s here, more under load).
START_TIMEOUT_S = 60.0  # the child's interpreter start and its "ready"
CALL_TIMEOUT_S = 300.0  # one call, the child's TensorFlow import included
_STOP_TIMEOUT_S = 5.0
_HEADER = struct.Struct("!Q")  # every message: its pickle's length, then the pickle
PIPE_BYTES = 1 << 20  # each pipe's buffer, where allowed (Linux's default maximum)
log = logging.getLogger(__name__)


class WorkerDied(RuntimeError):
    """The worker process exited (killed, crashed) before answering."""


class RemoteTraceback(Exception):
    """The traceback of an exception raised in the worker (set as ``__cause__``)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ExportWorker:
    """A lazily started child process that runs one call at a time (thread-safe)."""

    def __init__(
        self, start_timeout: float = START_TIMEOUT_S, call_timeout: float = CALL_TIMEOUT_S
    ) -> None:
        self.start_timeout = start_timeout
        self.call_timeout = call_timeout
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._requests = self._replies = -1  # our ends of the two pipes
        self.starts = 0  # child processes started so far (a restart counts)

    @property
    def pid(self) -> int | None:
        """The live child's PID, else None."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def start(self) -> None:
        """Start the child now (it is started on the first call otherwise)."""
        with self._lock:
            self._ensure_started()

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
        """``fn(*args)`` in the child; ``fn``, the arguments and the result must pickle
        (``fn`` by reference: a module-level function)."""
        message = pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            self._ensure_started()
            deadline = time.monotonic() + (self.call_timeout if timeout is None else timeout)
            pid = self._proc.pid if self._proc is not None else None
            try:
                _write(self._requests, message, deadline)
                answer = _read(self._replies, deadline)
            except TimeoutError:
                self._discard(kill=True)
                raise TimeoutError(f"export worker {pid} gave no answer in time (killed)") from None
            except (EOFError, OSError) as e:
                code = self._discard()
                raise WorkerDied(f"export worker {pid} died during the call (exit {code})") from e
        try:
            reply = pickle.loads(answer)
        except Exception as e:  # noqa: BLE001 - e.g. an exception class that won't unpickle
            raise RuntimeError(f"export worker reply could not be read: {e!r}") from e
        if reply[0] == "ok":
            return reply[1]
        raise reply[1] from RemoteTraceback(reply[2])

    def warm_up(self, fn: Callable[..., Any], *args: Any) -> threading.Thread:
        """``call(fn, *args)`` on a daemon thread: the child's start and what ``fn`` imports,
        paid now rather than by the first real call (which waits for it). A failure is only
        logged: the next call starts afresh."""

        def run() -> None:
            try:
                self.call(fn, *args)
            except Exception as e:  # noqa: BLE001 - a warm-up must not crash its thread
                log.warning("export worker warm-up failed: %r", e)

        thread = threading.Thread(target=run, name="export-worker-warm-up", daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        """Stop the child: close its request pipe (it exits on EOF), wait, then kill."""
        if not self._lock.acquire(timeout=_STOP_TIMEOUT_S):
            self._discard(kill=True)  # a call is stuck: kill without waiting for it
            return
        try:
            self._discard()
        finally:
            self._lock.release()

    def _ensure_started(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        self._discard()
        child_requests, requests = os.pipe()
        replies, child_replies = os.pipe()
        widen_pipe(requests)
        widen_pipe(replies)
        # The child imports what this process imports (a source tree, a test's rootdir).
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        argv = [sys.executable, "-m", "edge_rl.export.worker", str(child_requests)]
        try:
            self._proc = subprocess.Popen(
                [*argv, str(child_replies)],
                pass_fds=(child_requests, child_replies),
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # a terminal's Ctrl-C is the learner's to handle
            )
        finally:
            os.close(child_requests)  # else the child never sees EOF when this process dies
            os.close(child_replies)  # else a dead child's replies never reach EOF
        self._requests = requests
        self._replies = replies
        os.set_blocking(requests, False)  # writes are bounded by a deadline (see _write)
        self.starts += 1
        try:
            ready = pickle.loads(_read(replies, time.monotonic() + self.start_timeout))
        except TimeoutError:
            self._discard(kill=True)
            raise TimeoutError(f"export worker not ready in {self.start_timeout:g} s") from None
        except (EOFError, OSError) as e:
            code = self._discard()
            raise WorkerDied(f"export worker failed to start (exit {code})") from e
        if ready != ("ready", self._proc.pid):
            self._discard()
            raise WorkerDied(f"export worker said {ready!r} instead of ready")

    def _discard(self, kill: bool = False) -> int | None:
        """Forget the child (it exits on EOF; killed if it does not); its exit code."""
        proc, self._proc = self._proc, None
        if kill and proc is not None and proc.poll() is None:
            proc.kill()
        for fd in (self._requests, self._replies):
            if fd >= 0:
                os.close(fd)
        self._requests = self._replies = -1
        if proc is None:
            return None
        try:
            return proc.wait(_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(_STOP_TIMEOUT_S)


def widen_pipe(fd: int) -> None:
    """Give the pipe of ``fd`` up to ``PIPE_BYTES`` of buffer, where the system allows it.
    A message then crosses in one write and one read: with the default 64 KB, a learner
    export's ~0.6 MB went over in ~10 turns, each waiting for the other process to be
    scheduled, which on a loaded host cost more than the export itself."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (AttributeError, OSError):  # not Linux, or above /proc/sys/fs/pipe-max-size
        return


def _write(fd: int, message: bytes, deadline: float) -> None:
    view = memoryview(_HEADER.pack(len(message)) + message)
    while view:
        _wait(fd, deadline, write=True)
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            continue


def _read(fd: int, deadline: float | None) -> bytes:
    """One message; ``deadline`` (``time.monotonic()``) None: block as long as it takes."""
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    return _read_exact(fd, size, deadline)


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, left = [], n
    while left:
        if deadline is not None:
            _wait(fd, deadline, write=False)
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other end closed its pipe")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _wait(fd: int, deadline: float, write: bool) -> None:
    """Until ``fd`` is ready to read (or write), or ``TimeoutError`` at ``deadline``."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError
    readable, writable, _ = select.select(
        [] if write else [fd], [fd] if write else [], [], remaining
    )
    if not (writable if write else readable):
        raise TimeoutError


def _exit_with_parent(parent: int, every_s: float = 0.5) -> threading.Thread:
    """A daemon thread that ends this process once ``parent`` is gone (the child is then
    re-parented): EOF on the request pipe is only seen between two calls, and a call (or
    the TensorFlow import of the first) can take long on a busy machine."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os.kill(os.getpid(), signal.SIGTERM)  # its default action: end the process now

    thread = threading.Thread(target=watch, name="export-worker-parent-watch", daemon=True)
    thread.start()
    return thread


def _serve(requests: int, replies: int) -> None:
    """The child: answer ``(fn, args)`` requests until the request pipe closes."""
    # Ctrl-C reaches the whole process group; the parent decides when the worker stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_with_parent(os.getppid())
    _send(replies, ("ready", os.getpid()))
    while True:
        try:
            message = _read(requests, None)
        except (EOFError, OSError):  # the parent closed its end, or died
            return
        try:
            fn, args = pickle.loads(message)
            reply: tuple = ("ok", fn(*args))
        except BaseException as e:  # noqa: BLE001 - everything goes back to the caller
            if not isinstance(e, Exception):  # SystemExit, ...: not the caller's to re-raise
                e = RuntimeError(f"the export worker's call raised {e!r}")
            reply = ("error", e, traceback.format_exc())
        try:
            _send(replies, reply)
        except OSError:  # the parent is gone
            return


def _send(fd: int, reply: tuple) -> None:
    try:
        message = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:  # noqa: BLE001 - an unpicklable result or exception
        error = RuntimeError(f"export worker reply not picklable: {e!r}")
        message = pickle.dumps(("error", error, reply[2] if reply[0] == "error" else ""))
    os.write(fd, _HEADER.pack(len(message)))
    view = memoryview(message)
    while view:
        view = view[os.write(fd, view) :]


_default: ExportWorker | None = None
_default_lock = threading.Lock()


def default_worker() -> ExportWorker:
    """The process-wide worker (created on first use; ``shutdown`` at exit)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ExportWorker()
            atexit.register(shutdown)
        return _default


def shutdown() -> None:
    """Stop the process-wide worker, if one runs; the next call starts a new one."""
    if _default is not None:
        _default.close()


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]))
