"""Which versions quantspec reproduces, and which versions are installed.

Every claim quantspec makes ("bit for bit as onnxruntime") is about a named version of the runtime.
This module holds those versions as data (:data:`VERIFIED`), reads what is installed
(:func:`installed`), and warns once per process when a runtime that quantspec is asked to reproduce
is installed at a version the test suite has not checked (:func:`note_reproducing`).

The behaviours that quantspec follows from a dependency at run time live here too, chosen by the
installed version:

- :func:`ml_dtypes_invalid_int`: what ml_dtypes' cast of one of its float types (bfloat16) to an
  integer type gives for NaN, ±inf and values out of the integer's range.  onnx.reference computes
  ``np.rint(q).astype(np.int32)`` through that cast, so ``compat="reference"`` follows it.

``quantspec versions`` prints :func:`report`.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Runtime", "RUNTIMES", "LIBRARIES", "VERIFIED", "UnverifiedVersionWarning", "installed",
           "is_verified", "note_reproducing", "report", "ml_dtypes_invalid_int", "version_tuple"]


@dataclass(frozen=True)
class Runtime:
    """A package whose arithmetic quantspec reproduces or relies on."""

    distribution: str           # the name pip installs it by (the first that is installed counts)
    what: str                   # what quantspec reproduces of it, or why it matters
    alternatives: tuple[str, ...] = ()   # other distributions of the same module
    checked_by: str = ""        # the test suites that compare quantspec with it


#: the libraries quantspec computes with (core dependencies)
LIBRARIES = (
    Runtime("numpy", "array arithmetic of every path", checked_by="the whole suite"),
    Runtime("ml_dtypes", "bfloat16, float8, float6, float4 and int4 types; compat=\"reference\" follows "
                         "its float-to-integer casts", checked_by="the whole suite; the ONNX reference "
                         "conformance under each verified version"),
    Runtime("numba", "the fast path (compiled kernels)", checked_by="the fast-path equality suites"),
)

#: the runtimes quantspec reproduces
RUNTIMES = (
    Runtime("onnx", "compat=\"reference\": onnx.reference's QuantizeLinear / DequantizeLinear",
            checked_by="ONNX conformance (reference), backend tests"),
    Runtime("onnxruntime", "compat=\"onnxruntime\": onnxruntime's CPU QuantizeLinear / DequantizeLinear; "
                           "the audit and the converters' checks; calibration",
            checked_by="ONNX conformance (onnxruntime), divergences, calibration, model tools"),
    Runtime("tensorflow-cpu", "quantspec.tf: the Eigen and oneDNN CPU kernels", ("tensorflow",),
            checked_by="TensorFlow conformance (Eigen in process, oneDNN in a subprocess)"),
    Runtime("ai-edge-litert", "quantspec.litert: BUILTIN_REF, the optimized kernels and XNNPACK",
            checked_by="LiteRT kernels, models and zoo in the three resolvers"),
    Runtime("compressed-tensors", "the compressed-tensors checkpoint layout and its arithmetic",
            checked_by="compressed-tensors layout: decompression and arithmetic"),
    Runtime("llmcompressor", "the compressed-tensors presets: model_free_ptq's checkpoints, byte for byte",
            checked_by="presets against llm-compressor in an environment of its own (with compressed-tensors "
                       "0.19.0, which its release requires)"),
)

#: versions the test suite has compared quantspec against (byte for byte, on its conformance corpora).
#: The locked test environment (requirements/test.lock) holds the first of each; the others are
#: checked by the subprocess tests that swap the package (ml_dtypes) or by ``./dev test-latest``.
VERIFIED: dict[str, tuple[str, ...]] = {
    "numpy": ("2.4.6",),
    "ml_dtypes": ("0.7.0", "0.6.0"),
    "numba": ("0.68.1",),
    "onnx": ("1.23.2",),
    "onnxruntime": ("1.31.1", "1.32.0"),
    "tensorflow-cpu": ("2.21.0",),
    "ai-edge-litert": ("2.3.0",),
    "compressed-tensors": ("0.20.0", "0.20.1", "0.19.0"),
    "llmcompressor": ("0.14.0.1",),
}


class UnverifiedVersionWarning(UserWarning):
    """quantspec reproduces a runtime whose installed version the test suite has not checked."""


def version_tuple(version: str) -> tuple[int, ...]:
    """``"1.31.1"`` -> ``(1, 31, 1)``; a suffix such as ``rc1`` or ``+cpu`` is dropped."""
    parts = []
    for piece in version.split("+")[0].split("."):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
    return tuple(parts)


@functools.lru_cache(maxsize=None)
def _installed(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _entry(name: str) -> Runtime | None:
    for r in LIBRARIES + RUNTIMES:
        if name == r.distribution or name in r.alternatives:
            return r
    return None


def installed(name: str) -> str | None:
    """The installed version of a library or runtime (by the name pip installs it by), or None."""
    entry = _entry(name)
    names = (entry.distribution,) + entry.alternatives if entry else (name,)
    for dist in names:
        v = _installed(dist)
        if v is not None:
            return v
    return None


def is_verified(name: str, version: str | None = None) -> bool:
    """Whether ``version`` (default: the installed one) of ``name`` is among the verified ones."""
    entry = _entry(name)
    key = entry.distribution if entry else name
    version = installed(name) if version is None else version
    return version is not None and version_tuple(version) in {version_tuple(v) for v in VERIFIED.get(key, ())}


_warned: set[str] = set()


def note_reproducing(name: str) -> None:
    """Called where quantspec reproduces runtime ``name``: one :class:`UnverifiedVersionWarning` per
    process when it is installed at a version that is not verified (nothing when it is not installed:
    quantspec then reproduces the verified version)."""
    if name in _warned:
        return
    _warned.add(name)
    version = installed(name)
    if version is None or is_verified(name, version):
        return
    entry = _entry(name)
    key = entry.distribution if entry else name
    warnings.warn(f"{key} {version} is installed; quantspec reproduces {key} "
                  f"{', '.join(VERIFIED.get(key, ()))} (verified by its test suite), so results may "
                  f"differ from this version's. 'quantspec versions' lists what is verified.",
                  UnverifiedVersionWarning, stacklevel=3)


@functools.lru_cache(maxsize=None)
def ml_dtypes_invalid_int() -> int:
    """What ml_dtypes' cast of a bfloat16 (or another of its float types) to int32 gives for NaN,
    ±inf and values outside [-2^31, 2^31): the most negative int32 up to ml_dtypes 0.6 (the x86
    conversion of a float), 0 from 0.7.  Checked against 0.6.0 and 0.7.0 over every bfloat16 value."""
    v = installed("ml_dtypes")
    if v is not None and version_tuple(v) >= (0, 7):
        return 0
    return -(2 ** 31)


def verified_table() -> str:
    """The docs' table of verified versions (docs/versions.md, refreshed by tools/gendocs.py)."""
    rows = ["| package | what quantspec reproduces or relies on | verified versions | checked by |",
            "|---|---|---|---|"]
    for r in LIBRARIES + RUNTIMES:
        rows.append(f"| {r.distribution} | {r.what} | {', '.join(VERIFIED.get(r.distribution, ()))} | {r.checked_by} |")
    return "\n".join(rows) + "\n"


def _fast_state() -> dict:
    from ._fastpath import jit

    state = {"enabled": bool(jit.enabled())}
    if os.environ.get("QUANTSPEC_FAST") == "0":
        state["why"] = "QUANTSPEC_FAST=0"
    elif not state["enabled"]:
        state["why"] = "numba is not importable"
    # each subpackage's kernels are cached in a directory of their own: the one of the core kernels
    # says where (a package's __pycache__, $NUMBA_CACHE_DIR or the per-user cache directory)
    core = Path(__file__).resolve().parent / "_fastpath" / "runner.py"
    state["cache_dir"] = str(jit.cache_dir(core))
    return state


def report() -> dict:
    """What ``quantspec versions --json`` prints: each library and runtime with its installed version
    (None: not installed), the verified versions and whether the installed one is among them; the
    fast path's state and the compile cache's location."""
    from . import __version__

    def row(r: Runtime) -> dict:
        v = installed(r.distribution)
        return {"name": r.distribution, "installed": v, "verified_versions": list(VERIFIED.get(r.distribution, ())),
                "verified": None if v is None else is_verified(r.distribution, v), "reproduces": r.what}

    return {"quantspec": __version__, "libraries": [row(r) for r in LIBRARIES],
            "runtimes": [row(r) for r in RUNTIMES], "fast_path": _fast_state()}


def _text(rep: dict) -> str:
    def line(row: dict) -> str:
        verified = ", ".join(row["verified_versions"]) or "-"
        if row["installed"] is None:
            state = f"not installed (quantspec reproduces {verified})"
        elif row["verified"]:
            state = "verified"
        else:
            state = f"NOT VERIFIED (verified: {verified})"
        return f"  {row['name']:<20} {row['installed'] or '-':<12} {state}"

    fast = rep["fast_path"]
    lines = [f"quantspec {rep['quantspec']}", "libraries:"] + [line(r) for r in rep["libraries"]]
    lines += ["runtimes quantspec reproduces:"] + [line(r) for r in rep["runtimes"]]
    lines += [f"fast path: {'on' if fast['enabled'] else 'off'}" + (f" ({fast['why']})" if fast.get("why") else ""),
              f"compile cache: {fast['cache_dir']}"]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """``quantspec versions [--json]``."""
    import argparse
    import json

    p = argparse.ArgumentParser(prog="quantspec versions",
                                description="The installed versions of numpy, ml_dtypes, numba and each runtime "
                                "quantspec reproduces; which are verified by quantspec's test suite; whether the "
                                "fast path is on; where compiled kernels are cached.")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    args = p.parse_args(argv)
    rep = report()
    print(json.dumps(rep, indent=2) if args.json else _text(rep))
    return 0
