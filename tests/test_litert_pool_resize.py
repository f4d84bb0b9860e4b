"""LiteRT int8 AVERAGE_POOL_2D, MAX_POOL_2D and RESIZE_BILINEAR against the LiteRT interpreter
(BUILTIN_REF), byte for byte.

Random single-op models (seeded; QUANTSPEC_LITERT_CASES scales the count): SAME and VALID
padding with odd sizes, strides larger and smaller than the filter, every fused activation
(TANH is accepted and clamps nothing), output parameters different from the input's (LiteRT only
DCHECKs them); for RESIZE_BILINEAR plain, align_corners and half_pixel_centers, up- and
down-scaling, constant and run-time size tensors.
"""

from __future__ import annotations

import numpy as np
import pytest

from litert_build import T
from litert_kernel_check import cases, ref_fails, run_quantspec
from litert_kernel_check import check_exact as check
from quantspec.errors import DTypeError, InvalidArgumentError, ShapeError

ACTS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1", "TANH")


def pool_out(padding, size, filt, stride):
    return -(-size // stride) if padding == "SAME" else (size - filt + stride) // stride


@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
@pytest.mark.parametrize("seed", cases(24))
def test_pool_random(op, seed):
    rng = np.random.default_rng([seed, len(op)])
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 6))
    h, w = (int(v) for v in rng.integers(1, 12, size=2))
    fh, fw = (int(v) for v in rng.integers(1, 5, size=2))
    sh, sw = (int(v) for v in rng.integers(1, 4, size=2))
    padding = "SAME" if seed % 2 else "VALID"
    if padding == "VALID":
        h, w = max(h, fh), max(w, fw)
    oh, ow = pool_out(padding, h, fh, sh), pool_out(padding, w, fw, sw)
    s, z = float(np.float32(rng.uniform(0.01, 0.3))), int(rng.integers(-128, 128))
    # output params usually equal the input's; sometimes not (no runtime check)
    so, zo = (s, z) if seed % 5 else (float(np.float32(rng.uniform(0.01, 0.3))), int(rng.integers(-128, 128)))
    x = rng.integers(-128, 128, size=(n, h, w, c), dtype=np.int8)
    if seed % 7 == 0:
        x[:] = rng.choice(np.array([-128, 127], np.int8), size=x.shape)     # saturated inputs
    options = {"padding": padding, "stride_h": sh, "stride_w": sw, "filter_height": fh, "filter_width": fw,
               "fused_activation_function": ACTS[seed % len(ACTS)]}
    check(op, [T((n, h, w, c), "int8", s, z)], [T((n, oh, ow, c), "int8", so, zo)], options, [x])


def test_average_pool_large_window():
    """A global average pool of 7x7 (n = 49) and a 13x13 SAME pool (n varies at the borders)."""
    rng = np.random.default_rng(49)
    x = rng.integers(-128, 128, size=(2, 7, 7, 64), dtype=np.int8)
    opts = {"padding": "VALID", "stride_h": 1, "stride_w": 1, "filter_height": 7, "filter_width": 7}
    check("AVERAGE_POOL_2D", [T(x.shape, "int8", 0.1, -3)], [T((2, 1, 1, 64), "int8", 0.1, -3)], opts, [x])
    x = rng.integers(-128, 128, size=(1, 20, 17, 8), dtype=np.int8)
    opts = {"padding": "SAME", "stride_h": 2, "stride_w": 3, "filter_height": 13, "filter_width": 13}
    check("AVERAGE_POOL_2D", [T(x.shape, "int8", 0.1, -3)], [T((1, 10, 6, 8), "int8", 0.1, -3)], opts, [x])


@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
def test_pool_window_larger_than_input(op):
    """VALID with a filter taller than the input: LiteRT's size check fails and it sizes that axis 0."""
    x = np.arange(8, dtype=np.int8).reshape(1, 1, 4, 2)
    for fh, fw in ((3, 2), (1, 7)):
        check(op, [T((1, 1, 4, 2), "int8", 0.1, 0)], [T((1, 1, 3, 2), "int8", 0.1, 0)],
              {"padding": "VALID", "stride_h": 1, "stride_w": 1, "filter_height": fh, "filter_width": fw}, [x])


def resize_case(rng, seed, const_size):
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 5))
    h, w = (int(v) for v in rng.integers(1, 10, size=2))
    oh, ow = (int(v) for v in rng.integers(1, 24, size=2))
    mode = seed % 3
    options = {"align_corners": mode == 1, "half_pixel_centers": mode == 2}
    s, z = float(np.float32(rng.uniform(0.01, 0.3))), int(rng.integers(-128, 128))
    x = rng.integers(-128, 128, size=(n, h, w, c), dtype=np.int8)
    size = np.array([oh, ow], np.int32)
    ins = [T((n, h, w, c), "int8", s, z), T((2,), "int32", data=size) if const_size else T((2,), "int32")]
    arrays = [x] if const_size else [x, size]
    return ins, [T((n, oh, ow, c), "int8", s, z)], options, arrays


@pytest.mark.parametrize("seed", cases(30))
def test_resize_bilinear_random(seed):
    rng = np.random.default_rng([seed, 22])
    ins, outs, options, arrays = resize_case(rng, seed, const_size=seed % 4 != 3)
    check("RESIZE_BILINEAR", ins, outs, options, arrays, version=3)


def test_resize_bilinear_runtime_size_with_both_flags():
    """With a run-time size tensor LiteRT skips the align_corners/half_pixel_centers check and runs."""
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, size=(2, 4, 4, 3), dtype=np.int8)
    check("RESIZE_BILINEAR", [T(x.shape, "int8", 0.1, 1), T((2,), "int32")], [T((2, 7, 5, 3), "int8", 0.1, 1)],
          {"align_corners": True, "half_pixel_centers": True}, [x, np.array([7, 5], np.int32)], version=3)


def test_resize_bilinear_saturated_large():
    rng = np.random.default_rng(6)
    x = rng.choice(np.array([-128, 127], np.int8), size=(1, 9, 13, 16))
    for mode in ({}, {"align_corners": True}, {"half_pixel_centers": True}):
        check("RESIZE_BILINEAR", [T(x.shape, "int8", 0.1, 1), T((2,), "int32", data=np.array([31, 40]))],
              [T((1, 31, 40, 16), "int8", 0.1, 1)], mode, [x], version=3)


INVALID = [
    ("AVERAGE_POOL_2D", "stride", [T((1, 4, 4, 1), "int8", 0.1, 0)], [T((1, 2, 2, 1), "int8", 0.1, 0)],
     {"padding": "VALID", "filter_height": 2, "filter_width": 2}, InvalidArgumentError, "stride"),
    ("MAX_POOL_2D", "rank", [T((4, 4, 1), "int8", 0.1, 0)], [T((2, 2, 1), "int8", 0.1, 0)],
     {"padding": "VALID", "stride_h": 2, "stride_w": 2, "filter_height": 2, "filter_width": 2}, ShapeError, "rank 4"),
    ("RESIZE_BILINEAR", "both flags", [T((1, 4, 4, 1), "int8", 0.1, 0), T((2,), "int32", data=np.array([8, 8]))],
     [T((1, 8, 8, 1), "int8", 0.1, 0)], {"align_corners": True, "half_pixel_centers": True}, InvalidArgumentError,
     "half_pixel_centers"),
    ("RESIZE_BILINEAR", "int64 size", [T((1, 4, 4, 1), "int8", 0.1, 0), T((2,), "int64", data=np.array([8, 8]))],
     [T((1, 8, 8, 1), "int8", 0.1, 0)], {}, DTypeError, "size.dtype"),
    ("RESIZE_BILINEAR", "zero size", [T((1, 4, 4, 1), "int8", 0.1, 0), T((2,), "int32", data=np.array([0, 8]))],
     [T((1, 0, 8, 1), "int8", 0.1, 0)], {}, InvalidArgumentError, "size"),
]


@pytest.mark.parametrize("case", INVALID, ids=[f"{c[0]}-{c[1]}" for c in INVALID])
def test_invalid(case):
    op, _, ins, outs, options, error, fragment = case
    x = np.zeros(ins[0].shape, np.int8)
    assert ref_fails(op, ins, outs, options, [x], 3 if op == "RESIZE_BILINEAR" else 1) is not None
    with pytest.raises(error) as info:
        run_quantspec(op, ins, outs, options, [x])
    assert fragment in str(info.value)


def test_resize_bilinear_out_of_bounds_read_refused():
    """1 -> 600 rows: the rounded Q10 scale (2) puts y0 = 1 past the only row; LiteRT reads outside
    the input there (undefined behaviour), quantspec refuses."""
    with pytest.raises(ShapeError, match="past the input"):
        run_quantspec("RESIZE_BILINEAR", [T((1, 1, 1, 1), "int8", 0.1, 0), T((2,), "int32", data=np.array([600, 1]))],
                      [T((1, 600, 1, 1), "int8", 0.1, 0)], {}, [np.zeros((1, 1, 1, 1), np.int8)])
