"""What the command-line halves of the ``quantspec`` command share (:mod:`quantspec.litert._cli`,
:mod:`quantspec.onnxmodels._cli`): the exit statuses, argparse without its ``SystemExit``, the
``--random`` seed type and the reading of ``--input`` files."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from .errors import InvalidArgumentError

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT = 0, 1, 2


def parse(parser: argparse.ArgumentParser, argv: Sequence[str]):
    """argparse exits on --help and on usage errors; turn that into a return value."""
    try:
        return parser.parse_args(list(argv)), None
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else EXIT_BAD_INPUT)
        return None, code


def seed(text: str) -> int:
    """The value of --random: a seed numpy's generators take, a non-negative integer."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer seed (got {text!r})") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer seed (got {value})")
    return value


def read_input_files(files: list[str]):
    """The tensors of --input files: ``(arrays, named)``, the .npy files' tensors in order and the
    .npz / .safetensors files' tensors by name; giving both kinds is an error."""
    from ._tensorfiles.tensorio import read_tensors

    arrays: list = []
    named: dict = {}
    for f in files:
        tensors = read_tensors(f)
        if Path(f).suffix.lower() == ".npy":
            arrays.extend(tensors.values())
        else:
            named.update(tensors)
    if arrays and named:
        raise InvalidArgumentError("--input", "give either .npy files (one per input, in order) or .npz/.safetensors "
                                   "files (inputs by name), not both")
    return arrays, named
