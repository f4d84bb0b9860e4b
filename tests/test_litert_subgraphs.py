"""Subgraphs and signatures: converter-made int8 models with IF (tf.cond), WHILE (tf.while_loop),
CALL_ONCE with resource variables (a tf.Variable the function updates) and two signatures, run by
quantspec.litert.Interpreter and by LiteRT BUILTIN_REF on the same inputs, byte for byte.

The models are made by TensorFlow's converter here (a few seconds), with full-integer
quantization; the converter keeps the control-flow scaffolding unquantized (dequantized values,
int32 loop counters) and quantizes the arithmetic.
"""

from __future__ import annotations

import numpy as np
import pytest

from refs import require
from quantspec.errors import InvalidArgumentError, ModelError
from quantspec.litert import Interpreter, check_model, load_model

RUNS = 6


def _convert(tf, fns, module, rep):
    c = tf.lite.TFLiteConverter.from_concrete_functions(fns, module)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = rep
    c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    c.inference_input_type = tf.int8
    c.inference_output_type = tf.int8
    c.experimental_enable_resource_variables = True
    return bytes(c.convert())


@pytest.fixture(scope="module")
def models():
    tf = require("tensorflow")
    rng = np.random.default_rng(7)
    w = rng.standard_normal((8, 8)).astype(np.float32) * 0.4
    w2 = rng.standard_normal((8, 4)).astype(np.float32) * 0.4
    spec8 = tf.TensorSpec([1, 8], tf.float32, name="x")

    class Branches(tf.Module):
        @tf.function(input_signature=[spec8, tf.TensorSpec([1, 8], tf.float32, name="y")])
        def f(self, x, y):
            return tf.cond(tf.reduce_sum(y) > 0, lambda: tf.nn.relu(tf.matmul(x, w)), lambda: tf.tanh(tf.matmul(x, w)))

    class Loop(tf.Module):
        @tf.function(input_signature=[spec8])
        def f(self, x):
            def body(i, v):
                return i + 1, tf.tanh(tf.matmul(v, w) + 0.1)
            return tf.while_loop(lambda i, v: i < 3, body, [tf.constant(0), x])[1]

    class State(tf.Module):
        def __init__(self):
            self.v = tf.Variable(tf.zeros([1, 8]))

        @tf.function(input_signature=[spec8])
        def f(self, x):
            self.v.assign(self.v * 0.5 + tf.matmul(x, w))
            return tf.tanh(self.v)

    class Two(tf.Module):
        @tf.function(input_signature=[spec8])
        def encode(self, x):
            return {"code": tf.nn.relu(tf.matmul(x, w))}

        @tf.function(input_signature=[spec8, tf.TensorSpec([1, 4], tf.float32, name="z")])
        def classify(self, x, z):
            return {"probs": tf.nn.softmax(tf.matmul(x, w2) + z), "gate": tf.tanh(z)}

    def one(n=1):
        def rep():
            for _ in range(40):
                yield [rng.uniform(-1, 1, (1, 8)).astype(np.float32) for _ in range(n)]
        return rep

    def two_signatures():
        for _ in range(40):
            yield ("encode", {"x": rng.uniform(-1, 1, (1, 8)).astype(np.float32)})
            yield ("classify", {"x": rng.uniform(-1, 1, (1, 8)).astype(np.float32),
                                "z": rng.uniform(-1, 1, (1, 4)).astype(np.float32)})

    b, lp, st, two = Branches(), Loop(), State(), Two()
    return {
        "if": _convert(tf, [b.f.get_concrete_function()], b, one(2)),
        "while": _convert(tf, [lp.f.get_concrete_function()], lp, one()),
        "call_once": _convert(tf, [st.f.get_concrete_function()], st, one()),
        "signatures": _convert(tf, [two.encode.get_concrete_function(), two.classify.get_concrete_function()], two,
                               two_signatures),
    }


def _litert(model: bytes, signature: str | None = None):
    interp = require("ai_edge_litert.interpreter")
    it = interp.Interpreter(model_content=model, experimental_op_resolver_type=interp.OpResolverType.BUILTIN_REF)
    if signature is not None:
        return it.get_signature_runner(signature)
    it.allocate_tensors()

    def run(inputs):
        for d, x in zip(it.get_input_details(), inputs):
            it.set_tensor(d["index"], x)
        it.invoke()
        return [it.get_tensor(d["index"]) for d in it.get_output_details()]
    return run


def _inputs(interp: Interpreter, rng):
    return [rng.integers(-128, 128, t.shape).astype(np.int8) for t in interp.inputs]


@pytest.mark.parametrize("name, ops", [("if", {"IF"}), ("while", {"WHILE"}),
                                       ("call_once", {"CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"})])
def test_control_flow_models_match_litert(models, name, ops):
    data = models[name]
    m = load_model(data)
    assert ops <= {op.name for sg in m.subgraphs for op in sg.operators}
    assert len(m.subgraphs) > 1
    assert not check_model(data).rejected_by_litert            # check == run: LiteRT runs it
    # the IF model's condition sums int8 values: BUILTIN_REF's SUM reads them as uint8
    ours = Interpreter(data, sum_semantics="reference")
    theirs = _litert(data)
    rng = np.random.default_rng(3)
    for run in range(RUNS):          # CALL_ONCE: the variable carries over from run to run
        inputs = _inputs(ours, rng)
        if name == "if":
            inputs[0] = np.where(rng.random(8) < (0.2 if run % 2 else 0.8), 100, -100).astype(np.int8)[None]
        for a, b in zip(ours.run(inputs), theirs(inputs)):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert a.tobytes() == b.tobytes(), f"{name}, run {run}"


def test_if_takes_both_branches(models):
    data = models["if"]
    ours = Interpreter(data, sum_semantics="reference", preserve_all_tensors=True)
    theirs = _litert(data)
    cond = next(op for op in ours.subgraph.operators if op.name == "IF").inputs[0]
    seen = set()
    x = np.full((1, 8), 50, np.int8)
    y_first = ours.inputs[0].name.endswith("y:0")
    for y in range(-128, 128, 5):
        inputs = [np.full((1, 8), y, np.int8), x] if y_first else [x, np.full((1, 8), y, np.int8)]
        got = ours.run(inputs)
        assert got[0].tobytes() == theirs(inputs)[0].tobytes(), y
        seen.add(bool(ours.get_tensor(cond)))
    assert seen == {True, False}


def test_call_once_state_persists_and_is_per_interpreter(models):
    data = models["call_once"]
    x = [np.full((1, 8), 40, np.int8)]
    a = Interpreter(data)
    first, second = a.run(x)[0], a.run(x)[0]
    assert first.tobytes() != second.tobytes()            # the variable moved
    b = Interpreter(data)
    assert b.run(x)[0].tobytes() == first.tobytes()      # a fresh interpreter starts again


def test_signatures_run_their_own_subgraph(models):
    data = models["signatures"]
    m = load_model(data)
    assert {s.key for s in m.signature_defs} == {"encode", "classify"}
    rng = np.random.default_rng(5)
    for s in m.signature_defs:
        ours = Interpreter(data, signature=s.key)
        assert ours.subgraph.index == s.subgraph_index
        assert sorted(ours.output_names) == sorted(s.outputs)
        runner = _litert(data, s.key)
        for _ in range(RUNS):
            feeds = {name: rng.integers(-128, 128, ours.subgraph.tensors[i].shape).astype(np.int8)
                     for name, i in s.inputs.items()}
            got = dict(zip(ours.output_names, ours.run(feeds)))
            want = runner(**feeds)
            assert set(got) == set(want)
            for k in want:
                assert got[k].tobytes() == want[k].tobytes(), (s.key, k)


def test_unknown_signature_is_refused(models):
    with pytest.raises(InvalidArgumentError, match="signature"):
        Interpreter(models["signatures"], signature="nope")


def test_preserve_all_tensors_matches_litert_intermediates(models):
    interp = require("ai_edge_litert.interpreter")
    data = models["while"]
    ours = Interpreter(data, preserve_all_tensors=True)
    it = interp.Interpreter(model_content=data, experimental_op_resolver_type=interp.OpResolverType.BUILTIN_REF,
                            experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    x = np.arange(-60, 68, 16, dtype=np.int8)[None]
    ours.run([x])
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    for t in ours.subgraph.tensors:
        if t.type_name in ("INT8", "INT32", "FLOAT32", "BOOL"):
            assert ours.get_tensor(t.index).tobytes() == it.get_tensor(t.index).tobytes(), t.name
    plain = Interpreter(data)
    plain.run([x])
    inner = next(op for op in plain.subgraph.operators if op.name == "DEQUANTIZE").outputs[0]
    with pytest.raises(InvalidArgumentError, match="preserve_all_tensors"):
        plain.get_tensor(inner)


def test_a_recursive_subgraph_is_refused(models):
    """A WHILE whose body is the subgraph that holds it: LiteRT rejects it; quantspec too."""
    from litert_models import edit

    data = models["while"]
    m = load_model(data)
    op = next(op for op in m.main.operators if op.name == "WHILE")

    def body_is_main(model):
        for o in model.subgraphs[0].operators:
            if o.builtinOptions is not None and hasattr(o.builtinOptions, "bodySubgraphIndex"):
                o.builtinOptions.bodySubgraphIndex = 0
    assert op is not None
    with pytest.raises(ModelError, match="calls itself"):
        Interpreter(edit(data, body_is_main))
