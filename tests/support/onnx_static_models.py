"""Float ONNX models for the static quantization tests, built with onnx.helper from seeded random
weights, their calibration data, and onnxruntime's calibration as a reference (its ranges, its
quantize_static, its sessions)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _init(name: str, array) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def _model(nodes, inputs, outputs, inits, opset: int = OPSET) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def cnn(seed: int = 0, channels: int = 8, size: int = 8, classes: int = 5) -> onnx.ModelProto:
    """A small ResNet-like CNN: Conv+bias, Relu, a residual Add, MaxPool, a 1x1 Conv without bias,
    GlobalAveragePool, Flatten, Gemm (transB) with bias, and a Reshape."""
    rng = np.random.default_rng(seed)
    c = channels
    f32 = np.float32
    inits = [
        _init("w1", (rng.standard_normal((c, 3, 3, 3)) * 0.3).astype(f32)),
        _init("b1", (rng.standard_normal(c) * 0.1).astype(f32)),
        _init("w2", (rng.standard_normal((c, c, 3, 3)) * 0.2).astype(f32)),
        _init("b2", (rng.standard_normal(c) * 0.1).astype(f32)),
        _init("w3", (rng.standard_normal((c, c, 1, 1)) * 0.3).astype(f32)),
        _init("wf", (rng.standard_normal((classes, c)) * 0.3).astype(f32)),
        _init("bf", (rng.standard_normal(classes) * 0.1).astype(f32)),
        _init("shape", np.array([1, classes], dtype=np.int64)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], "conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], "relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], "conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["a2"], "add2"),
        helper.make_node("Relu", ["a2"], ["r2"], "relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], "pool2", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p2", "w3"], ["c3"], "conv3"),
        helper.make_node("GlobalAveragePool", ["c3"], ["g3"], "gap"),
        helper.make_node("Flatten", ["g3"], ["f3"], "flatten"),
        helper.make_node("Gemm", ["f3", "wf", "bf"], ["logits"], "fc", transB=1),
        helper.make_node("Reshape", ["logits", "shape"], ["y"], "reshape"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, classes])
    return _model(nodes, [x], [y], inits)


def transformer(seed: int = 0, vocab: int = 16, seq: int = 6, dim: int = 8, heads: int = 2,
                ffn: int = 16) -> onnx.ModelProto:
    """One encoder block as torch exports it: Gather embeddings + positions, LayerNormalization,
    q/k/v MatMul+Add, Reshape/Transpose into heads, MatMul, Div, Softmax, MatMul, back, output
    projection, residual Add, LayerNormalization, MatMul+Add, Gelu through Erf, MatMul+Add, residual."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    dh = dim // heads

    def w(name, shape, s=0.3):
        return _init(name, (rng.standard_normal(shape) * s).astype(f32))

    inits = [
        w("emb", (vocab, dim), 1.0), w("pos", (seq, dim), 0.5),
        _init("ln1_g", (1 + 0.1 * rng.standard_normal(dim)).astype(f32)), w("ln1_b", (dim,), 0.1),
        w("wq", (dim, dim)), w("bq", (dim,), 0.1), w("wk", (dim, dim)), w("bk", (dim,), 0.1),
        w("wv", (dim, dim)), w("bv", (dim,), 0.1), w("wo", (dim, dim)), w("bo", (dim,), 0.1),
        _init("ln2_g", (1 + 0.1 * rng.standard_normal(dim)).astype(f32)), w("ln2_b", (dim,), 0.1),
        w("w1", (dim, ffn)), w("b1", (ffn,), 0.1), w("w2", (ffn, dim)), w("b2", (dim,), 0.1),
        _init("heads_shape", np.array([1, seq, heads, dh], dtype=np.int64)),
        _init("merge_shape", np.array([1, seq, dim], dtype=np.int64)),
        _init("sqrt_dh", np.array(np.sqrt(dh), dtype=f32)),
        _init("sqrt2", np.array(np.sqrt(2.0), dtype=f32)),
        _init("one", np.array(1.0, dtype=f32)), _init("half", np.array(0.5, dtype=f32)),
    ]
    N = helper.make_node
    nodes = [
        N("Gather", ["emb", "ids"], ["e"], "embed"),
        N("Add", ["e", "pos"], ["h0"], "add_pos"),
        N("LayerNormalization", ["h0", "ln1_g", "ln1_b"], ["n1"], "ln1", axis=-1, epsilon=1e-5),
    ]
    for t in ("q", "k", "v"):
        nodes += [N("MatMul", ["n1", f"w{t}"], [f"{t}m"], f"mm_{t}"),
                  N("Add", [f"{t}m", f"b{t}"], [f"{t}a"], f"add_{t}"),
                  N("Reshape", [f"{t}a", "heads_shape"], [f"{t}r"], f"reshape_{t}")]
    nodes += [
        N("Transpose", ["qr"], ["qt"], "tr_q", perm=[0, 2, 1, 3]),
        N("Transpose", ["kr"], ["kt"], "tr_k", perm=[0, 2, 3, 1]),
        N("Transpose", ["vr"], ["vt"], "tr_v", perm=[0, 2, 1, 3]),
        N("MatMul", ["qt", "kt"], ["s"], "mm_scores"),
        N("Div", ["s", "sqrt_dh"], ["sd"], "div_scores"),
        N("Softmax", ["sd"], ["p"], "softmax", axis=-1),
        N("MatMul", ["p", "vt"], ["ctx"], "mm_ctx"),
        N("Transpose", ["ctx"], ["ctxt"], "tr_ctx", perm=[0, 2, 1, 3]),
        N("Reshape", ["ctxt", "merge_shape"], ["ctxm"], "reshape_ctx"),
        N("MatMul", ["ctxm", "wo"], ["om"], "mm_o"),
        N("Add", ["om", "bo"], ["oa"], "add_o"),
        N("Add", ["oa", "h0"], ["h1"], "residual1"),
        N("LayerNormalization", ["h1", "ln2_g", "ln2_b"], ["n2"], "ln2", axis=-1, epsilon=1e-5),
        N("MatMul", ["n2", "w1"], ["f1"], "mm_f1"),
        N("Add", ["f1", "b1"], ["f1b"], "add_f1"),
        N("Div", ["f1b", "sqrt2"], ["gd"], "gelu_div"),
        N("Erf", ["gd"], ["ge"], "gelu_erf"),
        N("Add", ["ge", "one"], ["gp"], "gelu_add"),
        N("Mul", ["f1b", "gp"], ["gm"], "gelu_mul"),
        N("Mul", ["gm", "half"], ["g"], "gelu_half"),
        N("MatMul", ["g", "w2"], ["f2"], "mm_f2"),
        N("Add", ["f2", "b2"], ["f2b"], "add_f2"),
        N("Add", ["f2b", "h1"], ["y"], "residual2"),
    ]
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [1, seq])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, dim])
    return _model(nodes, [ids], [y], inits)


def cnn_data(seed: int = 1, n: int = 4, size: int = 8) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((n, 1, 3, size, size)).astype(np.float32)}


def transformer_data(seed: int = 1, n: int = 4, seq: int = 6, vocab: int = 16) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"ids": rng.integers(0, vocab, size=(n, 1, seq), dtype=np.int64)}


def feeds(data: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    n = len(next(iter(data.values())))
    return [{k: v[i] for k, v in data.items()} for i in range(n)]


def reader(data: dict[str, np.ndarray]):
    """An onnxruntime CalibrationDataReader over stacked samples."""
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = feeds(data)
            self.pos = 0

        def get_next(self):
            if self.pos >= len(self.items):
                return None
            self.pos += 1
            return self.items[self.pos - 1]

        def __len__(self):
            return len(self.items)

        def set_range(self, start_index, end_index):
            self.items = self.items[start_index:end_index]
            self.pos = 0

    return Reader()


def _conv_gemm(w: np.ndarray, b: np.ndarray, wf: np.ndarray, bf: np.ndarray) -> onnx.ModelProto:
    """x [1, Cin, 3, 3] -> Conv(w, b) -> Flatten -> Gemm(wf, bf) -> y."""
    cout, cin = w.shape[:2]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], "conv"),
             helper.make_node("Flatten", ["c"], ["f"], "flatten"),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], "fc")]
    inits = [_init("w", w), _init("b", b), _init("wf", wf), _init("bf", bf)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, 3, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, wf.shape[1]])
    return _model(nodes, [x], [y], inits)


#: the scale of the tie corpus's weights (int8, symmetric: absmax 127 * 2^-6)
TIE_SCALE = np.float32(2.0 ** -6)


def tie_corpus(seed: int = 0) -> onnx.ModelProto:
    """Weights at exact ties of w / scale (x.5 after the float32 division, scale 2^-6 per tensor and per
    channel), one float32 ulp either side (w / s = 2.4999998 and 2.5000002), +0 and -0, denormals and an
    all-zero channel; biases at ties of their int32 quantization where the scale allows it."""
    rng = np.random.default_rng(seed)
    s = TIE_SCALE
    halves = np.array([k + 0.5 for k in range(-8, 8)], dtype=np.float64)
    ties = (halves * np.float64(s)).astype(np.float32)
    below = np.nextafter(ties, np.float32(0))
    above = np.nextafter(ties, np.float32(np.inf) * np.sign(ties))
    special = np.array([0.0, -0.0, 1e-45, -1e-45, 1e-40, -3e-39, 127 * s, -127 * s], dtype=np.float32)
    base = np.concatenate([ties, below, above, special])  # 56 values
    cin = 6
    w = np.zeros((5, cin, 3, 3), dtype=np.float32)
    for ch in range(4):
        values = rng.permutation(base)[: cin * 9].copy()
        values[:2] = [127 * s, -127 * s]  # every channel holds the same absmax
        w[ch] = values.reshape(cin, 3, 3)
    # channel 4 stays all zero (its scale is 0: onnxruntime uses 1.0 and zero point 0)
    # the bias scale with unit_data and scale 2^-6: float32(float32(2 / 255) * 2^-6); b / scale is 0.5 and
    # -0.5 exactly (even: 0), 1.5000000594 and -2.4999999406 (2 and -2)
    bias_scale = np.float32(np.float32(np.float64(2.0) / 255) * s)
    b = np.array([0.5 * np.float64(bias_scale), -0.5 * np.float64(bias_scale), 1.5 * np.float64(bias_scale),
                  -2.5 * np.float64(bias_scale), 7.0], dtype=np.float32)
    wf = (rng.standard_normal((5, 3)) * 0.5).astype(np.float32)
    wf[0, 0] = 2.5 * float(np.abs(wf).max() / 127)  # near a tie of the per-tensor Gemm weight
    bf = np.array([0.5, -1.5, 2.0], dtype=np.float32)
    return _conv_gemm(w, b, wf, bf)


def extreme_corpus(seed: int = 0) -> onnx.ModelProto:
    """Weights with huge values (3e38), a denormal-only channel, a -0-only channel and a tiny channel
    whose bias overflows int32 unless the weight scale is raised (onnxruntime's adjustment)."""
    rng = np.random.default_rng(seed)
    cin = 4
    w = (rng.standard_normal((6, cin, 3, 3)) * 0.2).astype(np.float32)
    w[1] = 0.0
    w[1, 0, 0, 0] = 3e38
    w[1, 1, 0, 0] = -1e30
    w[2] = np.float32(1e-40) * rng.integers(-3, 4, size=(cin, 3, 3)).astype(np.float32)  # denormals only
    w[3] = -0.0
    w[4] *= np.float32(1e-6)  # a tiny channel under a large bias
    b = np.array([0.1, -0.2, 3.0, 0.5, 40.0, 1e9], dtype=np.float32)
    wf = (rng.standard_normal((6, 2)) * 1e-7).astype(np.float32)
    bf = np.array([1e4, -3e4], dtype=np.float32)
    return _conv_gemm(w, b, wf, bf)


def unit_data(cin: int, seed: int = 1, n: int = 3) -> dict[str, np.ndarray]:
    """Calibration data in [-1, 1] holding -1 and 1 exactly (uint8 input scale float32(2 / 255))."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(n, 1, cin, 3, 3)).astype(np.float32)
    x[0, 0, 0, 0, 0], x[0, 0, 0, 0, 1] = -1.0, 1.0
    return {"x": x}


def zoo_common(seed: int = 0) -> onnx.ModelProto:
    """Op types both formats quantize: Conv into Clip, Sigmoid, LeakyRelu, AveragePool, Squeeze /
    Unsqueeze, Transpose, a Mul of two activations, a MatMul of two activations, a quantized tensor
    that is also a graph output, and a Conv without bias fed by a constant-free chain."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    inits = [
        _init("w", (rng.standard_normal((4, 2, 3, 3)) * 0.4).astype(f32)),
        _init("b", (rng.standard_normal(4) * 0.1).astype(f32)),
        _init("lo", np.array(-0.5, f32)), _init("hi", np.array(1.5, f32)),
        _init("axes", np.array([0], np.int64)),
        _init("w2", (rng.standard_normal((4, 4, 1, 1)) * 0.4).astype(f32)),
    ]
    N = helper.make_node
    nodes = [
        N("Conv", ["x", "w", "b"], ["c"], "conv", pads=[1, 1, 1, 1]),
        N("Clip", ["c", "lo", "hi"], ["cl"], "clip"),
        N("Sigmoid", ["cl"], ["sg"], "sigmoid"),
        N("LeakyRelu", ["c"], ["lr"], "leaky", alpha=0.1),
        N("Mul", ["sg", "lr"], ["m"], "mul"),
        N("AveragePool", ["m"], ["ap"], "avgpool", kernel_shape=[2, 2], strides=[2, 2]),
        N("Conv", ["ap", "w2"], ["c2"], "conv2"),
        N("Squeeze", ["c2", "axes"], ["sq"], "squeeze"),
        N("Transpose", ["sq"], ["tr"], "transpose", perm=[0, 2, 1]),
        N("Unsqueeze", ["tr", "axes"], ["us"], "unsqueeze"),
        N("MatMul", ["sq", "us"], ["mm"], "matmul_act"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    outs = [helper.make_tensor_value_info("mm", TensorProto.FLOAT, [1, 4, 2, 2]),
            helper.make_tensor_value_info("cl", TensorProto.FLOAT, [1, 4, 4, 4])]
    return _model(nodes, [x], outs, inits)


def zoo_qdq(seed: int = 0) -> onnx.ModelProto:
    """Op types of the QDQ registry: ConvTranspose, Resize, Pad (constant and reflect), Split, Concat,
    Slice, Where, TopK, CumSum, InstanceNormalization, BatchNormalization, GatherElements, MaxPool."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    c = 4
    inits = [
        _init("wt", (rng.standard_normal((2, c, 2, 2)) * 0.4).astype(f32)),
        _init("bt", (rng.standard_normal(c) * 0.1).astype(f32)),
        _init("scales", np.array([1, 1, 2, 2], f32)),
        _init("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)),
        _init("split", np.array([2, 2], np.int64)),
        _init("starts", np.array([1], np.int64)), _init("ends", np.array([7], np.int64)),
        _init("sl_axes", np.array([3], np.int64)),
        _init("k", np.array([3], np.int64)), _init("cs_axis", np.array(3, np.int64)),
        _init("in_g", (1 + 0.1 * rng.standard_normal(2)).astype(f32)), _init("in_b", (0.1 * rng.standard_normal(2)).astype(f32)),
        _init("bn_g", (1 + 0.1 * rng.standard_normal(2)).astype(f32)), _init("bn_b", (0.1 * rng.standard_normal(2)).astype(f32)),
        _init("bn_m", (0.1 * rng.standard_normal(2)).astype(f32)), _init("bn_v", (1 + rng.uniform(0, 0.5, 2)).astype(f32)),
        _init("idx", rng.integers(0, 4, size=(1, 2, 4, 4)).astype(np.int64)),
    ]
    N = helper.make_node
    nodes = [
        N("ConvTranspose", ["x", "wt", "bt"], ["ct"], "convt", strides=[2, 2]),    # [1,4,8,8]
        N("Resize", ["ct", "", "scales"], ["rs"], "resize", mode="nearest"),      # [1,4,16,16]
        N("MaxPool", ["rs"], ["mp"], "maxpool", kernel_shape=[2, 2], strides=[2, 2]),  # [1,4,8,8]
        N("Pad", ["mp", "pads"], ["pd"], "pad_const"),                            # [1,4,10,10]
        N("Pad", ["pd", "pads"], ["pr"], "pad_reflect", mode="reflect"),          # [1,4,12,12]
        N("Split", ["pr", "split"], ["s1", "s2"], "split", axis=1),               # 2 x [1,2,12,12]
        N("Slice", ["s1", "starts", "ends", "sl_axes"], ["sl"], "slice"),         # [1,2,12,6]
        N("Greater", ["s2", "s1"], ["cond"], "greater"),
        N("Where", ["cond", "s1", "s2"], ["wh"], "where"),                        # [1,2,12,12]
        N("InstanceNormalization", ["wh", "in_g", "in_b"], ["inn"], "instnorm"),
        N("BatchNormalization", ["inn", "bn_g", "bn_b", "bn_m", "bn_v"], ["bn"], "batchnorm"),
        N("TopK", ["sl", "k"], ["tk", "tki"], "topk", axis=3),                    # [1,2,12,3]
        N("CumSum", ["tk", "cs_axis"], ["cs"], "cumsum"),
        N("Concat", ["bn", "s1"], ["cc"], "concat", axis=1),                      # [1,4,12,12]
        N("GatherElements", ["cc", "idx"], ["ge"], "gather_el", axis=1),           # [1,2,4,4]
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    outs = [helper.make_tensor_value_info("ge", TensorProto.FLOAT, [1, 2, 4, 4]), helper.make_tensor_value_info("cs", TensorProto.FLOAT, [1, 2, 12, 3])]
    return _model(nodes, [x], outs, inits)


def zoo_data(seed: int = 1, n: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((n, 1, 2, 4, 4)).astype(np.float32)}


def with_subgraph(seed: int = 0) -> onnx.ModelProto:
    """A Conv, then an If whose branches read an outer weight and the Conv's output (subgraphs are not
    quantized, and what they read stays)."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    w = _init("w", (rng.standard_normal((2, 2, 1, 1)) * 0.5).astype(f32))
    scale = _init("s", (rng.standard_normal((1, 2, 1, 1))).astype(f32))
    then_g = helper.make_graph([helper.make_node("Mul", ["c", "s"], ["t"], "then_mul")], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 2, 2, 2])])
    else_g = helper.make_graph([helper.make_node("Conv", ["c", "w"], ["e"], "else_conv")], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 2, 2, 2])])
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], "conv"),
             helper.make_node("ReduceSum", ["c"], ["r"], "sum", keepdims=0),
             helper.make_node("Greater", ["r", "zero"], ["cond"], "gt"),
             helper.make_node("If", ["cond"], ["y"], "if", then_branch=then_g, else_branch=else_g)]
    inits = [w, scale, _init("zero", np.array(0.0, f32))]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 2, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 2, 2])
    return _model(nodes, [x], [y], inits)


def shared(seed: int = 0) -> onnx.ModelProto:
    """Two Convs sharing one weight and one bias (onnxruntime copies the bias in QDQ, reuses it in
    QOperator), two Gemms sharing a weight, one with alpha 0.5 and beta 2 (the bias scale takes beta),
    one without transB nor bias."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    inits = [_init("w", (rng.standard_normal((3, 3, 3, 3)) * 0.3).astype(f32)),
             _init("b", (rng.standard_normal(3) * 0.2).astype(f32)),
             _init("wg", (rng.standard_normal((12, 12)) * 0.3).astype(f32)),
             _init("bg", (rng.standard_normal(12) * 0.2).astype(f32))]
    N = helper.make_node
    nodes = [N("Conv", ["x", "w", "b"], ["c1"], "conv_a", pads=[1, 1, 1, 1]),
             N("Conv", ["c1", "w", "b"], ["c2"], "conv_b", pads=[1, 1, 1, 1]),
             N("Flatten", ["c2"], ["f"], "flatten", axis=2),                          # [1, 3, 4] -> reshape
             N("Reshape", ["f", "shape"], ["f2"], "reshape"),
             N("Gemm", ["f2", "wg", "bg"], ["g1"], "gemm_ab", alpha=0.5, beta=2.0, transB=1),
             N("Gemm", ["g1", "wg"], ["y"], "gemm_plain")]
    inits.append(_init("shape", np.array([1, 12], np.int64)))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 2, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 12])
    return _model(nodes, [x], [y], inits)


def zoo_qoperator(seed: int = 0) -> onnx.ModelProto:
    """The QOperator registry's remaining op types: Pad (constant from an initializer, implicit zero,
    reflect), Resize, Split, Concat, Where, ArgMax."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    inits = [
        _init("w", (rng.standard_normal((4, 2, 1, 1)) * 0.5).astype(f32)),
        _init("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)),
        _init("pad_value", np.array(0.37, f32)),
        _init("scales", np.array([1, 1, 2, 2], f32)),
        _init("split", np.array([2, 2], np.int64)),
    ]
    N = helper.make_node
    nodes = [
        N("Conv", ["x", "w"], ["c"], "conv"),                                     # [1,4,4,4]
        N("Pad", ["c", "pads", "pad_value"], ["p1"], "pad_value"),                # [1,4,6,6]
        N("Pad", ["p1", "pads"], ["p2"], "pad_zero"),                             # [1,4,8,8]
        N("Pad", ["p2", "pads"], ["p3"], "pad_reflect", mode="reflect"),          # [1,4,10,10]
        N("Resize", ["p3", "", "scales"], ["r"], "resize", mode="nearest"),       # [1,4,20,20]
        N("Split", ["r", "split"], ["s1", "s2"], "split", axis=1),               # 2 x [1,2,20,20]
        N("Conv", ["r", "w2"], ["c2"], "conv2"),                                  # [1,2,20,20]
        N("Concat", ["s2", "s1", "c2"], ["cc"], "concat", axis=1),                # [1,6,20,20]
        N("Greater", ["c2", "s1"], ["cond"], "greater"),
        N("Where", ["cond", "c2", "s2"], ["wh"], "where"),
        N("ArgMax", ["cc"], ["am"], "argmax", axis=1),
        N("Add", ["wh", "s1"], ["y"], "add"),
    ]
    inits.append(_init("w2", (rng.standard_normal((2, 4, 1, 1)) * 0.5).astype(f32)))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 20, 20]),
            helper.make_tensor_value_info("am", TensorProto.INT64, [1, 1, 20, 20]),
            helper.make_tensor_value_info("cc", TensorProto.FLOAT, [1, 6, 20, 20])]
    return _model(nodes, [x], outs, inits)
