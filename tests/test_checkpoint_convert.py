"""``quantspec convert`` / ``quantspec.checkpoint.convert``: inputs, recipes, shards, bad input,
interruption and resumption, memory, the command line and ``open``.

(Each scheme's bytes against the tools: tests/test_checkpoint_schemes.py.)
"""

from __future__ import annotations

import json
import os
import resource
import signal
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import checkpoint_corpus
from refs import require, require_fast

from quantspec import checkpoint
from quantspec._tensorfiles import tensorio
from quantspec.checkpoint import layout
from quantspec.cli import main
from quantspec.errors import InvalidArgumentError, QuantSpecError, RangeError, TensorFileError, UnsupportedError

BF16 = ml_dtypes.bfloat16


@pytest.fixture(autouse=True)
def _fast():
    require_fast()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "src"
    return path, checkpoint_corpus.build(path)


@pytest.fixture
def small_slabs(monkeypatch):
    monkeypatch.setattr(layout, "SLAB_BYTES", 4096)


def _final_files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if not p.name.startswith(".")) if d.exists() else []


def _all_bytes(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def _w(rng, *shape):
    return (rng.standard_normal(shape) * 0.1).astype(np.float32)


# -- the forms of SRC -------------------------------------------------------------------------------------
def test_every_form_of_src_gives_the_same_codes(tmp_path):
    rng = np.random.default_rng(1)
    a, b = _w(rng, 24, 48), _w(rng, 16, 48)
    norm = np.ones(48, np.float32)
    tensorio.write_tensors(tmp_path / "one.safetensors", {"a.weight": a, "b.weight": b, "n.weight": norm})
    d = tmp_path / "dir"
    d.mkdir()
    tensorio.write_tensors(d / "x.safetensors", {"a.weight": a})
    tensorio.write_tensors(d / "y.safetensors", {"b.weight": b, "n.weight": norm})
    np.savez(tmp_path / "w.npz", **{"a.weight": a, "b.weight": b, "n.weight": norm})
    np.savez_compressed(tmp_path / "wc.npz", **{"a.weight": a, "b.weight": b, "n.weight": norm})
    np.save(tmp_path / "a.weight.npy", a)
    np.save(tmp_path / "f.npy", np.asfortranarray(a))
    np.save(tmp_path / "be.npy", a.astype(">f4"))
    want = None
    for src in ["one.safetensors", "dir", "w.npz", "wc.npz", "a.weight.npy", "f.npy", "be.npy"]:
        out = tmp_path / ("out-" + src)
        rep = checkpoint.convert(tmp_path / src, out, "int4-b16", progress=False)
        ck = checkpoint.open(out)
        name = [n for n in ck.names() if ck.scheme(n) != "keep"][0]
        codes = ck.codes(name).tobytes() + ck.params(name)[0].tobytes()
        want = want or codes
        assert codes == want, src
        assert rep.bytes_in == sum(t.bytes_in for t in rep.tensors)
    ck = checkpoint.open(tmp_path / "out-dir")
    assert ck.names() == ["a.weight", "b.weight", "n.weight"] and ck.scheme("n.weight") == "keep"
    assert ck.source("b.weight")["file"] == "y.safetensors" and ck.source("b.weight")["dtype"] == "float"


def test_empty_and_scalar_tensors_are_kept(tmp_path):
    tensors = {"w": np.ones((4, 32), np.float32), "empty": np.zeros((0, 32), np.float32),
               "scalar": np.array(3.5, np.float32), "flags": np.array([True, False])}
    tensorio.write_tensors(tmp_path / "m.safetensors", tensors)
    rep = checkpoint.convert(tmp_path / "m.safetensors", tmp_path / "out", "int8", progress=False)
    assert {t.name: t.scheme for t in rep.tensors} == {"w": "int8", "empty": "keep", "scalar": "keep", "flags": "keep"}
    ck = checkpoint.open(tmp_path / "out")
    for name in ("empty", "scalar", "flags"):
        assert ck.codes(name).shape == tensors[name].shape and (ck.codes(name) == tensors[name]).all()
    assert ck.dequantize("scalar") == np.float32(3.5)


def test_float16_and_bfloat16_sources_quantize_their_exact_values(tmp_path):
    rng = np.random.default_rng(2)
    w = _w(rng, 32, 64).astype(np.float16)
    w[0, :4] = [np.float16(6e-8), -np.float16(6e-5), 0, np.float16(-0.0)]   # float16 subnormals, -0
    tensorio.write_tensors(tmp_path / "h.safetensors", {"w": w})
    tensorio.write_tensors(tmp_path / "f.safetensors", {"w": w.astype(np.float32)})
    for scheme in ["int8", "uint4-b32-asym", "mxfp6-e3m2", "fp8-e4m3"]:
        a = checkpoint.convert(tmp_path / "h.safetensors", tmp_path / f"h-{scheme}", scheme, progress=False)
        b = checkpoint.convert(tmp_path / "f.safetensors", tmp_path / f"f-{scheme}", scheme, progress=False)
        ca, cb = checkpoint.open(tmp_path / f"h-{scheme}"), checkpoint.open(tmp_path / f"f-{scheme}")
        assert ca.codes("w").tobytes() == cb.codes("w").tobytes(), scheme
        assert a["w"].rel_rms == pytest.approx(b["w"].rel_rms)


# -- recipes, include / exclude ------------------------------------------------------------------------
def test_recipe_rules_first_match_wins_and_everything_else_is_kept_and_listed(corpus, tmp_path):
    src, values = corpus
    recipe = tmp_path / "r.toml"
    recipe.write_text(textwrap.dedent("""
        default = "int4-b32"
        [[rules]]
        match = "*.mlp.down_proj.weight"
        scheme = "int8"
        [[rules]]
        match = "*.mlp.*"
        scheme = "mxfp4"
        [[rules]]
        match = "model.embed_tokens.weight"
        scheme = "keep"
    """))
    rep = checkpoint.convert(src, tmp_path / "out", recipe=recipe, exclude=["lm_head.*"], progress=False)
    ck = checkpoint.open(tmp_path / "out")
    assert ck.scheme("model.layers.1.mlp.down_proj.weight") == "int8"
    assert ck.scheme("model.layers.1.mlp.up_proj.weight") == "mxfp4"
    assert ck.scheme("model.layers.0.self_attn.k_proj.weight") == "int4-b32"
    assert ck.scheme("model.embed_tokens.weight") == "keep" and ck.scheme("lm_head.weight") == "keep"
    assert ck.scheme("model.layers.0.conv.weight") == "keep"        # 3-D: int4-b32 takes 2-D weights
    reasons = {t.name: t.reason for t in rep.kept}
    assert set(reasons) == {n for n in values if ck.scheme(n) == "keep"}
    assert "excluded" in reasons["lm_head.weight"] and "2-D" in reasons["model.layers.0.conv.weight"]
    assert "int64" in reasons["model.rotary.inv_freq_ids"] and "1-D" in reasons["model.norm.weight"]
    assert ck.manifest["recipe"]["rules"][0] == {"match": "*.mlp.down_proj.weight", "scheme": "int8"}
    # a dict, --include
    checkpoint.convert(src, tmp_path / "out2", "int8", include=["*q_proj*"], progress=False)
    ck = checkpoint.open(tmp_path / "out2")
    assert {n for n in ck.names() if ck.scheme(n) != "keep"} == {n for n in values if "q_proj" in n}
    checkpoint.convert(src, tmp_path / "out3", recipe={"rules": [{"match": "lm_head.weight", "scheme": "fp8-e5m2"}]},
                       progress=False)
    ck = checkpoint.open(tmp_path / "out3")
    assert [n for n in ck.names() if ck.scheme(n) != "keep"] == ["lm_head.weight"]


@pytest.mark.parametrize("kwargs, match", [
    ({"scheme": "int3"}, "must name a scheme"),
    ({}, "is required"),
    ({"scheme": "int8", "recipe": {"rules": [{"match": "*"}]}}, "exactly the keys"),
    ({"scheme": "int8", "recipe": {"default": "int8", "other": 1}}, "keys other than"),
    ({"recipe": {"rules": [{"match": "model.norm.weight", "scheme": "int4-b32"}]}}, "model.norm.weight"),
    ({"scheme": "int8", "include": [""]}, "non-empty glob"),
    ({"scheme": "int8", "max_shard_size": "2 parsecs"}, "must be a size"),
    ({"scheme": "int8", "max_shard_size": 0}, "positive"),
    ({"scheme": "int8", "resume": "yes"}, "True or False"),
])
def test_bad_arguments_are_refused_before_anything_is_written(corpus, tmp_path, kwargs, match):
    src, _ = corpus
    with pytest.raises(InvalidArgumentError, match=match):
        checkpoint.convert(src, tmp_path / "out", progress=False, **kwargs)
    assert not (tmp_path / "out").exists()


def test_a_recipe_file_that_is_not_toml_is_refused(corpus, tmp_path):
    src, _ = corpus
    (tmp_path / "r.toml").write_text("default = int8\n")
    with pytest.raises(InvalidArgumentError, match="not valid TOML"):
        checkpoint.convert(src, tmp_path / "out", recipe=tmp_path / "r.toml")
    with pytest.raises(InvalidArgumentError, match="existing TOML file"):
        checkpoint.convert(src, tmp_path / "out", recipe=tmp_path / "missing.toml")


def test_formats_not_written_are_refused(corpus, tmp_path):
    src, _ = corpus
    with pytest.raises(UnsupportedError, match="format"):
        checkpoint.convert(src, tmp_path / "out", "int8", format="gguf")
    assert not (tmp_path / "out").exists()


# -- bad checkpoints ------------------------------------------------------------------------------------
def _two_shards(d: Path, index: dict | None = None, extra: dict | None = None):
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    tensorio.write_tensors(d / "model-00001-of-00002.safetensors", {"a.weight": _w(rng, 8, 32)})
    tensorio.write_tensors(d / "model-00002-of-00002.safetensors", {"b.weight": _w(rng, 8, 32), **(extra or {})})
    if index is not None:
        (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": index}))


S1, S2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"


@pytest.mark.parametrize("case, match, names", [
    ("twice", "'a.weight' is held by two files", S2),
    ("missing", "naming a shard that does not exist", "model-00003-of-00003"),
    ("unnamed", "shard file the index does not name", "model-00003-of-00002"),
    ("not-indexed", "'b.weight' is in a shard but not in the index", S2),
    ("not-held", "names tensor 'c.weight', which its shard does not hold", S2),
    ("elsewhere", "in another shard than the index says", S1),
])
def test_inconsistent_checkpoints_are_refused_naming_tensor_and_file(tmp_path, case, match, names):
    d = tmp_path / "src"
    if case == "twice":
        _two_shards(d, extra={"a.weight": np.zeros((2, 2), np.float32)})
    elif case == "missing":
        _two_shards(d, {"a.weight": S1, "b.weight": "model-00003-of-00003.safetensors"})
    elif case == "unnamed":
        _two_shards(d, {"a.weight": S1, "b.weight": S2})
        tensorio.write_tensors(d / "model-00003-of-00002.safetensors", {"c.weight": np.zeros(3, np.float32)})
    elif case == "not-indexed":
        _two_shards(d, {"a.weight": S1, "x.weight": S2}, extra={"x.weight": np.zeros(3, np.float32)})
    elif case == "not-held":
        _two_shards(d, {"a.weight": S1, "b.weight": S2, "c.weight": S2})
    else:
        _two_shards(d, {"a.weight": S2, "b.weight": S1})
    with pytest.raises(TensorFileError, match=match) as e:
        checkpoint.convert(d, tmp_path / "out", "int8", progress=False)
    assert names in str(e.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("scheme", ["int4-b32", "fp8-e4m3", "litert"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_or_inf_weights_stop_the_run_and_leave_nothing(tmp_path, small_slabs, scheme, bad):
    rng = np.random.default_rng(4)
    tensors = {f"l{i}.weight": _w(rng, 40, 64).astype(BF16) for i in range(6)}
    tensors["l4.weight"][33, 5] = bad
    tensorio.write_tensors(tmp_path / "m.safetensors", tensors)
    out = tmp_path / "out"
    with pytest.raises(RangeError, match=r"'l4.weight' holds NaN or infinity \(row 33\)") as e:
        checkpoint.convert(tmp_path / "m.safetensors", out, scheme, max_shard_size="6KB", progress=False)
    assert "m.safetensors" in str(e.value) and "nothing was written" in str(e.value)
    assert list(out.iterdir()) == []          # no shard, no temporary file, no lock
    # keeping the tensor converts the rest
    rep = checkpoint.convert(tmp_path / "m.safetensors", out, scheme, exclude=["l4.*"], progress=False)
    assert [t.name for t in rep.kept] == ["l4.weight"]


def test_dst_must_not_hold_other_files_or_the_source(corpus, tmp_path):
    src, _ = corpus
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(TensorFileError, match="not a quantspec conversion"):
        checkpoint.convert(src, tmp_path / "busy", "int8", progress=False)
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"
    with pytest.raises(TensorFileError, match="holds the source checkpoint"):
        checkpoint.convert(src, src, "int8", progress=False)


def test_a_device_without_room_is_refused_before_anything_is_computed(corpus, tmp_path, monkeypatch):
    src, _ = corpus

    class Tiny:
        f_bavail, f_frsize = 10, 4096

    monkeypatch.setattr(os, "statvfs", lambda path: Tiny())
    with pytest.raises(TensorFileError, match="without room for the conversion"):
        checkpoint.convert(src, tmp_path / "out", "int8", progress=False)
    assert list((tmp_path / "out").iterdir()) == []


def test_a_full_disk_while_allocating_stops_cleanly(corpus, tmp_path, monkeypatch):
    import errno

    src, _ = corpus

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(TensorFileError, match="ran out of space"):
        checkpoint.convert(src, tmp_path / "out", "int8", max_shard_size="20KB", progress=False)
    assert list((tmp_path / "out").iterdir()) == []


def test_a_directory_being_written_by_another_conversion_is_refused(corpus, tmp_path):
    import fcntl

    src, _ = corpus
    (tmp_path / "out").mkdir()
    with open(tmp_path / "out" / ".quantspec.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(TensorFileError, match="being written by another conversion"):
            checkpoint.convert(src, tmp_path / "out", "int8", progress=False)
        assert (tmp_path / "out" / ".quantspec.lock").exists()


# -- shards ---------------------------------------------------------------------------------------------
def test_shards_respect_max_shard_size_and_keep_each_tensor_with_its_parameters(corpus, tmp_path):
    src, _ = corpus
    rep = checkpoint.convert(src, tmp_path / "out", "uint4-b32-asym", max_shard_size="10KB", progress=False)
    out = tmp_path / "out"
    index = json.loads((out / "model.safetensors.index.json").read_text())
    manifest = json.loads((out / "quantspec.json").read_text())
    assert len(rep.shards) == len(manifest["shards"]) > 3
    data = 0
    for sh in manifest["shards"]:
        size = (out / sh["name"]).stat().st_size
        assert size == sh["size"]
        n = struct.unpack("<Q", (out / sh["name"]).read_bytes()[:8])[0]
        assert size - 8 - n <= 10_000 or len(sh["tensors"]) == 1
        data += size - 8 - n
    assert index["metadata"]["total_size"] == data
    for name, rec in manifest["tensors"].items():
        if rec["scheme"] != "keep":
            for part in ("codes", "scale", "zero_point"):
                assert index["weight_map"][rec[part]["name"]] == rec["shard"]


@pytest.mark.parametrize("text, n", [("2GB", 2 * 10 ** 9), ("500MiB", 500 << 20), ("1.5kb", 1500), (" 7 ", 7),
                                     (123, 123), (None, layout.DEFAULT_MAX_SHARD_SIZE)])
def test_sizes(text, n):
    assert layout.parse_size(text) == n


# -- interruption and resumption -------------------------------------------------------------------------
def _run_killed(src, dst, scheme, after_shards, tmp_path) -> int:
    script = textwrap.dedent(f"""
        import os, signal
        from quantspec import checkpoint
        from quantspec.checkpoint import layout
        layout.SLAB_BYTES = 4096
        seen = [0]
        def cb(ev):
            if ev.kind == "shard":
                seen[0] += 1
            elif ev.kind == "slab" and seen[0] >= {after_shards} and ev.shard_done > 0:
                os.kill(os.getpid(), signal.SIGKILL)      # mid-shard, as kill -9 does
        checkpoint.convert({str(src)!r}, {str(dst)!r}, {scheme!r}, max_shard_size="20KB", progress=cb)
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    return p.returncode


@pytest.mark.parametrize("scheme", ["int4-b32", "int8-tensor"])
def test_killed_mid_way_leaves_nothing_under_a_final_name_and_a_rerun_resumes_byte_identical(
        corpus, tmp_path, small_slabs, scheme):
    src, _ = corpus
    whole = tmp_path / "whole"
    checkpoint.convert(src, whole, scheme, max_shard_size="20KB", progress=False)
    dst = tmp_path / "dst"
    assert _run_killed(src, dst, scheme, 2, tmp_path) == -signal.SIGKILL
    left = sorted(p.name for p in dst.iterdir())
    assert _final_files(dst) == []                                   # nothing under a final name
    assert sum(n.endswith(".done") for n in left) >= 2 and any(n.endswith(".partial") for n in left)
    rep = checkpoint.convert(src, dst, scheme, max_shard_size="20KB", progress=False)
    assert len(rep.resumed) >= 2 and all(rep[n].resumed == (rep[n].shard in rep.resumed) for n in
                                         (t.name for t in rep.tensors))
    assert _all_bytes(dst) == _all_bytes(whole)


def test_ctrl_c_keeps_finished_shards_and_a_rerun_completes(corpus, tmp_path, small_slabs):
    src, _ = corpus
    whole = tmp_path / "whole"
    checkpoint.convert(src, whole, "mxfp4", max_shard_size="20KB", progress=False)
    shards = [0]

    def interrupt(ev):
        shards[0] += ev.kind == "shard"
        if shards[0] == 1 and ev.kind == "slab":
            raise KeyboardInterrupt

    dst = tmp_path / "dst"
    with pytest.raises(KeyboardInterrupt):
        checkpoint.convert(src, dst, "mxfp4", max_shard_size="20KB", progress=interrupt)
    assert _final_files(dst) == [] and not list(dst.glob("*.partial"))
    assert len(list(dst.glob(".*.done"))) == 1
    events = []
    rep = checkpoint.convert(src, dst, "mxfp4", max_shard_size="20KB", progress=events.append)
    assert len(rep.resumed) == 1 and _all_bytes(dst) == _all_bytes(whole)
    assert events[-1].done == events[-1].total == rep.bytes_in    # the kept shard's bytes were hashed
    # a rerun over the finished checkpoint keeps every shard and changes nothing
    rep = checkpoint.convert(src, dst, "mxfp4", max_shard_size="20KB", progress=False)
    assert rep.resumed == rep.shards and _all_bytes(dst) == _all_bytes(whole)


def test_a_finished_shard_whose_source_changed_is_recomputed(tmp_path, small_slabs):
    rng = np.random.default_rng(5)
    tensors = {f"l{i}.weight": _w(rng, 16, 64) for i in range(4)}
    tensorio.write_tensors(tmp_path / "m.safetensors", tensors)
    dst = tmp_path / "dst"
    checkpoint.convert(tmp_path / "m.safetensors", dst, "int8", max_shard_size="1KB", progress=False)
    tensors["l2.weight"][3, 3] = 0.5                                   # same shapes, other bytes
    tensorio.write_tensors(tmp_path / "m.safetensors", tensors)
    rep = checkpoint.convert(tmp_path / "m.safetensors", dst, "int8", max_shard_size="1KB", progress=False)
    assert rep.resumed == [s for s in rep.shards if s != rep["l2.weight"].shard]
    fresh = tmp_path / "fresh"
    checkpoint.convert(tmp_path / "m.safetensors", fresh, "int8", max_shard_size="1KB", progress=False)
    assert _all_bytes(dst) == _all_bytes(fresh)
    # another scheme into the same directory replaces the conversion, stale shards go
    rep = checkpoint.convert(tmp_path / "m.safetensors", dst, "int4-b32", progress=False)
    assert rep.resumed == [] and _final_files(dst) == ["model-00001-of-00001.safetensors",
                                                       "model.safetensors.index.json", "quantspec.json"]
    assert checkpoint.open(dst).scheme("l1.weight") == "int4-b32"



@pytest.mark.parametrize("damage", [b"x", b"-"])
def test_a_finished_shard_whose_header_records_are_damaged_is_converted_again(tmp_path, small_slabs, damage):
    """A rerun keeps a finished shard only where its header's records are those the plan writes (an
    error sum that is no number, or a negative one, made the rerun fail with a bare ValueError); the
    damaged shard is converted again and the output is a fresh run's."""
    rng = np.random.default_rng(6)
    tensors = {f"l{i}.weight": _w(rng, 16, 64) for i in range(3)}
    tensorio.write_tensors(tmp_path / "m.safetensors", tensors)
    dst = tmp_path / "dst"
    checkpoint.convert(tmp_path / "m.safetensors", dst, "int8", max_shard_size="1KB", progress=False)
    pristine = _all_bytes(dst)
    shard = dst / checkpoint.open(dst).describe("l1.weight")["shard"]
    data = bytearray(shard.read_bytes())
    k = data.index(b'"stats\\":\\"') + len(b'"stats\\":\\"')
    while data[k:k + 1] == b" ":
        k += 1
    data[k:k + 1] = damage                                          # "+1.2e-02": "x1.2e-02" or "-1.2e-02"
    shard.write_bytes(bytes(data))
    rep = checkpoint.convert(tmp_path / "m.safetensors", dst, "int8", max_shard_size="1KB", progress=False)
    assert shard.name not in rep.resumed and len(rep.resumed) == len(rep.shards) - 1
    assert _all_bytes(dst) == pristine and checkpoint.verify(tmp_path / "m.safetensors", dst).ok

# -- memory ------------------------------------------------------------------------------------------------
def test_peak_memory_is_a_few_slabs_for_a_tensor_larger_than_1_gib(tmp_path):
    """One bfloat16 tensor of 1.125 GiB (a sparse file: zeros, made instantly) converts with a peak
    resident memory, over the process's after a small warm-up conversion, below 6 slabs."""
    rows, cols = 36864, 16384                                # 1.125 GiB of bfloat16
    header = json.dumps({"w": {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [0, rows * cols * 2]}}).encode()
    header += b" " * (-len(header) % 8)
    big = tmp_path / "big.safetensors"
    with open(big, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        f.truncate(8 + len(header) + rows * cols * 2)
    small = tmp_path / "small.safetensors"
    tensorio.write_tensors(small, {"w": np.ones((64, 64), BF16)})
    script = textwrap.dedent(f"""
        import json, resource, sys
        from quantspec import checkpoint
        from quantspec.checkpoint import layout
        checkpoint.convert({str(small)!r}, {str(tmp_path / 'o1')!r}, "int4-b32", progress=False)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        rep = checkpoint.convert({str(big)!r}, {str(tmp_path / 'o2')!r}, "int4-b32", progress=False)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(json.dumps({{"before": before, "peak": peak, "slab": layout.SLAB_BYTES, "in": rep.bytes_in}}))
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    m = json.loads(p.stdout.strip().splitlines()[-1])
    assert m["in"] > 1 << 30
    grew = m["peak"] - m["before"]
    assert grew < 6 * m["slab"], f"peak RSS grew by {grew / 2**20:.0f} MiB for slabs of {m['slab'] / 2**20:.0f} MiB"
    ck = checkpoint.open(tmp_path / "o2")
    assert ck.params("w")[0][::4096, :3].tolist() == [[0.0, 0.0, 0.0]] * 9 and resource is not None


# -- progress, report, open ---------------------------------------------------------------------------------
def test_progress_callback_and_bars(corpus, tmp_path, capsys):
    src, _ = corpus
    events = []
    rep = checkpoint.convert(src, tmp_path / "a", "int8-tensor", max_shard_size="30KB", progress=events.append)
    kinds = [e.kind for e in events]
    assert kinds[0] == "start" and kinds[-1] == "done" and kinds.count("shard") == len(rep.shards)
    assert "scan" in kinds and events[-1].done == events[-1].total == events[0].total
    assert all(e.shard_done <= e.shard_total for e in events if e.kind == "slab")
    require("tqdm")
    checkpoint.convert(src, tmp_path / "b", "int8", progress=True)
    err = capsys.readouterr().err
    assert "convert" in err and "B/s" in err


def test_report_and_open(corpus, tmp_path):
    src, values = corpus
    rep = checkpoint.convert(src, tmp_path / "out", "int8", progress=False)
    assert len(rep.tensors) == len(values) and rep.seconds > 0
    q = rep["model.layers.0.self_attn.q_proj.weight"]
    assert q.scheme == "int8" and q.bytes_in == 80 * 80 * 2 and q.bytes_out == 80 * 80 + 80 * 4
    assert 0 < q.rel_rms < 0.1 and q.max_abs > 0
    assert "tensors quantized" in rep.summary() and "q_proj" in rep.table()
    ck = checkpoint.open(tmp_path / "out")
    assert ck.names() == list(values) and len(ck) == len(values) and "lm_head.weight" in ck
    with pytest.raises(InvalidArgumentError, match="must name a tensor"):
        ck.codes("nope")
    with pytest.raises(InvalidArgumentError, match="kept as it was"):
        ck.params("model.norm.weight")
    with pytest.raises(TensorFileError, match="not a converted checkpoint"):
        checkpoint.open(tmp_path)
    assert isinstance(TensorFileError("x", "y"), QuantSpecError)


# -- the command line ---------------------------------------------------------------------------------------
def test_cli_convert(corpus, tmp_path, capsys):
    src, _ = corpus
    assert main(["convert", str(src), str(tmp_path / "a"), "--scheme", "int4-b64", "--max-shard-size", "30KB"]) == 0
    out = capsys.readouterr()
    assert out.out.count("\n") == 1 and "tensors quantized" in out.out and out.err == ""
    assert main(["convert", str(src), str(tmp_path / "b"), "--scheme", "int8", "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    assert main(["convert", str(src), str(tmp_path / "c"), "--scheme", "int8", "--exclude", "*embed*",
                 "--include", "model.*", "--report", "--quiet"]) == 0
    ck = checkpoint.open(tmp_path / "c")
    assert ck.scheme("model.embed_tokens.weight") == "keep" and ck.scheme("lm_head.weight") == "keep"
    assert main(["convert", str(src), str(tmp_path / "d"), "--scheme", "int9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "must name a scheme" in err
    assert main(["convert", str(src), str(tmp_path / "d")]) == 2
    assert main(["convert", str(src), str(tmp_path / "d"), "--scheme", "int8", "--format", "gguf"]) == 2
    assert "format" in capsys.readouterr().err


def test_cli_interrupted_message(corpus, tmp_path, capsys, monkeypatch):
    import importlib

    convert_module = importlib.import_module("quantspec.checkpoint.converter")

    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(convert_module, "convert", stop)
    src, _ = corpus
    assert main(["convert", str(src), str(tmp_path / "a"), "--scheme", "int8"]) == 130
    assert "Run the same command again to resume" in capsys.readouterr().err


def test_quantspec_convert_in_a_subprocess_prints_a_summary(corpus, tmp_path):
    src, _ = corpus
    p = subprocess.run([sys.executable, "-m", "quantspec", "convert", str(src), str(tmp_path / "o"), "--scheme",
                        "fp8-e4m3-channel"], capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("quantspec convert: ") and p.stderr == ""


def test_bench_only_convert_runs_and_its_int4_codes_equal_onnxruntimes(capsys):
    require("onnxruntime")
    assert main(["bench", "--only", "convert", "--size", str(1 << 20), "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "of the f.read rate" in out and "convert int4-b32" in out and "byte-identical" in out
    assert "quantize_data" in out and "all timed outputs equal the peers'" in out


def test_written_bytes_are_handed_to_the_disk_as_they_are_written(tmp_path, monkeypatch):
    """Every output byte a slab writes is passed to ``sync_file_range(SYNC_FILE_RANGE_WRITE)`` right
    after its write (so the shard's fsync finds little left to write); without the call (another
    system) the output is the same."""
    from safetensors.numpy import save_file

    from quantspec.checkpoint import encode

    rng = np.random.default_rng(5)
    save_file({"a.weight": rng.normal(size=(96, 64)).astype(np.float32), "norm": np.ones(64, np.float32)},
              str(tmp_path / "m.safetensors"))
    calls = []
    real = encode._SYNC_FILE_RANGE

    def record(fd, offset, nbytes, flags):
        calls.append((os.fstat(fd).st_ino, offset, nbytes, flags))
        return real(fd, offset, nbytes, flags) if real is not None else 0

    monkeypatch.setattr(encode, "_SYNC_FILE_RANGE", record)
    checkpoint.convert(tmp_path / "m.safetensors", tmp_path / "out", "int8", progress=False)
    assert calls and all(flags == 2 for *_, flags in calls)
    ck = checkpoint.open(tmp_path / "out")
    written = sum(n for _, _, n, _ in calls)
    assert written == sum(p.stat().st_size for p in (tmp_path / "out").glob("*.safetensors")) - \
        sum(8 + struct.unpack("<Q", p.read_bytes()[:8])[0] for p in (tmp_path / "out").glob("*.safetensors"))
    monkeypatch.setattr(encode, "_SYNC_FILE_RANGE", None)
    checkpoint.convert(tmp_path / "m.safetensors", tmp_path / "out2", "int8", progress=False)
    for name in ck.names():
        assert np.array_equal(checkpoint.open(tmp_path / "out2").codes(name), ck.codes(name))
    if sys.platform.startswith("linux"):
        assert real is not None, "Linux has sync_file_range"


def test_a_file_replaced_under_the_same_name_is_read_afresh(tmp_path):
    """Descriptors kept open between reads follow the path: a shard replaced by another file of the
    same name (a second convert into the same directory by another process, a copy) is read afresh
    by the next ``open`` / ``verify`` in this process, not through the old file's descriptor (found
    while checking the fuzzers' results: a damaged shard verified as identical after a checkpoint
    of the same path had been read)."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(9)
    w = rng.normal(size=(8, 64)).astype(np.float32)
    save_file({"w": w}, str(tmp_path / "m.safetensors"))
    checkpoint.convert(tmp_path / "m.safetensors", tmp_path / "a", "int8", progress=False)
    checkpoint.convert(tmp_path / "m.safetensors", tmp_path / "b", "int8", progress=False)
    before = checkpoint.open(tmp_path / "a").codes("w").copy()             # keeps a descriptor of a's shard
    shard = next((tmp_path / "a").glob("*.safetensors"))
    data = bytearray(shard.read_bytes())
    hlen = struct.unpack("<Q", data[:8])[0]
    start = json.loads(bytes(data[8:8 + hlen]))["w"]["data_offsets"][0]
    data[8 + hlen + start] ^= 0x5A                                          # the first code
    (tmp_path / "new").write_bytes(bytes(data))
    os.replace(tmp_path / "new", shard)                                     # another file, the same name
    after = checkpoint.open(tmp_path / "a").codes("w")
    assert after.reshape(-1)[0] != before.reshape(-1)[0]
    assert np.array_equal(after.reshape(-1)[1:], before.reshape(-1)[1:])
    assert not checkpoint.verify(tmp_path / "m.safetensors", tmp_path / "a").ok
    shard.unlink()
    with pytest.raises(QuantSpecError):
        checkpoint.open(tmp_path / "a").codes("w")


def test_a_tensor_whose_error_is_not_finite_is_named_in_the_summary(tmp_path):
    """A block spanning float32's whole range has an infinite scale (as onnxruntime's block
    quantizer computes it), so the tensor's relative RMS error and its largest error are NaN (the
    running maximum passed over the NaN errors and reported 0.16): the summary's worst error is
    NaN wherever that tensor stands (``max`` kept or dropped a NaN by its place) and names it."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(17)
    wide = rng.normal(size=(4, 32)).astype(np.float32)
    wide[2, 0], wide[2, 5] = -np.finfo(np.float32).max, np.finfo(np.float32).max
    tensors = {"a.weight": wide, "b.weight": rng.normal(size=(4, 32)).astype(np.float32)}
    for order in (["a.weight", "b.weight"], ["b.weight", "a.weight"]):
        src = tmp_path / f"{order[0]}.safetensors"
        save_file({n: tensors[n] for n in order}, str(src))
        rep = checkpoint.convert(src, tmp_path / f"out-{order[0]}", "uint4-b16-asym", progress=False)
        a = next(t for t in rep.tensors if t.name == "a.weight")
        assert np.isnan(a.rel_rms) and np.isnan(a.max_abs)      # not the largest of the other errors
        assert 0 < next(t for t in rep.tensors if t.name == "b.weight").rel_rms < 1
        assert "worst relative RMS error nan (not finite for 1: a.weight;" in rep.summary(), rep.summary()


def test_a_truncated_shard_is_reported_as_truncated(tmp_path, capsys):
    """A shard cut short (a copy or download not finished) is named as truncated, by convert and by
    the element-wise commands, with the byte where its data ends; nothing is written."""
    (tmp_path / "src").mkdir()
    tensorio.write_tensors(tmp_path / "src" / "model.safetensors",
                           {"a": np.arange(1000, dtype=np.float32), "b": np.ones((10, 10), np.float32)})
    shard = tmp_path / "src" / "model.safetensors"
    shard.write_bytes(shard.read_bytes()[:-100])
    assert main(["convert", str(tmp_path / "src"), str(tmp_path / "out"), "--scheme", "int8"]) == 2
    err = capsys.readouterr().err
    assert "tensor 'b' is cut short: the file is truncated" in err and "\n" not in err.strip()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    with pytest.raises(TensorFileError, match="the file is truncated"):
        tensorio.read_tensors(shard)


def test_convert_with_an_option_missing_its_value_prints_one_error_line(tmp_path, capsys, monkeypatch):
    """``quantspec convert x.npy out --format -- compressed-tensors``: the pre-parser that finds SRC
    printed its own usage and "__main__.py: error: ..." line before the converter's: two error lines
    (found by the command-line fuzzer)."""
    np.save(tmp_path / "x.npy", np.zeros((2, 3), np.float32))
    monkeypatch.chdir(tmp_path)
    try:
        code = main(["convert", "x.npy", "out.onnx", "--scheme", "mxfp4", "--format", "--", "compressed-tensors",
                     "--quiet"])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2
    errors = [ln for ln in err.splitlines() if ": error:" in ln]
    assert len(errors) == 1 and errors[0].startswith("quantspec convert: error:"), err
