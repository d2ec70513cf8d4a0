"""The deployment history (deploy/history.py) and the fleet view (deploy/fleet_view.py),
table-driven: records in, the lines and counts out."""

from __future__ import annotations

import json
import re

from edge_rl.deploy.fleet_view import FleetView
from edge_rl.deploy.history import DeployRecord, append, history_file, last, new_id
from edge_rl.types import ActorStatus, ControlMessage


def _record(i: int, outcome: str = "deployed") -> DeployRecord:
    return DeployRecord(
        new_id(1_700_000_000 + i), 1_700_000_000.0 + i, "lab", "start-1", "x.bundle",
        "ab" * 32, 4 + i, f"{i:02d}" * 32, outcome, f"reason {i}", ("pi-01",), 3, 0, 0, 7, 2.5,
    )  # fmt: skip


def test_history_lives_beside_the_source_and_keeps_the_last_n(tmp_path):
    bundle = tmp_path / "p.bundle"
    bundle.write_bytes(b"x")
    assert history_file(tmp_path) == history_file(bundle) == tmp_path / "deployments.jsonl"
    path = history_file(tmp_path)
    assert last(path, 5) == []  # none yet
    records = [_record(i) for i in range(7)]
    for r in records:
        append(path, r)
    with path.open("a") as f:
        f.write('{"half": \n')  # a line cut short: skipped, not fatal
    got = last(path, 5)
    assert [r.version for r in got] == [6, 7, 8, 9, 10] and got == records[2:]
    assert last(path, 0) == []
    assert all(json.loads(line).get("id") for line in path.read_text().splitlines()[:7])


def test_ids_are_the_utc_time_and_random_hex():
    a, b = new_id(0), new_id(0)
    assert re.fullmatch(r"19700101T000000Z-[0-9a-f]{8}", a) and a != b


def _status(actor: str, state: str, version: int = 0, digest: str = "") -> ActorStatus:
    return ActorStatus(actor, state, policy_version=version, policy_digest=digest, time_unix=99.0)


def test_the_view_counts_boards_by_state_and_by_policy_served():
    statuses = {
        "b": (_status("b", "serving", 4, "d4" * 32), 0.0),
        "a": (_status("a", "serving", 3, "d3" * 32), 0.0),
        "c": (_status("c", "serving", 4, "d4" * 32), 0.0),
        "d": (_status("d", "offline"), 0.0),
    }
    view = FleetView.of("lab", ControlMessage("serving", "s1"), statuses, [_record(0, "aborted")])
    assert view.by_state() == {"serving": 3, "offline": 1}
    assert view.served() == [(4, "d4" * 32, 2), (3, "d3" * 32, 1)]
    lines = view.lines(now=100.0)
    assert lines[0] == "run 'lab': serving (start s1); 4 boards: 3 serving, 1 offline"
    assert [line.split()[0] for line in lines[2:6]] == ["a", "b", "c", "d"]
    assert lines[2].split()[1:6] == ["serving", "3", "d3" * 6, "-", "1s"]
    assert lines[7] == f"served: v4 {'d4' * 6} on 2 boards; v3 {'d3' * 6} on 1 boards"
    assert lines[9] == "last 1 deployments:" and " aborted: reason 0; canaries pi-01" in lines[10]
    as_json = view.as_dict(now=100.0)
    assert as_json["deployments"][0]["outcome"] == "aborted"
    assert as_json["boards"][3] == {
        "id": "d", "state": "offline", "policy_version": 0, "policy_digest": "",
        "recent_return": None, "seen_s_ago": 1.0,
    }  # fmt: skip


def test_a_run_without_a_control_or_boards():
    lines = FleetView.of("lab", None, {}, []).lines(now=0.0)
    assert lines[0] == "run 'lab': none (no retained control); 0 boards" and len(lines) == 2
