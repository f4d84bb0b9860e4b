"""The ``onnx-models`` section of ``quantspec bench`` (``quantspec bench --only onnx-models``, run only
when asked): whole-model quantization of ONNX models by quantspec and by onnxruntime, side by side
in one process, with the outputs compared before a time counts.

- **static quantization**: :func:`quantspec.onnxmodels.quantize_static` against onnxruntime's
  ``quantize_static`` (QDQ, uint8 activations, int8 weights), path to path, each calibration method,
  on a ResNet18-sized CNN (11.7 M parameters, 224 x 224 inputs; ``--quick``: a quarter of the width
  and 64 x 64 inputs) and a small transformer (2 layers, width 256, 4 heads, 64 tokens); every
  initializer of the two outputs is compared (name, type, shape, bytes).  Where this quantspec has no
  ``quantize_static`` the rows are skipped with a line saying so;
- **calibration alone**: :func:`quantspec.onnxmodels.calibration.collect_ranges` against
  onnxruntime's ``create_calibrator`` + ``collect_data`` + ``compute_data`` with ``quantize_static``'s
  op types, on the same models and data, the ranges compared (lowest, highest and the histogram);
- **MatMulNBits**: :func:`quantspec.onnxmodels.convert_model` with ``scheme="int4-b32",
  format="matmulnbits"`` against onnxruntime's ``MatMulNBitsQuantizer(block_size=32,
  is_symmetric=True, quant_format=QOperator)`` (RTN), each loading the model file and writing the
  result, on a 100 MB float32 MLP (three MatMuls of 4096 x 2048, 2048 x 4096, 4096 x 2048;
  ``--quick``: 512 x 256 ...), every initializer compared.

The models are built with ``onnx.helper`` from a seed and cached in ``~/.cache/quantspec/bench-onnx``
(``$QUANTSPEC_CACHE`` overrides ``~/.cache/quantspec``).  The calibration data: 8 samples (``--quick``:
2), seeded.  Timing: the two contenders alternate, once each per round, best of the rounds (at most
3); the ratio is onnxruntime's time over quantspec's.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

__all__ = ["lines", "resnet18_like", "transformer", "mlp", "cached_model"]

SEED = 20261205

#: the sizes of a full run and of a --quick one: CNN width and input side, transformer width and
#: tokens, MLP dims, calibration samples
SIZES = {"full": {"width": 64, "side": 224, "d": 256, "seq": 64, "mlp": (4096, 2048, 4096, 2048), "samples": 8},
         "quick": {"width": 16, "side": 64, "d": 256, "seq": 64, "mlp": (512, 256, 512, 256), "samples": 2}}


# ------------------------------------------------------------------------------------------ models

def _helpers():
    import onnx
    from onnx import helper, numpy_helper

    return onnx, helper, numpy_helper


def resnet18_like(width: int = 64, classes: int = 1000, seed: int = SEED):
    """ResNet18's graph as an exported, batch-norm-folded model: Conv (with bias) / Relu / MaxPool /
    four stages of two basic blocks (Add of the identity or of a strided 1 x 1 Conv) /
    GlobalAveragePool / Flatten / Gemm.  Input ``x`` [1, 3, H, W] (any H, W), output [1, classes]."""
    onnx, helper, nh = _helpers()
    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def conv(x, cin, cout, k, stride, name, gain=1.0):
        w = (rng.standard_normal((cout, cin, k, k)) * gain * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
        b = (rng.standard_normal(cout) * 0.05).astype(np.float32)
        inits.extend([nh.from_array(w, name + ".weight"), nh.from_array(b, name + ".bias")])
        nodes.append(helper.make_node("Conv", [x, name + ".weight", name + ".bias"], [name], name=name,
                                      kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4))
        return name

    def relu(x, name):
        nodes.append(helper.make_node("Relu", [x], [name], name=name))
        return name

    h = relu(conv("x", 3, width, 7, 2, "conv1"), "relu1")
    nodes.append(helper.make_node("MaxPool", [h], ["pool1"], name="pool1", kernel_shape=[3, 3], strides=[2, 2],
                                  pads=[1, 1, 1, 1]))
    h, cin = "pool1", width
    for stage, (mult, stride) in enumerate(((1, 1), (2, 2), (4, 2), (8, 2)), 1):
        cout = width * mult
        for block in range(2):
            p = f"layer{stage}.{block}"
            s = stride if block == 0 else 1
            a = relu(conv(h, cin, cout, 3, s, p + ".conv1"), p + ".relu1")
            b = conv(a, cout, cout, 3, 1, p + ".conv2", gain=0.5)
            skip = conv(h, cin, cout, 1, s, p + ".downsample") if (s != 1 or cin != cout) else h
            nodes.append(helper.make_node("Add", [b, skip], [p + ".add"], name=p + ".add"))
            h, cin = relu(p + ".add", p + ".relu2"), cout
    nodes.append(helper.make_node("GlobalAveragePool", [h], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1))
    fc = (rng.standard_normal((classes, cin)) / np.sqrt(cin)).astype(np.float32)
    inits.extend([nh.from_array(fc, "fc.weight"), nh.from_array(np.zeros(classes, np.float32), "fc.bias")])
    nodes.append(helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["y"], name="fc", transB=1))
    graph = helper.make_graph(nodes, "resnet18_like", [helper.make_tensor_value_info("x", 1, [1, 3, "H", "W"])],
                              [helper.make_tensor_value_info("y", 1, [1, classes])], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def transformer(layers: int = 2, d: int = 256, heads: int = 4, ffn: int = 1024, vocab: int = 1000, seq: int = 64,
                seed: int = SEED):
    """A small encoder as torch exports it: Gather embedding + position, then per layer
    LayerNormalization, Q/K/V MatMul + Add, Reshape/Transpose into heads, MatMul, Mul by 1/sqrt(dh),
    Softmax, MatMul, Transpose/Reshape back, output MatMul + Add, residual Add, LayerNormalization,
    MatMul + Add, Relu, MatMul + Add, residual Add.  Input ``ids`` int64 [1, seq]."""
    onnx, helper, nh = _helpers()
    rng = np.random.default_rng(seed + 1)
    dh = d // heads
    nodes, inits = [], []

    def init(name, a):
        inits.append(nh.from_array(np.asarray(a), name))
        return name

    def node(op, ins, name, **attrs):
        nodes.append(helper.make_node(op, ins, [name], name=name, **attrs))
        return name

    def linear(x, cin, cout, name):
        w = init(name + ".weight", (rng.standard_normal((cin, cout)) / np.sqrt(cin)).astype(np.float32))
        b = init(name + ".bias", (rng.standard_normal(cout) * 0.02).astype(np.float32))
        return node("Add", [node("MatMul", [x, w], name + ".matmul"), b], name)

    def ln(x, name):
        g = init(name + ".g", (1 + rng.standard_normal(d) * 0.05).astype(np.float32))
        b = init(name + ".b", (rng.standard_normal(d) * 0.02).astype(np.float32))
        return node("LayerNormalization", [x, g, b], name, axis=-1, epsilon=1e-5)

    init("heads_shape", np.array([1, seq, heads, dh], np.int64))
    init("model_shape", np.array([1, seq, d], np.int64))
    init("inv_sqrt_dh", np.array(1 / np.sqrt(dh), np.float32))
    e = node("Gather", [init("embed", (rng.standard_normal((vocab, d)) * 0.5).astype(np.float32)), "ids"], "embed.out",
             axis=0)
    h = node("Add", [e, init("pos", (rng.standard_normal((1, seq, d)) * 0.1).astype(np.float32))], "embed.pos")
    for i in range(layers):
        p = f"layer{i}"
        a = ln(h, p + ".ln1")
        q = node("Transpose", [node("Reshape", [linear(a, d, d, p + ".q"), "heads_shape"], p + ".q.heads")],
                 p + ".q.t", perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [linear(a, d, d, p + ".k"), "heads_shape"], p + ".k.heads")],
                 p + ".k.t", perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [linear(a, d, d, p + ".v"), "heads_shape"], p + ".v.heads")],
                 p + ".v.t", perm=[0, 2, 1, 3])
        s = node("Mul", [node("MatMul", [q, k], p + ".qk"), "inv_sqrt_dh"], p + ".scaled")
        c = node("MatMul", [node("Softmax", [s], p + ".softmax", axis=-1), v], p + ".ctx")
        c = node("Reshape", [node("Transpose", [c], p + ".ctx.t", perm=[0, 2, 1, 3]), "model_shape"], p + ".ctx.r")
        h = node("Add", [h, linear(c, d, d, p + ".o")], p + ".res1")
        f = linear(node("Relu", [linear(ln(h, p + ".ln2"), d, ffn, p + ".fc1")], p + ".relu"), ffn, d, p + ".fc2")
        h = node("Add", [h, f], p + ".res2")
    nodes.append(helper.make_node("Identity", [ln(h, "ln_f")], ["y"], name="out"))
    graph = helper.make_graph(nodes, "transformer", [helper.make_tensor_value_info("ids", 7, [1, seq])],
                              [helper.make_tensor_value_info("y", 1, [1, seq, d])], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def mlp(dims: tuple[int, ...] = (4096, 2048, 4096, 2048), seed: int = SEED):
    """x [1, dims[0]] -> MatMul -> Relu -> MatMul -> Relu -> ... (float32 weights [dims[i], dims[i+1]])."""
    onnx, helper, nh = _helpers()
    rng = np.random.default_rng(seed + 2)
    nodes, inits, h = [], [], "x"
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        w = rng.standard_normal((a, b), dtype=np.float32) * np.float32(1 / np.sqrt(a))
        inits.append(nh.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [h, f"w{i}"], [f"mm{i}"], name=f"mm{i}"))
        h = f"mm{i}"
        if i < len(dims) - 2:
            nodes.append(helper.make_node("Relu", [h], [f"relu{i}"], name=f"relu{i}"))
            h = f"relu{i}"
    nodes.append(helper.make_node("Identity", [h], ["y"], name="out"))
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", 1, [1, dims[0]])],
                              [helper.make_tensor_value_info("y", 1, [1, dims[-1]])], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _cache_dir() -> Path:
    base = os.environ.get("QUANTSPEC_CACHE")
    root = Path(base) if base else Path.home() / ".cache" / "quantspec"
    return root / "bench-onnx"


def cached_model(name: str, build) -> Path:
    """The model file ``name`` in the cache directory, built by ``build()`` (and written to a
    temporary name, then renamed) when it is not there yet."""
    onnx, _, _ = _helpers()
    d = _cache_dir()
    path = d / f"{name}.onnx"
    if path.is_file():
        return path
    d.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{name}.", suffix=".tmp")
    os.close(fd)
    try:
        onnx.save(build(), tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


# ---------------------------------------------------------------------------------------- running

class _Reader:
    """onnxruntime's CalibrationDataReader protocol over a dict of stacked samples."""

    def __init__(self, data: dict):
        self.data = data
        self.n = len(next(iter(data.values())))
        self.i = 0

    def get_next(self):
        if self.i >= self.n:
            return None
        self.i += 1
        return {k: v[self.i - 1] for k, v in self.data.items()}

    def __len__(self):
        return self.n


@contextlib.contextmanager
def _quiet():
    """onnxruntime's quantizer prints and logs a line per call: kept off the bench's output."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        root.setLevel(level)


def _alternate(ours, theirs, rounds: int):
    best_o = best_t = float("inf")
    out_o = out_t = None
    for _ in range(rounds):
        t0 = time.perf_counter()
        out_o = ours()
        best_o = min(best_o, time.perf_counter() - t0)
        t0 = time.perf_counter()
        out_t = theirs()
        best_t = min(best_t, time.perf_counter() - t0)
    return best_o, out_o, best_t, out_t


def _initializers(path) -> dict:
    onnx, _, nh = _helpers()
    m = onnx.load(str(path))
    return {t.name: (t.data_type, tuple(t.dims), np.ascontiguousarray(nh.to_array(t)).tobytes())
            for t in m.graph.initializer}


def _ranges_equal(ours: dict, theirs) -> bool:
    if set(ours) != set(theirs.keys()):
        return False
    method = theirs.calibration_method.name

    def same(a, b):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()

    for name in theirs.keys():
        td, r = theirs[name], ours[name]
        if not (same(r.lowest, td.lowest) and same(r.highest, td.highest)):
            return False
        if method == "Percentile" and not (same(r.hist[0], td.hist) and same(r.hist[1], td.bins)):
            return False
        if method in ("Entropy", "Distribution"):
            edges = td.hist_edges if hasattr(td, "hist_edges") else td.bins
            if not (same(r.hist, td.hist) and same(r.hist_edges, edges)):
                return False
    return True


_ORT_NAMES = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile", "distribution": "Distribution"}


def _line(label: str, ours_t: float, tool_t: float, same: bool) -> str:
    return (f"{label:<58} quantspec {ours_t:8.2f} s  onnxruntime {tool_t:8.2f} s  {tool_t / ours_t:7.2f}x  "
            f"{'equal' if same else 'DIFFERENT'}")


def _static_models(size: dict):
    rng = np.random.default_rng(SEED + 3)
    width, side, d, seq, samples = size["width"], size["side"], size["d"], size["seq"], size["samples"]
    cnn = cached_model(f"resnet18_like_w{width}", lambda: resnet18_like(width))
    x = rng.standard_normal((samples, 1, 3, side, side), dtype=np.float32)
    tfm = cached_model(f"transformer_l2_d{d}_s{seq}", lambda: transformer(d=d, ffn=4 * d, seq=seq))
    ids = rng.integers(0, 1000, size=(samples, 1, seq), dtype=np.int64)
    params_cnn = "11.7M params" if width == 64 else f"width {width}"
    return [(f"ResNet18-like CNN ({params_cnn}, {side}x{side})", cnn, {"x": x}),
            (f"transformer (2 layers, d {d}, {seq} tokens)", tfm, {"ids": ids})]


def _static_lines(models, rounds: int, workdir: str) -> list[str]:
    from . import calibration

    out = []
    try:
        from .. import onnxmodels

        quantize_static = onnxmodels.quantize_static
    except AttributeError:
        quantize_static = None
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType
    from onnxruntime.quantization import quantize_static as ort_quantize_static
    from onnxruntime.quantization.calibrate import create_calibrator

    for label, path, data in models:
        for method in calibration.METHODS:
            ort_method = getattr(CalibrationMethod, _ORT_NAMES[method])

            def ours_cal():
                return calibration.collect_ranges(path, data, method=method)

            def ort_cal():
                with _quiet():
                    c = create_calibrator(Path(path), sorted(calibration.DEFAULT_OP_TYPES),
                                          augmented_model_path=os.path.join(workdir, "aug.onnx"),
                                          calibrate_method=ort_method)
                    c.collect_data(_Reader(data))
                    return c.compute_data()

            o_t, o, t_t, t = _alternate(ours_cal, ort_cal, rounds)
            out.append(_line(f"calibration {method}, {label}", o_t, t_t, _ranges_equal(o, t)))
            if quantize_static is None:
                continue
            ours_out, ort_out = os.path.join(workdir, "ours.onnx"), os.path.join(workdir, "ort.onnx")

            def ours_static():
                with _quiet():
                    quantize_static(str(path), ours_out, data, quant_format="qdq", activation_type="uint8",
                                    weight_type="int8", calibrate_method=method)

            def ort_static():
                with _quiet():
                    ort_quantize_static(str(path), ort_out, _Reader(data), quant_format=QuantFormat.QDQ,
                                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                                        calibrate_method=ort_method)

            ours_static()        # the outputs compared before a time counts
            ort_static()
            same = _initializers(ours_out) == _initializers(ort_out)
            o_t, _, t_t, _ = _alternate(ours_static, ort_static, rounds)
            out.append(_line(f"quantize_static qdq {method}, {label}", o_t, t_t, same))
    if quantize_static is None:
        out.append("quantize_static: skipped (quantspec.onnxmodels.quantize_static is not in this quantspec)")
    return out


def _nbits_lines(size: dict, rounds: int, workdir: str) -> list[str]:
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    from .converter import convert_model

    onnx, _, _ = _helpers()
    dims = tuple(size["mlp"])
    path = cached_model("mlp_" + "x".join(map(str, dims)), lambda: mlp(dims))
    mb = path.stat().st_size / 1e6
    ours_out, ort_out = os.path.join(workdir, "nbits-ours.onnx"), os.path.join(workdir, "nbits-ort.onnx")

    def ours():
        convert_model(str(path), ours_out, "int4-b32", format="matmulnbits")

    def theirs():
        with _quiet():
            q = MatMulNBitsQuantizer(onnx.load(str(path)), block_size=32, is_symmetric=True,
                                     quant_format=QuantFormat.QOperator)
            q.process()
            onnx.save(q.model.model, ort_out)

    ours()
    theirs()
    same = _initializers(ours_out) == _initializers(ort_out)
    o_t, _, t_t, _ = _alternate(ours, theirs, rounds)
    return [_line(f"MatMulNBits int4-b32, MLP {mb:.0f} MB ({'x'.join(map(str, dims))})", o_t, t_t, same)]


def lines(quick: bool, rounds: int) -> list[str]:
    """The section's lines (a line with "DIFFERENT" when an output differs from onnxruntime's)."""
    rounds = max(1, min(rounds, 3))
    size = SIZES["quick" if quick else "full"]
    samples = size["samples"]
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except Exception as e:
        return [f"(onnx / onnxruntime not installed: nothing to compare; {type(e).__name__}: {e})"]
    import onnxruntime

    out = [f"onnxruntime {onnxruntime.__version__}; {samples} calibration samples; best of {rounds}, alternating; "
           "ratio = onnxruntime's time / quantspec's"]
    with tempfile.TemporaryDirectory() as workdir:
        out += _nbits_lines(size, rounds, workdir)
        out += _static_lines(_static_models(size), rounds, workdir)
    return out
