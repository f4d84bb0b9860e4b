"""LiteRT int8 FULLY_CONNECTED against the LiteRT interpreter (BUILTIN_REF), byte for byte.

Random single-op models (seeded; QUANTSPEC_LITERT_CASES scales the count): per-channel and
per-tensor filters (per-tensor with a non-zero filter zero point too, which REF still applies),
every fused activation, bias present or absent, constant or run-time filter and bias,
keep_num_dims with >2-D inputs, inputs whose size is not a multiple of K, K up to 4096 (several
exact float32 GEMM chunks), extreme zero points and saturating output scales, including the
double -> int32 overflow of REF's float requantization.  Then the Prepare failures.
"""

from __future__ import annotations

import numpy as np
import pytest

from litert_build import T
from litert_kernel_check import cases, ref_fails, run_quantspec
from litert_kernel_check import check_exact as check
from quantspec.errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedError

OP = "FULLY_CONNECTED"
ACTS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")


def f32(v):
    return np.float32(v)


def fc_case(rng, K, N, batch_shape, *, per_channel, filter_zp=0, bias=True, keep=False, act="NONE",
            const_filter=True, const_bias=True, zx=None, zo=None, s_out=None, extreme_weights=False):
    s_in = f32(rng.uniform(0.002, 0.2))
    zx = int(rng.integers(-128, 128)) if zx is None else zx
    if extreme_weights:
        w = rng.choice(np.array([-127, 127], np.int8), size=(N, K))
    else:
        w = rng.integers(-127, 128, size=(N, K), dtype=np.int8)
    s_w = rng.uniform(0.0005, 0.02, size=N).astype(np.float32) if per_channel else f32(rng.uniform(0.0005, 0.02))
    if s_out is None:
        # about the spread of the accumulator, times a random factor (<1 saturates)
        s_out = f32(s_in * float(np.mean(s_w)) * 60 * np.sqrt(K) * rng.uniform(0.05, 2.0))
    zo = int(rng.integers(-128, 128)) if zo is None else zo
    xshape = (*batch_shape, K)
    x = rng.integers(-128, 128, size=xshape, dtype=np.int8)
    rows = int(np.prod(batch_shape))
    oshape = (*batch_shape, N) if keep else (rows, N)
    ins = [T(xshape, "int8", s_in, zx),
           T((N, K), "int8", s_w, filter_zp, 0, w if const_filter else None)]
    arrays = [x] + ([] if const_filter else [w])
    if bias:
        b = rng.integers(-60000, 60000, size=N, dtype=np.int32)
        s_b = (np.float64(s_in) * s_w.astype(np.float64)).astype(np.float32)
        ins.append(T((N,), "int32", s_b, 0, 0, b if const_bias else None))
        if not const_bias:
            arrays.append(b)
    outs = [T(oshape, "int8", s_out, zo)]
    return ins, outs, {"fused_activation_function": act, "keep_num_dims": keep}, arrays


@pytest.mark.parametrize("seed", cases(40))
def test_fully_connected_random(seed):
    rng = np.random.default_rng([seed, 4])
    K = int(rng.choice([1, 3, 16, 100, 300, 1024, 1025, 2000]))
    N = int(rng.integers(1, 24))
    keep = bool(seed % 4 == 3)
    batch_shape = tuple(int(v) for v in rng.integers(1, 4, size=int(rng.integers(1, 4)))) if keep \
        else (int(rng.integers(1, 6)),)
    per_channel = bool(seed % 2)
    ins, outs, options, arrays = fc_case(
        rng, K, N, batch_shape, per_channel=per_channel,
        filter_zp=0 if per_channel or seed % 3 else int(rng.integers(-5, 6)),
        bias=seed % 5 != 0, keep=keep, act=ACTS[seed % 4],
        const_filter=seed % 6 != 1, const_bias=seed % 7 != 2)
    check(OP, ins, outs, options, arrays, version=4)


@pytest.mark.parametrize("per_channel", [False, True])
def test_fully_connected_large_k(per_channel):
    """K = 4096: four exact float32 GEMM chunks; the worst-case weights and activations."""
    rng = np.random.default_rng(4096 + per_channel)
    ins, outs, options, arrays = fc_case(rng, 4096, 64, (8,), per_channel=per_channel, extreme_weights=True)
    arrays[0][:4] = -128                         # the largest products: (-128) * (-127)
    check(OP, ins, outs, options, arrays, version=4)


@pytest.mark.parametrize("zx", [-128, 127])
def test_fully_connected_extreme_zero_points(zx):
    rng = np.random.default_rng(zx + 1000)
    for act in ACTS:
        ins, outs, options, arrays = fc_case(rng, 200, 10, (3,), per_channel=True, zx=zx,
                                             zo=-128 if zx > 0 else 127, act=act)
        check(OP, ins, outs, options, arrays, version=4)


def test_fully_connected_input_not_multiple_of_k():
    """LiteRT uses floor(size / K) rows of the flattened input and ignores the rest."""
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, size=(3, 5), dtype=np.int8)
    w = rng.integers(-127, 128, size=(4, 4), dtype=np.int8)
    check(OP, [T((3, 5), "int8", 0.05, 3), T((4, 4), "int8", [0.01, 0.02, 0.03, 0.04], 0, 0, w)],
          [T((3, 4), "int8", 0.1, -2)], {}, [x], version=4)


@pytest.mark.parametrize("zo", [-128, -5, 0, 5, 127])
def test_fully_connected_requantization_overflow(zo):
    """double(acc)*eff beyond int32 becomes INT32_MIN (cvttsd2si), then + z_out wraps."""
    x = np.array([[1, 1], [-1, -1], [0, 0], [127, -128]], np.int8)
    w = np.array([[100, 100], [-3, 7]], np.int8)
    for bias in (0, 2**31 - 1 - 20000, -2**31 + 20000):
        b = np.array([bias, -bias], np.int32)
        check(OP, [T((4, 2), "int8", 1.0, 0), T((2, 2), "int8", 1.0, 0, 0, w), T((2,), "int32", 1.0, 0, 0, b)],
              [T((4, 2), "int8", 1e-3, zo)], {}, [x], version=4)


def test_fully_connected_empty_depth():
    """A filter with K = 0: LiteRT sizes the output and fills it with zeros."""
    x = np.zeros((2, 0), np.int8)
    check(OP, [T((2, 0), "int8", 0.1, 3), T((3, 0), "int8", 0.1, 0, 0, np.zeros((3, 0), np.int8))],
          [T((2, 3), "int8", 0.1, 7)], {}, [x], version=4)


INVALID = [
    ("per-channel axis", [T((2, 8), "int8", 0.1, 1), T((3, 8), "int8", [0.02] * 8, 0, 1, np.ones((3, 8)))],
     [T((2, 3), "int8", 0.3, 0)], {}, ShapeError, "quantized along dimension 0"),
    ("bias scale", [T((2, 8), "int8", 0.1, 1), T((3, 8), "int8", 0.02, 0, 0, np.ones((3, 8))),
                    T((3,), "int32", 0.5, 0, 0, np.ones(3))],
     [T((2, 3), "int8", 0.3, 0)], {}, InvalidArgumentError, "bias scale"),
    ("activation", [T((2, 8), "int8", 0.1, 1), T((3, 8), "int8", 0.02, 0, 0, np.ones((3, 8)))],
     [T((2, 3), "int8", 0.3, 0)], {"fused_activation_function": "TANH"}, UnsupportedError, "fused_activation_function"),
    ("keep_num_dims depth", [T((2, 4, 6), "int8", 0.1, 1), T((3, 8), "int8", 0.02, 0, 0, np.ones((3, 8)))],
     [T((2, 4, 3), "int8", 0.3, 0)], {"keep_num_dims": True}, ShapeError, "keep_num_dims"),
    ("bias length", [T((2, 8), "int8", 0.1, 1), T((3, 8), "int8", 0.02, 0, 0, np.ones((3, 8))),
                     T((4,), "int32", 0.002, 0, 0, np.ones(4))],
     [T((2, 3), "int8", 0.3, 0)], {}, ShapeError, "bias.shape"),
    ("3-D filter", [T((2, 8), "int8", 0.1, 1), T((3, 8, 1), "int8", 0.02, 0, 0, np.ones((3, 8, 1)))],
     [T((2, 3), "int8", 0.3, 0)], {}, ShapeError, "filter.shape"),
    ("int64 bias", [T((2, 8), "int8", 0.1, 1), T((3, 8), "int8", 0.02, 0, 0, np.ones((3, 8))),
                    T((3,), "int64", 0.002, 0, 0, np.ones(3))],
     [T((2, 3), "int8", 0.3, 0)], {}, DTypeError, "bias.dtype"),
]


@pytest.mark.parametrize("case", INVALID, ids=[c[0] for c in INVALID])
def test_fully_connected_invalid(case):
    _, ins, outs, options, error, fragment = case
    x = np.zeros(ins[0].shape, np.int8)
    if fragment != "bias.dtype":   # LiteRT accepts an int64 bias and misreads it as int32
        assert ref_fails(OP, ins, outs, options, [x], 4) is not None, "LiteRT accepted it"
    with pytest.raises(error) as info:
        run_quantspec(OP, ins, outs, options, [x])
    assert fragment in str(info.value)
