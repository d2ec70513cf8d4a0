"""``edge-rl doctor``: can this board act? One check per thing a run needs, each with a fix.

    checks = run_checks(Path("/etc/edge-rl/board.yaml"), reference=None, broker=True)
    for c in checks: print(c.line())      # "ok    litert      ai_edge_litert 2.3.0"

In order: the board file; the learner's public key; LiteRT imports; the XNNPACK delegate is
created (in a child process: LiteRT logs that line once per process); the bundle's
reference model gives the outputs recorded on the host bit for bit; the clock is not
before the bundle was made nor outside the certificates' validity; the env is made and
reset; the credentials' files are there and private; every broker of its URL list accepts
this board's login over TLS (broker_check.py: one check per URL). A check that cannot run
because an earlier one failed says so. Board side: no TensorFlow.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np

from edge_rl.boards import BoardConfig, load_board
from edge_rl.deploy.broker_check import check_brokers, check_credentials
from edge_rl.deploy.check import Check, Failed, run_check, skipped


def run_checks(
    config: Path, reference: Path | None = None, *, broker: bool = True, timeout: float = 10.0
) -> list[Check]:
    checks: list[Check] = []
    board: list[BoardConfig] = []
    checks.append(run_check("board", lambda: _board(config, board)))
    checks.append(run_check("policy key", lambda: _policy_key(board)))
    checks.append(run_check("litert", lambda: _litert(board)))
    ref = reference or _find_reference(config)
    checks.append(run_check("xnnpack", lambda: _xnnpack(ref, board, timeout)))
    checks.append(run_check("reference", lambda: _reference(ref, board)))
    checks.append(run_check("clock", lambda: _clock(ref, board)))
    if not board:
        names = ("env", "auth", *(("broker",) if broker else ()))
        return [*checks, *(skipped(n, "the board file did not load") for n in names)]
    checks.append(run_check("env", lambda: _env(board[0])))
    checks.append(run_check("auth", lambda: check_credentials(board[0])))
    if broker:
        checks.extend(check_brokers(board[0], timeout))
    return checks


def _find_reference(config: Path) -> Path:
    for d in (config.parent / "reference", config.parent.parent / "reference"):
        if (d / "expected.npz").exists():
            return d
    return config.parent / "reference"


def _board(config: Path, out: list[BoardConfig]) -> str:
    try:
        b = load_board(config)
    except FileNotFoundError as e:
        raise Failed(
            str(e), "give the board's own file: --config /etc/edge-rl/board.yaml"
        ) from None
    except ValueError as e:
        raise Failed(str(e), "fix the key named, or re-flash the board (edge-rl flash)") from None
    if b.actor is None:
        raise Failed(
            f"{config} has no actor: section (id, run, env, broker)",
            "use the board.yaml edge-rl flash wrote for this board",
        )
    out.append(b)
    a = b.actor
    return f"{config}: board {b.board}, actor {a.id}, run {a.run}, env {a.env}, {a.broker}"


def _need(board: list[BoardConfig]) -> BoardConfig:
    if not board:
        raise Failed("not checked: the board file did not load", "fix the board check first")
    return board[0]


def _policy_key(board: list[BoardConfig]) -> str:
    from edge_rl.wire.signing import Verifier

    b = _need(board)
    if not b.policy_public_key:
        raise Failed(
            "the board file names no policy_public_key",
            "copy the learner's public key (edge-rl keygen's KEY.pub); re-flash",
        )
    try:
        verifier = Verifier.from_file(Path(b.policy_public_key))
    except ValueError as e:
        raise Failed(str(e), "copy the learner's .pub file there (re-flash)") from None
    return f"{b.policy_public_key} (key id {verifier.key_id.hex()})"


def _litert(board: list[BoardConfig]) -> str:
    from edge_rl.runtime.litert import interpreter_class

    prefer = board[0].runtime if board else "ai_edge_litert"
    try:
        _, name = interpreter_class(prefer)
    except ImportError as e:
        raise Failed(
            str(e),
            "pip install 'edge-rl[edge]' into this venv (aarch64 or x86-64 "
            "only: ai-edge-litert has no 32-bit ARM wheels)",
        ) from None
    return f"{name} {_version(name)}" + ("" if name == prefer else f" (wanted {prefer})")


def _xnnpack(ref: Path, board: list[BoardConfig], timeout: float) -> str:
    model = ref / "model.tflite"
    if not model.exists():
        raise Failed(f"no reference model {model}", "copy the bundle's reference/ (re-flash)")
    runtime = board[0].runtime if board else "ai_edge_litert"
    code = (
        "import sys; from edge_rl.runtime.litert import TFLitePolicy; "
        "TFLitePolicy(open(sys.argv[1], 'rb').read(), runtime=sys.argv[2])"
    )
    try:
        p = subprocess.run(
            [sys.executable, "-c", code, str(model), runtime],
            capture_output=True,
            timeout=max(timeout, 30.0),
        )
    except subprocess.TimeoutExpired:
        raise Failed("loading the model took too long", "check the board's load (top)") from None
    err = p.stderr.decode(errors="replace")
    if p.returncode != 0:
        last = err.strip().splitlines()[-1] if err.strip() else f"exit status {p.returncode}"
        raise Failed(
            f"the interpreter did not load: {last}",
            "reinstall ai-edge-litert; under QEMU give the rootfs an ARM "
            "/proc/cpuinfo (docs/boards.md)",
        )
    if "XNNPACK delegate" not in err:
        raise Failed(
            "LiteRT loaded the model without the XNNPACK delegate",
            "use ai-edge-litert (runtime: ai_edge_litert); tflite-runtime 2.14 "
            "does not apply XNNPACK",
        )
    return "delegate created"


def _reference(ref: Path, board: list[BoardConfig]) -> str:
    from edge_rl.runtime.litert import TFLitePolicy

    expected = _expected(ref)
    b = board[0] if board else None
    policy = TFLitePolicy(
        (ref / "model.tflite").read_bytes(),
        num_threads=1,
        runtime=b.runtime if b else "ai_edge_litert",
    )
    got = policy.batch(expected["inputs"])  # [n, out] float32
    want = np.asarray(expected["outputs"], np.float32)
    if got.shape != want.shape:
        raise Failed(
            f"outputs of shape {got.shape}, expected {want.shape}",
            "the bundle's model and expected.npz do not belong together: re-flash",
        )
    differ = int(np.sum(np.any(got.view(np.uint32) != want.view(np.uint32), axis=-1)))
    if differ:
        worst = float(np.max(np.abs(got - want)))
        raise Failed(
            f"{differ} of {len(want)} outputs differ from the host's "
            f"({expected['host']}; largest difference {worst:.3g})",
            "compare ai-edge-litert's version with the host's; under QEMU pin "
            "QEMU_CPU=cortex-a72 (Pi 4) or cortex-a76 (Pi 5); or the bundle's "
            "reference/ was altered: re-flash",
        )
    return f"{len(want)} of {len(want)} outputs bit-identical to the host's ({expected['host']})"


def _expected(ref: Path) -> dict:
    path = ref / "expected.npz"
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in ("inputs", "outputs", "made_unix", "host")}
    except (OSError, KeyError, ValueError) as e:
        raise Failed(
            f"cannot read {path}: {e}", "copy the bundle's reference/ (re-flash)"
        ) from None


def _clock(ref: Path, board: list[BoardConfig]) -> str:
    now = time.time()
    made = float(_expected(ref)["made_unix"])
    if now < made - 300:  # five minutes of slack for a host and a board that disagree a little
        raise Failed(
            f"the clock says {_iso(now)}, before this bundle was made ({_iso(made)})",
            "let NTP set it (timedatectl; the network must be up) or set it: "
            "sudo date -s 'YYYY-MM-DD HH:MM'",
        )
    for path in _certificates(board):
        from cryptography import x509

        cert = x509.load_pem_x509_certificate(Path(path).read_bytes())
        start, end = cert.not_valid_before_utc.timestamp(), cert.not_valid_after_utc.timestamp()
        if not start <= now <= end:
            raise Failed(
                f"the clock says {_iso(now)}, outside {path}'s validity "
                f"({_iso(start)} to {_iso(end)})",
                "set the clock (NTP); an expired certificate: edge-rl flash --rotate",
            )
    return f"{_iso(now)} (bundle made {_iso(made)})"


def _certificates(board: list[BoardConfig]) -> list[str]:
    if not board:
        return []
    auth = board[0].auth
    return [p for p in (auth.ca_file, auth.cert_file) if p and Path(p).exists()]


def _env(board: BoardConfig) -> str:
    from edge_rl.envs import make_env

    env_id = board.actor.env
    try:
        env = make_env(env_id)
        env.reset(seed=0)
        env.close()
    except (ValueError, ImportError) as e:
        raise Failed(
            f"cannot make {env_id!r}: {e}",
            "pip install the env's package into /opt/edge-rl/venv (MuJoCo: 'gymnasium[mujoco]')",
        ) from None
    return f"{env_id} made and reset"


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _version(name: str) -> str:
    try:
        return metadata.version(name.replace("_", "-"))
    except metadata.PackageNotFoundError:
        return "?"
