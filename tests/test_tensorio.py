"""Tensor files: exact round trips of every type through .npy/.npz/.safetensors, atomic writes, and
clear errors for malformed files."""

import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import quantspec.onnx as qo
from quantspec._tensorfiles import tensorio
from quantspec.dtypes import TABLE
from quantspec.errors import TensorFileError

TYPES = [t for t in TABLE if t.name not in ("bool",)]


def _sample(t, shape=(3, 5)):
    rng = np.random.default_rng(len(t.name))
    n = int(np.prod(shape))
    if t.is_int:
        return rng.integers(int(t.qmin), int(t.qmax), size=n, endpoint=True).astype(t.storage).astype(t.dtype).reshape(shape)
    if t.bits <= 16:
        return rng.integers(0, 1 << t.bits, size=n).astype(t.storage).view(t.dtype).reshape(shape)
    return rng.normal(size=shape).astype(t.dtype)


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_round_trip_keeps_exact_types(tmp_path, suffix):
    tensors = {t.name: _sample(t) for t in TYPES}
    path = tmp_path / f"all{suffix}"
    tensorio.write_tensors(path, tensors)
    back = tensorio.read_tensors(path)
    assert set(back) == set(tensors)
    for name, a in tensors.items():
        assert back[name].dtype == a.dtype and back[name].tobytes() == a.tobytes(), name


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
def test_npy_stores_plain_storage_with_a_note(tmp_path, t):
    a = _sample(t)
    notes = tensorio.write_tensors(tmp_path / "a.npy", {"a": a})
    raw = np.load(tmp_path / "a.npy")
    assert raw.dtype == t.storage
    assert (notes != []) == (t.dtype != t.storage)
    assert tensorio.from_storage(raw, t).tobytes() == a.tobytes()


def test_safetensors_file_is_standard(tmp_path):
    import safetensors.numpy as safetensors  # a test dependency: the files must load with the reference reader
    tensorio.write_tensors(tmp_path / "x.safetensors", {"w": np.arange(6, dtype=np.float32).reshape(2, 3),
                                                         "q": np.array([1, -2], np.int8)})
    loaded = safetensors.load_file(str(tmp_path / "x.safetensors"))
    assert loaded["w"].tolist() == [[0, 1, 2], [3, 4, 5]] and loaded["q"].tolist() == [1, -2]


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".safetensors"])
def test_interrupted_write_leaves_the_old_file(tmp_path, suffix):
    path = tmp_path / f"out{suffix}"
    tensorio.write_tensors(path, {"a": np.arange(3, dtype=np.int8)})
    before = path.read_bytes()

    def pieces():
        yield np.arange(50, dtype=np.int8)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tensorio.write_tensors(path, {"a": tensorio.Stream((100,), np.dtype(np.int8), pieces())})
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def _safetensors_bytes(header: dict, data: bytes) -> bytes:
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


@pytest.mark.parametrize("content,fragment", [
    (b"", "too short"),
    (struct.pack("<Q", 10 ** 9) + b"{}", "header longer than the file"),
    (struct.pack("<Q", 4) + b"nope", "not JSON"),
    (_safetensors_bytes([1, 2], b""), "not a JSON object"),
    (_safetensors_bytes({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 8), "do not fit"),
    (_safetensors_bytes({"a": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8), "cannot read"),
    (_safetensors_bytes({"a": {"dtype": "F32"}}, b""), "malformed header entry"),
])
def test_malformed_safetensors(tmp_path, content, fragment):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(content)
    with pytest.raises(TensorFileError, match=fragment):
        tensorio.read_tensors(p)


def _raw_safetensors(header: bytes, data: bytes) -> bytes:
    return struct.pack("<Q", len(header)) + header + data


def _f32(shape, offsets):
    return {"dtype": "F32", "shape": shape, "data_offsets": offsets}


@pytest.mark.parametrize("content,fragment", [
    # two tensors over the same bytes (a polyglot file): the safetensors reader refuses it
    (_safetensors_bytes({"a": _f32([2], [0, 8]), "b": _f32([2], [0, 8])}, b"\0" * 8), "'b'.*overlap"),
    (_safetensors_bytes({"a": _f32([1], [4, 8])}, b"\0" * 8), "'a'.*leave a gap"),
    (_safetensors_bytes({"a": _f32([1], [0, 4])}, b"\0" * 8), "data after its last tensor"),
    # a name given twice: json keeps the last one silently
    (_raw_safetensors(b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                      b'"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 8), "names a key twice.*'a'"),
    # shapes and offsets that are not lists of non-negative integers: int() used to accept them
    (_safetensors_bytes({"a": _f32([2.5], [0, 8])}, b"\0" * 8), "malformed header entry"),
    (_safetensors_bytes({"a": _f32("12", [0, 8])}, b"\0" * 8), "malformed header entry"),
    (_safetensors_bytes({"a": _f32([True], [0, 4])}, b"\0" * 4), "malformed header entry"),
    (_safetensors_bytes({"a": _f32([1], ["0", "4"])}, b"\0" * 4), "malformed header entry"),
    (_safetensors_bytes({"a": {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4),
     "malformed header entry"),
    # a shape whose element count overflows int64 to the data's length
    (_safetensors_bytes({"a": _f32([2 ** 62 + 1, 4], [0, 16])}, b"\0" * 16), "do not fit"),
    (_safetensors_bytes({"__metadata__": [1], "a": _f32([1], [0, 4])}, b"\0" * 4), "__metadata__ that is not"),
    (_safetensors_bytes({"__metadata__": {"quantspec.dtype.a": {}}, "a": _f32([1], [0, 4])}, b"\0" * 4),
     "__metadata__ that is not"),
], ids=["overlap", "gap", "trailing", "duplicate", "float-shape", "string-shape", "bool-shape", "string-offsets",
        "list-dtype", "overflowing-shape", "list-metadata", "object-metadata-value"])
def test_safetensors_header_is_checked_as_the_format_requires(tmp_path, content, fragment):
    """What the reference safetensors reader refuses, quantspec refuses with a TensorFileError
    instead of reading a wrong shape, a tensor twice or a raw TypeError."""
    import safetensors.numpy as safetensors
    p = tmp_path / "bad.safetensors"
    p.write_bytes(content)
    for mapped in (False, True):
        with pytest.raises(TensorFileError, match=fragment):
            tensorio.read_tensors(p, mapped=mapped)
    with pytest.raises(Exception):
        safetensors.load(content)


def test_safetensors_tensors_in_any_order_and_empty_ones(tmp_path):
    """Tiling is checked in offset order, not header order; empty tensors take no bytes."""
    data = np.arange(3, dtype=np.float32).tobytes()
    p = tmp_path / "ok.safetensors"
    p.write_bytes(_safetensors_bytes({"b": _f32([2], [4, 12]), "e": _f32([0, 3], [4, 4]), "a": _f32([1], [0, 4])},
                                     data))
    got = tensorio.read_tensors(p)
    assert got["a"].tolist() == [0.0] and got["b"].tolist() == [1.0, 2.0] and got["e"].shape == (0, 3)


@pytest.mark.parametrize("suffix,content", [(".npy", b"not numpy"), (".npz", b"PK\x03\x04 broken"),
                                            (".npy", b"\x93NUMPY\x01\x00")])
def test_malformed_numpy_files(tmp_path, suffix, content):
    p = tmp_path / f"bad{suffix}"
    p.write_bytes(content)
    with pytest.raises(TensorFileError, match="is not a readable"):
        tensorio.read_tensors(p)


def test_wrong_paths(tmp_path):
    with pytest.raises(TensorFileError, match="must name an existing file"):
        tensorio.read_tensors(tmp_path / "missing.npy")
    with pytest.raises(TensorFileError, match="must end in one of"):
        tensorio.read_tensors(tmp_path / "x.csv")
    with pytest.raises(TensorFileError, match="exactly one tensor"):
        tensorio.write_tensors(tmp_path / "x.npy", {"a": np.zeros(1), "b": np.zeros(1)})


def test_from_storage_checks_values():
    with pytest.raises(TensorFileError, match=r"int4 values must lie in \[-8, 7\]"):
        tensorio.from_storage(np.array([9], np.int8), tensorio.qtype("int4"))
    with pytest.raises(TensorFileError, match="bit patterns"):
        tensorio.from_storage(np.array([1.0]), tensorio.qtype("float8e4m3fn"))
    assert tensorio.from_storage(np.array([0x38], np.uint8), tensorio.qtype("float8e4m3fn")).astype(float)[0] == 1.0
    assert ml_dtypes.float8_e4m3fn == tensorio.from_storage(np.array([0], np.uint8), tensorio.qtype("e4m3fn")).dtype


# -- streams and mapped reading ------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".npy", ".npz", ".safetensors"])
def test_a_stream_writes_the_same_file_as_the_array(tmp_path, suffix):
    names = ["int4", "float8e4m3fn", "bfloat16", "float", "uint16"] if suffix != ".npy" else ["int4"]
    tensors = {n: _sample(tensorio.qtype(n), (7, 3)) for n in names}
    streams = {n: tensorio.Stream(a.shape, a.dtype, (a[:2], a[2:2], a[2:5], a[5:])) for n, a in tensors.items()}
    tensorio.write_tensors(tmp_path / f"whole{suffix}", tensors)
    tensorio.write_tensors(tmp_path / f"pieces{suffix}", streams)
    assert (tmp_path / f"whole{suffix}").read_bytes() == (tmp_path / f"pieces{suffix}").read_bytes()
    back = tensorio.read_tensors(tmp_path / f"pieces{suffix}")
    for n, a in tensors.items():
        b = back["pieces"] if suffix == ".npy" else back[n]
        assert tensorio.to_storage(b).tobytes() == tensorio.to_storage(a).tobytes()


@pytest.mark.parametrize("pieces,fragment", [
    ((np.zeros(5, np.int8),), "did not receive the elements of its shape"),
    ((np.zeros(6, np.int8), np.zeros(1, np.int8)), "did not receive the elements of its shape"),
    ((np.zeros(6, np.int16),), "changed type"),
])
@pytest.mark.parametrize("suffix", [".npy", ".npz", ".safetensors"])
def test_a_stream_that_breaks_its_promise_writes_nothing(tmp_path, suffix, pieces, fragment):
    with pytest.raises(TensorFileError, match=fragment):
        tensorio.write_tensors(tmp_path / f"x{suffix}", {"x": tensorio.Stream((2, 3), np.dtype(np.int8), pieces)})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".safetensors"])
def test_mapped_reading(tmp_path, suffix, monkeypatch):
    monkeypatch.setattr(tensorio, "MAP_FROM", 64)
    big = np.arange(4000, dtype=np.float32).reshape(100, 40)
    small = np.arange(6, dtype=np.int16)
    e4 = _sample(tensorio.qtype("float8e4m3fn"), (50, 40))
    tensors = {"big": big} if suffix == ".npy" else {"big": big, "small": small, "e4": e4}
    tensorio.write_tensors(tmp_path / f"big{suffix}", tensors)
    got = tensorio.read_tensors(tmp_path / f"big{suffix}", mapped=True)
    assert isinstance(got["big"], np.memmap) and not got["big"].flags.writeable
    for n, a in tensors.items():
        assert got[n].dtype == a.dtype and got[n].tobytes() == a.tobytes()
    if suffix != ".npy":
        assert not isinstance(got["small"], np.memmap) and isinstance(got["e4"], np.memmap)
    assert not isinstance(tensorio.read_tensors(tmp_path / f"big{suffix}")["big"], np.memmap)
    # pages given back are read again from the file
    tensorio.release(got["big"][10:90])
    tensorio.release(np.zeros(3))  # not mapped: nothing to do
    assert got["big"].tobytes() == big.tobytes()


@pytest.mark.parametrize("name", ["int4", "uint4", "int2", "uint2"])
@pytest.mark.parametrize("suffix", [".npy", ".npz", ".safetensors"])
def test_mapped_sub_byte_codes_are_a_view_of_the_file(tmp_path, suffix, name, monkeypatch):
    """int4/int2 codes stored a byte each are not copied when mapped (a file of any size): the
    array is a view of the file's bytes with the right values; a value out of range anywhere,
    the last element included, is still refused (read a slab at a time)."""
    monkeypatch.setattr(tensorio, "MAP_FROM", 64)
    monkeypatch.setattr(tensorio, "_SPAN_SLAB", 37)
    t = tensorio.qtype(name)
    a = _sample(t, (20, 30))
    a.reshape(-1)[[0, -1]] = [t.qmin, t.qmax]
    tensorio.write_tensors(tmp_path / f"c{suffix}", {"c": a})
    (got,) = tensorio.read_tensors(tmp_path / f"c{suffix}", mapped=True).values()
    if suffix == ".npy":
        got = tensorio.from_storage(got, t)
    assert isinstance(got, np.memmap) and got.dtype == a.dtype
    assert got.astype(np.int64).tolist() == a.astype(np.int64).tolist()
    assert np.array_equal(qo.dequantize_linear(got, np.float32(0.5)), qo.dequantize_linear(a, np.float32(0.5)))
    assert not isinstance(tensorio.read_tensors(tmp_path / f"c{suffix}")["c"] if suffix != ".npy"
                          else tensorio.from_storage(np.load(tmp_path / f"c{suffix}"), t), np.memmap)
    raw = tensorio.to_storage(a).copy()
    raw.reshape(-1)[-1] = t.qmax + 1
    np.save(tmp_path / "bad.npy", raw)
    with pytest.raises(TensorFileError, match=rf"{name} values must lie in \[{t.qmin}, {t.qmax}\]"):
        tensorio.from_storage(np.load(tmp_path / "bad.npy", mmap_mode="r"), t)


def test_npz_members_mapped_only_where_stored(tmp_path, monkeypatch):
    """np.savez members (stored, C or Fortran order) are mapped; np.savez_compressed ones are read."""
    monkeypatch.setattr(tensorio, "MAP_FROM", 64)
    a = np.arange(4000, dtype=np.float32).reshape(100, 40)
    f = np.asfortranarray(np.arange(600, dtype=np.int16).reshape(20, 30))
    np.savez(tmp_path / "plain.npz", a=a, f=f)
    np.savez_compressed(tmp_path / "packed.npz", a=a, f=f)
    plain = tensorio.read_tensors(tmp_path / "plain.npz", mapped=True)
    packed = tensorio.read_tensors(tmp_path / "packed.npz", mapped=True)
    assert isinstance(plain["a"], np.memmap) and isinstance(plain["f"], np.memmap) and plain["f"].flags.f_contiguous
    assert not isinstance(packed["a"], np.memmap)
    for got in (plain, packed):
        assert got["a"].tobytes() == a.tobytes() and np.array_equal(got["f"], f) and got["f"].dtype == f.dtype


def test_npz_member_shorter_than_its_header_says_is_refused_mapped_or_not(tmp_path, monkeypatch):
    import io
    import zipfile
    monkeypatch.setattr(tensorio, "MAP_FROM", 16)
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "<f4", "fortran_order": False, "shape": (1000,)})
    with zipfile.ZipFile(tmp_path / "short.npz", "w", zipfile.ZIP_STORED) as z:
        z.writestr("x.npy", head.getvalue() + b"\0" * 100)
    for mapped in (False, True):
        with pytest.raises(TensorFileError, match="is not a readable .npz file"):
            tensorio.read_tensors(tmp_path / "short.npz", mapped=mapped)


def test_file_system_failures_are_tensor_file_errors(tmp_path, monkeypatch):
    """No such directory, a directory in the way, no space: a TensorFileError naming the file, and
    no temporary file left behind."""
    with pytest.raises(TensorFileError, match="cannot be created: its directory must exist"):
        tensorio.write_tensors(tmp_path / "missing" / "x.npy", {"x": np.zeros(3)})
    (tmp_path / "d.npy").mkdir()
    with pytest.raises(TensorFileError, match="could not be written"):
        tensorio.write_tensors(tmp_path / "d.npy", {"x": np.zeros(3)})

    def full(f):
        raise OSError(28, "No space left on device")

    with pytest.raises(TensorFileError, match="could not be written.*No space left"):
        tensorio._atomic_with(tmp_path / "y.npy", full)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.npy"]


def test_truncated_files_are_refused_mapped_too(tmp_path, monkeypatch):
    monkeypatch.setattr(tensorio, "MAP_FROM", 1)
    np.save(tmp_path / "x.npy", np.arange(1000, dtype=np.float32))
    (tmp_path / "x.npy").write_bytes((tmp_path / "x.npy").read_bytes()[:-100])
    tensorio.write_tensors(tmp_path / "y.safetensors", {"y": np.arange(1000, dtype=np.float32)})
    (tmp_path / "y.safetensors").write_bytes((tmp_path / "y.safetensors").read_bytes()[:-100])
    for name, fragment in (("x.npy", "is not a readable .npy file"), ("y.safetensors", "the file is truncated")):
        with pytest.raises(TensorFileError, match=fragment):
            tensorio.read_tensors(tmp_path / name, mapped=True)


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".safetensors"])
def test_damaged_files_give_tensor_file_errors(tmp_path, suffix, monkeypatch):
    """Seeded damage (truncations, changed bytes) to a valid file: reading it, mapped or not, either
    works or raises TensorFileError; numpy's and zipfile's own exceptions (a tokenizer error from a
    damaged .npy header, NotImplementedError for an unknown zip method, TypeError, ...) never leak."""
    monkeypatch.setattr(tensorio, "MAP_FROM", 16)
    tensors = {"a": np.arange(60, dtype=np.float32).reshape(6, 10), "q": _sample(tensorio.qtype("int4"), (4, 4)),
               "b": np.arange(7, dtype=np.int16)}
    src = tmp_path / f"src{suffix}"
    tensorio.write_tensors(src, {"a": tensors["a"]} if suffix == ".npy" else tensors)
    raw = src.read_bytes()
    rng = np.random.default_rng(len(suffix))
    path = tmp_path / f"damaged{suffix}"
    for _ in range(400):
        b = bytearray(raw)
        if rng.integers(3) == 0:
            b = b[:rng.integers(len(b))]
        else:
            for _ in range(rng.integers(1, 4)):
                b[rng.integers(len(b))] = rng.integers(256)
        path.write_bytes(bytes(b))
        for mapped in (False, True):
            try:
                tensorio.read_tensors(path, mapped=mapped)
            except TensorFileError:
                pass


def test_npz_member_that_is_not_npy_is_refused(tmp_path):
    """np.load hands a member that is not .npy back as raw bytes; quantspec refuses the file with a
    TensorFileError naming the member (the command used to die of an AttributeError on the bytes)."""
    import io
    import zipfile

    from quantspec.cli import main
    buf = io.BytesIO()
    np.save(buf, np.ones(3, np.float32))
    with zipfile.ZipFile(tmp_path / "mixed.npz", "w") as z:
        z.writestr("readme.txt", "hello")
        z.writestr("a.npy", buf.getvalue())
    for mapped in (False, True):
        with pytest.raises(TensorFileError, match="member that is not a .npy array.*'readme.txt'"):
            tensorio.read_tensors(tmp_path / "mixed.npz", mapped=mapped)
    assert main(["quantize", str(tmp_path / "mixed.npz"), str(tmp_path / "q.npz"), "--spec", "onnx",
                 "--scale", "0.1"]) == 2
    assert not (tmp_path / "q.npz").exists()


def test_a_tensor_named_like_the_safetensors_metadata_is_refused(tmp_path):
    """A tensor named __metadata__ written to .safetensors was read back as the file's metadata: the
    tensor vanished (and the safetensors reader refused the file).  It is refused before anything
    is written, as .npz refuses quantspec's own type entry."""
    from quantspec.cli import main
    with pytest.raises(TensorFileError, match="named like the safetensors metadata entry"):
        tensorio.write_tensors(tmp_path / "m.safetensors", {"__metadata__": np.zeros(3, np.float32)})
    assert list(tmp_path.iterdir()) == []
    tensorio.write_tensors(tmp_path / "m.npz", {"__metadata__": np.zeros(3, np.float32)})
    assert main(["quantize", str(tmp_path / "m.npz"), str(tmp_path / "q.safetensors"), "--spec", "onnx",
                 "--scale", "0.1"]) == 2
    assert not (tmp_path / "q.safetensors").exists()


def test_npz_with_one_name_twice_is_refused(tmp_path, monkeypatch):
    """A zip file may hold two members of one name.  np.load reads the last one and the mapped reader
    the first large one, so the command's result depended on the member sizes; such a file is refused."""
    import io
    import warnings
    import zipfile
    monkeypatch.setattr(tensorio, "MAP_FROM", 64)

    def npy(a):
        buf = io.BytesIO()
        np.save(buf, a)
        return buf.getvalue()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name
        with zipfile.ZipFile(tmp_path / "dup.npz", "w") as z:
            z.writestr("a.npy", npy(np.arange(100, dtype=np.float32)))
            z.writestr("a.npy", npy(np.arange(3, dtype=np.float32)))
    for mapped in (False, True):
        with pytest.raises(TensorFileError, match="two members of one name.*'a'"):
            tensorio.read_tensors(tmp_path / "dup.npz", mapped=mapped)


def test_names_a_file_cannot_hold_are_refused(tmp_path):
    """zipfile cuts a member name at its first NUL: {'a\\0b', 'a\\0c'} was written as two members 'a'
    (rc 0, data mangled).  A name with a lone surrogate (JSON's \\udcff escape) died of a
    UnicodeEncodeError traceback writing .npz, and was written to .safetensors in a form the
    safetensors reader refuses; such a header is refused when read."""
    import safetensors.numpy as safetensors

    from quantspec.cli import main
    two = {"a\0b": np.ones(2, np.float32), "a\0c": np.zeros(2, np.float32)}
    with pytest.raises(TensorFileError, match="may not hold a NUL character"):
        tensorio.write_tensors(tmp_path / "n.npz", two)
    tensorio.write_tensors(tmp_path / "n.safetensors", two)  # JSON holds it: the names survive
    assert safetensors.load_file(str(tmp_path / "n.safetensors")).keys() == two.keys()
    assert tensorio.read_tensors(tmp_path / "n.safetensors").keys() == two.keys()
    assert main(["quantize", str(tmp_path / "n.safetensors"), str(tmp_path / "q.npz"), "--spec", "onnx",
                 "--scale", "0.1"]) == 2
    for suffix in (".npz", ".safetensors"):
        with pytest.raises(TensorFileError, match="must be UTF-8 text"):
            tensorio.write_tensors(tmp_path / f"s{suffix}", {"\udcff": np.ones(2, np.float32)})
    data = np.ones(1, np.float32).tobytes()
    (tmp_path / "s.safetensors").write_bytes(_raw_safetensors(
        b'{"\\udcff":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', data))
    with pytest.raises(TensorFileError, match="not UTF-8 text"):
        tensorio.read_tensors(tmp_path / "s.safetensors")
    with pytest.raises(Exception):
        safetensors.load_file(str(tmp_path / "s.safetensors"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.safetensors", "s.safetensors"]


# --- signals during a CLI write leave no temporary behind -----------------------------------------

SRC = str(Path(__file__).resolve().parents[1] / "src")

_SLOW_WRITER = textwrap.dedent("""
    import sys, time
    from quantspec._tensorfiles import tensorio
    real = tensorio._write_pieces
    def slow(f, *args, **kwargs):       # the write starts, then takes its time
        real(f, *args, **kwargs)
        f.flush()
        print("writing", flush=True)
        time.sleep(60)
    tensorio._write_pieces = slow
    from quantspec.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def _default_termination_signals() -> None:
    """The child starts with SIGINT / SIGTERM / SIGHUP at their defaults, whatever this test runs under
    (under ``nohup`` SIGHUP is ignored, a background job of a shell without job control ignores
    SIGINT, and quantspec, like Python, rightly leaves an ignored signal ignored)."""
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)


def _interrupted_write(tmp_path: Path, sig: int, suffix: str) -> tuple[int, set[str], str]:
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / f"y{suffix}"
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), QUANTSPEC_FAST="0")
    p = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, "quantize", str(tmp_path / "x.npy"), str(out),
                          "--spec", "onnx", "--scale", "0.01", "--output-dtype", "int8"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
                         preexec_fn=_default_termination_signals)
    try:
        assert p.stdout.readline() == "writing\n"
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    return p.returncode, set(os.listdir(tmp_path)), err


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGINT"])
@pytest.mark.parametrize("suffix", [".npy", ".safetensors"])
def test_a_terminated_write_leaves_nothing_behind(tmp_path, sig, suffix):
    """Found by fuzzing the command line: signals during a write leave no temporary file behind
    (and the command exits 128 + the signal with one line)."""
    code, left, err = _interrupted_write(tmp_path, getattr(signal, sig), suffix)
    assert left == {"x.npy"}, left
    assert code == 128 + getattr(signal, sig) and err.count("\n") == 1, (code, err)


def test_a_killed_write_leaves_nothing_behind(tmp_path):
    """Found by fuzzing the command line: signals during a write leave no temporary file behind.
    SIGKILL cannot be caught: the output is written to an unnamed file (O_TMPFILE), named only when
    it is complete, so a killed run leaves no temporary file."""
    if not hasattr(os, "O_TMPFILE"):
        pytest.skip("no O_TMPFILE on this system: a killed run leaves its named temporary file")
    code, left, _ = _interrupted_write(tmp_path, signal.SIGKILL, ".npy")
    assert code == -signal.SIGKILL
    assert left == {"x.npy"}, left


def test_a_killed_write_keeps_the_old_destination(tmp_path):
    """Found by fuzzing the command line: signals during a write leave no temporary file behind, and
    a killed write leaves the file it would replace as it was."""
    (tmp_path / "y.npy").write_bytes(b"old")
    code, left, _ = _interrupted_write(tmp_path, signal.SIGKILL, ".npy")
    assert (tmp_path / "y.npy").read_bytes() == b"old"
    if hasattr(os, "O_TMPFILE"):
        assert left == {"x.npy", "y.npy"}, left


@pytest.mark.parametrize("how", ["unnamed", "link refused", "no O_TMPFILE"])
@pytest.mark.parametrize("suffix", [".npy", ".npz", ".safetensors"])
def test_every_way_of_writing_gives_the_same_file(tmp_path, monkeypatch, how, suffix):
    """Found by fuzzing the command line: signals during a write leave no temporary file behind.
    The unnamed temporary file, its copy where the file system will not link it, and the named
    temporary file where there is no O_TMPFILE: the same bytes, ordinary permissions, nothing left."""
    from quantspec._tensorfiles import tensorio

    if how == "link refused":
        def refuse(*args):
            raise OSError(18, "Invalid cross-device link")
        monkeypatch.setattr(tensorio, "_name_unnamed", refuse)
    elif how == "no O_TMPFILE":
        monkeypatch.setattr(tensorio, "_unnamed_file", lambda directory: None)
    tensors = {"a": np.arange(10, dtype=np.int8), "b": np.linspace(0, 1, 7, dtype=np.float32)}
    if suffix == ".npy":
        tensors = {"y": tensors["a"]}      # a .npy's tensor is named after the file
    tensorio.write_tensors(tmp_path / f"y{suffix}", tensors)
    back = tensorio.read_tensors(tmp_path / f"y{suffix}")
    assert {k: v.tobytes() for k, v in back.items()} == {k: v.tobytes() for k, v in tensors.items()}
    assert os.listdir(tmp_path) == [f"y{suffix}"]
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / f"y{suffix}").stat().st_mode & 0o777 == 0o666 & ~mask

    def full(f):
        f.write(b"x")
        raise OSError(28, "No space left on device")

    from quantspec.errors import TensorFileError

    with pytest.raises(TensorFileError, match="No space left"):
        tensorio._atomic_with(tmp_path / "z.npy", full)
    assert os.listdir(tmp_path) == [f"y{suffix}"]


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
@pytest.mark.parametrize("recorded", ["flo`t4e2m1", "nonsense", 5])
def test_a_file_recording_an_unknown_type_is_a_tensor_file_error(tmp_path, suffix, recorded):
    """A damaged type entry (.npz's __quantspec_dtypes__, safetensors' quantspec.dtype.* metadata) was a
    DTypeError about the user's arguments; it is the file's fault: a TensorFileError naming the file."""
    import json
    import zipfile

    from quantspec._tensorfiles import tensorio
    from quantspec.errors import TensorFileError

    path = tmp_path / f"x{suffix}"
    tensorio.write_tensors(path, {"t": np.zeros(4, "int4")})
    if suffix == ".npz":
        with zipfile.ZipFile(path) as z:
            members = {n: z.read(n) for n in z.namelist()}
        entry = np.frombuffer(json.dumps({"t": recorded}).encode(), np.uint8)
        import io
        buf = io.BytesIO()
        np.save(buf, entry)
        members["__quantspec_dtypes__.npy"] = buf.getvalue()
        with zipfile.ZipFile(path, "w") as z:
            for n, b in members.items():
                z.writestr(n, b)
    else:
        raw = path.read_bytes()
        n = int.from_bytes(raw[:8], "little")
        header = json.loads(raw[8:8 + n])
        header["__metadata__"]["quantspec.dtype.t"] = recorded
        h = json.dumps(header).encode()
        h += b" " * (-len(h) % 8)
        path.write_bytes(len(h).to_bytes(8, "little") + h + raw[8 + n:])
    for mapped in (False, True):
        with pytest.raises(TensorFileError, match=path.name):
            tensorio.read_tensors(path, mapped=mapped)


@pytest.mark.parametrize("suffix", [".npy", ".npz"])
def test_a_damaged_npy_header_prints_no_syntax_warning(suffix, tmp_path):
    """A .npy header numpy cannot parse as a literal ("(1and)") made Python print
    "<unknown>:1: SyntaxWarning: invalid decimal literal" before the TensorFileError (found by
    fuzzing): the command's one error line had a stray line above it."""
    from quantspec._tensorfiles import tensorio
    from quantspec.errors import TensorFileError

    buf = __import__("io").BytesIO()
    np.save(buf, np.zeros((1, 2), np.float32))
    raw = buf.getvalue().replace(b"(1, 2)", b"(1and)")
    path = tmp_path / f"x{suffix}"
    if suffix == ".npy":
        path.write_bytes(raw)
    else:
        import zipfile
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("a.npy", raw)
    with pytest.raises(TensorFileError, match="not a readable"):
        tensorio.read_tensors(path)
    # the warning is printed once per process and place: look at a fresh interpreter's stderr
    code = ("from quantspec._tensorfiles.tensorio import read_tensors\n"
            "try:\n    read_tensors(__import__('sys').argv[1])\nexcept ValueError:\n    pass\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and "Warning" not in done.stderr, done.stderr
