#!/usr/bin/env python
"""Backbone micro-benchmarks: int8 vs fp32 policy, actor loop overhead, learner ingest.

    .venv/bin/python benchmarks/backbone.py            # full run, ~1-1.5 min
    .venv/bin/python benchmarks/backbone.py --quick    # smoke run, ~25 s
    .venv/bin/python benchmarks/backbone.py --json results.json

Everything that is compared runs side by side in one process and one run, so that a busy
2-core machine still gives fair *ratios*; absolute numbers move with the machine's load.

1. Deployed network: int8 / fp16 / fp32 TFLite of the DQN CartPole net (4-256-256-2) and
   a 17-256-256-6 reference MLP (HalfCheetah-sized): bytes, zlib bytes, latency of ``invoke()``
   alone, of ``set_tensor + invoke + get_tensor`` and of ``TFLitePolicy.__call__``
   (raw float obs in, float out), all under XNNPACK with one thread, interleaved in
   rounds. Without-XNNPACK rows (LiteRT's built-in kernels) for reference.
2. Actor env-steps/s on CartPole-v1, a ladder from a bare ``env.step`` loop up to the real
   ``ActorNode`` against a real Mosquitto (policy and control delivered on their topics).
3. Learner ingest from a real Mosquitto: a separate publisher process sends N encoded
   batches; a subscriber hands them to a bounded queue and a thread runs ``Ingest.handle``
   into a ``ReplayBuffer`` (as ``edge_rl.learner.node`` does). Also the in-process
   decode / validate / add cost per batch, without MQTT.

Loopback only (127.0.0.1, a Mosquitto of its own on a free port); every loop is bounded in
count and time. Heavy imports (TensorFlow, gymnasium) happen inside functions, so the
publisher child process (multiprocessing "spawn") starts with numpy and paho only.

This file is the entry point (arguments, header, the sections in order); the sections live
next to it: ``_bench_network.py`` (1), ``_bench_actor.py`` (2), ``_bench_ingest.py`` (3),
and ``_common.py`` (constants, tables, clocks).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

# Run as a script from a checkout without installing: make `edge_rl` and the sibling section
# modules importable (the publisher child process inherits this sys.path).
_HERE = Path(__file__).resolve().parent
for _p in (_HERE.parent, _HERE):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import numpy as np  # noqa: E402
from _bench_actor import bench_actor  # noqa: E402
from _bench_ingest import bench_ingest  # noqa: E402
from _bench_network import bench_network, build_models, print_network  # noqa: E402
from _common import SEED  # noqa: E402


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "-"


def header(quick: bool) -> dict[str, Any]:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    from edge_rl.broker.executables import find_mosquitto

    mosq = find_mosquitto()
    mosq_version = "-"
    if mosq:
        out = subprocess.run([mosq, "-h"], capture_output=True, text=True, timeout=5).stdout
        mosq_version = out.splitlines()[0].replace("mosquitto version ", "") if out else "?"
    info = {
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "load_avg_1m_start": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": np.__version__,
        "tensorflow": _version("tensorflow"),
        "keras": _version("keras"),
        "ai_edge_litert": _version("ai-edge-litert"),
        "paho_mqtt": _version("paho-mqtt"),
        "gymnasium": _version("gymnasium"),
        "mosquitto": mosq_version,
        "mode": "quick" if quick else "full",
        "seed": SEED,
    }
    print("# edge-rl backbone micro-benchmarks\n")
    print(
        f"machine: {info['cpu']}, {info['cpu_count']} CPUs ({info['cpus_usable']} usable), "
        f"load avg (1 min) at start {info['load_avg_1m_start']}"
    )
    print(f"python {info['python']} on {info['platform']}")
    print(
        f"numpy {info['numpy']}, tensorflow {info['tensorflow']}, keras {info['keras']}, "
        f"ai-edge-litert {info['ai_edge_litert']}, paho-mqtt {info['paho_mqtt']}, "
        f"gymnasium {info['gymnasium']}, mosquitto {info['mosquitto']}"
    )
    print(f"mode: {info['mode']}, seed {SEED}\n")
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short smoke run (~30 s)")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument(
        "--sections", default="1,2,3", help="comma-separated subset of 1,2,3 (default: all)"
    )
    args = parser.parse_args(argv)
    sections = {s.strip() for s in args.sections.split(",")}
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is imported

    from edge_rl.broker.embedded import EmbeddedBroker

    t_start = time.perf_counter()
    results: dict[str, Any] = {"machine": header(args.quick)}
    models = build_models(args.quick) if sections & {"1", "2"} else {}
    if "1" in sections:
        results["network"] = print_network(models, bench_network(models, args.quick))
    if sections & {"2", "3"}:
        with EmbeddedBroker(kind="mosquitto") as broker:
            if "2" in sections:
                results["actor"] = bench_actor(models, broker, args.quick)
            if "3" in sections:
                results["ingest"] = bench_ingest(broker, args.quick)
    results["machine"]["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    results["wall_s"] = round(time.perf_counter() - t_start, 1)
    print(
        f"total {results['wall_s']} s; load avg (1 min) at end "
        f"{results['machine']['load_avg_1m_end']}. Ratios measured side by side are the robust "
        "figures; absolute numbers move with the machine's load."
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
