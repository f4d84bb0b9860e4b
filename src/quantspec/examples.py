"""``quantspec example [DIR]``: write the files the README's shell examples use.

Writes into ``DIR`` (default: the current directory; made if missing), from data that ships with
quantspec:

- ``weights.npy``: the bundled weight tensor of ``quantspec demo`` (float32, 128 x 256);
- ``acts.npy``: activations, float32, 4096 values drawn from a seeded normal distribution;
- ``model.tflite``: the bundled int8 model ``mlp_softmax.tflite`` (FULLY_CONNECTED, FULLY_CONNECTED,
  SOFTMAX; int8 in and out);
- ``x.npy``: an input for that model (int8, its input shape, seeded).

Existing files of those names are replaced (each written to a temporary name and renamed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

import numpy as np

__all__ = ["main", "write_examples", "FILES"]

FILES = ("weights.npy", "acts.npy", "model.tflite", "x.npy")


def _atomic(path: str, write) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".quantspec-", suffix=os.path.splitext(path)[1], dir=directory)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)                 # (mkstemp makes it private)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_examples(directory: str = ".") -> list[str]:
    """Write the example files into ``directory``; their paths."""
    from .demo import load_demo_weights
    from .litert.model import example_model, load_model

    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(2026)
    model = example_model("mlp_softmax.tflite")
    shape = load_model(model).main.tensors[load_model(model).inputs[0]].shape
    arrays = {
        "weights.npy": load_demo_weights().astype(np.float32),
        "acts.npy": rng.normal(0, 2, 4096).astype(np.float32),
        "x.npy": rng.integers(-128, 128, shape, dtype=np.int8),
    }
    paths = []
    for name in FILES:
        path = os.path.join(directory, name)
        if name == "model.tflite":
            _atomic(path, lambda tmp: shutil.copyfile(model, tmp))
        else:
            _atomic(path, lambda tmp, a=arrays[name]: np.save(tmp, a))
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="quantspec example", epilog="Files: " + ", ".join(FILES),
        description="Write the files the README's shell examples use (a weight tensor, activations, a bundled "
        "int8 model and an input for it) into DIR.")
    parser.add_argument("directory", nargs="?", default=".", metavar="DIR",
                        help="where to write them (default: the current directory)")
    args = parser.parse_args(argv)
    try:
        paths = write_examples(args.directory)
    except OSError as e:
        print(f"quantspec example: error: cannot write to {args.directory!r}: {e.strerror or e}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0
