"""A board group's boards file: each board's id, seed and credentials' paths; and the ids
a fleet past 100 boards gets."""

from __future__ import annotations

import json

import pytest

from edge_rl.sim.boards_file import BoardEntry, read_boards_file, write_boards_file
from edge_rl.sim.fleet import fleet_ids
from edge_rl.transport.auth import BrokerAuth


def test_each_board_keeps_its_own_id_seed_and_credentials(tmp_path):
    boards = [
        BoardEntry("sim-000", 1000, BrokerAuth(username="sim-000", password_file="/p/0")),
        BoardEntry("sim-001", 2000, BrokerAuth(username="sim-001", password_env="PW_1")),
        BoardEntry("sim-002", 3000, None),
    ]
    path = tmp_path / "actors-0.boards.json"
    write_boards_file(path, boards)
    assert read_boards_file(path) == boards
    assert "password" not in json.loads(path.read_text())[0]["auth"]  # only its file's path


@pytest.mark.parametrize(
    "rows",
    [
        [],
        {"id": "a"},
        [{"id": "a", "seed": 1}],
        [{"id": "a", "seed": "1", "auth": None}],
        [{"id": "a", "seed": 1, "auth": {"token": "x"}}],
        [{"id": "a", "seed": 1, "auth": None}, {"id": "a", "seed": 2, "auth": None}],
    ],
)
def test_a_bad_boards_file_is_a_value_error(tmp_path, rows):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(rows))
    with pytest.raises(ValueError):
        read_boards_file(path)


def test_fleet_ids_are_zero_padded_to_the_fleet_size():
    assert fleet_ids(3) == ["sim-00", "sim-01", "sim-02"]
    assert fleet_ids(100)[-1] == "sim-99"
    ids = fleet_ids(1000, "h")
    assert ids[0] == "h-000" and ids[-1] == "h-999" and ids == sorted(ids)
