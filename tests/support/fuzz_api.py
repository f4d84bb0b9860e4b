"""The public functions the API fuzzer (tests/test_fuzz_api.py) calls, each with a hypothesis recipe for
its arguments and, where a runtime is the oracle, how to run the same call there.

A recipe draws a :class:`Case`: the quantspec call, a description (to reproduce a failure), and
optionally the oracle's call and the comparison.  Arguments are mostly valid (so that results are
compared), with every kind of wrong argument mixed in: wrong dtypes, shapes, ranges, axes, types of
attribute, ``out=`` arrays of the wrong kind; arrays in every layout (:data:`fuzz_support.LAYOUTS`),
with special values.  Huge broadcast views (2^31 .. 2^58 elements) run in a subprocess with a time
limit (:func:`fuzz_support.isolated`).

**Adding a function**: write a recipe ``def my_function(draw) -> Case`` and add it to
:data:`TARGETS` (name -> (recipe, weight)); weight scales its example count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

import fuzz_support as F
from quantspec._semantics.arrays import native
from quantspec.dtypes import qtype


@dataclass
class Case:
    call: Callable[[], Any]
    what: str
    oracle: Callable[[], Any] | None = None          # the runtime's answer (raises where it refuses)
    same: Callable[[Any, Any], bool] | None = None   # oracle's value vs quantspec's
    refusals_match: bool = False                     # quantspec must refuse exactly where the oracle does
    isolate: bool = False                            # run in a subprocess with a time limit
    check: Callable[[Any], None] | None = None       # extra property of a normal return
    notes: dict = field(default_factory=dict)


def _rare(draw, p: float = 0.1) -> bool:
    return F.chance(draw, p)


def _pick(draw, options, rare=(), p: float = 0.08):
    """One of ``options``, or (with probability ``p``) one of the ``rare`` (usually invalid) ones."""
    if rare and _rare(draw, p):
        return draw(st.sampled_from(list(rare)))
    return draw(st.sampled_from(list(options)))


def _rng(draw) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))


def _short(v: Any) -> str:
    if isinstance(v, np.ndarray):
        head = v.reshape(-1)[:6].tolist() if v.size else []
        return (f"array(dtype={v.dtype}, shape={v.shape}, strides={v.strides}, writeable={v.flags.writeable}, "
                f"head={head})")
    return repr(v)[:120]


def _describe(name: str, *args, **kwargs) -> str:
    parts = [_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def _huge(draw, dtype) -> np.ndarray:
    # beyond any machine's memory (smaller views, 2^31 say, are legitimately computed where they fit)
    return F.huge_view(dtype, draw(st.sampled_from([42, 46, 50, 58])), 1, draw(st.integers(1, 3)))


def _same_array(want, got) -> bool:
    want, got = np.asarray(want), np.asarray(got)
    return want.dtype == got.dtype and want.shape == got.shape and want.tobytes() == got.tobytes()


# ==================================================================================================
# ONNX QuantizeLinear / DequantizeLinear
# ==================================================================================================

Q_OUT = ("uint8", "int8", "uint16", "int16", "uint4", "int4", "uint2", "int2", "float8e4m3fn", "float8e4m3fnuz",
         "float8e5m2", "float8e5m2fnuz", "float4e2m1", "float6e2m3", "float6e3m2")
DQ_X = Q_OUT + ("int32",)
OPSETS = (None, 28, 25, 24, 23, 21, 19, 13, 10)


def _onnx_param_shape(draw, shape, granularity, axis, block):
    """(scale shape, axis, block_size) for a granularity, sometimes wrong."""
    r = len(shape)
    if granularity == "tensor" or r == 0:
        return draw(st.sampled_from([(), (), (1,)])), axis, 0
    a = axis % r
    if granularity == "axis":
        n = shape[a] if not _rare(draw, 0.1) else draw(st.integers(0, 7))
        return (n,), axis, 0
    blocks = -(-shape[a] // block) if shape[a] and isinstance(block, int) and 0 < block < 2 ** 31 else 1
    p = list(shape)
    p[a] = blocks if not _rare(draw, 0.1) else draw(st.integers(0, 7))
    return tuple(p), axis, block


def _onnx_scales(rng, shape, t: str, draw) -> np.ndarray:
    mag = 10.0 ** rng.uniform(-3, 2, shape)
    v = mag
    if _rare(draw, 0.15):   # zeros, negatives, infinities, NaN, subnormals
        special = np.array([0.0, -0.5, np.inf, np.nan, 1e-40, 1e30, 65504.0, 2.0 ** -20], np.float64)
        pick = rng.random(shape) < 0.5
        v = np.where(pick, special[rng.integers(0, special.size, shape)], mag)
    with np.errstate(all="ignore"):
        if t == "float8e8m0":
            return np.asarray(v, np.float32).astype(ml_dtypes.float8_e8m0fnu)
        if t == "int32":
            return np.asarray(np.clip(np.nan_to_num(v, posinf=100), 1, 100), np.int32)
        return np.asarray(v, np.float32).astype(qtype(t).dtype)


def _codes(rng, t: str, shape) -> np.ndarray:
    q = qtype(t)
    n = int(np.prod(shape, dtype=np.int64))
    if q.is_int:
        v = rng.integers(int(q.qmin), int(q.qmax) + 1, n, dtype=np.int64)
        return v.astype(q.storage).astype(q.dtype).reshape(shape)
    return rng.integers(0, 1 << q.bits, n, dtype=np.uint16).astype(np.uint8).view(q.dtype).reshape(shape)


def _zero_point(draw, rng, t: str, shape, zero: bool = False):
    q = qtype(t)
    if zero or (q.is_float and not _rare(draw, 0.2)):
        return np.zeros(shape, q.dtype)
    return _codes(rng, t, shape)


def _as_attr_type(draw, t: str):
    """An ONNX type given as a name, a TensorProto number or a dtype (all accepted)."""
    q = qtype(t)
    return draw(st.sampled_from([q.name, q.onnx, q.dtype]))


def _onnx_common(draw, kind: str):
    compat = _pick(draw, ("spec", "reference", "onnxruntime"), ("SPEC", None, 1))
    opset = _pick(draw, (None,) * 6 + OPSETS, (7, 30, "25", 25.0, True))   # mostly the newest: fewer refusals
    r = draw(st.integers(0, 3))
    shape = tuple(draw(st.integers(0 if _rare(draw, 0.15) else 1, 6)) for _ in range(r))
    granularity = draw(st.sampled_from(["tensor", "tensor", "axis", "block"]))
    axis = draw(st.integers(-r, r - 1)) if r else 1
    if _rare(draw, 0.08):
        axis = _pick(draw, (r + 1, -r - 2, 1.0, None, True, "0"))
    block = draw(st.sampled_from([1, 2, 3, 4]))
    if _rare(draw, 0.06):
        block = draw(st.sampled_from([-1, 0, 2 ** 62, 1.5]))
    return compat, opset, shape, granularity, axis, block


def _ort_compatible(*arrays) -> bool:
    return all(a is None or isinstance(a, np.ndarray) for a in arrays)


def _c(a) -> np.ndarray:
    """A C-ordered native-byte-order copy (0-d stays 0-d, unlike np.ascontiguousarray)."""
    return np.array(native(np.asarray(a)), order="C", copy=True)


def _for_oracle(a):
    return None if a is None else _c(a)


def _model_attrs(kind: str, version: int, attrs: dict) -> dict:
    """The attributes a one-node model carries: those of the operator version (quantspec accepts
    only the default for the others), with types as ONNX stores them."""
    from quantspec.onnx import opsets

    row = opsets.row(version)
    allowed = row.q_attrs if kind == "q" else row.dq_attrs
    out = {}
    for k, v in attrs.items():
        if k not in allowed or v is None:
            continue
        if k in ("output_dtype", "precision"):
            v = qtype(v).onnx
        elif k == "saturate":
            v = int(bool(v))
        out[k] = int(v)
    return out


def _representable(opset, axis, block, extra=()) -> bool:
    """Whether a one-node model can carry these attributes (an oracle call makes sense)."""
    ok_int = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (axis, block, *extra))
    return ok_int and (opset is None or (isinstance(opset, int) and not isinstance(opset, bool) and opset in OPSETS))


def onnx_quantize(draw) -> Case:
    import onnx_oracles
    import quantspec.onnx as O

    compat, opset, shape, granularity, axis, block = _onnx_common(draw, "q")
    rng = _rng(draw)
    xt = _pick(draw, ("float32", "float16", "bfloat16", "int32"), ("float64", "int8", "python", "list"))
    out_t = draw(st.sampled_from(Q_OUT))
    st_name = _pick(draw, ("float", "float", "float16", "bfloat16"), ("int32", "float8e8m0"))
    sshape, axis_, block_ = _onnx_param_shape(draw, shape, granularity, axis if isinstance(axis, int) else 0, block)
    scale = _onnx_scales(rng, sshape, st_name, draw)
    with F.quiet():
        typical = float(np.nanmedian(np.abs(np.asarray(scale, np.float32)))) if scale.size else 1.0
    if xt in ("python", "list"):
        x = F.values(rng, shape, np.float32, typical).tolist() if xt == "list" else float(rng.normal())
    elif xt == "int32":
        x = rng.integers(-2 ** 31, 2 ** 31, shape, dtype=np.int64).astype(np.int32) if _rare(draw, 0.3) else \
            rng.integers(-300, 300, shape).astype(np.int32)
        x = F.layout(x, draw(st.sampled_from(F.LAYOUTS)))
    else:
        dt = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float64": np.float64,
              "int8": np.int8}[xt]
        x = F.layout(F.values(rng, shape, dt, typical), draw(st.sampled_from(F.LAYOUTS)))
    zp = None
    if draw(st.booleans()):
        zshape = sshape if not _rare(draw, 0.1) else draw(st.sampled_from([(), (2,), (1, 1)]))
        zp = _zero_point(draw, rng, out_t, zshape)
        if _rare(draw, 0.1):
            zp = F.layout(zp, draw(st.sampled_from(F.LAYOUTS)))
    output_dtype = None
    if zp is None or _rare(draw, 0.2):
        output_dtype = _as_attr_type(draw, out_t) if not _rare(draw, 0.1) else draw(
            st.sampled_from(["float", "int64", "nonsense", 99, 0]))
    saturate = _pick(draw, (True, False), (0, 1, 2, "yes"))
    precision = None if not _rare(draw, 0.25) else _pick(draw, ("float", "float16", "bfloat16"), ("int8", 99))
    kw = dict(axis=axis_ if isinstance(axis, int) else axis, block_size=block_, output_dtype=output_dtype,
              saturate=saturate, precision=precision, opset=opset, compat=compat)
    out = None
    if _rare(draw, 0.1):
        zp_t = zp.dtype.newbyteorder("=") if zp is not None else "uint8"      # a big-endian layout's type
        res_t = qtype(output_dtype if output_dtype is not None and zp is None else zp_t) \
            if not isinstance(output_dtype, (str, int)) or \
            output_dtype in Q_OUT else qtype("uint8")
        out = np.empty(shape if not _rare(draw, 0.3) else shape + (1,), res_t.dtype)
        if _rare(draw, 0.2):
            out = np.empty(shape, np.float32)
    if _rare(draw, 0.03):
        huge = _huge(draw, np.float32)
        return Case(lambda: O.quantize_linear(huge, np.float32(0.1), None, **{**kw, "axis": 1, "block_size": 0}),
                    _describe("onnx.quantize_linear", huge, **kw), isolate=True)
    what = _describe("onnx.quantize_linear", x, scale, zp, out=out, **kw)
    call = lambda: O.quantize_linear(x, scale, zp, out=out, **kw)  # noqa: E731
    oracle, refusals = None, False
    if (compat in ("reference", "onnxruntime") and isinstance(x, np.ndarray) and xt not in ("float64", "int8")
            and _representable(opset, kw["axis"], block_) and out is None
            and (isinstance(saturate, bool) or saturate in (0, 1))
            and (output_dtype is None or (isinstance(output_dtype, (str, int, np.dtype)) and _known(output_dtype)))
            and (precision is None or _known(precision))):
        version = opset or (28 if compat == "reference" else 25)
        attrs = _model_attrs("q", version, dict(axis=kw["axis"], block_size=block_, saturate=saturate,
                                                output_dtype=output_dtype, precision=precision))
        xs, ss, zs = _for_oracle(x), _for_oracle(scale), _for_oracle(zp)
        if compat == "reference":
            oracle = lambda: _reference("QuantizeLinear", version, xs, ss, zs, **attrs)  # noqa: E731
            refusals = True
        else:
            res = zs.dtype if zs is not None else (qtype(output_dtype).dtype if output_dtype is not None else np.uint8)
            oracle = lambda: _ort("QuantizeLinear", version, xs, ss, zs, out_type=qtype(res).name, **attrs)  # noqa: E731
    return Case(call, what, oracle, _same_array, refusals)


class OracleCannot(Exception):
    """The oracle could not compute the call for want of memory (onnx.reference materialises a
    repeated scale of ``block_size`` copies, whose size can even overflow int64): no answer, and no
    refusal, to compare with."""


def _reference(op, version, x, s, zp, **attrs):
    """onnx.reference's answer, as an outcome to compare: its own ``assert`` on its inputs is its
    refusal (not a failure of this test), running out of memory is :class:`OracleCannot`, and a result
    of another shape than ``x`` is a refusal too (:func:`_same_shape`)."""
    import onnx_oracles

    try:
        y = onnx_oracles.reference(op, version, x, s, zp, **attrs)
    except AssertionError as e:
        raise RuntimeError(f"onnx.reference fails an assertion of its own: {e!r}") from None
    except MemoryError:
        raise OracleCannot("onnx.reference ran out of memory") from None
    except ValueError as e:
        # numpy's size limits on the repeated scale: too big, or a size that overflows int64 (a block
        # of 2^62 repeated twice): the reference cannot compute it, which is no answer about the op
        if ("array is too big" in str(e) or "Maximum allowed size exceeded" in str(e)
                or "negative dimensions are not allowed" in str(e)):
            raise OracleCannot(f"onnx.reference: {e}") from None
        raise
    return _same_shape(y, x)


def _same_shape(y, x):
    """onnx.reference's result, where it has the input's shape (the operator's output is x's shape).
    With a scale or zero point that broadcasts against x into another shape (a scalar scale beside a
    zero point of two values, an empty scale) onnx.reference returns numpy's broadcast of them; that is
    no QuantizeLinear / DequantizeLinear output, and quantspec's reference mode refuses such
    parameters: counted as a refusal of the oracle too."""
    if np.shape(y) != np.shape(x):
        raise ValueError(f"onnx.reference's output has shape {np.shape(y)}, the input {np.shape(x)}")
    return y


def _known(t) -> bool:
    try:
        qtype(t)
        return True
    except Exception:  # noqa: BLE001
        return False


def _ort(op, version, x, s, zp, out_type, **attrs):
    """onnxruntime through the test helper, its session cache kept small (a long run builds many models)."""
    import onnx_oracles

    if onnx_oracles._ort_session.cache_info().currsize > 64:
        onnx_oracles._ort_session.cache_clear()
    return onnx_oracles.ort(op, version, x, s, zp, out_type=out_type, **attrs)


def onnx_dequantize(draw) -> Case:
    import onnx_oracles
    import quantspec.onnx as O

    compat, opset, shape, granularity, axis, block = _onnx_common(draw, "dq")
    rng = _rng(draw)
    xt = _pick(draw, DQ_X, ("float32", "list", "int64"))
    st_name = _pick(draw, ("float", "float", "float16", "bfloat16", "float8e8m0"), ("int32",))
    sshape, axis_, block_ = _onnx_param_shape(draw, shape, granularity, axis if isinstance(axis, int) else 0, block)
    scale = _onnx_scales(rng, sshape, st_name, draw)
    if xt == "list":
        x = rng.integers(-5, 5, shape).tolist()
    elif xt in ("float32", "int64"):
        x = rng.integers(-5, 5, shape).astype(xt)
    else:
        x = F.layout(_codes(rng, xt, shape), draw(st.sampled_from(F.LAYOUTS)))
    zp = None
    if draw(st.booleans()) and xt not in ("list", "float32", "int64"):
        zshape = sshape if not _rare(draw, 0.1) else draw(st.sampled_from([(), (2,), (1, 1), (0,)]))
        zp = _zero_point(draw, rng, xt, zshape, zero=qtype(xt).is_float and not _rare(draw, 0.3))
    output_dtype = None if not _rare(draw, 0.3) else _pick(draw, ("float", "float16", "bfloat16"), ("int8", 5))
    kw = dict(axis=axis_ if isinstance(axis, int) else axis, block_size=block_, output_dtype=output_dtype,
              opset=opset, compat=compat)
    out = None
    if _rare(draw, 0.1):
        out = np.empty(shape, draw(st.sampled_from([np.float32, np.float16, np.float64])))
    if _rare(draw, 0.03):
        huge = _huge(draw, np.int8)
        return Case(lambda: O.dequantize_linear(huge, np.float32(0.1), **{**kw, "axis": 1, "block_size": 0}),
                    _describe("onnx.dequantize_linear", huge, **kw), isolate=True)
    what = _describe("onnx.dequantize_linear", x, scale, zp, out=out, **kw)
    call = lambda: O.dequantize_linear(x, scale, zp, out=out, **kw)  # noqa: E731
    oracle, refusals = None, False
    version = opset or (28 if compat == "reference" else 25)
    if (compat in ("reference", "onnxruntime") and isinstance(x, np.ndarray) and xt in DQ_X
            and _representable(opset, kw["axis"], block_) and out is None
            and (output_dtype is None or _known(output_dtype))
            and not (compat == "reference" and version < 19)):   # documented: reference mode computes there
        attrs = _model_attrs("dq", version, dict(axis=kw["axis"], block_size=block_, output_dtype=output_dtype))
        xs, ss, zs = _for_oracle(x), _for_oracle(scale), _for_oracle(zp)
        if compat == "reference":
            oracle = lambda: _reference("DequantizeLinear", version, xs, ss, zs, **attrs)  # noqa: E731
            refusals = True
        else:
            res = qtype(output_dtype).name if output_dtype is not None else qtype(scale.dtype).name
            oracle = lambda: _ort("DequantizeLinear", version, xs, ss, zs, out_type=res, **attrs)  # noqa: E731
    return Case(call, what, oracle, _same_array, refusals)


def onnx_pack(draw) -> Case:
    import quantspec.onnx as O

    rng = _rng(draw)
    t = _pick(draw, Q_OUT + ("int32", "float16", "bfloat16", "float8e8m0"), ("float64", "list", "bool"))
    shape = draw(F.shapes(max_rank=3, max_side=7))
    if t == "list":
        a = [1, 2, 3]
    elif t in ("float64", "bool"):
        a = np.zeros(shape, t)
    else:
        a = F.layout(_codes(rng, t, shape) if qtype(t).bits <= 8 else F.values(rng, shape, qtype(t).dtype),
                     draw(st.sampled_from(F.LAYOUTS)))
    if _rare(draw, 0.03):
        huge = _huge(draw, np.int8)
        return Case(lambda: O.pack(huge), _describe("onnx.pack", huge), isolate=True)

    def oracle():
        from onnx import numpy_helper
        return numpy_helper.from_array(_c(a)).raw_data

    def check(packed):      # the inverse gives the array back
        back = O.unpack(packed, np.asarray(a).dtype.newbyteorder("="), np.shape(a))
        assert back.tobytes() == _c(a).tobytes()

    ok = isinstance(a, np.ndarray) and _known(a.dtype.newbyteorder("=")) and qtype(a.dtype.newbyteorder("=")).onnx
    return Case(lambda: O.pack(a), _describe("onnx.pack", a), oracle if ok and t not in ("float6e2m3", "float6e3m2")
                else None, lambda w, g: bytes(w) == bytes(g), False, check=check if ok else None)


def onnx_unpack(draw) -> Case:
    import quantspec.onnx as O

    t = _pick(draw, Q_OUT + ("int32", "float16"), ("float64", "nonsense", 3.5))
    shape = draw(F.shapes(max_rank=3, max_side=7))
    if _rare(draw, 0.1):
        shape = draw(st.sampled_from([(-1,), (2 ** 40, 2 ** 40), (1.5,), "3", None]))
    n = draw(st.integers(0, 40))
    data = bytes(draw(st.binary(min_size=n, max_size=n)))
    if _known(t) and isinstance(shape, tuple) and all(isinstance(d, int) and d >= 0 for d in shape) \
            and not _rare(draw, 0.2):
        q = qtype(t)
        count = int(np.prod(shape, dtype=np.int64))
        need = (count * q.bits + 7) // 8 if q.is_packed else count * q.dtype.itemsize
        if need < 1 << 20:
            data = bytes(np.random.default_rng(n).integers(0, 256, need, dtype=np.uint8))
    return Case(lambda: O.unpack(data, t, shape), _describe("onnx.unpack", data[:16], t, shape))


# ==================================================================================================
# TensorFlow
# ==================================================================================================

TF_TYPES = ("qint8", "quint8", "qint16", "quint16", "qint32")


def _tf_range_value(draw, rng, lo_hi: tuple[float, float], per_axis: int | None):
    """A range argument as a user passes it: a Python float, np.float32, np.float64 scalar, 0-d array,
    or (per-axis) a float32 array; sometimes of the wrong shape or type."""
    how = _pick(draw, ("python", "f32", "f64", "0d") if per_axis is None else ("array", "list"),
                ("f64-array", "int", "string", "none", "2d", "bool"))
    lo, hi = lo_hi
    if per_axis is not None and how in ("array", "list"):
        with np.errstate(all="ignore"):
            v = np.linspace(lo, hi, per_axis).astype(np.float32) + rng.uniform(-0.1, 0.1, per_axis).astype(np.float32)
        return v.tolist() if how == "list" else v
    v = float(lo) if lo == hi or not np.isfinite(hi - lo) else float(rng.uniform(lo, hi))
    make = {"python": lambda: v, "f32": lambda: np.float32(v), "f64": lambda: np.float64(v),
            "0d": lambda: np.array(v, np.float32), "f64-array": lambda: np.array([v, v]),
            "int": lambda: int(v) if np.isfinite(v) else 3, "string": lambda: str(v), "none": lambda: None,
            "2d": lambda: np.full((1, 1), v, np.float32), "bool": lambda: True}
    with np.errstate(all="ignore"):
        return make.get(how, lambda: v)()


def _tf_ranges(draw, rng, per_axis):
    pair = _pick(draw, ((-1.0, 1.0), (0.0, 6.0), (-10.0, 9.0), (-128.0, 127.0), (1.0, 5.0), (-0.001, 0.001),
                        (-6.0, 0.0), (-1e-3, 1e-3)),
                 ((0.0, 0.0), (3.0, -3.0), (float("nan"), 1.0), (-float("inf"), 1.0), (-1e30, 1e30), (-3e38, 3e38),
                  (-1e-39, 1e-39)), p=0.15)
    lo = _tf_range_value(draw, rng, (pair[0], pair[0]), per_axis)
    hi = _tf_range_value(draw, rng, (pair[1], pair[1]), per_axis)
    return lo, hi


def _tf_x(draw, rng, shape, lo_hi=(-3.0, 3.0)):
    how = _pick(draw, ("f32",) * 6, ("f64", "f16", "int8", "list", "python"))
    scale = max(abs(lo_hi[0]), abs(lo_hi[1]), 1e-3) / 127
    if how == "f32":
        return F.layout(F.values(rng, shape, np.float32, scale), draw(st.sampled_from(F.LAYOUTS)))
    if how == "list":
        return F.values(rng, shape, np.float32, scale).tolist()
    if how == "python":
        return float(rng.normal())
    return F.values(rng, shape, {"f64": np.float64, "f16": np.float16, "int8": np.int8}[how], scale)


def _canonical_range(v, dtype=np.float32):
    """How TensorFlow receives a range argument quantspec accepted: rounded to the kernel's type (the
    float64 rounding is the one test_tf_conformance checks against TensorFlow)."""
    with np.errstate(over="ignore"):
        return np.asarray(np.asarray(v, np.float64), np.float64).astype(dtype)


def _tf_case(draw, op: str) -> Case:
    import tf_oracle

    rng = _rng(draw)
    r = draw(st.integers(0, 3))
    shape = tuple(draw(st.integers(0 if _rare(draw, 0.15) else 1, 6)) for _ in range(r))
    attrs: dict = {}
    axis = None
    if r and draw(st.booleans()):
        axis = draw(st.integers(-r, r - 1))
    if _rare(draw, 0.05):
        axis = _pick(draw, (r, -r - 1, 1.0, "0"))
    channels = shape[axis % r] if isinstance(axis, int) and not isinstance(axis, bool) and r and -r <= axis < r \
        else None
    per_axis = channels if op in ("quantize", "dequantize", "qdq") and channels is not None else None
    if op == "fq_channel":
        per_axis = shape[-1] if r else 1
    lo, hi = _tf_ranges(draw, rng, per_axis)
    if op == "quantize":
        x = _tf_x(draw, rng, shape)
        attrs = dict(T=_pick(draw, TF_TYPES, ("int8", "float16", "qint4")),
                     mode=_pick(draw, ("MIN_COMBINED", "MIN_FIRST", "SCALED"), ("min_combined", "MAX_FIRST")),
                     round_mode=_pick(draw, ("HALF_AWAY_FROM_ZERO", "HALF_TO_EVEN"), ("HALF_UP",)),
                     narrow_range=_pick(draw, (False, True), (1, "yes")), axis=axis)
        if _rare(draw, 0.2):
            attrs["ensure_minimum_range"] = _pick(draw, (0.0, 0.01, 1e-6, 1.0), (-1.0, float("nan"), 2 ** 200, "x"))
    elif op == "dequantize":
        T = _pick(draw, TF_TYPES, ("int8",))
        st_t = tf_oracle.STORAGE.get(T, np.int8)
        x = F.layout(F.int_values(rng, int(np.prod(shape, dtype=np.int64)), st_t).reshape(shape),
                     draw(st.sampled_from(F.LAYOUTS)))
        attrs = dict(T=T, mode=_pick(draw, ("MIN_COMBINED", "MIN_FIRST", "SCALED"), ("X",)),
                     narrow_range=draw(st.booleans()), axis=axis,
                     dtype=_pick(draw, ("float32", "bfloat16"), ("float16", "float64")))
    elif op == "qdq":
        x = _tf_x(draw, rng, shape)
        version = draw(st.sampled_from([2, 3, 4]))
        attrs = dict(version=version, signed_input=draw(st.booleans()),
                     num_bits=_pick(draw, (8, 4, 16, 1, 2, 31), (0, 64, 8.0, np.int64(8))),
                     range_given=draw(st.booleans()) if version != 3 else _pick(draw, (True,), (False,)),
                     round_mode=_pick(draw, ("HALF_TO_EVEN", "HALF_UP"), ("UP",)),
                     narrow_range=draw(st.booleans()), axis=axis)
    else:
        x = _tf_x(draw, rng, shape)
        attrs = dict(num_bits=_pick(draw, (8, 2, 16, 4), (1, 17, 8.0)), narrow_range=draw(st.booleans()))
    case = tf_oracle.Case(op, x, lo, hi, attrs)
    what = f"tf {op}: x={_short(x)} min={_short(lo)} max={_short(hi)} {attrs}"
    if _rare(draw, 0.03) and op != "dequantize":
        huge = _huge(draw, np.float32)
        hc = tf_oracle.Case(op, huge, -1.0, 1.0, {**attrs, "axis": None} if "axis" in attrs else attrs)
        return Case(lambda: _tf_qs(hc, "eigen"), f"tf {op} huge {attrs}", isolate=True)
    kernel = "eigen" if not _rare(draw, 0.15) else _pick(draw, ("onednn",), ("EIGEN", "mkl"))

    out = None
    if op in ("quantize", "dequantize") and _rare(draw, 0.1):   # out=: right, wrong dtype, wrong shape, read-only
        right = np.dtype(tf_oracle.STORAGE.get(attrs.get("T"), np.int8)) if op == "quantize" else np.dtype(np.float32)
        out = _pick(draw, (np.empty(shape, right), np.empty(shape + (2,), right), np.empty(shape, np.float64),
                           F.layout(np.zeros(shape, right), "read-only"), [0]))

    def call():
        return _tf_qs(case, kernel, out)

    canonical = (isinstance(x, np.ndarray) and x.dtype == np.float32 if op != "dequantize" else
                 isinstance(x, np.ndarray) and x.dtype == tf_oracle.STORAGE.get(attrs["T"]))
    oracle = None
    if op == "qdq" and attrs.get("version") != 3 and attrs.get("range_given") and attrs.get("axis") is not None:
        # TensorFlow 2.21's V2/V4 fail per-axis with a given range; tf_oracle runs the per-tensor op per
        # slice instead, which refuses min > max in a slice, where the intended result (V3's, which
        # quantspec gives) computes it: compare only where every slice has min <= max
        with F.quiet():
            try:
                ordered = bool(np.all(np.asarray(lo, np.float64) <= np.asarray(hi, np.float64)))
            except Exception:  # noqa: BLE001 - a refused argument: no comparison anyway
                ordered = False
        canonical = canonical and ordered
    if canonical and kernel == "eigen":
        def oracle():
            tf = _tensorflow()
            dt = np.float32
            # quantspec matches string attributes case-insensitively (documented): TensorFlow gets them
            # in its own spelling
            # (and flags given as 0 / 1)
            # (and flags given as 0 / 1, and T's other spellings)
            from quantspec.tf import spec as tf_spec
            canon = {k: v.strip().upper() if isinstance(v, str) and k in ("mode", "round_mode") else
                     bool(v) if k in ("narrow_range", "signed_input", "range_given") else
                     tf_spec.tf_type(v).name if k == "T" else v
                     for k, v in attrs.items()}
            c = tf_oracle.Case(op, _c(x), _canonical_range(lo, dt), _canonical_range(hi, dt), canon)
            want = tf_oracle._run_tf(tf, c)
            return c, want
    return Case(call, what, oracle, _tf_same, False, notes={"case": case})


def _tf_qs(c, kernel: str, out=None):
    """quantspec on a tf_oracle case, every argument passed as drawn (tf_oracle's runner converts the
    FakeQuantWithMinMaxArgs range with float()), and ``out=`` for quantize / dequantize."""
    import quantspec.tf as qt
    import tf_oracle

    if c.op == "fq_args":
        return (qt.fake_quant_with_min_max_args(c.x, min=c.a, max=c.b, **c.attrs),)
    if out is not None and c.op == "quantize":
        r = qt.quantize(c.x, c.a, c.b, kernel=kernel, out=out, **c.attrs)
        assert r[0] is out
        return r
    if out is not None and c.op == "dequantize":
        r = qt.dequantize(c.x, c.a, c.b, kernel=kernel, out=out, **c.attrs)
        assert r is out
        return (r,)
    return tf_oracle._run_qs(c, kernel)


_TF = []


def _tensorflow():
    if not _TF:
        import refs
        _TF.append(refs.require("tensorflow"))
    return _TF[0]


def _tf_same(want, got) -> bool:
    import tf_oracle

    c, w = want
    return tf_oracle.compare(c, w, got) is None


def tf_quantize(draw) -> Case:
    return _tf_case(draw, "quantize")


def tf_dequantize(draw) -> Case:
    return _tf_case(draw, "dequantize")


def tf_quantize_and_dequantize(draw) -> Case:
    return _tf_case(draw, "qdq")


def tf_fake_quant_args(draw) -> Case:
    return _tf_case(draw, "fq_args")


def tf_fake_quant_vars(draw) -> Case:
    return _tf_case(draw, "fq_vars")


def tf_fake_quant_per_channel(draw) -> Case:
    return _tf_case(draw, "fq_channel")


# ==================================================================================================
# LiteRT
# ==================================================================================================

def _litert_params(draw, rng, shape, *, zero=False, int8=True):
    """QuantParams (sometimes per-axis, sometimes unfit for the shape), or a wrong argument."""
    import quantspec.litert as L

    if _rare(draw, 0.05):
        return _pick(draw, (None, 0.5, (0.1, 0), "params"))
    r = len(shape)
    per_axis = r and draw(st.booleans())
    if per_axis:
        d = draw(st.integers(0, r - 1)) if not _rare(draw, 0.1) else r + 1
        n = shape[d] if d < r and not _rare(draw, 0.1) else draw(st.integers(1, 5))
        n = max(n, 2) if d < r and shape[d] >= 2 else n
        scale = 10.0 ** rng.uniform(-4, 1, n)
        zp = np.zeros(n, np.int64) if zero else rng.integers(-128, 128, n) if int8 else rng.integers(-1000, 1000, n)
    else:
        d, n = 0, 1
        scale = float(10.0 ** rng.uniform(-4, 1))
        zp = 0 if zero else int(rng.integers(-128, 128) if int8 else rng.integers(-1000, 1000))
    if _rare(draw, 0.1):
        scale = _pick(draw, (0.0, -0.1, float("inf"), float("nan"), 1e-45, 1e39, 3.4e38))
    if _rare(draw, 0.05):
        zp = _pick(draw, (200, -129, 2 ** 40, 0.5, "0"))
    try:
        return L.QuantParams(scale, zp, d if n > 1 else 0)
    except Exception:  # noqa: BLE001 - a constructor refusal is fuzzed in quant_params
        return L.QuantParams(0.1, 0)


def _litert_x(draw, rng, shape, scale=0.05):
    how = _pick(draw, ("f32",) * 6, ("f64", "f16", "int8", "list", "bool"))
    if how == "f32":
        return F.layout(F.values(rng, shape, np.float32, scale), draw(st.sampled_from(F.LAYOUTS)))
    if how == "list":
        return F.values(rng, shape, np.float32, scale).tolist()
    if how == "bool":
        return np.zeros(shape, bool)
    return F.layout(F.values(rng, shape, {"f64": np.float64, "f16": np.float16, "int8": np.int8}[how], scale),
                    draw(st.sampled_from(F.LAYOUTS)))


def _shape(draw, max_rank=4):
    r = draw(st.integers(0, max_rank))
    return tuple(draw(st.integers(0 if _rare(draw, 0.1) else 1, 5)) for _ in range(r))


def _litert_oracle(op: str, x: np.ndarray, params, out_dtype: str):
    """Run a one-op QUANTIZE / DEQUANTIZE model in the LiteRT interpreter (BUILTIN_REF)."""
    from litert_build import T, build, run_ref

    scale = params.scale if params.per_axis else float(params.scale[0])
    zp = params.zero_point if params.per_axis else int(params.zero_point[0])
    qd = params.quantized_dimension
    if op == "QUANTIZE":
        model = build("QUANTIZE", [T(x.shape, "float32", name="x")], [T(x.shape, out_dtype, scale, zp, qd, name="y")])
    else:
        model = build("DEQUANTIZE", [T(x.shape, x.dtype.newbyteorder("=").name, scale, zp, qd, name="q")],
                      [T(x.shape, "float32", name="y")])
    (y,) = run_ref(model, [_c(x)])
    return y


def litert_quantize(draw) -> Case:
    import quantspec.litert as L

    rng = _rng(draw)
    shape = _shape(draw)
    p = _litert_params(draw, rng, shape)
    x = _litert_x(draw, rng, shape, float(p.scale[0]) if isinstance(p, L.QuantParams) else 0.05)
    out = None
    if _rare(draw, 0.1):
        out = _pick(draw, (np.empty(shape, np.int8), np.empty(shape + (1,), np.int8), np.empty(shape, np.uint8),
                           np.zeros(shape, np.int8)[::-1] if shape else np.zeros(shape, np.int8)))
    if _rare(draw, 0.03):
        huge = _huge(draw, np.float32)
        return Case(lambda: L.quantize(huge, L.QuantParams(0.1, 0)), "litert.quantize(huge)", isolate=True)
    oracle = None
    if (isinstance(x, np.ndarray) and x.dtype == np.float32 and isinstance(p, L.QuantParams) and out is None
            and len(shape) >= 1 and all(d > 0 for d in shape)):
        oracle = lambda: _litert_oracle("QUANTIZE", x, p, "int8")  # noqa: E731
    return Case(lambda: L.quantize(x, p, out=out), _describe("litert.quantize", x, p, out=out), oracle,
                _same_array, False)


def litert_dequantize(draw) -> Case:
    import quantspec.litert as L

    rng = _rng(draw)
    shape = _shape(draw)
    dt = _pick(draw, (np.int8, np.int8, np.uint8, np.int16, np.int32), (np.float32, np.int64, np.uint32, bool))
    p = _litert_params(draw, rng, shape, int8=dt in (np.int8, np.uint8))
    q = F.layout(F.int_values(rng, int(np.prod(shape, dtype=np.int64)), dt).reshape(shape)
                 if np.dtype(dt).kind in "iu" else np.zeros(shape, dt), draw(st.sampled_from(F.LAYOUTS)))
    out = None
    if _rare(draw, 0.1):
        out = _pick(draw, (np.empty(shape, np.float32), np.empty(shape, np.float64)))
    if _rare(draw, 0.03):
        huge = _huge(draw, np.int8)
        return Case(lambda: L.dequantize(huge, L.QuantParams(0.1, 0)), "litert.dequantize(huge)", isolate=True)
    oracle = None
    if (isinstance(p, L.QuantParams) and out is None and np.dtype(dt) in (np.dtype(np.int8), np.dtype(np.int16))
            and len(shape) >= 1 and all(d > 0 for d in shape)
            and (dt == np.int8 and p._zp_span[0] >= -128 and p._zp_span[1] <= 127 or dt == np.int16 and
                 p._zp_span == (0, 0))):
        oracle = lambda: _litert_oracle("DEQUANTIZE", q, p, "float32")  # noqa: E731
    return Case(lambda: L.dequantize(q, p, out=out), _describe("litert.dequantize", q, p, out=out), oracle,
                _same_array, False)


def litert_quantize_weights(draw) -> Case:
    import quantspec.litert as L

    rng = _rng(draw)
    shape = _shape(draw)
    w = _litert_x(draw, rng, shape)
    derived = draw(st.booleans())
    if derived and isinstance(w, np.ndarray) and w.dtype.kind == "f":
        axis = None if len(shape) == 0 or draw(st.booleans()) else draw(st.integers(0, len(shape) - 1))
        p = lambda: L.weight_params(w, axis)  # noqa: E731
    else:
        params = _litert_params(draw, rng, shape, zero=not _rare(draw, 0.1))
        p = lambda: params  # noqa: E731
    if _rare(draw, 0.03):
        huge = _huge(draw, np.float32)
        return Case(lambda: L.quantize_weights(huge, L.QuantParams(0.1, 0)), "litert.quantize_weights(huge)",
                    isolate=True)

    def check(q):
        assert q.dtype == np.int8 and q.shape == np.shape(w) and (q.size == 0 or np.abs(q.astype(int)).max() <= 127)

    return Case(lambda: L.quantize_weights(w, p()), _describe("litert.quantize_weights", w, derived=derived),
                check=check)


def litert_quantize_bias(draw) -> Case:
    import quantspec.litert as L

    rng = _rng(draw)
    shape = _shape(draw, 2)
    b = _litert_x(draw, rng, shape, 100.0)
    p = _litert_params(draw, rng, shape, zero=not _rare(draw, 0.1))
    if _rare(draw, 0.03):
        huge = _huge(draw, np.float32)
        return Case(lambda: L.quantize_bias(huge, L.QuantParams(0.1, 0)), "litert.quantize_bias(huge)", isolate=True)

    def check(q):
        assert q.dtype == np.int32 and q.shape == np.shape(b)

    return Case(lambda: L.quantize_bias(b, p), _describe("litert.quantize_bias", b, p), check=check)


def litert_weight_params(draw) -> Case:
    import quantspec.litert as L

    rng = _rng(draw)
    shape = _shape(draw)
    w = _litert_x(draw, rng, shape)
    axis = _pick(draw, (0, None, -1, len(shape) - 1), (len(shape), 1.0, "0", True, -len(shape) - 1))
    if _rare(draw, 0.05):    # a few channels (a broadcast view with 2^28 channels is legitimately slow)
        huge = np.broadcast_to(np.float32(0.5), (3, 2 ** draw(st.sampled_from([42, 50, 58]))))
        return Case(lambda: L.weight_params(huge, axis), f"litert.weight_params(huge, {axis!r})", isolate=True)

    def check(p):
        assert isinstance(p, L.QuantParams) and np.all(p.scale > 0) and np.all(p.zero_point == 0)

    return Case(lambda: L.weight_params(w, axis), _describe("litert.weight_params", w, axis=axis), check=check)


def litert_activation_params(draw) -> Case:
    import quantspec.litert as L

    rng = _rng(draw)
    specials = (0.0, -0.0, float("inf"), float("nan"), 1e-45, 3.4e38, 1e39, -1e-7, 1e-7)
    lo = _pick(draw, (float(-abs(rng.normal()) * 10 ** rng.uniform(-6, 3)),), specials + (np.float64(-0.5), "x"), 0.2)
    hi = _pick(draw, (float(abs(rng.normal()) * 10 ** rng.uniform(-6, 3)),), specials + (np.array([1.0]), None), 0.2)
    dtype = _pick(draw, ("int8",), ("uint8", "int16", "float"), 0.05)

    def check(p):
        assert isinstance(p, L.QuantParams) and -128 <= int(p.zero_point[0]) <= 127 and p.scale[0] > 0

    return Case(lambda: L.activation_params(lo, hi, dtype), _describe("litert.activation_params", lo, hi, dtype),
                check=check)


def litert_bias_params(draw) -> Case:
    import quantspec.litert as L

    rng = _rng(draw)
    shape = (draw(st.integers(1, 5)),)
    a = _litert_params(draw, rng, ())
    w = _litert_params(draw, rng, shape, zero=True)
    b = _litert_x(draw, rng, shape if not _rare(draw, 0.1) else (7,), 1000.0)
    fn = draw(st.sampled_from(["bias_params", "adjust_for_bias"]))
    if fn == "bias_params":
        return Case(lambda: L.bias_params(a, w), _describe("litert.bias_params", a, w))
    return Case(lambda: L.adjust_for_bias(a, w, b), _describe("litert.adjust_for_bias", a, w, b))


def litert_quant_params(draw) -> Case:
    import quantspec.litert as L

    rng = _rng(draw)
    scale = _pick(draw, (float(rng.uniform(1e-3, 1)), rng.uniform(1e-3, 1, draw(st.integers(1, 4))).astype(np.float32)),
                  (0.0, -1.0, [], [[0.1]], "0.1", True, None, [0.1, float("nan")], np.float64(1e39), 1e-50), 0.2)
    zp = _pick(draw, (0, int(rng.integers(-128, 128)), [0, 1, 2]),
               (0.5, 2 ** 63, -2 ** 63 - 1, np.uint64(2 ** 63), [[0]], "1", float("inf"), None), 0.2)
    qd = _pick(draw, (0, 1, 3), (-1, 1.0, True, "0"), 0.1)
    return Case(lambda: L.QuantParams(scale, zp, qd), _describe("litert.QuantParams", scale, zp, qd))


# -- fixedpoint: the scalar C++ models of tests/test_litert_fixedpoint.py are the oracle -----------

_I32 = (-(2 ** 31), 2 ** 31 - 1)


def _int_array(draw, rng, shape, lo=_I32[0], hi=_I32[1], dtype=np.int32):
    edges = np.array([lo, hi, 0, -1, 1, lo + 1, hi - 1], np.int64)
    edges = edges[(edges >= lo) & (edges <= hi)]
    n = int(np.prod(shape, dtype=np.int64))
    v = rng.integers(lo, hi + 1, n, dtype=np.int64)
    pick = rng.random(n) < 0.3
    v[pick] = edges[rng.integers(0, edges.size, n)][pick]
    a = v.astype(dtype).reshape(shape)
    return F.layout(a, draw(st.sampled_from(F.LAYOUTS)))


def _elementwise(model, *arrays):
    """The scalar model over broadcast arrays, as int64 (Python integers, exact)."""
    b = np.broadcast_arrays(*[np.asarray(a, np.int64) for a in arrays])
    shape = b[0].shape
    flat = [x.reshape(-1).tolist() for x in b]
    return np.array([model(*vals) for vals in zip(*flat)], np.int64).reshape(shape)


def fixedpoint_multiply(draw) -> Case:
    import test_litert_fixedpoint as M
    from quantspec.litert import fixedpoint as FP

    rng = _rng(draw)
    fn = draw(st.sampled_from(["mbqm", "mbqm_single", "mbqm_i64", "srdhm", "rdbpot", "half_sum", "sat_left",
                               "srmbpot", "clz"]))
    shape = draw(F.shapes(max_rank=2, max_side=5))
    x = _int_array(draw, rng, shape, *((-(2 ** 47), 2 ** 47 - 1) if fn == "mbqm_i64" else _I32),
                   dtype=np.int64 if fn == "mbqm_i64" else np.int32)
    pshape = draw(st.sampled_from([(), shape[-1:] if shape else (), (1,)]))
    m = _int_array(draw, rng, pshape, 0 if fn in ("mbqm_single", "mbqm_i64") else _I32[0], _I32[1])
    shift_lo, shift_hi = {"mbqm": (-31, 30), "mbqm_single": (-31, 30), "mbqm_i64": (-31, 7), "rdbpot": (0, 31),
                          "sat_left": (0, 31), "srmbpot": (-31, 31)}.get(fn, (0, 0))
    shift = rng.integers(shift_lo, shift_hi + 1, pshape)
    if _rare(draw, 0.1):      # out of range, wrong types, wrong shapes
        bad = _pick(draw, ("shift", "x", "m"))
        if bad == "shift":
            shift = _pick(draw, (99, -99, 1.5, np.array([1, 2, 3, 4, 5, 6, 7]), "1"))
        elif bad == "x":
            x = _pick(draw, (2 ** 40, np.array([1.5]), "x", [2 ** 70], np.zeros(7, np.int32), True))
        else:
            m = _pick(draw, (-1, 2 ** 31, 0.5, np.zeros((3, 3), np.int32)))
    if _rare(draw, 0.03):
        huge = F.huge_view(np.int32, draw(st.sampled_from([42, 50, 58])), 5)
        return Case(lambda: FP.multiply_by_quantized_multiplier(huge, 1 << 30, 1), "fixedpoint huge", isolate=True)
    scalar_shift = int(np.asarray(shift).reshape(-1)[0]) if np.size(shift) and np.asarray(shift).dtype.kind in "iu" \
        else 0
    calls = {
        "mbqm": (lambda: FP.multiply_by_quantized_multiplier(x, m, shift), lambda: _elementwise(M.mbqm, x, m, shift)),
        "mbqm_single": (lambda: FP.multiply_by_quantized_multiplier(x, m, shift, rounding="single"),
                        lambda: _elementwise(M.mbqm_single, x, m, shift)),
        "mbqm_i64": (lambda: FP.multiply_by_quantized_multiplier_int64(x, m, shift),
                     lambda: _elementwise(M.mbqm_i64, x, m, shift)),
        "srdhm": (lambda: FP.saturating_rounding_doubling_high_mul(x, m), lambda: _elementwise(M.srdhm, x, m)),
        "rdbpot": (lambda: FP.rounding_divide_by_pot(x, shift), lambda: _elementwise(M.rdbpot, x, shift)),
        "half_sum": (lambda: FP.rounding_half_sum(x, m), lambda: _elementwise(M.half_sum, x, m)),
        "sat_left": (lambda: FP.saturating_left_shift(x, scalar_shift),
                     lambda: _elementwise(lambda v: M.sat_left(v, scalar_shift), x)),
        "srmbpot": (lambda: FP.saturating_rounding_multiply_by_pot(x, scalar_shift),
                    lambda: _elementwise(lambda v: M.srmbpot(v, scalar_shift), x)),
        "clz": (lambda: FP.count_leading_zeros(x), lambda: _elementwise(M.clz, x)),
    }
    call, model = calls[fn]

    def same(want, got):
        got = np.asarray(got)
        return got.shape == want.shape and np.array_equal(got.astype(np.int64), want)

    return Case(call, _describe(f"fixedpoint.{fn}", x, m, shift), model, same, False)


def fixedpoint_functions(draw) -> Case:
    """The transcendental helpers and QuantizeMultiplier: the scalar models as oracle."""
    import test_litert_fixedpoint as M
    from quantspec.litert import fixedpoint as FP

    rng = _rng(draw)
    fn = draw(st.sampled_from(["exp_neg", "logistic", "tanh", "one_over", "one_minus", "rescale", "log",
                               "quantize_multiplier", "reciprocal", "inv_sqrt", "exp_quarter"]))
    shape = draw(F.shapes(max_rank=2, max_side=4))
    bits = _pick(draw, tuple(range(0, 30)), (31, 32, -1, 1.5, "3"))
    lo = {"exp_neg": _I32[0], "logistic": _I32[0], "tanh": _I32[0], "one_over": 0, "one_minus": 0, "rescale": _I32[0],
          "log": 1, "reciprocal": 1, "inv_sqrt": 1, "exp_quarter": -(2 ** 29)}.get(fn, 0)
    hi = {"exp_neg": 0, "exp_quarter": -1}.get(fn, _I32[1])
    x = _int_array(draw, rng, shape, lo, hi)
    if _rare(draw, 0.08):
        x = _pick(draw, (np.array([1.5]), 2 ** 40, "1", np.array([-5], np.int32)))
    bits2 = _pick(draw, tuple(range(0, 31)), (32, -1))
    real = _pick(draw, (float(10 ** rng.uniform(-12, 4)), float(rng.uniform(0, 1))),
                 (0.0, -1.0, float("inf"), float("nan"), 1e300, 5e-324), 0.15)

    def ok_bits(b, top=31):
        return isinstance(b, int) and 0 <= b <= top

    calls = {
        "exp_neg": (lambda: FP.exp_on_negative_values(x, bits),
                    ok_bits(bits, 29) and (lambda: _elementwise(lambda v: M.exp_neg(v, bits), x))),
        "logistic": (lambda: FP.logistic(x, bits),
                     ok_bits(bits, 29) and (lambda: _elementwise(lambda v: M.logistic_model(v, bits), x))),
        "tanh": (lambda: FP.tanh(x, bits), ok_bits(bits, 29) and (lambda: _elementwise(lambda v: M.tanh_model(v, bits), x))),
        "one_over": (lambda: FP.one_over_one_plus_x_for_x_in_0_1(x), lambda: _elementwise(M.one_over_one_plus, x)),
        "one_minus": (lambda: FP.one_minus_x_over_one_plus_x_for_x_in_0_1(x),
                      lambda: _elementwise(M.one_minus_over_one_plus, x)),
        "rescale": (lambda: FP.rescale(x, bits, bits2),
                    ok_bits(bits) and ok_bits(bits2) and (lambda: _elementwise(lambda v: M.rescale(v, bits, bits2), x))),
        "log": (lambda: FP.log_x_for_x_greater_than_or_equal_to_1(x, bits, bits2), None),
        "quantize_multiplier": (lambda: FP.quantize_multiplier(real),
                                lambda: M.quantize_multiplier_model(real)),
        "reciprocal": (lambda: FP.get_reciprocal(x, bits), None),
        "inv_sqrt": (lambda: FP.get_inv_sqrt_quantized_multiplier_exp(x, -1 if draw(st.booleans()) else 1), None),
        "exp_quarter": (lambda: FP.exp_on_interval_between_negative_one_quarter_and_0_excl(x),
                        lambda: _elementwise(M.exp_quarter, x)),
    }
    call, model = calls[fn]

    def same(want, got):
        if isinstance(want, tuple):
            return tuple(int(v) for v in want) == tuple(int(np.asarray(g)) for g in got)
        got = np.asarray(got)
        return got.shape == want.shape and np.array_equal(got.astype(np.int64), want)

    return Case(call, _describe(f"fixedpoint.{fn}", x, bits=bits, bits2=bits2, real=real), model or None, same, False)


#: name -> (recipe, weight): the weight multiplies QUANTSPEC_FUZZ_EXAMPLES for that function
TARGETS: dict[str, tuple[Callable, float]] = {
    "onnx.quantize_linear": (onnx_quantize, 4.0),
    "onnx.dequantize_linear": (onnx_dequantize, 3.0),
    "onnx.pack": (onnx_pack, 1.0),
    "onnx.unpack": (onnx_unpack, 1.0),
    "tf.quantize": (tf_quantize, 2.0),
    "tf.dequantize": (tf_dequantize, 1.5),
    "tf.quantize_and_dequantize_v2/v3/v4": (tf_quantize_and_dequantize, 2.0),
    "tf.fake_quant_with_min_max_args": (tf_fake_quant_args, 1.0),
    "tf.fake_quant_with_min_max_vars": (tf_fake_quant_vars, 1.0),
    "tf.fake_quant_with_min_max_vars_per_channel": (tf_fake_quant_per_channel, 1.0),
    "litert.quantize": (litert_quantize, 1.5),
    "litert.dequantize": (litert_dequantize, 1.5),
    "litert.quantize_weights": (litert_quantize_weights, 1.0),
    "litert.quantize_bias": (litert_quantize_bias, 1.0),
    "litert.weight_params": (litert_weight_params, 1.0),
    "litert.activation_params": (litert_activation_params, 1.0),
    "litert.bias_params/adjust_for_bias": (litert_bias_params, 1.0),
    "litert.QuantParams": (litert_quant_params, 1.0),
    "litert.fixedpoint (multiplications)": (fixedpoint_multiply, 1.5),
    "litert.fixedpoint (functions)": (fixedpoint_functions, 1.5),
}

# the translation between specs (quantspec.equiv) and the calibrators have their own recipe modules
import fuzz_equiv  # noqa: E402 - they use Case and the helpers above

TARGETS.update(fuzz_equiv.TARGETS)
import fuzz_calibrate  # noqa: E402

TARGETS.update(fuzz_calibrate.TARGETS)
