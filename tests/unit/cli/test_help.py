"""What ``--help`` tells a new user: ``learn`` names docs/config.md, every config key and
section, and where TensorBoard's logs are and how to open them."""

from __future__ import annotations

import dataclasses

from click.testing import CliRunner

from edge_rl.cli.main import main
from edge_rl.config import RunConfig


def test_learn_help_points_to_the_config_reference_and_lists_its_keys():
    out = CliRunner().invoke(main, ["learn", "--help"], terminal_width=200)
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "docs/config.md" in text
    for f in dataclasses.fields(RunConfig):
        assert f" {f.name}," in text or f" {f.name} " in text or f" {f.name}." in text, f.name
    assert "tensorboard --logdir RUN_DIR/tb" in text
