"""quantspec.litert.Interpreter against the LiteRT interpreter with its reference kernels
(``BUILTIN_REF``), byte for byte.

- Acceptance 1 of issue 5: every converter-made example model (MLP ending in softmax; CNN with conv,
  depthwise conv, pooling, add and mean, float in/out; resize, pad, tanh, logistic, concatenation,
  transpose) on random inputs, and check_model calls each conformant.
- Single-op models of every op of the spec's list, with the options real models use: this runs the
  whole path — the loader's options mapping, the TensorSpecs, each kernel's prepare and compute.
- The same model with its constant buffers outside the flatbuffer.

An op whose kernel has not been merged yet is skipped with that reason (the kernels arrive on their
own branches, issue 4).
"""

from __future__ import annotations

import numpy as np
import pytest

from litert_build import T, build, build_graph, run_ref
from litert_models import EXAMPLES, example_bytes, externalize_buffers, random_inputs
from quantspec.litert import OPS, Interpreter, check_model, load_model


def require_kernels(model) -> None:
    missing = sorted({op.name for op in model.operators if op.name not in OPS})
    assert not missing, f"no quantspec kernel for {', '.join(missing)}"


def assert_same_as_ref(model_bytes: bytes, inputs: list[np.ndarray], **kwargs) -> list[np.ndarray]:
    ours = Interpreter(model_bytes, **kwargs).run(inputs)
    theirs = run_ref(model_bytes, inputs)
    assert not check_model(model_bytes, kernels="reference").rejected_by_litert      # check == run: BUILTIN_REF ran it
    assert len(ours) == len(theirs)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert a.dtype == b.dtype and a.shape == b.shape, k
        if a.tobytes() != b.tobytes():
            bad = np.argwhere(a != b)
            raise AssertionError(f"output {k}: {len(bad)} of {a.size} values differ, first at {tuple(bad[0])}: "
                                 f"quantspec {a[tuple(bad[0])]}, LiteRT {b[tuple(bad[0])]}")
    return ours


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_models_are_byte_identical_to_builtin_ref(name):
    data = example_bytes(name)
    model = load_model(data)
    assert check_model(model).ok
    require_kernels(model)
    interp = Interpreter(model)
    cases = {f"seed {seed}": random_inputs(model, seed) for seed in range(4)}
    for label, fill in (("minimum", -np.inf), ("maximum", np.inf), ("zero", 0.0)):
        cases[label] = [np.full(t.shape, fill if t.dtype.kind == "float" else np.clip(fill, -128, 127), t.dtype.dtype)
                        for t in interp.inputs]
    if interp.inputs[0].dtype.kind == "float":   # beyond the input's quantization range, and NaN
        rng = np.random.default_rng(99)
        cases["wide"] = [rng.uniform(-50, 50, t.shape).astype(np.float32) for t in interp.inputs]
        cases["nan"] = [np.full(t.shape, np.nan, np.float32) for t in interp.inputs]
    for label, inputs in cases.items():
        ours = interp.run(inputs)
        theirs = run_ref(data, inputs)
        for a, b in zip(ours, theirs):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert a.tobytes() == b.tobytes(), f"{label}: {np.count_nonzero(a != b)} values differ"


def test_external_buffers_run_the_same():
    data = example_bytes("mlp_softmax")
    model = load_model(data)
    require_kernels(model)
    ext = externalize_buffers(data)
    inputs = random_inputs(model, 9)
    a = Interpreter(ext).run(inputs)
    b = Interpreter(data).run(inputs)
    assert all(x.tobytes() == y.tobytes() for x, y in zip(a, b))
    assert_same_as_ref(ext, inputs)


def test_float_edges_accept_float_inputs_only():
    from quantspec.errors import DTypeError

    model = load_model(EXAMPLES["cnn"])
    require_kernels(model)
    interp = Interpreter(model)
    (t,) = interp.inputs
    assert t.type_name == "FLOAT32" and interp.outputs[0].type_name == "FLOAT32"
    with pytest.raises(DTypeError):
        interp.run([np.zeros(t.shape, np.int8)])


# --- single-op models ---------------------------------------------------------------------------------
R = np.random.default_rng(2024)


def w8(shape):
    return R.integers(-127, 128, shape, dtype=np.int8)


def i32(values):
    return np.array(values, np.int32)


def conv_bias(s_in, s_w, n):
    scales = (np.float64(np.float32(s_in)) * np.asarray(s_w, np.float32).astype(np.float64)).astype(np.float32)
    return T((n,), "int32", scales, 0, 0, R.integers(-3000, 3000, n).astype(np.int32))


def same(shape, s=0.05, z=-3, name=""):
    return T(shape, "int8", s, z, name=name)


SINGLE = [
    ("ADD-broadcast-relu", "ADD", [T((2, 3, 4), "int8", 0.05, -3), T((1, 3, 4), "int8", 0.02, 7)],
     [T((2, 3, 4), "int8", 0.06, -10)], {"fused_activation_function": "RELU"}),
    ("SUB", "SUB", [T((2, 5), "int8", 0.05, -3), T((2, 5), "int8", 0.04, 2)], [T((2, 5), "int8", 0.08, 1)], {}),
    ("MUL-relu6", "MUL", [T((1, 2, 6), "int8", 0.05, -3), T((1, 1, 6), "int8", 0.1, 0)],
     [T((1, 2, 6), "int8", 0.03, -20)], {"fused_activation_function": "RELU6"}),
    ("AVERAGE_POOL_2D-same", "AVERAGE_POOL_2D", [same((1, 7, 7, 3))], [same((1, 4, 4, 3))],
     {"padding": "SAME", "stride_w": 2, "stride_h": 2, "filter_width": 3, "filter_height": 3}),
    ("MAX_POOL_2D-valid", "MAX_POOL_2D", [same((1, 6, 5, 2))], [same((1, 3, 2, 2))],
     {"padding": "VALID", "stride_w": 2, "stride_h": 2, "filter_width": 2, "filter_height": 2}),
    ("CONCATENATION", "CONCATENATION", [same((1, 2, 3)), same((1, 4, 3))], [same((1, 6, 3))], {"axis": 1}),
    ("CONV_2D-valid-strided-relu6", "CONV_2D",
     [T((1, 7, 7, 2), "int8", 0.05, 3), T((4, 3, 3, 2), "int8", [0.01, 0.02, 0.015, 0.03], 0, 0, w8((4, 3, 3, 2))),
      conv_bias(0.05, [0.01, 0.02, 0.015, 0.03], 4)],
     [T((1, 3, 2, 4), "int8", 0.1, -5)],
     {"padding": "VALID", "stride_w": 3, "stride_h": 2, "fused_activation_function": "RELU6"}),
    ("CONV_2D-same-dilated", "CONV_2D",
     [T((1, 6, 6, 3), "int8", 0.04, -1), T((2, 3, 3, 3), "int8", 0.02, 0, 0, w8((2, 3, 3, 3))),
      conv_bias(0.04, [0.02, 0.02], 2)],
     [T((1, 6, 6, 2), "int8", 0.2, 4)],
     {"padding": "SAME", "stride_w": 1, "stride_h": 1, "dilation_w_factor": 2, "dilation_h_factor": 2}),
    ("DEPTHWISE_CONV_2D-multiplier", "DEPTHWISE_CONV_2D",
     [T((1, 5, 5, 2), "int8", 0.05, 0), T((1, 3, 3, 4), "int8", [0.01, 0.02, 0.03, 0.04], 0, 3, w8((1, 3, 3, 4))),
      conv_bias(0.05, [0.01, 0.02, 0.03, 0.04], 4)],
     [T((1, 5, 5, 4), "int8", 0.1, 1)],
     {"padding": "SAME", "stride_w": 1, "stride_h": 1, "depth_multiplier": 2, "fused_activation_function": "RELU"}),
    ("FULLY_CONNECTED-keep-dims", "FULLY_CONNECTED",
     [T((2, 3, 4), "int8", 0.05, 0), T((5, 4), "int8", 0.02, 0, 0, w8((5, 4))), conv_bias(0.05, [0.02], 5)],
     [T((2, 3, 5), "int8", 0.07, 2)], {"keep_num_dims": True}),
    ("FULLY_CONNECTED-per-axis", "FULLY_CONNECTED",
     [T((3, 4), "int8", 0.05, 4), T((2, 4), "int8", [0.02, 0.01], 0, 0, w8((2, 4))), conv_bias(0.05, [0.02, 0.01], 2)],
     [T((3, 2), "int8", 0.03, -1)], {"fused_activation_function": "RELU"}),
    ("L2_NORMALIZATION", "L2_NORMALIZATION", [T((2, 6), "int8", 0.05, 3)], [T((2, 6), "int8", 1 / 128, 0)], {}),
    ("LOGISTIC", "LOGISTIC", [T((3, 5), "int8", 0.08, -4)], [T((3, 5), "int8", 1 / 256, -128)], None),
    ("TANH", "TANH", [T((3, 5), "int8", 0.03, 2)], [T((3, 5), "int8", 1 / 128, 0)], None),
    ("SOFTMAX-beta", "SOFTMAX", [T((2, 7), "int8", 0.1, 0)], [T((2, 7), "int8", 1 / 256, -128)], {"beta": 0.75}),
    ("LOG_SOFTMAX", "LOG_SOFTMAX", [T((2, 7), "int8", 0.1, 0)], [T((2, 7), "int8", 16 / 256, 127)], {}),
    ("RESHAPE", "RESHAPE", [same((2, 6)), T((2,), "int32", data=i32([3, 4]))], [same((3, 4))], {"new_shape": [3, 4]}),
    ("SQUEEZE", "SQUEEZE", [same((1, 4, 1))], [same((4,))], {"squeeze_dims": [0, 2]}),
    ("TRANSPOSE", "TRANSPOSE", [same((2, 3, 4)), T((3,), "int32", data=i32([2, 0, 1]))], [same((4, 2, 3))], {}),
    ("GATHER-axis1", "GATHER", [same((3, 4)), T((2,), "int32", data=i32([3, 0]))], [same((3, 2))], {"axis": 1}),
    ("SLICE", "SLICE", [same((3, 4)), T((2,), "int32", data=i32([1, 1])), T((2,), "int32", data=i32([2, 2]))],
     [same((2, 2))], {}),
    ("SPACE_TO_DEPTH", "SPACE_TO_DEPTH", [same((1, 4, 4, 2))], [same((1, 2, 2, 8))], {"block_size": 2}),
    ("BATCH_TO_SPACE_ND", "BATCH_TO_SPACE_ND", [same((4, 2, 2, 1)), T((2,), "int32", data=i32([2, 2])),
                                                T((2, 2), "int32", data=np.zeros((2, 2), np.int32))],
     [same((1, 4, 4, 1))], {}),
    ("SPACE_TO_BATCH_ND", "SPACE_TO_BATCH_ND", [same((1, 4, 4, 1)), T((2,), "int32", data=i32([2, 2])),
                                                T((2, 2), "int32", data=np.zeros((2, 2), np.int32))],
     [same((4, 2, 2, 1))], {}),
    ("PAD", "PAD", [same((1, 3, 2)), T((3, 2), "int32", data=i32([[0, 0], [1, 2], [0, 1]]))], [same((1, 6, 3))], {}),
    ("PADV2", "PADV2", [same((2, 3)), T((2, 2), "int32", data=i32([[1, 0], [0, 2]])),
                        T((), "int8", 0.05, -3, data=np.array(9, np.int8))], [same((3, 5))], {}),
    ("RESIZE_BILINEAR-align", "RESIZE_BILINEAR", [same((1, 3, 3, 2)), T((2,), "int32", data=i32([5, 4]))],
     [same((1, 5, 4, 2))], {"align_corners": True}),
    ("RESIZE_BILINEAR-half", "RESIZE_BILINEAR", [same((1, 3, 3, 2)), T((2,), "int32", data=i32([7, 6]))],
     [same((1, 7, 6, 2))], {"half_pixel_centers": True}),
    ("MEAN-keep-dims", "MEAN", [T((1, 4, 4, 3), "int8", 0.05, -3), T((2,), "int32", data=i32([1, 2]))],
     [T((1, 1, 1, 3), "int8", 0.04, 1)], {"keep_dims": True}),
    ("MEAN", "MEAN", [T((2, 5, 3), "int8", 0.05, -3), T((1,), "int32", data=i32([1]))],
     [T((2, 3), "int8", 0.05, -3)], {"keep_dims": False}),
    ("MAXIMUM", "MAXIMUM", [same((2, 4)), same((2, 4))], [same((2, 4))], {}),
    ("MINIMUM-broadcast", "MINIMUM", [same((2, 4)), same((1, 4))], [same((2, 4))], {}),
    ("ARG_MAX", "ARG_MAX", [same((3, 6)), T((1,), "int32", data=i32([1]))], [T((3,), "int64")],
     {"output_type": "INT64"}),
    ("LESS", "LESS", [T((2, 4), "int8", 0.05, 1), T((2, 4), "int8", 0.07, -2)], [T((2, 4), "bool")], {}),
    ("GREATER_EQUAL", "GREATER_EQUAL", [T((2, 4), "int8", 0.05, 1), T((1, 4), "int8", 0.07, -2)],
     [T((2, 4), "bool")], {}),
    ("EQUAL", "EQUAL", [same((6,)), same((6,))], [T((6,), "bool")], {}),
    ("NOT_EQUAL", "NOT_EQUAL", [same((6,)), same((6,))], [T((6,), "bool")], {}),
    ("GREATER", "GREATER", [same((6,)), same((6,))], [T((6,), "bool")], {}),
    ("LESS_EQUAL", "LESS_EQUAL", [same((6,)), same((6,))], [T((6,), "bool")], {}),
    ("SHAPE", "SHAPE", [same((2, 3, 4))], [T((3,), "int32")], {"out_type": "INT32"}),
    ("QUANTIZE-requantize", "QUANTIZE", [T((3, 4), "int8", 0.05, -3)], [T((3, 4), "int8", 0.08, 5)], None),
    ("QUANTIZE-float", "QUANTIZE", [T((3, 4), "float")], [T((3, 4), "int8", 0.05, -3)], None),
    ("DEQUANTIZE", "DEQUANTIZE", [T((3, 4), "int8", 0.05, -3)], [T((3, 4), "float")], None),
]


def inputs_for(ins) -> list[np.ndarray]:
    out = []
    for t in ins:
        if t is None or t.data is not None:
            continue
        if t.dtype == "float":
            out.append(R.uniform(-8, 8, t.shape).astype(np.float32))
        else:
            out.append(R.integers(-128, 128, t.shape, dtype=np.int8))
    return out


@pytest.mark.parametrize("case,op,ins,outs,options", SINGLE, ids=[c[0] for c in SINGLE])
def test_single_op_models_through_the_interpreter(case, op, ins, outs, options):
    data = build(op, ins, outs, options)
    model = load_model(data)
    require_kernels(model)
    for _ in range(2):
        assert_same_as_ref(data, inputs_for(ins))


def test_sum_semantics():
    ins = [T((2, 6), "int8", 0.05, -3), T((1,), "int32", data=i32([1]))]
    data = build("SUM", ins, [T((2,), "int8", 0.3, 2)], {"keep_dims": False})
    require_kernels(load_model(data))
    x = inputs_for(ins)
    assert_same_as_ref(data, x, sum_semantics="reference")
    correct = Interpreter(data).run(x)[0]
    reference = Interpreter(data, sum_semantics="reference").run(x)[0]
    assert correct.shape == reference.shape


# -- shapes and types LiteRT computes itself ----------------------------------------------------
def _both(model: bytes, inputs: list) -> None:
    """quantspec's interpreter gives LiteRT's outputs: shapes, types and bytes."""
    want = run_ref(model, inputs)
    got = Interpreter(model).run(inputs)
    assert [(g.shape, g.dtype) for g in got] == [(w.shape, w.dtype) for w in want]
    assert all(g.tobytes() == w.tobytes() for g, w in zip(got, want))


def test_a_shape_from_a_run_time_tensor_prepares_the_readers_again():
    """RESHAPE's shape is a model input: its output takes the shape the run gives, and SOFTMAX and
    MEAN, which read it, are prepared for that shape (LiteRT's dynamic tensors).  The stored shape
    (3, 4) is what the model says, not what LiteRT computes."""
    tensors = [T((2, 6), "int8", 0.05, 3), T((2,), "int32"), T((3, 4), "int8", 0.05, 3),
               T((3, 4), "int8", 1 / 256, -128), T((1,), "int32", data=np.array([1], np.int32)),
               T((3, 1), "int8", 0.05, 3)]
    model = build_graph(tensors, [("RESHAPE", [0, 1], [2], None), ("SOFTMAX", [2], [3], {"beta": 1.0}),
                                  ("MEAN", [2, 4], [5], {"keep_dims": True})], [0, 1], [3, 5])
    x = np.random.default_rng(0).integers(-128, 128, (2, 6)).astype(np.int8)
    it = Interpreter(model)
    for shape in ([4, 3], [3, 4], [12, 1], [-1, 2], [1, 12], [4, 3]):
        inputs = [x, np.array(shape, np.int32)]
        want = run_ref(model, inputs)
        got = it.run(inputs)
        assert [(g.shape, g.dtype) for g in got] == [(w.shape, w.dtype) for w in want], shape
        assert all(g.tobytes() == w.tobytes() for g, w in zip(got, want)), shape


def test_paddings_from_a_run_time_tensor():
    tensors = [T((1, 3, 2), "int8", 0.1, -5), T((3, 2), "int32"), T((1, 3, 2), "int8", 0.1, -5),
               T((1, 3, 2), "int8", 1 / 256, -128)]
    model = build_graph(tensors, [("PAD", [0, 1], [2], None), ("SOFTMAX", [2], [3], {"beta": 0.5})], [0, 1], [3])
    x = np.random.default_rng(1).integers(-128, 128, (1, 3, 2)).astype(np.int8)
    for pads in ([[0, 0], [0, 0], [0, 0]], [[0, 1], [2, 0], [1, 3]], [[1, 0], [0, 0], [0, 2]]):
        _both(model, [x, np.array(pads, np.int32)])


def test_a_wrong_stored_output_shape_takes_the_computed_one():
    """LiteRT's ADD computes its output's shape when it prepares the op; a model storing (5, 2) for
    inputs of (2, 5) gives (2, 5)."""
    model = build("ADD", [T((2, 5), "int8", 0.1, 0), T((2, 5), "int8", 0.2, 1)], [T((5, 2), "int8", 0.3, -2)])
    rng = np.random.default_rng(2)
    _both(model, [rng.integers(-128, 128, (2, 5)).astype(np.int8) for _ in range(2)])


def test_an_output_type_from_the_options_takes_over_the_stored_type():
    """ARG_MAX's output_type (int32) is what LiteRT gives, whatever type the model stores (int64)."""
    model = build("ARG_MAX", [T((3, 6), "int8", 0.1, 0), T((1,), "int32", data=np.array([1], np.int32))],
                  [T((3,), "int64")], {"output_type": "INT32"})
    _both(model, [np.random.default_rng(3).integers(-128, 128, (3, 6)).astype(np.int8)])


def test_a_model_asking_for_impossible_tensors_is_a_clear_error():
    """A RESIZE_BILINEAR size of 2^30 x 2^30 or PAD paddings of 2^31 - 1 (a damaged or hostile model)
    would ask for an exabyte (and index tables of gigabytes): a quantspec error naming the operator,
    raised before anything is allocated (not a MemoryError, nor a process killed for memory)."""
    from quantspec.errors import ShapeError

    size = T((2,), "int32", data=np.array([1 << 30, 1 << 30], np.int32))
    model = build("RESIZE_BILINEAR", [T((1, 2, 2, 1), "int8", 0.1, 0), size], [T((1, 4, 4, 1), "int8", 0.1, 0)])
    with pytest.raises(ShapeError, match=r"operator 0 \(RESIZE_BILINEAR\): size: makes the output"):
        Interpreter(model)
    pads = T((2, 2), "int32", data=np.array([[0, (1 << 31) - 1], [0, (1 << 31) - 1]], np.int32))
    model = build("PAD", [T((2, 3), "int8", 0.1, 0), pads], [T((2, 3), "int8", 0.1, 0)])
    with pytest.raises(ShapeError, match=r"operator 0 \(PAD\): paddings: makes the output"):
        Interpreter(model).run([np.zeros((2, 3), np.int8)])
