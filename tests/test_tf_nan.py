"""NaN and signed-zero bits of QuantizeAndDequantize V2 / V3 / V4 against TensorFlow 2.21, in-process.

Where the result depends on the order of TensorFlow's Eigen loops (quantspec.tf._eigen): the payload
kept when an input NaN meets a NaN ``inv`` (packet loop or scalar tail, per kernel), and the range
found with ``range_given=False`` (NaN skipped, erasing, or becoming the range; the sign of a zero
extreme), per tensor -- tree reduction and thread shards included -- and per axis.  QuantizeAndDequantize
has no fast path: both settings of QUANTSPEC_FAST must give TensorFlow's bits.
"""

from __future__ import annotations

import numpy as np
import pytest

import quantspec.tf as qt
import tf_oracle as O
from quantspec.tf import _eigen
from refs import require

f32, f64 = np.float32, np.float64
UINT = {np.dtype(f32): np.uint32, np.dtype(f64): np.uint64}
QNAN = {np.dtype(f32): 0x7FC00000, np.dtype(f64): 0x7FF8000000000000}


@pytest.fixture(scope="module")
def tf():
    return require("tensorflow")


def bits(a) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(UINT[a.dtype])


def payloads(dtype, n: int) -> np.ndarray:
    """n NaNs with distinct payloads, both signs, every third one signalling."""
    dtype = np.dtype(dtype)
    u = UINT[dtype]
    quiet = u(1) << u(np.finfo(dtype).nmant - 1)
    p = (np.arange(n, dtype=u) + u(1)) | u(QNAN[dtype])
    p[::3] &= ~quiet                                        # signalling (the payload stays nonzero)
    p[1::2] |= u(1) << u(8 * dtype.itemsize - 1)            # negative
    return p.view(dtype)


def tf_qdq(tf, x, lo, hi, version, **kw):
    a = dict(input=tf.constant(np.asarray(x)), input_min=tf.constant(np.asarray(lo)),
             input_max=tf.constant(np.asarray(hi)))
    if version == 3:
        kw.pop("round_mode", None)
        return tf.raw_ops.QuantizeAndDequantizeV3(num_bits=np.int32(kw.pop("num_bits")), **a, **kw).numpy()
    return getattr(tf.raw_ops, f"QuantizeAndDequantizeV{version}")(**a, **kw).numpy()


def qs_qdq(x, lo, hi, version, **kw):
    if version == 3:
        kw.pop("round_mode", None)
        return qt.quantize_and_dequantize_v3(x, lo, hi, kw.pop("num_bits"), **kw)
    return getattr(qt, f"quantize_and_dequantize_v{version}")(x, lo, hi, **kw)


SIZES = list(range(1, 41)) + [63, 64, 65, 127, 1000, 1003, 4099]


def test_reported_case(tf):
    """V3, range [0, 0], 1 bit: inv is 0/0 (the default NaN, 0xffc00000).  A NaN input at index >= 16
    of 17+ float32 elements came out as 0xffc00000; TensorFlow gives the input's own 0x7fc00000 there
    (its packet loop), and 0xffc00000 only in its scalar tail (the last size % 8 elements)."""
    for n in (1, 7, 8, 15, 16, 17, 20, 24, 33, 40):
        for i in range(n):
            x = np.linspace(-1, 1, n).astype(f32)
            x[i] = np.nan
            want = bits(tf.raw_ops.QuantizeAndDequantizeV3(input=x, input_min=f32(0), input_max=f32(0),
                                                             num_bits=np.int32(1)).numpy())
            got = bits(qt.quantize_and_dequantize_v3(x, 0.0, 0.0, 1))
            assert got.tolist() == want.tolist(), (n, i)
            assert got[i] == (0x7FC00000 if i < n // 8 * 8 else 0xFFC00000)


@pytest.mark.parametrize("dtype", [f32, f64])
@pytest.mark.parametrize("version,round_mode", [(3, "HALF_TO_EVEN"), (2, "HALF_TO_EVEN"), (4, "HALF_UP")])
def test_nan_meets_nan_every_position(tf, dtype, version, round_mode):
    """Every element NaN (distinct payloads, both signs, signalling ones) and inv NaN, per tensor."""
    for n in SIZES:
        x = payloads(dtype, n)
        kw = dict(num_bits=1, range_given=True, round_mode=round_mode, signed_input=True)
        want = tf_qdq(tf, x, dtype(0), dtype(0), version, **dict(kw))
        got = qs_qdq(x, dtype(0), dtype(0), version, **dict(kw))
        assert bits(got).tolist() == bits(want).tolist(), n


@pytest.mark.parametrize("dtype", [f32, f64])
@pytest.mark.parametrize("round_mode", ["HALF_TO_EVEN", "HALF_UP"])
def test_nan_range_from_the_data(tf, dtype, round_mode):
    """range_given=False: NaN among the data decides the range by position; with a last NaN the range
    is that NaN and inv carries its payload."""
    rng = np.random.default_rng([O.SEED, 900])
    for n in SIZES:
        for _ in range(3):
            x = rng.uniform(-3, 3, n).astype(dtype)
            m = rng.random(n) < rng.choice([0.1, 0.5, 0.9])
            x[m] = payloads(dtype, int(m.sum()))
            for signed, nb in ((True, 8), (False, 4), (True, 1)):
                kw = dict(num_bits=nb, range_given=False, round_mode=round_mode, signed_input=signed)
                want = tf_qdq(tf, x, dtype(0), dtype(0), 2, **dict(kw))
                got = qs_qdq(x, None, None, 2, **dict(kw))
                assert bits(got).tolist() == bits(want).tolist(), (n, signed, nb)


def test_nan_positions_in_the_range_search(tf):
    """The rules themselves, on 4 float32 elements (all in the scalar tail) and per axis."""
    nan = np.nan
    cases = [
        ([-0.9, nan, -0.1, 0.05], 2),     # the NaN erases -0.9: the range is that of x[2:]
        ([nan, -0.9, -0.1, 0.05], 1),     # nothing before it to erase: the range is that of x[1:]
        ([-0.9, -0.1, 0.05, nan], None),  # the last value: the range is NaN
    ]
    for x, rest in cases:
        x = np.array(x, f32)
        got = qt.quantize_and_dequantize_v2(x, num_bits=4)
        ref = tf_qdq(tf, x, f32(0), f32(0), 2, num_bits=4, range_given=False)
        assert bits(got).tolist() == bits(ref).tolist(), x
        if rest is None:
            assert np.isnan(got).all()
        else:
            assert got[rest:].tolist() == qt.quantize_and_dequantize_v2(x[rest:], num_bits=4).tolist(), x
    # in a packet (8 elements from the start) a NaN is skipped: -0.9 stays the minimum
    x = np.array([-0.9, nan, -0.1, 0.05, 0.2, 0.3, 0.4, 0.5, 0.6], f32)
    assert qt.quantize_and_dequantize_v2(x, num_bits=4)[0] == f32(-0.9)
    assert bits(qt.quantize_and_dequantize_v2(x, num_bits=4)).tolist() == \
        bits(tf_qdq(tf, x, f32(0), f32(0), 2, num_bits=4, range_given=False)).tolist()
    # per axis every element is reduced one at a time: the NaN erases -0.9 in slice 0 only
    x2 = np.array([[-0.9, -0.5], [nan, -0.1], [-0.1, 0.05], [0.05, 0.1]], f32)
    got = qt.quantize_and_dequantize_v2(x2, num_bits=4, axis=1)
    ref = tf_qdq(tf, x2, np.zeros(2, f32), np.zeros(2, f32), 2, num_bits=4, range_given=False, axis=1)
    assert bits(got).tolist() == bits(ref).tolist()
    assert got[0, 0] != f32(-0.9) and got[0, 1] == f32(-0.5)


def test_reduction_thread_split(tf):
    """Above 108388 float32 elements TensorFlow reduces in shards, one per intra-op thread: a NaN at the
    end of shard 0 erases that shard (here the -100 that would set the range), which the single-thread
    order skips."""
    n = 2 * (8 * 6777 + 3)
    x = np.linspace(-1, 1, n).astype(f32)
    x[[0, 5]] = 0.3, -100.0
    x[n // 2 - 1] = np.nan
    got = qt.quantize_and_dequantize_v2(x)
    ref = tf_qdq(tf, x, f32(0), f32(0), 2, range_given=False)
    assert bits(got).tolist() == bits(ref).tolist()
    threads = _eigen.reduction_threads(n, np.dtype(f32))
    assert (got[0] != 0) == (threads == 2)    # with two shards -100 is erased and 0.3 is not rounded to 0


def test_reduction_thread_counts(monkeypatch):
    """Eigen's cost model: one shard up to 108387 float32 / 54193 float64 elements; the pool caps it."""
    for dtype, edge in ((f32, 108388), (f64, 54194)):
        assert _eigen.reduction_threads(edge - 1, np.dtype(dtype), pool=8) == 1
        assert _eigen.reduction_threads(edge, np.dtype(dtype), pool=8) == 2
        assert _eigen.reduction_threads(10 ** 9, np.dtype(dtype), pool=8) == 8
        assert _eigen.reduction_threads(10 ** 9, np.dtype(dtype), pool=1) == 1
    monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "3")
    assert _eigen.intra_op_threads() == 3
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS")
    assert _eigen.intra_op_threads() >= 1


@pytest.mark.parametrize("dtype", [f32, f64])
def test_signed_zero_range(tf, dtype):
    """All-zero data of mixed signs: the sign of the max (it becomes inv's) follows Eigen's order."""
    rng = np.random.default_rng([O.SEED, 901])
    for n in SIZES + [8193, 20001, 108390]:
        x = np.where(rng.random(n) < rng.choice([0.05, 0.5, 0.95]), -0.0, 0.0).astype(dtype)
        want = tf_qdq(tf, x, dtype(0), dtype(0), 2, range_given=False)
        assert bits(qt.quantize_and_dequantize_v2(x)).tolist() == bits(want).tolist(), n
        if n % 2 == 0:
            x2 = x.reshape(n // 2, 2)
            want = tf_qdq(tf, x2, np.zeros(2, dtype), np.zeros(2, dtype), 2, range_given=False, axis=1)
            assert bits(qt.quantize_and_dequantize_v2(x2, axis=1)).tolist() == bits(want).tolist(), n


# -- seeded corpora -------------------------------------------------------------------------------
SPECIALS = [0.0, -0.0, np.inf, -np.inf, 1e-40, -1e-40, 0.5, -0.5, 3.0, -7.0, 1e30, -1e30]


def _data(rng, dtype, n: int) -> np.ndarray:
    style = rng.integers(0, 3)
    if style == 0:
        x = np.where(rng.random(n) < 0.5, 0.0, -0.0).astype(dtype)
    elif style == 1:
        x = rng.choice(SPECIALS, n).astype(dtype)
    else:
        x = rng.uniform(-3, 3, n).astype(dtype)
    m = rng.random(n) < rng.choice([0.0, 0.02, 0.2, 0.6, 1.0])
    if n and rng.random() < 0.3:
        m[-1] = True
    x[m] = payloads(dtype, int(m.sum()))[rng.permutation(int(m.sum()))]
    return x


def _corpus(per_axis: bool, count: int) -> list[O.Case]:
    rng = np.random.default_rng([O.SEED, 902, per_axis])
    cases = []
    for _ in range(count):
        dtype = np.dtype(rng.choice([f32, f64]))
        version = int(rng.choice([2, 3, 4]))
        rg = bool(rng.integers(0, 2))
        rm = "HALF_TO_EVEN" if version == 3 else str(rng.choice(["HALF_TO_EVEN", "HALF_UP"]))
        attrs = dict(version=version, signed_input=bool(rng.integers(0, 2)), num_bits=int(rng.choice([1, 2, 8])),
                     range_given=rg, round_mode=rm, narrow_range=bool(rng.integers(0, 2)))
        if per_axis:
            # rank >= 2: the oracle runs V2/V4 with range_given slice by slice, and a 0-d float64 slice
            # would reach TensorFlow as a Python float (its scalar cache can turn -0.0 into +0.0)
            shape = tuple(int(s) for s in rng.integers(1, 7, rng.integers(2, 4)))
            if rng.random() < 0.3:
                shape += (int(rng.choice([9, 17, 33])),)
            axis = int(rng.integers(0, len(shape)))
            c = shape[axis]
            lo = rng.choice([0.0, -1.0, -0.0, np.nan, -np.inf], c).astype(dtype)
            hi = rng.choice([0.0, 1.0, np.inf, np.nan, 2.0], c).astype(dtype)
            if rng.random() < 0.5:
                lo[:], hi[:] = 0, 0
            if version != 3 and rg:  # the per-slice oracle calls refuse a NaN or inverted range
                bad = ~(lo <= hi)
                lo[bad], hi[bad] = 0, 0
            x = _data(rng, dtype, int(np.prod(shape))).reshape(shape)
        else:
            axis = None
            x = _data(rng, dtype, int(rng.choice(SIZES + [8193, 16385, 20001])))
            lo, hi = ((dtype.type(0), dtype.type(0)) if rng.random() < 0.5 else
                      (dtype.type(rng.choice([-1.0, 0.0, -np.inf])), dtype.type(rng.choice([0.0, 1.0, np.inf]))))
        cases.append(O.Case("qdq", x, lo, hi, dict(attrs, axis=axis)))
    return cases


@pytest.mark.parametrize("per_axis", [False, True], ids=["per-tensor", "per-axis"])
def test_nan_corpus(tf, per_axis):
    bad = []
    cases = _corpus(per_axis, 250 * O.SIZE)
    for c in cases:
        d = O.compare(c, O.run_tf(tf, c), O.run_qs(c))
        if d:
            bad.append(f"{c.label()[:250]}\n    -> {d}")
    assert not bad, f"{len(bad)} of {len(cases)} cases differ from TensorFlow:\n" + "\n".join(bad[:6])


@pytest.mark.parametrize("shape,axis", [((30000, 1, 3), 1), ((1, 2, 25003), 1), ((3, 2, 12001), 1),
                                        ((4000, 1, 7), 1), ((5000, 3), 0), ((13000, 1), 0)])
def test_large_slices(tf, shape, axis):
    """Per axis, HALF_UP without a range runs tiled (blocks of 11428 float32 / 5714 float64 elements,
    each row a packet loop and a tail); the clamping V3 kernel runs each slice as one flat loop."""
    rng = np.random.default_rng([O.SEED, 903, shape[0], axis])
    for dtype in (f32, f64):
        x = np.zeros(int(np.prod(shape)), dtype)
        m = rng.random(x.size) < 0.7
        x[m] = payloads(dtype, int(m.sum()))
        x = x.reshape(shape)
        outer = int(np.prod(shape[:axis]))
        x.reshape(outer, shape[axis], -1)[-1, :, -1] = 0      # the last value reduced: the range is [0, 0]
        z = np.zeros(shape[axis], dtype)
        for version, rg, rm in ((2, False, "HALF_UP"), (2, False, "HALF_TO_EVEN"), (3, True, "HALF_TO_EVEN")):
            kw = dict(num_bits=1, range_given=rg, round_mode=rm, axis=axis)
            want = tf_qdq(tf, x, z, z, version, **dict(kw))
            got = qs_qdq(x, z, z, version, **dict(kw))
            assert bits(got).tolist() == bits(want).tolist(), (dtype, version, rm)


@pytest.mark.parametrize("fast", ["0", "1"])
def test_both_settings_of_the_fast_path(tf, monkeypatch, fast):
    """QuantizeAndDequantize is computed by numpy whatever QUANTSPEC_FAST says (it has no fused kernel):
    both settings give TensorFlow's bits."""
    monkeypatch.setenv("QUANTSPEC_FAST", fast)
    for n in (17, 40, 1003):
        x = payloads(f32, n)
        x[::5] = 0.25
        want = tf_qdq(tf, x, f32(0), f32(0), 3, num_bits=1)
        assert bits(qt.quantize_and_dequantize_v3(x, 0.0, 0.0, 1)).tolist() == bits(want).tolist()
        want = tf_qdq(tf, x, f32(0), f32(0), 2, range_given=False)
        assert bits(qt.quantize_and_dequantize_v2(x)).tolist() == bits(want).tolist()
