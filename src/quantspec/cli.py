"""The ``quantspec`` command.

::

    quantspec quantize INPUT OUTPUT --spec {onnx,tf,litert} [options]   # .npy / .npz / .safetensors
    quantspec dequantize INPUT OUTPUT --spec ... [options]
    quantspec check MODEL.tflite|MODEL.onnx [--json]
    quantspec audit MODEL.onnx [--input FILE] [--json]
    quantspec run MODEL.tflite --input FILE.npy [--compare-litert]
    quantspec convert SRC DST --scheme NAME       # a checkpoint, or MODEL.onnx OUT.onnx
    quantspec convert MODEL.onnx OUT.onnx --static --calibration DATA.npz [options]
    quantspec calibrate MODEL.onnx DATA.npz [--method M|all] [--json]
    quantspec bench [--quick]
    quantspec demo
    quantspec warmup [--spec {onnx,tf,litert,calibrate,checkpoint,equiv}]
    quantspec example [DIR]
    quantspec versions [--json]

``quantize`` and ``dequantize`` take the options of the chosen spec: ``quantspec quantize --spec onnx
--help`` lists them.  Each spec package holds its own command-line half in a ``_cli`` module with
``add_arguments(parser, direction)`` and ``run(args, direction, tensors) -> (tensors, notes)``; this
module only dispatches, reads and writes files, and turns quantspec errors into a message and an
exit status (2 for bad input).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from . import __version__
from .errors import InvalidArgumentError, ModelError, QuantSpecError

SPECS = {
    "onnx": ("quantspec.onnx._cli", "ONNX QuantizeLinear / DequantizeLinear (every opset)"),
    "tf": ("quantspec.tf._cli", "TensorFlow QuantizeV2 / Dequantize"),
    "litert": ("quantspec.litert._cli", "LiteRT (TFLite) int8 QUANTIZE / DEQUANTIZE"),
}

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT = 0, 1, 2
EXIT_CLOSED_PIPE = 128 + 13     # SIGPIPE


def _spec_module(name: str):
    return importlib.import_module(SPECS[name][0])


def _elementwise_parser(direction: str, spec: str | None) -> argparse.ArgumentParser:
    verb = "Quantize" if direction == "quantize" else "Dequantize"
    p = argparse.ArgumentParser(
        prog=f"quantspec {direction}",
        description=f"{verb} every tensor of INPUT and write the results to OUTPUT. "
        "Files: .npy (one tensor), .npz or .safetensors (several; each is processed). "
        "OUTPUT is written atomically (a temporary file renamed into place). Files may be larger than "
        "memory: inputs are mapped (except compressed .npz members), and large tensors computed a slab of rows "
        "at a time.",
        epilog="Run with --spec SPEC --help to see the options of one spec.",
    )
    p.add_argument("input", metavar="INPUT", help="tensor file: .npy, .npz or .safetensors")
    p.add_argument("output", metavar="OUTPUT", help="where to write the result (.npy, .npz or .safetensors)")
    p.add_argument("--spec", required=True, choices=sorted(SPECS),
                   help="which specification to follow: " + "; ".join(f"{k}: {v[1]}" for k, v in SPECS.items()))
    p.add_argument("--tensor", action="append", metavar="NAME",
                   help="process only this tensor of a multi-tensor file (repeatable); default: all")
    if spec is not None:
        group = p.add_argument_group(f"{spec} options")
        _spec_module(spec).add_arguments(group, direction)
    return p


def _elementwise(direction: str, argv: Sequence[str]) -> int:
    pre = argparse.ArgumentParser(prog=f"quantspec {direction}", add_help=False)
    pre.add_argument("--spec", choices=sorted(SPECS))
    known, _ = pre.parse_known_args(argv)
    parser = _elementwise_parser(direction, known.spec)
    args = parser.parse_args(argv)
    from ._tensorfiles import slabs
    from ._tensorfiles.tensorio import check_suffix, read_tensors, write_tensors

    check_suffix(args.output, "OUTPUT")
    tensors = read_tensors(args.input, mapped=True)
    if args.tensor:
        missing = [n for n in args.tensor if n not in tensors]
        if missing:
            raise QuantSpecError("--tensor", "names a tensor the input does not hold", missing[0] if len(missing) == 1 else missing,
                                 detail=f"it holds: {', '.join(tensors)}")
        tensors = {n: tensors[n] for n in args.tensor}
    from ._fastpath import jit

    # a small job: the numpy reference path (the same bytes) is done before numba would have loaded
    small = jit.prefer_reference(sum(int(t.size) for t in tensors.values()))
    with jit.reference_only() if small else contextlib.nullcontext():
        work, notes = _spec_module(args.spec).jobs(args, direction, tensors)
        # large tensors are computed a slab at a time while OUTPUT is written (quantspec._tensorfiles.slabs)
        notes += write_tensors(args.output, slabs.outputs(work))
    for note in notes:
        print(note, file=sys.stderr)
    return EXIT_OK


def _delegate(module: str, func: str, argv: Sequence[str]) -> int:
    return int(getattr(importlib.import_module(module), func)(list(argv)) or 0)


#: options of check / convert that take a value (to find the file among the arguments)
_VALUE_OPTIONS = ("--scheme", "--recipe", "--include", "--exclude", "--max-shard-size", "--format", "--dask",
                  "--calibration", "--quant-format", "--activation-type", "--weight-type", "--calibrate-method",
                  "--kernels")


def _first_file(argv: Sequence[str]) -> str | None:
    """The first positional argument, skipping options and their values; None when there is none."""
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a in _VALUE_OPTIONS:
            skip = True
        elif a == "--":
            continue
        elif not a.startswith("-") or a == "-":
            return a
    return None


def _check(argv: Sequence[str]) -> int:
    """``quantspec check MODEL``: a .tflite model to quantspec.litert's checker, an ONNX model to
    quantspec.onnxmodels', chosen by the file's content (quantspec.filetypes)."""
    from .filetypes import model_kind

    path = _first_file(argv)
    kind = model_kind(path) if path is not None and Path(path).is_file() else None
    if path is not None and Path(path).is_file() and kind is None:
        raise ModelError("MODEL", "is neither a .tflite model (no 'TFL3' file identifier at bytes 4..8) nor an "
                         "ONNX model (its first bytes are not those of a serialized ModelProto)", path)
    if kind == "tflite":
        return _delegate("quantspec.litert._cli", "check_main", argv)
    if kind is not None and any(a == "--kernels" or a.startswith("--kernels=") for a in argv):
        raise InvalidArgumentError("--kernels", "picks LiteRT's op resolvers, for a .tflite model only; MODEL is "
                                   "an ONNX model", path)
    return _delegate("quantspec.onnxmodels._cli", "check_main", argv)   # also --help, and a missing file


def _convert(argv: Sequence[str]) -> int:
    """``quantspec convert SRC DST``: an ONNX model to quantspec.onnxmodels' converter, any other SRC
    (a checkpoint directory, .safetensors, .npz, .npy) to quantspec.checkpoint's."""
    from .filetypes import is_onnx_source

    src = _first_file(argv)
    if src is not None and is_onnx_source(src):
        return _delegate("quantspec.onnxmodels._cli", "convert_main", argv)
    try:
        return _delegate("quantspec.checkpoint._cli", "main", argv)
    except SystemExit as e:      # --help: the checkpoint converter's, then a line on ONNX models
        if e.code == 0 and src is None:
            print("\nAn ONNX model: quantspec convert MODEL.onnx OUT.onnx --scheme NAME [--recipe FILE] "
                  "[--include GLOB] [--exclude GLOB] [--quiet] (quantspec convert MODEL.onnx OUT.onnx --help)")
        raise


COMMANDS = {
    "quantize": ("quantize tensors (see quantize --spec SPEC --help)", lambda a: _elementwise("quantize", a)),
    "dequantize": ("dequantize tensors (see dequantize --spec SPEC --help)", lambda a: _elementwise("dequantize", a)),
    "check": ("check a .tflite model against the LiteRT int8 spec, or an ONNX model's quantization nodes", _check),
    "audit": ("where onnxruntime and onnx.reference depart from the ONNX spec, node by node in a model",
              lambda a: _delegate("quantspec.onnxmodels._cli", "audit_main", a)),
    "run": ("run a .tflite model on quantspec's kernels", lambda a: _delegate("quantspec.litert._cli", "run_main", a)),
    "convert": ("quantize a whole checkpoint (safetensors, sharded or not), or an ONNX model's weights", _convert),
    "calibrate": ("an ONNX model's activation ranges and parameters, as onnxruntime's quantize_static calibrates",
                  lambda a: _delegate("quantspec.onnxmodels._cli", "calibrate_main", a)),
    "verify": ("check a quantized checkpoint against its float source, byte for byte",
               lambda a: _delegate("quantspec.checkpoint._cli", "verify_main", a)),
    "bench": ("side-by-side throughput against the installed peers", lambda a: _delegate("quantspec.bench", "main", a)),
    "equiv": ("translate a quantizer to another spec; prove over every input where the two differ",
              lambda a: _delegate("quantspec.equiv.cli", "main", a)),
    "demo": ("the main job: quantize a bundled tensor under several schemes, check and run a bundled model",
             lambda a: _delegate("quantspec.demo", "main", a)),
    "warmup": ("compile every fast kernel ahead of time (once per machine)",
               lambda a: _delegate("quantspec.warmup", "main", a)),
    "example": ("write the files the README's shell examples use into a directory",
                lambda a: _delegate("quantspec.examples", "main", a)),
    "versions": ("installed and verified versions of each runtime quantspec reproduces; fast path state",
                 lambda a: _delegate("quantspec.versions", "main", a)),
}


def _usage() -> str:
    lines = [f"quantspec {__version__}: bit-exact TensorFlow, ONNX and LiteRT quantization", "",
             "usage: quantspec COMMAND [options]   (quantspec COMMAND --help for details)", "", "commands:"]
    lines += [f"  {name:<11} {text}" for name, (text, _) in COMMANDS.items()]
    return "\n".join(lines)


def _closed_pipe() -> int:
    """The reader of stdout went away (``quantspec demo | head``): stop quietly, as a command killed by
    SIGPIPE would, with its exit status 141; stdout is pointed at /dev/null so that Python's flush at
    exit does not complain a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # pragma: no cover - stdout without a file descriptor
        pass
    return EXIT_CLOSED_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return EXIT_OK if argv else EXIT_BAD_INPUT
    if argv[0] in ("-V", "--version"):
        print(__version__)
        return EXIT_OK
    cmd, rest = argv[0], argv[1:]
    if cmd not in COMMANDS:
        print(f"quantspec: unknown command {cmd!r}\n\n{_usage()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from ._fastpath import jit
    from ._tensorfiles.termination import Terminated, unwinding

    # once, on stderr, if this command compiles a kernel (warmup says what it compiles itself)
    announcing = jit.announce_compiles() if cmd != "warmup" else contextlib.nullcontext()
    try:
        with unwinding(), announcing:  # SIGTERM / SIGHUP clean up like Ctrl-C
            return COMMANDS[cmd][1](rest)
    except QuantSpecError as e:
        print(f"quantspec {cmd}: error: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"quantspec {cmd}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _closed_pipe()
    except Terminated as e:
        print(f"quantspec {cmd}: terminated by {e.name}", file=sys.stderr)
        return 128 + e.signum


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
