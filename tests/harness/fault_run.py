"""A fault's run and its accounting: a Mosquitto of its own, the fleet, ``edge-rl learn
--broker URL --fleet 0``, the fault (tests/harness/faults.py), then what the actors sent
against what the learner put in replay.

    row = run_fault(FAULTS["broker_restart"], out_dir, steps, sets, timeout_s)

benchmarks/faults.py runs every row at 50,000 env steps and prints the table;
tests/e2e/test_faults.py runs short versions and checks what must hold.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from edge_rl.boards import board_file
from edge_rl.broker.embedded import EmbeddedBroker
from edge_rl.sim.fleet import Fleet
from edge_rl.wire.signing import Signer
from tests.harness.faults import ACTORS, CONFIG, DONE, ENV, RUN, Fault, Harness
from tests.harness.learn import learn_argv
from tests.harness.waits import until


@dataclass(frozen=True)
class Row:
    """One fault's run, accounted from independent counters (what docs/reliability.md checks)."""

    fault: str
    sent: int
    received: int  # from the fleet's actors
    foreign: int  # received from an id outside the fleet
    lost: int
    causes: dict[str, int]
    written_off: int  # credit of transitions in transit, granted again (learner/fleet/write_off.py)
    reclaimed: int  # credit idle actors held, granted again: the lead's overcommit
    duplicated: int
    over_budget: int
    budget_reached: bool
    finished: bool  # the learner exited by itself, code 0
    wall_s: float
    final_return: float | None
    summary: dict
    events: list[str]


def write_board(path: Path, overrides: dict) -> Path:
    board = yaml.safe_load(board_file("rpi4").read_text())
    board.update(overrides)
    path.write_text(yaml.safe_dump(board))
    return path


def run_fault(
    fault: Fault, out: Path, steps: int, sets: list[str], timeout_s: float, seed: int = 0
) -> Row:
    """One run with ``fault``: broker, fleet, learner, fault, then the accounting."""
    run_dir = out / fault.name
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    keys = out / f"{fault.name}.keys"
    signer = Signer.load_or_create(keys / "learner.key")
    signer.write_public(keys / "learner.pub")
    board = write_board(out / f"{fault.name}.board.yaml", fault.board)
    all_sets = [f"total_env_steps={steps}", *sets, *fault.sets]
    argv = learn_argv(
        CONFIG,
        run_dir,
        "--fleet",
        "0",
        "--seed",
        str(seed),
        "--signing-key",
        str(keys / "learner.key"),
        *(x for kv in all_sets for x in ("--set", kv)),
    )
    with EmbeddedBroker(kind="mosquitto", log_dir=out / f"{fault.name}.broker") as broker:
        argv += ["--broker", broker.url]
        fleet = Fleet(
            ACTORS,
            board,
            broker.url,
            ENV,
            policy_key=keys / "learner.pub",
            run=RUN,
            seed=seed,
            log_dir=run_dir / "fleet",
        )
        h = Harness(broker, fleet, run_dir, steps, board, keys / "learner.pub", argv)
        t0 = time.monotonic()
        h.start_learner()
        with fleet:
            try:
                fault.inject(h)
                finished = _wait_exit(h, t0 + timeout_s)
            finally:
                _stop(h)
        wall = time.monotonic() - t0
    return account(fault, h, finished, wall)


def _wait_exit(h: Harness, deadline: float) -> bool:
    assert h.learner is not None
    until(lambda: h.learner.poll() is not None, deadline - time.monotonic(), step=0.5)
    if h.learner.poll() is None:
        h.log("TIMEOUT: the learner did not finish; stopped (SIGTERM)")
        return False
    h.log(f"learner exited with code {h.learner.returncode}")
    return h.learner.returncode == 0


def _stop(h: Harness) -> None:
    """Every process the run started, by PID: the learner, a fault's extra actors."""
    for p in [h.learner, *h.extra]:
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(15)
            except Exception:  # noqa: BLE001 - then by force
                p.kill()
                p.wait(5)


def actor_counts(h: Harness, summary: dict) -> dict[str, dict[str, int]]:
    """Per actor process (log file): transitions sent and dropped by its own count. The exit
    log line of a clean exit; else (killed outright) the last status the learner kept, or
    what the learner received from it if more (it sent that much at least)."""
    out: dict[str, dict[str, int]] = {}
    statuses = summary.get("actors", {})
    by_actor = summary.get("transitions_received_by_actor", {})
    logs = sorted((h.run_dir / "fleet").glob("*.log"))
    for log in logs:
        m = DONE.search(log.read_text(errors="replace"))
        actor = m.group(1) if m else log.stem.removeprefix("duplicate-")
        st = statuses.get(actor, {})
        if m:
            sent, dropped = int(m.group(3)), int(m.group(4))
        elif log.stem.startswith("duplicate-"):  # refused as a duplicate: never granted a step
            sent = dropped = 0  # (the status of its id is the live process's)
        else:
            sent = max(st.get("transitions_sent", 0), by_actor.get(actor, 0))
            dropped = st.get("transitions_dropped", 0)
        out[log.stem] = {
            "actor": actor,
            "sent": sent,
            "dropped": dropped,
            "oversize": st.get("transitions_oversize", 0),
        }
    return out


def logs_of(h: Harness) -> list[Path]:
    return sorted((h.run_dir / "fleet").glob("sim-*.log"))


def account(fault: Fault, h: Harness, finished: bool, wall: float) -> Row:
    path = h.run_dir / "summary.json"
    s = json.loads(path.read_text()) if path.exists() else {}
    per = actor_counts(h, s)
    fleet_ids = set(h.fleet.actor_ids())
    by_actor = s.get("transitions_received_by_actor", {})
    received = sum(n for a, n in by_actor.items() if a in fleet_ids)
    # Resumed as a new run start (the actors joined it twice), they count again from zero: the
    # accounting is of the resumed part, the checkpoint holds the rest. Resumed with the run's
    # own run id, they count on: all of it.
    joins = [log.read_text(errors="replace").count("joined run") for log in logs_of(h)]
    if joins and min(joins) > 1:
        received -= s.get("resumed_from_env_steps") or 0
    foreign = sum(n for a, n in by_actor.items() if a not in fleet_ids)
    sent = sum(p["sent"] for p in per.values())
    dropped = sum(p["dropped"] for p in per.values())
    oversize = sum(p["oversize"] for p in per.values())
    over = s.get("transitions_over_budget", 0)
    lost = sent + dropped + oversize - received - over
    # Disjoint causes: the actors' own drops, the learner's (full inbox, refused), and the
    # rest, lost between the actors' MQTT clients and the learner's (a broker restart, a
    # killed process's queue). Credit written off is how the run got that credit back.
    causes = {
        "spool overflow": dropped,
        "oversize": oversize,
        "ingest queue": s.get("ingest_queue_dropped_transitions", 0),
        # the fleet's own, refused: not what a fault forged or sent under an unknown id
        "rejected": s.get("transitions_rejected", 0)
        - h.notes.get("forged_transitions", 0)
        - h.notes.get("foreign_sent", 0),
    }
    causes["in transit"] = lost - sum(causes.values())
    return Row(
        fault=fault.what,
        sent=sent,
        received=received,
        foreign=foreign,
        lost=lost,
        causes=causes,
        written_off=s.get("credit_written_off", 0),
        reclaimed=s.get("credit_reclaimed", 0),
        duplicated=s.get("transitions_duplicate", 0),
        over_budget=over,
        budget_reached=s.get("env_steps") == h.steps,
        finished=finished,
        wall_s=wall,
        final_return=s.get("final_eval_return"),
        summary=s,
        events=h.events,
    )
