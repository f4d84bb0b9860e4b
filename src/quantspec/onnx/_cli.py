"""``quantspec quantize|dequantize --spec onnx``: every attribute of the operators as a flag."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from .._semantics.arrays import native
from .._tensorfiles.slabs import Job, cutter, rows_of
from .._tensorfiles.tensorio import from_storage, read_tensors
from ..dtypes import qtype
from ..errors import DTypeError, InvalidArgumentError
from . import dequantize_linear, quantize_linear
from .plan import COMPAT_MODES, ORT_VERSIONS, plan_dequantize, plan_quantize

__all__ = ["add_arguments", "jobs", "parse_values", "for_tensor"]

_VALUES_HELP = ("a number, a comma-separated list (one value per element of --axis, per-axis), or @FILE "
                "(.npy/.npz/.safetensors with one array of any shape, e.g. blocked quantization; or with one "
                "array per input tensor, by name)")


def add_arguments(group: argparse._ArgumentGroup, direction: str) -> None:
    q = direction == "quantize"
    group.add_argument("--scale", required=True, metavar="S",
                       help=f"{'y_scale' if q else 'x_scale'}: {_VALUES_HELP}")
    group.add_argument("--scale-dtype", default="float", metavar="T",
                       help="type of the scale when given as numbers: float (default), float16, bfloat16"
                       + (", int32, float8e8m0" if q else ", float8e8m0"))
    group.add_argument("--zero-point", metavar="Z",
                       help=f"{'y_zero_point' if q else 'x_zero_point'}: {_VALUES_HELP}; numbers take the "
                       + ("output type" if q else "input type") + "; default: none")
    if q:
        group.add_argument("--output-dtype", metavar="T",
                           help="output type: uint8, int8, uint16, int16, uint4, int4, uint2, int2, float8e4m3fn, "
                           "float8e4m3fnuz, float8e5m2, float8e5m2fnuz, float4e2m1, float6e2m3, float6e3m2 "
                           "(default: the zero point's type, else uint8)")
        group.add_argument("--saturate", type=int, choices=(0, 1), default=1,
                           help="float8 outputs only: 1 (default) clamps out-of-range values to ±max, "
                           "0 follows the Cast table (NaN or inf)")
        group.add_argument("--precision", metavar="T",
                           help="type the division x / scale is done in: float, float16, bfloat16 "
                           "(opset >= 23; default: the scale's type)")
    else:
        group.add_argument("--input-dtype", metavar="T",
                           help="how to read INPUT's integers when the file cannot record the type: e.g. int4 "
                           "(values stored as int8), float8e4m3fn (bit patterns stored as uint8)")
        group.add_argument("--output-dtype", metavar="T",
                           help="output type: float, float16, bfloat16 (opset >= 23; default: the scale's type)")
    group.add_argument("--axis", type=int, default=None,
                       help="axis of per-axis / blocked quantization; negative counts from the end (default 1)")
    group.add_argument("--block-size", type=int, default=0,
                       help="block size of blocked quantization along --axis (default 0: per-tensor or per-axis)")
    group.add_argument("--opset", type=int, default=None,
                       help="ONNX opset of the operator: 10, 13, 19, 21, 23, 24, 25 or 28 (default: the newest); "
                       "an older opset rejects attributes and types it did not have")
    group.add_argument("--compat", choices=COMPAT_MODES, default="spec",
                       help="spec (default): the operator text; reference: onnx.reference 1.23 on x86-64; "
                       "onnxruntime: onnxruntime CPU (the release --ort-version names)")
    group.add_argument("--ort-version", default=None, metavar="VERSION",
                       help="with --compat onnxruntime: the onnxruntime release to reproduce, "
                       + " or ".join(r.version for r in ORT_VERSIONS) + " (default: the installed onnxruntime "
                       "when it is one of these, else the newest)")


def parse_values(text: str | None, argument: str, dtype) -> np.ndarray | dict[str, np.ndarray] | None:
    """A flag's value: a number, a comma-separated list, or @FILE.  A FILE of one array gives that
    array (for every input tensor); a FILE of several gives them by name, each for the input tensor
    of that name (:func:`for_tensor`)."""
    if text is None:
        return None
    t = qtype(dtype, argument) if dtype is not None else None
    if text.startswith("@"):
        tensors = read_tensors(Path(text[1:]))
        if not tensors:
            raise InvalidArgumentError(argument, "@FILE must hold an array", "no arrays")
        typed = {n: _typed(native(a), t, f"{argument} {n}") for n, a in tensors.items()}
        return next(iter(typed.values())) if len(typed) == 1 else typed
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise InvalidArgumentError(argument, "must be a number, a comma-separated list of numbers or @FILE",
                                   text) from None
    for v, f in zip(text.split(","), values):
        # Python reads 1e400 as inf: a finite number no float type holds, refused as 1e39 is for float32
        if math.isinf(f) and v.strip().lstrip("+-").lower() not in ("inf", "infinity"):
            raise InvalidArgumentError(argument, "must lie within the float64 range (a finite number that "
                                       "becomes infinite)", v.strip())
    a = np.array(values if "," in text else values[0], dtype=np.float64)
    if t is None:
        return a
    if t.is_int:
        if not np.all(np.isfinite(a)) or np.any(a != np.trunc(a)):
            raise DTypeError(argument, f"must hold integers for {t.name}", text)
        if np.any(a < t.qmin) or np.any(a > t.qmax):
            raise InvalidArgumentError(argument, f"must lie in [{t.qmin}, {t.qmax}] for {t.name}", text)
        return a.astype(np.int64).astype(t.storage).astype(t.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        narrow = a.astype(np.float32).astype(t.dtype)
    # float8e8m0 has no infinity and no zero: what it cannot hold becomes NaN
    beyond = ~np.isfinite(np.asarray(narrow, np.float32)) & np.isfinite(a)
    if np.any(beyond):
        raise InvalidArgumentError(argument, f"must lie within the {t.name} range (a finite value that becomes "
                                   + ("NaN" if t.name == "float8e8m0" else "infinite") + ")",
                                   float(a[beyond].flat[0]) if a.ndim else float(a))
    return narrow


def _typed(a: np.ndarray, t, argument: str) -> np.ndarray:
    """An @FILE array (in this machine's byte order) as the type ``t`` where the file holds it in the
    form .npy stores a type it cannot record (:mod:`quantspec._tensorfiles.tensorio`): sub-byte integers as
    int8/uint8 values, 8/6/4-bit floats as uint8 and bfloat16 as uint16 bit patterns."""
    if t is not None and a.dtype != t.dtype and (t.is_packed or a.dtype == t.storage):
        return from_storage(a, t, argument)
    return a


def for_tensor(value, argument: str, name: str):
    """The value of a flag for input tensor ``name``: ``value`` itself, or from a FILE of several
    arrays (:func:`parse_values`) the one of that name."""
    if not isinstance(value, dict):
        return value
    if name not in value:
        raise InvalidArgumentError(argument, f"@FILE holds several arrays, one per input tensor, and none is "
                                   f"named {name!r}", sorted(value))
    return value[name]


def _warn(direction: str, text: str) -> None:
    """One line on stderr: a valid request that probably does not do what was meant."""
    print(f"quantspec {direction}: warning: {text}", file=sys.stderr)


def _warn_traps(args: argparse.Namespace, direction: str, scale) -> None:
    """The calls the spec allows that silently lose the data: a scale of 0 or a negative one, --axis
    beside a single scale, and QuantizeLinear's uint8 default."""
    scales = list(scale.values()) if isinstance(scale, dict) else [scale]
    values = [np.asarray(s, np.float32) for s in scales if s is not None]
    q = direction == "quantize"
    if any(np.any(v == 0) for v in values):
        _warn(direction, "--scale holds a scale of 0: " + ("every value becomes the output type's lowest or highest "
              "code (x / 0 is +-inf; 0 / 0 is NaN)" if q else "every output is 0 (or NaN for a NaN code)"))
    if any(np.any(v < 0) for v in values):
        _warn(direction, "--scale holds a negative scale: " + ("every code has the opposite sign of its value"
              if q else "every output has the opposite sign of its code"))
    if args.axis is not None and args.block_size == 0 and values and all(v.size == 1 for v in values):
        _warn(direction, "--axis is ignored: --scale is a single value (per-tensor quantization)")
    if q and args.output_dtype is None and args.zero_point is None:
        _warn(direction, "the output type is ONNX's default uint8 (no --output-dtype or --zero-point), which has no "
              "negative codes: every negative value becomes 0; give --output-dtype (int8 for signed data)")


def jobs(args: argparse.Namespace, direction: str, tensors: dict[str, np.ndarray]):
    """The work on each tensor (see :mod:`quantspec._tensorfiles.slabs`) and notes for the user."""
    scale = parse_values(args.scale, "--scale", args.scale_dtype)
    _warn_traps(args, direction, scale)
    common = dict(axis=1 if args.axis is None else args.axis, block_size=args.block_size, opset=args.opset,
                  compat=args.compat, ort_version=args.ort_version)
    work = []
    if direction == "quantize":
        out_t = qtype(args.output_dtype, "--output-dtype") if args.output_dtype else None
        zp = parse_values(args.zero_point, "--zero-point", out_t or "uint8")
        kw = dict(output_dtype=out_t, saturate=bool(args.saturate), precision=args.precision, **common)
        for name, x in tensors.items():
            work.append(_job(name, x, for_tensor(scale, "--scale", name), for_tensor(zp, "--zero-point", name),
                             quantize_linear, plan_quantize, kw))
    else:
        in_t = qtype(args.input_dtype, "--input-dtype") if args.input_dtype else None
        zps: dict = {}  # the zero point takes each tensor's type: parsed (a FILE read) once per type
        for name, x in tensors.items():
            if in_t is not None and x.dtype != in_t.dtype:
                x = from_storage(x, in_t, name)
            t = qtype(x.dtype.newbyteorder("="), name)  # a big-endian file's type is the same type
            if t.name not in zps:
                zps[t.name] = parse_values(args.zero_point, "--zero-point", t)
            zp = for_tensor(zps[t.name], "--zero-point", name)
            work.append(_job(name, x, for_tensor(scale, "--scale", name), zp, dequantize_linear, plan_dequantize,
                             dict(output_dtype=args.output_dtype, **common)))
    return work, []


def _job(name: str, x: np.ndarray, scale, zp, op, planner, kw: dict) -> Job:
    """Slabs of rows along axis 0: per-tensor and per-axis parameters along another axis apply to every
    slab whole; per-axis parameters along axis 0 and blocked ones (whose axis 0 is x's, in blocks
    when blocked along axis 0) are cut to the slab's rows.  The whole plan is made first, so that
    every rule is checked on the tensor and parameters as given."""
    plan = planner(_native_probe(x), scale, zp, **kw)
    rows = rows_of(x.shape)
    step, cut = 1, None
    if plan.granularity == "axis" and plan.axis == 0 or plan.granularity == "block":
        per = plan.block_size if plan.granularity == "block" and plan.axis == 0 else 1
        cut = cutter((scale, zp), rows, per)
        step = per if cut is not None else None

    def compute(lo: int, hi: int) -> dict[str, np.ndarray]:
        if (lo, hi) == (0, rows):
            return {name: op(x, scale, zp, **kw)}
        s, z = cut(lo, hi) if cut is not None else (scale, zp)
        return {name: op(x[lo:hi], s, z, **kw)}

    return Job(name, x, step, compute)


def _native_probe(x: np.ndarray) -> np.ndarray:
    """What the planner reads of ``x`` (its type and shape) in this machine's byte order: a
    big-endian file's tensor is planned as the same type, without a copy of a mapped file (the op
    converts each slab it computes, as the public functions do)."""
    if x.dtype.isnative:
        return x
    return np.broadcast_to(np.zeros((), x.dtype.newbyteorder("=")), x.shape)
