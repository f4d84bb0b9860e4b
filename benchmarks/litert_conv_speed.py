"""Speed of quantspec's int8 CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED kernels next to the
LiteRT interpreter on the same single-op models (BUILTIN_REF, the oracle, and the optimized
kernels), in MAC/s: best time of each (compute step / invoke only), and quantspec's speed-up
over BUILTIN_REF as the median of per-repetition ratios (the three run interleaved, so a shared
machine's load hits them alike).  Outputs are checked to be identical to BUILTIN_REF first.

    python benchmarks/litert_conv_speed.py [--repeat N]

Needs the test dependencies (ai-edge-litert, flatbuffers) and tests/ on the path.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from litert_build import T, build  # noqa: E402
from litert_kernel_check import spec  # noqa: E402


def interpreter(model, resolver):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_content=model, experimental_op_resolver_type=getattr(OpResolverType, resolver),
                     num_threads=2)
    it.allocate_tensors()
    return it


def interleaved(fns, repeat, rounds=5):
    """Time the functions in alternating blocks of ``repeat`` calls, ``rounds`` times (the machine is
    shared: alternating exposes them to the same load, while whole blocks keep one engine's worker
    threads from spinning through another's calls); return each one's best time and the median over
    rounds of (its best time in the round / fns[0]'s)."""
    best = [[] for _ in fns]
    for _ in range(rounds):
        for b, fn in zip(best, fns):
            fn()                                    # warm: caches, thread pools
            ts = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t0)
            b.append(min(ts))
    ratios = [float(np.median(np.array(b) / np.array(best[0]))) for b in best]
    return [min(b) for b in best], ratios


def bench(name, op, ins, outs, options, x, macs, version, repeat):
    from quantspec.litert.kernels import OPS
    model = build(op, ins, outs, options, version)
    kernel = OPS[op]
    prepared = kernel.prepare([spec(t) for t in ins], [spec(t) for t in outs], options)
    arrays = [x] + [None] * (len(ins) - 1)
    ours = kernel.compute(prepared, arrays)[0]
    its = []
    for resolver in ("BUILTIN_REF", "BUILTIN_WITHOUT_DEFAULT_DELEGATES"):
        it = interpreter(model, resolver)
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        y = it.get_tensor(it.get_output_details()[0]["index"])
        if resolver == "BUILTIN_REF":
            assert y.tobytes() == ours.tobytes(), f"{name}: quantspec differs from BUILTIN_REF"
        else:
            differ = int((y != ours).sum())
        its.append(it)
    best, ratio = interleaved([its[0].invoke, lambda: kernel.compute(prepared, arrays), its[1].invoke],
                              max(1, repeat // 5))
    cells = [f"{macs / t / 1e9:6.2f} GMAC/s" for t in best]
    return [name, f"{macs / 1e6:.0f}M", cells[0], f"{cells[1]} (x{1 / ratio[1]:.1f} REF)",
            f"{cells[2]} ({differ} differ)"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []

    # FULLY_CONNECTED: 64 x 4096 -> 1024, per-channel
    b, k, n = 64, 4096, 1024
    w = rng.integers(-127, 128, (n, k), dtype=np.int8)
    sw = rng.uniform(0.001, 0.01, n).astype(np.float32)
    ins = [T((b, k), "int8", 0.05, 3), T((n, k), "int8", sw, 0, 0, w),
           T((n,), "int32", (np.float32(0.05) * sw), 0, 0, rng.integers(-1000, 1000, n, dtype=np.int32))]
    outs = [T((b, n), "int8", 2.0, -1)]
    rows.append(bench("FC 64x4096->1024", "FULLY_CONNECTED", ins, outs, {}, rng.integers(-128, 128, (b, k),
                      dtype=np.int8), b * k * n, 4, args.repeat))

    # CONV_2D: 1x56x56x64 -> 64, 3x3 SAME
    h, c, o = 56, 64, 64
    w = rng.integers(-127, 128, (o, 3, 3, c), dtype=np.int8)
    sw = rng.uniform(0.001, 0.01, o).astype(np.float32)
    ins = [T((1, h, h, c), "int8", 0.05, 3), T(w.shape, "int8", sw, 0, 0, w),
           T((o,), "int32", (np.float32(0.05) * sw), 0, 0, rng.integers(-1000, 1000, o, dtype=np.int32))]
    outs = [T((1, h, h, o), "int8", 1.0, -1)]
    opts = {"padding": "SAME", "stride_h": 1, "stride_w": 1, "fused_activation_function": "RELU6"}
    rows.append(bench("CONV 56x56x64->64 3x3", "CONV_2D", ins, outs, opts,
                      rng.integers(-128, 128, (1, h, h, c), dtype=np.int8), h * h * o * 9 * c, 3, args.repeat))

    # CONV_2D: 1x14x14x256 -> 256, 3x3 SAME (K = 2304: three float32 chunks)
    h, c, o = 14, 256, 256
    w = rng.integers(-127, 128, (o, 3, 3, c), dtype=np.int8)
    sw = rng.uniform(0.001, 0.01, o).astype(np.float32)
    ins = [T((1, h, h, c), "int8", 0.05, 3), T(w.shape, "int8", sw, 0, 0, w),
           T((o,), "int32", (np.float32(0.05) * sw), 0, 0, rng.integers(-1000, 1000, o, dtype=np.int32))]
    outs = [T((1, h, h, o), "int8", 2.0, -1)]
    rows.append(bench("CONV 14x14x256->256 3x3", "CONV_2D", ins, outs, opts,
                      rng.integers(-128, 128, (1, h, h, c), dtype=np.int8), h * h * o * 9 * c, 3, args.repeat))

    # DEPTHWISE_CONV_2D: 1x112x112x32, 3x3
    h, c = 112, 32
    w = rng.integers(-127, 128, (1, 3, 3, c), dtype=np.int8)
    sw = rng.uniform(0.001, 0.01, c).astype(np.float32)
    ins = [T((1, h, h, c), "int8", 0.05, 3), T(w.shape, "int8", sw, 0, 3, w),
           T((c,), "int32", (np.float32(0.05) * sw), 0, 0, rng.integers(-1000, 1000, c, dtype=np.int32))]
    outs = [T((1, h, h, c), "int8", 0.5, -1)]
    opts = dict(opts, depth_multiplier=1)
    rows.append(bench("DW 112x112x32 3x3", "DEPTHWISE_CONV_2D", ins, outs, opts,
                      rng.integers(-128, 128, (1, h, h, c), dtype=np.int8), h * h * c * 9, 3, args.repeat))

    print(f"{'model':26} {'MACs':>6}  {'LiteRT BUILTIN_REF':18}  {'quantspec (speed-up, median)':30}  "
          "LiteRT optimized, no XNNPACK (outputs differing from REF)")
    for r in rows:
        print(f"{r[0]:26} {r[1]:>6}  {r[2]:18}  {r[3]:30}  {r[4]}")


if __name__ == "__main__":
    main()
