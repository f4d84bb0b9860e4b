"""``quantspec bench --quick`` runs, prints a row per case, and every timed output equals its peer's.

(Speed is measured by the benchmark itself, never asserted by a test.)"""

from __future__ import annotations

from quantspec import bench
from quantspec.cli import main


def test_bench_quick_runs_and_outputs_are_equal(capsys):
    assert main(["bench", "--quick", "--size", "16384", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "copy bandwidth" in out and "all timed outputs equal the peers'" in out
    for case in ("onnx Q f32->int8 per-tensor", "onnx DQ int8->f32 per-tensor", "tf QuantizeV2 qint8 MIN_COMBINED",
                 "litert int8 CNN (bench_cnn.tflite)"):
        assert case in out
    assert "DIFFERENT" not in out


def test_machine_description():
    m = bench.machine()
    assert m["cores"] >= 1 and m["numpy"]


def test_paired_ratio_is_the_median_of_the_per_round_ratios():
    # rounds where quantspec took 1, 2, 4 s and the peer 3, 2, 2 s: per-round ratios 3, 1, 0.5
    assert bench.paired_ratio([1.0, 2.0, 4.0], [3.0, 2.0, 2.0]) == 1.0
    assert bench.paired_ratio([1.0, 1.0], [2.0, 4.0]) == 3.0


def test_litert_model_inputs_that_index_rows_get_valid_positions(tmp_path):
    """A model input used as GATHER positions (a transformer's token ids) gets positions of rows that
    exist: drawn from the whole int32 range, the bench's run would fail; the timed case's output
    equals LiteRT's."""
    import numpy as np
    from litert_build import T, build
    from refs import require

    from quantspec.litert import Interpreter
    from quantspec.litert._bench import inputs

    require("ai_edge_litert")
    table = np.arange(-35, 35, dtype=np.int8).reshape(7, 10)
    for axis, rows in ((0, 7), (-1, 10)):
        out_shape = (1, 16, 10) if axis == 0 else (7, 1, 16)
        model = build("GATHER", [T((7, 10), "int8", 0.5, 1, data=table), T((1, 16), "int32")],
                      [T(out_shape, "int8", 0.5, 1)], {"axis": axis})
        path = tmp_path / f"gather{rows}.tflite"
        path.write_bytes(model)
        (x,) = inputs(Interpreter(str(path)), seed=3)
        assert x.dtype == np.int32 and x.shape == (1, 16)
        assert 0 <= x.min() and x.max() < rows and len(np.unique(x)) > 1
        case = bench._litert_case("gather", str(path))
        assert [p.name for p in case.peers] == ["LiteRT BUILTIN_REF"]
        case.run()
        case.peers[0].run()
        assert bench._equal(case, case.peers[0], np.asarray(case.output()))


# -- the convert section's compressed-tensors presets (quantspec bench --only convert) ---------------------
_PRESET_HEAD = "preset       process         runs"
_COMPILED = r"(  \(compiled kernels: numba's cache missed\))?"      # a run that compiled says so


def _convert_section(presets):
    from quantspec.checkpoint import bench as convert_bench

    # a 2 MiB checkpoint, one round, no other scheme, no onnxruntime: the presets' rows alone
    return convert_bench.run(2 << 20, 1, schemes=(), presets=presets, ort=False)


def test_bench_convert_presets_rows_without_llm_compressor(capsys, monkeypatch):
    """Without ``$QUANTSPEC_LLMC_PYTHON`` the convert section times each preset in this process and in a
    fresh process, and says in one line that llm-compressor was skipped."""
    import re

    from llmc import ENV

    monkeypatch.delenv(ENV, raising=False)
    assert _convert_section(("w4a16", "FP8_BLOCK"))        # preset names in any case
    out = capsys.readouterr().out
    for name in ("W4A16", "FP8_BLOCK"):
        assert f"convert {name} (compressed-tensors)" in out
        assert re.search(rf"^{name}\s+quantspec\s+1(\s+[0-9.]+){{6}}{_COMPILED}$", out, re.M), out
    assert f"llm-compressor: skipped, ${ENV} is not set" in out
    assert _PRESET_HEAD in out and "goals (the issue's):" in out and "not measured (no llm-compressor)" in out
    assert "DIFFERENT" not in out and "FAILED" not in out


def test_bench_convert_presets_beside_llm_compressor(capsys, monkeypatch):
    """With llm-compressor's environment (``$QUANTSPEC_LLMC_PYTHON``; a failure, not a skip, under
    QUANTSPEC_REQUIRE_REFERENCES=1) each preset has a row for ``model_free_ptq`` in a fresh process, the
    ratios, and its tensors are identical to quantspec's."""
    import re

    from llmc import ENV, llmc_python

    monkeypatch.setenv(ENV, llmc_python())
    assert _convert_section(("W4A16", "NVFP4A16"))
    out = capsys.readouterr().out
    assert "llm-compressor: llm-compressor " in out and "ignore=['model.embed_tokens'], max_workers=2" in out
    for name in ("W4A16", "NVFP4A16"):
        assert re.search(rf"^{name}\s+quantspec\s+1(\s+[0-9.]+){{6}}{_COMPILED}\n"
                         rf"\s+llm-compressor\s+[1-9](\s+[0-9.]+){{6}}\n"
                         rf"\s+llm-compressor / quantspec: [0-9.]+x the time \(call\), [0-9.]+x \(total\); "
                         rf"[0-9.]+x the peak RSS; tensors identical \([1-9][0-9]*\)$", out, re.M), out
    assert "met in" in out and "DIFFERENT" not in out and "FAILED" not in out


def test_bench_convert_compares_outputs_tensor_by_tensor(tmp_path):
    """The consistency check behind "identical": names, dtypes, shapes and bytes over all shards."""
    import ml_dtypes
    import numpy as np

    from quantspec._tensorfiles import tensorio
    from quantspec.checkpoint.bench import compare_outputs

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensorio.write_tensors(a / "model-00001-of-00002.safetensors", {"w": x})
    tensorio.write_tensors(a / "model-00002-of-00002.safetensors", {"s": x[0].astype(ml_dtypes.bfloat16)})
    tensorio.write_tensors(b / "model.safetensors", {"s": x[0].astype(ml_dtypes.bfloat16), "w": x})
    assert compare_outputs(a, b) == (True, 2, [])
    y = x.copy()
    y[2, 3] = 0
    tensorio.write_tensors(b / "model.safetensors", {"s": x[0].astype(ml_dtypes.bfloat16), "w": y})
    assert compare_outputs(a, b) == (False, 2, ["w"])
    tensorio.write_tensors(b / "model.safetensors", {"s": x[0].astype(np.float32), "w": x})     # another dtype
    assert compare_outputs(a, b) == (False, 2, ["s"])
    tensorio.write_tensors(b / "model.safetensors", {"w": x})                                    # one missing
    assert compare_outputs(a, b) == (False, 2, ["s"])
