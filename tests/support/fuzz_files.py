"""The file formats the mutation fuzzer (tests/test_fuzz_files.py) damages, and how to make and read
each.  A format is a :class:`Format`: valid seed files, quantspec's reader (which must either read a
damaged file or raise the format's quantspec error), and optionally another reader to compare with
where both read the file.

**Adding a format** (a checkpoint directory, an .onnx model): add a :class:`Format` to
:data:`FORMATS` (tensor-like files) or :data:`MODEL_FORMATS` (models).  ``seeds()`` returns valid
files as ``{name: bytes}``; for a directory layout, make each seed the bytes of one of its files and
let ``read`` rebuild the directory around the damaged file (``Format.suffix`` names the file that is
damaged).  Nothing else needs to change: the mutation operators, the outcome rule and the sizes are
shared.
"""

from __future__ import annotations

import functools
import io
import json
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from quantspec.errors import ModelError, QuantSpecError, TensorFileError


@dataclass(frozen=True)
class Format:
    name: str
    suffix: str
    seeds: Callable[[], dict[str, bytes]]
    read: Callable[[Path, bool], Any]                 # (path, mapped) -> anything; raises ``error``
    error: type[QuantSpecError]
    oracle: Callable[[Path], Any] | None = None       # another reader (raises where it cannot read)
    same: Callable[[Any, Any], bool] | None = None    # oracle's value vs quantspec's


# -- mutation operators ------------------------------------------------------------------------

INTERESTING = [b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", b"\xff\xff\xff\x7f", b"\x00\x00\x00\x80",
               b"\x01\x00\x00\x00", b"\x04\x00", b"\xff\xff", b"\x00\x00\x01\x00", b"\x00" * 8, b"\xff" * 8]
TEXT = [b"9999999999999999999", b"-1", b"null", b"[]", b"{}", b'"', b"\\u0000", b"1e400", b"0.5", b"true",
        b"'<f4'", b"'>f8'", b"'|V3'", b"(2**62,)", b"'fortran_order': True", b"F8_E4M3", b"BF16", b"U64"]


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to six random edits: bit flips, byte values, interesting integers, textual tokens (for the
    JSON / Python-literal headers), copied chunks, deletions, insertions, truncation."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        if not b:
            break
        k = rng.randrange(len(b))
        r = rng.random()
        if r < 0.3:
            b[k] ^= 1 << rng.randrange(8)
        elif r < 0.45:
            b[k] = rng.randrange(256)
        elif r < 0.6:
            v = rng.choice(INTERESTING)
            b[k:k + len(v)] = v
        elif r < 0.72:
            v = rng.choice(TEXT)
            b[k:k + (len(v) if rng.random() < 0.5 else rng.randint(0, 4))] = v
        elif r < 0.82:
            j, n = rng.randrange(len(b)), rng.randint(2, 32)
            b[k:k + n] = b[j:j + n]
        elif r < 0.9:
            del b[k:k + rng.randint(1, 8)]
        elif r < 0.95:
            b[k:k] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        else:
            del b[k:]
    return bytes(b)


# -- tensor files ------------------------------------------------------------------------------

def _seed_tensors() -> list[dict[str, np.ndarray]]:
    from quantspec.dtypes import qtype

    rng = np.random.default_rng(7)
    sets = []
    for names in (["float", "int8", "int4"], ["float16", "bfloat16", "uint4", "float8e4m3fn"],
                  ["int32", "uint16", "float8e5m2", "float4e2m1", "int2"], ["double", "int64", "bool"]):
        tensors = {}
        for i, n in enumerate(names):
            t = qtype(n)
            shape = [(), (0,), (3,), (2, 5), (1, 2, 3)][i % 5]
            count = int(np.prod(shape, dtype=np.int64))
            if t.dtype == np.bool_:
                a = rng.integers(0, 2, count).astype(bool)
            elif t.kind == "int":
                a = rng.integers(int(t.qmin), int(t.qmax) + 1, count).astype(t.storage).astype(t.dtype)
            else:
                a = rng.standard_normal(count).astype(np.float32).astype(t.dtype)
            tensors[f"t{i}.{n}"] = a.reshape(shape)
        sets.append(tensors)
    return sets


def _written(suffix: str) -> dict[str, bytes]:
    import tempfile

    from quantspec._tensorfiles.tensorio import write_tensors

    out = {}
    with tempfile.TemporaryDirectory() as d:
        for i, tensors in enumerate(_seed_tensors()):
            if suffix == ".npy":
                tensors = {k: v for k, v in list(tensors.items())[-1:]}
            p = Path(d) / f"s{i}{suffix}"
            write_tensors(p, tensors)
            out[p.name] = p.read_bytes()
        if suffix == ".npz":        # numpy's own writer too (compressed, with a pickle-free object)
            buf = io.BytesIO()
            np.savez_compressed(buf, a=np.arange(12, dtype=np.float32).reshape(3, 4), b=np.int8(3))
            out["numpy_compressed.npz"] = buf.getvalue()
        if suffix == ".npy":
            buf = io.BytesIO()
            np.save(buf, np.arange(6, dtype=">f8").reshape(2, 3).T)
            out["numpy_bigendian_fortran.npy"] = buf.getvalue()
    return out


def read_tensor_file(path: Path, mapped: bool) -> dict[str, tuple]:
    """quantspec's reader, every value touched (a mapped array is read to the end: a page beyond the
    end of a truncated file would be a SIGBUS)."""
    from quantspec._tensorfiles.tensorio import read_tensors

    tensors = read_tensors(path, mapped=mapped)
    out = {}
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a).reshape(-1).view(np.uint8) if a.size else np.zeros(0, np.uint8)
        out[name] = (str(a.dtype), a.shape, bytes(raw))
    return out


def numpy_reader(path: Path) -> dict[str, tuple]:
    with np.load(path, allow_pickle=False) as f:
        items = f.items() if hasattr(f, "items") else [(path.stem, f)]
        return {k: (str(v.dtype), v.shape, np.ascontiguousarray(v).tobytes()) for k, v in items}


def npy_reader(path: Path) -> dict[str, tuple]:
    v = np.load(path, allow_pickle=False)
    return {path.stem: (str(v.dtype), v.shape, np.ascontiguousarray(v).tobytes())}


def same_as_numpy(want: dict, got: dict) -> bool:
    """numpy stores quantspec's types as their storage (bit patterns / values): compare those."""
    from quantspec._tensorfiles.tensorio import to_storage

    if set(want) - {"__quantspec_dtypes__"} != set(got):
        return False
    for k, (dtype, shape, raw) in got.items():
        wd, ws, wr = want[k]
        if ws != shape:
            return False
        if wd == dtype and wr == raw:
            continue
        a = np.frombuffer(raw, np.dtype(dtype) if not dtype.startswith(("int", "uint", "float", "bfloat"))
                          or hasattr(np, dtype) else getattr(ml_dtypes, dtype)).reshape(shape) \
            if raw or not shape else np.zeros(shape, getattr(ml_dtypes, dtype, dtype))
        s = to_storage(a)
        w = np.frombuffer(wr, np.dtype(wd)).reshape(ws) if wr else np.zeros(ws, np.dtype(wd))
        if w.dtype.newbyteorder("=") != s.dtype or not np.array_equal(w.astype(s.dtype), s):
            return False
    return True


def safetensors_reader(path: Path) -> dict[str, tuple]:
    from safetensors.numpy import load_file

    return {k: (str(v.dtype), v.shape, np.ascontiguousarray(v).tobytes()) for k, v in load_file(str(path)).items()}


def same_as_safetensors(want: dict, got: dict) -> bool:
    """The safetensors package knows fewer types (it gives quantspec's narrow types as their storage
    or not at all): compare the bytes of each tensor both read, and where quantspec reads a narrow
    type the package gives as its storage type (int4 as int8), the values (int4 -1 is the byte 0x0F
    in ml_dtypes, int8 -1 the byte 0xFF)."""
    from quantspec.dtypes import qtype

    if set(want) != set(got):
        return False
    for k in got:
        (wt, ws, wb), (gt, gs, gb) = want[k], got[k]
        if ws != gs:
            return False
        if wt != gt:
            values = np.frombuffer(gb, qtype(gt).dtype).astype(np.dtype(wt))
            if values.tobytes() != wb:
                return False
        elif wb != gb:
            return False
    return True


FORMATS: dict[str, Format] = {
    ".npy": Format(".npy", ".npy", functools.partial(_written, ".npy"), read_tensor_file, TensorFileError,
                   npy_reader, same_as_numpy),
    ".npz": Format(".npz", ".npz", functools.partial(_written, ".npz"), read_tensor_file, TensorFileError,
                   numpy_reader, same_as_numpy),
    ".safetensors": Format(".safetensors", ".safetensors", functools.partial(_written, ".safetensors"),
                           read_tensor_file, TensorFileError, safetensors_reader, same_as_safetensors),
}


# -- models ------------------------------------------------------------------------------------

def _tflite_seeds() -> dict[str, bytes]:
    from litert_models import EXAMPLES, example_bytes, externalize_buffers

    seeds = {f"{n}.tflite": example_bytes(n) for n in sorted(EXAMPLES)}
    seeds["mlp_softmax_external.tflite"] = externalize_buffers(example_bytes("mlp_softmax"))
    return seeds


def read_tflite(path: Path, mapped: bool = False):
    """Load and check; the report must render (both are the outcome)."""
    from quantspec.litert import check_model, load_model

    model = load_model(path)
    report = check_model(model)
    report.render()
    json.dumps(report.to_json())
    return model, report


MODEL_FORMATS: dict[str, Format] = {
    ".tflite": Format(".tflite", ".tflite", _tflite_seeds, read_tflite, ModelError),
}


def header_json_lengths(data: bytes) -> int | None:
    """A safetensors file's declared header length (for targeted mutations), or None."""
    if len(data) < 8:
        return None
    return struct.unpack_from("<Q", data)[0]
