"""The emulated Raspberry Pi check, phase by phase (main.py runs them and prints the times).

    rootfs    a cached debootstrapped arm64 Debian (rootfs.py), extracted fresh
    flash     host: keygen, credentials (TLS + passwords), `edge-rl flash` for one board
    broker    host: Mosquitto with host/mosquitto.conf (TLS, passwords, creds/broker/acl)
    install   board: the bundle on /boot/firmware/edge-rl, user-data's runcmd as first boot
              runs it (install.sh, offline), then again (it must be idempotent)
    doctor    board: `edge-rl doctor` as the service user, broker included
    control   board: the doctor under qemu's default `max` CPU must FAIL its reference check
    run       host learner (--fleet 0) + the board's actor from the installed unit's ExecStart
    parity    the run's deployed policy on 2,000 observations: board outputs == host outputs
              (run and parity: joinrun.py)

Every failed expectation raises CheckFailed with what was expected and where to look.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path

import yaml

from edge_rl.transport.address import free_port

from .chroot import Board, PiModel, as_user, passwd_entry
from .host import TlsBroker, cli
from .unit import read_service

HERE = Path(__file__).resolve().parent
BUNDLE_ON_BOARD = Path("boot/firmware/edge-rl")  # cloudinit.py: where first boot finds it
ACTOR_ID = "pi-emu-01"
OTHER_ID = "pi-emu-00"
RUN = "pi-check"
INSTALL_TIMEOUT_S = 1200  # measured ~1.5 min under qemu here; a 2x slower CI runner fits
DOCTOR_TIMEOUT_S = 300


class CheckFailed(RuntimeError):
    pass


def expect(ok: bool, what: str) -> None:
    if not ok:
        raise CheckFailed(what)


class PiCheck:
    def __init__(self, repo: Path, work: Path, rootfs: Path, model: PiModel, steps: int):
        self.repo = repo
        self.work = work
        self.root = rootfs
        self.model = model
        self.steps = steps
        self.board = Board(rootfs, model)
        self.facts: dict = {"board": model.name, "qemu_cpu": model.qemu_cpu, "actor": ACTOR_ID}
        self.broker: TlsBroker | None = None
        self.port = free_port()

    def log(self, name: str) -> Path:
        return self.work / f"{name}.log"

    # --- host ---------------------------------------------------------------------------

    def flash(self, wheelhouse_cache: Path) -> None:
        """A deployment's credentials made for another board (pi-emu-00, never flashed), so
        that flash issues this board's certificate and password itself, as it does for a
        new board, and adds it to the broker's password file (the broker starts after)."""
        w = self.work
        cli(self.repo, ["keygen", str(w / "learner.key")], self.log("keygen"))
        cli(
            self.repo,
            [
                "credentials",
                str(w / "creds"),
                "--actors",
                OTHER_ID,
                "--tls",
                "--passwords",
                "--server-name",
                "127.0.0.1",
            ],
            self.log("credentials"),
        )
        cli(
            self.repo,
            [
                "flash",
                "--board",
                self.model.name,
                "--broker",
                f"mqtts://127.0.0.1:{self.port}",
                "--run",
                RUN,
                "--env",
                "CartPole-v1",
                "--policy-key",
                str(w / "learner.pub"),
                "--credentials",
                str(w / "creds"),
                "--ids",
                ACTOR_ID,
                "--out",
                str(w / "bundles"),
                "--python",
                "3.11",
                "--wheelhouse-cache",
                str(wheelhouse_cache),
            ],
            self.log("flash"),
            timeout=900,
        )
        self.bundle = w / "bundles" / ACTOR_ID
        for name in (
            "install.sh",
            "user-data",
            "etc/board.yaml",
            "edge-rl-actor.service",
            "reference/model.tflite",
            "reference/expected.npz",
        ):
            expect((self.bundle / name).is_file(), f"the bundle has no {name} ({self.bundle})")

    def start_broker(self) -> None:
        self.broker = TlsBroker(self.repo, self.work / "creds", self.work, port=self.port)

    # --- board --------------------------------------------------------------------------

    def first_boot_commands(self) -> list[list[str]]:
        """user-data's runcmd, each as an argv (a string runs under sh, as cloud-init does),
        install.sh told --no-start: there is no systemd in a chroot."""
        doc = yaml.safe_load((self.bundle / "user-data").read_text())
        cmds = []
        for item in doc.get("runcmd", []):
            argv = list(item) if isinstance(item, list) else ["sh", "-c", item]
            if any(a.endswith("install.sh") for a in argv):
                argv.append("--no-start")
            cmds.append([str(a) for a in argv])
        expect(any("--no-start" in c for c in cmds), "user-data's runcmd runs no install.sh")
        return cmds

    def install(self) -> None:
        """The boot partition is FAT: no owners or modes, so the bundle is copied without
        them, and first boot's runcmd runs as root."""
        target = self.root / BUNDLE_ON_BOARD
        shutil.copytree(self.bundle, target, copy_function=shutil.copyfile)
        for argv in self.first_boot_commands():
            rc = self.board.run(argv, self.log("install"), INSTALL_TIMEOUT_S)
            expect(rc == 0, f"first boot's {' '.join(argv)} exited {rc}; see {self.log('install')}")
        self.check_installed()

    def reinstall(self) -> None:
        for argv in self.first_boot_commands():
            rc = self.board.run(argv, self.log("reinstall"), INSTALL_TIMEOUT_S)
            expect(
                rc == 0,
                f"install.sh again exited {rc} (must be idempotent); see {self.log('reinstall')}",
            )
        self.check_installed()

    def check_installed(self) -> None:
        uid, gid, home = passwd_entry(self.root, "edge-rl")
        shell = next(
            ln.split(":")[6]
            for ln in (self.root / "etc/passwd").read_text().splitlines()
            if ln.startswith("edge-rl:")
        )
        expect(uid < 1000 and shell.endswith("nologin"), f"edge-rl is no system user ({shell})")
        creds = self.root / "etc/edge-rl/credentials"
        secrets = [p for p in creds.iterdir() if p.suffix == ".key" or p.name == "password"]
        expect(bool(secrets), f"no key or password installed in {creds}")
        for p in secrets:
            st = p.stat()
            expect(
                st.st_mode & 0o077 == 0 and st.st_uid == uid,
                f"{p} is mode {st.st_mode & 0o777:o} owner {st.st_uid} (want 0600, edge-rl)",
            )
        left = [
            p.name
            for p in (self.root / BUNDLE_ON_BOARD / "etc/credentials").iterdir()
            if p.suffix == ".key" or p.name == "password"
        ]
        expect(not left, f"secrets left on the boot partition after first boot: {left}")
        unit = self.root / "etc/systemd/system/edge-rl-actor.service"
        expect(unit.is_file(), f"no unit installed at {unit}")
        self.service = read_service(unit)

    def doctor(self, board: Board, name: str, *extra: str) -> tuple[int, str]:
        log = self.log(name)
        log.write_text("")
        argv = [
            "/opt/edge-rl/venv/bin/edge-rl",
            "doctor",
            "--config",
            "/etc/edge-rl/board.yaml",
            *extra,
        ]
        rc = board.run(as_user(self.root, self.service.user, argv), log, DOCTOR_TIMEOUT_S)
        return rc, log.read_text()

    def run_doctor(self) -> str:
        rc, out = self.doctor(self.board, "doctor")
        expect(rc == 0, f"the doctor failed on the board (exit {rc}):\n{out}")
        expect("bit-identical" in out, f"the doctor did not compare the reference model:\n{out}")
        return out

    def negative_control(self) -> str:
        """The doctor must catch an emulated CPU that computes int8 differently."""
        wrong = Board(self.root, replace(self.model, name=f"{self.model.name}-max", qemu_cpu="max"))
        rc, out = self.doctor(wrong, "doctor-max", "--skip-broker")
        bad = [ln for ln in out.splitlines() if "FAIL" in ln and "reference" in ln]
        expect(
            rc != 0 and bool(bad),
            f"the doctor under QEMU_CPU=max did not fail its reference check (exit {rc}):\n{out}",
        )
        return bad[0]


def timed(facts: dict, name: str, fn, *args):
    t0 = time.monotonic()
    print(f"== {name} ...", flush=True)
    try:
        return fn(*args)
    finally:
        facts[f"{name}_s"] = round(time.monotonic() - t0, 1)
        print(f"== {name}: {facts[f'{name}_s']} s", flush=True)
