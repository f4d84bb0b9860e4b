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
