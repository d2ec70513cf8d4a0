"""``edge-rl flash``: one bundle per board (edge_rl/deploy/, docs/boards.md). Host side."""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
from pathlib import Path

import click

from edge_rl.cli.common import native_output_to, setup_logging

_DEFAULT_CACHE = Path.home() / ".cache" / "edge-rl" / "wheelhouse"


@click.command()
@click.option("--board", required=True, help="Board profile: rpi4, rpi5 or a board file.")
@click.option("--broker", required=True, help="mqtts://HOST:PORT, as the boards reach it.")
@click.option("--run", "run_name", required=True, help="Run name (the learner's run:).")
@click.option("--env", "env_id", required=True, help="Gymnasium id or package.module:callable.")
@click.option(
    "--policy-key",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="The learner's public key (edge-rl keygen's KEY.pub).",
)
@click.option(
    "--credentials",
    "creds",
    required=True,
    type=click.Path(file_okay=False),
    help="The deployment's edge-rl credentials directory (holds ca.key and/or "
    "broker/mosquitto.passwd): each board gets its own certificate/password.",
)
@click.option("--ids", help="Actor ids, comma-separated (each issued once per deployment).")
@click.option("--count", type=int, help="Or: this many boards, with the next free ids...")
@click.option("--prefix", default="pi", show_default=True, help="... PREFIX-01, PREFIX-02, ...")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Bundles: OUT/<id>/.")
@click.option("--root", default="edge-rl", show_default=True, help="Topic root.")
@click.option("--wifi-ssid", help="Wi-Fi network (writes network-config).")
@click.option(
    "--wifi-password-file",
    type=click.Path(exists=True, dir_okay=False),
    help="File with the Wi-Fi password on its first line.",
)
@click.option("--wifi-country", default="GB", show_default=True, help="Wi-Fi regulatory domain.")
@click.option(
    "--ssh-key",
    type=click.Path(exists=True, dir_okay=False),
    help="An SSH public key: user-data adds an admin login 'edge' with it.",
)
@click.option(
    "--python",
    "pythons",
    default="3.11,3.13",
    show_default=True,
    help="The boards' Python versions (bookworm 3.11, trixie 3.13).",
)
@click.option(
    "--wheelhouse-cache",
    type=click.Path(file_okay=False),
    help=f"Where downloaded wheels are kept (default {_DEFAULT_CACHE}).",
)
@click.option(
    "--wheelhouse",
    "wheelhouse_dir",
    type=click.Path(exists=True, file_okay=False),
    help="Use these dependency wheels as they are: no download (offline sites).",
)
@click.option(
    "--wheel",
    type=click.Path(exists=True, dir_okay=False),
    help="edge-rl's own wheel (default: built from this source tree).",
)
@click.option(
    "--boot-partition",
    type=click.Path(exists=True, file_okay=False),
    help="A mounted boot partition (one board): the bundle is written onto it.",
)
@click.option(
    "--rotate",
    is_flag=True,
    help="Re-flash boards already issued, with new credentials (old ones retired).",
)
@click.pass_context
def flash(
    ctx: click.Context,
    board: str,
    broker: str,
    run_name: str,
    env_id: str,
    policy_key: str,
    creds: str,
    ids: str | None,
    count: int | None,
    prefix: str,
    out: str,
    root: str,
    wifi_ssid: str | None,
    wifi_password_file: str | None,
    wifi_country: str,
    ssh_key: str | None,
    pythons: str,
    wheelhouse_cache: str | None,
    wheelhouse_dir: str | None,
    wheel: str | None,
    boot_partition: str | None,
    rotate: bool,
) -> None:
    """Write one bundle per board: cloud-init user-data (+ network-config), install.sh, a
    systemd unit, the board's own board.yaml with a unique actor id, its credentials and the
    learner's public key, a reference model for edge-rl doctor, an offline wheelhouse.
    Copy a bundle to a board's boot partition (or give --boot-partition) and boot it."""
    try:
        from edge_rl.deploy.flash import FlashOptions, run_flash
    except ImportError as e:  # edge-rl[edge] only: no cryptography/TensorFlow here
        raise click.ClickException(f"{e}: run edge-rl flash on the learner host") from None
    if (ids is None) == (count is None):
        raise click.UsageError("give --ids ID,ID or --count N")
    if bool(wifi_ssid) != bool(wifi_password_file):
        raise click.UsageError("--wifi-ssid and --wifi-password-file go together")
    opts = FlashOptions(
        board=board,
        broker=broker,
        run=run_name,
        env=env_id,
        policy_key=Path(policy_key),
        creds=Path(creds),
        out=Path(out),
        root=root,
        ids=[a.strip() for a in ids.split(",") if a.strip()] if ids else None,
        count=count,
        prefix=prefix,
        wifi=(wifi_ssid, Path(wifi_password_file), wifi_country) if wifi_ssid else None,
        ssh_key=Path(ssh_key) if ssh_key else None,
        pythons=[p.strip() for p in pythons.split(",") if p.strip()],
        cache=Path(wheelhouse_cache) if wheelhouse_cache else _DEFAULT_CACHE,
        wheelhouse=Path(wheelhouse_dir) if wheelhouse_dir else None,
        wheel=Path(wheel) if wheel else None,
        boot_partition=Path(boot_partition) if boot_partition else None,
        rotate=rotate,
    )
    scratch = Path(tempfile.mkdtemp(prefix="edge-rl-flash-"))
    try:
        with contextlib.ExitStack() as quiet:
            if not ctx.obj.verbose:  # TensorFlow's lines (the reference model): to a log
                quiet.enter_context(native_output_to(scratch / "native.log"))
            setup_logging(ctx.obj.verbose)  # records to the terminal, whichever fd it is
            if not ctx.obj.verbose:  # how the reference model was exported: not news
                logging.getLogger("edge_rl.export").setLevel(logging.WARNING)
            for line in run_flash(opts, scratch, echo=click.echo):
                click.echo(line)
    except (ValueError, FileExistsError, FileNotFoundError, RuntimeError, OSError) as e:
        raise click.ClickException(str(e)) from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
