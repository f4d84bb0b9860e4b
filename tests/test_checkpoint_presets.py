"""compressed-tensors presets (``quantspec convert SRC DST --scheme PRESET``) against llm-compressor
itself: ``model_free_ptq(src, out, scheme=PRESET, ignore=[...])``, run in its own environment
(``llmc``: llmcompressor 0.14.0.1 with compressed-tensors 0.19.0, the versions its release requires).

- every stored tensor (name, dtype, shape, bytes) of quantspec's output equals llm-compressor's, for
  a tiny random Llama built from a config (bfloat16; float16 and float32 for some presets; a second
  shape with partial 128-blocks), and for an adversarial corpus of weights (``ct_corpus``: ties,
  ±0, subnormals, huge values, zero groups, grid values, partial blocks and words) in each weight
  type; ``quantization_config`` says the same (groups, formats, arguments, ignored modules);
- both checkpoints load in transformers and give the same logits, bit for bit;
- ``quantspec verify SRC LLMC_OUT`` exits 0 (compressed-tensors' arithmetic) and, after one code of
  llm-compressor's output is changed, exits 1 naming that tensor and position.

quantspec keeps the embedding by default (its inputs are token ids; llm-compressor's
``model_free_ptq`` quantizes ``model.embed_tokens`` as a Linear unless told to ignore it), so the
tool is given ``ignore=["model.embed_tokens"]`` (and ``lm_head`` where quantspec is told to keep it).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

import ct_corpus
import hf
import llmc
from quantspec import checkpoint
from quantspec.checkpoint.presets import PRESETS

#: the presets the acceptance names, and the other data-free ones
MAIN = ["W8A16", "W4A16", "W4A16_ASYM", "W8A8", "FP8_DYNAMIC", "FP8_BLOCK", "NVFP4A16", "MXFP4A16"]
OTHER = ["W4A8", "W3A16", "W6A16", "W4AFP8", "MXFP4"]
EMBED = ["model.embed_tokens"]


def _stored(d: Path) -> dict[str, tuple[str, tuple, bytes]]:
    """Every tensor of a checkpoint directory: name -> (dtype, shape, bytes); a name twice is an error."""
    out = {}
    for f in sorted(d.glob("*.safetensors")):
        b = f.read_bytes()
        n = struct.unpack("<Q", b[:8])[0]
        h = json.loads(b[8:8 + n])
        for k, v in h.items():
            if k == "__metadata__":
                continue
            assert k not in out, f"{k} stored twice in {d}"
            lo, hi = v["data_offsets"]
            out[k] = (v["dtype"], tuple(v["shape"]), b[8 + n + lo:8 + n + hi])
    return out


def _same_tensors(ours: Path, theirs: Path) -> None:
    a, b = _stored(ours), _stored(theirs)
    assert sorted(a) == sorted(b), f"names differ: only ours {sorted(set(a) - set(b))[:5]}, only theirs " \
                                   f"{sorted(set(b) - set(a))[:5]}"
    bad = [k for k in a if a[k] != b[k]]
    detail = [(k, a[k][:2], b[k][:2], sum(x != y for x, y in zip(a[k][2], b[k][2]))) for k in bad[:5]]
    assert not bad, f"{len(bad)} of {len(a)} tensors differ (name, ours, theirs, differing bytes): {detail}"


def _qconfig(d: Path) -> dict:
    return json.loads((d / "config.json").read_text())["quantization_config"]


def _same_config(ours: Path, theirs: Path) -> None:
    a, b = _qconfig(ours), _qconfig(theirs)
    for q in (a, b):
        q.pop("version")                        # the compressed-tensors version each was written with
    assert sorted(a.pop("ignore")) == sorted(b.pop("ignore"))
    assert a == b
    ca = json.loads((ours / "config.json").read_text())
    cb = json.loads((theirs / "config.json").read_text())
    ca.pop("quantization_config"), cb.pop("quantization_config")
    assert ca == cb


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return llmc.cached_tiny_llama(tmp_path_factory)


@pytest.fixture(scope="module")
def llama_odd(tmp_path_factory):
    # in_features 320 of down_proj: partial 128-blocks (FP8_BLOCK pads them) and groups of 16 / 32 only
    return llmc.cached_tiny_llama(tmp_path_factory, intermediate_size=320, num_key_value_heads=1, seed=1)


@pytest.fixture(scope="module")
def theirs(llama, tmp_path_factory):
    base = tmp_path_factory.mktemp("llmc")
    jobs = [(base / p, p, EMBED) for p in MAIN + OTHER] + [(base / "W4A16-nolm", "W4A16", EMBED + ["lm_head"])]
    llmc.model_free_ptq_many(llama, jobs)
    return base


def _ours(src: Path, dst: Path, preset: str, exclude=None) -> Path:
    rep = checkpoint.convert(src, dst, preset, exclude=exclude, progress=False)
    assert rep.quantized
    return dst


@pytest.mark.parametrize("preset", MAIN + OTHER)
def test_tensors_and_config_are_llm_compressors(llama, theirs, tmp_path, preset):
    ours = _ours(llama, tmp_path / preset, preset.lower() if preset in MAIN[:3] else preset)
    _same_tensors(ours, theirs / preset)
    _same_config(ours, theirs / preset)
    assert (ours / "generation_config.json").read_bytes() == (llama / "generation_config.json").read_bytes()


def test_an_ignored_lm_head(llama, theirs, tmp_path):
    ours = _ours(llama, tmp_path / "o", "W4A16", exclude=["lm_head.weight"])
    _same_tensors(ours, theirs / "W4A16-nolm")
    _same_config(ours, theirs / "W4A16-nolm")


@pytest.mark.parametrize("preset", MAIN)
def test_logits_are_llm_compressors(llama, theirs, tmp_path, preset):
    ours = _ours(llama, tmp_path / preset, preset)
    # compressed-tensors cannot load an asymmetric pack-quantized checkpoint in its default mode (it
    # compresses the meta model without packing the zero points): both load dense
    dense = preset == "W4A16_ASYM"
    a = hf.logits(ours, dequantize=dense)
    b = hf.logits(theirs / preset, dequantize=dense)
    assert np.isfinite(a).all() and a.shape == b.shape
    assert a.tobytes() == b.tobytes(), f"{int((a != b).sum())} of {a.size} logits differ"


ODD = ["FP8_DYNAMIC", "W8A8", "NVFP4A16", "MXFP4A16"]


@pytest.fixture(scope="module")
def theirs_odd(llama_odd, tmp_path_factory):
    base = tmp_path_factory.mktemp("llmc-odd")
    llmc.model_free_ptq_many(llama_odd, [(base / p, p, EMBED) for p in ODD])
    return base


@pytest.mark.parametrize("preset", ODD)
def test_partial_blocks_and_one_kv_head(llama_odd, theirs_odd, tmp_path, preset):
    ours = _ours(llama_odd, tmp_path / preset, preset)
    _same_tensors(ours, theirs_odd / preset)
    _same_config(ours, theirs_odd / preset)


#: llm-compressor's converter on one file, its result saved contiguous (``model_free_ptq`` itself cannot
#: save FP8_BLOCK weights with partial 128-blocks: it slices the padded codes and safetensors refuses
#: the non-contiguous slice)
_PROCESS = """
import sys
from safetensors.torch import load_file, save_file
from llmcompressor.entrypoints.model_free.converter import ModelFreePtqConverter
from llmcompressor.entrypoints.model_free.validate import validate_config
src, dst, scheme = sys.argv[1:4]
out = ModelFreePtqConverter(validate_config(None, scheme, [])).process(load_file(src))
save_file({k: v.contiguous() for k, v in out.items()}, dst)
"""


def _process(src: Path, dst: Path, scheme: str) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    llmc._run(llmc.llmc_python(), _PROCESS, str(src / "model.safetensors"), str(dst / "model.safetensors"), scheme,
              timeout=600, what=f"ModelFreePtqConverter.process ({scheme})")
    return dst


def test_model_free_ptq_cannot_save_partial_fp8_blocks(llama_odd, tmp_path):
    # the divergence the docs state: quantspec writes them (compressed-tensors' padded blocks)
    with pytest.raises(AssertionError, match="non contiguous"):
        llmc.model_free_ptq(llama_odd, tmp_path / "o", "FP8_BLOCK", EMBED)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float"])
def test_partial_fp8_blocks_are_the_tools_converters(tmp_path, dtype):
    src = ct_corpus.write(tmp_path / "src", seed=11, dtype=dtype)
    theirs = _process(src, tmp_path / "theirs", "FP8_BLOCK")
    ours = _ours(src, tmp_path / "ours", "FP8_BLOCK")
    _same_tensors(ours, theirs)


CORPUS = [(p, "bfloat16") for p in MAIN + OTHER if p != "FP8_BLOCK"] + [
    (p, dt) for dt in ("float16", "float") for p in ("W4A16", "W4A16_ASYM", "W8A8", "NVFP4A16", "MXFP4A16")]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    base = tmp_path_factory.mktemp("ct-corpus")
    srcs = {dt: ct_corpus.write(base / f"src-{dt}", seed=7, dtype=dt) for dt in ct_corpus.DTYPES}
    for dt, src in srcs.items():
        jobs = [(base / f"theirs-{dt}-{p}", p, []) for p, d in CORPUS if d == dt]
        llmc.model_free_ptq_many(src, jobs)
    return base, srcs


@pytest.mark.parametrize("preset, dtype", CORPUS)
def test_the_adversarial_corpus(corpus, tmp_path, preset, dtype):
    base, srcs = corpus
    ours = _ours(srcs[dtype], tmp_path / "o", preset)
    _same_tensors(ours, base / f"theirs-{dtype}-{preset}")
    _same_config(ours, base / f"theirs-{dtype}-{preset}")


@pytest.mark.parametrize("preset", ["W4A16", "NVFP4A16", "FP8_BLOCK", "W4A16_ASYM"])
def test_verify_passes_llm_compressors_output_and_finds_one_changed_code(llama, theirs, tmp_path, preset, capsys):
    from quantspec.checkpoint._cli import verify_main

    assert verify_main([str(llama), str(theirs / preset)]) == 0
    out = capsys.readouterr().out
    assert "identical" in out and "rule compressed-tensors" in out
    # change one code of one weight: the lowest bits of the first stored byte of its codes
    import shutil

    dst = tmp_path / "changed"
    shutil.copytree(theirs / preset, dst)
    module = "model.layers.1.mlp.down_proj"
    target = next(f for f in sorted(dst.glob("*.safetensors")) if _has(f, module))
    name = _codes_name(target, module)
    _flip_first_code(target, name)
    assert verify_main([str(llama), str(dst)]) == 1
    out = capsys.readouterr().out
    assert f"{module}.weight: different" in out and "1 of 21 tensors differ" in out
    assert "[0, 0]" in out, out                  # the position of the changed code


def _has(f: Path, module: str) -> bool:
    b = f.read_bytes()
    n = struct.unpack("<Q", b[:8])[0]
    return any(k.startswith(module + ".weight") for k in json.loads(b[8:8 + n]))


def _codes_name(f: Path, module: str) -> str:
    b = f.read_bytes()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return module + (".weight_packed" if module + ".weight_packed" in h else ".weight")


def _flip_first_code(f: Path, name: str) -> None:
    b = bytearray(f.read_bytes())
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    off = 8 + n + h[name]["data_offsets"][0]
    b[off] ^= 0x01                 # the first code's lowest bit (int4 / fp4: the low nibble; int8 / fp8)
    f.write_bytes(bytes(b))


def test_presets_are_named_in_any_case_and_take_the_compressed_tensors_layout(llama, tmp_path):
    from quantspec.errors import InvalidArgumentError, UnsupportedError

    rep = checkpoint.convert(llama, tmp_path / "a", "nvfp4a16", progress=False)
    assert {t.scheme for t in rep.quantized} == {"NVFP4A16"}
    assert _qconfig(tmp_path / "a")["format"] == "nvfp4-pack-quantized"
    with pytest.raises(UnsupportedError, match="compressed-tensors layout only"):
        checkpoint.convert(llama, tmp_path / "b", "W4A16", format="quantspec", progress=False)
    with pytest.raises(InvalidArgumentError, match="calibration"):
        checkpoint.convert(llama, tmp_path / "c", "FP8", progress=False)
    assert set(MAIN) <= set(PRESETS)


# -- the converter's machinery under presets: slabs, resumption, Dask ----------------------------------
def _bytes(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.suffix in (".safetensors", ".json")}


@pytest.mark.parametrize("preset", ["NVFP4A16", "FP8_BLOCK", "W4A16_ASYM"])
def test_small_slabs_give_the_same_bytes(llama_odd, tmp_path, monkeypatch, preset):
    from quantspec.checkpoint import layout

    whole = _ours(llama_odd, tmp_path / "whole", preset)
    monkeypatch.setattr(layout, "SLAB_BYTES", 4096)       # slabs of a few rows: 128-row bands, 8-row words
    small = _ours(llama_odd, tmp_path / "small", preset)
    assert _stored(small) == _stored(whole)          # the tensors (the manifest records the slab size)


def test_killed_mid_way_a_rerun_resumes_nvfp4_byte_identical(llama, tmp_path):
    import signal
    import subprocess
    import sys
    import textwrap

    whole = tmp_path / "whole"
    checkpoint.convert(llama, whole, "NVFP4A16", max_shard_size="200KB", progress=False)
    dst = tmp_path / "dst"
    script = textwrap.dedent(f"""
        import os, signal
        from quantspec import checkpoint
        seen = [0]
        def cb(ev):
            seen[0] += ev.kind == "shard"
            if ev.kind == "slab" and seen[0] >= 3 and ev.shard_done > 0:
                os.kill(os.getpid(), signal.SIGKILL)
        checkpoint.convert({str(llama)!r}, {str(dst)!r}, "NVFP4A16", max_shard_size="200KB", progress=cb)
    """)
    assert subprocess.run([sys.executable, "-c", script], timeout=300).returncode == -signal.SIGKILL
    assert not list(dst.glob("model-*.safetensors")) and not (dst / "config.json").exists()
    rep = checkpoint.convert(llama, dst, "NVFP4A16", max_shard_size="200KB", progress=False)
    # the global scales of the fused q/k/v and gate/up sets in kept shards are rescanned, not guessed
    assert rep.resumed and _bytes(dst) == _bytes(whole)


def test_on_a_dask_cluster(llama, tmp_path):
    from refs import require

    require("distributed")
    whole = _ours(llama, tmp_path / "whole", "NVFP4A16")
    rep = checkpoint.convert(llama, tmp_path / "dask", "NVFP4A16", dask="local:1", progress=False)
    assert rep.quantized and _bytes(tmp_path / "dask") == _bytes(whole)
