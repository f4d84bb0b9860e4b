"""Pure data movement: CONCATENATION, RESHAPE, SQUEEZE, TRANSPOSE, GATHER, SLICE, SPACE_TO_DEPTH,
BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, PAD, PADV2 and SHAPE (pure data movement).

The output bytes are input bytes (or the pad value); no arithmetic touches the codes.  Each
prepare step checks what the LiteRT kernel's Prepare (and, for values only known at run time,
its Eval) checks — the int8 same-parameter rules included:

- CONCATENATION: every input's scale and zero point ``==`` the output's (float equality), no fused
  activation; SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND: input and output scale and zero point equal;
  PADV2: the constant value's scale and zero point equal the output's (its raw code is the pad);
  PAD and SPACE_TO_BATCH_ND pad with the output zero point.
- Index tensors are read the way LiteRT reads them: GATHER takes int16/int32/int64 positions,
  SLICE int32/int64 begin and size, PAD/PADV2 int32/int64/int16 paddings; RESHAPE uses its shape input
  only when it is a 1-D int32 tensor and otherwise the ``new_shape`` option; TRANSPOSE,
  SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND read their index tensors as int32 only (LiteRT
  reinterprets an int64 tensor's bytes as int32 pairs, so quantspec refuses int64 there).
- Index tensors may be constant (checked in prepare) or run-time inputs (checked in compute).

These kernels move any element type LiteRT moves (not only int8): the arrays keep their dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import AxisError, DTypeError, InvalidArgumentError, ShapeError, UnsupportedError
from ._common import (constants, count, enforce, fits_memory, legacy, limit, option, require_same_type, same_legacy_params,
                      value)
from .base import Kernel, TensorSpec, register

QUANT8 = ("int8", "uint8")


def _shape(spec: TensorSpec) -> tuple[int, ...]:
    return tuple(int(s) for s in spec.shape)


def _index_type(spec: TensorSpec, allowed: tuple[str, ...], argument: str, op: str) -> None:
    if spec.dtype.name not in allowed:
        if spec.dtype.name == "int64" and "int64" not in allowed:
            raise UnsupportedError(argument, f"{op} reads this tensor as int32 (LiteRT reinterprets int64 bytes), "
                                   "so it must be int32", spec.dtype.name)
        raise DTypeError(argument, f"{op} supports " + ", ".join(allowed), spec.dtype.name)


# ---------------------------------------------------------------------------------------------
# CONCATENATION (tflite/kernels/concatenation.cc)

@dataclass(frozen=True, eq=False)
class ConcatPrepared:
    axis: int
    count: int
    scalar_constants: bool          # constant scalars concatenated into a 1-D tensor
    consts: tuple


@register
class Concatenation(Kernel):
    name = "CONCATENATION"

    def prepare(self, inputs, outputs, options) -> ConcatPrepared:
        op = self.name
        if len(inputs) < 1:
            raise InvalidArgumentError("inputs", f"{op} needs at least one input", 0)
        specs = count(op, inputs, outputs, len(inputs), names=[f"inputs[{i}]" for i in range(len(inputs))])
        enforce(op, inputs, outputs)
        t0, out = specs[0], outputs[0]
        rank = len(t0.shape)
        axis = option(options, "axis", 0, kind=int)
        given = axis
        if axis < 0:
            axis += rank
        if not (axis >= 0 and (axis < rank or (rank == 0 and axis == 0))):
            raise AxisError("options['axis']", f"must be in [{-rank}, {rank - 1}] for rank-{rank} inputs of {op}",
                            given)
        fused = option(options, "fused_activation_function", "NONE")
        if fused != "NONE":
            raise UnsupportedError("options['fused_activation_function']", f"must be NONE for {op} (LiteRT Prepare)",
                                   fused)
        scalars = rank == 0 and all(t.data is not None for t in specs)
        if scalars:
            for i, t in enumerate(specs[1:], 1):
                if len(t.shape) != 0:
                    raise ShapeError(f"inputs[{i}].shape", f"must have the rank of inputs[0] ({rank})", _shape(t))
        else:
            if rank == 0:
                raise ShapeError("inputs[0].shape", f"{op} concatenates scalars only when all are constant", ())
            for i, t in enumerate(specs[1:], 1):
                if len(t.shape) != rank:
                    raise ShapeError(f"inputs[{i}].shape", f"must have the rank of inputs[0] ({rank})", _shape(t))
                if t.dtype != t0.dtype:
                    raise DTypeError(f"inputs[{i}].dtype", f"must match inputs[0] ({t0.dtype.name})", t.dtype.name)
                for d in range(rank):
                    if d != axis and t.shape[d] != t0.shape[d]:
                        raise ShapeError(f"inputs[{i}].shape", f"must equal inputs[0]'s shape {_shape(t0)} except on "
                                         f"axis {axis}", _shape(t))
        require_same_type(t0, out, "output.dtype", op)
        if t0.dtype.name == "int8":
            for i, t in enumerate(specs):
                same_legacy_params(t, out, f"inputs[{i}]", op)
        if t0.dtype.name == "int16":
            for i, t in enumerate(specs):
                if legacy(t)[1] != 0:
                    raise InvalidArgumentError(f"inputs[{i}].zero_point", f"must be 0 for int16 {op}", legacy(t)[1])
            if legacy(out)[1] != 0:
                raise InvalidArgumentError("output.zero_point", f"must be 0 for int16 {op}", legacy(out)[1])
        return ConcatPrepared(axis=axis, count=len(specs), scalar_constants=scalars, consts=constants(specs))

    def compute(self, p: ConcatPrepared, arrays) -> list[np.ndarray]:
        xs = [value(arrays, p.consts, i, f"inputs[{i}]") for i in range(p.count)]
        if p.scalar_constants:
            return [np.stack([x.reshape(()) for x in xs])]
        return [np.concatenate(xs, axis=p.axis)]


# ---------------------------------------------------------------------------------------------
# RESHAPE (tflite/kernels/reshape.cc, tflite/kernels/internal/reshape_utils.h)

def _resolve_shape(input_shape: tuple[int, ...], requested, argument: str, op: str) -> tuple[int, ...]:
    """ResolveOutputShape: at most one -1, others >= 0, element counts equal."""
    requested = [int(v) for v in np.asarray(requested).reshape(-1)]
    n_in = int(np.prod(input_shape, dtype=np.int64))
    nz_in = int(np.prod([d for d in input_shape if d != 0], dtype=np.int64))
    stretch = None
    nz_out = n_out = 1
    for i, v in enumerate(requested):
        if v == -1:
            if stretch is not None:
                raise ShapeError(argument, f"may contain at most one -1 for {op}", requested)
            stretch = i
            continue
        if v < 0:
            raise ShapeError(argument, f"must not contain negative dimensions other than one -1 for {op}", requested)
        if v:
            nz_out *= v
        n_out *= v
    if stretch is not None:
        requested[stretch] = 0 if (n_in == 0 and n_out != 0) else nz_in // nz_out
        n_out *= requested[stretch]
    if n_in != n_out:
        raise ShapeError(argument, f"must hold as many elements as the input ({n_in}) for {op}", requested)
    return tuple(requested)


@dataclass(frozen=True, eq=False)
class ReshapePrepared:
    output_shape: tuple[int, ...] | None     # None: read from the run-time shape input
    consts: tuple = ()


@register
class Reshape(Kernel):
    name = "RESHAPE"

    def prepare(self, inputs, outputs, options) -> ReshapePrepared:
        op = self.name
        (x,) = count(op, inputs, outputs, (1, 2), names=("input",))
        enforce(op, inputs, outputs)
        require_same_type(x, outputs[0], "output.dtype", op)
        shape_t = inputs[1] if len(inputs) == 2 else None
        if shape_t is not None and len(shape_t.shape) == 1 and shape_t.dtype.name == "int32":
            if shape_t.data is None:
                return ReshapePrepared(output_shape=None, consts=constants(inputs))
            return ReshapePrepared(_resolve_shape(_shape(x), shape_t.data, "shape", op), consts=constants(inputs))
        # fallback: the new_shape option (a shape tensor of another type or rank is ignored)
        new_shape = option(options, "new_shape", [])
        new_shape = [int(v) for v in new_shape]
        if len(new_shape) == 1 and new_shape[0] == 0:   # legacy models write [0] for a scalar
            new_shape = []
        return ReshapePrepared(_resolve_shape(_shape(x), new_shape, "options['new_shape']", op),
                               consts=constants(inputs))

    def compute(self, p: ReshapePrepared, arrays) -> list[np.ndarray]:
        x = value(arrays, p.consts, 0)
        shape = p.output_shape
        if shape is None:
            shape = _resolve_shape(x.shape, value(arrays, p.consts, 1, "shape"), "shape", self.name)
        return [x.reshape(shape).copy()]


# ---------------------------------------------------------------------------------------------
# SQUEEZE (tflite/kernels/squeeze.cc)

@dataclass(frozen=True, eq=False)
class SqueezePrepared:
    output_shape: tuple[int, ...]
    consts: tuple = ()


@register
class Squeeze(Kernel):
    name = "SQUEEZE"

    def prepare(self, inputs, outputs, options) -> SqueezePrepared:
        op = self.name
        (x,) = count(op, inputs, outputs, 1, names=("input",))
        enforce(op, inputs, outputs)
        shape = _shape(x)
        rank = len(shape)
        if rank > 8:
            raise ShapeError("input.shape", f"must have rank <= 8 for {op}", shape)
        dims = [int(d) for d in option(options, "squeeze_dims", [])]
        drop = [False] * rank
        if not dims:
            drop = [s == 1 for s in shape]
        for d in dims:
            cur = d + rank if d < 0 else d
            if not (0 <= cur < rank):
                raise AxisError("options['squeeze_dims']", f"must be in [{-rank}, {rank - 1}] for {op}", d)
            if shape[cur] != 1:
                raise ShapeError("options['squeeze_dims']", f"must name dimensions of size 1 ({op})", d,
                                 detail=f"dimension {cur} of {shape} has size {shape[cur]}")
            drop[cur] = True
        return SqueezePrepared(tuple(s for s, dr in zip(shape, drop) if not dr), consts=constants(inputs))

    def compute(self, p: SqueezePrepared, arrays) -> list[np.ndarray]:
        return [value(arrays, p.consts, 0).reshape(p.output_shape).copy()]


# ---------------------------------------------------------------------------------------------
# TRANSPOSE (tflite/kernels/transpose.cc)

def _check_perm(perm: np.ndarray, rank: int, op: str) -> tuple[int, ...]:
    perm = np.asarray(perm)
    if perm.ndim != 1:
        raise ShapeError("perm.shape", f"must be 1-D for {op}", perm.shape)
    if perm.shape[0] != rank:
        raise ShapeError("perm", f"must have one entry per input dimension ({rank}) for {op}", perm.tolist())
    out = []
    for v in perm.tolist():
        if not -rank <= v < rank:
            raise AxisError("perm", f"entries must be in [{-rank}, {rank - 1}] for {op}", perm.tolist())
        out.append(v + rank if v < 0 else v)
    if len(set(out)) != rank:
        raise InvalidArgumentError("perm", f"must be a permutation for {op} (LiteRT does not check this and "
                                   "produces undefined output)", perm.tolist())
    return tuple(out)


@dataclass(frozen=True, eq=False)
class TransposePrepared:
    perm: tuple[int, ...] | None
    consts: tuple = ()


@register
class Transpose(Kernel):
    name = "TRANSPOSE"

    def prepare(self, inputs, outputs, options) -> TransposePrepared:
        op = self.name
        x, perm = count(op, inputs, outputs, 2, names=("input", "perm"))
        enforce(op, inputs, outputs)
        if len(x.shape) > 8:
            raise ShapeError("input.shape", f"{op} supports 1-D to 8-D inputs", _shape(x))
        require_same_type(x, outputs[0], "output.dtype", op)
        _index_type(perm, ("int32",), "perm.dtype", op)
        if perm.data is None:
            return TransposePrepared(None, consts=constants(inputs))
        return TransposePrepared(_check_perm(perm.data, len(x.shape), op), consts=constants(inputs))

    def compute(self, p: TransposePrepared, arrays) -> list[np.ndarray]:
        x = value(arrays, p.consts, 0)
        perm = p.perm if p.perm is not None else _check_perm(value(arrays, p.consts, 1, "perm"), x.ndim,
                                                             self.name)
        return [np.ascontiguousarray(np.transpose(x, perm))]


# ---------------------------------------------------------------------------------------------
# GATHER (tflite/kernels/gather.cc, tflite/kernels/internal/reference/gather.h)

@dataclass(frozen=True, eq=False)
class GatherPrepared:
    axis: int
    batch_dims: int
    positions: np.ndarray | None
    consts: tuple = ()


def _gather_positions(pos: np.ndarray, axis_size: int, op: str) -> np.ndarray:
    pos = np.asarray(pos)
    if pos.size and pos.min() < 0:
        raise limit("index-out-of-range", InvalidArgumentError("positions", f"must be non-negative for {op} (LiteRT "
                                                               "Eval)", int(pos.min())))
    if pos.size and pos.max() >= axis_size:
        raise limit("index-out-of-range", InvalidArgumentError(
            "positions", f"must be < the gathered axis' size {axis_size} for {op} (LiteRT Eval: index out of bounds)",
            int(pos.max())))
    return pos.astype(np.int64)


@register
class Gather(Kernel):
    name = "GATHER"

    def prepare(self, inputs, outputs, options) -> GatherPrepared:
        op = self.name
        x, pos = count(op, inputs, outputs, 2, names=("input", "positions"))
        enforce(op, inputs, outputs)
        _index_type(pos, ("int16", "int32", "int64"), "positions.dtype", op)
        require_same_type(x, outputs[0], "output.dtype", op)
        rank, prank = len(x.shape), len(pos.shape)
        axis = given = option(options, "axis", 0, kind=int)
        if axis < 0:
            axis += rank
        if not 0 <= axis < rank:
            raise AxisError("options['axis']", f"must be in [{-rank}, {rank - 1}] for {op}", given)
        bd = bgiven = option(options, "batch_dims", 0, kind=int)
        if bd < 0:
            bd += prank
        if bd > axis:
            raise AxisError("options['batch_dims']", f"must be <= axis ({axis}) for {op}", bgiven)
        if not (0 <= bd < rank) or bd > prank:
            raise AxisError("options['batch_dims']", f"must be in [{-prank}, {min(prank, rank - 1)}] for {op}", bgiven)
        for i in range(bd):
            if x.shape[i] != pos.shape[i]:
                raise ShapeError("positions.shape", f"must match the input's first batch_dims={bd} dimensions "
                                 f"{_shape(x)[:bd]} for {op}", _shape(pos))
        positions = None
        if pos.data is not None:
            positions = _gather_positions(pos.data, int(x.shape[axis]), op).reshape(_shape(pos))
        return GatherPrepared(axis=axis, batch_dims=bd, positions=positions, consts=constants(inputs))

    def compute(self, p: GatherPrepared, arrays) -> list[np.ndarray]:
        x = value(arrays, p.consts, 0)
        pos = p.positions
        if pos is None:
            pos = _gather_positions(value(arrays, p.consts, 1, "positions"), x.shape[p.axis], self.name)
        bd, axis = p.batch_dims, p.axis
        if bd == 0:
            return [np.take(x, pos, axis=axis)]
        batch = x.shape[:bd]
        nb = int(np.prod(batch, dtype=np.int64))
        outer = int(np.prod(x.shape[bd:axis], dtype=np.int64))
        inner = x.shape[axis + 1:]
        xr = x.reshape(nb, outer, x.shape[axis], -1)
        pr = pos.reshape(nb, -1)
        g = xr[np.arange(nb)[:, None, None], np.arange(outer)[None, :, None], pr[:, None, :]]
        shape = (*batch, *x.shape[bd:axis], *pos.shape[bd:], *inner)
        return [g.reshape(shape)]


# ---------------------------------------------------------------------------------------------
# SLICE (tflite/kernels/slice.cc)

def _slice_bounds(shape: tuple[int, ...], begin, size, op: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    begin = [int(v) for v in np.asarray(begin).reshape(-1)]
    size = [int(v) for v in np.asarray(size).reshape(-1)]
    if len(begin) != len(shape):
        raise ShapeError("begin", f"must have one entry per input dimension ({len(shape)}) for {op}", begin)
    starts, lengths = [], []
    for d, (dim, b, s) in enumerate(zip(shape, begin, size)):
        if b < 0 or b > dim:
            raise InvalidArgumentError("begin", f"entries must lie in [0, dim] for {op} (dimension {d} has size "
                                       f"{dim}; LiteRT: Invalid begin)", begin)
        if s < 0:
            if s != -1:
                raise InvalidArgumentError("size", f"entries must be >= 0 or -1 for {op} (LiteRT: Invalid size)", size)
            s = dim - b
        elif b + s > dim:
            raise InvalidArgumentError("size", f"begin + size must not exceed the dimension for {op} (LiteRT: "
                                       "Invalid begin and size)", size, detail=f"dimension {d}: {b} + {s} > {dim}")
        starts.append(b)
        lengths.append(s)
    return tuple(starts), tuple(lengths)


@dataclass(frozen=True, eq=False)
class SlicePrepared:
    bounds: tuple | None
    consts: tuple = ()


@register
class Slice(Kernel):
    name = "SLICE"

    def prepare(self, inputs, outputs, options) -> SlicePrepared:
        op = self.name
        x, begin, size = count(op, inputs, outputs, 3, names=("input", "begin", "size"))
        enforce(op, inputs, outputs)
        require_same_type(x, outputs[0], "output.dtype", op)
        _index_type(begin, ("int32", "int64"), "begin.dtype", op)
        _index_type(size, ("int32", "int64"), "size.dtype", op)
        if begin.dtype != size.dtype:
            raise UnsupportedError("size.dtype", f"must match begin's type ({begin.dtype.name}) for {op} (LiteRT reads "
                                   "both with begin's type)", size.dtype.name)
        if len(begin.shape) != 1 or len(size.shape) != 1:
            raise ShapeError("begin/size.shape", f"must be 1-D for {op}", (_shape(begin), _shape(size)))
        if begin.shape[0] != size.shape[0]:
            raise ShapeError("size.shape", f"must have as many elements as begin for {op}", _shape(size))
        if begin.data is None or size.data is None:
            return SlicePrepared(None, consts=constants(inputs))
        bounds = _slice_bounds(_shape(x), begin.data, size.data, op)
        out_shape = _shape(outputs[0])
        if out_shape and all(d >= 0 for d in out_shape) and out_shape != bounds[1]:
            raise ShapeError("output.shape", f"must be the sliced shape {bounds[1]} for {op} (LiteRT Prepare)",
                             out_shape)
        return SlicePrepared(bounds, consts=constants(inputs))

    def compute(self, p: SlicePrepared, arrays) -> list[np.ndarray]:
        x = value(arrays, p.consts, 0)
        bounds = p.bounds or _slice_bounds(x.shape, value(arrays, p.consts, 1, "begin"),
                                           value(arrays, p.consts, 2, "size"), self.name)
        index = tuple(slice(b, b + s) for b, s in zip(*bounds))
        return [x[index].copy()]


# ---------------------------------------------------------------------------------------------
# SPACE_TO_DEPTH (tflite/kernels/space_to_depth.cc)

@dataclass(frozen=True, eq=False)
class SpaceToDepthPrepared:
    block: int
    consts: tuple = ()


@register
class SpaceToDepth(Kernel):
    name = "SPACE_TO_DEPTH"

    def prepare(self, inputs, outputs, options) -> SpaceToDepthPrepared:
        op = self.name
        (x,) = count(op, inputs, outputs, 1, names=("input",))
        enforce(op, inputs, outputs)
        if len(x.shape) != 4:
            raise ShapeError("input.shape", f"must be 4-D for {op}", _shape(x))
        if outputs[0].dtype.name not in ("float", "uint8", "int8", "int32", "int64"):
            raise DTypeError("output.dtype", f"{op} supports float32, uint8, int8, int32 and int64",
                             outputs[0].dtype.name)
        require_same_type(x, outputs[0], "output.dtype", op)
        bs = option(options, "block_size", 0, kind=int)
        if bs <= 0:
            raise InvalidArgumentError("options['block_size']", f"must be positive for {op}", bs)
        h, w = int(x.shape[1]), int(x.shape[2])
        if h % bs or w % bs:
            raise ShapeError("input.shape", f"height and width must be multiples of block_size={bs} for {op}",
                             _shape(x))
        return SpaceToDepthPrepared(bs, consts=constants(inputs))

    def compute(self, p: SpaceToDepthPrepared, arrays) -> list[np.ndarray]:
        x = value(arrays, p.consts, 0)
        n, h, w, c = x.shape
        bs = p.block
        y = x.reshape(n, h // bs, bs, w // bs, bs, c).transpose(0, 1, 3, 2, 4, 5)
        return [np.ascontiguousarray(y).reshape(n, h // bs, w // bs, bs * bs * c)]


# ---------------------------------------------------------------------------------------------
# SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND (tflite/kernels/{space_to_batch_nd,batch_to_space_nd}.cc)

def _nd_checks(op: str, inputs, outputs, second: str) -> tuple[TensorSpec, TensorSpec, TensorSpec]:
    x, block, pads = count(op, inputs, outputs, 3, names=("input", "block_shape", second))
    enforce(op, inputs, outputs)
    if len(x.shape) not in (3, 4):
        raise ShapeError("input.shape", f"{op} supports 3-D (NHC) and 4-D (NHWC) inputs", _shape(x))
    require_same_type(x, outputs[0], "output.dtype", op)
    if x.dtype.name in ("uint8", "int8", "int16"):
        same_legacy_params(x, outputs[0], "input", op)
    if x.dtype.name == "int16" and legacy(x)[1] != 0:
        raise InvalidArgumentError("input.zero_point", f"must be 0 for int16 {op}", legacy(x)[1])
    _index_type(block, ("int32",), "block_shape.dtype", op)
    _index_type(pads, ("int32",), f"{second}.dtype", op)
    spatial = len(x.shape) - 2
    if len(block.shape) != 1 or block.shape[0] != spatial:
        raise ShapeError("block_shape.shape", f"must be [{spatial}] for a rank-{len(x.shape)} input of {op}",
                         _shape(block))
    if len(pads.shape) != 2 or pads.shape[0] != spatial or pads.shape[1] != 2:
        raise ShapeError(f"{second}.shape", f"must be [{spatial}, 2] for a rank-{len(x.shape)} input of {op}",
                         _shape(pads))
    return x, block, pads


def _blocks(block, op: str) -> list[int]:
    values = [int(v) for v in np.asarray(block).reshape(-1)]
    for v in values:
        if v < 1:
            raise InvalidArgumentError("block_shape", f"entries must be >= 1 for {op}", values)
    return values


def _s2b_plan(shape, block, pads, op):
    block = _blocks(block, op)
    pads = np.asarray(pads).astype(np.int64).reshape(-1, 2)
    out = [shape[0] * int(np.prod(block))]
    for d, b in enumerate(block):
        final = shape[d + 1] + int(pads[d, 0]) + int(pads[d, 1])
        if final % b:
            raise ShapeError("paddings", f"padded spatial dimension {d} ({final}) must be a multiple of "
                             f"block_shape[{d}] = {b} for {op}", pads.tolist())
        if final < 0:
            raise ShapeError("paddings", f"must not make a spatial dimension negative for {op}", pads.tolist())
        out.append(final // b)
    out.append(shape[-1])
    return tuple(block), pads, tuple(out)


def _b2s_plan(shape, block, crops, op):
    block = _blocks(block, op)
    crops = np.asarray(crops).astype(np.int64).reshape(-1, 2)
    if (crops < 0).any():
        raise InvalidArgumentError("crops", f"entries must be >= 0 for {op} (LiteRT Prepare)", crops.tolist())
    batch = shape[0]
    out = [0]
    for d, b in enumerate(block):
        if batch % b:
            raise ShapeError("input.shape", f"batch {shape[0]} must be a multiple of the block shape product for {op}",
                             tuple(shape))
        batch //= b
        size = shape[d + 1] * b - int(crops[d, 0]) - int(crops[d, 1])
        if size < 0:
            raise ShapeError("crops", f"crop more than the spatial dimension {d} holds for {op}", crops.tolist())
        out.append(size)
    out[0] = batch
    out.append(shape[-1])
    return tuple(block), crops, tuple(out)


@dataclass(frozen=True, eq=False)
class SpaceBatchPrepared:
    plan: tuple | None
    pad_byte: int                   # SPACE_TO_BATCH_ND: the memset byte (zero point's low byte for 8/16-bit)
    consts: tuple = ()


class _SpaceBatchND(Kernel):
    """What SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND share: the checks, the plan (constant block
    shape and paddings / crops: in prepare, else in compute), and 3-D (NHC) inputs moved as NH1C."""

    second: str                         # the name of input 2: SPACE_TO_BATCH_ND's paddings, BATCH_TO_SPACE_ND's crops
    plan: Any                           # (shape, block, input 2, op) -> (block, input 2 as (n, 2), output shape)

    def pad_byte(self, x: TensorSpec, out: TensorSpec) -> int:
        return 0

    def prepare(self, inputs, outputs, options) -> SpaceBatchPrepared:
        op = self.name
        x, block, margins = _nd_checks(op, inputs, outputs, self.second)
        plan = None
        if block.data is not None and margins.data is not None:
            plan = self.plan(_shape(x), block.data, margins.data, op)
        return SpaceBatchPrepared(plan, self.pad_byte(x, outputs[0]), consts=constants(inputs))

    def compute(self, p: SpaceBatchPrepared, arrays) -> list[np.ndarray]:
        x = value(arrays, p.consts, 0)
        plan = p.plan or self.plan(x.shape, value(arrays, p.consts, 1, "block_shape"),
                                   value(arrays, p.consts, 2, self.second), self.name)
        block, margins, out_shape = plan
        x4 = x if x.ndim == 4 else x[:, :, None, :]
        bh, bw = (block[0], block[1]) if x.ndim == 4 else (block[0], 1)
        top, left = int(margins[0, 0]), (int(margins[1, 0]) if x.ndim == 4 else 0)
        ob, oh, ow = out_shape[0], out_shape[1], (out_shape[2] if x.ndim == 4 else 1)
        return [self.move(p, x4, (bh, bw), (top, left), (ob, oh, ow)).reshape(out_shape)]

    def move(self, p: SpaceBatchPrepared, x4: np.ndarray, block: tuple[int, int], before: tuple[int, int],
             out: tuple[int, int, int]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


@register
class SpaceToBatchND(_SpaceBatchND):
    name = "SPACE_TO_BATCH_ND"
    second = "paddings"
    plan = staticmethod(_s2b_plan)

    def pad_byte(self, x: TensorSpec, out: TensorSpec) -> int:
        # the kernel memsets padding with the output zero point for 8- and 16-bit types, 0 otherwise
        return (legacy(out)[1] & 0xFF) if x.dtype.dtype.itemsize <= 2 else 0

    def move(self, p, x4, block, before, out):
        (bh, bw), (top, left), (ob, oh, ow) = block, before, out
        n, h, w, c = x4.shape
        fill = np.frombuffer(bytes([p.pad_byte]) * x4.dtype.itemsize, dtype=x4.dtype)[0]
        # one extra row and column holding the pad value: invalid positions point there
        ext = np.empty((n, h + 1, w + 1, c), x4.dtype)
        ext[...] = fill
        ext[:, :h, :w] = x4
        b_idx = np.arange(ob)
        in_b = b_idx % n
        shift_w = (b_idx // n) % bw
        shift_h = (b_idx // n) // bw
        ph = np.arange(oh)[None, :] * bh + shift_h[:, None] - top          # (OB, OH)
        pw = np.arange(ow)[None, :] * bw + shift_w[:, None] - left         # (OB, OW)
        ph = np.where((ph >= 0) & (ph < h), ph, h)
        pw = np.where((pw >= 0) & (pw < w), pw, w)
        return ext[in_b[:, None, None], ph[:, :, None], pw[:, None, :]]   # (OB, OH, OW, C)


@register
class BatchToSpaceND(_SpaceBatchND):
    name = "BATCH_TO_SPACE_ND"
    second = "crops"
    plan = staticmethod(_b2s_plan)

    def move(self, p, x4, block, before, out):
        (bh, bw), (top, left), (ob, oh, ow) = block, before, out
        th = np.arange(oh) + top
        tw = np.arange(ow) + left
        in_h, sh = th // bh, th % bh
        in_w, sw = tw // bw, tw % bw
        in_b = (sh[:, None] * bw + sw[None, :])[None, :, :] * ob + np.arange(ob)[:, None, None]   # (OB, OH, OW)
        return x4[in_b, in_h[None, :, None], in_w[None, None, :]]


# ---------------------------------------------------------------------------------------------
# PAD / PADV2 (tflite/kernels/pad.cc)

@dataclass(frozen=True, eq=False)
class PadPrepared:
    paddings: np.ndarray | None     # int64 (rank, 2)
    pad_value: Any                  # the pad element (input dtype); None: read at run time
    consts: tuple = ()


def _pad_plan(rank: int, paddings, op: str) -> np.ndarray:
    pads = np.asarray(paddings)
    if pads.ndim != 2 or pads.shape[1] != 2:
        raise ShapeError("paddings.shape", f"must be [rank, 2] for {op}", pads.shape)
    if pads.shape[0] != rank:
        raise ShapeError("paddings.shape", f"must have one row per input dimension ({rank}) for {op}", pads.shape)
    pads = pads.astype(np.int64)
    if (pads < 0).any():
        raise InvalidArgumentError("paddings", f"must be >= 0 for {op} (LiteRT: Pad value has to be greater than "
                                   "equal to 0)", pads.tolist())
    if (pads > np.iinfo(np.int32).max).any():
        raise InvalidArgumentError("paddings", f"must fit int32 for {op}", pads.tolist())
    return pads


class _PadBase(Kernel):
    def prepare(self, inputs, outputs, options) -> PadPrepared:
        op = self.name
        x, pads = count(op, inputs, outputs, (2, 3), names=("input", "paddings"))
        enforce(op, inputs, outputs)
        cv = inputs[2] if len(inputs) == 3 else None
        out = outputs[0]
        _index_type(pads, ("int32", "int64", "int16"), "paddings.dtype", op)
        if len(pads.shape) != 2 or pads.shape[1] != 2:
            raise ShapeError("paddings.shape", f"must be [rank, 2] for {op}", _shape(pads))
        rank = len(x.shape)
        if rank and pads.shape[0] != rank:
            raise ShapeError("paddings.shape", f"must have one row per input dimension ({rank}) for {op}",
                             _shape(pads))
        require_same_type(x, out, "output.dtype", op)
        if rank > 5:
            raise ShapeError("input.shape", f"{op} supports up to 5 dimensions", _shape(x))
        dtype = x.dtype.dtype
        if cv is not None:
            if cv.dtype != x.dtype:
                raise DTypeError("constant_values.dtype", f"must be the input's type ({x.dtype.name}) for {op}",
                                 cv.dtype.name)
            if int(np.prod(cv.shape, dtype=np.int64)) != 1:
                raise ShapeError("constant_values.shape", f"must hold exactly one value for {op}", _shape(cv))
            if x.dtype.kind == "int":       # EvalInt: uint8, int8, int16, int32, int64
                s_c, z_c = legacy(cv)
                s_o, z_o = legacy(out)
                if z_c != z_o:
                    raise InvalidArgumentError("constant_values.zero_point", f"must equal the output's zero point for "
                                               f"quantized {op} (LiteRT)", z_c, detail=f"expected {z_o}")
                if s_c != s_o:
                    raise InvalidArgumentError("constant_values.scale", f"must equal the output's scale for quantized "
                                               f"{op} (LiteRT)", float(s_c), detail=f"expected {float(s_o)!r}")
            if cv.data is None:
                fill = None
            else:
                fill = np.asarray(cv.data).astype(dtype, copy=False).reshape(-1)[0]
        elif x.dtype.kind == "int":
            zp = legacy(out)[1]
            info = np.iinfo(dtype)
            if not info.min <= zp <= info.max:
                raise InvalidArgumentError("output.zero_point", f"must be representable in {x.dtype.name} to pad "
                                           f"with it ({op})", zp)
            fill = np.asarray(zp).astype(dtype)[()]
        else:
            fill = np.zeros((), dtype)[()]
        plan = None
        if pads.data is not None:
            plan = _pad_plan(rank, pads.data, op)
        return PadPrepared(plan, fill, consts=constants(inputs))

    def compute(self, p: PadPrepared, arrays) -> list[np.ndarray]:
        x = value(arrays, p.consts, 0)
        pads = p.paddings if p.paddings is not None else _pad_plan(
            x.ndim, value(arrays, p.consts, 1, "paddings"), self.name)
        fill = p.pad_value
        if fill is None:
            fill = value(arrays, p.consts, 2, "constant_values").astype(x.dtype).reshape(-1)[0]
        shape = tuple(int(d) + int(a) + int(b) for d, (a, b) in zip(x.shape, pads))
        fits_memory(self.name, "paddings", shape, x.dtype.itemsize, pads.tolist())
        out = np.empty(shape, x.dtype)
        out[...] = fill
        out[tuple(slice(int(a), int(a) + d) for d, (a, _) in zip(x.shape, pads))] = x
        return [out]


@register
class Pad(_PadBase):
    name = "PAD"


@register
class PadV2(_PadBase):
    name = "PADV2"


# ---------------------------------------------------------------------------------------------
# SHAPE (tflite/kernels/shape.cc)

@dataclass(frozen=True, eq=False)
class ShapePrepared:
    dtype: np.dtype
    consts: tuple = ()


@register
class Shape(Kernel):
    name = "SHAPE"

    def prepare(self, inputs, outputs, options) -> ShapePrepared:
        op = self.name
        count(op, inputs, outputs, 1, names=("input",))
        enforce(op, inputs, outputs)
        out_type = option(options, "out_type", "FLOAT32")
        if out_type not in ("INT32", "INT64"):
            raise UnsupportedError("options['out_type']", f"must be INT32 or INT64 for {op} (LiteRT: Unknown shape "
                                   "output data type)", out_type)
        return ShapePrepared(np.dtype(np.int32 if out_type == "INT32" else np.int64), consts=constants(inputs))

    def compute(self, p: ShapePrepared, arrays) -> list[np.ndarray]:
        return [np.asarray(np.shape(value(arrays, p.consts, 0)), dtype=p.dtype)]
