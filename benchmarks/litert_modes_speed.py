#!/usr/bin/env python3
"""Latency of quantspec's three LiteRT kernel modes against the LiteRT configuration each
reproduces, per model and thread setting: ``kernels="reference"`` vs ``BUILTIN_REF``, ``"optimized"``
vs ``BUILTIN_WITHOUT_DEFAULT_DELEGATES``, ``"xnnpack"`` vs the default resolver with XNNPACK; one
inference, ``num_threads=1`` on both sides and each side's default; outputs compared byte for byte.

Timing is that of ``quantspec bench``: after a warm call each, ``--rounds`` rounds in which the two
contenders run in a shuffled order, each three times in a row (its best call counts); the table
gives each side's best time, the ratio of the bests and the median over rounds of the per-round
ratio (steadier on a shared machine: both sides of a round saw the same machine state).

    python benchmarks/litert_modes_speed.py                       # EfficientNetB0, MobileNetV3Small, transformer
    python benchmarks/litert_modes_speed.py --image 224           # ... and EfficientNetB0 on 224x224 images
    python benchmarks/litert_modes_speed.py --archs mobilenet_v2 --rounds 20 --modes optimized,xnnpack

Converter-made models come from ``benchmarks/litert_zoo.py`` (built with TensorFlow on first use,
then cached; ``--image`` builds the CNNs on larger images in a cache of their own).  The same cases,
on the zoo's default image size, run in ``quantspec bench --only litert``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _build(arch: str, image: int | None) -> str:
    import litert_zoo

    if image is None or arch == "transformer":
        return str(litert_zoo.build(arch, "int8"))
    # the zoo's image side (module settings: IMAGE, and IMAGE_SIZES per arch where the script has
    # them), in a cache of its own
    saved = litert_zoo.IMAGE, dict(getattr(litert_zoo, "IMAGE_SIZES", {}))
    litert_zoo.IMAGE = image
    if hasattr(litert_zoo, "IMAGE_SIZES"):
        litert_zoo.IMAGE_SIZES[arch] = image
    try:
        return str(litert_zoo.build(arch, "int8", cache_dir=litert_zoo.cache_dir().parent / f"zoo{image}"))
    finally:
        litert_zoo.IMAGE = saved[0]
        if hasattr(litert_zoo, "IMAGE_SIZES"):
            litert_zoo.IMAGE_SIZES.clear()
            litert_zoo.IMAGE_SIZES.update(saved[1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archs", default="efficientnet_b0,mobilenet_v3_small,transformer",
                        help="comma-separated zoo architectures ('' for none)")
    parser.add_argument("--image", type=int, default=None,
                        help="also time EfficientNetB0 on images of this side (e.g. 224)")
    parser.add_argument("--modes", default="reference,optimized,xnnpack")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--bundled", action="store_true", help="also the bundled bench_cnn and mixed models")
    args = parser.parse_args(argv)
    from quantspec.bench import _timed
    from quantspec.litert._bench import _models, mode_cases

    models = _models() if args.bundled else []
    models += [_build(a, None) for a in args.archs.split(",") if a]
    if args.image:
        models.append(_build("efficientnet_b0", args.image))
    modes = set(args.modes.split(","))
    print("| model | mode | threads | quantspec ms | LiteRT configuration | LiteRT ms | ratio of bests | "
          "paired ratio (median) | output |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in models:
        label = Path(path).stem + (f" ({Path(path).parent.name})" if Path(path).parent.name.startswith("zoo")
                                   and Path(path).parent.name != "zoo" else "")
        for case in mode_cases(args.rounds, [path]):
            mode = case.name.rsplit(", ", 1)[0].split(" ")[-1]
            threads = case.name.rsplit(", ", 1)[1]
            if mode not in modes:
                continue
            for p in case.peers:
                times = _timed({"quantspec": case.run, p.name: p.run}, args.rounds)
                best_q, best_p = min(times["quantspec"]), min(times[p.name])
                paired = float(np.median(np.asarray(times["quantspec"]) / np.asarray(times[p.name])))
                equal = np.asarray(case.output()).tobytes() == np.asarray(p.output()).tobytes()
                print(f"| {label} | {mode} | {threads} | {best_q * 1e3:.3f} | {p.name.removeprefix('LiteRT ')} | "
                      f"{best_p * 1e3:.3f} | {best_q / best_p:.2f}x | {paired:.2f}x | "
                      f"{'equal' if equal else 'DIFFERENT'} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
