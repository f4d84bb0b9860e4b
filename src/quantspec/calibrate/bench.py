"""The ``calibrate`` section of ``quantspec bench``: each observer against the tool it reproduces, on
the same batches, with the ranges compared byte for byte.

- onnxruntime: the whole calibration as a user runs it — ``create_calibrator`` on a one-node model
  (the tensor is the model's input), ``collect_data`` over a ``CalibrationDataReader`` of the batches,
  ``compute_data`` — against ``observer.update`` per batch and ``observer.range()``;
- the TFLite converter: a calibrate-only conversion of a small model over the same representative
  dataset, against ``TFLiteMinMaxObserver``.

The two are timed alternately, round by round (each twice in a row), best of the rounds for each.  Batches: 16 of 64 Ki
float32 values (``--quick``: 8 of 16 Ki), normal with a few outliers.
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings

import numpy as np

__all__ = ["lines"]

METHODS = [("MinMax", {}, "MinMaxObserver"), ("MinMax", {"moving_average": True}, "MinMaxObserver"),
           ("Entropy", {"num_bins": 1024, "num_quantized_bins": 128}, "EntropyObserver"),
           ("Percentile", {}, "PercentileObserver"), ("Distribution", {}, "DistributionObserver")]


def _batches(count: int, size: int) -> list[np.ndarray]:
    rng = np.random.default_rng(20260704)
    out = []
    for _ in range(count):
        b = rng.normal(0.3, 1.5, size).astype(np.float32)
        b[rng.integers(size, size=4)] *= 20
        out.append(b)
    return out


def _ort(method: str, extra: dict, data: list[np.ndarray], workdir: str):
    import onnx
    from onnx import TensorProto, helper
    from onnxruntime.quantization import calibrate as q

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [data[0].size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [data[0].size])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    path = os.path.join(workdir, "m.onnx")
    onnx.save(model, path)

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            self.it = iter(data)

        def get_next(self):
            b = next(self.it, None)
            return None if b is None else {"x": b}

    import contextlib
    import io

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        cal = q.create_calibrator(path, augmented_model_path=os.path.join(workdir, "aug.onnx"),
                                  calibrate_method=getattr(q.CalibrationMethod, method), extra_options=extra)
        cal.collect_data(Reader())
        return cal.compute_data()["x"].range_value


def _ours(cls: str, extra: dict, data: list[np.ndarray]):
    import quantspec.calibrate as calibrate

    obs = getattr(calibrate, cls)(**extra)
    for b in data:
        obs.update(b)
    return obs.range().range_value


def _best(f, rounds: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _paired(ours, tool, rounds: int) -> tuple[float, object, float, object]:
    """Best of ``rounds`` for each, the two timed alternately, round by round (so that a change in the
    machine's load between them affects both), each twice in a row per round (so that each finds its
    data in the caches, as a best-of-several-runs timing of one alone does)."""
    best_o = best_t = float("inf")
    out_o = out_t = None
    for _ in range(rounds):
        for _ in range(2):
            t0 = time.perf_counter()
            out_o = ours()
            best_o = min(best_o, time.perf_counter() - t0)
        for _ in range(2):
            t0 = time.perf_counter()
            out_t = tool()
            best_t = min(best_t, time.perf_counter() - t0)
    return best_o, out_o, best_t, out_t


def _same(a, b) -> bool:
    return all(np.asarray(x).tobytes() == np.asarray(y).tobytes() and np.asarray(x).dtype == np.asarray(y).dtype
               for x, y in zip(a, b))


def lines(quick: bool, rounds: int) -> list[str]:
    count, size = (8, 1 << 14) if quick else (16, 1 << 16)
    data = _batches(count, size)
    out = [f"{count} batches of {size} float32 values; best of {rounds}, alternating; the tool's whole calibration against "
           "the observer's"]
    ok = True
    try:
        import onnxruntime  # noqa: F401
        have_ort = True
    except Exception:
        have_ort = False
        out.append("(onnxruntime not installed: its calibrators are not timed)")
    with tempfile.TemporaryDirectory() as workdir:
        for method, extra, cls in METHODS:
            label = f"onnxruntime {method}" + (f" {extra}" if extra else "")
            if not have_ort:
                ours_t, ours = _best(lambda: _ours(cls, extra, data), rounds)
                out.append(f"{label:<62} quantspec {ours_t * 1e3:8.1f} ms")
                continue
            ours_t, ours, tool_t, tool = _paired(lambda: _ours(cls, extra, data),
                                                 lambda: _ort(method, extra, data, workdir), rounds)
            same = _same(ours, tool)
            ok &= same
            out.append(f"{label:<62} quantspec {ours_t * 1e3:8.1f} ms  tool {tool_t * 1e3:9.1f} ms  "
                       f"{tool_t / ours_t:7.1f}x  {'equal' if same else 'DIFFERENT'}")
    out.append(_tflite_line(data[: max(2, count // 4)], rounds))
    return out + ([] if ok else ["SOME CALIBRATED RANGES DIFFER FROM THE TOOL'S"])


def _tflite_line(data: list[np.ndarray], rounds: int) -> str:
    from .minmax import TFLiteMinMaxObserver

    def ours():
        obs = TFLiteMinMaxObserver()
        for b in data:
            obs.update(b)
        return obs.range().range_value

    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf
        from ai_edge_litert import schema_py_generated as S
    except Exception:
        ours_t, _ = _best(ours, rounds)
        return f"{'TFLite converter calibration':<62} quantspec {ours_t * 1e3:8.1f} ms  (TensorFlow not installed)"
    shape = [1, data[0].size]

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec(shape, tf.float32)])
        def f(self, x):
            return tf.nn.relu(x) + x

    def tool():
        m = M()
        c = tf.lite.TFLiteConverter.from_concrete_functions([m.f.get_concrete_function()], m)
        c.optimizations = [tf.lite.Optimize.DEFAULT]
        c.representative_dataset = lambda: ([b.reshape(shape)] for b in data)
        c._experimental_calibrate_only = True
        model = S.Model.GetRootAs(c.convert(), 0)
        sg = model.Subgraphs(0)
        t = next(sg.Tensors(i) for i in range(sg.TensorsLength()) if b"serving_default_x" in sg.Tensors(i).Name())
        q = t.Quantization()
        return np.float32(q.MinAsNumpy()[0]), np.float32(q.MaxAsNumpy()[0])

    ours_t, got, tool_t, want = _paired(ours, tool, rounds)
    same = _same(got, want)
    return (f"{'TFLite converter calibration (calibrate-only conversion)':<62} quantspec {ours_t * 1e3:8.1f} ms  "
            f"tool {tool_t * 1e3:9.1f} ms  {tool_t / ours_t:7.1f}x  {'equal' if same else 'DIFFERENT'}")
