"""The fast path of TensorFlow FakeQuant and QuantizeAndDequantize gives the reference path's bytes.

The fused kernel (:func:`quantspec.tf.fast.fake_quant`) and the readable numpy path
(:func:`quantspec.tf.fake_quant.compute_fake_quant`) run on the same plan — Args (multiply by the
inverse scale), Vars (divide by the scale, min == max == 0 gives zeros, no min < max check) and
VarsPerChannel — for every num_bits 2..16, narrow range or not, ordinary, degenerate, reversed,
subnormal, huge and non-finite ranges, on inputs with ±0, ±inf, NaN payloads, subnormals (flushed),
huge values, the nudged range's edges and every grid tie with its float32 neighbours; per-channel
with odd channel counts and ranks.  The bytes must be identical.  The TensorFlow conformance tests
(``test_tf_conformance.py``) call the public functions, which take this path when numba is present.
QuantizeAndDequantize (float32) likewise (:func:`quantspec.tf.qdq.compute_qdq` against
:func:`quantspec.tf.fast.qdq`): signed and unsigned, every round mode, given and data ranges,
per-axis along any axis.

For a few parameter sets the two paths are compared on every 1024th float32 bit pattern (from an
offset drawn with ``QUANTSPEC_SEED``), and with ``QUANTSPEC_SIMULATED_EXHAUSTIVE=1`` on all 2^32 of
them (minutes each: the numpy path is the slow side).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from refs import require_fast
from quantspec import tf as qtf
from quantspec.tf import fake_quant as F
from quantspec.tf import fast

f32 = np.float32


@pytest.fixture(autouse=True)
def _numba():
    require_fast()


VARIANTS = {  # name -> (divide, zero_special), as the three ops build their plans
    "args": (False, False),
    "vars": (True, True),
    "per_channel": (False, True),
}

RANGES = [(-6.0, 6.0), (-1.3, 2.7), (0.5, 2.7), (-2.7, -0.5), (0.0, 1.0), (-1.0, 0.0), (-1e-3, 7e-4),
          (-3e38, 3e38), (-1e-38, 1e-38), (1e-45, 3e-45)]
# Vars and VarsPerChannel do not check their range: reversed, empty, zero, non-finite ones run too
UNCHECKED = [(0.0, 0.0), (-0.0, 0.0), (2.0, 2.0), (3.0, -1.0), (np.nan, 1.0), (-1.0, np.nan), (-np.inf, 1.0),
             (-1.0, np.inf), (-np.inf, np.inf), (1e-40, 2e-40), (-f32(3.4e38), f32(3.4e38))]


def _inputs(plan, rng, n_random=3000) -> np.ndarray:
    """Special values, the nudged range's edges and the grid's ties with their neighbours, random."""
    t = np.finfo(f32).smallest_subnormal
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, t, -t, 2 * t, -2 * t,
               np.finfo(f32).tiny, -np.finfo(f32).tiny, np.finfo(f32).tiny * f32(0.5),
               np.finfo(f32).max, -np.finfo(f32).max, 1e30, -1e30, 0.5, -0.5, 1.0, -1.0]
    xs = [np.array(special, f32), np.array([0x7FC00001, 0xFFC12345, 0x7F800001, 0x807FFFFF, 0x007FFFFF], np.uint32).view(f32)]
    with np.errstate(all="ignore"):
        for c in range(plan.scale.shape[0]):
            nmin, nmax, scale = plan.nudged_min[c], plan.nudged_max[c], plan.scale[c]
            pts = [nmin, nmax]
            if np.isfinite(scale) and scale > 0:
                steps = np.arange(-2, min(int((nmax - nmin) / scale) if np.isfinite(nmax - nmin) else 0, 70000) + 3)
                k = np.unique(np.concatenate([steps[:300], steps[-300:], rng.choice(steps, min(400, steps.size))]))
                grid = nmin + k.astype(f32) * scale
                ties = nmin + (k.astype(f32) + f32(0.5)) * scale
                pts += list(grid) + list(ties)
            p = np.array(pts, f32)
            p = p[np.isfinite(p)]
            xs += [p, np.nextafter(p, f32(np.inf)), np.nextafter(p, f32(-np.inf)), -p]
            lo, hi = (nmin, nmax) if np.isfinite(nmin) and np.isfinite(nmax) and nmin < nmax else (-10.0, 10.0)
            span = float(hi) - float(lo)
            xs.append(rng.uniform(float(lo) - 0.1 * span, float(hi) + 0.1 * span, n_random).astype(f32))
    xs.append(rng.integers(0, 1 << 32, n_random, dtype=np.uint64).astype(np.uint32).view(f32))
    return np.concatenate(xs)


def _same(x, plan, label):
    want = F.compute_fake_quant(x, plan)
    got = fast.fake_quant(x, plan)
    assert got.dtype == want.dtype == f32 and got.shape == want.shape, label
    if want.tobytes() != got.tobytes():
        bad = np.flatnonzero(want.reshape(-1).view(np.uint32) != got.reshape(-1).view(np.uint32))[:5]
        xf = np.broadcast_to(x, want.shape).reshape(-1)
        raise AssertionError(f"{label}: {bad.size}+ differ, e.g. x={xf[bad]!r} reference={want.reshape(-1)[bad]!r} "
                             f"fast={got.reshape(-1)[bad]!r}")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("num_bits", range(2, 17))
@pytest.mark.parametrize("narrow", [False, True])
def test_per_tensor(variant, num_bits, narrow):
    rng = np.random.default_rng(num_bits * 2 + narrow)
    divide, zero_special = VARIANTS[variant]
    ranges = RANGES + (UNCHECKED if zero_special else [])
    for mn, mx in ranges:
        plan = F.plan_fake_quant(np.array([mn], f32), np.array([mx], f32), num_bits, narrow, divide=divide,
                       zero_special=zero_special)
        assert fast.path_fake_quant(plan) == "fast"
        _same(_inputs(plan, rng, 500), plan, (variant, num_bits, narrow, mn, mx))


@pytest.mark.parametrize("shape", [(1, 1), (7, 3), (5, 17), (2, 3, 5), (4, 1, 31), (33,)])
@pytest.mark.parametrize("num_bits", [2, 5, 8, 13, 16])
@pytest.mark.parametrize("narrow", [False, True])
def test_per_channel(shape, num_bits, narrow):
    rng = np.random.default_rng(num_bits)
    depth = shape[-1]
    pool = RANGES + UNCHECKED
    pick = rng.choice(len(pool), depth)
    mn = np.array([pool[i][0] for i in pick], f32)
    mx = np.array([pool[i][1] for i in pick], f32)
    plan = F.plan_fake_quant(mn, mx, num_bits, narrow, divide=False, zero_special=True)
    flat = _inputs(plan, rng, 200)
    rows = -(-flat.size // int(np.prod(shape)))
    x = np.resize(rng.permutation(flat), (rows,) + shape) if len(shape) > 1 else np.resize(flat, shape)
    _same(x, plan, (shape, num_bits, narrow))
    # and each channel's whole corpus across every row of a (rows, depth) tensor
    _same(np.repeat(flat[:, None], depth, axis=1), plan, (shape, num_bits, narrow, "columns"))


def test_parallel(small_parallel):
    """The pool's threads and streaming stores (small thresholds): the same bytes."""
    rng = np.random.default_rng(7)
    for mn, mx, divide, zs in ((-6.0, 6.0, False, False), (-1.3, 2.7, True, True)):
        plan = F.plan_fake_quant(np.array([mn], f32), np.array([mx], f32), 8, False, divide=divide, zero_special=zs)
        _same(np.resize(_inputs(plan, rng), 100_003), plan, (mn, mx, "parallel"))
    mn = np.array([-1.0, 0.0, -3.0, 0.25, -7.5], f32)
    mx = np.array([1.0, 0.0, 3.0, 0.5, 2.5], f32)
    plan = F.plan_fake_quant(mn, mx, 6, True, divide=False, zero_special=True)
    _same(rng.normal(0, 3, (20_011, 5)).astype(f32), plan, "parallel per-channel")


@pytest.mark.parametrize("fast_on", [True, False])
def test_public_functions_select_the_path(monkeypatch, fast_on):
    """The three ops (and the record's run with out=) take the fast path unless QUANTSPEC_FAST=0;
    both give the same bytes."""
    if not fast_on:
        monkeypatch.setenv("QUANTSPEC_FAST", "0")
    op = qtf.FakeQuantOp(-1.3, 2.7)
    called = []
    real = fast.fake_quant
    monkeypatch.setattr(fast, "fake_quant", lambda *a, **k: called.append(1) or real(*a, **k))
    x = np.array([-7.0, -0.0, 0.0, 1e-40, 0.1234, 3.0, np.inf, np.nan, 6.2], f32)
    ys = [qtf.fake_quant_with_min_max_args(x, min=-1.3, max=2.7),
          qtf.fake_quant_with_min_max_vars(x, f32(-1.3), f32(2.7), num_bits=5),
          qtf.fake_quant_with_min_max_vars_per_channel(x.reshape(3, 3), np.array([-1, 0, -2], f32),
                                                       np.array([1, 0, 5], f32), narrow_range=True)]
    out = np.empty_like(x)
    ys.append(op.run(x, out))
    assert op.fast is fast_on
    assert len(called) == (4 if fast_on else 0)
    plans = [F.plan_fake_quant(np.array([-1.3], f32), np.array([2.7], f32), 8, False, divide=False, zero_special=False),
             F.plan_fake_quant(np.array([-1.3], f32), np.array([2.7], f32), 5, False, divide=True, zero_special=True),
             F.plan_fake_quant(np.array([-1, 0, -2], f32), np.array([1, 0, 5], f32), 8, True, divide=False, zero_special=True)]
    wants = [F.compute_fake_quant(x, plans[0]), F.compute_fake_quant(x, plans[1]),
             F.compute_fake_quant(x.reshape(3, 3), plans[2]), F.compute_fake_quant(x, plans[0])]
    for y, w in zip(ys, wants):
        assert y.tobytes() == w.tobytes()
    assert np.isnan(ys[0][7]) and ys[2][0, 1] == 0 and ys[2][1, 1] == 0   # NaN stays; the zero channel gives 0


def test_empty_and_scalar():
    plan = F.plan_fake_quant(np.array([-1.0], f32), np.array([1.0], f32), 8, False, divide=False, zero_special=False)
    assert fast.fake_quant(np.zeros((0, 3), f32), plan).shape == (0, 3)
    x = np.array(0.3, f32)
    assert fast.fake_quant(x, plan).tobytes() == F.compute_fake_quant(x, plan).tobytes()


EXHAUSTIVE = [  # (min, max, num_bits, narrow, variant)
    (-6.0, 6.0, 8, False, "args"),
    (-1.3, 2.7, 16, True, "vars"),
    (0.0, 0.0, 8, False, "vars"),
]


# every float32 bit pattern with QUANTSPEC_SIMULATED_EXHAUSTIVE=1 (minutes); else every 1024th one
# from a seeded offset (4 Mi inputs spread over every sign, exponent and the high mantissa bits)
SEED = int(os.environ.get("QUANTSPEC_SEED", "20261126"))
STRIDE = 1 if os.environ.get("QUANTSPEC_SIMULATED_EXHAUSTIVE", "") == "1" else 1024


def _every_input(reference, fast_path):
    """``fast_path(x) == reference(x)`` bit for bit for every float32 bit pattern ``x`` (every
    STRIDE-th one)."""
    chunk = 1 << 22
    offset = int(np.random.default_rng(SEED).integers(0, STRIDE)) if STRIDE > 1 else 0

    def ref(start):      # numpy releases the GIL: two chunks of the slow side at once
        x = np.arange(start + offset, min(start + chunk * STRIDE, 1 << 32), STRIDE,
                      dtype=np.uint64).astype(np.uint32).view(f32)
        return x, reference(x)

    with ThreadPoolExecutor(2) as ex:
        for x, want in ex.map(ref, range(0, 1 << 32, chunk * STRIDE)):
            got = fast_path(x)
            bad = np.flatnonzero(want.view(np.uint32) != got.view(np.uint32))
            assert bad.size == 0, f"{bad.size} inputs differ, e.g. bit patterns {x[bad[:5]].view(np.uint32)!r}"


@pytest.mark.parametrize("mn, mx, num_bits, narrow, variant", EXHAUSTIVE)
def test_every_float32_input(mn, mx, num_bits, narrow, variant):
    divide, zero_special = VARIANTS[variant]
    plan = F.plan_fake_quant(np.array([mn], f32), np.array([mx], f32), num_bits, narrow, divide=divide,
                   zero_special=zero_special)
    _every_input(lambda x: F.compute_fake_quant(x, plan), lambda x: fast.fake_quant(x, plan))


# -- QuantizeAndDequantize ---------------------------------------------------------------------------
from quantspec.tf import qdq as Q  # noqa: E402

QDQ_RANGES = [(-6.0, 6.0), (-1.3, 2.7), (0.5, 2.7), (-2.7, -0.5), (0.0, 1.0), (-1.0, 0.0), (0.0, 0.0),
              (-1e-3, 7e-4), (-3e38, 3e38), (-1e-38, 1e-38), (1e-40, 2e-40), (-np.inf, np.inf), (2.0, 2.0)]


def _qdq_inputs(lo, hi, inv, rng):
    t = np.finfo(f32).smallest_subnormal
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, t, -t, np.finfo(f32).tiny, np.finfo(f32).max,
                        -np.finfo(f32).max, 0.5, -0.5, 1.5, -2.5, 1e30, -1e30], f32)
    xs = [special, np.array([0x7FC00001, 0xFFC12345, 0x7F800001], np.uint32).view(f32)]
    with np.errstate(all="ignore"):
        if np.isfinite(inv) and inv > 0:
            k = np.arange(-70, 70, dtype=f32)
            ties = (k + f32(0.5)) * inv
            xs += [ties, np.nextafter(ties, f32(np.inf)), np.nextafter(ties, f32(-np.inf)), k * inv]
        p = np.array([lo, hi], f32)
        xs += [p, np.nextafter(p, f32(np.inf)), np.nextafter(p, f32(-np.inf))]
        a, b = (float(lo), float(hi)) if np.isfinite(lo) and np.isfinite(hi) and lo < hi else (-10.0, 10.0)
        xs.append(rng.uniform(a - 0.1 * (b - a), b + 0.1 * (b - a), 600).astype(f32))
    xs.append(rng.integers(0, 1 << 32, 300, dtype=np.uint64).astype(np.uint32).view(f32))
    return np.concatenate(xs)


def _same_qdq(x, plan, label):
    assert fast.path_qdq(plan) == "fast", label
    want, got = Q.compute_qdq(x, plan), fast.qdq(x, plan)
    assert want.tobytes() == got.tobytes(), (label, np.flatnonzero(want.view(np.uint32) != got.view(np.uint32))[:5])


@pytest.mark.parametrize("signed", [True, False])
@pytest.mark.parametrize("round_mode", ["HALF_TO_EVEN", "HALF_UP"])
@pytest.mark.parametrize("narrow", [False, True])
def test_qdq_range_given(signed, round_mode, narrow):
    rng = np.random.default_rng(3)
    for num_bits in (1, 2, 3, 7, 8, 11, 16, 24, 31) if signed else (1, 2, 8, 16, 31, 32):
        for mn, mx in QDQ_RANGES:
            x = np.zeros(1, f32)
            plan = Q.prepare_qdq(x, f32(mn), f32(mx), version=4, signed_input=signed, num_bits=num_bits,
                                 range_given=True, round_mode=round_mode, narrow_range=narrow)
            if fast.path_qdq(plan) != "fast":
                assert np.isnan(plan.inv).any()
                continue
            xs = _qdq_inputs(plan.lo[0], plan.hi[0], plan.inv[0], rng)
            _same_qdq(xs, plan, (signed, num_bits, narrow, mn, mx))


@pytest.mark.parametrize("round_mode", ["HALF_TO_EVEN", "HALF_UP"])
@pytest.mark.parametrize("shape, axis", [((101,), None), ((7, 3), 1), ((5, 17), 0), ((2, 3, 5), 1), ((4, 1, 31), -1)])
@pytest.mark.parametrize("given", [True, False])
def test_qdq_per_axis_and_data_range(round_mode, shape, axis, given):
    """Per-axis (odd sizes, any axis) and ranges found in the data; a NaN in a slice can make its
    inverse scale NaN, which the reference path alone computes."""
    rng = np.random.default_rng(11)
    channels = 1 if axis is None else shape[axis]
    for trial in range(6):
        x = rng.normal(0, 10.0 ** rng.integers(-3, 4), shape).astype(f32)
        if trial >= 3:
            x.reshape(-1)[rng.integers(0, x.size, 3)] = np.array([np.inf, -0.0, 1e-40], f32)
        mn = np.array([QDQ_RANGES[(trial + c) % len(QDQ_RANGES)][0] for c in range(channels)], f32)
        mx = np.array([QDQ_RANGES[(trial + c) % len(QDQ_RANGES)][1] for c in range(channels)], f32)
        if axis is None:
            mn, mx = mn[0], mx[0]
        plan = Q.prepare_qdq(x, mn, mx, version=3, num_bits=(4, 8, 13)[trial % 3], range_given=given,
                             round_mode=round_mode, narrow_range=bool(trial % 2), axis=axis)
        if fast.path_qdq(plan) == "fast":
            _same_qdq(x, plan, (shape, axis, trial))
        else:
            assert np.isnan(plan.inv).any()


def test_qdq_parallel_and_public(small_parallel, monkeypatch):
    rng = np.random.default_rng(5)
    x = rng.normal(0, 3, (20_011, 5)).astype(f32)
    for axis, given in ((None, True), (1, True), (0, False), (None, False)):
        n = 1 if axis is None else x.shape[axis]
        mn, mx = (f32(-2.0), f32(3.0)) if axis is None else (np.full(n, -2, f32), np.full(n, 3, f32))
        plan = Q.prepare_qdq(x, mn, mx, version=2, range_given=given, axis=axis, round_mode="HALF_UP")
        _same_qdq(x, plan, (axis, given))
    called = []
    real = fast.qdq
    monkeypatch.setattr(fast, "qdq", lambda *a, **k: called.append(1) or real(*a, **k))
    y = qtf.quantize_and_dequantize_v4(x, f32(-2), f32(3), range_given=True)
    assert called and y.tobytes() == Q.compute_qdq(x, Q.prepare_qdq(x, f32(-2), f32(3), version=4,
                                                                     range_given=True)).tobytes()
    op = qtf.QuantizeAndDequantizeOp(-2.0, 3.0, range_given=True)
    assert op.fast
    out = np.empty(x.size, f32)
    assert op.run(x.reshape(-1), out).tobytes() == y.reshape(-1).tobytes()
    monkeypatch.setenv("QUANTSPEC_FAST", "0")
    assert not op.fast
    n = len(called)
    assert qtf.quantize_and_dequantize_v4(x, f32(-2), f32(3), range_given=True).tobytes() == y.tobytes()
    assert len(called) == n


@pytest.mark.parametrize("round_mode", ["HALF_TO_EVEN", "HALF_UP"])
def test_qdq_every_float32_input(round_mode):
    plan = Q.prepare_qdq(np.zeros(1, f32), f32(-1.3), f32(2.7), version=4, num_bits=8, range_given=True,
                         round_mode=round_mode)
    _every_input(lambda x: Q.compute_qdq(x, plan), lambda x: fast.qdq(x, plan))
