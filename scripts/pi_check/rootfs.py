"""The emulated board's root filesystem: a debootstrapped Debian arm64, cached as a tarball.

    recipe = Recipe(suite="bookworm")             # Raspberry Pi OS 12 is Debian bookworm
    tarball = ensure_tarball(recipe, cache_dir)   # built once (4-16 min), then a cache hit
    extract(tarball, workdir / "rootfs")          # a fresh board for every check (~10 s)

The cache is keyed by a hash of everything that goes into the tarball (suite, architecture,
variant, packages, mirror and this module's recipe version), so a changed recipe builds a
new one instead of reusing a stale one. debootstrap runs in one stage: with binfmt_misc
handing arm64 binaries to qemu-aarch64-static (flag F: the interpreter is opened at
registration, so the rootfs needs no copy of it), the second stage's maintainer scripts
run as if on the board.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

# Bump when the build steps below change in a way the other fields do not show.
RECIPE_VERSION = 1
DEBOOTSTRAP_TIMEOUT_S = 40 * 60  # measured 4-16 min here; a stalled mirror must not hang CI


@dataclass(frozen=True)
class Recipe:
    """What goes into the rootfs. ``packages``: what the bundle's install.sh needs on top of
    debootstrap's minbase (python3 + venv for the service's venv; ca-certificates as on
    Raspberry Pi OS; passwd/adduser for the service user come with minbase)."""

    suite: str = "bookworm"
    arch: str = "arm64"
    variant: str = "minbase"
    mirror: str = "http://deb.debian.org/debian"
    packages: tuple[str, ...] = ("python3", "python3-venv", "ca-certificates")
    version: int = field(default=RECIPE_VERSION)

    @property
    def key(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def tarball_name(self) -> str:
        return f"debian-{self.suite}-{self.arch}-{self.key}.tar.zst"


def debootstrap(recipe: Recipe, target: Path, log: Path) -> None:
    """``debootstrap --arch=arm64 ...`` into ``target`` (must not exist), then trimmed."""
    cmd = [
        "debootstrap",
        f"--arch={recipe.arch}",
        f"--variant={recipe.variant}",
        f"--include={','.join(recipe.packages)}",
        recipe.suite,
        str(target),
        recipe.mirror,
    ]
    with open(log, "w") as out:
        result = subprocess.run(
            cmd, stdout=out, stderr=subprocess.STDOUT, timeout=DEBOOTSTRAP_TIMEOUT_S
        )
    if result.returncode != 0:
        tail = log.read_text()[-3000:]
        raise RuntimeError(f"debootstrap failed ({result.returncode}); {log}:\n{tail}")
    # What a board never needs from the image: downloaded .debs and apt's lists.
    shutil.rmtree(target / "var" / "cache" / "apt" / "archives", ignore_errors=True)
    (target / "var" / "cache" / "apt" / "archives" / "partial").mkdir(parents=True)
    for lists in (target / "var" / "lib" / "apt" / "lists").glob("*_Packages"):
        lists.unlink()


def _tar(args: list[str], timeout: float) -> None:
    result = subprocess.run(["tar", *args], capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"tar {' '.join(args)} failed: {result.stderr.strip()[-2000:]}")


def ensure_tarball(recipe: Recipe, cache_dir: Path, scratch: Path) -> tuple[Path, bool, float]:
    """``(tarball, built, seconds)``: the cached rootfs, built into ``scratch`` first if
    missing. Written to a temp name and renamed, so an interrupted build leaves no tarball
    that looks complete."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    tarball = cache_dir / recipe.tarball_name()
    if tarball.is_file():
        return tarball, False, 0.0
    t0 = time.monotonic()
    target = scratch / "debootstrap"
    if target.exists():
        shutil.rmtree(target)
    debootstrap(recipe, target, scratch / "debootstrap.log")
    partial = tarball.with_name(tarball.name + f".partial-{os.getpid()}")
    try:
        _tar(
            ["--zstd", "--numeric-owner", "--xattrs", "-C", str(target), "-cf", str(partial), "."],
            timeout=20 * 60,
        )
        partial.rename(tarball)
    finally:
        partial.unlink(missing_ok=True)
        shutil.rmtree(target, ignore_errors=True)
    return tarball, True, time.monotonic() - t0


def extract(tarball: Path, target: Path) -> None:
    """A fresh copy of the rootfs in ``target`` (removed first if it exists)."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    _tar(
        ["--zstd", "--numeric-owner", "--xattrs", "-C", str(target), "-xf", str(tarball)],
        timeout=10 * 60,
    )
