"""``convert(..., format="compressed-tensors")`` and reading compressed-tensors checkpoints, decided by
the ``compressed-tensors`` library itself (with the CPU torch wheel):

- quantspec -> compressed-tensors: the library's own model-free decompression
  (``CompressedTensorsDequantizer``, the compressor its config selects) of quantspec's output gives
  exactly quantspec's ``dequantize``, for every tensor; its unpacking gives quantspec's codes; the
  config validates and selects the format it declares;
- compressed-tensors -> quantspec: the library compresses the same weights with quantspec's stored
  scales; ``open`` reads that checkpoint (``dequantize`` equals the library's decompression), and
  ``verify --params-from-dst`` accepts it: identical where the library's codes are QuantizeLinear's,
  and where they differ (its division in the weight's type) every difference is reported, at its
  position, and is what :func:`quantspec.checkpoint.rederive.ct_codes` says the library computes —
  which is checked against the library's codes everywhere.

For int8 per channel, int4 groups of 32 and 128, float8 (and the other schemes the layout takes),
from bfloat16, float16 and float32 weights.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import checkpoint_corpus
from refs import require, require_fast

from quantspec import checkpoint
from quantspec.checkpoint import rederive
from quantspec.checkpoint.ctlayout import CT_SCHEMES
from quantspec.cli import main
from quantspec.errors import InvalidArgumentError, UnsupportedError

ALL = list(CT_SCHEMES)
MAIN = ["int8", "int4-b32", "int4-b128", "fp8-e4m3", "fp8-e4m3-channel", "uint4-b128-asym", "uint8-asym",
        "int8-tensor", "litert"]
DTYPES = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}


@pytest.fixture(autouse=True)
def _fast():
    require_fast()


@pytest.fixture(scope="module")
def ct():
    require("torch")
    return require("compressed_tensors")


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    base = tmp_path_factory.mktemp("ct-src")
    return {name: (base / name, checkpoint_corpus.build_ct(base / name, dtype=dt)) for name, dt in DTYPES.items()}


_OUT: dict = {}


def _quantspec(sources, dtype: str, scheme: str, base: Path) -> Path:
    key = (dtype, scheme)
    if key not in _OUT:
        out = base / f"qs-{dtype}-{scheme}"
        rep = checkpoint.convert(sources[dtype][0], out, scheme, format="compressed-tensors", progress=False)
        # the embedding table is kept: its inputs are token ids, which no loader quantizes
        assert len(rep.quantized) == 8 and {t.name for t in rep.kept} == {
            "model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
            "model.layers.0.post_attention_layernorm.weight", "model.norm.weight"}
        _OUT[key] = out
    return _OUT[key]


def _load(path: Path) -> dict:
    from safetensors.torch import load_file

    out = {}
    for f in sorted(path.glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


def _decompress(path: Path) -> dict:
    """compressed-tensors' own model-free decompression of the checkpoint: name -> float32 array."""
    import torch
    from compressed_tensors.entrypoints.convert.converters.ct_dequantizer import CompressedTensorsDequantizer

    tensors = CompressedTensorsDequantizer(path, dtype=torch.float32).validate(_load(path))
    return {k: v.float().numpy() if v.is_floating_point() else v.numpy() for k, v in tensors.items()}


CASES = [(d, s) for d in ("bfloat16", "float32") for s in MAIN] + [("float16", s) for s in ("int8", "int4-b32",
                                                                                             "fp8-e4m3")]


@pytest.mark.parametrize("dtype, scheme", CASES)
def test_compressed_tensors_decompresses_quantspecs_output_to_its_dequantize(ct, sources, tmp_path_factory, dtype,
                                                                             scheme):
    import torch
    from compressed_tensors.compressors.format import infer_module_format
    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32
    from compressed_tensors.quantization import QuantizationConfig

    out = _quantspec(sources, dtype, scheme, tmp_path_factory.getbasetemp())
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]                 # the source's config, kept
    q = QuantizationConfig.model_validate(config["quantization_config"])
    [group] = q.config_groups.values()
    assert infer_module_format(torch.nn.Linear, group).value == group.format == CT_SCHEMES[scheme][0]
    theirs = _decompress(out)
    ck = checkpoint.open(out)
    assert sorted(theirs) == sorted(ck.names())
    for name in ck.names():
        assert ck.dequantize(name).tobytes() == theirs[name].astype(np.float32).tobytes(), name
    stored = _load(out)
    model = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[dtype]
    for module in group.targets:
        assert stored[module + ".weight_scale"].dtype == model
        codes = ck.codes(module + ".weight")
        if CT_SCHEMES[scheme][2] == 4:
            shape = tuple(stored[module + ".weight_shape"].tolist())
            assert stored[module + ".weight_packed"].dtype == torch.int32 and shape == codes.shape
            theirs_codes = unpack_from_int32(stored[module + ".weight_packed"], 4, torch.Size(shape)).numpy()
            offset = 0 if codes.dtype == ml_dtypes.int4 else 8                # uint4 codes: theirs + 8
            assert (theirs_codes.astype(np.int16) + offset == codes.astype(np.int16)).all()
            if not group.weights.symmetric:
                scale = stored[module + ".weight_scale"]
                zp = unpack_from_int32(stored[module + ".weight_zero_point"], 4, scale.shape, packed_dim=0).numpy()
                assert (zp.astype(np.int16) + 8 == ck.params(module + ".weight")[1].astype(np.int16)).all()


def _compress_with_compressed_tensors(src: Path, qs: Path, into: Path) -> None:
    """What compressed-tensors writes for the source weights and quantspec's stored scales (and zero
    points): its own compressor per config group; no quantspec manifest."""
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32
    from compressed_tensors.quantization import QuantizationConfig
    from safetensors.torch import save_file

    config = json.loads((qs / "config.json").read_text())
    q = QuantizationConfig.model_validate(config["quantization_config"])
    weights, ours = _load(src), _load(qs)
    out = {}
    done = set()
    for group in q.config_groups.values():
        compressor = BaseCompressor.get_value_from_registry(group.format)
        for m in group.targets:
            state = {"weight": weights[m + ".weight"], "weight_scale": ours[m + ".weight_scale"]}
            if not group.weights.symmetric:
                zp = ours[m + ".weight_zero_point"]
                if group.weights.num_bits == 4:
                    zp = unpack_from_int32(zp, 4, ours[m + ".weight_scale"].shape, packed_dim=0)
                state["weight_zero_point"] = zp
            out.update({f"{m}.{k}": v for k, v in compressor.compress(state, group).items()})
            done.add(m + ".weight")
    out.update({k: v for k, v in weights.items() if k not in done})
    into.mkdir()
    save_file(out, str(into / "model.safetensors"), metadata={"format": "pt"})
    (into / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize("dtype, scheme", CASES)
def test_quantspec_reads_and_verifies_what_compressed_tensors_compressed(ct, sources, tmp_path_factory, dtype,
                                                                         scheme):
    src, values = sources[dtype]
    qs = _quantspec(sources, dtype, scheme, tmp_path_factory.getbasetemp())
    theirs_dir = tmp_path_factory.mktemp("ct") / "theirs"
    _compress_with_compressed_tensors(src, qs, theirs_dir)
    ck = checkpoint.open(theirs_dir)
    assert ck.foreign and sorted(ck.names()) == sorted(values)
    decompressed = _decompress(theirs_dir)
    for name in ck.names():
        assert ck.dequantize(name).tobytes() == decompressed[name].astype(np.float32).tobytes(), name
    rep = checkpoint.verify(src, theirs_dir, params_from_dst=True)
    quantized = [n for n in ck.names() if ck.scheme(n) != "keep"]
    assert len(quantized) == 8              # all but the embedding
    for name in quantized:
        st = ck.stored(name)
        x = values[name]
        scale, zp, attrs = ck.params(name)
        # quantspec's account of compressed-tensors' arithmetic equals the library's codes everywhere
        emulated = rederive.ct_codes(st.codes_type, x, scale, zp, attrs, {"float32": "float"}.get(dtype, dtype))
        assert emulated.tobytes() == ck.codes(name).tobytes(), name
        spec = rederive.codes("onnx", st.codes_type, x, scale, zp, attrs)
        t = rep[name]
        differs = np.count_nonzero(spec.view(np.uint8) != ck.codes(name).view(np.uint8))
        assert t.differing == differs and t.explained == t.differing, name
        if differs:
            p = t.positions[0]
            assert p.expected == _num(spec[p.index]) and p.found == _num(ck.codes(name)[p.index])
            assert p.input == float(x[p.index])
    symmetric_float32 = dtype == "float32" and CT_SCHEMES[scheme][4]
    assert rep.ok == (sum(t.differing for t in rep.tensors) == 0)
    if symmetric_float32:
        # float32 weights, no zero point: compressed-tensors' x / scale is QuantizeLinear's
        assert rep.ok, rep.table()


def _num(v):
    from quantspec.dtypes import qtype

    v = np.asarray(v)
    return int(v.astype(np.int64)) if qtype(v.dtype).kind == "int" else float(v.astype(np.float32))


def test_where_compressed_tensors_departs_from_quantizelinear(ct):
    """The inputs docs/checkpoints.md lists, against the library's quantize itself."""
    import torch
    from compressed_tensors.quantization import QuantizationArgs
    from compressed_tensors.quantization.lifecycle.forward import quantize

    cases = [  # (weight type, x, scale, zero point, args, QuantizeLinear's code, compressed-tensors')
        (torch.bfloat16, 0.4453125, 0.0986328125, None, dict(num_bits=4, strategy="tensor"), 5, 4),
        (torch.bfloat16, -0.73828125, 0.0986328125, None, dict(num_bits=4, strategy="tensor"), -7, -8),
        (torch.bfloat16, 6.96875, 0.0986328125, None, dict(num_bits=8, strategy="tensor"), 71, 70),
        (torch.bfloat16, -0.53515625, 0.01129150390625, None, dict(num_bits=8, strategy="tensor"), -47, -48),
        (torch.float32, -0.04931640625, 0.0986328125, -3, dict(num_bits=8, strategy="tensor", symmetric=False),
         -3, -4),
    ]
    for dt, x, s, z, args, spec, theirs in cases:
        xt, st = torch.tensor([x], dtype=dt), torch.tensor([s], dtype=dt)
        zt = None if z is None else torch.tensor([z], dtype=torch.int8)
        got = quantize(xt, st, zt, QuantizationArgs(**args), dtype=torch.int8)
        assert int(got[0]) == theirs
        xs = np.array([x], np.float32)
        ours = rederive.codes("onnx", "int4" if args["num_bits"] == 4 else "int8", xs, np.float32(s),
                              None if z is None else np.array(z, np.int8), {})
        assert int(ours[0]) == spec
        model = "bfloat16" if dt == torch.bfloat16 else "float"
        emulated = rederive.ct_codes("int4" if args["num_bits"] == 4 else "int8", xs, np.float32(s),
                                     None if z is None else np.array(z, np.int8), {}, model)
        assert int(emulated[0]) == theirs


def test_schemes_and_tensors_the_layout_cannot_hold(sources, tmp_path):
    src, _ = sources["bfloat16"]
    for scheme in ("fp8-e5m2", "mxfp4", "mxint8"):
        with pytest.raises(UnsupportedError, match=f"cannot express scheme {scheme}"):
            checkpoint.convert(src, tmp_path / "o", scheme, format="compressed-tensors", progress=False)
    assert not (tmp_path / "o").exists()
    corpus = tmp_path / "odd"
    values = checkpoint_corpus.build(corpus)                   # in_features 80 and 200: no whole groups of 32
    rep = checkpoint.convert(corpus, tmp_path / "o", "int4-b32", format="compressed-tensors", progress=False)
    assert not rep.quantized and "whole groups" in rep["model.layers.0.self_attn.q_proj.weight"].reason
    assert "2-D" in rep["model.layers.0.conv.weight"].reason
    rep = checkpoint.convert(corpus, tmp_path / "o2", "int4-b16", format="compressed-tensors", progress=False)
    assert rep["model.layers.0.self_attn.q_proj.weight"].scheme == "int4-b16"
    assert rep["model.layers.0.mlp.odd_proj.weight"].scheme == "keep"     # 77 columns
    with pytest.raises(InvalidArgumentError, match="compressed-tensors layout cannot store"):
        checkpoint.convert(corpus, tmp_path / "o3", recipe={"rules": [
            {"match": "model.layers.0.self_attn.q_proj.weight", "scheme": "int4-b32"}]}, format="compressed-tensors",
            progress=False)
    config = json.loads((tmp_path / "o2" / "config.json").read_text())["quantization_config"]
    assert "model.layers.0.mlp.odd_proj" in config["ignore"]
    assert len(values) > 3


def test_the_command_line_writes_the_layout(sources, tmp_path, capsys):
    src, _ = sources["bfloat16"]
    assert main(["convert", str(src), str(tmp_path / "o"), "--scheme", "int4-b128", "--format",
                 "compressed-tensors", "--quiet"]) == 0
    assert checkpoint.open(tmp_path / "o").layout == "compressed-tensors"
    assert main(["verify", str(src), str(tmp_path / "o")]) == 0
    # a rerun keeps every shard; another layout into the same directory replaces it
    rep = checkpoint.convert(src, tmp_path / "o", "int4-b128", format="compressed-tensors", progress=False)
    assert rep.resumed == rep.shards
    checkpoint.convert(src, tmp_path / "o", "int8", progress=False)
    assert checkpoint.open(tmp_path / "o").layout == "quantspec"
    # the quantspec layout copies the source's config.json unchanged: no quantization_config
    assert (tmp_path / "o" / "config.json").read_bytes() == (src / "config.json").read_bytes()
    shutil.rmtree(tmp_path / "o")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_the_numpy_path_writes_the_same_layout(sources, tmp_path, monkeypatch, dtype):
    src, _ = sources[dtype]
    fast = {s: _quantspec(sources, dtype, s, tmp_path.parent) for s in ("int8", "uint4-b32-asym", "fp8-e4m3",
                                                                        "litert", "uint8-asym")}
    monkeypatch.setenv("QUANTSPEC_FAST", "0")
    for scheme, out in fast.items():
        ref = tmp_path / scheme
        checkpoint.convert(src, ref, scheme, format="compressed-tensors", progress=False)
        for f in sorted(p.name for p in out.iterdir()):      # every byte, error statistics included
            assert (ref / f).read_bytes() == (out / f).read_bytes(), (scheme, f)


def test_verify_compares_config_json_with_the_one_convert_writes(sources, tmp_path):
    """vLLM and transformers read config.json, not the manifest: verify finds a quantization_config
    that is not the one the recorded schemes give, other changes to the config, and a missing one."""
    src, _ = sources["bfloat16"]
    out = tmp_path / "o"
    checkpoint.convert(src, out, "int4-b32", format="compressed-tensors", progress=False)
    good = (out / "config.json").read_text()
    assert checkpoint.verify(src, out).ok

    config = json.loads(good)
    config["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] = 128
    (out / "config.json").write_text(json.dumps(config))
    rep = checkpoint.verify(src, out)
    assert not rep.ok and all(t.ok for t in rep.tensors)
    assert rep.files == ["config.json: its quantization_config is not the one the manifest's schemes give"]
    assert "config.json" in rep.summary() and rep.to_dict()["files"] == rep.files

    config = json.loads(good)
    config["quantization_config"]["ignore"].append("lm_head")
    (out / "config.json").write_text(json.dumps(config))
    assert not checkpoint.verify(src, out).ok

    config = json.loads(good)
    config["hidden_size"] = -1
    (out / "config.json").write_text(json.dumps(config))
    assert checkpoint.verify(src, out).files == [
        "config.json: differs from the source's config.json besides the quantization_config"]

    (out / "config.json").write_text("{")
    assert checkpoint.verify(src, out).files == ["config.json: missing or not JSON"]
    (out / "config.json").unlink()
    assert not checkpoint.verify(src, out).ok

    (out / "config.json").write_text(json.dumps(json.loads(good), indent=4))   # the same JSON, other spacing
    assert checkpoint.verify(src, out).ok
    assert main(["verify", str(src), str(out)]) == 0
