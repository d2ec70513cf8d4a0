"""``edge-rl flash`` in data-flow order: check everything, pick the ids, build what every
bundle shares (wheelhouse, reference model), then per board credentials and bundle, and
only then record the ids as issued.

    lines = run_flash(FlashOptions(...), scratch_dir, echo=print)

Everything that can be refused is refused before a credential is issued or a file
written: a bad profile, key, URL or id; an id already issued (``DuplicateId``).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from edge_rl.boards import board_file, load_board
from edge_rl.deploy import board_creds, cloudinit, wheelhouse
from edge_rl.deploy.bundle import FlashSpec, write_bundle
from edge_rl.deploy.ids import Registry
from edge_rl.deploy.reference import reference_model
from edge_rl.transport.address import parse_broker_list
from edge_rl.transport.auth import read_password_file
from edge_rl.wire.signing import Verifier
from edge_rl.wire.topics import DEFAULT_ROOT, Topics

SOURCE = Path(__file__).resolve().parents[2]  # the source tree, in a checkout


@dataclass(frozen=True)
class FlashOptions:
    board: str
    broker: str
    run: str
    env: str
    policy_key: Path
    creds: Path
    out: Path
    root: str = DEFAULT_ROOT
    ids: list[str] | None = None
    count: int | None = None
    prefix: str = "pi"
    wifi: tuple[str, Path, str] | None = None  # ssid, password file, country
    ssh_key: Path | None = None
    pythons: tuple[str, ...] | list[str] = wheelhouse.PYTHONS
    cache: Path = Path.home() / ".cache" / "edge-rl" / "wheelhouse"
    wheelhouse: Path | None = None  # dependency wheels to use as they are
    wheel: Path | None = None  # edge-rl's own wheel
    boot_partition: Path | None = None
    rotate: bool = False


def _spec(o: FlashOptions) -> FlashSpec:
    """Everything checked that can be checked before anything is written."""
    profile = board_file(o.board)
    load_board(profile)  # FileNotFoundError names the known boards; ValueError the bad key
    Verifier.from_file(o.policy_key)  # ValueError: not an edge-rl public key
    if not parse_broker_list(o.broker)[0].tls:  # a list is all TLS or none
        raise ValueError(f"--broker {o.broker}: boards reach the broker over TLS (mqtts://)")
    Topics(o.root, o.run)  # run and root are topic levels
    if not o.env.strip():
        raise ValueError("--env must name an environment")
    for p in o.pythons:
        if p not in ("3.10", "3.11", "3.12", "3.13", "3.14"):
            raise ValueError(
                f"--python {p}: a board's CPython 3.10-3.14 (bookworm 3.11, trixie 3.13)"
            )
    wifi = None
    if o.wifi:
        ssid, password_file, country = o.wifi
        cloudinit.network_config(ssid, "x", country)  # the country's check
        wifi = (ssid, read_password_file(password_file), country)
    ssh_key = o.ssh_key.read_text().strip() if o.ssh_key else None
    if o.boot_partition is not None and (o.count or 0) + len(o.ids or []) != 1:
        raise ValueError("--boot-partition takes exactly one board (--ids ID or --count 1)")
    return FlashSpec(
        profile, o.broker, o.run, o.env, o.policy_key, o.creds, o.out, o.root, wifi, ssh_key
    )


def run_flash(o: FlashOptions, scratch: Path, echo: Callable[[str], None] = print) -> list[str]:
    spec = _spec(o)
    board_creds.kinds(o.creds)  # ValueError: nothing to issue from
    with Registry.open(o.creds) as reg:
        ids = o.ids if o.ids is not None else reg.next_free(o.prefix, o.count or 0)
        reg.check_new(ids, rotate=o.rotate)
        existing = [a for a in ids if (o.out / a).exists()]
        if existing and not o.rotate:
            raise FileExistsError(f"bundles already in {o.out}: {existing}")
        own = o.wheel or wheelhouse.build_own_wheel(SOURCE, scratch / "own")
        echo(f"edge-rl wheel: {own.name}")
        wheels = [own]
        for python in o.pythons:
            if o.wheelhouse is not None:
                break
            deps = wheelhouse.dependencies(own, python, o.cache)
            echo(f"wheelhouse for Python {python} (aarch64): {len(deps)} wheels from {o.cache}")
            wheels += deps
        if o.wheelhouse is not None:
            wheels += [
                w for w in sorted(o.wheelhouse.glob("*.whl")) if not w.name.startswith("edge_rl-")
            ]
        model = reference_model(o.cache)
        retired = [board_creds.retire(o.creds, a) for a in ids] if o.rotate else []
        issued = board_creds.issue(o.creds, ids)
        bundles = [write_bundle(spec, a, wheels, model) for a in ids]
        reg.issue(ids, run=o.run, board=spec.board.stem, out=o.out, root=o.root)
    lines = [f"bundle {b}" for b in bundles]
    if issued.created:
        lines.append(f"new credentials for {', '.join(issued.created)} in {o.creds}/boards/")
    if issued.kept:
        lines.append(f"existing credentials used for {', '.join(issued.kept)}")
    lines += [f"retired the old credentials to {r}" for r in retired if r]
    if issued.passwd_updated or (o.rotate and (o.creds / "broker" / "mosquitto.passwd").exists()):
        lines.append(
            f"updated {o.creds}/broker/mosquitto.passwd and acl: install them on the "
            "broker and reload mosquitto before these boards connect (docs/boards.md)"
        )
    if o.boot_partition is not None:
        lines.append(to_boot_partition(bundles[0], o.boot_partition))
    return lines


def to_boot_partition(bundle: Path, mount: Path) -> str:
    """The bundle onto a mounted boot partition: cloud-init's files at its top (the image's
    own kept as *.orig, once), the bundle in ``edge-rl/``. FAT keeps no file modes."""
    size = sum(f.stat().st_size for f in bundle.rglob("*") if f.is_file())
    free = shutil.disk_usage(mount).free
    if size > free:
        raise OSError(f"{mount} has {free / 1e6:.0f} MB free, the bundle needs {size / 1e6:.0f}")
    for name in ("user-data", "meta-data", "network-config"):
        src, dst = bundle / name, mount / name
        if not src.exists():
            continue
        orig = mount / f"{name}.orig"
        if dst.exists() and not orig.exists():
            shutil.copyfile(dst, orig)
        shutil.copyfile(src, dst)
    target = mount / cloudinit.BUNDLE_DIR
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(bundle, target, copy_function=shutil.copyfile)
    return f"written to the boot partition {mount} ({size / 1e6:.0f} MB): eject it and boot"
