"""Section 3: learner ingest from a real Mosquitto, and its per-batch cost without MQTT.

    results = bench_ingest(broker, quick)

A separate publisher process (multiprocessing "spawn") sends N encoded batches at QoS 1;
this process subscribes, hands payloads to a bounded queue, and an ingest thread runs
``Ingest.handle`` into a ``ReplayBuffer``, as ``edge_rl.learner.node`` does.

numpy only at import time: the publisher child imports this module to find its target.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import BATCH, SEED, md_table, paho_clock, process_clock, read_clocks

KINDS = {
    "CartPole": "CartPole-v1 (obs 4, Discrete 2)",
    "HalfCheetah": "HalfCheetah-shaped (obs 17, Box 6)",
}
INBOX = 2_000  # TransportConfig.ingest_queue


def make_spec(kind: str):
    from edge_rl.specs import EnvSpec

    if kind == "CartPole":
        return EnvSpec(obs_shape=(4,), num_actions=2)
    return EnvSpec(
        obs_shape=(17,), action_shape=(6,), action_low=(-1.0,) * 6, action_high=(1.0,) * 6
    )


def make_payloads(kind: str, n: int, actor_id: str, session: int, seed: int) -> list[bytes]:
    """``n`` encoded batches of ``BATCH`` transitions (seq 0..n-1, policy version 0)."""
    from edge_rl.types import TransitionBatch
    from edge_rl.wire.transitions import encode_transitions

    spec = make_spec(kind)
    rng = np.random.default_rng(seed)
    d = spec.obs_shape[0]
    templates = []
    for _ in range(8):
        obs = rng.standard_normal((BATCH + 1, d)).astype(np.float32)
        if spec.discrete:
            action = rng.integers(0, spec.num_actions, BATCH).astype(np.int64)
        else:
            action = rng.uniform(-1, 1, (BATCH, *spec.action_shape)).astype(np.float32)
        terminated = np.zeros(BATCH, bool)
        if spec.discrete:
            terminated[rng.integers(0, BATCH, 3)] = True  # CartPole ends episodes often
        truncated = np.zeros(BATCH, bool)
        reward = rng.standard_normal(BATCH).astype(np.float32)
        templates.append((obs[:-1], action, reward, obs[1:], terminated, truncated))
    return [
        encode_transitions(TransitionBatch(actor_id, session, i, 0, *templates[i % 8]))
        for i in range(n)
    ]


def _publisher_main(url, topic, kind, n, seed, ready, go, results) -> None:
    """Child process: a plain paho client publishing ``n`` pre-encoded batches at QoS 1."""
    try:
        import paho.mqtt.client as mqtt

        from edge_rl.transport.address import parse_broker_url

        actor_id = topic.split("/")[-2]
        payloads = make_payloads(kind, n, actor_id, session=12345, seed=seed)
        host, port = parse_broker_url(url)
        client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=f"bench-pub-{os.getpid()}",
            protocol=mqtt.MQTTv311,
        )
        connected = threading.Event()
        client.on_connect = lambda *a: connected.set()
        client.connect(host, port)
        client.loop_start()
        if not connected.wait(10):
            raise RuntimeError("publisher: no CONNACK")
        ready.set()
        if not go.wait(30):
            raise RuntimeError("publisher: no go signal")
        t0 = time.monotonic()
        infos = [client.publish(topic, p, qos=1) for p in payloads]
        t_queued = time.monotonic()
        deadline = t0 + 60
        for info in infos:
            info.wait_for_publish(max(0.01, deadline - time.monotonic()))
        t1 = time.monotonic()
        acked = sum(info.is_published() for info in infos)
        client.disconnect()
        client.loop_stop()
        results.put(
            {
                "t_first_publish": t0,
                "t_all_queued": t_queued,
                "t_all_acked": t1,
                "acked": acked,
                "payload_bytes": len(payloads[0]),
            }
        )
    except Exception as e:  # noqa: BLE001 - reported to the parent
        results.put({"error": f"{type(e).__name__}: {e}"})


def ingest_over_mqtt(broker_url: str, broker_pid: int | None, kind: str, n: int) -> dict:
    """One run: a publisher process sends ``n`` batches; this process ingests them."""
    from edge_rl.learner.ingest.ingest import Ingest
    from edge_rl.learner.replay import ReplayBuffer
    from edge_rl.transport.mqtt import MqttTransport
    from edge_rl.wire.topics import Topics

    spec = make_spec(kind)
    topics = Topics("edge-rl", f"bench-{uuid.uuid4().hex[:8]}")
    replay = ReplayBuffer(spec, 100_000, seed=SEED)
    ingest = Ingest(spec, replay, topics, latest_version=lambda: 0)
    inbox: queue.Queue[tuple[str, bytes]] = queue.Queue(INBOX)
    counters = {"received": 0, "dropped": 0, "handled": 0, "t_last": 0.0}

    def on_message(topic: str, payload: bytes) -> None:  # paho's thread: hand over only
        counters["received"] += 1
        try:
            inbox.put_nowait((topic, payload))
        except queue.Full:
            counters["dropped"] += 1

    stop = threading.Event()

    def ingest_loop() -> None:  # as LearnerNode._ingest_loop
        c0 = time.thread_time()  # its own CPU clock: the thread ends before it is read
        while not stop.is_set() and counters["handled"] < n:
            try:
                topic, payload = inbox.get(timeout=0.05)
            except queue.Empty:
                continue
            ingest.handle(topic, payload)
            counters["handled"] += 1
            counters["t_last"] = time.monotonic()
        counters["cpu_s"] = time.thread_time() - c0

    sub = MqttTransport(
        broker_url,
        client_id=f"bench-ingest-{topics.run}",
        subscriptions=[(topics.all_transitions, 1)],
        on_message=on_message,
    )
    sub.start()
    if not sub.wait_connected(10):
        raise RuntimeError("subscriber could not connect")
    time.sleep(0.2)  # SUBACK
    ctx = mp.get_context("spawn")  # not fork: this process has TensorFlow's threads
    ready, go, results = ctx.Event(), ctx.Event(), ctx.Queue()
    proc = ctx.Process(
        target=_publisher_main,
        args=(broker_url, topics.transitions("pub-0"), kind, n, SEED, ready, go, results),
        daemon=True,
    )
    proc.start()
    worker = threading.Thread(target=ingest_loop, name="ingest", daemon=True)
    worker.start()
    res: dict[str, Any] = {"error": "publisher process gave no result"}
    try:
        if not ready.wait(60):
            raise RuntimeError("publisher process did not get ready")
        clocks = {"paho network": paho_clock(sub), "mosquitto (process)": process_clock(broker_pid)}
        cpu0 = read_clocks(clocks)
        go.set()
        worker.join(60)  # bounded: the loop also ends after n batches
        cpu1 = read_clocks(clocks)
        cpu0["ingest"], cpu1["ingest"] = 0.0, counters.get("cpu_s", float("nan"))
        res = results.get(timeout=30)
    finally:
        stop.set()
        worker.join(5)
        proc.join(10)
        if proc.is_alive():
            proc.terminate()
            proc.join(5)
        sub.stop()
    if "error" in res:
        raise RuntimeError(res["error"])
    t_first = res["t_first_publish"]  # CLOCK_MONOTONIC: one clock for both processes
    elapsed = (counters["t_last"] or time.monotonic()) - t_first
    s = ingest.stats()
    return {
        "batches": n,
        "payload_bytes": res["payload_bytes"],
        "publisher_acked": res["acked"],
        "publisher_acks_per_s": res["acked"] / max(res["t_all_acked"] - t_first, 1e-9),
        "received": counters["received"],
        "queue_dropped": counters["dropped"],
        "accepted_batches": s.batches,
        "rejected_batches": s.rejected_batches,
        "duplicate_batches": s.duplicate_batches,
        "replay_added": replay.added,
        "seconds": elapsed,
        "batches_per_s": counters["handled"] / elapsed,
        "transitions_per_s": s.transitions / elapsed,
        "mb_per_s": counters["handled"] * res["payload_bytes"] / elapsed / 1e6,
        "cpu_share_of_one_core": {k: (cpu1[k] - cpu0[k]) / elapsed for k in cpu0},
        "cpu_us_per_batch": {k: 1e6 * (cpu1[k] - cpu0[k]) / n for k in cpu0},
    }


def ingest_in_process(kind: str, n: int, repeats: int) -> dict[str, dict[str, float]]:
    """Per batch without MQTT: decode, decode + validate, full ``Ingest.handle`` (µs)."""
    from edge_rl.learner.ingest.ingest import Ingest
    from edge_rl.learner.replay import ReplayBuffer
    from edge_rl.wire.topics import Topics
    from edge_rl.wire.transitions import decode_transitions

    spec = make_spec(kind)
    topics = Topics("edge-rl", "bench-inproc")
    topic = topics.transitions("pub-0")
    payloads = make_payloads(kind, n, "pub-0", session=1, seed=SEED)
    wall: dict[str, list[float]] = {"decode": [], "decode+validate": [], "Ingest.handle": []}
    cpu: dict[str, list[float]] = {k: [] for k in wall}

    def timed(name: str, fn: Callable[[bytes], Any]) -> None:
        c0, t0 = time.thread_time(), time.perf_counter()
        for p in payloads:
            fn(p)
        wall[name].append(time.perf_counter() - t0)
        cpu[name].append(time.thread_time() - c0)

    for _ in range(repeats):  # interleaved; a fresh Ingest each time, so no duplicates
        timed("decode", decode_transitions)
        timed("decode+validate", lambda p: decode_transitions(p, spec))
        ingest = Ingest(spec, ReplayBuffer(spec, 100_000, SEED), topics, latest_version=lambda: 0)
        timed("Ingest.handle", lambda p, i=ingest: i.handle(topic, p))
        if ingest.stats().batches != n:
            raise RuntimeError(f"in-process ingest accepted {ingest.stats().batches}/{n}")
    return {
        "wall_us": {k: 1e6 * min(v) / n for k, v in wall.items()},
        "cpu_us": {k: 1e6 * min(v) / n for k, v in cpu.items()},
    }


def bench_ingest(broker, quick: bool) -> dict[str, Any]:
    n, repeats = (500, 1) if quick else (2_000, 2)
    runs: dict[str, list[dict]] = {k: [] for k in KINDS}
    for _ in range(repeats):  # alternate the specs
        for k in KINDS:
            runs[k].append(ingest_over_mqtt(broker.url, broker.pid, k, n))
    local = {k: ingest_in_process(k, n, 3) for k in KINDS}
    print(
        f"## 3. Learner ingest: {n:,} batches × {BATCH} transitions at QoS 1 from a publisher "
        f"process → Mosquitto → paho on_message → bounded queue ({INBOX:,}) → thread: "
        f"Ingest.handle → ReplayBuffer (best of {repeats} run(s) per spec)\n"
    )
    _print_mqtt_runs(runs, n)
    print(
        "\nIn-process, no MQTT (min of 3 passes over the same payloads), µs per batch, "
        "CPU time of the thread (wall in parentheses):\n"
    )
    _print_in_process(local)
    print()
    return {"batches": n, "mqtt_runs": runs, "in_process": local}


def _print_mqtt_runs(runs: dict[str, list[dict]], n: int) -> None:
    rows = []
    for k, label in KINDS.items():
        r = max(runs[k], key=lambda x: x["batches_per_s"])
        cpu = r["cpu_us_per_batch"]
        rows.append(
            [
                label,
                f"{r['payload_bytes']:,}",
                f"{r['batches_per_s']:,.0f}",
                f"{r['transitions_per_s']:,.0f}",
                f"{r['mb_per_s']:.1f}",
                " / ".join(f"{x['transitions_per_s']:,.0f}" for x in runs[k]),
                f"{r['publisher_acks_per_s']:,.0f}",
                f"{r['accepted_batches']}/{n}",
                f"{r['queue_dropped']}",
                f"{cpu['ingest']:.0f}",
                f"{cpu['paho network']:.0f}",
                f"{cpu['mosquitto (process)']:.0f}",
            ]
        )
    headers = [
        "spec",
        "bytes/batch",
        "batches/s",
        "transitions/s",
        "MB/s",
        "transitions/s, every run",
        "publisher acks/s",
        "in replay",
        "queue drops",
        "CPU µs/batch: ingest thread",
        "paho thread",
        "mosquitto",
    ]
    print(md_table(headers, rows))


def _print_in_process(local: dict[str, dict[str, dict[str, float]]]) -> None:
    rows = []
    for k, label in KINDS.items():
        c, w = local[k]["cpu_us"], local[k]["wall_us"]
        rows.append(
            [label]
            + [f"{c[m]:.1f} ({w[m]:.1f})" for m in ("decode", "decode+validate", "Ingest.handle")]
            + [f"{1e6 * BATCH / c['Ingest.handle']:,.0f}"]
        )
    headers = [
        "spec",
        "decode",
        "decode + validate",
        "Ingest.handle (all)",
        "one-thread ceiling, transitions/s (CPU)",
    ]
    print(md_table(headers, rows))
