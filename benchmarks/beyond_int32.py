"""The fast kernels beyond 2^31 elements: the same bytes as on small pieces of the same data.

One float32 array of ``--size`` elements (default 2^31 + 37: 8 GiB, with 2 GiB for each int8
result; about 19 GiB at the peak for the dequantize) holds a pattern of period 251, so that an
index that wraps at 2^31 or is cut to 32 bits gives other values.  Each case computes the whole
array in one call, then the same function on 64 Mi-element pieces (the first, the last three) and on
the last 1000 elements, which are computed with small indices, and compares the bytes.  Not a test
(the memory and the minutes do not belong in the suite); run it where the memory is.

    python benchmarks/beyond_int32.py [--size N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import quantspec.litert as ql
import quantspec.onnx as qo
import quantspec.tf as qt

PIECE = 1 << 26


def _data(n: int) -> np.ndarray:
    tile = np.resize(((np.arange(251, dtype=np.float32)) - 125) * np.float32(0.1), 251 * 4096)
    x = np.empty(n, np.float32)
    for i in range(0, n, tile.size * 256):
        seg = x[i:i + tile.size * 256]
        seg[:] = np.resize(tile, seg.size)
    return x


def _check(name: str, f, x: np.ndarray) -> bool:
    t = time.perf_counter()
    y = f(x)
    seconds = time.perf_counter() - t
    n = x.size
    starts = [0, *list(range(0, n, PIECE))[-3:]]
    pieces = [(i, min(n, i + PIECE)) for i in starts] + [(n - 1000, n)]
    ok = all(y[a:b].dtype == (want := f(x[a:b])).dtype and y[a:b].tobytes() == want.tobytes() for a, b in pieces)
    print(f"{name:34s} {'same bytes' if ok else 'DIFFERENT'}   whole call {seconds:5.1f} s", flush=True)
    return ok


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=2**31 + 37, help="elements (default 2^31 + 37)")
    n = p.parse_args().size
    x = _data(n)
    blocks = np.full(-(-n // 32), 0.5, np.float32)
    cases = [
        ("onnx quantize int8", lambda v: qo.quantize_linear(v, np.float32(0.05), np.int8(3))),
        ("onnx quantize int4", lambda v: qo.quantize_linear(v, np.float32(0.5), output_dtype="int4")),
        ("onnx quantize float8e4m3fn", lambda v: qo.quantize_linear(v, np.float32(0.5), output_dtype="float8e4m3fn")),
        ("onnx quantize int4, blocks of 32", lambda v: qo.quantize_linear(v, blocks[:-(-v.size // 32)], axis=0,
                                                                          block_size=32, output_dtype="int4")),
        ("tf QuantizeV2 qint8", lambda v: qt.quantize(v, -3.0, 3.0, "qint8")[0]),
        ("litert QUANTIZE", lambda v: ql.quantize(v, ql.QuantParams(np.float32(0.05), 3))),
    ]
    ok = True
    for name, f in cases:
        ok &= _check(name, f, x)
    q = qo.quantize_linear(x, np.float32(0.05), np.int8(3))
    del x
    ok &= _check("onnx dequantize int8", lambda v: qo.dequantize_linear(v, np.float32(0.05), np.int8(3)), q)
    ok &= _check("tf Dequantize qint8", lambda v: qt.dequantize(v, -3.0, 3.0), q)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
