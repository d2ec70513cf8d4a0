"""Board files' ``power`` section: the shipped figures and what a bad entry is rejected for."""

from __future__ import annotations

import pytest

from edge_rl.boards import load_board
from tests.harness.paths import REPO


@pytest.mark.parametrize("board", ["rpi4", "rpi5"])
def test_shipped_boards_have_a_cited_power_model(board):
    power = load_board(REPO / "firmware_configs" / f"{board}.yaml").power
    assert power is not None and 0 < power.idle_w < power.busy_w < 15
    assert "https://" in power.source


def test_power_is_optional(tmp_path):
    p = tmp_path / "b.yaml"
    p.write_text("board: x\n")
    assert load_board(p).power is None  # the fleet's energy then leaves this board out


BAD = [
    ("power: {idle_w: 0, busy_w: 5, source: s}", "idle_w"),  # no board draws 0 W
    ("power: {idle_w: -1, busy_w: 5, source: s}", "idle_w"),
    ("power: {idle_w: 6, busy_w: 5, source: s}", "idle_w <= busy_w"),  # busy below idle
    ("power: {idle_w: 1, busy_w: 5000, source: s}", "1000"),
    ("power: {idle_w: 1, busy_w: 5, source: ' '}", "source"),  # figures without a source
    ("power: {idle_w: 1, busy_w: 5}", "source"),
    ("power: {idle_w: one, busy_w: 5, source: s}", "idle_w"),
    ("power: {idle_w: 1, busy_w: 5, source: s, peak_w: 9}", "peak_w"),  # unknown key
    ("power: 5", "power"),
]


@pytest.mark.parametrize("text,match", BAD)
def test_bad_power_entries_are_rejected(tmp_path, text, match):
    p = tmp_path / "b.yaml"
    p.write_text(f"board: x\n{text}\n")
    with pytest.raises(ValueError, match=match):
        load_board(p)
