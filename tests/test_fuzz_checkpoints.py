"""Fuzzing of whole checkpoints: ``quantspec.checkpoint.convert``, ``verify`` and ``open``.

- Odd sources (hypothesis): checkpoints of random tensors -- every safetensors type (float8,
  bfloat16, float64, integers, bool), 0-d, empty, 1-D and odd-sized shapes, odd names; one
  safetensors file, two shards and their index, an ``.npz`` or an ``.npy`` --
  converted with a random scheme into either layout.  Each conversion returns a report or raises a
  quantspec error; a checkpoint it writes is then verified against its source, and ``verify`` (an
  independent re-derivation of every byte) must find it identical.
- Damaged sources (mutation): a valid sharded checkpoint (two shards and their index.json) with one
  file damaged by fuzz_files.mutate, or with structural damage: a shard truncated, deleted or
  swapped, the index naming a missing shard, a wrong shard or a tensor no shard holds.  ``convert``
  returns a report or raises a quantspec error; a checkpoint it writes verifies as identical.
- Damaged outputs (mutation): a valid converted checkpoint with one of its files damaged (a shard,
  its index, the manifest): ``verify`` and ``open`` (with every tensor read back) return a result or
  raise a quantspec error.

Every call runs in a forked child with a time limit (fuzz_support.isolated): another exception, a
crash or a hang fails the test.  ``QUANTSPEC_FUZZ_EXAMPLES`` scales the counts (fuzz_support)."""

from __future__ import annotations

import json
import random
import shutil
import struct
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, seed
from hypothesis import strategies as st

import fuzz_files
import fuzz_support as F

#: safetensors type code -> numpy type
ST_TYPES = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16, "F64": np.float64,
            "F8_E4M3": ml_dtypes.float8_e4m3fn, "F8_E5M2": ml_dtypes.float8_e5m2, "I8": np.int8, "U8": np.uint8,
            "I16": np.int16, "I32": np.int32, "I64": np.int64, "BOOL": np.bool_}
#: the schemes drawn (each family once or twice; a scheme no tensor suits is a kept tensor, not an error)
SCHEMES = ("int8", "int8-tensor", "uint8-asym", "int4-b16", "int4-b32", "uint4-b16-asym", "fp8-e4m3",
           "fp8-e4m3-channel", "mxfp4", "mxfp8-e4m3", "mxint8", "litert")
TIMEOUT = 120.0


def safetensors_bytes(tensors: dict[str, np.ndarray], metadata: dict | None = None) -> bytes:
    """A safetensors file, written here byte by byte (every type, including those numpy lacks)."""
    codes = {np.dtype(v): k for k, v in ST_TYPES.items()}
    header, chunks, offset = {}, [], 0
    for name, a in tensors.items():
        data = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": codes[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def write_sharded(directory: Path, shards: list[dict[str, np.ndarray]]) -> Path:
    """``shards`` as model-0000k-of-0000n.safetensors files and their index.json in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    weight_map, total = {}, 0
    for k, tensors in enumerate(shards, 1):
        name = f"model-{k:05d}-of-{len(shards):05d}.safetensors"
        data = safetensors_bytes(tensors)
        (directory / name).write_bytes(data)
        total += len(data)
        weight_map.update({t: name for t in tensors})
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
    return directory


def _values(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype.kind in "iu" or dtype in (np.float32, np.float64):
        return F.values(rng, tuple(shape), dtype)
    with np.errstate(all="ignore"):     # the float32 corpus (specials, denormals, huge) rounded to the type
        return F.values(rng, tuple(shape), np.dtype(np.float32)).astype(dtype)


def finite(a: np.ndarray) -> np.ndarray:
    """``a`` without NaN and infinities (which a conversion refuses, naming the tensor)."""
    if a.dtype.kind in "iub":
        return a
    if a.dtype == np.float64:
        return np.nan_to_num(a, nan=0.0, posinf=1e4, neginf=-1e4)
    with np.errstate(all="ignore"):
        return np.nan_to_num(a.astype(np.float32), nan=0.0, posinf=1e4, neginf=-1e4).astype(a.dtype)


def seed_shards(rng: np.random.Generator) -> list[dict[str, np.ndarray]]:
    """The valid source the mutation fuzzers damage: two shards of float32 / float16 / bfloat16
    matrices (block-sized and odd, the corpus's extremes but no NaN or infinity), a bias, an integer
    tensor."""
    return [{n: finite(a) for n, a in shard.items()} for shard in _seed_shards(rng)]


def _seed_shards(rng: np.random.Generator) -> list[dict[str, np.ndarray]]:
    return [{"layer.0.weight": _values(rng, (8, 32), np.float32), "layer.0.bias": _values(rng, (8,), np.float32),
             "layer.1.weight": _values(rng, (5, 48), np.float16)},
            {"layer.2.weight": _values(rng, (16, 64), ml_dtypes.bfloat16), "layer.3.weight": _values(rng, (3, 7),
                                                                                                      np.float32),
             "position_ids": np.arange(6, dtype=np.int64)}]


def _convert_then_verify(src: Path, dst: Path, scheme: str, fmt: str):
    """convert, then (when it wrote a checkpoint) verify: the verify report must be ok."""
    from quantspec.checkpoint import convert, verify

    report = convert(src, dst, scheme, format=fmt, progress=False, dask=None)
    check = verify(src, dst, params_from_dst=fmt != "quantspec")
    assert check.ok, f"verify finds the checkpoint convert wrote different from its source: {check.summary()}"
    return (len(report.tensors), sorted(t.name for t in check.tensors))


def _read_back(dst: Path, src: Path):
    """verify (against the valid source), then open the checkpoint and read every tensor."""
    from quantspec import checkpoint

    outcome = []
    try:
        outcome.append(checkpoint.verify(src, dst).ok)
    except Exception as e:  # noqa: BLE001 - the rule is checked below, on each call separately
        if not isinstance(e, F.QuantSpecError):
            raise
        outcome.append(type(e).__name__)
    ck = checkpoint.open(dst)
    for name in ck.names():
        ck.dequantize(name)
    return outcome


# -- odd sources ----------------------------------------------------------------------------------

_NAMES = st.sampled_from(["w", "model.layers.0.mlp.weight", "a.b", "norm.weight", "x" * 40, "é", "lm_head.weight",
                          "bias", "emb.weight"])


@st.composite
def _checkpoint(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    names = draw(st.lists(_NAMES, min_size=1, max_size=4, unique=True))
    tensors = {}
    for name in names:
        code = draw(st.sampled_from(sorted(ST_TYPES)))
        rank = draw(st.sampled_from([0, 1, 2, 2, 2, 3]))
        shape = tuple(draw(st.sampled_from([0, 1, 2, 3, 16, 31, 32, 33, 64])) for _ in range(rank))
        tensors[name] = _values(rng, shape, ST_TYPES[code])
        if F.chance(draw, 0.8):      # NaN or infinity: a RangeError naming the tensor, every time
            tensors[name] = finite(tensors[name])
    return tensors


@seed(F.SEED)
@F.fuzz_settings(0.4)
@given(tensors=_checkpoint(), scheme=st.sampled_from(SCHEMES), fmt=st.sampled_from(["quantspec", "compressed-tensors"]),
       kind=st.sampled_from(["file", "sharded", "sharded", "npz", "npy"]))
def test_fuzz_convert_odd_sources(tensors, scheme, fmt, kind, tmp_path_factory):
    base = tmp_path_factory.mktemp("odd")
    if kind == "sharded" and len(tensors) > 1:
        names = list(tensors)
        src = write_sharded(base / "src", [{n: tensors[n] for n in names[:1]}, {n: tensors[n] for n in names[1:]}])
    elif kind == "npz":           # members of every type numpy saves (ml_dtypes types as numpy stores them)
        src = base / "model.npz"
        np.savez(src, **{n.replace("/", "_"): a for n, a in tensors.items()})
    elif kind == "npy":
        src = base / "model.npy"
        np.save(src, next(iter(tensors.values())))
    else:
        src = base / "model.safetensors"
        src.write_bytes(safetensors_bytes(tensors))
    what = f"convert({src.name}, scheme={scheme!r}, format={fmt!r}) of " + ", ".join(
        f"{n}: {a.dtype}{list(a.shape)}" for n, a in tensors.items())
    F.isolated(lambda: _convert_then_verify(src, base / "dst", scheme, fmt), TIMEOUT, what)
    shutil.rmtree(base, ignore_errors=True)


# -- damaged sources --------------------------------------------------------------------------------

def _structural(src: Path, rng: random.Random) -> str:
    """One structural damage of the sharded source in ``src``; returns what it did."""
    shards = sorted(src.glob("*.safetensors"))
    index_path = src / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    kind = rng.choice(["truncate", "delete", "swap", "missing-shard", "wrong-shard", "phantom-tensor",
                       "no-weight-map", "drop-tensor", "header-length", "offsets"])
    shard = rng.choice(shards)
    if kind == "truncate":
        data = shard.read_bytes()
        shard.write_bytes(data[:rng.randrange(len(data))])
    elif kind == "delete":
        shard.unlink()
    elif kind == "swap":
        a, b = shards
        da, db = a.read_bytes(), b.read_bytes()
        a.write_bytes(db)
        b.write_bytes(da)
    elif kind in ("missing-shard", "wrong-shard", "phantom-tensor", "drop-tensor", "no-weight-map"):
        wm = index["weight_map"]
        name = rng.choice(sorted(wm))
        if kind == "missing-shard":
            wm[name] = "model-00009-of-00009.safetensors"
        elif kind == "wrong-shard":
            wm[name] = next(s.name for s in shards if s.name != wm[name])
        elif kind == "phantom-tensor":
            wm["not.in.any.shard"] = shards[0].name
        elif kind == "drop-tensor":
            del wm[name]
        else:
            del index["weight_map"]
        index_path.write_text(json.dumps(index))
    elif kind == "header-length":
        data = bytearray(shard.read_bytes())
        data[:8] = struct.pack("<Q", rng.choice([0, 1, 7, 2**63 - 1, 2**64 - 1, len(data), len(data) - 7]))
        shard.write_bytes(bytes(data))
    else:  # the data offsets of one tensor: overlapping, reversed, past the end, the wrong length
        data = shard.read_bytes()
        n = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8:8 + n])
        name = rng.choice(sorted(k for k in header if k != "__metadata__"))
        lo, hi = header[name]["data_offsets"]
        header[name]["data_offsets"] = rng.choice([[hi, lo], [lo, hi + 4], [lo + 1, hi + 1], [0, 0], [lo, 2**62]])
        if rng.random() < 0.5:
            header[name]["shape"] = rng.choice([[-1], [2**40, 2**40], [], [0], [3, 0, 5]])
        if rng.random() < 0.3:
            header[name]["dtype"] = rng.choice(["F8_E4M3", "BF16", "I64", "F4", "U64", "BOOL", "F64", ""])
        text = json.dumps(header).encode()
        shard.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + n:])
    return f"{kind} of {shard.name}"


def _mutated_source(template: Path, target: Path, rng: random.Random, i: int) -> str:
    shutil.copytree(template, target)
    if i == 0:
        return "none"
    if i % 3 == 0:
        return _structural(target, rng)
    files = sorted(target.iterdir())
    victim = rng.choice(files)
    victim.write_bytes(fuzz_files.mutate(victim.read_bytes(), rng))
    return f"bytes of {victim.name} mutated"


def test_fuzz_convert_damaged_sources(tmp_path):
    template = write_sharded(tmp_path / "template", seed_shards(np.random.default_rng(F.SEED)))
    rng = random.Random(f"{F.SEED}-checkpoint-sources")
    count = max(12, int(60 * F.SCALE))
    stats = {"converted": 0, "refused": 0}
    for i in range(count):
        src = tmp_path / f"src{i}"
        damage = _mutated_source(template, src, rng, i)
        scheme, fmt = rng.choice(SCHEMES), rng.choice(["quantspec", "compressed-tensors"])
        what = f"damaged source {i} ({damage}), convert with scheme={scheme!r}, format={fmt!r}"
        kind, _ = F.isolated(lambda: _convert_then_verify(src, tmp_path / f"dst{i}", scheme, fmt), TIMEOUT, what)
        stats["converted" if kind == "ok" else "refused"] += 1
        shutil.rmtree(src, ignore_errors=True)
        shutil.rmtree(tmp_path / f"dst{i}", ignore_errors=True)
    print(f"checkpoint sources: {count} damaged, {stats}")
    assert stats["refused"] and stats["converted"], stats        # the damage is seen, and not only seen


# -- damaged outputs --------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["quantspec", "compressed-tensors"])
def test_fuzz_verify_open_damaged_outputs(fmt, tmp_path):
    from quantspec.checkpoint import convert

    src = write_sharded(tmp_path / "src", seed_shards(np.random.default_rng(F.SEED)))
    template = tmp_path / "template"
    convert(src, template, "int4-b16", recipe={"default": "int4-b16", "rules": [
        {"match": "layer.1.*", "scheme": "int8"}, {"match": "layer.3.*", "scheme": "fp8-e4m3"}]},
        format=fmt, progress=False, max_shard_size=4000)
    rng = random.Random(f"{F.SEED}-checkpoint-outputs-{fmt}")
    count = max(12, int(60 * F.SCALE))
    stats = {"ok": 0, "refused": 0, "differences found": 0}
    files = sorted(p.name for p in template.iterdir())
    for i in range(count):
        dst = tmp_path / f"dst{i}"
        shutil.copytree(template, dst)
        victim = dst / files[i % len(files)]
        victim.write_bytes(fuzz_files.mutate(victim.read_bytes(), rng))
        what = f"{fmt} checkpoint with {victim.name} mutated (mutant {i})"
        kind, payload = F.isolated(lambda: _read_back(dst, src), TIMEOUT, what)
        if kind == "ok":
            stats["ok"] += 1
            stats["differences found"] += "False" in str(payload)
            if "True" in str(payload):
                print("verified identical after damage:", what)
        else:
            stats["refused"] += 1
        shutil.rmtree(dst, ignore_errors=True)
    print(f"{fmt} checkpoint outputs: {count} damaged, {stats}")
    assert stats["refused"] or stats["differences found"], stats
