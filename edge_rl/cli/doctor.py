"""``edge-rl doctor``: is this board ready to act? One line per check, with a fix.

No TensorFlow: it runs on a board, which has ``edge-rl[edge]`` only.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command()
@click.option(
    "--config",
    "config",
    required=True,
    type=click.Path(dir_okay=False),
    help="The board's own file (edge-rl flash writes it: /etc/edge-rl/board.yaml).",
)
@click.option(
    "--reference",
    type=click.Path(file_okay=False),
    help="The bundle's reference/ (model.tflite, expected.npz); default: next to "
    "the board file, or one level up.",
)
@click.option("--skip-broker", is_flag=True, help="Leave out the broker check (no network yet).")
@click.option(
    "--timeout",
    type=float,
    default=10.0,
    show_default=True,
    help="Seconds each check that waits (broker, delegate) may take.",
)
def doctor(config: str, reference: str | None, skip_broker: bool, timeout: float) -> None:
    """Check that this board can act: one line per check (ok or FAIL, with a fix);
    exit status 1 if any failed.

    The broker check logs in as this board for a moment: a broker with
    use_username_as_clientid then drops the board's running actor once (it reconnects)."""
    from edge_rl.deploy.doctor import run_checks

    checks = run_checks(
        Path(config),
        Path(reference) if reference else None,
        broker=not skip_broker,
        timeout=timeout,
    )
    for check in checks:
        click.echo(check.line())
    failed = [c.name for c in checks if not c.ok]
    click.echo(
        f"{len(checks) - len(failed)} of {len(checks)} checks passed"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    sys.exit(1 if failed else 0)
