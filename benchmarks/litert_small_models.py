#!/usr/bin/env python3
"""Latency of ``Interpreter.run`` on small LiteRT models against LiteRT's ``BUILTIN_REF``
interpreter (``set_tensor``, ``invoke``, ``get_tensor`` of every output; 1 thread), side by side in
one process: per round, N calls of one then N of the other; best round of each and the paired
median of the per-round ratios; outputs compared byte for byte first.

    python benchmarks/litert_small_models.py                       # mixed, mlp_softmax, bench_cnn
    python benchmarks/litert_small_models.py --models mixed --calls 2000 --rounds 30
    PYTHONPATH=/other/checkout/src python benchmarks/litert_small_models.py   # another version

The bundled models are named without their suffix; any other argument is a path to a .tflite file.
``bench_cnn`` and paths run N / 100 calls a round (at least 5).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np


def _path(name: str) -> str:
    if name.endswith(".tflite"):
        return name
    import quantspec

    return str(Path(quantspec.__file__).resolve().parent / "data" / f"{name}.tflite")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="mixed,mlp_softmax,bench_cnn")
    parser.add_argument("--calls", type=int, default=2000, help="calls per round (default 2000)")
    parser.add_argument("--rounds", type=int, default=30, help="rounds (default 30)")
    args = parser.parse_args(argv)
    from ai_edge_litert.interpreter import Interpreter as LiteRT, OpResolverType

    from quantspec.litert import Interpreter
    from quantspec.litert._bench import inputs

    for name in [m for m in args.models.split(",") if m]:
        path = _path(name)
        ours = Interpreter(path)
        x = inputs(ours, 0)
        ref = LiteRT(model_path=path, num_threads=1, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        ref.allocate_tensors()
        ins = [d["index"] for d in ref.get_input_details()]
        outs = [d["index"] for d in ref.get_output_details()]

        def q():
            return ours.run(x)

        def r():
            for i, v in zip(ins, x):
                ref.set_tensor(i, v)
            ref.invoke()
            return [ref.get_tensor(o) for o in outs]

        for _ in range(3):          # the first run checks the plans; the program is made on the second
            got, want = q(), r()
        if not all(g.dtype == w.dtype and g.tobytes() == w.tobytes() for g, w in zip(got, want)):
            print(f"{name}: outputs differ from LiteRT's")
            return 1
        n = args.calls if name in ("mixed", "mlp_softmax") else max(args.calls // 100, 5)
        tq, tr = [], []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            for _ in range(n):
                q()
            t1 = time.perf_counter()
            for _ in range(n):
                r()
            t2 = time.perf_counter()
            tq.append((t1 - t0) / n)
            tr.append((t2 - t1) / n)
        paired = float(np.median(np.array(tr) / np.array(tq)))
        print(f"{name:12s} quantspec {min(tq) * 1e6:9.2f} us  BUILTIN_REF {min(tr) * 1e6:9.2f} us  "
              f"best {min(tr) / min(tq):5.2f}x  paired {paired:5.2f}x  (load {os.getloadavg()[0]:.1f})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
