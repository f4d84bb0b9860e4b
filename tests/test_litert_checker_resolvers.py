"""check == run for each of LiteRT's op resolvers: ``check_model(model, kernels=r)`` reports a
violation that ``r`` rejects or aborts on exactly when LiteRT's interpreter with that resolver
(``BUILTIN_REF``, ``BUILTIN_WITHOUT_DEFAULT_DELEGATES``, the default resolver with the XNNPACK
delegate) fails to load, prepare or run the model — measured in a child process, since an abort
kills it — and at the stage it fails at; and ``quantspec.litert.Interpreter(model, kernels=r)``
refuses the models the checker says ``r`` refuses.

The models: the checker's rule-by-rule cases (tests/test_litert_checker.py), the LiteRT limits'
cases (tests/test_litert_limits.py), single-op models where the resolvers disagree, and the
converter-made zoo (benchmarks/litert_zoo.py, read from its cache; ``QUANTSPEC_ZOO_ARCHS`` /
``QUANTSPEC_ZOO_QUANTS`` select the models as for tests/test_litert_zoo.py, default a fast subset).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import test_litert_checker as C
import test_litert_limits as L
import test_litert_zoo as Z
from litert_build import T, build
from quantspec.errors import InvalidArgumentError, QuantSpecError
from quantspec.litert import Interpreter, check_model, optable
from refs import require

RESOLVERS = optable.RESOLVERS
I32 = np.int32


def litert_outcome(model: bytes, resolver: str) -> str:
    """What LiteRT does with ``model`` (zeros as inputs) with one resolver: "ok", "load",
    "prepare" or "eval" (the stage that raised), or "abort" (the process died), in a forked child."""
    require("ai_edge_litert.interpreter")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                               # child
        os.close(r)
        stage = "load"
        try:
            import faulthandler

            faulthandler.disable()
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
            from ai_edge_litert.interpreter import Interpreter as LiteRT, OpResolverType

            it = LiteRT(model_content=model,
                        experimental_op_resolver_type=getattr(OpResolverType, optable.RESOLVER_TYPES[resolver]))
            stage = "prepare"
            it.allocate_tensors()
            for d in it.get_input_details():
                it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
            stage = "eval"
            it.invoke()
            stage = "ok"
        except Exception:
            pass
        os.write(w, stage.encode())
        os._exit(0)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    said = os.read(r, 64).decode()
    os.close(r)
    if os.WIFSIGNALED(status):
        return "abort"
    return said


def outcome_of(report, resolver: str) -> str:
    """The outcome the report predicts for ``resolver``: "ok", or the first failure ("load" <
    "prepare" < "eval"; an abort where it aborts at or before the stage of any rejection)."""
    order = {"load": 0, "prepare": 1, "eval": 2}
    fails = [v.verdict(resolver) for v in report.violations if v.verdict(resolver).fails]
    if not fails:
        return "ok"
    first = min(fails, key=lambda v: (order.get(v.stage, 1), v.action != optable.ABORTS))
    return "abort" if first.action == optable.ABORTS else first.stage


def quantspec_refuses(model: bytes, resolver: str) -> bool:
    try:
        it = Interpreter(model, kernels=resolver)
        it.run([np.zeros(t.shape, t.dtype.dtype if t.dtype is not None else np.float32) for t in it.inputs])
    except QuantSpecError:
        return True
    return False


# --- single-op models where the resolvers disagree --------------------------------------------------------
S = 1 / 256
X = T((1, 4, 4, 2), "int8", 0.1, 0)
_W = np.random.default_rng(1).integers(-127, 128, (4, 3, 3, 2), dtype=np.int8)
_WD = np.random.default_rng(2).integers(-127, 128, (1, 3, 3, 4), dtype=np.int8)
_WF = np.random.default_rng(3).integers(-127, 128, (4, 8), dtype=np.int8)
_POOL = {"padding": "VALID", "stride_h": 2, "stride_w": 2, "filter_height": 2, "filter_width": 2}
_SAME = {"padding": "SAME", "stride_h": 1, "stride_w": 1}
_PC = [0.01, 0.02, 0.03, 0.04]


def _bias(scales, zp):
    return T((4,), "int32", [0.1 * s for s in scales], [zp] * len(scales), 0, np.array([1, 2, 3, 4], I32))


# name -> (op, inputs, outputs, options, version, {resolver: LiteRT's outcome}): the outcomes are
# measured with ai-edge-litert 2.3.0 and asserted again below
SINGLE = {
    "softmax-abort": ("SOFTMAX", [T((1, 4), "int8", 0.01, 0)], [T((1, 4), "int8", S, -128)], {"beta": 1e-9}, 2,
                      {"reference": "abort", "optimized": "ok", "xnnpack": "ok"}),
    "log-softmax-abort": ("LOG_SOFTMAX", [T((1, 4), "int8", 1e-9, 0)], [T((1, 4), "int8", 16 / 256, 127)], {}, 2,
                          {"reference": "abort", "optimized": "ok", "xnnpack": "ok"}),
    "add-abort": ("ADD", [T((4,), "int8", 1.0, 0), T((4,), "int8", 1.0, 0)], [T((4,), "int8", 1e-7, 0)], {}, 2,
                  {"reference": "abort", "optimized": "abort", "xnnpack": "abort"}),
    "max-pool-same-scale": ("MAX_POOL_2D", [X], [T((1, 2, 2, 2), "int8", 0.2, 0)], _POOL, 2,
                            {"reference": "ok", "optimized": "ok", "xnnpack": "prepare"}),
    "transpose-same-zero-point": ("TRANSPOSE", [X, T((4,), "int32", data=np.array([0, 2, 1, 3], I32))],
                                  [T((1, 4, 4, 2), "int8", 0.1, 3)], {}, 2,
                                  {"reference": "ok", "optimized": "ok", "xnnpack": "prepare"}),
    "pad-same-scale": ("PAD", [X, T((4, 2), "int32", data=np.array([[0, 0], [1, 1], [1, 1], [0, 0]], I32))],
                       [T((1, 6, 6, 2), "int8", 0.2, 0)], {}, 2,
                       {"reference": "ok", "optimized": "ok", "xnnpack": "prepare"}),
    "resize-same-scale": ("RESIZE_BILINEAR", [X, T((2,), "int32", data=np.array([8, 8], I32))],
                          [T((1, 8, 8, 2), "int8", 0.2, 0)], {}, 3,
                          {"reference": "ok", "optimized": "ok", "xnnpack": "prepare"}),
    "reshape-same-scale": ("RESHAPE", [X, T((2,), "int32", data=np.array([1, 32], I32))],
                           [T((1, 32), "int8", 0.2, 0)], {"new_shape": [1, 32]}, 1,
                           {"reference": "ok", "optimized": "ok", "xnnpack": "ok"}),
    "avg-pool-same-scale": ("AVERAGE_POOL_2D", [X], [T((1, 2, 2, 2), "int8", 0.2, 0)], _POOL, 2,
                            {"reference": "ok", "optimized": "ok", "xnnpack": "ok"}),
    "concat-same-scale": ("CONCATENATION", [X, X], [T((1, 4, 4, 4), "int8", 0.2, 0)], {"axis": 3}, 2,
                          {"reference": "prepare", "optimized": "prepare", "xnnpack": "prepare"}),
    "logistic-fixed-scale": ("LOGISTIC", [T((1, 8), "int8", 0.1, 0)], [T((1, 8), "int8", 1 / 128, -128)], {}, 2,
                             {"reference": "prepare", "optimized": "prepare", "xnnpack": "ok"}),
    "conv-bias-zero-point-per-channel": ("CONV_2D", [X, T((4, 3, 3, 2), "int8", _PC, 0, 0, _W), _bias(_PC, 5)],
                                         [T((1, 4, 4, 4), "int8", 0.3, 0)], _SAME, 3,
                                         {"reference": "ok", "optimized": "ok", "xnnpack": "prepare"}),
    "conv-bias-zero-point-per-tensor": ("CONV_2D", [X, T((4, 3, 3, 2), "int8", [0.02], 0, 0, _W), _bias([0.02], 5)],
                                        [T((1, 4, 4, 4), "int8", 0.3, 0)], _SAME, 3,
                                        {"reference": "prepare", "optimized": "prepare", "xnnpack": "prepare"}),
    "dw-bias-zero-point-per-channel": ("DEPTHWISE_CONV_2D", [X, T((1, 3, 3, 4), "int8", _PC, 0, 3, _WD),
                                                             _bias(_PC, 5)],
                                       [T((1, 4, 4, 4), "int8", 0.3, 0)], {**_SAME, "depth_multiplier": 2}, 3,
                                       {"reference": "ok", "optimized": "ok", "xnnpack": "prepare"}),
    "fc-bias-zero-point-per-channel": ("FULLY_CONNECTED", [T((1, 8), "int8", 0.1, 0), T((4, 8), "int8", _PC, 0, 0, _WF),
                                                           _bias(_PC, 5)], [T((1, 4), "int8", 0.3, 0)], {}, 4,
                                       {"reference": "ok", "optimized": "ok", "xnnpack": "prepare"}),
    "fc-bias-zero-point-per-tensor": ("FULLY_CONNECTED", [T((1, 8), "int8", 0.1, 0),
                                                          T((4, 8), "int8", [0.02], 0, 0, _WF), _bias([0.02], 5)],
                                      [T((1, 4), "int8", 0.3, 0)], {}, 4,
                                      {"reference": "ok", "optimized": "ok", "xnnpack": "ok"}),
    "add-zero-point-range": ("ADD", [T((4,), "int8", 0.1, 0), T((4,), "int8", 0.1, 200)], [T((4,), "int8", 0.2, 0)],
                             {}, 2, {"reference": "ok", "optimized": "ok", "xnnpack": "prepare"}),
    "logistic-input-scale-zero": ("LOGISTIC", [T((4,), "int8", 0.0, 0)], [T((4,), "int8", S, -128)], {}, 2,
                                  {"reference": "ok", "optimized": "ok", "xnnpack": "prepare"}),
    "dequantize-scale-zero": ("DEQUANTIZE", [T((4,), "int8", 0.0, 0)], [T((4,), "float")], {}, 2,
                              {"reference": "ok", "optimized": "ok", "xnnpack": "prepare"}),
    "quantize-scale-zero": ("QUANTIZE", [T((4,), "float")], [T((4,), "int8", 0.0, 0)], {}, 2,
                            {"reference": "ok", "optimized": "ok", "xnnpack": "abort"}),
    "quantize-zero-point-range": ("QUANTIZE", [T((4,), "float")], [T((4,), "int8", 0.1, 200)], {}, 2,
                                  {"reference": "ok", "optimized": "ok", "xnnpack": "abort"}),
    "quantize-subnormal-scale": ("QUANTIZE", [T((4,), "float")], [T((4,), "int8", 1e-45, 0)], {}, 2,
                                 {"reference": "ok", "optimized": "ok", "xnnpack": "abort"}),
    **{f"add-{where}-scale-{name}": ("ADD", [T((4,), "int8", value if where == "input" else 0.1, 0),
                                             T((4,), "int8", 0.1, 0)],
                                      [T((4,), "int8", value if where == "output" else 0.2, 0)], {}, 2,
                                      {"reference": "abort", "optimized": "abort", "xnnpack": "abort"})
       for where in ("input", "output") for name, value in (("zero", 0.0), ("negative", -1.0), ("inf", np.inf))},
    "sub-output-scale-zero": ("SUB", [T((4,), "int8", 0.1, 0), T((4,), "int8", 0.1, 0)], [T((4,), "int8", 0.0, 0)],
                              {}, 2, {"reference": "ok", "optimized": "ok", "xnnpack": "ok"}),
    "sub-input-scale-negative": ("SUB", [T((4,), "int8", -1.0, 0), T((4,), "int8", 0.1, 0)],
                                 [T((4,), "int8", 0.2, 0)], {}, 2,
                                 {"reference": "abort", "optimized": "abort", "xnnpack": "abort"}),
    "add-scale-nan": ("ADD", [T((4,), "int8", np.nan, 0), T((4,), "int8", 0.1, 0)], [T((4,), "int8", 0.2, 0)], {}, 2,
                      {"reference": "abort", "optimized": "abort", "xnnpack": "prepare"}),
    "mul-scale-nan": ("MUL", [T((4,), "int8", np.nan, 0), T((4,), "int8", 0.1, 0)], [T((4,), "int8", 0.2, 0)], {}, 2,
                      {"reference": "ok", "optimized": "ok", "xnnpack": "prepare"}),
    "mul-scale-negative": ("MUL", [T((4,), "int8", -1.0, 0), T((4,), "int8", 0.1, 0)], [T((4,), "int8", 0.2, 0)],
                           {}, 2, {"reference": "ok", "optimized": "ok", "xnnpack": "ok"}),
    "conv-requantization-256": ("CONV_2D", [T((1, 4, 4, 2), "int8", 1.0, 0), T((4, 3, 3, 2), "int8", [100.0], 0, 0, _W),
                                            T((4,), "int32", [100.0], 0, 0, np.array([1, 2, 3, 4], I32))],
                                [T((1, 4, 4, 4), "int8", 0.01, 0)], _SAME, 3,
                                {"reference": "ok", "optimized": "ok", "xnnpack": "prepare"}),
}


# --- a scale that is 0, negative, NaN or inf (or a zero point of 200) on an input or the output of 18 operators
_WS = np.random.default_rng(4).integers(-127, 128, (4, 1, 1, 2), dtype=np.int8)


def _scale_case(op, where, value):
    s_in, s_out = (value, 0.1) if where == "input" else (0.1, value)
    x = T((1, 2, 2, 2), "int8", s_in, 0)
    zero4 = np.zeros(4, I32)
    pool = {"padding": "VALID", "stride_h": 2, "stride_w": 2, "filter_height": 2, "filter_width": 2}
    same = T((1, 2, 2, 2), "int8", s_out, 0)
    return {
        "CONV_2D": ([x, T((4, 1, 1, 2), "int8", [0.02], 0, 0, _WS), T((4,), "int32", [0.002], 0, 0, zero4)],
                    [T((1, 2, 2, 4), "int8", s_out, 0)], {"padding": "VALID", "stride_h": 1, "stride_w": 1}, 3),
        "FULLY_CONNECTED": ([T((1, 2), "int8", s_in, 0), T((4, 2), "int8", [0.02], 0, 0, _WS.reshape(4, 2)),
                             T((4,), "int32", [0.002], 0, 0, zero4)], [T((1, 4), "int8", s_out, 0)], {}, 4),
        "AVERAGE_POOL_2D": ([x], [T((1, 1, 1, 2), "int8", s_out, 0)], pool, 2),
        "MAX_POOL_2D": ([x], [T((1, 1, 1, 2), "int8", s_out, 0)], pool, 2),
        "CONCATENATION": ([x, x], [T((1, 2, 2, 4), "int8", s_out, 0)], {"axis": 3}, 2),
        "MEAN": ([x, T((2,), "int32", data=np.array([1, 2], I32))], [T((1, 1, 1, 2), "int8", s_out, 0)],
                 {"keep_dims": True}, 2),
        "TANH": ([x], [same], {}, 2),
        "LOGISTIC": ([x], [T((1, 2, 2, 2), "int8", s_out, -128)], {}, 2),
        "SOFTMAX": ([x], [T((1, 2, 2, 2), "int8", s_out, -128)], {"beta": 1.0}, 2),
        "QUANTIZE": ([x], [same], {}, 2),
        "DEQUANTIZE": ([x], [T((1, 2, 2, 2), "float")], {}, 2),
        "LEAKY_RELU": ([x], [same], {"alpha": 0.2}, 2),
        "RESIZE_BILINEAR": ([x, T((2,), "int32", data=np.array([4, 4], I32))], [T((1, 4, 4, 2), "int8", s_out, 0)],
                            {}, 3),
        "MAXIMUM": ([x, x], [same], {}, 2),
        "LESS": ([x, x], [T((1, 2, 2, 2), "bool")], {}, 2),
        "ADD": ([x, T((1, 2, 2, 2), "int8", 0.1, 0)], [same], {}, 2),
        "SUB": ([x, T((1, 2, 2, 2), "int8", 0.1, 0)], [same], {}, 2),
        "MUL": ([x, T((1, 2, 2, 2), "int8", 0.1, 0)], [same], {}, 2),
    }[op]


SCALES = {"zero": 0.0, "negative": -1.0, "nan": np.nan, "inf": np.inf}
SCALE_CASES = [f"{op}-{where}-{name}" for op in ("CONV_2D", "FULLY_CONNECTED", "AVERAGE_POOL_2D", "MAX_POOL_2D",
                                                 "CONCATENATION", "MEAN", "TANH", "LOGISTIC", "SOFTMAX", "QUANTIZE",
                                                 "DEQUANTIZE", "LEAKY_RELU", "RESIZE_BILINEAR", "MAXIMUM", "LESS",
                                                 "ADD", "SUB", "MUL", "FULLY_CONNECTED_PER_CHANNEL")
               for where in ("input", "output") for name in SCALES
               if not (where == "output" and op in ("DEQUANTIZE", "LESS"))]


def _scale_model(key):
    op, where, name = key.split("-")
    per_channel = op == "FULLY_CONNECTED_PER_CHANNEL"        # FULLY_CONNECTED with per-channel weights
    op = "FULLY_CONNECTED" if per_channel else op
    if name == "zp200":                # a zero point outside int8's range, scale 0.1
        inputs, outputs, options, version = _scale_case(op, where, 0.1)
        (inputs[0] if where == "input" else outputs[0]).zero_point = 200
    else:
        inputs, outputs, options, version = _scale_case(op, where, SCALES[name])
    if per_channel:
        inputs[1].scale, inputs[1].zero_point = [0.01, 0.02, 0.03, 0.04], [0] * 4
        inputs[2].scale, inputs[2].zero_point = [0.001, 0.002, 0.003, 0.004], [0] * 4
    return build(op, inputs, outputs, options, version)


# --- an activation with several scales; the weight and bias rules of the GEMMs -------------------------------

PER_AXIS_CASES = [c.rsplit("-", 1)[0] for c in SCALE_CASES if c.endswith("-zero")]
_WD = np.random.default_rng(6).integers(-127, 128, (1, 1, 1, 4), dtype=np.int8)


def _per_axis_model(key):
    op, where = key.split("-")
    if op == "FULLY_CONNECTED_PER_CHANNEL":
        return _per_axis_fc(where)
    inputs, outputs, options, version = _scale_case(op, where, 0.1)
    t = inputs[0] if where == "input" else outputs[0]
    t.scale, t.zero_point, t.quantized_dimension = [0.1, 0.2], [0, 0], 3
    return build(op, inputs, outputs, options, version)


def _per_axis_fc(where):
    inputs, outputs, options, version = _scale_case("FULLY_CONNECTED", where, 0.1)
    inputs[1].scale, inputs[1].zero_point = [0.01, 0.02, 0.03, 0.04], [0] * 4
    inputs[2].scale, inputs[2].zero_point = [0.001, 0.002, 0.003, 0.004], [0] * 4
    t = inputs[0] if where == "input" else outputs[0]
    n = t.shape[1]
    t.scale, t.zero_point, t.quantized_dimension = [0.1 * (k + 1) for k in range(n)], [0] * n, 1
    return build("FULLY_CONNECTED", inputs, outputs, options, version)


GEMM_CASES = [f"{op}-{gran}-{rule}" for op in ("CONV_2D", "FULLY_CONNECTED", "DEPTHWISE_CONV_2D")
              for gran in ("per_tensor", "per_channel")
              for rule in ("weight_zero_point", "weight_minus_128", "bias_scale", "bias_zero_point",
                           "bias_granularity")]


def _gemm_model(key):
    op, gran, rule = key.split("-")
    if op == "DEPTHWISE_CONV_2D":
        inputs = [T((1, 2, 2, 2), "int8", 0.1, 0), T((1, 1, 1, 4), "int8", [0.02], 0, 3, _WD.copy()),
                  T((4,), "int32", [0.002], 0, 0, np.zeros(4, I32))]
        outputs, options, version = [T((1, 2, 2, 4), "int8", 0.3, 0)], {
            "padding": "VALID", "stride_h": 1, "stride_w": 1, "depth_multiplier": 2}, 3
    else:
        inputs, outputs, options, version = _scale_case(op, "input", 0.1)
        inputs[1].data = inputs[1].data.copy()
    w, b = inputs[1], inputs[2]
    if gran == "per_channel":
        w.scale, w.zero_point = [0.01, 0.02, 0.03, 0.04], [0] * 4
        b.scale, b.zero_point = [0.001, 0.002, 0.003, 0.004], [0] * 4
    else:
        b.scale = [0.002]
    if rule == "weight_zero_point":
        w.zero_point = [3] * len(w.scale)
    elif rule == "weight_minus_128":
        w.data.flat[0] = -128
    elif rule == "bias_scale":
        b.scale = [v * 1.5 for v in b.scale]
    elif rule == "bias_zero_point":
        b.zero_point = [4] * len(b.scale)
    elif gran == "per_channel":           # bias_granularity
        b.scale, b.zero_point = [0.002], [0]
    else:
        b.scale, b.zero_point = [0.002] * 4, [0] * 4
    return build(op, inputs, outputs, options, version)


# --- the fixed output parameters, off by a little --------------------------------------------------------------
FIXED = {"LOGISTIC": (1 / 256, -128), "SOFTMAX": (1 / 256, -128), "TANH": (1 / 128, 0),
         "L2_NORMALIZATION": (1 / 128, 0), "LOG_SOFTMAX": (16 / 256, 127)}
FIXED_CASES = [f"{op}-{what}" for op in FIXED for what in ("scale_times_2", "scale_one_ulp", "zero_point_off")]


def _fixed_model(key):
    op, what = key.split("-")
    scale, zp = FIXED[op]
    if what == "scale_times_2":
        scale *= 2
    elif what == "scale_one_ulp":
        scale = float(np.nextafter(np.float32(scale), np.float32(1)))
    else:
        zp = zp - 1 if zp > -128 else zp + 1
    return build(op, [T((1, 8), "int8", 0.1, 0)], [T((1, 8), "int8", scale, zp)],
                 {"beta": 1.0} if op == "SOFTMAX" else {}, 1 if op == "L2_NORMALIZATION" else 2)


def _single(name):
    op, inputs, outputs, options, version, _ = SINGLE[name]
    return build(op, inputs, outputs, options, version)


def _checker_case(name):
    _, base, change, _ = {c[0]: c for c in C.CASES}[name]
    return C.edit(C.BASES[base](), change)


def _limit_case(rule):
    op, inputs, outputs, options, _ = L.CASES[rule]
    version = 1 if op in L.VERSION1 or any(t.dtype == "int16" for t in inputs) else 2
    return build(op, inputs, outputs, options, version)


MODELS = {**{f"single:{n}": (_single, n) for n in SINGLE},
          **{f"rule:{c[0]}": (_checker_case, c[0]) for c in C.CASES},
          **{f"limit:{r}": (_limit_case, r) for r in L.CASES},
          **{f"scale:{k}": (_scale_model, k) for k in SCALE_CASES},
          **{f"per-axis:{k}": (_per_axis_model, k) for k in PER_AXIS_CASES},
          **{f"fixed:{k}": (_fixed_model, k) for k in FIXED_CASES},
          **{f"gemm:{k}": (_gemm_model, k) for k in GEMM_CASES},
          **{f"zero-point:{k}": (_scale_model, k) for k in
             sorted({c.rsplit("-", 1)[0] + "-zp200" for c in SCALE_CASES})}}
_cache: dict[str, bytes] = {}


def model_of(key: str) -> bytes:
    if key not in _cache:
        make, arg = MODELS[key]
        _cache[key] = make(arg)
    return _cache[key]


#: (model, resolver) where the checker does not yet say what LiteRT does
CHECK_GAPS: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize("key, r", [
    pytest.param(k, r, marks=pytest.mark.xfail(strict=True, reason=CHECK_GAPS[(k, r)])) if (k, r) in CHECK_GAPS
    else (k, r) for k in sorted(MODELS) for r in RESOLVERS])
def test_check_reports_what_each_resolver_fails_on(key, r):
    model = model_of(key)
    outcome = litert_outcome(model, r)
    if key.startswith("single:"):
        assert outcome == SINGLE[key[7:]][5][r], (key, r, outcome)     # the measurement still holds
    report = check_model(model, kernels=r)
    assert report.kernels == (r,)
    predicted = outcome_of(report, r)
    if predicted == "ok" and any(v.verdict(r).action is None for v in report.violations):
        # a type or an operator outside the spec: the checker makes no claim (LiteRT may have a kernel)
        assert not report.ok
        return
    assert predicted == outcome, f"{key} with {r}: LiteRT {outcome}, check says {predicted}\n{report.render()}"
    assert bool(report.rejected_by_litert) == (outcome != "ok")
    if outcome != "ok":
        assert not report.ok


#: (model, resolver) where quantspec's Interpreter does not do what LiteRT does (none at present): the
#: checker follows LiteRT
INTERPRETER_GAPS: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize("key, resolver", [
    pytest.param(k, r, marks=pytest.mark.xfail(strict=True, reason=INTERPRETER_GAPS[(k, r)]))
    if (k, r) in INTERPRETER_GAPS else (k, r) for k in sorted(MODELS) for r in RESOLVERS])
def test_the_interpreter_refuses_what_check_says_the_resolver_refuses(key, resolver):
    """Where check says ``resolver`` rejects or aborts, quantspec's Interpreter with those kernels
    refuses the model; where check says it runs it, so does the Interpreter, except where check
    reports a violation whose numbers quantspec cannot reproduce (a zero scale LiteRT computes
    meaningless numbers with, undefined behaviour) or a type outside the spec."""
    model = model_of(key)
    report = check_model(model, kernels=resolver)
    refuses = quantspec_refuses(model, resolver)
    if report.rejected_by_litert:
        assert refuses, report.render()
    else:
        assert not refuses or report.violations, report.render()
        # and where LiteRT runs it and check says so, a refusal stands for a reported violation
        if refuses:
            assert any(v.verdict(resolver).action in (optable.SILENT, optable.UNDEFINED, None)
                       for v in report.violations), report.render()


# --- the models: per-resolver verdicts ------------------------------------------------------------

def test_softmax_abort_is_the_reference_kernels_only():
    model = _single("softmax-abort")
    report = check_model(model)
    (v,) = report.violations
    assert v.rule == "softmax-input-multiplier"
    assert v.verdicts == {"reference": "aborts", "optimized": "runs", "xnnpack": "runs"}
    assert v.stages == {"reference": "prepare", "optimized": None, "xnnpack": None}
    assert v.rejected_by() == ("reference",)
    assert v.resolvers_text() == "aborts at prepare (reference); runs (optimized, xnnpack)"
    assert (v.litert, v.litert_stage, v.litert_rejects) == ("aborts", "prepare", True)    # the reference's
    assert not report.ok
    assert not check_model(model, kernels="reference").ok
    for kernels in ("optimized", "xnnpack", ["optimized", "xnnpack"]):
        r = check_model(model, kernels=kernels)
        assert r.ok and not r.violations and [w.rule for w in r.other_kernels] == ["softmax-input-multiplier"]
        assert "other resolvers' limits" in r.render() and "aborts at prepare (reference)" in r.render()
    data = report.to_json()
    assert data["kernels"] == list(RESOLVERS)
    verdicts = data["violations"][0]["verdicts"]
    assert {r: verdicts[r]["action"] for r in RESOLVERS} == {"reference": "aborts", "optimized": "runs",
                                                               "xnnpack": "runs"}
    assert data["violations"][0]["rejected_by"] == ["reference"]


def test_add_abort_is_every_resolvers():
    report = check_model(_single("add-abort"))
    (v,) = report.violations
    assert v.rule == "add-output-multiplier"
    assert v.verdicts == {r: "aborts" for r in RESOLVERS} and v.rejected_by() == RESOLVERS
    assert v.resolvers_text() == "aborts at prepare (reference, optimized, xnnpack)"
    for r in RESOLVERS:
        assert not check_model(_single("add-abort"), kernels=r).ok


def test_a_spec_violation_fails_whatever_the_kernels():
    """A violation of the spec's rules is not ok for any resolver, even one that runs the model."""
    model = _single("logistic-fixed-scale")
    (v,) = check_model(model).violations
    assert v.verdicts == {"reference": "rejects", "optimized": "rejects", "xnnpack": "silent"}
    for r in RESOLVERS:
        report = check_model(model, kernels=r)
        assert not report.ok and bool(report.rejected_by_litert) == (r != "xnnpack")


def test_an_xnnpack_failure_without_a_spec_rule():
    (v,) = check_model(_single("conv-requantization-256")).violations
    assert v.rule == optable.XNNPACK_RUNTIME and v.op_name == "CONV_2D"
    assert v.verdicts == {"reference": "runs", "optimized": "runs", "xnnpack": "rejects"}
    assert check_model(_single("conv-requantization-256"), kernels="reference").ok


@pytest.mark.parametrize("bad", ["ref", "", "ALL", ["reference", "gpu"], [], 3, None])
def test_bad_kernels_are_refused(bad):
    with pytest.raises(InvalidArgumentError, match="kernels"):
        check_model(_single("add-abort"), kernels=bad)


def test_the_divergence_table_renders():
    md = optable.resolvers_markdown()
    for v in optable.RESOLVER_VERDICTS:
        assert f"`{v.rule}`" in md


# --- the zoo ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch, quant", Z.CASES)
def test_zoo_check_equals_run_for_each_resolver(arch, quant):
    model = Z._model(arch, quant).read_bytes()
    for r in RESOLVERS:
        outcome = litert_outcome(model, r)
        report = check_model(model, kernels=r)
        assert outcome_of(report, r) == outcome, f"{arch} {quant} with {r}: LiteRT {outcome}\n{report.render()}"
        try:
            Interpreter(model, kernels=r)
            refuses = False
        except QuantSpecError:
            refuses = True
        assert refuses == bool(report.rejected_by_litert), (arch, quant, r)
