"""Section 2: actor env-steps/s on CartPole-v1, a ladder up to the real ``ActorNode``.

    results = bench_actor(models, broker, quick)     # models from _bench_network.build_models

Each rung adds one thing the real actor does: bare ``env.step``; the bare int8 model loop;
``TFLitePolicy`` and ``Explorer``'s ε-greedy; ``Batcher`` rows and ``encode_transitions``;
then the real ``ActorNode`` against a real Mosquitto. Side rows: the bare loop with the fp32
model, and with ``ndarray.argmax`` (the call the node makes) instead of ``np.argmax``. The
rows take turns in short slices, so that load on a shared machine hits them alike, and each
reports the CPU time of its own thread too: on a loaded machine the scheduler favours the
node's thread, which blocks on every publish, over the in-process rows, which never block,
so there the CPU columns are the ones to compare.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
from _common import (
    EPSILON,
    NETS,
    SEED,
    md_table,
    paho_clock,
    process_clock,
    read_clocks,
    thread_clock,
)

ACTOR_NODE = "ActorNode (real MQTT; policy + control via topics)"
# The node at the previous default, batch_size 128: its per-batch work over half the steps.
ACTOR_NODE_SIDE = "(ActorNode with batch_size 128)"


class Runnable(Protocol):
    def run(self, seconds: float) -> tuple[int, int, float, float]: ...
    def close(self) -> None: ...


class Rung:
    """One in-process rung of the ladder: a step function with state kept across slices."""

    def __init__(self, step: Callable[[], bool], close: Callable[[], None]) -> None:
        self.step = step
        self.close = close

    def run(self, seconds: float) -> tuple[int, int, float, float]:
        """Steps, episodes, wall s, CPU s of this thread, for ``seconds`` of stepping."""
        step, pc = self.step, time.perf_counter
        steps = episodes = 0
        c0, t0 = time.thread_time(), pc()
        deadline = t0 + seconds
        while True:
            for _ in range(32):  # read the clock once per 32 steps, not on every step
                episodes += step()
            steps += 32
            if pc() >= deadline:
                return steps, episodes, pc() - t0, time.thread_time() - c0


def make_rungs(ex_int8, ex_fp32) -> dict[str, Rung]:
    """The in-process rungs, bottom up; each adds one thing the real actor does."""
    return {
        "env.step only (fixed random actions)": _env_only_rung(),
        "bare int8: env.step(argmax(invoke(obs)))": _bare_rung(ex_int8),
        "+ TFLitePolicy + Explorer (ε-greedy, int8)": _policy_rung(ex_int8, batching=False),
        "+ Batcher + encode_transitions (no MQTT)": _policy_rung(ex_int8, batching=True),
        "(bare fp32: the bare loop with the fp32 model)": _bare_rung(ex_fp32),
        "(bare int8 with q.argmax(), as the node calls it)": _bare_rung(ex_int8, method=True),
    }


def _env_only_rung() -> Rung:
    """``env.step`` with fixed random actions: the floor every other rung stands on."""
    from edge_rl.envs import make_env

    env = make_env("CartPole-v1")
    env.reset(seed=SEED)
    actions = np.random.default_rng(SEED).integers(0, 2, size=4096).astype(np.int64)
    it = [0]

    def step() -> bool:
        i = it[0] = (it[0] + 1) & 4095
        _, _, term, trunc, _ = env.step(actions[i])
        if term or trunc:
            env.reset()
            return True
        return False

    return Rung(step, env.close)


def _bare_rung(exported, method: bool = False) -> Rung:
    """The model invoked on the interpreter directly, greedy, no wrapper. ``method``: the
    argmax by the ndarray's method, as ``Explorer.act`` takes it, not by ``np.argmax`` (a
    Python-level function: ~1 µs more per call), so that the node's overhead over the bare
    loop can be read without that difference too."""
    from ai_edge_litert.interpreter import Interpreter

    from edge_rl.envs import make_env
    from edge_rl.runtime.litert import TFLitePolicy

    env = make_env("CartPole-v1")
    interp = Interpreter(model_content=exported.tflite, num_threads=1)
    interp.allocate_tensors()
    i_in = interp.get_input_details()[0]["index"]
    i_out = interp.get_output_details()[0]["index"]
    st, inv, gt, argmax = interp.set_tensor, interp.invoke, interp.get_tensor, np.argmax
    # TFLitePolicy's own input map (a float32 reshape: the model normalises and quantises
    # inside), so that the next rung adds only what the wrapper does beyond it, and ε-greedy.
    to_input = TFLitePolicy(exported.tflite, num_threads=1).to_input
    state = [env.reset(seed=SEED)[0]]

    def step() -> bool:
        st(i_in, to_input(state[0]))
        inv()
        obs, _, term, trunc, _ = env.step(argmax(gt(i_out)[0]))
        if term or trunc:
            state[0] = env.reset()[0]
            return True
        state[0] = obs
        return False

    def step_method() -> bool:
        st(i_in, to_input(state[0]))
        inv()
        obs, _, term, trunc, _ = env.step(gt(i_out)[0].argmax())
        if term or trunc:
            state[0] = env.reset()[0]
            return True
        state[0] = obs
        return False

    return Rung(step_method if method else step, env.close)


def _policy_rung(exported, batching: bool) -> Rung:
    """``TFLitePolicy`` and ``Explorer`` (its draws once per batch of the board's default
    ``batch_size`` steps, as the node plans a stint); with ``batching``, ``Batcher`` rows
    and the encoder once per batch."""
    from edge_rl.actor.batching import Batcher
    from edge_rl.actor.exploration import Explorer
    from edge_rl.boards import BoardConfig
    from edge_rl.envs import make_env
    from edge_rl.runtime.litert import TFLitePolicy
    from edge_rl.specs import EnvSpec
    from edge_rl.wire.transitions import encode_transitions

    policy = TFLitePolicy(exported.tflite, num_threads=1).__call__
    env = make_env("CartPole-v1")
    explorer = Explorer(EnvSpec(obs_shape=(4,), num_actions=2), np.random.default_rng(SEED))
    batch = BoardConfig(board="bench-host").batch_size
    batcher = Batcher("bench", 1, batch, 0.5)
    encode, exploration = encode_transitions, {"epsilon": EPSILON}
    state = [env.reset(seed=SEED)[0], 0]  # obs, the step's index in its block

    def step() -> bool:
        obs, i = state
        if i == 0:
            explorer.plan(exploration, batch)
            if batching:
                batcher.open(1)
        action = explorer.act(policy(obs), i)
        next_obs, reward, term, trunc, _ = env.step(action)
        state[1] = (i + 1) % batch
        if batching:
            batcher.append((obs, action, reward, next_obs, term, trunc, False))
            if i == batch - 1:
                encode(batcher.take())
        if term or trunc:
            state[0] = env.reset()[0]
            return True
        state[0] = next_obs
        return False

    return Rung(step, env.close)


def policy_payload(exported, run: str) -> bytes:
    """A real encoded policy bundle (version 1, zlib) for CartPole-v1."""
    from edge_rl.specs import EnvSpec
    from edge_rl.types import PolicyBundle, PolicyManifest
    from edge_rl.wire.policy import compress_model, encode_policy

    manifest = PolicyManifest(
        policy_version=1,
        algo="dqn",
        env_id="CartPole-v1",
        env_spec=EnvSpec(obs_shape=(4,), num_actions=2),
        precision=exported.precision,
        input_quant=exported.input_quant,
        output_quant=exported.output_quant,
        obs_mean=exported.obs_mean,
        obs_std=exported.obs_std,
        exploration={"epsilon": EPSILON},
        learner_step=0,
        model_sha256=hashlib.sha256(exported.tflite).hexdigest(),
        model_size=len(exported.tflite),
        codec="zlib",
        run=run,
        run_id=BENCH_RUN_ID,
        created_unix=time.time(),
    )
    bundle = PolicyBundle(manifest, compress_model(exported.tflite, "zlib"))
    return encode_policy(bundle, _signer())


def _signer():
    """The benchmark's own signing key (made once per process): its policies are signed as
    the learner's are, so the actor rung verifies them as a board does."""
    global _SIGNER
    if _SIGNER is None:
        from edge_rl.wire.signing import Signer

        _SIGNER = Signer.generate()
    return _SIGNER


_SIGNER = None
BENCH_RUN_ID = "bench0000000000"  # the run start the benchmark's policy and control name


class ActorRung:
    """The real ``ActorNode`` in a thread against Mosquitto, run in slices.

    The policy (a real encoded bundle, retained), control ``running`` and a credit grant
    with no practical limit (retained) arrive on their topics. Between slices the node is
    parked by setting its run control's state to ``paused`` (what a ``paused`` control does), so
    that it takes turns with the in-process rungs instead of competing with them for the CPU.
    """

    def __init__(
        self, broker, exported, batch_size: int | None = None, actor_id: str = "bench-00"
    ) -> None:
        """``batch_size``: the board's, if not its default. Two rungs in one process need
        two ``actor_id`` (their MQTT client ids)."""
        from edge_rl.actor.node import ActorNode, ActorOptions
        from edge_rl.boards import BoardConfig, Emulation

        run = f"bench-{uuid.uuid4().hex[:8]}"
        board = BoardConfig(board="bench-host", emulation=Emulation(compute_slowdown=1.0))
        if batch_size is not None:
            board = dataclasses.replace(board, batch_size=batch_size)
        import tempfile
        from pathlib import Path

        key = Path(tempfile.mkdtemp(prefix="edge-rl-bench-")) / "learner.pub"
        _signer().write_public(key)
        opts = ActorOptions(
            actor_id=actor_id,
            env="CartPole-v1",
            broker=broker.url,
            run=run,
            seed=SEED,
            policy_key=str(key),
        )
        self.node = node = ActorNode(board, opts)
        self.learner = _publish_policy_and_control(
            broker.url, run, exported, node.session, actor_id
        )
        self.publish_ns = [0, 0]  # time inside MqttTransport.publish, calls
        self.switches = [0, 0]  # the loop thread's voluntary, involuntary context switches
        real_publish = node.transport.publish

        def timed_publish(*args, **kwargs):
            t0 = time.perf_counter_ns()
            try:
                return real_publish(*args, **kwargs)
            finally:
                self.publish_ns[0] += time.perf_counter_ns() - t0
                self.publish_ns[1] += 1

        node.transport.publish = timed_publish  # an instance attribute: this node only
        self.error: list[BaseException] = []
        self.thread = threading.Thread(target=self._target, name="actor-node", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not self.error:
            if node.slot.current is not None and node.rc.state == "running" and node.env_steps:
                break
            time.sleep(0.01)
        else:
            self.close()
            raise RuntimeError(f"actor did not start running a policy: {self.error or 'timeout'}")
        time.sleep(0.2)  # warm-up
        node.rc.state = "paused"
        self.clocks = {
            "actor loop": thread_clock(self.thread.ident),
            "paho network": paho_clock(node.transport),
            "policy slot": thread_clock(node.slot._thread.ident),
            "mosquitto (process)": process_clock(broker.pid),
        }
        self.cpu = dict.fromkeys(self.clocks, 0.0)
        self.batches = self.publish_calls = 0
        self.publish_s = 0.0

    def _target(self) -> None:
        try:
            self.node.run()
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            self.error.append(e)

    def run(self, seconds: float) -> tuple[int, int, float, float]:
        node = self.node
        node.rc.state = "running"
        # A paused node looks at its state when its wait ends (up to 0.1 s): the slice
        # starts at its first step, or the wake-up would count against this row alone.
        start, deadline = node.env_steps, time.monotonic() + 1.0
        while node.env_steps == start and time.monotonic() < deadline:
            time.sleep(0.001)
        c0 = read_clocks(self.clocks)
        s0, e0, b0, p0 = node.env_steps, node.episodes, node.batches_sent, list(self.publish_ns)
        w0 = context_switches(self.thread.native_id)
        t0 = time.perf_counter()
        time.sleep(seconds)
        s1, e1, b1, p1 = node.env_steps, node.episodes, node.batches_sent, list(self.publish_ns)
        w1 = context_switches(self.thread.native_id)
        t1 = time.perf_counter()
        c1 = read_clocks(self.clocks)
        node.rc.state = "paused"
        if self.error:
            raise RuntimeError(f"actor node failed: {self.error[0]!r}")
        for k in c0:
            self.cpu[k] += c1[k] - c0[k]
        self.batches += b1 - b0
        self.switches = [a + b - c for a, b, c in zip(self.switches, w1, w0, strict=True)]
        self.publish_calls += p1[1] - p0[1]
        self.publish_s += (p1[0] - p0[0]) / 1e9
        return s1 - s0, e1 - e0, t1 - t0, c1["actor loop"] - c0["actor loop"]

    def close(self) -> None:
        self.node.stop()
        self.thread.join(20)
        self.learner.stop()


def context_switches(tid: int | None) -> tuple[int, int]:
    """A thread of this process's voluntary and involuntary context switches so far (Linux
    ``/proc``; zeros elsewhere). A voluntary one is the thread blocking: on a lock, the
    GIL, a socket."""
    counts = {"voluntary_ctxt_switches": 0, "nonvoluntary_ctxt_switches": 0}
    try:
        with open(f"/proc/self/task/{tid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in counts:
                    counts[key] = int(value)
    except OSError:
        pass
    return counts["voluntary_ctxt_switches"], counts["nonvoluntary_ctxt_switches"]


def _publish_policy_and_control(url: str, run: str, exported, session: int, actor_id: str):
    """What a learner would retain for the actor: policy v1, control ``running`` and a
    credit grant to the actor's process (``session``) of 10^12 steps: no practical limit.
    Returns the (started) transport; stop it when done.
    """
    from edge_rl.transport.mqtt import MqttTransport
    from edge_rl.types import ControlMessage, CreditGrant
    from edge_rl.wire.messages import encode_control, encode_credit
    from edge_rl.wire.topics import Topics

    topics = Topics("edge-rl", run)
    learner = MqttTransport(url, client_id=f"bench-learner-{run}")
    learner.start()
    if not learner.wait_connected(10):
        raise RuntimeError(f"no broker at {url}")
    ok = learner.publish(topics.policy, policy_payload(exported, run), retain=True, wait=5)
    control = encode_control(ControlMessage("running", BENCH_RUN_ID))
    ok = ok and learner.publish(topics.control, control, retain=True, wait=5)
    grant = encode_credit(CreditGrant(BENCH_RUN_ID, session, 10**12))
    ok = ok and learner.publish(topics.credit(actor_id), grant, retain=True, wait=5)
    if not ok:
        learner.stop()
        raise RuntimeError("could not publish the policy / control messages")
    return learner


def bench_actor(models: dict[str, Any], broker, quick: bool) -> dict[str, Any]:
    seconds, slice_s = (1.5, 0.25) if quick else (10.0, 0.5)
    label = NETS[0][0]
    ex8, ex32 = models[label]["int8"]["exported"], models[label]["fp32"]["exported"]
    rungs: dict[str, Runnable] = dict(make_rungs(ex8, ex32))
    names = list(rungs)
    rungs[ACTOR_NODE] = actor = ActorRung(broker, ex8)
    rungs[ACTOR_NODE_SIDE] = ActorRung(broker, ex8, batch_size=128, actor_id="bench-128")
    order = names[:-2] + [ACTOR_NODE, *names[-2:], ACTOR_NODE_SIDE]  # the side notes last
    acc = {n: {"steps": 0, "episodes": 0, "wall": 0.0, "cpu": 0.0, "rates": []} for n in order}
    n_slices = round(seconds / slice_s)
    try:
        for r in range(n_slices):  # round-robin slices, rotating start
            for name in order[r % len(order) :] + order[: r % len(order)]:
                steps, eps, wall, cpu = rungs[name].run(slice_s)
                a = acc[name]
                a["steps"] += steps
                a["episodes"] += eps
                a["wall"] += wall
                a["cpu"] += cpu
                a["rates"].append(steps / wall)
        costs = _call_costs(actor, seconds / 2)
    finally:
        for rung in rungs.values():
            rung.close()

    print(
        f"## 2. Actor env-steps/s on CartPole-v1 ({seconds:g} s per row, in "
        f"{n_slices} round-robin slices of {slice_s:g} s)\n"
    )
    out = {
        name: {
            "steps_per_s": float(np.median(a["rates"])),
            "wall_us_per_step": 1e6 * a["wall"] / a["steps"],
            "cpu_us_per_step": 1e6 * a["cpu"] / a["steps"],
            "cpu_per_wall": a["cpu"] / a["wall"],
            "steps": a["steps"],
            "steps_per_episode": a["steps"] / max(a["episodes"], 1),
        }
        for name, a in acc.items()
    }
    _print_ladder(out, bare=out[names[1]])
    paired = _print_paired(acc, bare=names[1], rows=[ACTOR_NODE, ACTOR_NODE_SIDE])
    node = _print_actor_node(actor, acc[ACTOR_NODE])
    node["call_costs"] = _print_call_costs(costs)
    return {
        "seconds_per_row": seconds,
        "slice_s": slice_s,
        "loops": out,
        "paired_with_bare": paired,
        "actor_node": node,
    }


def _call_costs(actor: ActorRung, seconds: float) -> dict[str, Any]:
    """The CPU of the node's per-batch work, per call: each call timed on the actor
    thread's own clock, in a pass of its own after the timed slices (so that the wrappers
    cost the ladder nothing, and the ActorNode row's figures leave this pass out)."""
    import edge_rl.actor.node as node_module

    node = actor.node
    spent: dict[str, list[float]] = {}

    def timed(name: str, fn: Callable) -> Callable:
        spent[name] = [0.0, 0]

        def call(*args, **kwargs):
            c0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                s = spent[name]
                s[0] += time.thread_time() - c0
                s[1] += 1

        return call

    kept = (dict(actor.cpu), actor.batches, actor.publish_calls, actor.publish_s)
    encode, publish = node_module.encode_transitions, node.transport.publish
    node.explorer.plan = timed("Explorer.plan", node.explorer.plan)
    node.batcher.take = timed("Batcher.take", node.batcher.take)
    node_module.encode_transitions = timed("encode_transitions", encode)
    node.transport.publish = timed("MqttTransport.publish", publish)
    try:
        steps, _, _, cpu = actor.run(seconds)
    finally:
        node_module.encode_transitions = encode
        node.transport.publish = publish
        del node.explorer.plan, node.batcher.take  # the classes' own methods again
        actor.cpu, actor.batches, actor.publish_calls, actor.publish_s = kept
    return {"steps": steps, "actor_loop_cpu_s": cpu, "calls": spent}


def _print_call_costs(costs: dict[str, Any]) -> dict[str, Any]:
    """One line: each piece's CPU per call and per env step. Returns them for the JSON."""
    steps = max(costs["steps"], 1)
    pieces = {
        name: {"calls": n, "us_per_call": 1e6 * s / max(n, 1), "us_per_step": 1e6 * s / steps}
        for name, (s, n) in costs["calls"].items()
    }
    total = sum(p["us_per_step"] for p in pieces.values())
    loop = 1e6 * costs["actor_loop_cpu_s"] / steps
    print(
        f"ActorNode's per-batch work, actor thread CPU (a pass of its own, {steps:,} steps; "
        f"actor loop {loop:.2f} µs/step in it): "
        + ", ".join(
            f"`{k}` {p['us_per_call']:.0f} µs/call ({p['calls']} calls) = "
            f"{p['us_per_step']:.2f} µs/step"
            for k, p in pieces.items()
        )
        + f"; together {total:.2f} µs/step.\n"
    )
    return {"steps": steps, "actor_loop_us_per_step": loop, "pieces": pieces}


def _print_ladder(out: dict[str, dict[str, float]], bare: dict[str, float]) -> None:
    rows, prev = [], None
    for name, o in out.items():
        side = name.startswith("(")  # a side note, not a rung: no delta, not a base for one
        delta = "" if prev is None or side else f"{o['cpu_us_per_step'] - prev:+.2f}"
        rows.append(
            [
                name,
                f"{o['steps_per_s']:,.0f}",
                f"{1e6 / o['steps_per_s']:.2f}",
                f"{o['cpu_us_per_step']:.2f}",
                delta,
                f"{bare['steps_per_s'] / o['steps_per_s']:.2f}",
                f"{o['cpu_us_per_step'] / bare['cpu_us_per_step']:.2f}",
                f"{o['steps_per_episode']:.1f}",
            ]
        )
        if not side:
            prev = o["cpu_us_per_step"]
    headers = [
        "loop",
        "steps/s (median slice)",
        "wall µs/step",
        "CPU µs/step",
        "Δ CPU µs vs row above",
        "wall: this / bare int8",
        "CPU: this / bare int8",
        "steps/episode",
    ]
    print(md_table(headers, rows))


def _print_paired(acc: dict[str, dict], bare: str, rows: list[str]) -> dict[str, dict]:
    """Each row's steps/s over the bare loop's in the same round (every row runs one slice
    a round, so a slower machine for a few seconds slows both): the median and range over
    the rounds. Returns them for the JSON."""
    out, parts = {}, []
    for name in rows:
        ratios = np.array(acc[name]["rates"]) / np.array(acc[bare]["rates"])
        out[name] = {"median": float(np.median(ratios)), "min": ratios.min(), "max": ratios.max()}
        o = out[name]
        parts.append(f"{name}: {o['median']:.2f} ({o['min']:.2f}-{o['max']:.2f})")
    rounds = len(acc[bare]["rates"])
    print(
        f"\nSteps/s over the bare int8 loop's in the same round, median (range) over the "
        f"{rounds} rounds: " + "; ".join(parts) + "."
    )
    return {k: {m: float(v) for m, v in o.items()} for k, o in out.items()}


def _print_actor_node(actor: ActorRung, a: dict[str, Any]) -> dict[str, Any]:
    """The ActorNode row's breakdown: publish time, CPU by thread. Returns it for the JSON."""
    cpu = {k: v / a["wall"] for k, v in actor.cpu.items()}
    per_step = {k: 1e6 * v / a["steps"] for k, v in actor.cpu.items()}
    publish_us_step = 1e6 * actor.publish_s / a["steps"]
    node = {
        "batches": actor.batches,
        "publish_calls": actor.publish_calls,
        "publish_us_per_call": 1e6 * actor.publish_s / max(actor.publish_calls, 1),
        "publish_us_per_step": publish_us_step,
        "cpu_share_of_one_core": cpu,
        "cpu_us_per_step_by_thread": per_step,
        "policy_version": actor.node.slot.version,
        "spool_dropped_batches": actor.node.spool.dropped_batches,
        "loop_switches_per_batch": [n / max(actor.batches, 1) for n in actor.switches],
        "stopped_cleanly": not actor.thread.is_alive(),
    }
    print(
        f"\nActorNode: {a['steps']:,} steps under policy v{node['policy_version']}, "
        f"{actor.batches} batches published; `MqttTransport.publish` "
        f"{node['publish_us_per_call']:.0f} µs/call ({actor.publish_calls} calls incl. status) "
        f"= {publish_us_step:.2f} µs/step. CPU µs per env step by thread: "
        + ", ".join(f"{k} {v:.2f}" for k, v in per_step.items())
        + ". CPU while running, % of one core: "
        + ", ".join(f"{k} {100 * v:.0f}%" for k, v in cpu.items())
        + ". The loop thread blocked {:.1f} times per batch (voluntary context switches; "
        "involuntary {:.1f}).\n".format(*node["loop_switches_per_batch"])
    )
    return node
