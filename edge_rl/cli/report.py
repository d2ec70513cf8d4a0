"""``edge-rl report RUN_DIR...``: plots and report.md of finished runs."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option(
    "--out",
    default="report",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Directory for the PNGs and report.md (created; same-named files replaced).",
)
def report(run_dirs: tuple[str, ...], out: str) -> None:
    """Plot and summarise run directories of `edge-rl learn`: PNGs and report.md in --out."""
    from edge_rl.report.runs import load_run
    from edge_rl.report.write import write_report

    try:
        runs = [load_run(Path(d)) for d in run_dirs]
        written = write_report(runs, Path(out))
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    for path in written:
        click.echo(path)
