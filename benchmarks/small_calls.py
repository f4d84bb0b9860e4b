"""Per-call time of small and medium quantize / dequantize calls, side by side with onnxruntime.

At 64 Mi elements (``quantspec bench``) the memory system decides; below about 256 Ki elements the
fixed cost of a call does: argument checks, the plan-cache lookup, the kernel's dispatch, the
thread pool.  This times float32 -> int8 QuantizeLinear (per-tensor) and int8 -> float32
DequantizeLinear, with ``out=`` (as onnxruntime's IOBinding writes into a bound buffer), against
onnxruntime's ``run_with_iobinding`` (the peer of ``quantspec bench``) and its plain ``run`` (numpy
in, a new numpy array out: what most callers use).  Each round calls every contender ``calls`` times
in a row, in a shuffled order; the table gives the best per-call time over the rounds and the
paired ratio (median over rounds of the within-round ratio; > 1: quantspec faster).

    .venv/bin/python benchmarks/small_calls.py [--rounds 15] [--sizes 1024,16384,...]

Every thread pool keeps its defaults (no ``OMP_WAIT_POLICY``; onnxruntime's own spinning), as
``quantspec bench`` does; ``--no-spin`` makes onnxruntime's idle threads sleep (its
``allow_spinning=0``), a tuned setting, labelled so in the output.
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--sizes", default="1024,16384,65536,262144,1048576,4194304")
    ap.add_argument("--no-spin", action="store_true", help="onnxruntime's idle threads sleep (allow_spinning=0)")
    args = ap.parse_args(argv)

    import numpy as np

    from quantspec import bench
    from quantspec import onnx as qo

    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        print("onnxruntime is not installed: nothing to compare with", file=sys.stderr)
        return 1
    print(f"{'onnxruntime allow_spinning=0 (tuned)' if args.no_spin else 'default settings'}; per-call times, "
          f"best of {args.rounds} rounds; ratios > 1: quantspec faster")
    print(f"{'case':<26} {'elements':>9} {'quantspec':>10} {'ORT iobinding':>14} {'paired':>7} "
          f"{'ORT run':>9} {'paired':>7}")
    s, z = np.float32(0.8), np.int8(3)
    for n in (int(v) for v in args.sizes.split(",")):
        x = bench._data(n)
        q = qo.quantize_linear(x, s, z)
        calls = max(1, min(2000, (1 << 22) // n))
        for name, ours, op, inp, out_type in (
                ("Q f32->int8 per-tensor", lambda: qo.quantize_linear(x, s, z, out=y), "QuantizeLinear", x, "int8"),
                ("DQ int8->f32 per-tensor", lambda: qo.dequantize_linear(q, s, z, out=d), "DequantizeLinear", q,
                 "float")):
            y, d = np.empty(n, np.int8), np.empty(n, np.float32)
            import onnxruntime as ort

            _, model = bench._onnx_model(op, inp, s, z, {}, out_type)
            sess = bench.ort_session(model, spin=not args.no_spin)
            feed = {"x": inp}
            bound = np.empty(n, np.int8 if op == "QuantizeLinear" else np.float32)
            io = sess.io_binding()
            io.bind_ortvalue_input("x", ort.OrtValue.ortvalue_from_numpy(inp))
            io.bind_ortvalue_output("y", ort.OrtValue.ortvalue_from_numpy(bound))

            def loop(f):
                def run():
                    for _ in range(calls):
                        f()
                return run

            times = bench._timed({"quantspec": loop(ours), "iob": loop(lambda: sess.run_with_iobinding(io)),
                                  "run": loop(lambda: sess.run(None, feed))}, args.rounds)
            ours()
            (plain,) = sess.run(None, feed)
            sess.run_with_iobinding(io)
            mine = y if op == "QuantizeLinear" else d
            assert mine.tobytes() == plain.tobytes() == bound.tobytes(), f"{name} at {n}: outputs differ"
            best = {k: min(v) / calls * 1e6 for k, v in times.items()}
            print(f"{name:<26} {n:>9} {best['quantspec']:>8.1f}us {best['iob']:>12.1f}us "
                  f"{bench.paired_ratio(times['quantspec'], times['iob']):>6.2f}x {best['run']:>7.1f}us "
                  f"{bench.paired_ratio(times['quantspec'], times['run']):>6.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
