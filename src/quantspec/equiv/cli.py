"""``quantspec equiv``: translate a quantizer to another spec and prove where the two differ.

::

    quantspec equiv --from "tf:QuantizeV2 mode=MIN_COMBINED T=qint8 min=-6 max=6" --to onnx
    quantspec equiv --from "tf:FakeQuant min=-1.3 max=2.7" --to litert --inputs float16 --json
    quantspec equiv --from "litert:QUANTIZE scale=0.05 zero_point=-3" \\
                    --to "onnx:QuantizeLinear scale=0.05 zero_point=-3 output_dtype=int8"

``--from`` is a quantizer in the one-line syntax of :mod:`quantspec.equiv.specstring`.  ``--to`` is
either a target (a spec, ``SPEC:OP``, optionally with fixed fields: ``onnx output_dtype=uint8``),
and then the command prints the translation (the chosen record, the real converter's choice, the
best candidates) and the exhaustive comparison; or a complete record, and then it compares the
two.  ``--inputs``: the domain (float32, all 2^32 bit patterns, the default; float16; bfloat16).
Exit status: 0 when the two agree on every input, 1 when they differ, 2 for bad input (one line).
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["main"]


class _ArgumentError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit status 2, printed by main()
        raise _ArgumentError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="quantspec equiv",
                description="Translate a quantizer to another spec (as the real converters would, and the record "
                "that agrees with it on the most inputs), and count over every input where the two differ.",
                                epilog="Syntax: SPEC:OP key=value ..., e.g. 'tf:QuantizeV2 mode=MIN_COMBINED T=qint8 "
                                "min=-6 max=6', 'onnx:QuantizeLinear opset=21 scale=0.05 zero_point=0 "
                                "output_dtype=int8', 'litert:QUANTIZE scale=0.05 zero_point=-3'. "
                                "Exit status 0: equivalent on every input; 1: they differ; 2: bad input.")
    p.add_argument("--from", dest="source", required=True, metavar="SPEC_STRING", help="the quantizer to start from")
    p.add_argument("--to", dest="target", required=True, metavar="SPEC",
                   help="a spec (tf, onnx, litert), SPEC:OP, optionally with fixed fields, to translate to; or a "
                   "complete record to compare with")
    p.add_argument("--inputs", default="float32", choices=("float32", "float16", "bfloat16"),
                   help="the inputs to compare on (default: every float32 bit pattern)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except _ArgumentError as e:
        print(f"quantspec equiv: error: {e}", file=sys.stderr)
        return 2
    from .prove import equivalent
    from .specstring import parse
    from .translate import translate

    source = parse(args.source)
    record = _complete_record(args.target)
    if record is not None:
        result = equivalent(source, record, "codes" if source.kind == "dequantize" else args.inputs)
        report = result
    else:
        result = translate(source, args.target, inputs=args.inputs)
        report = result.report
    text, data = str(result), result.to_dict()
    print(json.dumps(data, indent=2) if args.json else text)
    return 0 if report is None or report.equal else 1


def _complete_record(text: str):
    """The record ``text`` names, when it is a complete record (an op and every field it needs);
    None when it is a target to translate to."""
    from .specstring import parse, parse_target, required_fields

    spec, key, fixed = parse_target(text)
    if key is None or not required_fields(spec, key) <= set(fixed):
        return None
    return parse(text)
