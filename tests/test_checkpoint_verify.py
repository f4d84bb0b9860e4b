"""``quantspec verify`` / ``quantspec.checkpoint.verify``: a converted checkpoint verifies as identical
against its source; a single code, scale or zero point flipped in its files (each kind, in every
scheme, in both layouts) is found at the right tensor and position, in the default mode (bytes
re-derived from the source) and with ``params_from_dst`` (codes from the stored parameters); kept
tensors, missing tensors, another source; unreadable or damaged input (exit 2)."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

import checkpoint_corpus
from refs import require_fast

from quantspec import checkpoint
from quantspec._tensorfiles import tensorio
from quantspec.checkpoint import layout
from quantspec.checkpoint.ctlayout import CT_SCHEMES
from quantspec.checkpoint.schemes import SCHEMES
from quantspec.cli import main
from quantspec.dtypes import qtype
from quantspec.errors import InvalidArgumentError, TensorFileError

NAME = "model.layers.0.mlp.gate_proj.weight"         # rows past the planted ones: ordinary weights
ROW, COL = 101, 37


@pytest.fixture(autouse=True)
def _fast():
    require_fast()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "src"
    return path, checkpoint_corpus.build(path)


@pytest.fixture(scope="module")
def ct_corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("ct") / "src"
    return path, checkpoint_corpus.build_ct(path)


_CONVERTED: dict = {}


def _converted(src: Path, fmt: str, scheme: str, base: Path) -> Path:
    key = (str(src), fmt, scheme)
    if key not in _CONVERTED:
        out = base / f"{fmt}-{scheme}"
        saved = layout.SLAB_BYTES
        layout.SLAB_BYTES = 3000                      # many slabs: checks run a few rows at a time
        try:
            checkpoint.convert(src, out, scheme, format=fmt, max_shard_size="40KB", progress=False)
        finally:
            layout.SLAB_BYTES = saved
        _CONVERTED[key] = out
    return _CONVERTED[key]


def _flip(part, byte: int, bit: int, into: Path) -> None:
    f = into / Path(part.path).name
    data = bytearray(f.read_bytes())
    data[part.offset + byte] ^= 1 << bit
    f.write_bytes(bytes(data))


def _code_location(st, r: int, c: int) -> tuple[int, int]:
    """(byte, bit) of the lowest bit of code [r, c] in its stored part."""
    bits = qtype(st.codes_type).bits
    if st.codes_part.packing == "ct-rows":
        per = -(-st.cols * bits // 32) * 4
        return r * per + c // 2, 4 * (c % 2)
    e = (r * st.cols + c) * bits
    return e // 8, e % 8


def _scale_location(st, r: int, b: int) -> tuple[int, int, tuple]:
    """(byte, bit, index) of scale [r, b]'s sign bit (float scales: the scale is negated), or of its
    lowest exponent bit (float8e8m0: the scale doubles or halves)."""
    i = 0 if st.granularity == "tensor" else r if st.granularity == "channel" else r * st.groups + b
    index = () if st.granularity == "tensor" else (r,) if st.granularity == "channel" else (r, b)
    item = {"F32": 4, "BF16": 2, "F16": 2, "U8": 1}[st.scale_part.dtype]
    bit = {"F32": 31, "BF16": 15, "F16": 15, "U8": 0}[st.scale_part.dtype]
    return i * item + bit // 8, bit % 8, index


def _zp_location(st, r: int, b: int) -> tuple[int, int, tuple]:
    bits = qtype(st.codes_type).bits
    g = max(1, st.groups)
    index = (r,) if st.granularity == "channel" else (r, b)
    if st.zp_part.packing == "ct-cols":
        word = (r // 8) * g + b
        return word * 4 + (r % 8) // 2, 4 * (r % 2), index
    e = (r * g + (b if st.granularity == "block" else 0)) * bits
    return e // 8, e % 8, index


CASES = [("quantspec", s) for s in SCHEMES] + [("compressed-tensors", s) for s in CT_SCHEMES
                                                if s in ("int8", "int8-tensor", "uint8-asym", "litert", "fp8-e4m3",
                                                         "fp8-e4m3-channel", "int4-b32", "uint4-b128-asym")]


@pytest.mark.parametrize("fmt, scheme", CASES, ids=[f"{f}-{s}" for f, s in CASES])
def test_each_flipped_code_scale_and_zero_point_is_found_where_it_is(corpus, ct_corpus, tmp_path_factory, fmt,
                                                                        scheme):
    src = (ct_corpus if fmt == "compressed-tensors" else corpus)[0]
    out = _converted(src, fmt, scheme, tmp_path_factory.getbasetemp() / "verify-out")
    rep = checkpoint.verify(src, out)
    assert rep.ok, rep.table()                                  # untouched: identical, every tensor
    assert rep[NAME].elements == np.prod(checkpoint.open(out).stored(NAME).shape)
    assert checkpoint.verify(src, out, params_from_dst=True).ok
    st = checkpoint.open(out).stored(NAME)
    block = ROW, COL // st.block if st.granularity == "block" else 0
    kinds = [("codes", st.codes_part, *_code_location(st, ROW, COL), (ROW, COL)),
             ("scale", st.scale_part, *_scale_location(st, *block))]
    if st.zp_part is not None:
        kinds.append(("zero_point", st.zp_part, *_zp_location(st, *block)))
    original = checkpoint.open(out)
    for kind, part, byte, bit, index in kinds:
        bad = tmp_path_factory.mktemp("bad")
        shutil.rmtree(bad)
        shutil.copytree(out, bad)
        _flip(part, byte, bit, bad)
        flipped = checkpoint.open(bad)
        # the default mode: the byte re-derived from the source differs there, and only there
        rep = checkpoint.verify(src, bad)
        assert not rep.ok and [t.name for t in rep.different] == [NAME], rep.table()
        t = rep[NAME]
        if kind == "codes":
            assert t.differing == 1 and t.scale_differing == t.zero_point_differing == 0
            p = t.positions[0]
            assert p.index == index and t.max_code_diff >= 1
            want, got = original.codes(NAME)[index], flipped.codes(NAME)[index]
            assert (p.expected, p.found) == (_num(want), _num(got)) and p.expected != p.found
            assert p.input == pytest.approx(float(_source(src, NAME)[index]), abs=0)
        elif kind == "scale":
            assert t.scale_differing == 1 and t.differing == 0 and t.scale_positions[0].index == index
            e, f = t.scale_positions[0].expected, t.scale_positions[0].found
            assert f in (2 * e, e / 2) if st.scale_type == "float8e8m0" else f == -e
        else:
            assert t.zero_point_differing == 1 and t.differing == 0 and t.zero_point_positions[0].index == index
        # codes checked against the stored parameters: a flipped code is found where it is; a flipped
        # scale or zero point makes codes of its row (block) disagree, and only there
        rep = checkpoint.verify(src, bad, params_from_dst=True)
        if kind == "codes":
            assert rep[NAME].differing == 1 and rep[NAME].positions[0].index == index
        elif rep.ok:
            # a scale negated (or doubled) leaves the codes of a block of zeros as they were: then
            # nothing is wrong with the codes
            assert kind == "scale" and _all_zero(original, NAME, index)
        else:
            assert [x.name for x in rep.different] == [NAME] and rep[NAME].differing >= 1
            for p in rep[NAME].positions:
                if index:
                    assert p.index[0] == index[0]
                if len(index) == 2:
                    assert p.index[1] // st.block == index[1]


def _num(v):
    v = np.asarray(v)
    return int(v.astype(np.int64)) if qtype(v.dtype).kind == "int" else float(v.astype(np.float32))


def _source(src: Path, name: str) -> np.ndarray:
    import ml_dtypes

    for f in sorted(src.glob("*.safetensors")):
        t = tensorio.read_tensors(f)
        if name in t:
            a = t[name]
            return a.astype(np.float32) if a.dtype == ml_dtypes.bfloat16 else a
    raise KeyError(name)


def _all_zero(ck, name, index) -> bool:
    """Whether the codes that the scale at ``index`` applies to are all zero."""
    st = ck.stored(name)
    codes = ck.codes(name)
    block = codes[index[0]:index[0] + 1] if index else codes
    if len(index) == 2:
        block = block[:, index[1] * st.block:(index[1] + 1) * st.block]
    return bool((block.astype(np.float32) == 0).all())


def test_kept_tensors_and_missing_tensors(corpus, tmp_path):
    src, values = corpus
    out = _converted(src, "quantspec", "int8", tmp_path.parent / "verify-out")
    # a kept tensor whose stored bytes changed
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    ck = checkpoint.open(bad)
    rec = ck.describe("model.norm.weight")
    assert rec["scheme"] == "keep"
    t = ck._tensor(rec["data"]["name"])
    f = Path(t.path)
    data = bytearray(f.read_bytes())
    data[t.offset + 2 * 7 + 1] ^= 0x40                         # element 7's sign/exponent byte
    f.write_bytes(bytes(data))
    rep = checkpoint.verify(src, bad)
    r = rep["model.norm.weight"]
    assert not rep.ok and r.differing == 1 and r.positions[0].index == (7,)
    assert r.positions[0].expected == pytest.approx(float(values["model.norm.weight"][7]), abs=0)
    # a source with a tensor more, and one less
    other = tmp_path / "src2"
    shutil.copytree(src, other)
    index = json.loads((other / "model.safetensors.index.json").read_text())
    shard = index["weight_map"]["model.norm.weight"]
    tensors = tensorio.read_tensors(other / shard)
    tensors["extra.weight"] = tensors.pop("model.norm.weight")
    tensorio.write_tensors(other / shard, tensors)
    index["weight_map"]["extra.weight"] = index["weight_map"].pop("model.norm.weight")
    (other / "model.safetensors.index.json").write_text(json.dumps(index))
    rep = checkpoint.verify(other, out)
    assert rep["model.norm.weight"].status == "missing in SRC" and rep["extra.weight"].status == "missing in DST"
    assert not rep.ok and sum(not t.ok for t in rep.tensors) == 2


def test_another_source_is_found_by_its_values_and_its_digest(corpus, tmp_path):
    src, _ = corpus
    out = _converted(src, "quantspec", "int4-b32", tmp_path.parent / "verify-out")
    other = tmp_path / "src2"
    shutil.copytree(src, other)
    index = json.loads((other / "model.safetensors.index.json").read_text())
    shard = index["weight_map"][NAME]
    tensors = tensorio.read_tensors(other / shard)
    w = tensors[NAME]
    w[150, 3] = -w[150, 3] * 7                               # one weight changed
    tensorio.write_tensors(other / shard, tensors)
    rep = checkpoint.verify(other, out)
    t = rep[NAME]
    assert not rep.ok and [x.name for x in rep.different] == [NAME]
    assert t.source_digest_ok is False and t.differing + t.scale_differing >= 1


def test_the_command_line_exit_status_and_json(corpus, tmp_path, capsys):
    src, _ = corpus
    out = _converted(src, "quantspec", "uint4-b32-asym", tmp_path.parent / "verify-out")
    assert main(["verify", str(src), str(out)]) == 0
    text = capsys.readouterr().out
    assert text.count("\n") == 1 and "tensors identical" in text
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    st = checkpoint.open(bad).stored(NAME)
    _flip(st.codes_part, *_code_location(st, ROW, COL), bad)
    assert main(["verify", str(src), str(bad), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    [t] = [t for t in report["tensors"] if t["status"] != "identical"]
    assert t["name"] == NAME and t["differing"] == 1 and t["positions"][0]["index"] == [ROW, COL]
    assert main(["verify", str(src), str(bad), "--params-from-dst"]) == 1
    text = capsys.readouterr().out
    assert f"[{ROW}, {COL}] input" in text and "expected" in text and "1 of 24 tensors differ" in text


@pytest.mark.parametrize("damage", ["no-dir", "not-a-checkpoint", "manifest", "manifest-record", "index", "shard",
                                    "truncated", "header", "sizes"])
def test_unreadable_or_damaged_input_exits_2_with_one_line(corpus, tmp_path, capsys, damage):
    src, _ = corpus
    out = _converted(src, "quantspec", "int4-b32", tmp_path.parent / "verify-out")
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    shards = sorted(bad.glob("*.safetensors"))
    if damage == "no-dir":
        shutil.rmtree(bad)
    elif damage == "not-a-checkpoint":
        (bad / "quantspec.json").unlink()
    elif damage == "manifest":
        (bad / "quantspec.json").write_text("{not json")
    elif damage == "manifest-record":
        m = json.loads((bad / "quantspec.json").read_text())
        m["tensors"][NAME]["codes"] = 17
        (bad / "quantspec.json").write_text(json.dumps(m))
    elif damage == "index":
        (bad / "model.safetensors.index.json").write_text('{"weight_map": 3}')
    elif damage == "shard":
        shards[0].unlink()
    elif damage == "truncated":
        data = shards[-1].read_bytes()
        shards[-1].write_bytes(data[:len(data) // 2])
    elif damage == "header":
        data = bytearray(shards[0].read_bytes())
        data[:8] = struct.pack("<Q", 10 ** 12)
        shards[0].write_bytes(bytes(data))
    else:                                                     # a codes tensor that lost bytes, header adjusted
        ck = checkpoint.open(bad)
        st = ck.stored(NAME)
        m = json.loads((bad / "quantspec.json").read_text())
        m["tensors"][NAME]["source"]["shape"] = [st.rows + 8, st.cols]
        (bad / "quantspec.json").write_text(json.dumps(m))
    assert main(["verify", str(src), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "TensorFileError" in err
    with pytest.raises(TensorFileError):
        checkpoint.verify(src, bad)


def test_a_checkpoint_of_another_tool_is_checked_by_compressed_tensors_arithmetic(ct_corpus, tmp_path):
    src, _ = ct_corpus
    out = _converted(src, "compressed-tensors", "int8", tmp_path.parent / "verify-out")
    foreign = tmp_path / "foreign"
    shutil.copytree(out, foreign)
    (foreign / "quantspec.json").unlink()                        # as another tool writes it: no manifest
    # by default: compressed-tensors' own arithmetic (its int8 channel scale is amax / 127.5, rounded to
    # the weight's type; onnxruntime's, which the int8 scheme follows, is amax / 127)
    rep = checkpoint.verify(src, foreign)
    assert not rep.ok and rep.rule == "compressed-tensors" and rep[NAME].scale_differing
    assert "rule compressed-tensors" in rep.summary()
    with pytest.raises(InvalidArgumentError, match="scheme needs the manifest"):
        checkpoint.verify(src, foreign, rule="scheme")
    for kw in ({"params_from_dst": True}, {"rule": "quantizelinear"}):
        rep = checkpoint.verify(src, foreign, **kw)
        assert rep.ok and rep.layout == "compressed-tensors" and "rule quantizelinear" in rep.summary()
        assert rep[NAME].scheme.startswith("compressed-tensors: int-quantized int8 channel symmetric")


def test_verify_on_a_dask_cluster(corpus, tmp_path):
    from refs import require

    require("distributed")
    src, _ = corpus
    out = _converted(src, "quantspec", "mxfp4", tmp_path.parent / "verify-out")
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    st = checkpoint.open(bad).stored(NAME)
    _flip(st.codes_part, *_code_location(st, ROW, COL), bad)
    rep = checkpoint.verify(src, bad, dask="local:1")
    assert [t.name for t in rep.different] == [NAME] and rep[NAME].positions[0].index == (ROW, COL)


@pytest.mark.parametrize("fmt", ["quantspec", "compressed-tensors"])
def test_a_shard_header_whose_manifest_differs_from_quantspec_json_is_reported(fmt, tmp_path):
    """Each shard's header repeats its tensors' manifest records; damage there that leaves the JSON
    valid (the 20000-example fuzz run met 848 such mutants that verified as identical) is reported in
    ``rep.files`` and makes the report not ok; an intact checkpoint has no such line."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(3)
    save_file({"layer.weight": rng.normal(size=(8, 64)).astype(np.float32), "norm": np.ones(64, np.float32)},
              str(tmp_path / "m.safetensors"))
    out = tmp_path / "out"
    checkpoint.convert(tmp_path / "m.safetensors", out, "int8", format=fmt, progress=False)
    rep = checkpoint.verify(tmp_path / "m.safetensors", out)
    assert rep.ok and rep.files == []
    shard = next(out.glob("*.safetensors"))
    data = bytearray(shard.read_bytes())
    hlen = struct.unpack("<Q", data[:8])[0]
    header = bytes(data[8:8 + hlen])
    k = header.index(b"DequantizeLinear")          # inside the embedded manifest's JSON string
    data[8 + k:8 + k + 16] = b"DequantizeLinEar"   # still JSON, same length, another record
    shard.write_bytes(bytes(data))
    rep = checkpoint.verify(tmp_path / "m.safetensors", out)
    assert not rep.ok and all(t.status == "identical" for t in rep.tensors), rep.summary()
    assert rep.files == [f"{shard.name}: its header's manifest differs from quantspec.json (tensor 'layer.weight')"], \
        rep.files
    meta_key = b'"quantspec.manifest"'
    k = header.index(meta_key)
    data[8 + k:8 + k + len(meta_key)] = b'"quantspec.manifesT"'
    shard.write_bytes(bytes(data))
    rep = checkpoint.verify(tmp_path / "m.safetensors", out)
    assert not rep.ok and rep.files == [f"{shard.name}: its header's manifest is missing or damaged"], rep.files


def _edit_manifest(out: Path, edit) -> None:
    path = out / "quantspec.json"
    m = json.loads(path.read_text())
    edit(m)
    path.write_text(json.dumps(m))


@pytest.mark.parametrize("fmt", ["quantspec", "compressed-tensors"])
def test_the_description_of_the_run_is_checked(fmt, tmp_path):
    """``quantspec.json`` and the index must be what ``convert`` writes for SRC with the recipe, shard
    size and slab size they record: each tensor's scheme, its shard, its error summary (recomputed
    from the same slabs), the shards, the index.  Damage to any of them that leaves the tensors'
    bytes intact (the fuzzer's damaged outputs left 123 such checkpoints verified as identical) is a
    line of ``rep.files``; where the source was is not compared.  A run resumed from finished shards
    verifies as identical."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(5)
    src = tmp_path / "m.safetensors"
    save_file({"a.weight": rng.normal(size=(40, 64)).astype(np.float32),
               "b.weight": rng.normal(size=(24, 48)).astype(np.float32),
               "c.weight": rng.normal(size=(16, 32)).astype(np.float32), "norm": np.ones(64, np.float32)}, str(src))
    recipe = {"default": "int8", "rules": [{"match": "b.*", "scheme": "fp8-e4m3"}]}
    out = tmp_path / "out"
    saved = layout.SLAB_BYTES
    layout.SLAB_BYTES = 1000                          # several slabs a tensor: their error sums add up
    try:
        checkpoint.convert(src, out, recipe=recipe, format=fmt, max_shard_size="3KB", progress=False)
        shards = sorted(out.glob("*.safetensors"))
        assert len(shards) >= 2
        pristine = {p.name: p.read_bytes() for p in out.iterdir()}
        shards[-1].unlink()
        rep = checkpoint.convert(src, out, recipe=recipe, format=fmt, max_shard_size="3KB", progress=False)
        assert rep.resumed and {p.name: p.read_bytes() for p in out.iterdir()} == pristine
    finally:
        layout.SLAB_BYTES = saved
    rep = checkpoint.verify(src, out)
    assert rep.ok and rep.files == [], rep.files

    def damaged(edit, index=None):
        for name, data in pristine.items():
            (out / name).write_bytes(data)
        if edit is not None:
            _edit_manifest(out, edit)
        if index is not None:
            p = out / "model.safetensors.index.json"
            ix = json.loads(p.read_text())
            index(ix)
            p.write_text(json.dumps(ix))
        r = checkpoint.verify(src, out)
        assert all(t.status == "identical" for t in r.tensors), r.summary()
        return r.files

    def error(m):
        m["tensors"]["a.weight"]["error"]["rel_rms"] *= 2

    assert damaged(error) == ["quantspec.json: tensor 'a.weight': its record's 'error' is not what convert writes"]

    def stats(m):
        a, b, c = (float(v) for v in m["tensors"]["c.weight"]["stats"].split())
        m["tensors"]["c.weight"]["stats"] = " ".join(f"{v:+.15e}".rjust(len(x)) for v, x in
                                                     zip((a * 1.5, b, c), m["tensors"]["c.weight"]["stats"].split()))

    files = damaged(stats)
    assert "quantspec.json: tensor 'c.weight': its record's 'stats' is not what convert writes" in files, files

    def rule(m):
        m["recipe"]["rules"][0]["match"] = "x.*"         # b.weight would be int8

    files = damaged(rule)
    assert any(f.startswith("quantspec.json: tensor 'b.weight': its record's") and "'scheme'" in f
               for f in files), files

    def shard_size(m):
        m["max_shard_size"] = 10 ** 9

    files = damaged(shard_size)
    assert "quantspec.json: its 'shards' is not what convert writes for SRC" in files, files
    assert any("'shard'" in f for f in files), files
    assert damaged(lambda m: m.__setitem__("recipe", "int8")) == \
        ["quantspec.json: its recipe is damaged (recipe: is not a recipe's description (got 'int8'))"]
    assert damaged(lambda m: m.__setitem__("slab_bytes", -1)) == ["quantspec.json: its slab_bytes is damaged (-1)"]
    assert damaged(lambda m: m.__setitem__("version", "2")) == \
        [f"quantspec.json: its format version is '2' (this quantspec writes {layout.FORMAT_VERSION})"]
    assert damaged(None, index=lambda ix: ix["metadata"].__setitem__("total_size", ix["metadata"]["total_size"] + 1)) \
        == ["model.safetensors.index.json: is not the index convert writes for these shards"]
    assert damaged(lambda m: m["source"].__setitem__("path", "/elsewhere")) == []   # where SRC was: not checked
    # but the source's description must be one, naming the file of every record
    assert damaged(lambda m: m.__setitem__("source", {"path": "/elsewhere"})) == \
        ["quantspec.json: its 'source' is not a description of a source (path, kind, files)"]
    assert damaged(lambda m: m["source"].__setitem__("files", ["m.safetensorz"])) == \
        ["quantspec.json: tensor 'a.weight': its record's source file 'm.safetensors' is not among the source files"]
    assert damaged(lambda m: m["source"].__setitem__("kind", "safetensmrs")) == \
        ["quantspec.json: its source kind 'safetensmrs' is none of safetensors, npz, npy"]


@pytest.mark.parametrize("fmt", ["quantspec", "compressed-tensors"])
def test_a_nan_error_summary_verifies_as_identical(fmt, tmp_path):
    """A block spanning float32's whole range has an infinite scale (as the named tool computes it),
    so its dequantized values and the tensor's error sums are not finite and its recorded relative
    RMS error is NaN; the record still equals what convert writes (NaN equals NaN there), so the
    checkpoint verifies as identical (the odd-sources fuzzer found it reported as different)."""
    from safetensors.numpy import save_file

    w = np.random.default_rng(13).normal(size=(4, 32)).astype(np.float32)
    w[1, 3], w[1, 9] = -np.finfo(np.float32).max, np.finfo(np.float32).max
    src = tmp_path / "m.safetensors"
    save_file({"layer.weight": w}, str(src))
    out = tmp_path / "out"
    checkpoint.convert(src, out, "uint4-b16-asym", format=fmt, progress=False)
    m = json.loads((out / "quantspec.json").read_text())
    assert np.isnan(m["tensors"]["layer.weight"]["error"]["rel_rms"])
    rep = checkpoint.verify(src, out)
    assert rep.ok and rep.files == [], rep.files


@pytest.mark.parametrize("kind", ["npz", "npy"])
def test_checkpoints_of_npz_and_npy_sources_verify_as_identical(kind, tmp_path):
    """The description check holds for every kind of source: an ``.npz`` member's record names its
    file as ``FILE:MEMBER``, which the manifest's source files hold as ``FILE``."""
    rng = np.random.default_rng(11)
    a = rng.normal(size=(16, 64)).astype(np.float32)
    if kind == "npz":
        src = tmp_path / "w.npz"
        np.savez(src, a=a, b=np.ones(8, np.float32))
    else:
        src = tmp_path / "w.npy"
        np.save(src, a)
    for fmt in ("quantspec", "compressed-tensors"):
        out = tmp_path / f"out-{fmt}"
        checkpoint.convert(src, out, "int8", format=fmt, progress=False)
        rep = checkpoint.verify(src, out)
        assert rep.ok and rep.files == [], rep.files
        _edit_manifest(out, lambda m: m["source"].__setitem__("files", ["v." + kind]))
        rep = checkpoint.verify(src, out)
        assert not rep.ok and len(rep.files) == 1 and "is not among the source files" in rep.files[0], rep.files


@pytest.mark.parametrize("fmt", ["quantspec", "compressed-tensors"])
def test_a_shard_header_is_the_one_convert_writes(fmt, tmp_path):
    """Each shard's whole header must be the bytes ``convert`` writes for its tensors (metadata, the
    records it repeats, types, shapes, offsets, padding): damage to its metadata that leaves every
    tensor's bytes and the embedded manifest intact (the fuzzer's damaged outputs left such shards
    verified as identical) is a line of ``rep.files``."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(7)
    src = tmp_path / "m.safetensors"
    save_file({"a.weight": rng.normal(size=(16, 64)).astype(np.float32),
               "b.weight": rng.normal(size=(8, 32)).astype(np.float32), "norm": np.ones(64, np.float32)}, str(src))
    out = tmp_path / "out"
    checkpoint.convert(src, out, recipe={"default": "int8", "rules": [{"match": "b.*", "scheme": "fp8-e4m3"}]},
                       format=fmt, progress=False)
    rep = checkpoint.verify(src, out)
    assert rep.ok and rep.files == [], rep.files
    shard = next(out.glob("*.safetensors"))
    pristine = shard.read_bytes()
    hlen = struct.unpack("<Q", pristine[:8])[0]
    value = b'"format":"quantspec"' if fmt == "quantspec" else b'"quantspec.format":"compressed-tensors"'
    damages = [(value, value.replace(b'"q', b'"Q', 1).replace(b':"c', b':"C'))]
    if fmt == "quantspec":                             # the fp8 codes' stored dtype: the same bytes, another type
        damages.append((b'"b.weight":{"dtype":"F8_E4M3"', b'"b.weight":{"dtype":"F8_E5M2"'))
    for old, new in damages:
        k = pristine.index(old, 8, 8 + hlen)
        shard.write_bytes(pristine[:k] + new + pristine[k + len(old):])
        rep = checkpoint.verify(src, out)
        assert all(t.status == "identical" for t in rep.tensors), rep.summary()
        assert not rep.ok and rep.files == [f"{shard.name}: its header is not the one convert writes for its "
                                            "tensors (metadata, records, types, shapes, offsets or padding)"], rep.files
    shard.write_bytes(pristine)
    assert checkpoint.verify(src, out).ok


@pytest.mark.parametrize("fmt", ["quantspec", "compressed-tensors"])
@pytest.mark.parametrize("damage", [{}, {"name": 7}, [], "nope"])
def test_a_kept_tensor_record_without_a_stored_name_is_a_damaged_manifest(fmt, damage, tmp_path):
    """A manifest whose kept tensor's ``data`` record has no name (found by the 20000-example run:
    ``verify`` raised a bare KeyError): ``verify`` and ``open(...).codes`` say the manifest is damaged."""
    import json

    from quantspec import checkpoint
    from quantspec.errors import QuantSpecError, TensorFileError
    from safetensors.numpy import save_file

    src = tmp_path / "src.safetensors"
    save_file({"w": np.linspace(-1, 1, 64, dtype=np.float32).reshape(4, 16), "norm": np.ones(16, np.float32)},
              str(src))
    dst = tmp_path / "dst"
    checkpoint.convert(src, dst, "int8", format=fmt, progress=False)
    manifest = dst / "quantspec.json"
    doc = json.loads(manifest.read_text())
    kept = [r for r in doc["tensors"].values() if r.get("scheme") == "keep"] if isinstance(doc.get("tensors"), dict) \
        else [r for r in doc["tensors"] if r.get("scheme") == "keep"]
    assert kept, "the source's 1-D tensor is kept"
    for r in kept:
        r["data"] = damage
    manifest.write_text(json.dumps(doc))
    with pytest.raises(TensorFileError, match="damaged manifest|no stored tensor 'nope'"):
        checkpoint.verify(src, dst)
    with pytest.raises(QuantSpecError):
        checkpoint.open(dst).codes("norm")
