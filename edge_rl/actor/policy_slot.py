"""The policy slot: verify and load new policies off the actor loop, swap between steps.

    slot = PolicySlot(spec, Verifier.from_file(key), run="cartpole", num_threads=4)
    slot.set_run(run_id)           # when the actor joins a run start: its policies only
    slot.start()
    # paho network thread, on every message on the policy topic:
    slot.offer(payload)
    # actor loop, between two env steps (one attribute read, never blocks):
    policy = slot.current          # LoadedPolicy | None
    # a rollout's target for this board (docs/protocol.md §5.5), on its own topic:
    slot.target(payload)           # a bundle to load, or the previous policy back

Verify before you parse, refuse before you act: the signature first (nothing of the
manifest is read before it holds), then the run, the version, the env spec, the model's
hash, the memory its tensors declare, and its input and output shapes; only then is the
policy swapped in. Anything refused is counted by reason (``rejected``), logged once, and
the actor keeps its last good policy (or acts randomly if it has none).

The slot keeps the policy it ran before the current one (``previous``), so that a
rollout's rollback swaps it back in without a payload: a target with an empty body that
names it by version and digest. A target with a bundle is offered like a policy from the
run's topic, and verified the same way.

Loading runs on the slot's own thread; only the newest offered payload is
kept, so a burst of publishes costs one load. ``receive_seconds`` and ``load_seconds`` add
up that thread's work over every payload, rejected ones included (the runtime breakdown).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from edge_rl.actor.shared_models import SharedModels, SharedRunner
from edge_rl.runtime.litert import TFLitePolicy
from edge_rl.specs import EnvSpec
from edge_rl.types import PolicyManifest, PolicyTarget
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.messages import decode_target
from edge_rl.wire.policy import decode_policy, decompress_model
from edge_rl.wire.signing import Verifier

log = logging.getLogger(__name__)

# Refusals that say when a policy came, not what it is: not counted as ``failed``.
ORDERING_REASONS = frozenset(("stale_version", "wrong_run"))


@dataclass(frozen=True)
class LoadedPolicy:
    manifest: PolicyManifest
    runner: TFLitePolicy | SharedRunner
    receive_seconds: float  # decode + verify + decompress
    load_seconds: float  # interpreter construction + allocate_tensors


class PolicySlot:
    def __init__(
        self,
        spec: EnvSpec,
        verifier: Verifier,
        *,
        run: str,
        run_id: str | None = None,
        num_threads: int = 1,
        max_model_bytes: int = 8_000_000,
        max_tensor_bytes: int = 64_000_000,
        runtime: str = "ai_edge_litert",
        models: SharedModels | None = None,
        on_loaded: Callable[[], None] | None = None,
    ):
        """``models``: the process's shared interpreters (actor/shared_models.py), for a
        board group's boards; ``None``, a board of its own, builds its own. ``on_loaded``:
        called on the slot's thread after each swap (a waiting actor loop wakes to report
        it)."""
        self.spec = spec
        self.models = models
        self._on_loaded = on_loaded  # the slot's thread, after each swap
        self.verifier = verifier
        self.run = run
        self.num_threads = num_threads
        self.max_model_bytes = max_model_bytes
        self.max_tensor_bytes = max_tensor_bytes
        self.runtime = runtime
        self.current: LoadedPolicy | None = None
        self.previous: LoadedPolicy | None = None  # the one current replaced: a rollback's
        self.rejected: Counter[str] = Counter()
        self.loaded = 0
        self.receive_seconds = 0.0  # decode + verify + decompress, every payload
        self.load_seconds = 0.0  # interpreter construction + allocate_tensors, every attempt
        self._pending: bytes | None = None
        # The run start policies must be of (set_run, when the actor joins one): while there
        # is none, nothing is loaded.
        self.run_id = run_id
        self._latest: bytes | None = None  # the newest payload offered, for set_run
        # The last target of a run start not joined (yet): a restarted board gets its
        # retained target before the loop has joined the run start its control names.
        self._kept_target: PolicyTarget | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="policy-slot", daemon=True)

    @property
    def version(self) -> int:
        return self.current.manifest.policy_version if self.current else 0

    @property
    def digest(self) -> str:
        """The model_sha256 of the policy loaded; "" for none."""
        return self.current.manifest.model_sha256 if self.current else ""

    @property
    def failed(self) -> int:
        """Policies refused for what they are (signature, manifest, model), not for when
        they came: what a rollout's health check counts."""
        return sum(n for r, n in self.rejected.items() if r not in ORDERING_REASONS)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop = True
        self._wake.set()
        self._thread.join(timeout=5)

    def offer(self, payload: bytes) -> None:
        """Hand over a policy payload (any thread); replaces one not yet loaded. The bytes
        offered last, again, are no news: the policy topic and a welcome may both bring one
        policy (a refused one is refused again; ``set_run`` retries it when that may help)."""
        with self._lock:
            if payload == self._latest:
                return
            self._pending = self._latest = payload
        self._wake.set()

    def set_run(self, run_id: str) -> None:
        """A new run start: its policies only, from none. The newest payload offered is
        tried again (it may have arrived before the control message that names the run)."""
        with self._lock:
            self.run_id = run_id
            self.current = self.previous = None
            self._pending = self._latest
            kept, self._kept_target = self._kept_target, None
        self._wake.set()
        if kept is not None and kept.run_id == run_id:
            self._apply(kept)  # after the policy topic's: the rollout's step wins

    def _run(self) -> None:
        while not self._stop:
            self._wake.wait()
            self._wake.clear()
            if not self._stop:
                self.load_pending()

    def load_pending(self) -> None:
        """Load the newest offered payload, if any; a refusal is counted, never raised."""
        with self._lock:
            if self.run_id is None:
                return  # kept pending until the actor joins a run start
            payload, self._pending, run_id = self._pending, None, self.run_id
        if payload is None:
            return
        try:
            loaded = self.load(payload)
            with self._lock:
                if self.run_id != run_id:
                    return  # the actor joined another run start meanwhile
                self.previous, self.current = self.current, loaded
            self.loaded += 1
            if self._on_loaded is not None:
                self._on_loaded()
        except CodecError as e:
            self._reject(e.reason, str(e))
        except Exception as e:  # noqa: BLE001 - a bad model must not kill the actor
            self._reject("load_failed", f"{type(e).__name__}: {e}")

    def target(self, payload: bytes, max_bytes: int) -> None:
        """A rollout's target for this board (any thread): its bundle is offered; an empty
        body names the policy to serve among those held. Refusals are counted by reason."""
        try:
            t = decode_target(payload, max_bytes)
        except CodecError as e:
            self._reject(e.reason, f"target: {e}")
            return
        with self._lock:
            joined = self.run_id
            if t.run_id != joined:
                self._kept_target = t  # the run start the actor may join next
        if joined is not None and t.run_id != joined:
            self._reject("wrong_run", f"target of run start {t.run_id!r}")
        elif t.run_id == joined:
            self._apply(t)

    def _apply(self, t: PolicyTarget) -> None:
        """A target of the run start joined: its bundle offered, or a held policy back."""
        if t.bundle:
            self.offer(t.bundle)
        elif not self.revert(t.policy_version, t.model_sha256):
            self._reject("not_held", f"target v{t.policy_version} is not a policy held")

    def revert(self, version: int, digest: str) -> bool:
        """Serve the held policy of ``version`` and ``digest``: the previous one swapped
        back in (the current one becomes previous), or the current one kept."""
        with self._lock:
            held = [p for p in (self.current, self.previous) if p is not None]
            match = [
                p
                for p in held
                if p.manifest.policy_version == version and p.manifest.model_sha256 == digest
            ]
            if not match:
                return False
            if match[0] is not self.current:
                self.previous, self.current = self.current, match[0]
                log.info("rolled back to policy v%d", version)
            return True

    def _reject(self, reason: str, detail: str) -> None:
        self.rejected[reason] += 1
        if self.rejected[reason] == 1:  # log once per reason, count always
            log.warning("policy rejected (%s): %s", reason, detail)

    def load(self, payload: bytes) -> LoadedPolicy:
        """Verify and load one bundle; raises ``CodecError`` for anything not to run."""
        t0 = time.perf_counter()
        try:
            m, model = self._verify(payload)
        finally:  # a rejected payload cost receive time too
            t1 = time.perf_counter()
            self.receive_seconds += t1 - t0
        try:
            runner = self._runner(m, model)
        finally:
            self.load_seconds += time.perf_counter() - t1
        return LoadedPolicy(m, runner, receive_seconds=t1 - t0, load_seconds=runner.load_seconds)

    def _runner(self, m: PolicyManifest, model: bytes) -> TFLitePolicy | SharedRunner:
        try:
            runner = self._interpreter(m, model)
        except ValueError as e:  # float I/O or the tensor bound
            raise CodecError("bad_model", str(e)) from None
        except RuntimeError as e:  # allocate_tensors can fail on a validly signed model
            raise CodecError("load_failed", str(e)) from None
        spec = self.spec
        out = (spec.num_actions,) if m.output_kind == "q_values" else spec.action_shape
        if m.output_kind != ("q_values" if spec.discrete else "action"):
            raise CodecError("spec_mismatch", f"output_kind {m.output_kind!r} for this env")
        if runner.input_shape != (1, *spec.obs_shape) or runner.output_shape != (1, *out):
            raise CodecError(
                "model_shape",
                f"model maps {runner.input_shape} -> {runner.output_shape}; this env needs "
                f"{(1, *spec.obs_shape)} -> {(1, *out)}",
            )
        # The actor loop calls the runner unguarded, so a model that cannot run once on a
        # zero observation is refused here (§7 load_failed), in model_load's time.
        try:
            shape = runner.output_shape_on_zeros()
        except (RuntimeError, ValueError) as e:
            raise CodecError("load_failed", f"the model does not run: {e}") from None
        if shape != (1, *out):
            raise CodecError("load_failed", f"the model outputs {shape}, expected {(1, *out)}")
        return runner

    def _interpreter(self, m: PolicyManifest, model: bytes) -> TFLitePolicy | SharedRunner:
        """The model in LiteRT: the process's shared interpreter of these verified bytes
        (``model``'s SHA-256 is ``m.model_sha256``: ``_verify`` checked it), or a new one."""
        settings = {
            "num_threads": self.num_threads,
            "runtime": self.runtime,
            "max_tensor_bytes": self.max_tensor_bytes,
        }
        if self.models is not None:
            return self.models.runner(model, m.model_sha256, **settings)
        return TFLitePolicy(model, **settings)

    def _verify(self, payload: bytes) -> tuple[PolicyManifest, bytes]:
        """Verify, decode, check run, version and spec, decompress and hash."""
        bundle = decode_policy(payload, self.verifier, max_bytes=self.max_model_bytes + 64 * 1024)
        m = bundle.manifest
        if m.run != self.run or m.run_id != self.run_id:
            raise CodecError(
                "wrong_run",
                f"policy of run {m.run!r} start {m.run_id!r}, actor in "
                f"{self.run!r} start {self.run_id!r}",
            )
        if m.policy_version <= self.version:
            raise CodecError(
                "stale_version", f"v{m.policy_version} is not newer than v{self.version}"
            )
        if m.env_spec != self.spec:
            raise CodecError("spec_mismatch", f"policy for {m.env_spec}, actor env is {self.spec}")
        model = decompress_model(bundle.payload, m.codec, self.max_model_bytes)
        if len(model) != m.model_size or hashlib.sha256(model).hexdigest() != m.model_sha256:
            raise CodecError("bad_hash", "model bytes do not match the manifest's sha256/size")
        return m, model
