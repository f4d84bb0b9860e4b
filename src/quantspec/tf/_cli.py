"""``quantspec quantize|dequantize --spec tf``: TensorFlow QuantizeV2 / Dequantize from the shell.

Every attribute of the two ops is a flag; the vocabularies come from :mod:`quantspec.tf.spec`.

quantize writes, for each input tensor NAME, the codes as NAME and the range they represent as
NAME.output_min and NAME.output_max (.npz / .safetensors).  A .npy file holds one tensor only: with a
.npy OUTPUT the codes are written and output_min / output_max are printed as a note (one input
tensor), or the call is refused (several).  dequantize reads NAME.output_min / NAME.output_max from
the input file when --min-range / --max-range are not given, so a quantize output round-trips (also
with ``--tensor NAME``, which selects the codes: their ranges are still read from the file).
"""

from __future__ import annotations

import argparse

import numpy as np

from ..errors import InvalidArgumentError, TensorFileError
from .._tensorfiles.slabs import Job, cutter, rows_of
from . import _args
from . import spec
from .dequantize_op import codes, dequantize, prepare_dequantize
from .quantize_op import output_range, prepare_quantize, quantize

__all__ = ["add_arguments", "jobs"]

_RANGE_SUFFIXES = (".output_min", ".output_max")


def _range(text: str):
    """A number, or a comma-separated list of numbers (one per slice of --axis)."""
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or a comma-separated list of numbers, got {text!r}")
    return values[0] if len(values) == 1 and "," not in text else values


def add_arguments(group, direction: str) -> None:
    types = list(spec.TYPES)
    if direction == "quantize":
        group.add_argument("--T", "--type", dest="T", required=True, choices=types,
                           help="the quantized type of the codes (QuantizeV2 attribute T)")
    else:
        group.add_argument("--T", "--type", dest="T", choices=types, default=None,
                           help="the quantized type the codes are read as; default: from each tensor's dtype "
                                "(int8 -> qint8, uint8 -> quint8, int16 -> qint16, uint16 -> quint16, int32 -> qint32)")
    need = direction == "quantize"
    group.add_argument("--min-range", type=_range, required=need, metavar="MIN",
                       help="min_range: a number, or with --axis a comma-separated list, one value per slice "
                            "(write --min-range=-1,-2 when the list starts with a minus sign)"
                       + ("" if need else "; default: the input's NAME.output_min tensor"))
    group.add_argument("--max-range", type=_range, required=need, metavar="MAX",
                       help="max_range, as --min-range" + ("" if need else "; default: the input's NAME.output_max"))
    group.add_argument("--mode", default="MIN_COMBINED", choices=spec.MODES,
                       help="how floats map to codes (default MIN_COMBINED)")
    if direction == "quantize":
        group.add_argument("--round-mode", default="HALF_AWAY_FROM_ZERO", choices=spec.ROUND_MODES,
                           help="tie breaking (default HALF_AWAY_FROM_ZERO; HALF_TO_EVEN needs --mode SCALED)")
        group.add_argument("--ensure-minimum-range", type=float, default=0.01, metavar="EMR",
                           help="the range is widened to at least max(1, |min|, |max|) * EMR (default 0.01)")
    group.add_argument("--narrow-range", action="store_true",
                       help="SCALED: leave out the lowest code (e.g. [-127, 127] for qint8)")
    group.add_argument("--axis", type=int, default=None,
                       help="quantize each slice along this axis with its own range (negative counts from the end); "
                            "default: one range for the whole tensor")
    if direction == "dequantize":
        group.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                           help="the result type (bfloat16 only with --mode MIN_COMBINED, or SCALED with "
                                "--kernel onednn)")
    group.add_argument("--kernel", default="eigen", choices=spec.KERNELS,
                       help="eigen: TensorFlow's portable kernels (TF_ENABLE_ONEDNN_OPTS=0, the default); onednn: "
                            "stock TensorFlow on x86-64 Linux, whose oneDNN kernels replace some calls")
    if direction == "quantize":
        group.description = ("Writes NAME (the codes), NAME.output_min and NAME.output_max for each input tensor "
                             "NAME. A .npy OUTPUT holds only the codes; output_min / output_max are then printed.")


def _array(v):
    return np.asarray(v, dtype=np.float32) if isinstance(v, list) else v


def jobs(args, direction: str, tensors: dict[str, np.ndarray]):
    """The work on each tensor (see :mod:`quantspec._tensorfiles.slabs`) and notes for the user."""
    notes: list[str] = []
    work: list[Job] = []
    if direction == "quantize":
        npy = str(getattr(args, "output", "")).lower().endswith(".npy")
        if npy and len(tensors) != 1:
            raise TensorFileError("output", "a .npy file holds one tensor, and quantize writes codes, output_min and "
                                  "output_max for each input tensor; use .npz or .safetensors",
                                  f"{len(tensors)} input tensors")
        kw = dict(mode=args.mode, round_mode=args.round_mode, narrow_range=args.narrow_range, axis=args.axis,
                  ensure_minimum_range=args.ensure_minimum_range, kernel=args.kernel)
        for name, x in tensors.items():
            lo, hi = _array(args.min_range), _array(args.max_range)

            def op(v, a, b, sides: bool = True):
                codes, omin, omax = quantize(v, a, b, args.T, **kw)
                return {"": codes, ".output_min": omin, ".output_max": omax} if sides else {"": codes}

            checked = _args.tensor(x, "x", (np.dtype(np.float32),), "QuantizeV2")  # QuantizeV2's checks, in order
            plan = prepare_quantize(lo, hi, args.T, shape=checked.shape, **kw)
            if npy:
                omin, omax = output_range(plan)
                notes.append(f"{name}: output_min={_show(omin)} output_max={_show(omax)} (a .npy file holds the "
                             "codes only; use .npz to keep the range)")
            work.append(_job(name, x, checked, lo, hi, plan, op, not npy))
        return work, notes
    stored = _StoredRanges(args, tensors)
    for name, q in tensors.items():
        if name.endswith(_RANGE_SUFFIXES) and name.rsplit(".", 1)[0] in tensors:
            continue  # a range stored by quantize, not codes
        lo, hi = _array(args.min_range), _array(args.max_range)
        if lo is None:
            lo = stored.get(name + ".output_min")
        if hi is None:
            hi = stored.get(name + ".output_max")
        if lo is None or hi is None:
            raise InvalidArgumentError("--min-range/--max-range", f"are required: the input holds no "
                                       f"{name}.output_min / {name}.output_max", name)
        kw = dict(mode=args.mode, narrow_range=args.narrow_range, axis=args.axis, dtype=args.dtype, kernel=args.kernel)

        def op(v, a, b, sides: bool = True):
            return {"": dequantize(v, a, b, args.T, **kw)}

        checked, T = codes(q, args.T)  # Dequantize's own checks, in order
        plan = prepare_dequantize(lo, hi, T, shape=checked.shape, **kw)
        work.append(_job(name, q, checked, lo, hi, plan, op, False))
    return work, notes


class _StoredRanges:
    """NAME.output_min / NAME.output_max as the input file holds them.  ``tensors`` is what the CLI
    passed on: with ``--tensor NAME`` only the named tensors, without the ranges stored beside them,
    so a range missing there is looked up in the whole file (read once, mapped, and only if needed)."""

    def __init__(self, args, tensors: dict[str, np.ndarray]):
        self._tensors = tensors
        self._path = getattr(args, "input", None) if getattr(args, "tensor", None) else None
        self._file: dict[str, np.ndarray] | None = None

    def get(self, key: str):
        if key in self._tensors or self._path is None:
            return self._tensors.get(key)
        if self._file is None:
            from .._tensorfiles.tensorio import read_tensors

            self._file = read_tensors(self._path, mapped=True)
        return self._file.get(key)


def _job(name: str, source, x: np.ndarray, lo, hi, plan, op, sides: bool) -> Job:
    """Slabs of rows along axis 0 of ``x``: ``source`` (the tensor as read, perhaps mapped, whose
    pages are given back slab by slab) after the op's own checks.  Per-slice ranges along axis 0 are
    cut to the slab's rows.  ``op(x, min, max, sides)`` returns
    ``{suffix: output}``; ``plan`` is the whole tensor's (its rules already checked), and the range
    QuantizeV2 outputs is the whole plan's."""
    rows = rows_of(x.shape)
    cut = cutter((lo, hi), rows) if plan.axis == 0 else (lambda a, b: (lo, hi))

    def compute(a: int, b: int) -> dict[str, np.ndarray]:
        if (a, b) == (0, rows) or cut is None:
            got = op(x, lo, hi, sides)
        else:
            got = op(x[a:b], *cut(a, b), False)
            if sides:
                got[".output_min"], got[".output_max"] = output_range(plan)
        return {name + k: v for k, v in got.items()}

    return Job(name, source, None if cut is None else 1, compute)


def _show(a: np.ndarray) -> str:
    """float32 values written so that they read back exactly."""
    vals = [repr(float(v)) for v in np.ravel(a)]
    return vals[0] if np.ndim(a) == 0 else "[" + ",".join(vals) + "]"
