"""The interpreter's frame, independent of the kernels: how it prepares operators (the TensorSpecs
and options a kernel sees), orders and feeds them, and how it reports bad models and bad inputs.
Kernels here are stand-ins registered for the test; the byte-exact runs against LiteRT are in
test_litert_interpreter.py.  The last tests run damaged bundled models with the real kernels: the
interpreter refuses a model, or stops before an operator, whose tensors or working arrays would pass
the machine's memory."""

from __future__ import annotations

import numpy as np
import pytest

from litert_build import T, build
from litert_models import edit, example_bytes
from quantspec.errors import DTypeError, InvalidArgumentError, ModelError, ShapeError, UnsupportedError
from quantspec.litert import Interpreter, load_model
from quantspec.litert.kernels import base


class Recording(base.Kernel):
    """Adds its two int8 inputs with wrap-around; records what prepare saw."""

    name = "ADD"

    def __init__(self):
        self.seen = []

    def prepare(self, inputs, outputs, options):
        self.seen.append((inputs, outputs, dict(options)))
        return ("prepared", outputs[0].shape)

    def compute(self, prepared, arrays):
        assert prepared[0] == "prepared"
        return [(arrays[0].astype(np.int16) + arrays[1]).astype(np.int8)]


@pytest.fixture
def add_kernel(monkeypatch):
    k = Recording()
    monkeypatch.setitem(base.REGISTRY, "ADD", k)
    return k


def two_adds() -> bytes:
    """y = (a + b) + c, with c a constant: two ADD operators."""
    S = __import__("litert_models").schema()
    m = build("ADD", [T((1, 4), "int8", 0.5, 1, name="a"), T((1, 4), "int8", 0.25, -2, name="b")],
              [T((1, 4), "int8", 0.75, 0, name="ab")], {"fused_activation_function": "RELU"})

    def change(obj):
        sg = obj.subgraphs[0]
        c = S.TensorT()
        c.shape, c.type, c.name, c.buffer = [1, 4], S.TensorType.INT8, b"c", len(obj.buffers)
        q = S.QuantizationParametersT()
        q.scale, q.zeroPoint = [0.5], [0]
        c.quantization = q
        buf = S.BufferT()
        buf.data = np.array([1, 2, 3, 4], np.int8).view(np.uint8)
        obj.buffers.append(buf)
        y = S.TensorT()
        y.shape, y.type, y.name, y.buffer = [1, 4], S.TensorType.INT8, b"y", 0
        y.quantization = q
        sg.tensors += [c, y]
        op = S.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = 0, [2, 3], [4]
        sg.operators.append(op)
        sg.outputs = [4]

    return edit(m, change)


def test_prepare_sees_specs_and_options(add_kernel):
    it = Interpreter(two_adds())
    (ins0, outs0, opts0), (ins1, outs1, opts1) = add_kernel.seen
    assert [s.name for s in ins0] == ["a", "b"] and outs0[0].name == "ab"
    assert ins0[0].shape == (1, 4) and ins0[0].dtype.name == "int8"
    assert float(ins0[1].params.scale[0]) == 0.25 and int(ins0[1].params.zero_point[0]) == -2
    assert ins0[0].data is None and not ins0[0].is_constant
    assert ins1[1].is_constant and ins1[1].data.tolist() == [[1, 2, 3, 4]]
    assert opts0["fused_activation_function"] == "RELU"
    assert opts1 == {}  # the second operator has no options table: defaults
    assert [t.name for t in it.inputs] == ["a", "b"] and [t.name for t in it.outputs] == ["y"]
    assert "2 operators" in repr(it)


def test_run_orders_and_feeds(add_kernel):
    it = Interpreter(two_adds())
    a = np.array([[1, 2, 3, 127]], np.int8)
    b = np.array([[10, 20, 30, 1]], np.int8)
    expected = (a.astype(np.int16) + b + np.array([1, 2, 3, 4])).astype(np.int8)
    for inputs in ([a, b], (a, b), {"a": a, "b": b}, {"b": b, "a": a}):
        (y,) = it.run(inputs)
        assert y.tobytes() == expected.tobytes()
    (y2,) = it.run([a, b])
    y2[0, 0] = 99  # outputs are fresh arrays
    assert it.run([a, b])[0].tobytes() == expected.tobytes()


def test_bad_inputs(add_kernel):
    it = Interpreter(two_adds())
    a = np.zeros((1, 4), np.int8)
    with pytest.raises(InvalidArgumentError, match="must hold 2 arrays"):
        it.run([a])
    with pytest.raises(InvalidArgumentError, match="must hold 2 arrays"):
        it.run(a)
    with pytest.raises(InvalidArgumentError, match="lacks an input"):
        it.run({"a": a})
    with pytest.raises(InvalidArgumentError, match="names no input"):
        it.run({"a": a, "zz": a})
    with pytest.raises(DTypeError, match=r"inputs\[1\] \('b'\): must have dtype int8"):
        it.run([a, a.astype(np.float32)])
    with pytest.raises(ShapeError, match=r"must have shape \[1, 4\]"):
        it.run([a, np.zeros((4,), np.int8)])
    with pytest.raises(DTypeError, match="numpy array"):
        it.run([a, [[0, 0, 0, 0]]])
    with pytest.raises(InvalidArgumentError, match="must be a list"):
        it.run(5)


def test_unsupported_operator(monkeypatch):
    monkeypatch.delitem(base.REGISTRY, "ADD", raising=False)
    with pytest.raises(UnsupportedError, match=r"no kernel for \(got \['ADD'\]\)"):
        Interpreter(two_adds())


def test_sum_semantics_option_is_validated(add_kernel):
    with pytest.raises(InvalidArgumentError, match="sum_semantics"):
        Interpreter(two_adds(), sum_semantics="uint8")


def test_prepare_errors_name_the_operator(monkeypatch):
    class Refusing(Recording):
        def prepare(self, inputs, outputs, options):
            raise UnsupportedError("input 1", "must be int8", "float32")

    monkeypatch.setitem(base.REGISTRY, "ADD", Refusing())
    with pytest.raises(UnsupportedError, match=r"operator 0 \(ADD\): input 1: must be int8"):
        Interpreter(two_adds())


def test_operators_out_of_order(add_kernel):
    def swap(obj):
        ops = obj.subgraphs[0].operators
        ops[0], ops[1] = ops[1], ops[0]

    with pytest.raises(ModelError, match="earlier operator"):
        Interpreter(edit(two_adds(), swap))


def test_variable_tensor_is_unsupported(add_kernel):
    def variable(obj):
        obj.subgraphs[0].tensors[2].isVariable = True

    with pytest.raises(UnsupportedError, match="variable"):
        Interpreter(edit(two_adds(), variable))


def test_quantization_litert_refuses(add_kernel):
    def bad(obj):
        obj.subgraphs[0].tensors[0].quantization.zeroPoint = [1, 2]

    with pytest.raises(ModelError, match="check_model"):
        Interpreter(edit(two_adds(), bad))


def test_a_model_whose_tensors_together_exceed_memory_is_refused_at_load(monkeypatch):
    """A damaged model can declare tensors that each fit in memory but not together (the .tflite
    fuzzer at 20000 examples met 0.3-1,700 GB in all, which filled the machine): the Interpreter
    refuses it when made, naming the bytes, instead of a run the system kills.  The bundled model's
    own tensors pass; with the limit set just below their sum (72 bytes), the same model is refused."""
    from quantspec._semantics import arrays
    from quantspec.litert import Interpreter

    data = example_bytes("mlp_softmax")
    model = load_model(data)
    sg = model.subgraphs[0]
    total = sum(int(np.prod(t.shape)) * t.dtype.dtype.itemsize for t in sg.tensors
                if t.data is None and t.dtype is not None)
    Interpreter(data)                                     # fits
    monkeypatch.setattr(arrays, "_MEMORY_LIMIT", [total - 1])
    with pytest.raises(ModelError, match=f"declares tensors of {total} bytes"):
        Interpreter(data)

    def huge(obj):        # every activation 2^31 - 1 rows
        sub = obj.subgraphs[0]
        for t in sub.tensors:
            if obj.buffers[t.buffer].data is None and list(t.shape) and t.shape[0] == 1:
                t.shape = [(1 << 31) - 1] + list(t.shape[1:])
    monkeypatch.setattr(arrays, "_MEMORY_LIMIT", [])
    grown = edit(data, huge)
    with pytest.raises(ModelError, match="more than this machine's memory"):
        Interpreter(grown)


def test_an_operator_whose_run_time_inputs_outgrow_memory_is_refused_before_it_runs(monkeypatch):
    """A damaged model whose run-time data grow a tensor far past its declared shape (the bundled
    mixed.tflite with RESIZE_BILINEAR's size constant set to 9 x 4194313: the 20000-example .tflite
    fuzzer met it, and the reference kernels' int64 working arrays took 10 GB, then the machine's
    out-of-memory killer ended the fuzzer): the next operator is refused with a ModelError naming the
    working memory, before it runs, where that passes the machine's memory (here set to 2 GiB)."""
    from litert_models import random_inputs

    from quantspec._semantics import arrays
    from quantspec.litert import Interpreter

    def grow(obj):
        sub = obj.subgraphs[0]
        t = next(t for t in sub.tensors if t.name.decode() == "ResizeBilinear/size")
        obj.buffers[t.buffer].data = list(np.array([9, 4194313], "<i4").view(np.uint8))
    model = load_model(edit(example_bytes("mixed"), grow))
    monkeypatch.setattr(arrays, "_MEMORY_LIMIT", [2 << 30])
    with pytest.raises(ModelError, match=r"operator 1 \(PAD\): needs about .* of working memory"):
        Interpreter(model).run(random_inputs(model, 0))
    monkeypatch.setattr(arrays, "_MEMORY_LIMIT", [])
    out = Interpreter(load_model(example_bytes("mixed"))).run(random_inputs(load_model(example_bytes("mixed")), 0))
    assert out[0].shape == (1, 8, 12, 12)


def test_a_run_whose_grown_tensors_fill_half_the_memory_is_stopped(monkeypatch):
    """PAD's paddings constant of a damaged model set to 1000 on both spatial axes: the padded tensor
    (1 x 2012 x 2012 x 4 int8, 16 MB) fits a machine of 20 MB, but it leaves the run holding more than
    half of it, with the next operators still to run: the run stops there with a ModelError naming
    the bytes, before the next operator's working arrays (a chain of such operators filled the
    machine in the 20000-example .tflite run)."""
    from litert_models import random_inputs

    from quantspec._semantics import arrays
    from quantspec.litert import Interpreter

    def pad(obj):
        sub = obj.subgraphs[0]
        t = next(t for t in sub.tensors if t.name.decode() == "Pad/paddings")
        obj.buffers[t.buffer].data = list(np.array([0, 0, 1000, 1000, 1000, 1000, 0, 0], "<i4").view(np.uint8))
    model = load_model(edit(example_bytes("mixed"), pad))
    monkeypatch.setattr(arrays, "_MEMORY_LIMIT", [20 << 20])
    with pytest.raises(ModelError, match=r"operator 1 \(PAD\): leaves this run holding"):
        Interpreter(model).run(random_inputs(model, 0))
