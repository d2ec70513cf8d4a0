"""The bundle's offline wheelhouse: ``edge-rl[edge]`` for a 64-bit Raspberry Pi's Python.

A board installs with ``pip install --no-index --find-links wheelhouse "edge-rl[edge]"``:
no index, no compiler. Its dependencies are downloaded once per Python version into the
cache (``pip download --platform manylinux..._aarch64 --python-version 3.13
--only-binary=:all:``), in a directory named by a hash of what decides them (edge-rl's
``edge`` requirements, the Python version, the platform tags), so twenty bundles, and the
next flash, download nothing; the bundles hard-link the cached files. edge-rl's own wheel
(``pip wheel SOURCE --no-deps``) is built fresh for each flash: it changes with the code.

A dependency published as an sdist only cannot be downloaded for another platform; if it is
pure Python, it is built into a wheel here (``pip wheel --no-deps``) and offered to the
download as a local find-links directory.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

# Raspberry Pi OS bookworm has glibc 2.36 (Python 3.11), trixie 2.41 (Python 3.13): any
# manylinux tag up to 2.36 runs on both. pip needs each tag named.
PLATFORMS = ("manylinux2014_aarch64", *(f"manylinux_2_{v}_aarch64" for v in range(17, 37)))
PYTHONS = ("3.11", "3.13")
Run = Callable[..., subprocess.CompletedProcess]


class WheelhouseError(RuntimeError):
    pass


def pip() -> list[str]:
    return [sys.executable, "-m", "pip"]


def build_own_wheel(source: Path, out_dir: Path, run: Run = subprocess.run) -> Path:
    """edge-rl's wheel from its source tree (the directory with its pyproject.toml)."""
    if not (source / "pyproject.toml").exists():
        raise WheelhouseError(
            f"no edge-rl source tree at {source}: give edge-rl's wheel with --wheel FILE "
            "(pip wheel . --no-deps in a checkout)"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    # pip builds a source tree in place (its build/ and *.egg-info): two builds of one
    # tree at once break each other, so they take turns on a lock named by the tree.
    tree = hashlib.sha256(str(source.resolve()).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"edge-rl-wheel-{tree}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        p = run(
            [*pip(), "wheel", str(source), "--no-deps", "-q", "-w", str(out_dir)],
            capture_output=True,
            text=True,
            timeout=600,
        )
    wheels = sorted(out_dir.glob("edge_rl-*.whl"))
    if p.returncode != 0 or not wheels:
        raise WheelhouseError(f"pip wheel {source} failed: {p.stderr.strip()[-2000:]}")
    return wheels[-1]


def edge_requirements(wheel: Path) -> list[str]:
    """The wheel's ``Requires-Dist`` lines (what decides the dependency set)."""
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(name).decode()
    return sorted(line for line in text.splitlines() if line.startswith("Requires-Dist:"))


def cache_key(wheel: Path, python: str) -> str:
    blob = json.dumps([edge_requirements(wheel), python, PLATFORMS]).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def dependencies(wheel: Path, python: str, cache: Path, run: Run = subprocess.run) -> list[Path]:
    """The wheels of ``edge-rl[edge]``'s dependencies for ``python`` on aarch64 (cached)."""
    tag = f"cp{python.replace('.', '')}"
    done = cache / f"{tag}-aarch64-{cache_key(wheel, python)}"
    if done.is_dir():
        return sorted(done.glob("*.whl"))
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{tag}-", dir=cache))
    host_built = tmp / "host-built"
    try:
        for _ in range(10):  # each round may add one pure-Python wheel built here
            cmd = [
                *pip(),
                "download",
                "-q",
                "-d",
                str(tmp),
                "--only-binary=:all:",
                "--python-version",
                python,
                "--implementation",
                "cp",
                *(a for p in PLATFORMS for a in ("--platform", p)),
                f"{wheel}[edge]",
            ]
            if host_built.is_dir():
                cmd += ["--find-links", str(host_built)]
            p = run(cmd, capture_output=True, text=True, timeout=1800)
            if p.returncode == 0:
                break
            _build_pure(_missing(p.stderr), host_built, p.stderr, run)
        else:
            raise WheelhouseError("pip download kept failing; see the messages above")
        for w in host_built.glob("*.whl") if host_built.is_dir() else ():
            shutil.copy(w, tmp / w.name)
        shutil.rmtree(host_built, ignore_errors=True)
        for own in tmp.glob("edge_rl-*.whl"):
            own.unlink()  # built per flash, not cached
        try:
            os.replace(tmp, done)  # atomic: a half download is never taken for a cached one
        except OSError:
            if not done.is_dir():  # else: a concurrent flash cached the same set first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return sorted(done.glob("*.whl"))


def _missing(stderr: str) -> str:
    m = re.search(r"No matching distribution found for ([A-Za-z0-9_.\-]+[^\s;]*)", stderr)
    if not m:
        raise WheelhouseError(f"pip download failed: {stderr.strip()[-2000:]}")
    return m.group(1)


def _build_pure(requirement: str, out: Path, stderr: str, run: Run) -> None:
    """``requirement`` as a wheel built on this host; refused unless it is pure Python."""
    out.mkdir(parents=True, exist_ok=True)
    before = set(out.glob("*.whl"))
    p = run(
        [*pip(), "wheel", "--no-deps", "-q", "-w", str(out), requirement],
        capture_output=True,
        text=True,
        timeout=600,
    )
    new = set(out.glob("*.whl")) - before
    if p.returncode != 0 or not new:
        raise WheelhouseError(
            f"no aarch64 wheel of {requirement} on the index, and building one here failed: "
            f"{p.stderr.strip()[-1000:] or stderr.strip()[-1000:]}"
        )
    for w in new:
        if not w.name.endswith("-none-any.whl"):
            w.unlink()
            raise WheelhouseError(
                f"{requirement} has no aarch64 wheel and is not pure Python ({w.name}): "
                "build it on an aarch64 machine and pass the directory with --wheelhouse"
            )


def link_into(wheels: list[Path], dest: Path) -> None:
    """Hard links of ``wheels`` in ``dest`` (a copy across file systems)."""
    dest.mkdir(parents=True, exist_ok=True)
    for w in wheels:
        target = dest / w.name
        if target.exists():
            continue
        try:
            os.link(w, target)
        except OSError:
            shutil.copyfile(w, target)
