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
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from .._clitools import EXIT_FINDINGS, EXIT_OK, read_input_files
from .._clitools import parse as _parse
from .._clitools import seed as _seed
from ..checkpoint.schemes import SCHEMES
from ..errors import InvalidArgumentError
from .auditor import audit
from .checker import check_model
from .converter import convert_model
from .graph import read_graph


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
    p.add_argument("--format", choices=("qdq", "matmulnbits"), default="qdq",
                   help="qdq (default): DequantizeLinear feeding each weight's operator; matmulnbits (schemes "
                   "int4-bN, uint4-bN-asym): each MatMul with a float32 weight becomes a com.microsoft MatMulNBits "
                   "node, byte-identical to onnxruntime's MatMulNBitsQuantizer")
    p.add_argument("--external-data", action="store_true", help="write the large initializers to OUT.onnx.data "
                   "(default: as the source did, or when the model exceeds 2 GB)")
    p.add_argument("--report", action="store_true", help="print a line per initializer (scheme, use, bytes, error)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    return p


def convert_main(argv: Sequence[str]) -> int:
    """``quantspec convert MODEL.onnx OUT.onnx ...`` (quantspec.cli routes an ONNX SRC here)."""
    args, code = _parse(convert_parser(), argv)
    if args is None:
        return code
    report = convert_model(args.src, args.dst, args.scheme, recipe=args.recipe, include=args.include,
                           exclude=args.exclude, external_data=True if args.external_data else None,
                           format=args.format)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    elif not args.quiet:
        if args.report:
            print(report.table())
        print(f"quantspec convert: {report.summary()}; wrote {args.dst}")
    return EXIT_OK
