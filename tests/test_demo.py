"""`quantspec demo` (the README's main job) runs and tells the truth."""

import numpy as np

import onnx_oracles as O
import quantspec
import quantspec.cli
from quantspec import demo


def test_demo_runs_and_reports_every_scheme(capsys):
    assert quantspec.cli.main(["demo"]) == 0
    text = capsys.readouterr().out
    for name, _, _ in demo.onnx_schemes(demo.load_demo_weights()):
        assert name in text
    assert "done in" in text


def test_demo_onnxruntime_column_matches_onnxruntime():
    """The demo counts codes onnxruntime computes differently, via compat="onnxruntime"; check one row
    against onnxruntime itself."""
    w = demo.load_demo_weights()
    name, kw, _ = demo.onnx_schemes(w)[2]          # int8 per-channel
    x16, s16 = w.astype(np.float16), kw["y_scale"].astype(np.float16)
    ort = O.ort("QuantizeLinear", 25, x16, s16, kw["y_zero_point"], out_type="int8", axis=0)
    spec = quantspec.onnx.quantize_linear(x16, s16, kw["y_zero_point"], axis=0)
    row = next(r for r in demo.onnx_rows(w) if r.scheme == name)
    assert row.vs_ort == f"{int(np.count_nonzero(ort != spec))} codes"
