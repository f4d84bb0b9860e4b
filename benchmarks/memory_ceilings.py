"""What this machine's memory system allows the streamed kernels: the rates that bound them.

Measured on the threads the kernels use (numba's pool, ``--threads``, default 2), warm buffers, best
of ``--rounds``, ``--size`` bytes per array:

- read: a vectorised sum over a uint8 array (bytes read per second);
- plain write: a fill with ordinary stores (each line read for ownership first, unless the
  processor sees whole lines written);
- streamed write: a fill with 64-byte non-temporal stores (``nbprim.stream_line``, what the kernels
  use from ``core.STREAM_FROM`` bytes of output), fenced once per worker;
- copy: float32 copy with ordinary stores, read + write counted (``quantspec bench``'s yardstick).

It then prints the element rates the streamed write alone would allow each case of ``quantspec
bench`` (bytes written per element against the streamed-write rate): an int8 -> float32 dequantize
writes 4 bytes an element, so it cannot outrun a quarter of the streamed-write rate whatever its
reads cost, and its ratio to onnxruntime is bounded by that over onnxruntime's own rate.

    python benchmarks/memory_ceilings.py [--size BYTES] [--rounds N] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
from numba import njit, prange, set_num_threads  # noqa: E402

from quantspec._fastpath.nbprim import stream_fence, stream_line  # noqa: E402

J = dict(parallel=True, fastmath=False, error_model="numpy", nogil=True, cache=False)


@njit(**J)
def _read(x, parts):
    total = np.uint64(0)
    for t in prange(parts):
        a = np.uint64(x.size * t // parts)
        b = np.uint64(x.size * (t + 1) // parts)
        acc = np.uint64(0)
        for i in range(a, b):
            acc += np.uint64(x[i])
        total += acc
    return total


@njit(**J)
def _plain_fill(y, parts):
    for t in prange(parts):
        a = np.uint64(y.size * t // parts)
        b = np.uint64(y.size * (t + 1) // parts)
        for i in range(a, b):
            y[i] = np.uint8(i & np.uint64(255))      # not a constant: LLVM would call memset


@njit(**J)
def _streamed_fill(y, parts):
    """``y`` 64-byte aligned, its size a multiple of 64 * parts."""
    for t in prange(parts):
        line = np.ones(64, np.uint8)
        a = np.uint64(y.size * t // parts)
        b = np.uint64(y.size * (t + 1) // parts)
        for i in range(a, b, np.uint64(64)):
            stream_line(y, i, line, np.uint64(0))
        stream_fence()


@njit(**J)
def _copy(x, y, parts):
    for t in prange(parts):
        a = np.uint64(x.size * t // parts)
        b = np.uint64(x.size * (t + 1) // parts)
        for i in range(a, b):
            y[i] = x[i]


def _best(f, rounds: int) -> float:
    f()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def _aligned(nbytes: int) -> np.ndarray:
    raw = np.zeros(nbytes + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    return raw[off:off + nbytes]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=256 << 20, help="bytes per array (default 256 MiB)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    set_num_threads(args.threads)
    n, parts = args.size // (64 * args.threads) * (64 * args.threads), args.threads
    src, dst = np.ones(n, np.uint8), _aligned(n)
    f32a, f32b = np.ones(n // 4, np.float32), np.zeros(n // 4, np.float32)
    rates = {
        "read": n / _best(lambda: _read(src, parts), args.rounds),
        "plain write": n / _best(lambda: _plain_fill(dst, parts), args.rounds),
        "streamed write": n / _best(lambda: _streamed_fill(dst, parts), args.rounds),
        "check": _read(dst, parts) == n,          # the streamed fill wrote every byte
        "copy (read + write)": 2 * n / _best(lambda: _copy(f32a, f32b, parts), args.rounds),
    }
    assert rates.pop("check"), "the streamed fill missed bytes"
    print(f"{n} bytes per array, {args.threads} threads, best of {args.rounds}")
    for k, v in rates.items():
        print(f"  {k:<22} {v / 1e9:6.1f} GB/s")
    w = rates["streamed write"]
    print("element rates the streamed writes alone allow:")
    for case, out_bytes in (("f32 -> int8 quantize", 1), ("int8 -> f32 dequantize", 4)):
        print(f"  {case:<24} {w / out_bytes / 1e9:6.1f} Gelem/s")


if __name__ == "__main__":
    main()
