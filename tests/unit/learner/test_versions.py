"""Versions come from the learner's own records only, and absurd ones are refused, never
converted (issue: a retained ``policy_version`` of 10^400 crashed the learner)."""

from __future__ import annotations

import json

import pytest

from edge_rl.learner.outbound.broadcast import last_published, manifest_version


def test_the_publish_log_gives_the_highest_sane_version(tmp_path):
    lines = [
        {"policy_version": 3},
        {"policy_version": 10**400},
        {"policy_version": 1.5e9},
        {"policy_version": "9"},
        {"policy_version": 7},
        {"policy_version": -2},
    ]
    text = "\n".join(json.dumps(x) for x in lines) + '\n{"policy_version": 99'  # a torn line
    (tmp_path / "publishes.jsonl").write_text(text)
    assert last_published(tmp_path / "publishes.jsonl") == 7


@pytest.mark.parametrize("bad", [10**400, 1.0, "5", -1, True])
def test_an_absurd_manifest_version_is_an_error(tmp_path, bad):
    (tmp_path / "manifest.json").write_text(json.dumps({"policy_version": bad}))
    with pytest.raises(ValueError, match="policy_version"):
        manifest_version(tmp_path / "manifest.json")
