"""The ONNX-model commands of ``quantspec`` (:mod:`quantspec.cli` routes an ONNX file here by its content).

- ``quantspec check MODEL.onnx [--json]``: the model's quantization nodes against their operators'
  rules (:func:`quantspec.onnxmodels.check_model`).  Exit status 0: conformant; 1: violations; 2: the
  model cannot be read.
- ``quantspec audit MODEL.onnx [--input FILE ...] [--seed N] [--static] [--json]``: the divergence
  audit (:func:`quantspec.onnxmodels.audit`).  Exit status 0: onnxruntime computed every QuantizeLinear /
  DequantizeLinear node as the spec does (and as quantspec's ``compat="onnxruntime"`` does); 1:
  it departed from the spec at some node (or from ``compat="onnxruntime"``); 2: bad input, or a model
  onnxruntime cannot run.  ``--static`` runs nothing and exits 0.
- ``quantspec convert MODEL.onnx OUT.onnx --scheme NAME [--format qdq|matmulnbits]``: weight-only
  quantization of a float model (:func:`quantspec.onnxmodels.convert_model`).  Exit status 0: written;
  2: bad input.
- ``quantspec convert MODEL.onnx OUT.onnx --static --calibration DATA.npz [--quant-format qdq|qoperator]
  [--per-channel] [--reduce-range] [--activation-type T] [--weight-type T] [--calibrate-method M]``:
  static quantization, onnxruntime's ``quantize_static`` (:func:`quantspec.onnxmodels.quantize_static`).
  Exit status 0: written; 2: bad input.
- ``quantspec calibrate MODEL.onnx DATA.npz [--method M|all] [--activation-type T] [--symmetric] [--json]``:
  the range ``quantize_static``'s calibrator gives each tensor, and the zero point and scale derived
  from it (:func:`quantspec.onnxmodels.calibration.collect_ranges`,
  :func:`quantspec.calibrate.onnx_params`).  Exit status 0: printed; 2: bad input.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

import numpy as np

from .._clitools import EXIT_FINDINGS, EXIT_OK, read_input_files
from .._clitools import parse as _parse
from .._clitools import seed as _seed
from ..checkpoint.schemes import SCHEMES
from ..errors import InvalidArgumentError
from .auditor import audit
from .calibration import METHODS
from .checker import check_model
from .converter import convert_model
from .graph import read_graph


_ACT_TYPES = ("uint8", "int8", "uint16", "int16")


def check_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="quantspec check",
        description="Check a model's quantization.  A .tflite model is checked against the LiteRT 8-bit "
        "quantization specification (types, ranges, granularity, fixed output parameters, same-scale operators, "
        "operators outside the spec's list).  An ONNX model is checked node by node against the rules of its "
        "QuantizeLinear / DequantizeLinear version (types, attributes, scale and zero point shapes, axis, "
        "block_size, output_dtype, saturate, precision, constant scales and zero points) and the quantization "
        "parameters of QLinearConv, QLinearMatMul, MatMulInteger, ConvInteger and com.microsoft MatMulNBits.  "
        "The format is chosen by the file's content.",
        epilog="Exit status: 0 conformant, 1 violations found, 2 the model cannot be read.")
    parser.add_argument("model", metavar="MODEL", help="the .onnx file")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args, code = _parse(parser, argv)
    if args is None:
        return code

    report = check_model(args.model)
    print(json.dumps(report.to_json(), indent=2) if args.json else report.render())
    return EXIT_OK if report.ok else EXIT_FINDINGS


def _read_inputs(files: list[str], names: list[str]):
    """The model's inputs from --input files: .npy files one per input in model order, or
    .npz / .safetensors files holding them by name."""
    arrays, named = read_input_files(files)
    if arrays:
        if len(arrays) != len(names):
            raise InvalidArgumentError("--input", f"needs one .npy file per model input ({len(names)}: "
                                       f"{', '.join(names)})", f"{len(arrays)} files")
        return dict(zip(names, arrays))
    return named


def audit_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="quantspec audit",
        description="Audit an ONNX model's QuantizeLinear / DequantizeLinear nodes: which divergences between the "
        "ONNX spec, onnx.reference and onnxruntime can apply to each node (docs/onnx.md's divergence table), and, "
        "running the model in onnxruntime with every node's inputs and output exposed, how many elements "
        "onnxruntime computed differently from the spec at each node (quantspec recomputes each node in its three "
        "compat modes and confirms that compat=\"onnxruntime\" gives onnxruntime's bytes).",
        epilog="Exit status: 0 onnxruntime computed every node as the spec does; 1 it departed from the spec (or "
        "from compat=\"onnxruntime\") somewhere; 2 bad input or a model onnxruntime cannot run.  With --static: 0.")
    parser.add_argument("model", metavar="MODEL", help="the .onnx file")
    parser.add_argument("--input", action="append", default=[], metavar="FILE",
                        help="the model's inputs: one .npy per input in model order (repeat the option), or a "
                        ".npz/.safetensors file holding them by name; default: seeded random inputs")
    parser.add_argument("--seed", type=_seed, default=0, metavar="N",
                        help="seed of the random inputs when no --input is given (default 0)")
    parser.add_argument("--static", action="store_true",
                        help="only the static audit: run nothing (onnxruntime is not needed)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args, code = _parse(parser, argv)
    if args is None:
        return code

    if args.static and args.input:
        raise InvalidArgumentError("--input", "cannot be combined with --static, which runs nothing")
    g = read_graph(args.model)
    inputs = _read_inputs(args.input, g.inputs) if args.input else None
    report = audit(g.model, inputs, run=not args.static, seed=args.seed)
    print(json.dumps(report.to_json(), indent=2) if args.json else report.render())
    if args.static:
        return EXIT_OK
    return EXIT_OK if report.ok else EXIT_FINDINGS


# ------------------------------------------------------------------------------------------------
# quantspec convert
# ------------------------------------------------------------------------------------------------

def convert_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="quantspec convert",
        description="Weight-only quantization of a float ONNX model: the constant weight of each MatMul (B), Gemm "
        "(B) and Conv (W) becomes DequantizeLinear(codes, scale[, zero point]) feeding the operator, with the schemes "
        "of quantspec convert for checkpoints (the same bytes). The model is upgraded to the lowest opset whose "
        "DequantizeLinear has the scheme's types and attributes when it is below it. Other initializers, and weights "
        "a scheme cannot take, are kept and listed. OUT.onnx is written atomically, with an external data file beside "
        "it when the source had one or the model exceeds 2 GB. See docs/onnx-models.md.",
        epilog="Exit status: 0 written, 2 bad input.")
    p.add_argument("src", metavar="MODEL.onnx", help="the float model (chosen by content: any file holding an ONNX model)")
    p.add_argument("dst", metavar="OUT.onnx", help="the file to write")
    p.add_argument("--scheme", metavar="NAME", help="the scheme of every weight no recipe rule names: " + ", ".join(SCHEMES))
    p.add_argument("--recipe", metavar="FILE", help="a TOML file: default = SCHEME and [[rules]] tables "
                   "{match = GLOB, scheme = SCHEME or \"keep\"} over initializer names, first match wins")
    p.add_argument("--include", metavar="GLOB", action="append", help="quantize only initializers matching a glob "
                   "(repeatable)")
    p.add_argument("--exclude", metavar="GLOB", action="append", help="keep initializers matching this glob (repeatable)")
    p.add_argument("--format", choices=("qdq", "matmulnbits"), default=None,
                   help="qdq (default): DequantizeLinear feeding each weight's operator; matmulnbits (schemes "
                   "int4-bN, uint4-bN-asym): each MatMul with a float32 weight becomes a com.microsoft MatMulNBits "
                   "node, byte-identical to onnxruntime's MatMulNBitsQuantizer")
    p.add_argument("--external-data", action="store_true", help="write the large initializers to OUT.onnx.data "
                   "(default: as the source did, or when the model exceeds 2 GB)")
    p.add_argument("--report", action="store_true", help="print a line per initializer (scheme, use, bytes, error)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    s = p.add_argument_group("static quantization (onnxruntime's quantize_static: weights and activations)")
    s.add_argument("--static", action="store_true", help="quantize weights and activations as onnxruntime's "
                   "quantize_static does, with activation ranges calibrated on --calibration (exclusive with "
                   "--scheme, --recipe, --include, --exclude and --format)")
    s.add_argument("--calibration", metavar="DATA.npz", help="the calibration samples: one array per model input, "
                   "by input name (an unnamed arr_0 for a one-input model), first axis = samples")
    s.add_argument("--quant-format", choices=("qdq", "qoperator"), default=None, help="qdq (default): "
                   "QuantizeLinear/DequantizeLinear pairs; qoperator: QLinearConv, QLinearMatMul, ...")
    s.add_argument("--per-channel", action="store_true", help="weights quantized per output channel")
    s.add_argument("--reduce-range", action="store_true", help="7-bit weights (onnxruntime's reduce_range)")
    s.add_argument("--activation-type", choices=_ACT_TYPES, default=None, help="default uint8")
    s.add_argument("--weight-type", choices=_ACT_TYPES, default=None, help="default int8")
    s.add_argument("--calibrate-method", choices=tuple(METHODS), default=None, help="default minmax")
    return p


_STATIC_ONLY = ("calibration", "quant_format", "per_channel", "reduce_range", "activation_type", "weight_type",
                "calibrate_method")
_WEIGHT_ONLY = ("scheme", "recipe", "include", "exclude", "format")


def _option(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def read_calibration(path: str, model) -> dict:
    """DATA.npz as the dict of stacked samples ``quantize_static`` and ``collect_ranges`` take (an
    unnamed ``arr_0`` given to a one-input model's input)."""
    from .calibration import _named_arrays, _read_npz, model_inputs

    arrays = _read_npz(path, "DATA.npz")
    inputs = model_inputs(model)
    return _named_arrays(inputs, arrays, "DATA.npz")


def _static_quantizer():
    """``quantspec.onnxmodels.quantize_static``, or a clear error where this installation lacks it."""
    from .. import onnxmodels

    try:
        return onnxmodels.quantize_static
    except AttributeError:
        from ..errors import UnsupportedError

        raise UnsupportedError("--static", "needs quantspec.onnxmodels.quantize_static, which this quantspec "
                               "version does not provide") from None


def _convert_static(args) -> int:
    given = [_option(d) for d in _WEIGHT_ONLY if getattr(args, d) not in (None, False)]
    if given:
        raise InvalidArgumentError("--static", "quantizes weights and activations as onnxruntime's quantize_static "
                                   "does; it cannot be combined with the weight-only options", given[0])
    if not args.calibration:
        raise InvalidArgumentError("--calibration", "is required with --static (an .npz file: one array per model "
                                   "input, first axis = samples)")
    from .calibration import _load

    model = _load(args.src)
    data = read_calibration(args.calibration, model)
    quantize_static = _static_quantizer()
    report = quantize_static(model, args.dst, data, quant_format=args.quant_format or "qdq",
                             per_channel=args.per_channel, reduce_range=args.reduce_range,
                             activation_type=args.activation_type or "uint8", weight_type=args.weight_type or "int8",
                             calibrate_method=args.calibrate_method or "minmax")
    if args.json:
        to_json = getattr(report, "to_json", None)
        print(json.dumps(to_json() if callable(to_json) else {"output": str(args.dst)}, indent=2, default=str))
    elif not args.quiet:
        summary = getattr(report, "summary", None)
        text = summary() if callable(summary) else "static quantization"
        print(f"quantspec convert: {text}; wrote {args.dst}")
    return EXIT_OK


def convert_main(argv: Sequence[str]) -> int:
    """``quantspec convert MODEL.onnx OUT.onnx ...`` (quantspec.cli routes an ONNX SRC here)."""
    args, code = _parse(convert_parser(), argv)
    if args is None:
        return code
    if args.static:
        return _convert_static(args)
    given = [_option(d) for d in _STATIC_ONLY if getattr(args, d) not in (None, False)]
    if given:
        raise InvalidArgumentError(given[0], "is an option of static quantization: add --static (and drop --scheme)")
    report = convert_model(args.src, args.dst, args.scheme, recipe=args.recipe, include=args.include,
                           exclude=args.exclude, external_data=True if args.external_data else None,
                           format=args.format or "qdq")
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    elif not args.quiet:
        if args.report:
            print(report.table())
        print(f"quantspec convert: {report.summary()}; wrote {args.dst}")
    return EXIT_OK


# ------------------------------------------------------------------------------------------------
# quantspec calibrate
# ------------------------------------------------------------------------------------------------

def calibrate_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="quantspec calibrate",
        description="Calibrate a float ONNX model as onnxruntime's quantize_static does: run it in onnxruntime on "
        "each sample of DATA.npz with the tensors quantize_static calibrates exposed, and print each tensor's range "
        "(lowest, highest) by the chosen method, with the zero point and scale onnxruntime's quantizer derives from "
        "that range (compute_scale_zp, before its per-operator adjustments such as a Relu output sharing its "
        "input's parameters). See docs/onnx-models.md.",
        epilog="Exit status: 0 printed, 2 bad input.")
    p.add_argument("model", metavar="MODEL.onnx", help="the float model")
    p.add_argument("data", metavar="DATA.npz", help="one array per model input, by input name (an unnamed arr_0 "
                   "for a one-input model), first axis = samples")
    p.add_argument("--method", choices=(*METHODS, "all"), default="minmax",
                   help="the calibration method (default minmax, quantize_static's default); all: the four side "
                   "by side")
    p.add_argument("--activation-type", choices=_ACT_TYPES, default="uint8", help="the type of the parameters "
                   "(default uint8, quantize_static's)")
    p.add_argument("--symmetric", action="store_true", help="symmetric activation parameters (quantize_static's "
                   "extra option ActivationSymmetric)")
    p.add_argument("--json", action="store_true", help="print the ranges and parameters as JSON")
    return p


def _num(x) -> float | str:
    v = float(np.ravel(x)[0])
    return v if v == v and abs(v) != float("inf") else str(v)


def calibrate_main(argv: Sequence[str]) -> int:
    """``quantspec calibrate MODEL.onnx DATA.npz ...`` (quantspec.cli routes it here)."""
    from ..calibrate import onnx_params
    from ..errors import QuantSpecError
    from .calibration import _load, collect_ranges, count_samples

    args, code = _parse(calibrate_parser(), argv)
    if args is None:
        return code
    model = _load(args.model)
    data = read_calibration(args.data, model)
    samples = count_samples(model, data)          # the data checked against the model's inputs first
    methods = list(METHODS) if args.method == "all" else [args.method]
    rows: dict[str, dict] = {}
    for m in methods:
        for name, r in collect_ranges(model, data, method=m).items():
            lo, hi = r.as_floats()
            entry = {"lowest": _num(lo), "highest": _num(hi)}
            try:
                zp, scale = onnx_params(r, args.activation_type, symmetric=args.symmetric)
                entry.update(zero_point=int(np.ravel(zp)[0]), scale=_num(scale))
            except QuantSpecError as e:
                entry.update(zero_point=None, scale=None, error=str(e))
            rows.setdefault(name, {})[m] = entry
    if args.json:
        print(json.dumps({"model": str(args.model), "samples": samples, "activation_type": args.activation_type,
                          "symmetric": args.symmetric, "methods": methods, "tensors": rows}, indent=2))
        return EXIT_OK
    def f32(v) -> str:        # the shortest text that reads back as the same float32
        return v if isinstance(v, str) else str(np.float32(v))

    width = max([len("tensor")] + [len(n) for n in rows])
    print(f"quantspec calibrate: {args.model}, {samples} samples, {len(rows)} tensors; {args.activation_type} "
          f"parameters{' (symmetric)' if args.symmetric else ''}")
    print(f"{'tensor':<{width}}  {'method':<12}  {'lowest':>15}  {'highest':>15}  {'zero point':>10}  scale")
    for name, per in rows.items():
        for m, e in per.items():
            zp = "-" if e["zero_point"] is None else str(e["zero_point"])
            sc = e.get("error", "") if e["scale"] is None else f32(e["scale"])
            print(f"{name:<{width}}  {m:<12}  {f32(e['lowest']):>15}  {f32(e['highest']):>15}  {zp:>10}  {sc}")
    return EXIT_OK
