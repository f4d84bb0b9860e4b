"""The unquantized int32 / int64 / bool (and float32) ops converter-made models compute their dynamic
dimensions with: NEG, FLOOR_DIV, FLOOR_MOD, MAXIMUM / MINIMUM (plain types), LOGICAL_AND / OR / NOT,
SELECT, SELECT_V2, RANGE, FILL, CAST, EXPAND_DIMS, BROADCAST_TO, TILE, GATHER_ND, REDUCE_PROD and
ARG_MIN.

A Keras layer whose batch (or sequence) dimension is unknown turns into ``SHAPE`` / ``STRIDED_SLICE``
/ ``REDUCE_PROD`` / ``PACK`` / ``CONCATENATION`` / ``SELECT_V2`` arithmetic on int32 tensors around the
int8 operators; LiteRT runs it with the same builtin kernels on every resolver (the XNNPACK delegate
takes none of these ops on integer types, and LiteRT's optimized kernels for them are the reference
kernels' loops or give the same integers), so each op here has one kernel for all three modes.

Integer semantics follow the LiteRT reference kernels (``tflite/kernels/<op>.cc``,
``internal/reference/*.h``) on x86-64:

- int32 / int64 arithmetic wraps (NEG of the minimum is the minimum; REDUCE_PROD multiplies with
  wrap-around; RANGE adds ``delta`` to a running value);
- FLOOR_DIV rounds the quotient toward -inf: ``floor(double(a) / double(b))`` converted back to the
  type (int32 ``-2^31 // -1`` converts out of range: x86 gives ``-2^31``); FLOOR_MOD takes C's
  truncating remainder and adds the divisor where the remainder's sign differs from the divisor's;
  a zero divisor makes LiteRT's Eval fail ("Division by 0"), so quantspec raises;
- CAST: integer to integer wraps (``static_cast``), to bool is ``!= 0``, float to integer truncates
  toward zero (NaN and out-of-range values are refused: LiteRT 2.3.0's ``static_cast`` is undefined
  there);
- ARG_MIN returns the first index of the minimum; GATHER_ND and the ones above refuse indices out
  of range (LiteRT's Eval fails).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import AxisError, DTypeError, InvalidArgumentError, ShapeError, UnsupportedError
from . import _common as c
from . import elementwise  # noqa: F401 - MAXIMUM / MINIMUM, wrapped below
from . import plain  # noqa: F401 - its TypeDispatch entries first
from .base import REGISTRY, Kernel, register
from .plain import TypeDispatch
from .reduce import ArgMax, ProdParams, prepare_quantized_prod, quantized_prod, resolve_axes

__all__ = ["Neg", "XnnpackNeg", "FloorDiv", "FloorMod", "LogicalNot", "LogicalAnd", "LogicalOr", "Select", "SelectV2", "Range",
           "Fill", "Cast", "ExpandDims", "BroadcastTo", "Tile", "GatherNd", "ReduceProd", "ArgMin"]

_NP = {"float": np.float32, "int32": np.int32, "int64": np.int64, "bool": np.bool_, "int8": np.int8,
       "uint8": np.uint8, "int16": np.int16}
_INTS = ("int8", "int16", "int32", "int64")
_ANY = ("float", "int8", "uint8", "int16", "int32", "int64", "bool")


@dataclass(frozen=True, eq=False)
class _Consts:
    consts: tuple
    extra: Any = None


def _arr(arrays, p: _Consts, i: int, argument: str = "input") -> np.ndarray:
    return c.value(arrays, p.consts, i, argument)


def _index_tensor(op: str, t, argument: str, allowed=("int32", "int64")) -> None:
    if t.dtype.name not in allowed:
        raise DTypeError(f"{op} {argument}", "must be " + " or ".join(allowed) + " (LiteRT rejects others)",
                         t.dtype.name)


def _same_type(op: str, a, b, argument: str) -> None:
    if a.dtype != b.dtype:
        raise DTypeError(f"{op} {argument}", f"must have the type of input 0 ({a.dtype.name}) (LiteRT: "
                         "TF_LITE_ENSURE_TYPES_EQ)", b.dtype.name)


# ---------------------------------------------------------------------------------------------
# NEG (tflite/kernels/neg.cc): the stored values negated, wrapping; int8 / int16 codes as raw integers

@register
class Neg(Kernel):
    name = "NEG"

    def prepare(self, inputs, outputs, options):
        (x,) = c.count(self.name, inputs, outputs, 1, names=("input",))
        c.require_type(self.name, [("input", x)], ("float", "int8", "int16", "int32", "int64"), error=DTypeError)
        c.require_same_type(x, outputs[0], "output", self.name)
        return _Consts(c.constants(inputs))

    def compute(self, p, arrays):
        x = _arr(arrays, p, 0)
        with np.errstate(all="ignore"):
            return [np.negative(x).astype(x.dtype)]


# ---------------------------------------------------------------------------------------------
# FLOOR_DIV, FLOOR_MOD (tflite/kernels/floor_div.cc, floor_mod.cc)

class _FloorBinary(Kernel):
    types: tuple[str, ...] = ()

    def prepare(self, inputs, outputs, options):
        x, y = c.count(self.name, inputs, outputs, 2, names=("input 0", "input 1"))
        c.require_type(self.name, [("input 0", x)], self.types, error=DTypeError)
        _same_type(self.name, x, y, "input 1")
        c.require_same_type(x, outputs[0], "output", self.name)
        shape = tuple(np.broadcast_shapes(tuple(x.shape), tuple(y.shape))) if tuple(x.shape) != tuple(y.shape) \
            else tuple(x.shape)
        if tuple(x.shape) != tuple(y.shape) and len(shape) > 4:
            raise UnsupportedError(f"{self.name} inputs", "broadcasting above rank 4 is not supported by LiteRT "
                                   "(BroadcastBinaryFunction4DSlow)", len(shape))
        return _Consts(c.constants(inputs))

    def compute(self, p, arrays):
        x, y = _arr(arrays, p, 0, "input 0"), _arr(arrays, p, 1, "input 1")
        try:
            np.broadcast_shapes(x.shape, y.shape)
        except ValueError:
            raise ShapeError(f"{self.name} inputs", "shapes do not broadcast", (x.shape, y.shape)) from None
        if x.dtype.kind in "iu" and np.any(y == 0):
            raise InvalidArgumentError(f"{self.name} input 1", "must not hold 0 (LiteRT Eval: Division by 0)", 0)
        return [self.apply(x, y)]


@register
class FloorDiv(_FloorBinary):
    name = "FLOOR_DIV"
    types = ("float", "int8", "int16", "int32")

    @staticmethod
    def apply(x, y):
        with np.errstate(all="ignore"):
            q = np.floor(x.astype(np.float64) / y.astype(np.float64))
        if x.dtype == np.float32:
            return q.astype(np.float32)
        info = np.iinfo(x.dtype)
        if x.dtype == np.int32:                              # cvttsd2si: out of range -> INT32_MIN
            q = np.where((q < info.min) | (q > info.max), float(info.min), q)
            return q.astype(np.int32)
        # int8 / int16: the double converts to int (exact here), then narrows with wrap-around
        return q.astype(np.int64).astype(x.dtype)


@register
class FloorMod(_FloorBinary):
    name = "FLOOR_MOD"
    types = ("float", "int8", "int16", "int32", "int64")

    @staticmethod
    def apply(x, y):
        if x.dtype == np.float32:
            with np.errstate(all="ignore"):
                r = np.fmod(x, y).astype(np.float32)
                adjust = (r != 0) & ((y < 0) != (r < 0))
                return np.where(adjust, (r + y).astype(np.float32), r).astype(np.float32)
        info = np.iinfo(x.dtype)
        if x.dtype.itemsize >= 4 and np.any((x == info.min) & (y == -1)):
            raise UnsupportedError("FLOOR_MOD inputs", "the minimum divided by -1 traps the C++ remainder "
                                   "(SIGFPE on x86-64), so LiteRT crashes", f"{info.min} % -1")
        xb, yb = np.broadcast_arrays(x.astype(np.int64), y.astype(np.int64))
        r = np.fmod(xb, yb)                                   # C's %: truncating, sign of the dividend
        adjust = (r != 0) & ((yb < 0) != (r < 0))
        return np.where(adjust, r + yb, r).astype(x.dtype)


# ---------------------------------------------------------------------------------------------
# MAXIMUM / MINIMUM on float32 / int32 / int64 (tflite/kernels/maximum_minimum.cc), behind the int8
# kernel of elementwise.py (plain.TypeDispatch)

class _PlainMaxMin(Kernel):
    def __init__(self, name: str, pick):
        self.name = name                      # type: ignore[misc]
        self.pick = pick

    def prepare(self, inputs, outputs, options):
        x, y = c.count(self.name, inputs, outputs, 2, names=("input 0", "input 1"))
        c.require_type(self.name, [("input 0", x)], ("float", "int32", "int64"), error=DTypeError)
        _same_type(self.name, x, y, "input 1")
        c.broadcast_shape(self.name, tuple(x.shape), tuple(y.shape))
        return _Consts(c.constants(inputs))

    def compute(self, p, arrays):
        x, y = _arr(arrays, p, 0, "input 0"), _arr(arrays, p, 1, "input 1")
        if x.dtype == np.float32:                 # MaximumOp: a > b ? a : b; MinimumOp: a < b ? a : b (NaN: b)
            z = np.where(x > y, x, y) if self.pick is np.maximum else np.where(x < y, x, y)
            return [z.astype(x.dtype)]
        return [self.pick(x, y).astype(x.dtype)]


for _name, _pick in (("MAXIMUM", np.maximum), ("MINIMUM", np.minimum)):
    if not isinstance(REGISTRY.get(_name), TypeDispatch):    # the int8 kernel for int8, this one for the rest
        REGISTRY[_name] = TypeDispatch(_name, REGISTRY[_name], _PlainMaxMin(_name, _pick))


# ---------------------------------------------------------------------------------------------
# LOGICAL_NOT / LOGICAL_AND / LOGICAL_OR (tflite/kernels/logical.cc, elementwise.cc): bool only

@register
class LogicalNot(Kernel):
    name = "LOGICAL_NOT"

    def prepare(self, inputs, outputs, options):
        (x,) = c.count(self.name, inputs, outputs, 1, names=("input",))
        c.require_type(self.name, [("input", x)], ("bool",), error=DTypeError)
        return _Consts(c.constants(inputs))

    def compute(self, p, arrays):
        return [np.logical_not(_arr(arrays, p, 0))]


class _LogicalBinary(Kernel):
    def prepare(self, inputs, outputs, options):
        x, y = c.count(self.name, inputs, outputs, 2, names=("input 0", "input 1"))
        c.require_type(self.name, [("input 0", x), ("input 1", y)], ("bool",), error=DTypeError)
        shape = c.broadcast_shape(self.name, tuple(x.shape), tuple(y.shape))
        return _Consts(c.constants(inputs), shape)

    def compute(self, p, arrays):
        x, y = _arr(arrays, p, 0, "input 0"), _arr(arrays, p, 1, "input 1")
        c.broadcast_shape(self.name, x.shape, y.shape)
        return [np.asarray(self.apply(x, y), bool)]


@register
class LogicalAnd(_LogicalBinary):
    name = "LOGICAL_AND"
    apply = staticmethod(np.logical_and)


@register
class LogicalOr(_LogicalBinary):
    name = "LOGICAL_OR"
    apply = staticmethod(np.logical_or)


# ---------------------------------------------------------------------------------------------
# SELECT, SELECT_V2 (tflite/kernels/select.cc): elements of x where the condition holds, else of y;
# the stored values are copied (no requantization)

class _Select(Kernel):
    def prepare(self, inputs, outputs, options):
        cond, x, y = c.count(self.name, inputs, outputs, 3, names=("condition", "x", "y"))
        c.require_type(self.name, [("condition", cond)], ("bool",), error=DTypeError)
        c.require_type(self.name, [("x", x)], _ANY, error=DTypeError)
        _same_type(self.name, x, y, "y")
        c.require_same_type(x, outputs[0], "output", self.name)
        self._shape(tuple(cond.shape), tuple(x.shape), tuple(y.shape))
        return _Consts(c.constants(inputs))

    def compute(self, p, arrays):
        cond, x, y = (_arr(arrays, p, i, n) for i, n in enumerate(("condition", "x", "y")))
        self._shape(cond.shape, x.shape, y.shape)
        if cond.ndim == 1 and x.ndim > 1 and self.name == "SELECT":          # one condition per row
            cond = cond.reshape((-1,) + (1,) * (x.ndim - 1))
        return [np.where(cond, x, y).astype(x.dtype)]


@register
class Select(_Select):
    name = "SELECT"

    def _shape(self, cs, xs, ys):
        if xs != ys:
            raise ShapeError(f"{self.name} y", "must have x's shape (LiteRT: SELECT does not broadcast)", ys,
                             detail=f"x has {xs}")
        if cs == xs or (len(cs) == 1 and len(xs) >= 1 and cs[0] == xs[0]):
            return
        raise ShapeError(f"{self.name} condition", "must have x's shape, or be 1-D of x's first dimension (LiteRT)",
                         cs, detail=f"x has {xs}")


@register
class SelectV2(_Select):
    name = "SELECT_V2"

    def _shape(self, cs, xs, ys):
        try:
            shape = np.broadcast_shapes(cs, xs, ys)
        except ValueError:
            raise ShapeError(f"{self.name} inputs", "shapes do not broadcast", (cs, xs, ys)) from None
        if not (cs == xs == ys) and len(shape) > 5:
            raise UnsupportedError(f"{self.name} inputs", "broadcasting above rank 5 is not supported by LiteRT "
                                   "(BroadcastSelect5DSlow)", len(shape))


# ---------------------------------------------------------------------------------------------
# RANGE (tflite/kernels/range.cc): scalars start, limit, delta of one type

@register
class Range(Kernel):
    name = "RANGE"

    def prepare(self, inputs, outputs, options):
        s, l, d = c.count(self.name, inputs, outputs, 3, names=("start", "limit", "delta"))
        c.require_type(self.name, [("start", s)], ("float", "int32", "int64"), error=DTypeError)
        for name, t in (("limit", l), ("delta", d)):
            _same_type(self.name, s, t, name)
        for name, t in (("start", s), ("limit", l), ("delta", d)):
            if len(t.shape) != 0:
                raise ShapeError(f"{self.name} {name}", "must be a scalar (LiteRT Prepare)", tuple(t.shape))
        return _Consts(c.constants(inputs))

    def compute(self, p, arrays):
        s, l, d = (_arr(arrays, p, i, n).reshape(()) for i, n in enumerate(("start", "limit", "delta")))
        dtype = s.dtype
        if d == 0:
            raise InvalidArgumentError(f"{self.name} delta", "must not be 0 (LiteRT fails)", d.item())
        if not ((s >= l and d < 0) or (s <= l and d > 0)):
            raise InvalidArgumentError(f"{self.name} delta", "must move start toward limit (LiteRT fails)",
                                       (s.item(), l.item(), d.item()))
        if dtype == np.float32:
            with np.errstate(all="ignore"):
                size = int(np.ceil(np.abs(np.float32(l - s) / d)))
            c.fits_memory(self.name, "output", (size,), 4, size)
            out = np.empty(size, np.float32)
            v = np.float32(s)
            for i in range(size):                      # the running value, rounded after each addition
                out[i] = v
                v = np.float32(v + d)
            return [out]
        bits = 8 * dtype.itemsize

        def wrap(v: int) -> int:                      # the C++ arithmetic of the type
            return ((v + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))

        # (|limit - start| + |delta| - 1) / |delta| in the type, C division (truncating)
        num = wrap(abs(wrap(int(l) - int(s))) + wrap(abs(int(d))) - 1)
        den = wrap(abs(int(d)))
        size = abs(num) // abs(den) * (1 if (num >= 0) == (den > 0) else -1)
        if size < 0:
            raise InvalidArgumentError(f"{self.name} inputs", "give a negative size (LiteRT: overflow)", size)
        c.fits_memory(self.name, "output", (size,), dtype.itemsize, size)
        with np.errstate(all="ignore"):               # start + i * delta, wrapping like the running sum
            vals = np.int64(s) + np.arange(size, dtype=np.int64) * np.int64(d)
        return [vals.astype(dtype)]


# ---------------------------------------------------------------------------------------------
# FILL (tflite/kernels/fill.cc)

@register
class Fill(Kernel):
    name = "FILL"

    def prepare(self, inputs, outputs, options):
        dims, val = c.count(self.name, inputs, outputs, 2, names=("dims", "value"))
        _index_tensor(self.name, dims, "dims")
        if len(dims.shape) != 1:
            raise ShapeError(f"{self.name} dims", "must be 1-D (LiteRT Prepare)", tuple(dims.shape))
        if len(val.shape) != 0:
            raise ShapeError(f"{self.name} value", "must be a scalar (LiteRT Prepare)", tuple(val.shape))
        c.require_type(self.name, [("value", val)], _ANY, error=DTypeError)
        c.require_same_type(val, outputs[0], "output", self.name)
        return _Consts(c.constants(inputs))

    def compute(self, p, arrays):
        dims, val = _arr(arrays, p, 0, "dims"), _arr(arrays, p, 1, "value")
        shape = tuple(int(v) for v in dims.reshape(-1))
        if any(v < 0 for v in shape):
            raise InvalidArgumentError(f"{self.name} dims", "must be non-negative (LiteRT: Fill dimensions must "
                                       "be >= 0)", shape)
        c.fits_memory(self.name, "dims", shape, val.dtype.itemsize, shape)
        return [np.full(shape, val.reshape(()), dtype=val.dtype)]


# ---------------------------------------------------------------------------------------------
# CAST (tflite/kernels/cast.cc)

@register
class Cast(Kernel):
    name = "CAST"
    types = ("float", "int8", "uint8", "int16", "int32", "int64", "bool")

    def prepare(self, inputs, outputs, options):
        (x,) = c.count(self.name, inputs, outputs, 1, names=("input",))
        c.require_type(self.name, [("input", x), ("output", outputs[0])], self.types, error=DTypeError)
        return _Consts(c.constants(inputs), np.dtype(_NP[outputs[0].dtype.name]))

    def compute(self, p, arrays):
        x = _arr(arrays, p, 0)
        to = p.extra
        if to == np.bool_:
            return [x != 0]
        if x.dtype == np.float32 and to.kind in "iu":
            if np.any(np.isnan(x)):
                raise UnsupportedError(f"{self.name} input", "holds NaN: LiteRT's conversion to an integer type is "
                                       "undefined there", "nan")
            t = np.trunc(x.astype(np.float64))
            info = np.iinfo(to)
            if np.any((t < info.min) | (t > info.max)):
                raise UnsupportedError(f"{self.name} input", f"holds values outside {to}'s range: LiteRT's "
                                       "conversion is undefined there", float(t[(t < info.min) | (t > info.max)][0]))
            return [t.astype(to)]
        with np.errstate(all="ignore"):
            return [x.astype(to)]                       # integers wrap; ints and bools to float round to nearest


# ---------------------------------------------------------------------------------------------
# EXPAND_DIMS (tflite/kernels/expand_dims.cc), BROADCAST_TO (broadcast_to.cc), TILE (tile.cc)

def _scalar_index(op: str, t: np.ndarray, argument: str) -> int:
    if t.size != 1:
        raise InvalidArgumentError(f"{op} {argument}", "must hold exactly one element (LiteRT)", t.shape)
    return int(t.reshape(-1)[0])


@register
class ExpandDims(Kernel):
    name = "EXPAND_DIMS"

    def prepare(self, inputs, outputs, options):
        x, axis = c.count(self.name, inputs, outputs, 2, names=("input", "axis"))
        _index_tensor(self.name, axis, "axis")
        c.require_same_type(x, outputs[0], "output", self.name)
        return _Consts(c.constants(inputs))

    def compute(self, p, arrays):
        x, a = _arr(arrays, p, 0), _arr(arrays, p, 1, "axis")
        axis = given = _scalar_index(self.name, a, "axis")
        rank = x.ndim
        if axis < 0:
            axis += rank + 1
        if not 0 <= axis <= rank:
            raise AxisError(f"{self.name} axis", f"must be in [{-rank - 1}, {rank}] (LiteRT)", given)
        return [np.expand_dims(x, axis).copy()]


@register
class BroadcastTo(Kernel):
    name = "BROADCAST_TO"

    def prepare(self, inputs, outputs, options):
        x, shape = c.count(self.name, inputs, outputs, 2, names=("input", "shape"))
        _index_tensor(self.name, shape, "shape")
        if len(shape.shape) != 1:
            raise ShapeError(f"{self.name} shape", "must be 1-D (LiteRT)", tuple(shape.shape))
        if len(x.shape) > 8:
            raise UnsupportedError(f"{self.name} input", "has rank above 8 (LiteRT's limit)", len(x.shape))
        c.require_same_type(x, outputs[0], "output", self.name)
        return _Consts(c.constants(inputs))

    def compute(self, p, arrays):
        x, s = _arr(arrays, p, 0), _arr(arrays, p, 1, "shape")
        shape = tuple(int(v) for v in s.reshape(-1))
        if len(shape) > 8:
            raise UnsupportedError(f"{self.name} shape", "has more than 8 dimensions (LiteRT's limit)", shape)
        if len(shape) < x.ndim:
            raise ShapeError(f"{self.name} shape", "must have at least the input's rank (LiteRT)", shape)
        for d, (want, have) in enumerate(zip(shape[len(shape) - x.ndim:], x.shape)):
            if have != 1 and have != want:
                raise ShapeError(f"{self.name} shape", "must equal each input dimension that is not 1 (LiteRT)",
                                 shape, detail=f"input shape {x.shape}")
        c.fits_memory(self.name, "shape", shape, x.dtype.itemsize, shape)
        return [np.broadcast_to(x, shape).copy()]


@register
class Tile(Kernel):
    name = "TILE"

    def prepare(self, inputs, outputs, options):
        x, m = c.count(self.name, inputs, outputs, 2, names=("input", "multipliers"))
        _index_tensor(self.name, m, "multipliers")
        c.require_type(self.name, [("input", x)], _ANY, error=DTypeError)
        c.require_same_type(x, outputs[0], "output", self.name)
        return _Consts(c.constants(inputs))

    def compute(self, p, arrays):
        x, m = _arr(arrays, p, 0), _arr(arrays, p, 1, "multipliers")
        reps = tuple(int(v) for v in m.reshape(-1))
        if m.ndim != 1 or len(reps) != x.ndim:
            raise ShapeError(f"{self.name} multipliers", f"must be 1-D with one entry per input dimension ({x.ndim})"
                             " (LiteRT)", m.shape)
        if any(r < 0 for r in reps):
            raise InvalidArgumentError(f"{self.name} multipliers", "must be non-negative (LiteRT)", reps)
        c.fits_memory(self.name, "multipliers", tuple(a * b for a, b in zip(x.shape, reps)), x.dtype.itemsize, reps)
        return [np.tile(x, reps) if x.ndim else x.copy()]


# ---------------------------------------------------------------------------------------------
# GATHER_ND (tflite/kernels/gather_nd.cc, reference_ops::GatherNd)

@register
class GatherNd(Kernel):
    name = "GATHER_ND"

    def prepare(self, inputs, outputs, options):
        x, idx = c.count(self.name, inputs, outputs, 2, names=("params", "indices"))
        _index_tensor(self.name, idx, "indices", ("int16", "int32", "int64"))
        c.require_type(self.name, [("params", x)], _ANY, error=DTypeError)
        c.require_same_type(x, outputs[0], "output", self.name)
        if len(x.shape) < 1:
            raise ShapeError(f"{self.name} params", "must have rank >= 1 (LiteRT)", tuple(x.shape))
        if len(idx.shape) < 1:
            raise ShapeError(f"{self.name} indices", "must have rank >= 1 (LiteRT)", tuple(idx.shape))
        if int(idx.shape[-1]) > len(x.shape):
            raise ShapeError(f"{self.name} indices", "innermost dimension must be <= the params' rank (LiteRT)",
                             tuple(idx.shape))
        return _Consts(c.constants(inputs))

    def compute(self, p, arrays):
        x, idx = _arr(arrays, p, 0, "params"), _arr(arrays, p, 1, "indices")
        k = idx.shape[-1]
        if k > x.ndim:
            raise ShapeError(f"{self.name} indices", "innermost dimension must be <= the params' rank (LiteRT)",
                             idx.shape)
        flat = idx.reshape(-1, k).astype(np.int64)
        dims = np.asarray(x.shape[:k], np.int64)
        if flat.size and (np.any(flat < 0) or np.any(flat >= dims)):
            raise InvalidArgumentError(f"{self.name} indices", "must lie inside the params' shape (LiteRT Eval: "
                                       "gather_nd index out of bounds)", flat[np.any((flat < 0) | (flat >= dims), 1)][0]
                                       .tolist())
        g = x[tuple(flat[:, j] for j in range(k))] if k else np.broadcast_to(x, (flat.shape[0], *x.shape))
        return [np.ascontiguousarray(g).reshape((*idx.shape[:-1], *x.shape[k:]))]


# ---------------------------------------------------------------------------------------------
# REDUCE_PROD on float32 / int32 / int64 (tflite/kernels/reduce.cc, reference_ops::ReduceGeneric)

@register
class ReduceProd(Kernel):
    """The product of the reduced elements, multiplied one by one in row-major order in the input type
    (float32 rounding after every product; integers wrap); on quantized int8 / int16, the rescaled
    product of LiteRT's ``QuantizedReduceProd`` (:func:`.reduce.quantized_prod`)."""

    name = "REDUCE_PROD"

    def prepare(self, inputs, outputs, options):
        x, axis = c.count(self.name, inputs, outputs, 2, names=("input", "axis"))
        _index_tensor(self.name, axis, "axis", ("int32",))
        if x.dtype.name in ("int8", "int16") and x.params is not None:
            return prepare_quantized_prod(self.name, x, axis, outputs[0], options)
        c.require_type(self.name, [("input", x)], ("float", "int32", "int64"), error=UnsupportedError)
        keep = c.option(options, "keep_dims", False, kind=bool)
        return _Consts(c.constants(inputs), keep)

    def compute(self, p, arrays):
        if isinstance(p, ProdParams):
            return quantized_prod(p, arrays)
        x, a = _arr(arrays, p, 0), _arr(arrays, p, 1, "axis")
        axes = resolve_axes(self.name, a, x.ndim)
        kept = [d for d in range(x.ndim) if d not in axes]
        reduced = sorted(axes)
        n = int(np.prod([x.shape[d] for d in reduced], dtype=np.int64))
        moved = np.transpose(x, kept + reduced).reshape(-1, n) if x.size else \
            np.zeros((int(np.prod([x.shape[d] for d in kept], dtype=np.int64)), n), x.dtype)
        acc = np.ones(moved.shape[0], x.dtype)
        with np.errstate(all="ignore"):
            for k in range(n):
                acc = (acc * moved[:, k]).astype(x.dtype)
        shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape)) if p.extra else \
            tuple(x.shape[d] for d in kept)
        return [acc.reshape(shape)]


# ---------------------------------------------------------------------------------------------
# ARG_MIN (tflite/kernels/arg_min_max.cc): the first index of the smallest value

@register
class ArgMin(ArgMax):
    name = "ARG_MIN"

    def compute(self, p, arrays):
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, p.dtype)])
        a = p.axis
        if a is None:
            (t,) = c.check_arrays(self.name, arrays, [(1, p.axis_shape, p.axis_dtype)])
            a = self._axis(int(t.reshape(-1)[0]), x.shape)
        return [np.argmin(x, axis=a).astype(p.output_dtype)]


class XnnpackNeg(Neg):
    """NEG as LiteRT's XNNPACK delegate computes it on float32 (it takes no other type): ``0 - x``
    (measured on ai-edge-litert 2.3.0: +0.0 for both zeros, a NaN keeps its sign), where the builtin
    kernels flip the sign bit."""

    def compute(self, p, arrays):
        x = _arr(arrays, p, 0)
        with np.errstate(all="ignore"):
            return [(np.float32(0) - x).astype(np.float32)]
