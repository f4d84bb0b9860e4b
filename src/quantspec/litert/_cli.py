"""The LiteRT half of the ``quantspec`` command.

- ``quantspec check MODEL.tflite [--kernels reference|optimized|xnnpack|all] [--json]``: check a
  model against the LiteRT int8 spec (:func:`quantspec.litert.check_model`), each finding saying
  what each of LiteRT's op resolvers does with it; ``--kernels`` (default all) picks the resolvers
  the exit status speaks for.  Exit status 0: conformant; 1: a spec violation, or a LiteRT limit
  one of the chosen resolvers rejects, aborts on or runs with undefined behaviour; 2: the model
  cannot be read.
- ``quantspec run MODEL.tflite --input FILE [--input FILE ...] [--kernels reference|optimized|xnnpack]
  [--compare-litert [--resolver reference|optimized|default]] [--output FILE]``:
  run a model on quantspec's kernels (:class:`quantspec.litert.Interpreter`; ``--kernels`` picks
  the LiteRT kernels to reproduce), print a summary of the outputs, and with ``--compare-litert``
  run the LiteRT interpreter (needs the ai-edge-litert package) on the same inputs — with the op
  resolver ``--kernels`` reproduces, or the one ``--resolver`` names — and say where and by how
  much the outputs differ.  Exit status 0; 1 when ``--compare-litert`` finds a difference; 2 for bad
  input.
- ``quantspec quantize|dequantize --spec litert``: the element-wise plug-in (``add_arguments`` and
  ``run``) the command frame calls: LiteRT QUANTIZE (float -> int8) and DEQUANTIZE with given
  parameters, or with the parameters the converter would choose.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .._clitools import EXIT_FINDINGS, EXIT_OK, read_input_files
from .._clitools import parse as _parse
from .._clitools import seed as _seed
from .._fastpath import jit
from .._semantics.arrays import check_fits
from .._tensorfiles.slabs import Job, cutter, rows_of
from ..errors import InvalidArgumentError, ModelError, QuantSpecError


# ------------------------------------------------------------------------------------------------
# quantspec check
# ------------------------------------------------------------------------------------------------

def check_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="quantspec check",
        description="Check a .tflite model against the LiteRT 8-bit quantization specification: "
        "activation, weight and bias types, ranges, granularity and parameters, fixed output "
        "parameters, same-scale operators, operators outside the spec's list, legacy uint8 tensors.",
        epilog="Each finding says what each of LiteRT's op resolvers does with it: reference (BUILTIN_REF), "
        "optimized (BUILTIN_WITHOUT_DEFAULT_DELEGATES), xnnpack (the default resolver, with the XNNPACK delegate). "
        "Exit status: 0 conformant, 1 violations found (a spec rule broken, or a LiteRT limit one of the chosen "
        "resolvers rejects, aborts on or runs with undefined behaviour), 2 the model cannot be read.")
    parser.add_argument("model", metavar="MODEL", help="the .tflite file")
    parser.add_argument("--kernels", choices=("reference", "optimized", "xnnpack", "all"), default="all",
                        help="the LiteRT op resolvers the report and the exit status speak for (default: all "
                        "three); a limit only the other resolvers have is listed apart")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args, code = _parse(parser, argv)
    if args is None:
        return code
    from .checker import check_model

    report = check_model(args.model, kernels=args.kernels)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(report.render())
    return EXIT_OK if report.ok else EXIT_FINDINGS


# ------------------------------------------------------------------------------------------------
# quantspec run
# ------------------------------------------------------------------------------------------------

#: integer ops an id passes through on its way to the table it indexes (Keras' Embedding wraps negative
#: ids with LESS / ADD / SELECT_V2 first)
_ID_PATHS = frozenset({"ADD", "SUB", "SELECT", "SELECT_V2", "CAST", "RESHAPE", "SQUEEZE", "EXPAND_DIMS",
                       "MAXIMUM", "MINIMUM"})


def _index_bound(sg, t) -> int | None:
    """For a model input whose values (directly or through :data:`_ID_PATHS`) are the positions of a
    GATHER (an embedding's token ids): the size of the axis they index (the smallest, if several);
    None where it reaches no GATHER.  Ids outside it make LiteRT and quantspec fail, as they should."""
    reach, bound = {t.index}, None
    for op in sg.operators:
        if op.name == "GATHER" and len(op.inputs) >= 2 and op.inputs[1] in reach and op.inputs[0] >= 0:
            shape = sg.tensors[op.inputs[0]].shape
            axis = int(op.options.get("axis") or 0)
            axis += len(shape) if axis < 0 else 0
            if 0 <= axis < len(shape):
                bound = int(shape[axis]) if bound is None else min(bound, int(shape[axis]))
        elif op.name in _ID_PATHS and any(i in reach for i in op.inputs):
            reach.update(op.outputs)
    return bound


def _load_inputs(interp, files: list[str], seed: int | None) -> list[np.ndarray]:
    inputs = interp.inputs
    if seed is not None:
        if files:
            raise InvalidArgumentError("--random", "cannot be combined with --input")
        rng = np.random.default_rng(seed)
        out = []
        for t in inputs:
            # the generator's float64 draws for an input the model declares larger than memory
            check_fits(t.shape, 8, "--random", f"the random values of input {t.name!r}")
            if t.dtype.kind == "int":
                lo, hi = int(t.dtype.qmin), int(t.dtype.qmax) + 1
                rows = _index_bound(interp.subgraph, t) if t.params is None else None
                if rows is not None:             # token ids / positions: inside the table they index
                    lo, hi = 0, max(rows, 1)
                out.append(rng.integers(lo, hi, t.shape).astype(t.dtype.dtype))
            elif t.dtype.kind == "bool":
                out.append(rng.integers(0, 2, t.shape).astype(bool))
            else:
                lo, hi = -1.0, 1.0
                if t.params is not None and not t.params.per_axis:  # the range the input's quantization covers
                    s, z = float(t.params.scale[0]), int(t.params.zero_point[0])
                    lo, hi = (-128 - z) * s, (127 - z) * s
                out.append(rng.uniform(lo, hi, t.shape).astype(t.dtype.dtype))
        return out
    if not files:
        raise InvalidArgumentError("--input", "is required (one .npy per model input, in order, or one .npz / "
                                   ".safetensors holding the inputs by name); or use --random SEED",
                                   detail="inputs: " + ", ".join(f"{t.name!r} {t.type_name.lower()}{list(t.shape)}"
                                                                 for t in inputs))
    arrays, named = read_input_files(files)
    if named:
        names = {t.name for t in inputs}
        for sd in interp.model.signature_defs:
            names.update(sd.inputs)
        if not set(named) <= names and len(named) == len(inputs) and all(k.startswith("arr_") for k in named):
            return [named[f"arr_{i}"] if f"arr_{i}" in named else named[k] for i, k in enumerate(named)]
        return named  # type: ignore[return-value]
    return arrays


def _fmt_values(a: np.ndarray, n: int = 8) -> str:
    flat = a.reshape(-1)
    head = ", ".join(str(v) for v in flat[:n].tolist())
    return f"[{head}{', ...' if flat.size > n else ''}]"


def _summary(name: str, a: np.ndarray) -> str:
    if a.size == 0:
        return f"  {name}: {a.dtype}{list(a.shape)} (empty)"
    kind = a.dtype.kind
    stats = ""
    if kind in "iuf":
        stats = f" min {a.min()} max {a.max()} mean {float(a.astype(np.float64).mean()):.6g}"
    return f"  {name}: {a.dtype}{list(a.shape)}{stats}\n    {_fmt_values(a)}"


def _compare(ours: list[np.ndarray], theirs: list[np.ndarray], names: list[str]) -> tuple[bool, list[str]]:
    lines, same = [], True
    for name, a, b in zip(names, ours, theirs):
        if a.shape != b.shape or a.dtype != b.dtype:
            same = False
            lines.append(f"  {name}: quantspec gives {a.dtype}{list(a.shape)}, LiteRT {b.dtype}{list(b.shape)}")
            continue
        if a.tobytes() == b.tobytes():
            lines.append(f"  {name}: identical ({a.size} values)")
            continue
        same = False
        wide = np.float64 if a.dtype.kind == "f" else np.int64
        diff = a.astype(wide) - b.astype(wide)
        differ = np.argwhere(diff != 0) if a.dtype.kind != "f" else np.argwhere(~((a == b) | (np.isnan(a) & np.isnan(b))))
        count = len(differ)
        absd = np.abs(np.where(np.isnan(diff), np.inf, diff)) if a.dtype.kind == "f" else np.abs(diff)
        worst = np.unravel_index(int(np.argmax(absd)), a.shape)
        lines.append(f"  {name}: {count} of {a.size} values differ; largest difference {absd[worst]} at index "
                     f"{tuple(int(i) for i in worst)} (quantspec {a[worst]}, LiteRT {b[worst]})")
        for idx in differ[:5]:
            idx = tuple(int(i) for i in idx)
            lines.append(f"    at {idx}: quantspec {a[idx]}, LiteRT {b[idx]}")
        if count > 5:
            lines.append(f"    ... and {count - 5} more")
    return same, lines


#: --resolver -> LiteRT's OpResolverType; the one --kernels reproduces by default
RESOLVERS = {"reference": "BUILTIN_REF", "optimized": "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "default": "AUTO"}
KERNELS_RESOLVER = {"reference": "reference", "optimized": "optimized", "xnnpack": "default"}


def run_litert_reference(model_path: str, inputs: list[np.ndarray], resolver: str = "reference") -> list[np.ndarray]:
    """Run the model in the LiteRT interpreter with the reference kernels (``BUILTIN_REF``), or with
    the op resolver ``resolver`` names (:data:`RESOLVERS`)."""
    try:
        from ai_edge_litert import interpreter as litert
    except Exception as e:
        raise QuantSpecError("--compare-litert", "needs the ai-edge-litert package (pip install ai-edge-litert)",
                             detail=f"{type(e).__name__}: {e}") from None
    with open(model_path, "rb") as f:
        content = f.read()
    try:
        it = litert.Interpreter(model_content=content,
                                experimental_op_resolver_type=getattr(litert.OpResolverType, RESOLVERS[resolver]))
        it.allocate_tensors()
        for d, x in zip(it.get_input_details(), inputs):
            # np.require keeps a 0-d (scalar) input 0-d; np.ascontiguousarray would make it 1-D, which
            # the interpreter refuses ("Dimension mismatch")
            it.set_tensor(d["index"], np.require(x, requirements="C"))
        it.invoke()
        return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]
    except Exception as e:  # LiteRT reports what it refuses as ValueError / RuntimeError
        reason = " ".join(str(e).split()) or type(e).__name__
        raise ModelError("--compare-litert", "LiteRT refused the model", detail=f"LiteRT says: {reason}") from None


def run_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="quantspec run",
        description="Run a .tflite model on quantspec's int8 kernels (byte-identical to the LiteRT interpreter "
        "with its reference kernels) and print a summary of the outputs.",
        epilog="Exit status: 0 done (and, with --compare-litert, identical); 1 --compare-litert found a "
        "difference; 2 bad input.")
    parser.add_argument("model", metavar="MODEL", help="the .tflite file")
    parser.add_argument("--input", action="append", default=[], metavar="FILE",
                        help="input tensors: one .npy per model input, in order (repeat the option), or one "
                        ".npz/.safetensors file holding them by input name")
    parser.add_argument("--random", type=_seed, metavar="SEED", nargs="?", const=0, default=None,
                        help="instead of --input, run on seeded random inputs (int8 over the full range, the token "
                             "ids of an embedding GATHER inside its table); "
                        "SEED defaults to 0")
    parser.add_argument("--compare-litert", action="store_true",
                        help="also run the LiteRT interpreter (reference kernels, needs ai-edge-litert) and report "
                        "where and by how much the outputs differ")
    parser.add_argument("--output", metavar="FILE",
                        help="save the outputs: .npy (one output), .npz or .safetensors (by output name)")
    parser.add_argument("--kernels", choices=("reference", "optimized", "xnnpack"), default="reference",
                        help="which LiteRT kernels to reproduce: the reference kernels (BUILTIN_REF, default), the "
                        "optimized builtin kernels (BUILTIN_WITHOUT_DEFAULT_DELEGATES) or the default resolver with "
                        "the XNNPACK delegate")
    parser.add_argument("--resolver", choices=tuple(RESOLVERS), default=None,
                        help="with --compare-litert: the LiteRT op resolver to compare with (default: the one "
                        "--kernels reproduces)")
    parser.add_argument("--sum-semantics", choices=("correct", "reference"), default="correct",
                        help="int8 SUM: the correct integer result (default) or the LiteRT reference kernel's "
                        "(which reads int8 data as uint8; choose it to compare with LiteRT)")
    args, code = _parse(parser, argv)
    if args is None:
        return code
    from .interpreter import Interpreter

    if args.output:  # before the model runs, not after
        from .._tensorfiles.tensorio import check_suffix

        check_suffix(args.output, "--output")
    if args.resolver is not None and not args.compare_litert:
        raise InvalidArgumentError("--resolver", "chooses the LiteRT configuration --compare-litert runs; give "
                                   "--compare-litert too", args.resolver)
    resolver = args.resolver or KERNELS_RESOLVER[args.kernels]
    interp = Interpreter(args.model, sum_semantics=args.sum_semantics, kernels=args.kernels)
    inputs = _load_inputs(interp, args.input, args.random)
    # a small model: the numpy reference kernels (the same bytes) finish before numba would have loaded
    elements = sum(math.prod(t.shape) for t in interp.model.tensors)
    with jit.reference_only() if jit.prefer_reference(elements) else contextlib.nullcontext():
        outputs = interp.run(inputs)
    input_list = interp._input_list(inputs)
    names = [t.name or f"output_{k}" for k, t in enumerate(interp.outputs)]
    # LiteRT runs before anything is printed: a model it refuses is one error line
    theirs = None
    if args.compare_litert:
        theirs = (run_litert_reference(args.model, input_list) if resolver == "reference"
                  else run_litert_reference(args.model, input_list, resolver))
    print(f"{args.model}: {len(interp.model.operators)} operators, {len(outputs)} output(s)")
    for name, y in zip(names, outputs):
        print(_summary(name, y))
    status = EXIT_OK
    if theirs is not None:
        same, lines = _compare(outputs, theirs, names)
        print(f"compared with LiteRT ({RESOLVERS[resolver]}): " + ("identical" if same else "DIFFERENT"))
        print("\n".join(lines))
        if not same and args.sum_semantics == "correct" and interp.engines.count("reference") and any(
                op.name == "SUM" for op in interp.model.operators):
            print("note: the model has int8 SUM, which the LiteRT reference kernel computes by reading int8 as uint8; "
                  "rerun with --sum-semantics reference to reproduce it")
        status = EXIT_OK if same else EXIT_FINDINGS
    if args.output:
        from .._tensorfiles.tensorio import write_tensors

        if Path(args.output).suffix.lower() == ".npy" and len(outputs) == 1:
            tensors = {names[0]: outputs[0]}
        else:
            tensors = {}
            for name, y in zip(names, outputs):
                tensors[name if name not in tensors else f"{name}_{len(tensors)}"] = y
        for note in write_tensors(args.output, tensors):
            print(note, file=sys.stderr)
        print(f"outputs written to {args.output}")
    return status


# ------------------------------------------------------------------------------------------------
# quantspec quantize|dequantize --spec litert
# ------------------------------------------------------------------------------------------------

def add_arguments(group, direction: str) -> None:
    """The LiteRT options of ``quantspec quantize|dequantize``."""
    q = direction == "quantize"
    group.add_argument("--scale", metavar="S",
                       help="scale: a number (per-tensor) or a comma-separated list (per-axis, one per slice of "
                       "--axis)" + ("; or use --range / --from-data / --weights to let quantspec choose it as "
                                    "the converter does" if q else " (required)"))
    group.add_argument("--zero-point", metavar="Z",
                       help="zero point: a number or a comma-separated list (default 0)")
    group.add_argument("--axis", "--quantized-dimension", type=int, default=None, dest="axis",
                       help="the quantized dimension of per-axis parameters (default 0; 3 for DEPTHWISE_CONV_2D "
                       "weights)")
    if q:
        how = group.add_mutually_exclusive_group()
        how.add_argument("--range", nargs=2, type=float, metavar=("MIN", "MAX"),
                         help="activation parameters the converter picks for a calibrated range [MIN, MAX]")
        how.add_argument("--from-data", action="store_true",
                         help="activation parameters the converter picks, from each tensor's own min and max")
        how.add_argument("--weights", action="store_true",
                         help="quantize as the converter quantizes weights: symmetric, zero point 0, values in "
                         "[-127, 127], per-axis along --axis (parameters from the data unless --scale is given)")
        how.add_argument("--bias", action="store_true",
                         help="quantize as the converter quantizes a bias: int32, zero point 0 (--scale = input "
                         "scale x weight scale)")
        group.add_argument("--per-tensor", action="store_true",
                           help="with --weights: one scale for the whole tensor instead of per-axis")


def _numbers(text: str | None, argument: str, kind: type) -> list | None:
    if text is None:
        return None
    try:
        values = [kind(float(v)) if kind is float else int(v) for v in text.split(",")]
    except ValueError:
        raise InvalidArgumentError(argument, f"must be a number or a comma-separated list of {kind.__name__}s",
                                   text) from None
    return values


def _given_params(args, x_shape: tuple[int, ...] | None = None):
    from .params import QuantParams

    scale = _numbers(args.scale, "--scale", float)
    if scale is None:
        return None
    zp = _numbers(args.zero_point, "--zero-point", int) or [0]
    big = [z for z in zp if not -(1 << 63) <= z < (1 << 63)]
    if big:  # QuantParams holds zero points as int64 (as the model file does) and checks their range
        raise InvalidArgumentError("--zero-point", "must fit in int64 (LiteRT zero points are int64)", big[0])
    axis = _axis(args)
    if len(scale) > 1 and x_shape is not None and not (0 <= axis < len(x_shape)):
        raise InvalidArgumentError("--axis", f"must name a dimension of the tensor (rank {len(x_shape)})", axis)
    # float64: QuantParams says itself when a value overflows float32
    return QuantParams(np.array(scale, np.float64), np.array(zp, np.int64), axis if len(scale) > 1 else 0)


def _axis(args) -> int:
    """--axis, 0 when not given."""
    return 0 if args.axis is None else args.axis


def _check_options(args, direction: str) -> None:
    """Refuse combinations of options where one would be silently ignored or contradict the other."""
    if direction != "quantize":
        return
    chosen = "--range" if args.range is not None else "--from-data" if args.from_data else None
    if chosen is not None:   # activation parameters the converter picks: per-tensor, from the range
        for option, given in (("--scale", args.scale), ("--zero-point", args.zero_point), ("--axis", args.axis)):
            if given is not None:
                raise InvalidArgumentError(option, f"cannot be combined with {chosen}, which has the converter choose "
                                           "the (per-tensor) scale and zero point", given)
    if args.per_tensor:
        if not args.weights:
            raise InvalidArgumentError("--per-tensor", "only applies to --weights (use one --scale value for "
                                       "per-tensor parameters otherwise)")
        if args.axis is not None:
            raise InvalidArgumentError("--axis", "cannot be combined with --per-tensor (per-tensor weights have no "
                                       "quantized dimension)", args.axis)
        scales = _numbers(args.scale, "--scale", float)
        if scales is not None and len(scales) > 1:
            raise InvalidArgumentError("--scale", f"gives {len(scales)} scales (per-axis parameters), which "
                                       "contradicts --per-tensor", args.scale)
    if args.weights or args.bias:
        what = "--weights" if args.weights else "--bias"
        if args.zero_point is not None and args.scale is None:
            raise InvalidArgumentError("--zero-point", f"needs --scale with {what} (from the data the converter's "
                                       "zero point is 0)", args.zero_point)
        zps = _numbers(args.zero_point, "--zero-point", int)
        if zps is not None and any(zps):
            raise InvalidArgumentError("--zero-point", f"must be 0 with {what} (LiteRT's {what[2:]} quantization is "
                                       "symmetric)", args.zero_point)


def _describe(name: str, p) -> str:
    if p.per_axis:
        return (f"{name}: {len(p)} scales along dimension {p.quantized_dimension} (min {float(p.scale.min()):.9g}, "
                f"max {float(p.scale.max()):.9g}), zero points {sorted(set(p.zero_point.tolist()))[:4]}")
    return f"{name}: scale {float(p.scale[0]):.9g}, zero point {int(p.zero_point[0])}"


def jobs(args, direction: str, tensors: dict[str, np.ndarray]):
    """The work on each tensor (see :mod:`quantspec._tensorfiles.slabs`): LiteRT QUANTIZE float -> int8,
    the converter's weight / bias quantization, or LiteRT DEQUANTIZE; and notes on the parameters."""
    from . import params as P

    _check_options(args, direction)
    scales = _numbers(args.scale, "--scale", float)
    if scales is not None and len(scales) == 1 and args.axis is not None:
        print(f"quantspec {direction}: warning: --axis is ignored: --scale is a single value (per-tensor "
              "parameters)", file=sys.stderr)
    work = []
    notes: list[str] = []
    for name, x in tensors.items():
        whole = False
        if direction == "dequantize":
            p = _given_params(args, x.shape)
            if p is None:
                raise InvalidArgumentError("--scale", "is required to dequantize")
            op = P.dequantize
        elif args.weights:
            p = _given_params(args, x.shape)
            if p is None:
                p = P.weight_params(x, None if args.per_tensor else _axis(args))
            op = P.quantize_weights
            whole = not p.per_axis  # per-tensor weights: the converter recomputes max |w| over the whole tensor
        elif args.bias:
            p = _given_params(args, x.shape)
            if p is None:
                raise InvalidArgumentError("--scale", "is required with --bias (input scale x weight scale)")
            op = P.quantize_bias
        else:
            if args.range is not None:
                p = P.activation_params(args.range[0], args.range[1])
            elif args.from_data:
                a = np.asarray(x, np.float32)
                if a.size == 0:
                    raise InvalidArgumentError("--from-data", "needs a non-empty tensor", name)
                with warnings.catch_warnings():  # numpy warns of an all-NaN tensor: refused just below
                    warnings.simplefilter("ignore", RuntimeWarning)
                    lo, hi = float(np.nanmin(a)), float(np.nanmax(a))
                if math.isnan(lo):
                    raise InvalidArgumentError("--from-data", "needs a tensor with a value that is not NaN", name)
                p = P.activation_params(lo, hi)
            else:
                p = _given_params(args, x.shape)
                if p is None:
                    raise InvalidArgumentError("--scale", "is required (or --range MIN MAX, --from-data, --weights)")
            op = P.quantize
        work.append(_job(name, x, p, op, whole))
        notes.append(_describe(name, p))
    return work, notes


def _job(name: str, x: np.ndarray, p, op, whole: bool) -> Job:
    """Slabs of rows along axis 0; per-axis parameters along axis 0 are cut to the slab's rows, two
    rows at least (one pair of parameters would be per-tensor, a different formula in LiteRT)."""
    rows = rows_of(np.shape(x))
    cut = None
    if not whole:
        if p.per_axis and p.quantized_dimension == 0:
            c = cutter((p.scale, p.zero_point), rows)
            if c is not None:
                cut = lambda a, b: type(p)(*c(a, b), 0)  # noqa: E731
        else:
            cut = lambda a, b: p  # noqa: E731

    def compute(a: int, b: int) -> dict[str, np.ndarray]:
        if (a, b) == (0, rows) or cut is None:
            return {name: op(x, p)}
        return {name: op(x[a:b], cut(a, b))}

    return Job(name, x, None if cut is None else 2 if p.per_axis else 1, compute)
