"""`quantspec bench --only onnx-models` (quantspec.onnxmodels.bench) on tiny models: every row runs, and
every output equals onnxruntime's (the same comparisons as the full run: initializers of the static
quantization and MatMulNBits outputs, calibrated ranges)."""

from __future__ import annotations

from refs import require

from quantspec.onnxmodels import bench


def test_rows_run_and_outputs_equal(tmp_path, monkeypatch, capsys):
    require("onnx")
    require("onnxruntime")
    monkeypatch.setenv("QUANTSPEC_CACHE", str(tmp_path))
    monkeypatch.setitem(bench.SIZES, "quick", {"width": 4, "side": 16, "d": 32, "seq": 8, "mlp": (64, 32, 64, 32),
                                              "samples": 2})
    out = bench.lines(True, 1)
    rows = [line for line in out if "quantspec" in line and " s " in line]
    assert any(line.startswith("MatMulNBits int4-b32") for line in rows)
    for method in ("minmax", "entropy", "percentile", "distribution"):
        assert sum(line.startswith(f"calibration {method},") for line in rows) == 2
        assert sum(line.startswith(f"quantize_static qdq {method},") for line in rows) == 2
    assert all(line.endswith("equal") for line in rows), "\n".join(out)
    assert (tmp_path / "bench-onnx").is_dir()


def test_static_rows_skip_without_quantize_static(tmp_path, monkeypatch):
    require("onnx")
    require("onnxruntime")
    import quantspec.onnxmodels as om
    from quantspec.onnxmodels import calibration

    monkeypatch.setenv("QUANTSPEC_CACHE", str(tmp_path))
    monkeypatch.setitem(bench.SIZES, "quick", {"width": 4, "side": 16, "d": 32, "seq": 8, "mlp": (64, 32, 64, 32),
                                              "samples": 2})
    monkeypatch.setattr(calibration, "METHODS", {"minmax": "MinMax"})
    monkeypatch.delitem(om._CONVERTER, "quantize_static")
    monkeypatch.delattr(om, "quantize_static", raising=False)
    out = bench.lines(True, 1)
    assert not any(line.startswith("quantize_static qdq") for line in out)
    assert out[-1].startswith("quantize_static: skipped (quantspec.onnxmodels.quantize_static is not")
    assert sum(line.startswith("calibration minmax,") for line in out) == 2
    assert any(line.startswith("MatMulNBits") and line.endswith("equal") for line in out)
