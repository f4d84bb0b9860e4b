"""Seeded corpora for the ONNX conformance tests: inputs, scales and zero points per case.

Every corpus mixes exact .5 ties on grid data, integers, ±0, ±inf, NaN, huge values (beyond int32
and float16), denormals, the float8/float6/float4 saturation edges (max, max + half an ulp, the ORT
windows [480, 496) and [61440, 65536)), and random normal / uniform data — all in units of the
scale, so the interesting quotients actually occur.  Shapes are odd (sub-byte slices of odd length,
partial last blocks).  ``QUANTSPEC_SEED`` and ``QUANTSPEC_SWEEP_SIZE`` (a multiplier of the random
part) control the sweep; CI runs the defaults.
"""

from __future__ import annotations

import os
import zlib

import ml_dtypes
import numpy as np

from quantspec.dtypes import qtype

SEED = int(os.environ.get("QUANTSPEC_SEED", "20261122"))
SIZE = max(1, int(os.environ.get("QUANTSPEC_SWEEP_SIZE", "1")))

SPECIAL_QUOTIENTS = np.array([
    0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e30, -1e30, 3e9, -3e9, 2.0 ** 31, -2.0 ** 31, 2.0 ** 31 - 64,
    70000.0, -70000.0, 65504.0, 65520.0, 1e-40, -1e-45, 1e-30, 2.0 ** -24, 2.0 ** -25,
    # float8 / float6 / float4 edges
    448.0, 464.0, 464.5, 465.0, 479.9, 480.0, 488.0, 495.9, 496.0, 500.0, 512.0, -465.0, -480.0, -490.0,
    240.0, 244.0, 247.9, 248.0, 250.0, 256.0, 57344.0, 59392.0, 61439.0, 61440.0, 63000.0, 65535.0, 65536.0,
    -61440.0, -64000.0, 6.0, 6.5, 7.0, 7.25, 7.5, 7.75, 8.0, 24.0, 26.0, 28.0, 30.0, 32.0,
    0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.0625, 0.09375, 0.03125, 2.0 ** -7, 2.0 ** -9, 2.0 ** -10, 2.0 ** -17,
    127.5, -128.5, 255.5, 32767.5, -32768.5, 65535.5, 7.5, -8.5, 15.5, 1.5, -2.5, 3.5,
])


def rng_for(*key) -> np.random.Generator:
    """A generator seeded by SEED and a stable hash of the case key (so each case is reproducible)."""
    return np.random.default_rng([SEED, zlib.crc32(repr(key).encode())])


def quotients(rng: np.random.Generator, n_random: int = 96, limit: int | None = None) -> np.ndarray:
    """Target quotients x/s (float64): the specials, then ties, grid and random values; with ``limit``,
    the specials plus a random subset of the rest (for slow scalar oracles)."""
    n = n_random * SIZE
    ties = np.arange(-40, 40) + 0.5
    grid = np.arange(-64, 64) / 8.0
    rest = np.concatenate([ties, grid, rng.normal(0, 40, n), rng.uniform(-300, 300, n), rng.normal(0, 2, n),
                           np.ldexp(rng.uniform(-1, 1, n // 4), rng.integers(-30, 40, n // 4))])
    if limit is not None and rest.size > limit:
        rest = rng.choice(rest, size=limit * SIZE, replace=False)
    return np.concatenate([SPECIAL_QUOTIENTS, rest])


def cast_x(values: np.ndarray, t: str) -> np.ndarray:
    """float64 values as an input array of type ``t`` (int32 values rounded and clipped)."""
    qt = qtype(t)
    if qt.name == "int32":
        v = np.nan_to_num(values, nan=0.0, posinf=2 ** 31 - 1, neginf=-(2 ** 31))
        return np.clip(np.rint(v), -(2 ** 31), 2 ** 31 - 1).astype(np.int32)
    with np.errstate(over="ignore", invalid="ignore"):
        return values.astype(np.float32).astype(qt.dtype)


SCALE_CHOICES = np.array([0.25, 0.5, 2.0, 1.0, 0.1, 0.8, 0.37, 3.0, 1 / 3, 0.0078125, 12.5, 2.0 ** -10])


def scales(rng: np.random.Generator, shape, t: str) -> np.ndarray:
    qt = qtype(t)
    if qt.name == "int32":
        return rng.integers(1, 9, size=shape).astype(np.int32)
    if qt.name == "float8e8m0":
        return np.ldexp(1.0, rng.integers(-12, 4, size=shape)).astype(np.float32).astype(qt.dtype)
    return rng.choice(SCALE_CHOICES, size=shape).astype(np.float32).astype(qt.dtype)


def zero_points(rng: np.random.Generator, shape, t: str, zero: bool = False) -> np.ndarray:
    qt = qtype(t)
    if zero:
        return np.zeros(shape, qt.dtype)
    if qt.is_int:
        lo, hi = int(qt.qmin), int(qt.qmax)
        # mostly small offsets, sometimes the extremes
        v = np.clip(rng.integers(-5, 6, size=shape) + (0 if lo < 0 else (lo + hi) // 2), lo, hi)
        v = np.where(rng.random(shape) < 0.15, rng.choice([lo, hi], size=shape), v)
        return np.asarray(v).astype(np.int64).astype(qt.storage).astype(qt.dtype)
    if qt.bits == 8:  # float8 zero points: ignored by Q; DQ requires zeros
        return rng.choice([0.0, 1.0, -2.0], size=shape).astype(np.float32).astype(qt.dtype)
    return rng.choice([0.0, 0.5, 1.0, -1.5, 2.0, -0.0], size=shape).astype(np.float32).astype(qt.dtype)


def layout(rng: np.random.Generator, granularity: str, n: int):
    """(shape, axis, block_size, param_shape) for a corpus of about ``n`` elements."""
    if granularity == "tensor":
        shapes = [(n,), (3, n // 3), ()]
        shape = shapes[rng.integers(0, 2)] if n else (0,)
        return shape, 1, 0, ()
    if granularity == "axis":
        shape = (3, 5, max(1, n // 15))
        axis = int(rng.integers(-3, 3))
        return shape, axis, 0, (shape[axis],)
    shape = (5, 7, max(1, n // 35))
    axis = int(rng.integers(-3, 3))
    d = shape[axis]
    b = int(rng.choice([2, 3, 4, max(2, d // 2 + 1)]))
    pshape = list(shape)
    pshape[axis] = -(-d // b)
    return shape, axis, b, tuple(pshape)


def fit(values: np.ndarray, shape) -> np.ndarray:
    """``values`` repeated/truncated to fill ``shape``."""
    size = int(np.prod(shape, dtype=np.int64))
    if size == 0:
        return values[:0].reshape(shape)
    reps = -(-size // values.size)
    return np.tile(values, reps)[:size].reshape(shape)


def expand(param: np.ndarray, shape, axis: int, block: int, granularity: str) -> np.ndarray:
    """Broadcast a parameter to the full input shape (test-side, for the oracle)."""
    if granularity == "tensor":
        return np.broadcast_to(param.reshape(()), shape)
    a = axis % len(shape)
    if granularity == "axis":
        view = [1] * len(shape)
        view[a] = param.shape[0]
        return np.broadcast_to(param.reshape(view), shape)
    return np.repeat(param, block, axis=a).take(np.arange(shape[a]), axis=a)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def show_diff(x: np.ndarray, want: np.ndarray, got: np.ndarray, k: int = 6) -> str:
    t = qtype(want.dtype)
    w, g = want.reshape(-1).view(t.storage), got.reshape(-1).view(t.storage)
    idx = np.nonzero(w != g)[0]
    xs = np.asarray(x).reshape(-1) if np.size(x) == w.size else np.full(w.size, np.nan)
    rows = [f"x={xs[i]!r} want={want.reshape(-1)[i]!r} ({w[i]}) got={got.reshape(-1)[i]!r} ({g[i]})" for i in idx[:k]]
    return f"{idx.size} of {w.size} differ: " + "; ".join(rows)


__all__ = ["SEED", "SIZE", "rng_for", "quotients", "cast_x", "scales", "zero_points", "layout", "fit", "expand",
           "same_bits", "show_diff", "ml_dtypes"]
