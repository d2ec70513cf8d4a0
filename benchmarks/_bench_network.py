"""Section 1: the deployed network, int8 vs fp16 vs fp32 TFLite under LiteRT.

    models = build_models(quick)                      # export every net at every precision
    results = print_network(models, bench_network(models, quick))

Bytes, zlib bytes, and the latency of ``invoke()`` alone, of ``set_tensor + invoke +
get_tensor`` ("raw") and of ``TFLitePolicy.__call__``, with one thread, XNNPACK on (the
default) plus rows without it. Every cell is timed in interleaved rounds, so that load on a
shared machine hits all cells alike and the ratios hold.
"""

from __future__ import annotations

import gc
import time
from typing import Any

import numpy as np
from _common import NETS, PRECISIONS, SEED, md_table, pct


def build_models(quick: bool) -> dict[str, dict[str, Any]]:
    """Export every net at every precision; calibration: random normal observations."""
    from edge_rl.agents.dqn.networks import make_q_network
    from edge_rl.export.tflite import export_policy
    from edge_rl.wire.policy import compress_model

    rng = np.random.default_rng(SEED)
    n_cal = 200 if quick else 1000
    models: dict[str, dict[str, Any]] = {}
    for label, obs_dim, outputs in NETS:
        net = make_q_network(obs_dim, outputs, (256, 256), seed=SEED)
        calibration = rng.standard_normal((n_cal, obs_dim)).astype(np.float32)
        models[label] = {"obs_dim": obs_dim, "outputs": outputs}
        for precision in PRECISIONS:
            exported = export_policy(net, calibration, precision)
            models[label][precision] = {
                "exported": exported,
                "bytes": len(exported.tflite),
                "zlib_bytes": len(compress_model(exported.tflite, "zlib")),
                "convert_s": exported.convert_seconds,
            }
    return models


# One timing loop per kind of cell rather than one generic loop over a callable: the timed
# region should hold the calls being measured and nothing else (no extra indirection).


def _lat_invoke(interp, k: int) -> list[int]:
    pc, inv = time.perf_counter_ns, interp.invoke
    out = [0] * k
    for i in range(k):
        t0 = pc()
        inv()
        out[i] = pc() - t0
    return out


def _lat_raw(interp, xs: np.ndarray, k: int) -> list[int]:
    pc = time.perf_counter_ns
    st, inv, gt = interp.set_tensor, interp.invoke, interp.get_tensor
    i_in = interp.get_input_details()[0]["index"]
    i_out = interp.get_output_details()[0]["index"]
    m = len(xs)
    out = [0] * k
    for i in range(k):
        x = xs[i % m]
        t0 = pc()
        st(i_in, x)
        inv()
        gt(i_out)
        out[i] = pc() - t0
    return out


def _lat_policy(policy, obs: np.ndarray, k: int) -> list[int]:
    pc = time.perf_counter_ns
    m = len(obs)
    out = [0] * k
    for i in range(k):
        o = obs[i % m]
        t0 = pc()
        policy(o)
        out[i] = pc() - t0
    return out


def _timer_overhead_ns(k: int = 20_000) -> float:
    pc = time.perf_counter_ns
    out = [0] * k
    for i in range(k):
        t0 = pc()
        out[i] = pc() - t0
    return float(np.median(out))


def bench_network(models: dict[str, dict[str, Any]], quick: bool) -> dict[str, Any]:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    from edge_rl.runtime.litert import TFLitePolicy

    rounds, k = (8, 400) if quick else (30, 1000)
    rng = np.random.default_rng(SEED + 1)
    cases = []  # (net, precision, delegate, mode, fn)
    for label, entry in models.items():
        obs = rng.standard_normal((256, entry["obs_dim"])).astype(np.float32)
        for precision in PRECISIONS:
            ex = entry[precision]["exported"]
            policy = TFLitePolicy(ex.tflite, num_threads=1)
            # The raw cells get what the policy gives its model, computed ahead of time by
            # the policy's own input map (a float32 [1, obs_dim] view of the observation).
            xs = np.stack([policy.to_input(o) for o in obs])  # [256, 1, obs_dim]
            delegates = [("XNNPACK", OpResolverType.AUTO)]
            if precision != "fp16":
                delegates.append(("none", OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES))
            for delegate, resolver in delegates:
                interp = Interpreter(
                    model_content=ex.tflite, num_threads=1, experimental_op_resolver_type=resolver
                )
                interp.allocate_tensors()
                interp.set_tensor(interp.get_input_details()[0]["index"], xs[0])
                key = (label, precision, delegate)
                cases.append((*key, "invoke", lambda n, it=interp: _lat_invoke(it, n)))
                cases.append((*key, "raw", lambda n, it=interp, x=xs: _lat_raw(it, x, n)))
                if delegate == "XNNPACK":  # TFLitePolicy always runs with the default delegate
                    cases.append((*key, "policy", lambda n, p=policy, o=obs: _lat_policy(p, o, n)))
    samples: dict[tuple, list[int]] = {c[:4]: [] for c in cases}
    for c in cases:  # warm-up (first invokes pay for XNNPACK's packing)
        c[4](200)
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):  # interleaved: every case once per round, rotating start
            shift = r % len(cases)
            for c in cases[shift:] + cases[:shift]:
                samples[c[:4]].extend(c[4](k))
    finally:
        if gc_was:
            gc.enable()
    timer_ns = _timer_overhead_ns()
    stats = {
        key: {"p50_us": pct(s, 50), "p90_us": pct(s, 90), "n": len(s)} for key, s in samples.items()
    }
    return {"stats": stats, "timer_overhead_us": timer_ns / 1e3, "rounds": rounds, "k": k}


def print_network(models: dict[str, Any], lat: dict[str, Any]) -> dict[str, Any]:
    """Print the three tables of section 1; returns its part of the JSON results."""
    print("## 1. Deployed network: int8 vs fp16 vs fp32 (LiteRT, num_threads=1)\n")
    _print_sizes(models)
    st = lat["stats"]
    print(
        f"\nLatency in µs, median / p90 over {lat['rounds']} interleaved rounds × {lat['k']} "
        f"calls per cell (timer overhead ~{lat['timer_overhead_us']:.2f} µs, included). "
        "`invoke` = `invoke()` alone; `raw` = `set_tensor + invoke + get_tensor`; "
        "`TFLitePolicy` = `policy(obs)`: float32 input map + raw + output copy "
        "(the model normalises and (de)quantises inside).\n"
    )
    _print_latency(models, st)
    print("\nRatios of medians (XNNPACK), > 1 means int8 is faster:\n")
    ratios = _print_ratios(models, st)
    print()
    sizes = {
        label: {
            p: {k: entry[p][k] for k in ("bytes", "zlib_bytes", "convert_s")} for p in PRECISIONS
        }
        for label, entry in models.items()
    }
    return {
        "sizes": sizes,
        "latency_us": {" | ".join(k): v for k, v in st.items()},
        "ratios": ratios,
        "timer_overhead_us": lat["timer_overhead_us"],
    }


def _print_sizes(models: dict[str, Any]) -> None:
    rows = []
    for label, entry in models.items():
        fp32 = entry["fp32"]["bytes"]
        for p in PRECISIONS:
            e = entry[p]
            rows.append(
                [
                    label,
                    p,
                    f"{e['bytes']:,}",
                    f"{e['bytes'] / fp32:.2f}",
                    f"{e['zlib_bytes']:,}",
                    f"{e['convert_s']:.2f}",
                ]
            )
    headers = ["network", "precision", "model bytes", "vs fp32", "zlib -9 bytes", "convert s"]
    print(md_table(headers, rows))


_MODES = ("invoke", "raw", "policy")  # the latency columns, in order


def _print_latency(models: dict[str, Any], st: dict[tuple, dict]) -> None:
    def cell(key: tuple) -> str:
        s = st.get(key)
        return "-" if s is None else f"{s['p50_us']:.2f} / {s['p90_us']:.2f}"

    rows = []
    for label in models:
        for p in PRECISIONS:
            for d in ("XNNPACK", "none"):
                if (label, p, d, "invoke") in st:
                    rows.append([label, p, d, *(cell((label, p, d, m)) for m in _MODES)])
    print(md_table(["network", "precision", "delegate", "invoke", "raw", "TFLitePolicy"], rows))


def _print_ratios(models: dict[str, Any], st: dict[tuple, dict]) -> dict[str, dict[str, float]]:
    def p50(label: str, precision: str, delegate: str, mode: str) -> float:
        return st[(label, precision, delegate, mode)]["p50_us"]

    rows, ratios = [], {}
    for label in models:
        r = {}
        for mode in _MODES:
            i8 = p50(label, "int8", "XNNPACK", mode)
            r[f"fp32/int8 {mode}"] = p50(label, "fp32", "XNNPACK", mode) / i8
            r[f"fp16/int8 {mode}"] = p50(label, "fp16", "XNNPACK", mode) / i8
        r["int8 XNNPACK speed-up (raw)"] = p50(label, "int8", "none", "raw") / p50(
            label, "int8", "XNNPACK", "raw"
        )
        r["TFLitePolicy share of int8 call"] = 1 - p50(label, "int8", "XNNPACK", "raw") / p50(
            label, "int8", "XNNPACK", "policy"
        )
        ratios[label] = r
        rows.append(
            [
                label,
                f"{r['fp32/int8 invoke']:.2f}×",
                f"{r['fp32/int8 raw']:.2f}×",
                f"{r['fp32/int8 policy']:.2f}×",
                f"{r['fp16/int8 raw']:.2f}×",
                f"{r['int8 XNNPACK speed-up (raw)']:.2f}×",
                f"{100 * r['TFLitePolicy share of int8 call']:.0f}%",
            ]
        )
    headers = [
        "network",
        "fp32/int8 invoke",
        "fp32/int8 raw",
        "fp32/int8 TFLitePolicy",
        "fp16/int8 raw",
        "int8: no-XNNPACK/XNNPACK raw",
        "wrapper share of int8 TFLitePolicy",
    ]
    print(md_table(headers, rows))
    return ratios
