"""What the native ("quantspec") layout stores, as other readers see it.

- Kept tensors keep their safetensors dtype (BF16, F8_E4M3, F8_E5M2, F8_E8M0) and float8 codes are
  F8_E4M3 / F8_E5M2: ``safetensors.torch.load_file`` gives torch.bfloat16 norms and torch.float8
  codes whose values are quantspec's; only the MX schemes' float8e8m0 scales stay U8 bit patterns
  (recorded as ``quantspec.dtype.NAME``).
- Checkpoints of format version 2 (bfloat16 as U16, float8 as U8, each recorded as
  ``quantspec.dtype.NAME``) still open and verify; converting into one replaces it.
- The source's ``config.json`` and ``generation_config.json`` are copied unchanged.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from quantspec import checkpoint
from refs import require
from quantspec.checkpoint import layout
from quantspec.errors import TensorFileError

BF16 = ml_dtypes.bfloat16
RECIPE = {"default": "int8", "rules": [
    {"match": "a.weight", "scheme": "fp8-e4m3"},
    {"match": "b.weight", "scheme": "fp8-e5m2"},
    {"match": "c.weight", "scheme": "mxfp8-e4m3"},
    {"match": "d.weight", "scheme": "fp8-e4m3-channel"},
]}
#: the stored dtype of every tensor the recipe gives (the version-3 layout)
STORED = {
    "a.weight": "F8_E4M3", "a.weight_scale": "F32", "b.weight": "F8_E5M2", "b.weight_scale": "F32",
    "c.weight": "F8_E4M3", "c.weight_scale": "U8", "d.weight": "F8_E4M3", "d.weight_scale": "F32",
    "e.weight": "I8", "e.weight_scale": "F32", "norm.weight": "BF16", "fp8.kept": "F8_E4M3",
    "fp8e5.kept": "F8_E5M2", "e8m0.kept": "F8_E8M0", "ids": "I64",
}
#: what version 2 stored as bit patterns: safetensors dtype -> (stored dtype, quantspec type)
V2 = {"BF16": ("U16", "bfloat16"), "F8_E4M3": ("U8", "float8e4m3fn"), "F8_E5M2": ("U8", "float8e5m2"),
      "F8_E8M0": ("U8", "float8e8m0")}


def _values():
    rng = np.random.default_rng(3)
    w = {n: (rng.standard_normal((32, 64)) * 0.1).astype(BF16) for n in "abcde"}
    return {**{f"{n}.weight": v for n, v in w.items()},
            "norm.weight": (1 + rng.standard_normal(64) * 0.01).astype(BF16),
            "fp8.kept": rng.standard_normal((4, 8)).astype(ml_dtypes.float8_e4m3fn),
            "fp8e5.kept": rng.standard_normal((4, 8)).astype(ml_dtypes.float8_e5m2),
            "e8m0.kept": np.array([0.25, 1, 2, 1024], np.float32).astype(ml_dtypes.float8_e8m0fnu),
            "ids": np.arange(6, dtype=np.int64)}


#: the safetensors dtype of each numpy / ml_dtypes type of the source
CODES = {np.dtype(BF16): "BF16", np.dtype(ml_dtypes.float8_e4m3fn): "F8_E4M3",
         np.dtype(ml_dtypes.float8_e5m2): "F8_E5M2", np.dtype(ml_dtypes.float8_e8m0fnu): "F8_E8M0",
         np.dtype(np.int64): "I64"}


def _save(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """A safetensors file of ``tensors``, each under its own dtype (the float8 types included)."""
    header, data, pos = {}, b"", 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": CODES[a.dtype], "shape": list(a.shape), "data_offsets": [pos, pos + len(b)]}
        data += b
        pos += len(b)
    body = json.dumps(header).encode()
    body += b" " * (-len(body) % 8)
    path.write_bytes(struct.pack("<Q", len(body)) + body + data)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    src = tmp_path_factory.mktemp("kept") / "src"
    src.mkdir()
    values = _values()
    _save(src / "model.safetensors", values)
    (src / "config.json").write_text('{"model_type":"llama",\n   "torch_dtype": "bfloat16"}')
    (src / "generation_config.json").write_text('{\n  "do_sample": false\n}\n')
    return src, values


@pytest.fixture(scope="module")
def converted(source, tmp_path_factory):
    src, _ = source
    out = tmp_path_factory.mktemp("kept-out") / "out"
    checkpoint.convert(src, out, recipe=RECIPE, progress=False)
    return out


def _header(path: Path) -> dict:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n])


def _shards(out: Path) -> list[Path]:
    return sorted(out.glob("*.safetensors"))


# -- version 3: the safetensors dtypes ----------------------------------------------------------------
def test_every_tensor_is_stored_as_its_safetensors_dtype(converted):
    header = _header(_shards(converted)[0])
    meta = header.pop("__metadata__")
    assert {k: v["dtype"] for k, v in header.items()} == STORED
    # only the MX scale is stored as bit patterns, and only it is recorded in the metadata
    assert {k: v for k, v in meta.items() if k.startswith("quantspec.dtype.")} == \
        {"quantspec.dtype.c.weight_scale": "float8e8m0"}
    m = json.loads((converted / "quantspec.json").read_text())
    assert m["version"] == layout.FORMAT_VERSION == 3
    assert m["tensors"]["norm.weight"]["data"]["stored"] == "BF16"
    assert m["tensors"]["a.weight"]["codes"]["stored"] == "F8_E4M3"
    assert m["tensors"]["b.weight"]["codes"]["stored"] == "F8_E5M2"


def test_torch_reads_bfloat16_norms_and_float8_codes(source, converted):
    torch = require("torch")                     # a failure, not a skip, in CI
    from safetensors.torch import load_file

    _, values = source
    got = {}
    for shard in _shards(converted):
        got.update(load_file(str(shard)))
    ck = checkpoint.open(converted)
    assert got["norm.weight"].dtype == torch.bfloat16
    assert np.array_equal(got["norm.weight"].float().numpy(), values["norm.weight"].astype(np.float32))
    for name, dtype in (("a.weight", torch.float8_e4m3fn), ("b.weight", torch.float8_e5m2),
                        ("c.weight", torch.float8_e4m3fn), ("d.weight", torch.float8_e4m3fn),
                        ("fp8.kept", torch.float8_e4m3fn), ("fp8e5.kept", torch.float8_e5m2)):
        assert got[name].dtype == dtype, name
        # torch's values of the stored bytes are quantspec's codes (NaN included, as bits)
        mine = ck.codes(name)
        assert np.array_equal(got[name].view(torch.uint8).numpy(), mine.view(np.uint8)), name
        assert np.array_equal(got[name].float().numpy(), mine.astype(np.float32), equal_nan=True), name
    assert np.array_equal(ck.codes("fp8.kept").view(np.uint8), values["fp8.kept"].view(np.uint8))
    # per tensor and per channel, float32 scales: torch's codes times the scale are ck.dequantize
    for name in ("a.weight", "b.weight", "d.weight"):
        scale = got[name + "_scale"]
        dq = got[name].float() * (scale if scale.ndim == 0 else scale[:, None])
        assert np.array_equal(dq.numpy(), ck.dequantize(name)), name
    assert got["e8m0.kept"].dtype == torch.float8_e8m0fnu
    assert got["c.weight_scale"].dtype == torch.uint8             # MX scales: bit patterns
    assert np.array_equal(got["c.weight_scale"].numpy(), ck.params("c.weight")[0].view(np.uint8))


def test_quantspec_reads_and_verifies_its_own_output(source, converted):
    src, values = source
    ck = checkpoint.open(converted)
    for name in ("norm.weight", "fp8.kept", "fp8e5.kept", "e8m0.kept", "ids"):
        assert ck.scheme(name) == "keep"
        data = ck.codes(name)
        assert data.dtype == values[name].dtype and data.tobytes() == values[name].tobytes(), name
    rep = checkpoint.verify(src, converted)
    assert rep.ok and rep.files == [], (rep.summary(), rep.files)


# -- version 2 checkpoints --------------------------------------------------------------------------------
def _as_version_2(out: Path, into: Path) -> None:
    """``out`` (version 3) as version 2 wrote it: every BF16, F8_E4M3, F8_E5M2 and F8_E8M0 tensor stored
    as U16 / U8 bit patterns with its type in the metadata (``quantspec.dtype.NAME``), the manifests
    (quantspec.json and each shard's) of version 2 recording those stored dtypes, the shards written
    by ``safetensors.numpy.save_file``; a version-2 plan fingerprint (which no plan of this version has)."""
    from safetensors.numpy import save_file

    into.mkdir()
    for f in out.iterdir():
        if not f.name.endswith(".safetensors"):
            shutil.copy(f, into / f.name)
    retyped: dict[str, str] = {}
    for shard in _shards(out):
        header = _header(shard)
        meta = dict(header.pop("__metadata__"))
        raw = shard.read_bytes()
        base = 8 + struct.unpack("<Q", raw[:8])[0]
        tensors = {}
        for name, info in header.items():
            a, b = info["data_offsets"]
            code = info["dtype"]
            stored, type_ = V2.get(code, (code, None))
            if type_ is not None:
                meta[f"quantspec.dtype.{name}"] = type_
                retyped[name] = stored
            dt = {"U16": "<u2", "U8": "u1", "F32": "<f4", "I8": "i1", "I64": "<i8"}[stored]
            tensors[name] = np.frombuffer(raw[base + a:base + b], dt).reshape(info["shape"])
        embedded = json.loads(meta["quantspec.manifest"])
        embedded["version"] = 2
        _restored(embedded["tensors"], retyped)
        meta["quantspec.manifest"] = json.dumps(embedded, separators=(",", ":"))
        meta["quantspec.plan"] = hashlib.sha256(b"version 2" + meta["quantspec.plan"].encode()).hexdigest()
        save_file(tensors, str(into / shard.name), metadata=meta)
    m = json.loads((into / "quantspec.json").read_text())
    m["version"] = 2
    _restored(m["tensors"], retyped)
    (into / "quantspec.json").write_text(json.dumps(m, indent=1) + "\n")


def _restored(records: dict, retyped: dict[str, str]) -> None:
    for rec in records.values():
        for part in ("data", "codes", "scale", "zero_point"):
            p = rec.get(part)
            if isinstance(p, dict) and p["name"] in retyped:
                p["stored"] = retyped[p["name"]]


@pytest.fixture(scope="module")
def version_2(converted, tmp_path_factory):
    into = tmp_path_factory.mktemp("v2") / "out"
    _as_version_2(converted, into)
    return into


def test_a_version_2_checkpoint_stores_bit_patterns(version_2):
    header = _header(_shards(version_2)[0])
    meta = header.pop("__metadata__")
    assert header["norm.weight"]["dtype"] == "U16" and meta["quantspec.dtype.norm.weight"] == "bfloat16"
    assert header["a.weight"]["dtype"] == "U8" and meta["quantspec.dtype.a.weight"] == "float8e4m3fn"
    assert header["b.weight"]["dtype"] == "U8" and meta["quantspec.dtype.b.weight"] == "float8e5m2"
    assert json.loads((version_2 / "quantspec.json").read_text())["version"] == 2


def test_a_version_2_checkpoint_opens_as_it_did(converted, version_2):
    new, old = checkpoint.open(converted), checkpoint.open(version_2)
    assert old.names() == new.names()
    for name in new.names():
        a, b = old.codes(name), new.codes(name)
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), name
        assert old.dequantize(name).tobytes() == new.dequantize(name).tobytes(), name
        if new.scheme(name) != "keep":
            (s1, z1, at1), (s2, z2, at2) = old.params(name), new.params(name)
            assert s1.dtype == s2.dtype and s1.tobytes() == s2.tobytes() and z1 is z2 is None and at1 == at2
    assert old.codes("norm.weight").dtype == BF16 and old.codes("a.weight").dtype == ml_dtypes.float8_e4m3fn


def test_a_version_2_checkpoint_verifies_and_its_damage_is_found(source, version_2, tmp_path):
    src, _ = source
    rep = checkpoint.verify(src, version_2)
    assert rep.ok and rep.files == [], (rep.summary(), rep.files)
    assert {t.name: t.status for t in rep.tensors} == {n: "identical" for n in _values()}
    # the check reads the version-2 storage: a flipped bit of the U16 norm, and of a U8 code, are found
    damaged = tmp_path / "damaged"
    shutil.copytree(version_2, damaged)
    shard = _shards(damaged)[0]
    raw = bytearray(shard.read_bytes())
    header = _header(shard)
    base = 8 + struct.unpack("<Q", raw[:8])[0]
    raw[base + header["norm.weight"]["data_offsets"][0]] ^= 1
    raw[base + header["a.weight"]["data_offsets"][0] + 5] ^= 1
    shard.write_bytes(bytes(raw))
    rep = checkpoint.verify(src, damaged)
    assert not rep.ok and rep["norm.weight"].differing == 1 and rep["a.weight"].differing == 1, rep.summary()


def test_converting_into_a_version_2_checkpoint_replaces_it(source, converted, version_2, tmp_path):
    src, _ = source
    dst = tmp_path / "dst"
    shutil.copytree(version_2, dst)
    rep = checkpoint.convert(src, dst, recipe=RECIPE, progress=False)
    assert rep.resumed == []                          # another plan: every shard is written again
    assert {p.name: p.read_bytes() for p in dst.iterdir()} == {p.name: p.read_bytes() for p in converted.iterdir()}


# -- files carried over ---------------------------------------------------------------------------------------
def test_config_and_generation_config_are_copied_unchanged(source, converted):
    src, _ = source
    for name in ("config.json", "generation_config.json"):
        assert (converted / name).read_bytes() == (src / name).read_bytes(), name
    ck = checkpoint.open(converted)                  # the manifest, not config.json, says what it is
    assert ck.layout == "quantspec" and not ck.foreign
    assert sorted(p.name for p in converted.iterdir()) == [
        "config.json", "generation_config.json", "model-00001-of-00001.safetensors", "model.safetensors.index.json",
        "quantspec.json"]


def test_the_copies_follow_the_source_and_a_directory_that_is_not_a_conversion_is_refused(source, tmp_path):
    src, _ = source
    mine = tmp_path / "src"
    shutil.copytree(src, mine)
    (mine / "generation_config.json").unlink()
    dst = tmp_path / "out"
    checkpoint.convert(src, dst, "int8", progress=False)
    assert (dst / "generation_config.json").exists()
    # the same directory converted from a source without one: the earlier copy goes
    checkpoint.convert(mine, dst, "int8", progress=False)
    assert not (dst / "generation_config.json").exists()
    assert (dst / "config.json").read_bytes() == (mine / "config.json").read_bytes()
    assert checkpoint.verify(mine, dst).ok
    # a .npz source has no files beside its shards
    np.savez(tmp_path / "w.npz", w=np.ones((4, 8), np.float32))
    (tmp_path / "config.json").write_text("{}")
    checkpoint.convert(tmp_path / "w.npz", tmp_path / "npz-out", "int8", progress=False)
    assert not (tmp_path / "npz-out" / "config.json").exists()
    # a directory holding a config.json and nothing of a conversion is someone else's
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "config.json").write_text('{"mine": 1}')
    with pytest.raises(TensorFileError, match="not a quantspec conversion's.*config.json"):
        checkpoint.convert(src, tmp_path / "theirs", "int8", progress=False)
    assert (tmp_path / "theirs" / "config.json").read_text() == '{"mine": 1}'


def test_the_compressed_tensors_layout_keeps_them_too(source, tmp_path):
    src, values = source
    out = tmp_path / "ct"
    checkpoint.convert(src, out, "int8", format="compressed-tensors", progress=False)
    header = _header(_shards(out)[0])
    header.pop("__metadata__")
    kept = {n: header[n]["dtype"] for n in ("norm.weight", "fp8.kept", "fp8e5.kept", "e8m0.kept", "ids")}
    assert kept == {"norm.weight": "BF16", "fp8.kept": "F8_E4M3", "fp8e5.kept": "F8_E5M2", "e8m0.kept": "F8_E8M0",
                    "ids": "I64"}
    ck = checkpoint.open(out)
    for name in kept:
        assert ck.codes(name).tobytes() == np.ascontiguousarray(values[name]).tobytes(), name
