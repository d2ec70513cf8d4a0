"""``edge-rl learn``'s run directory: a new one, or ``--resume RUN_DIR`` of an earlier run.

    cfg, run_dir = resumed(resume_dir, options_given)       # RUN_DIR/config.yaml, checked
    check_new_run_dir(run_dir)   # a fresh run never writes over an earlier one's files

Standard library and the config only (no TensorFlow): errors come before anything starts.
"""

from __future__ import annotations

from pathlib import Path

import click

from edge_rl.config import RunConfig, load_run_config
from edge_rl.learner.run_dir import RunDir


def resumed(resume_dir: str, options: dict[str, object]) -> tuple[RunConfig, Path]:
    """The run's own config and directory. ``options``: the learn options that would change
    the config (``--config``, ``--set``, ...), by name; any given is an error."""
    from edge_rl.learner.checkpoint import Checkpoint  # numpy and the config: still light

    given = [name for name, value in options.items() if value not in (None, ())]
    if given:
        raise click.ClickException(
            f"--resume continues RUN_DIR/config.yaml as it is; drop {', '.join(given)}"
        )
    run_dir = Path(resume_dir)
    files = RunDir(run_dir)
    if not files.config.exists():
        raise click.ClickException(f"{run_dir} is not a run directory (no config.yaml)")
    if not Checkpoint.exists(run_dir):
        raise click.ClickException(
            f"{run_dir} has no checkpoint to resume from (checkpoint/header.json)"
        )
    try:
        cfg = load_run_config(files.config)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    keep_previous_summary(run_dir)
    return cfg, run_dir


def check_new_run_dir(run_dir: Path) -> None:
    """A fresh run writes into ``run_dir``: refused when an earlier run's files are there."""
    found = [path.name for path in RunDir(run_dir).earlier_run() if path.exists()]
    if found:
        raise click.ClickException(
            f"{run_dir} holds an earlier run ({', '.join(found)}): continue it with "
            f"`edge-rl learn --resume {run_dir}`, or give another --out"
        )


def keep_previous_summary(run_dir: Path) -> None:
    """An interrupted run's summary.json moves to summary.1.json (.2, ...): the resumed run
    writes its own, and nothing of the earlier one is lost."""
    files = RunDir(run_dir)
    if files.summary.exists():
        n = 1
        while files.earlier_summary(n).exists():
            n += 1
        files.summary.rename(files.earlier_summary(n))
