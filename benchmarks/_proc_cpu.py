"""CPU seconds of a running process tree, by process and, for its root, by thread.

    sampler = TreeSampler(pid)          # polls /proc every ``every_s`` on its own thread
    sampler.start()
    ...                                 # the process runs
    sampler.stop()                      # after the process has exited: last samples kept
    sampler.by_role()                   # {"learner main thread": 18.9, "actors": 6.8, ...}

``os.wait4`` gives a tree's total; this says where it went. A process's figure is its last
sample before it exited (up to ``every_s`` short), so the parts sum to a little less than
the total. Roles come from each process's command line: the learner (the root; its main
thread apart from its other threads: TensorFlow's compute threads, ingest, the exporter,
paho), the export worker, the simulated actors, the broker, and anything else by name.
Linux only (it reads ``/proc/PID/stat``, ``/proc/PID/task/PID/stat`` and ``children``).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(x) for x in (task / "children").read_text().split()]
    except OSError:  # exited meanwhile
        pass
    return out


def tree(root: int) -> list[int]:
    seen, todo = [], [root]
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo += _children(pid)
    return seen


def cpu_s(stat_path: str) -> float | None:
    """utime + stime in seconds from a ``stat`` file; None when it is gone."""
    try:
        stat = Path(stat_path).read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / TICKS
    except (OSError, ValueError):
        return None


def role_of(cmdline: str, is_root: bool) -> str:
    """What a process of an ``edge-rl learn`` tree is, from its command line."""
    if is_root:
        return "learner"
    if "edge_rl.export.worker" in cmdline:
        return "export worker"
    if "edge_rl.cli actors" in cmdline:  # before "actor", which it contains
        return "board groups"
    if "edge_rl.cli actor" in cmdline or " actor " in f" {cmdline} ":
        return "actors"
    if "mosquitto" in cmdline or "amqtt" in cmdline:
        return "broker"
    return "other: " + " ".join(Path(p).name for p in cmdline.split()[:2])


class TreeSampler:
    def __init__(self, root: int, every_s: float = 1.0) -> None:
        self.root = root
        self.every_s = every_s
        self._cmdlines: dict[int, str] = {}
        # pid -> (the process's CPU seconds, its main thread's), as last sampled. The
        # process's figure includes its threads that have exited.
        self._cpu: dict[int, tuple[float, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def sample(self) -> None:
        for pid in tree(self.root):
            if pid not in self._cmdlines:
                try:
                    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                self._cmdlines[pid] = raw.replace(b"\0", b" ").decode(errors="replace")
            total, main = cpu_s(f"/proc/{pid}/stat"), cpu_s(f"/proc/{pid}/task/{pid}/stat")
            if total is not None and main is not None:
                self._cpu[pid] = (total, main)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()

    def by_role(self) -> dict[str, float]:
        """CPU seconds by role; the root's main thread apart from its other threads."""
        out: dict[str, float] = {}
        for pid, (total, main) in self._cpu.items():
            is_root = pid == self.root
            if is_root:
                out["learner main thread"] = main
                out["learner other threads"] = total - main
            else:
                role = role_of(self._cmdlines.get(pid, ""), is_root)
                out[role] = out.get(role, 0.0) + total
        return {k: round(v, 2) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}
