"""LiteRT data-movement kernels against the LiteRT interpreter (BUILTIN_REF), byte for byte.

CONCATENATION, RESHAPE, SQUEEZE, TRANSPOSE, GATHER, SLICE, SPACE_TO_DEPTH, BATCH_TO_SPACE_ND,
SPACE_TO_BATCH_ND, PAD, PADV2, SHAPE: random single-op int8 models (seeded; the count scales with
QUANTSPEC_LITERT_CASES), constant and run-time index tensors, int32 and int64 where LiteRT reads
both; then the invalid inputs LiteRT refuses, with quantspec's error class and message.
"""

from __future__ import annotations

import numpy as np
import pytest

from litert_build import T
from litert_kernel_check import cases, ref_fails, run_quantspec
from litert_kernel_check import check_exact as check
from quantspec.errors import AxisError, DTypeError, InvalidArgumentError, ShapeError, UnsupportedError


def rng_for(op: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, sum(map(ord, op))])


def q8(rng, shape):
    return rng.integers(-128, 128, size=shape, dtype=np.int8)


def params(rng):
    return float(np.float32(rng.uniform(0.005, 0.5))), int(rng.integers(-128, 128))


def rand_shape(rng, rank, lo=1, hi=5):
    return tuple(int(v) for v in rng.integers(lo, hi + 1, size=rank))


# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", cases(16))
def test_concatenation(seed):
    rng = rng_for("CONCATENATION", seed)
    rank = int(rng.integers(1, 6))
    base = rand_shape(rng, rank)
    axis = int(rng.integers(-rank, rank))
    n = int(rng.integers(1, 5))
    s, z = params(rng)
    shapes = []
    for _ in range(n):
        sh = list(base)
        sh[axis] = int(rng.integers(1, 4))
        shapes.append(tuple(sh))
    out = list(base)
    out[axis] = sum(sh[axis] for sh in shapes)
    # some inputs constant, the rest run time
    ins, arrays = [], []
    for i, sh in enumerate(shapes):
        data = q8(rng, sh)
        if i > 0 and rng.random() < 0.3:
            ins.append(T(sh, "int8", s, z, data=data))
        else:
            ins.append(T(sh, "int8", s, z))
            arrays.append(data)
    if not arrays:  # keep one run-time input
        ins[0] = T(shapes[0], "int8", s, z)
        arrays.insert(0, q8(rng, shapes[0]))
    check("CONCATENATION", ins, [T(out, "int8", s, z)], {"axis": axis}, arrays)


@pytest.mark.parametrize("seed", cases(6))
def test_concatenation_int32(seed):
    rng = rng_for("CONCATENATION32", seed)
    a = rng.integers(-2**31, 2**31, size=(2, 3), dtype=np.int32)
    b = rng.integers(-2**31, 2**31, size=(2, 5), dtype=np.int32)
    check("CONCATENATION", [T((2, 3), "int32"), T((2, 5), "int32")], [T((2, 8), "int32")], {"axis": 1}, [a, b])


# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", cases(16))
def test_reshape(seed):
    rng = rng_for("RESHAPE", seed)
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    n = int(np.prod(shape))
    # a factorisation of n as the new shape, maybe with one -1
    new = [n]
    for _ in range(int(rng.integers(0, 3))):
        last = new[-1]
        divs = [d for d in range(1, last + 1) if last % d == 0]
        d = int(rng.choice(divs))
        new[-1] = last // d
        new.append(d)
    new = [int(v) for v in rng.permutation(new)]
    if rng.random() < 0.5:
        new[int(rng.integers(len(new)))] = -1
    s, z = params(rng)
    x = q8(rng, shape)
    resolved = [n // int(np.prod([v for v in new if v != -1])) if v == -1 else v for v in new]
    out = T(resolved, "int8", s, z)
    mode = seed % 4
    if mode == 0:    # constant int32 shape tensor
        check("RESHAPE", [T(shape, "int8", s, z), T((len(new),), "int32", data=np.array(new))], [out], {}, [x])
    elif mode == 1:  # new_shape option only
        check("RESHAPE", [T(shape, "int8", s, z)], [out], {"new_shape": new}, [x])
    elif mode == 2:  # run-time int32 shape tensor
        check("RESHAPE", [T(shape, "int8", s, z), T((len(new),), "int32")], [out], {},
              [x, np.array(new, np.int32)])
    else:            # an int64 shape tensor is not read: LiteRT falls back to new_shape
        check("RESHAPE", [T(shape, "int8", s, z), T((len(new),), "int64", data=np.array(new[::-1]))], [out],
              {"new_shape": new}, [x])


# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", cases(12))
def test_squeeze(seed):
    rng = rng_for("SQUEEZE", seed)
    rank = int(rng.integers(1, 7))
    shape = [int(v) if rng.random() < 0.5 else 1 for v in rng.integers(2, 4, size=rank)]
    ones = [i for i, v in enumerate(shape) if v == 1]
    if ones and rng.random() < 0.6:
        pick = [int(i) for i in rng.choice(ones, size=int(rng.integers(1, len(ones) + 1)), replace=False)]
        dims = [i - rank if rng.random() < 0.5 else i for i in pick]
        out = [v for i, v in enumerate(shape) if i not in pick]
        options = {"squeeze_dims": dims}
    else:
        out = [v for v in shape if v != 1]
        options = {}
    s, z = params(rng)
    check("SQUEEZE", [T(shape, "int8", s, z)], [T(out, "int8", s, z)], options, [q8(rng, shape)])


# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", cases(16))
def test_transpose(seed):
    rng = rng_for("TRANSPOSE", seed)
    rank = int(rng.integers(1, 9))         # LiteRT transposes up to 8-D
    shape = rand_shape(rng, rank, 1, 4 if rank <= 5 else 2)
    perm = [int(v) for v in rng.permutation(rank)]
    given = [p - rank if rng.random() < 0.3 else p for p in perm]
    s, z = params(rng)
    out = T([shape[p] for p in perm], "int8", s, z)
    x = q8(rng, shape)
    if seed % 2:
        check("TRANSPOSE", [T(shape, "int8", s, z), T((rank,), "int32", data=np.array(given))], [out], {}, [x])
    else:
        check("TRANSPOSE", [T(shape, "int8", s, z), T((rank,), "int32")], [out], {}, [x, np.array(given, np.int32)])


# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", cases(20))
def test_gather(seed):
    rng = rng_for("GATHER", seed)
    rank = int(rng.integers(1, 5))
    shape = rand_shape(rng, rank, 1, 5)
    axis = int(rng.integers(0, rank))
    batch_dims = int(rng.integers(0, axis + 1)) if seed % 3 == 0 else 0
    pos_shape = tuple(shape[:batch_dims]) + rand_shape(rng, int(rng.integers(0, 3)), 1, 4)
    pos = rng.integers(0, shape[axis], size=pos_shape)
    ptype = ("int32", "int64", "int16")[seed % 3]
    out_shape = shape[:axis] + pos_shape[batch_dims:] + shape[axis + 1:]
    given_axis = axis - rank if rng.random() < 0.4 else axis
    options = {"axis": given_axis, "batch_dims": batch_dims}
    s, z = params(rng)
    x = q8(rng, shape)
    if seed % 2:
        check("GATHER", [T(shape, "int8", s, z), T(pos_shape, ptype, data=pos)], [T(out_shape, "int8", s, z)],
              options, [x])
    else:
        check("GATHER", [T(shape, "int8", s, z), T(pos_shape, ptype)], [T(out_shape, "int8", s, z)], options,
              [x, pos.astype(ptype)])


def test_gather_negative_batch_dims():
    """batch_dims < 0 counts from the end of the positions' shape."""
    x = np.arange(24).astype(np.int8).reshape(2, 3, 4)
    pos = np.array([[0, 2], [1, 1]], np.int32)
    check("GATHER", [T(x.shape, "int8", 0.1, 0), T(pos.shape, "int32", data=pos)], [T((2, 2, 4), "int8", 0.1, 0)],
          {"axis": -2, "batch_dims": -1}, [x])


# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", cases(16))
def test_slice(seed):
    rng = rng_for("SLICE", seed)
    rank = int(rng.integers(1, 7))      # ranks above 5 take LiteRT's general path
    shape = rand_shape(rng, rank, 1, 5)
    begin = [int(rng.integers(0, d)) for d in shape]
    size = [int(rng.integers(1, d - b + 1)) if rng.random() < 0.7 else -1 for d, b in zip(shape, begin)]
    out = [d - b if s == -1 else s for d, b, s in zip(shape, begin, size)]
    itype = ("int32", "int64")[seed % 2]
    s, z = params(rng)
    x = q8(rng, shape)
    if seed % 4 < 2:
        check("SLICE", [T(shape, "int8", s, z), T((rank,), itype, data=np.array(begin)),
                        T((rank,), itype, data=np.array(size))], [T(out, "int8", s, z)], {}, [x])
    else:
        check("SLICE", [T(shape, "int8", s, z), T((rank,), itype), T((rank,), itype)], [T(out, "int8", s, z)], {},
              [x, np.array(begin, itype), np.array(size, itype)])


# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", cases(10))
def test_space_to_depth(seed):
    rng = rng_for("SPACE_TO_DEPTH", seed)
    bs = int(rng.integers(1, 4))
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 5))
    h, w = bs * int(rng.integers(1, 4)), bs * int(rng.integers(1, 4))
    s, z = params(rng)
    check("SPACE_TO_DEPTH", [T((n, h, w, c), "int8", s, z)], [T((n, h // bs, w // bs, c * bs * bs), "int8", s, z)],
          {"block_size": bs}, [q8(rng, (n, h, w, c))])


# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", cases(16))
def test_space_to_batch_nd(seed):
    rng = rng_for("SPACE_TO_BATCH_ND", seed)
    rank = 4 if seed % 3 else 3
    spatial = rank - 2
    block = [int(v) for v in rng.integers(1, 4, size=spatial)]
    pads, dims = [], []
    for b in block:
        d = int(rng.integers(1, 7))
        total = -d % b + b * int(rng.integers(0, 2))
        top = int(rng.integers(0, total + 1))
        pads.append([top, total - top])
        dims.append(d)
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
    shape = (n, *dims, c)
    out = (n * int(np.prod(block)), *[(d + sum(p)) // b for d, p, b in zip(dims, pads, block)], c)
    s, z = params(rng)
    x = q8(rng, shape)
    if seed % 2:
        check("SPACE_TO_BATCH_ND", [T(shape, "int8", s, z), T((spatial,), "int32", data=np.array(block)),
                                    T((spatial, 2), "int32", data=np.array(pads))], [T(out, "int8", s, z)], {}, [x])
    else:
        check("SPACE_TO_BATCH_ND", [T(shape, "int8", s, z), T((spatial,), "int32"), T((spatial, 2), "int32")],
              [T(out, "int8", s, z)], {}, [x, np.array(block, np.int32), np.array(pads, np.int32)])


def test_space_to_batch_nd_negative_paddings():
    """LiteRT does not check the paddings' sign: negative paddings crop, by the same index formula."""
    x = np.arange(48).astype(np.int8).reshape(1, 6, 4, 2)
    check("SPACE_TO_BATCH_ND", [T(x.shape, "int8", 0.1, 3), T((2,), "int32", data=np.array([2, 2])),
                                T((2, 2), "int32", data=np.array([[-1, -1], [1, -1]]))],
          [T((4, 2, 2, 2), "int8", 0.1, 3)], {}, [x])


@pytest.mark.parametrize("seed", cases(16))
def test_batch_to_space_nd(seed):
    rng = rng_for("BATCH_TO_SPACE_ND", seed)
    rank = 4 if seed % 3 else 3
    spatial = rank - 2
    block = [int(v) for v in rng.integers(1, 4, size=spatial)]
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
    dims = [int(v) for v in rng.integers(1, 5, size=spatial)]
    crops = []
    for d, b in zip(dims, block):
        total = int(rng.integers(0, d * b))
        top = int(rng.integers(0, total + 1))
        crops.append([top, total - top])
    shape = (n * int(np.prod(block)), *dims, c)
    out = (n, *[d * b - sum(cr) for d, b, cr in zip(dims, block, crops)], c)
    s, z = params(rng)
    x = q8(rng, shape)
    if seed % 2:
        check("BATCH_TO_SPACE_ND", [T(shape, "int8", s, z), T((spatial,), "int32", data=np.array(block)),
                                    T((spatial, 2), "int32", data=np.array(crops))], [T(out, "int8", s, z)], {}, [x])
    else:
        check("BATCH_TO_SPACE_ND", [T(shape, "int8", s, z), T((spatial,), "int32"), T((spatial, 2), "int32")],
              [T(out, "int8", s, z)], {}, [x, np.array(block, np.int32), np.array(crops, np.int32)])


# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", cases(20))
def test_pad_and_padv2(seed):
    rng = rng_for("PAD", seed)
    rank = int(rng.integers(1, 6))
    shape = rand_shape(rng, rank, 1, 4)
    pads = rng.integers(0, 3, size=(rank, 2))
    if rank == 4 and seed % 2:          # LiteRT's "image style" pattern {{0,0},{a,b},{c,d},{0,0}}
        pads[0] = pads[3] = 0
    out = tuple(int(d + a + b) for d, (a, b) in zip(shape, pads))
    ptype = ("int32", "int64")[seed % 2]
    s, z = params(rng)
    x = q8(rng, shape)
    const_pads = seed % 3 != 0
    pad_t = T((rank, 2), ptype, data=pads) if const_pads else T((rank, 2), ptype)
    arrays = [x] if const_pads else [x, pads.astype(ptype)]
    if seed % 2 == 0:
        check("PAD", [T(shape, "int8", s, z), pad_t], [T(out, "int8", s, z)], {}, arrays)
    else:
        cv = rng.integers(-128, 128, size=(1,) if seed % 4 == 1 else ())
        check("PADV2", [T(shape, "int8", s, z), pad_t, T(cv.shape, "int8", s, z, data=cv)], [T(out, "int8", s, z)],
              {}, arrays)


def test_padv2_runtime_constant_value():
    rng = rng_for("PADV2", 0)
    x = q8(rng, (2, 3))
    check("PADV2", [T((2, 3), "int8", 0.1, 4), T((2, 2), "int32", data=np.array([[1, 0], [2, 1]])),
                    T((1,), "int8", 0.1, 4)], [T((3, 6), "int8", 0.1, 4)], {}, [x, np.array([-77], np.int8)])


# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", cases(6))
def test_shape(seed):
    rng = rng_for("SHAPE", seed)
    shape = rand_shape(rng, int(rng.integers(1, 7)), 1, 4)
    out_type = ("INT32", "INT64")[seed % 2]
    check("SHAPE", [T(shape, "int8", 0.1, 3)], [T((len(shape),), out_type.lower())], {"out_type": out_type},
          [q8(rng, shape)])


# ---------------------------------------------------------------------------------------------
# Invalid inputs: LiteRT refuses them; quantspec raises its own error naming the problem.

INVALID = [
    ("concat zero point", "CONCATENATION",
     [T((1, 2), "int8", 0.1, 1), T((1, 2), "int8", 0.1, 2)], [T((1, 4), "int8", 0.1, 1)], {"axis": 1},
     [np.zeros((1, 2), np.int8)] * 2, InvalidArgumentError, "zero point must equal the output's"),
    ("concat scale", "CONCATENATION",
     [T((1, 2), "int8", 0.1, 1), T((1, 2), "int8", 0.2, 1)], [T((1, 4), "int8", 0.1, 1)], {"axis": 1},
     [np.zeros((1, 2), np.int8)] * 2, InvalidArgumentError, "scale must equal the output's"),
    ("concat activation", "CONCATENATION",
     [T((1, 2), "int8", 0.1, 1), T((1, 2), "int8", 0.1, 1)], [T((1, 4), "int8", 0.1, 1)],
     {"axis": 1, "fused_activation_function": "RELU"}, [np.zeros((1, 2), np.int8)] * 2, UnsupportedError,
     "must be NONE"),
    ("concat axis", "CONCATENATION",
     [T((1, 2), "int8", 0.1, 1), T((1, 2), "int8", 0.1, 1)], [T((1, 4), "int8", 0.1, 1)], {"axis": 2},
     [np.zeros((1, 2), np.int8)] * 2, AxisError, "options['axis']"),
    ("concat shapes", "CONCATENATION",
     [T((1, 2), "int8", 0.1, 1), T((2, 2), "int8", 0.1, 1)], [T((3, 2), "int8", 0.1, 1)], {"axis": 1},
     [np.zeros((1, 2), np.int8), np.zeros((2, 2), np.int8)], ShapeError, "inputs[1].shape"),
    ("reshape count", "RESHAPE",
     [T((2, 3), "int8", 0.1, 1), T((2,), "int32", data=np.array([4, 2]))], [T((4, 2), "int8", 0.1, 1)], {},
     [np.zeros((2, 3), np.int8)], ShapeError, "as many elements"),
    ("reshape two -1", "RESHAPE",
     [T((2, 3), "int8", 0.1, 1)], [T((6,), "int8", 0.1, 1)], {"new_shape": [-1, -1]},
     [np.zeros((2, 3), np.int8)], ShapeError, "at most one -1"),
    ("squeeze non-1", "SQUEEZE",
     [T((2, 1, 3), "int8", 0.1, 1)], [T((1, 3), "int8", 0.1, 1)], {"squeeze_dims": [0]},
     [np.zeros((2, 1, 3), np.int8)], ShapeError, "size 1"),
    ("transpose range", "TRANSPOSE",
     [T((2, 3), "int8", 0.1, 1), T((2,), "int32", data=np.array([0, 2]))], [T((2, 3), "int8", 0.1, 1)], {},
     [np.zeros((2, 3), np.int8)], AxisError, "perm"),
    ("gather out of bounds", "GATHER",
     [T((3, 2), "int8", 0.1, 1), T((2,), "int32", data=np.array([0, 3]))], [T((2, 2), "int8", 0.1, 1)], {},
     [np.zeros((3, 2), np.int8)], InvalidArgumentError, "positions"),
    ("gather negative", "GATHER",
     [T((3, 2), "int8", 0.1, 1), T((2,), "int32", data=np.array([0, -1]))], [T((2, 2), "int8", 0.1, 1)], {},
     [np.zeros((3, 2), np.int8)], InvalidArgumentError, "non-negative"),
    ("gather float positions", "GATHER",
     [T((3, 2), "int8", 0.1, 1), T((2,), "float", data=np.array([0, 1]))], [T((2, 2), "int8", 0.1, 1)], {},
     [np.zeros((3, 2), np.int8)], DTypeError, "positions.dtype"),
    ("slice overflow", "SLICE",
     [T((3, 2), "int8", 0.1, 1), T((2,), "int32", data=np.array([1, 0])), T((2,), "int32", data=np.array([3, 1]))],
     [T((3, 1), "int8", 0.1, 1)], {}, [np.zeros((3, 2), np.int8)], InvalidArgumentError, "begin + size"),
    ("slice negative begin", "SLICE",
     [T((3, 2), "int8", 0.1, 1), T((2,), "int32", data=np.array([-1, 0])), T((2,), "int32", data=np.array([2, 1]))],
     [T((2, 1), "int8", 0.1, 1)], {}, [np.zeros((3, 2), np.int8)], InvalidArgumentError, "LiteRT: Invalid begin"),
    ("slice begin past the end", "SLICE",
     [T((3, 2), "int8", 0.1, 1), T((2,), "int32", data=np.array([4, 0])), T((2,), "int32", data=np.array([0, 1]))],
     [T((1, 1), "int8", 0.1, 1)], {}, [np.zeros((3, 2), np.int8)], InvalidArgumentError, "LiteRT: Invalid begin"),
    ("slice size", "SLICE",
     [T((3, 2), "int8", 0.1, 1), T((2,), "int32", data=np.array([1, 0])), T((2,), "int32", data=np.array([-2, 1]))],
     [T((3, 1), "int8", 0.1, 1)], {}, [np.zeros((3, 2), np.int8)], InvalidArgumentError, "-1"),
    ("space_to_depth divisibility", "SPACE_TO_DEPTH",
     [T((1, 3, 4, 1), "int8", 0.1, 1)], [T((1, 1, 2, 4), "int8", 0.1, 1)], {"block_size": 2},
     [np.zeros((1, 3, 4, 1), np.int8)], ShapeError, "multiples of block_size"),
    ("space_to_batch params", "SPACE_TO_BATCH_ND",
     [T((1, 2, 2, 1), "int8", 0.1, 1), T((2,), "int32", data=np.array([2, 2])),
      T((2, 2), "int32", data=np.zeros((2, 2)))], [T((4, 1, 1, 1), "int8", 0.1, 2)], {},
     [np.zeros((1, 2, 2, 1), np.int8)], InvalidArgumentError, "zero point must equal the output's"),
    ("space_to_batch divisibility", "SPACE_TO_BATCH_ND",
     [T((1, 3, 2, 1), "int8", 0.1, 1), T((2,), "int32", data=np.array([2, 2])),
      T((2, 2), "int32", data=np.zeros((2, 2)))], [T((4, 1, 1, 1), "int8", 0.1, 1)], {},
     [np.zeros((1, 3, 2, 1), np.int8)], ShapeError, "multiple of block_shape"),
    ("space_to_batch int64 block", "SPACE_TO_BATCH_ND",
     [T((1, 2, 2, 1), "int8", 0.1, 1), T((2,), "int64", data=np.array([2, 2])),
      T((2, 2), "int32", data=np.zeros((2, 2)))], [T((4, 1, 1, 1), "int8", 0.1, 1)], {},
     [np.zeros((1, 2, 2, 1), np.int8)], UnsupportedError, "as int32"),
    ("batch_to_space scale", "BATCH_TO_SPACE_ND",
     [T((4, 1, 1, 1), "int8", 0.1, 1), T((2,), "int32", data=np.array([2, 2])),
      T((2, 2), "int32", data=np.zeros((2, 2)))], [T((1, 2, 2, 1), "int8", 0.2, 1)], {},
     [np.zeros((4, 1, 1, 1), np.int8)], InvalidArgumentError, "scale must equal the output's"),
    ("batch_to_space negative crop", "BATCH_TO_SPACE_ND",
     [T((4, 1, 1, 1), "int8", 0.1, 1), T((2,), "int32", data=np.array([2, 2])),
      T((2, 2), "int32", data=np.array([[0, 0], [-1, 0]]))], [T((1, 2, 3, 1), "int8", 0.1, 1)], {},
     [np.zeros((4, 1, 1, 1), np.int8)], InvalidArgumentError, "crops"),
    ("pad negative", "PAD",
     [T((3, 2), "int8", 0.1, 1), T((2, 2), "int32", data=np.array([[0, -1], [0, 0]]))], [T((2, 2), "int8", 0.1, 1)],
     {}, [np.zeros((3, 2), np.int8)], InvalidArgumentError, ">= 0"),
    ("padv2 constant params", "PADV2",
     [T((3, 2), "int8", 0.1, 1), T((2, 2), "int32", data=np.array([[0, 1], [0, 0]])),
      T((1,), "int8", 0.1, 2, data=np.array([5]))], [T((4, 2), "int8", 0.1, 1)], {},
     [np.zeros((3, 2), np.int8)], InvalidArgumentError, "zero point must equal the output's"),
    ("pad 6-D", "PAD",
     [T((1,) * 6, "int8", 0.1, 1), T((6, 2), "int32", data=np.ones((6, 2)))], [T((3,) * 6, "int8", 0.1, 1)],
     {}, [np.zeros((1,) * 6, np.int8)], ShapeError, "up to 5 dimensions"),
    ("transpose 9-D", "TRANSPOSE",
     [T((1,) * 9, "int8", 0.1, 1), T((9,), "int32", data=np.arange(9))], [T((1,) * 9, "int8", 0.1, 1)],
     {}, [np.zeros((1,) * 9, np.int8)], ShapeError, "1-D to 8-D"),
    ("squeeze 9-D", "SQUEEZE", [T((1,) * 9, "int8", 0.1, 1)], [T((), "int8", 0.1, 1)],
     {}, [np.zeros((1,) * 9, np.int8)], ShapeError, "rank <= 8"),
    ("shape out_type", "SHAPE", [T((3, 2), "int8", 0.1, 1)], [T((2,), "int32")], {},
     [np.zeros((3, 2), np.int8)], UnsupportedError, "out_type"),
]


@pytest.mark.parametrize("case", INVALID, ids=[c[0] for c in INVALID])
def test_invalid_inputs(case):
    _, op, ins, outs, options, arrays, error, fragment = case
    assert ref_fails(op, ins, outs, options, arrays) is not None, "LiteRT accepted it"
    with pytest.raises(error) as info:
        run_quantspec(op, ins, outs, options, arrays)
    assert fragment in str(info.value)
