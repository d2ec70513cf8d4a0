"""The offline wheelhouse: downloaded once per Python version and edge-rl requirement set,
a pure-Python sdist-only dependency built here, anything else refused; and (slow) the real
``pip download`` for a Raspberry Pi's aarch64 CPython 3.13."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from edge_rl.deploy import wheelhouse
from edge_rl.deploy.wheelhouse import WheelhouseError


class FakePip:
    """Stands in for ``pip download`` / ``pip wheel``: records each call, writes the wheels
    it is told to. ``missing``: requirement names the index has no wheel of, until a
    find-links directory offers one."""

    def __init__(self, wheels: list[str], missing: dict[str, str] | None = None) -> None:
        self.wheels = wheels
        self.missing = dict(missing or {})
        self.calls = []

    def __call__(self, cmd: list[str], **_kw) -> subprocess.CompletedProcess:
        self.calls.append(cmd)
        out = Path(cmd[cmd.index("-d" if "download" in cmd else "-w") + 1])
        if "wheel" in cmd:  # pip wheel --no-deps -w OUT REQ: the host build
            req = cmd[-1]
            (out / self.missing.pop(req)).write_bytes(b"built here")
            return subprocess.CompletedProcess(cmd, 0, "", "")
        links = Path(cmd[cmd.index("--find-links") + 1]) if "--find-links" in cmd else None
        for req, name in self.missing.items():
            if not (links and (links / name).exists()):
                err = f"ERROR: No matching distribution found for {req}\n"
                return subprocess.CompletedProcess(cmd, 1, "", err)
        for name in self.wheels:
            (out / name).write_bytes(b"wheel")
        return subprocess.CompletedProcess(cmd, 0, "", "")


def test_each_python_downloads_once_and_edge_rl_itself_is_never_cached(kit, tmp_path):
    pip = FakePip(
        ["numpy-2.0-cp313-cp313-manylinux_2_17_aarch64.whl", "edge_rl-0.1.0-py3-none-any.whl"]
    )
    first = wheelhouse.dependencies(kit.wheel, "3.13", tmp_path, run=pip)
    again = wheelhouse.dependencies(kit.wheel, "3.13", tmp_path, run=pip)
    assert len(pip.calls) == 1 and first == again
    assert [w.name for w in first] == ["numpy-2.0-cp313-cp313-manylinux_2_17_aarch64.whl"]
    cmd = pip.calls[0]
    assert cmd[cmd.index("--python-version") + 1] == "3.13" and "--only-binary=:all:" in cmd
    assert "manylinux_2_17_aarch64" in cmd and "manylinux2014_aarch64" in cmd
    assert cmd[-1] == f"{kit.wheel}[edge]"
    wheelhouse.dependencies(kit.wheel, "3.11", tmp_path, run=pip)  # another Python: its own
    assert len(pip.calls) == 2
    # Twenty bundles hard-link one copy.
    bundles = [tmp_path / f"b{i}" for i in range(20)]
    for b in bundles:
        wheelhouse.link_into(first, b)
    assert first[0].stat().st_nlink == 21


def test_a_pure_python_sdist_only_dependency_is_built_here(kit, tmp_path):
    pip = FakePip(
        ["numpy-2.0-cp313-cp313-manylinux_2_17_aarch64.whl"],
        missing={"purelib==1.0": "purelib-1.0-py3-none-any.whl"},
    )
    wheels = wheelhouse.dependencies(kit.wheel, "3.13", tmp_path, run=pip)
    assert sorted(w.name for w in wheels) == [
        "numpy-2.0-cp313-cp313-manylinux_2_17_aarch64.whl",
        "purelib-1.0-py3-none-any.whl",
    ]
    assert [c[3] for c in pip.calls] == ["download", "wheel", "download"]


def test_an_sdist_only_dependency_with_native_code_is_refused_with_what_to_do(kit, tmp_path):
    pip = FakePip([], missing={"native==1.0": "native-1.0-cp311-cp311-linux_x86_64.whl"})
    with pytest.raises(WheelhouseError, match="not pure Python.*--wheelhouse"):
        wheelhouse.dependencies(kit.wheel, "3.13", tmp_path, run=pip)
    assert not list(tmp_path.glob("cp313-*"))  # no half wheelhouse cached


@pytest.mark.slow
def test_the_real_download_for_a_raspberry_pi_os_trixie_board(kit, tmp_path):
    wheels = {w.name for w in wheelhouse.dependencies(kit.wheel, "3.13", tmp_path)}
    for project in ("numpy", "ai_edge_litert", "cryptography", "pyyaml"):
        (name,) = [w for w in wheels if w.lower().startswith(project + "-")]
        assert ("cp313" in name or "abi3" in name) and "aarch64" in name, name
    for project in ("paho_mqtt", "gymnasium", "click", "dacite"):
        assert any(w.lower().startswith(project + "-") for w in wheels), project
    assert not any(w.startswith("edge_rl-") for w in wheels)
    for w in wheels:
        zipfile.ZipFile(tmp_path / next(tmp_path.glob("cp313-*")).name / w).testzip()
