#!/usr/bin/env python3
"""Latency of quantspec's three LiteRT kernel modes against the LiteRT configuration each
reproduces, per model: ``kernels="reference"`` vs ``BUILTIN_REF``, ``"optimized"`` vs
``BUILTIN_WITHOUT_DEFAULT_DELEGATES``, ``"xnnpack"`` vs the default resolver with XNNPACK; one
inference, default thread counts (1), best of N rounds, the two contenders of a pair alternating
within each round; outputs compared byte for byte.

    python benchmarks/litert_modes_speed.py                         # bundled models + mobilenet_v2
    python benchmarks/litert_modes_speed.py --archs mobilenet_v2,resnet50 --rounds 10

Converter-made models come from ``benchmarks/litert_zoo.py`` (built with TensorFlow on first use,
then cached).  The same cases run in ``quantspec bench --only litert`` (with
``$QUANTSPEC_BENCH_LITERT_MODELS`` naming extra models).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archs", default="mobilenet_v2", help="comma-separated zoo architectures ('' for none)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    from quantspec.litert._bench import _models, mode_cases

    models = _models()
    if args.archs:
        import litert_zoo

        models += [str(litert_zoo.build(a, "int8")) for a in args.archs.split(",") if a]
    print("| model | mode | quantspec ms | LiteRT configuration | LiteRT ms | quantspec / LiteRT time | output |")
    print("|---|---|---|---|---|---|---|")
    for case in mode_cases(args.rounds, models):
        contenders = [("quantspec", case.run)] + [(p.name, p.run) for p in case.peers]
        best = {name: float("inf") for name, _ in contenders}
        for r in range(args.rounds):
            order = contenders if r % 2 == 0 else contenders[::-1]
            for name, fn in order:
                t = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t)
        model, mode = case.name.split(" ")[1], case.name.split("kernels=")[1]
        for p in case.peers:
            equal = np.asarray(case.output()).tobytes() == np.asarray(p.output()).tobytes()
            print(f"| {model} | {mode} | {best['quantspec'] * 1e3:.2f} | {p.name.removeprefix('LiteRT ')} | "
                  f"{best[p.name] * 1e3:.3f} | {best['quantspec'] / best[p.name]:.1f}x | "
                  f"{'equal' if equal else 'DIFFERENT'} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
