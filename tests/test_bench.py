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
