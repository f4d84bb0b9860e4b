"""The int32 / int64 / bool shape arithmetic the TF converter puts around dynamic dimensions, in the
three kernel modes against LiteRT (ai-edge-litert, the resolver of each mode): a Keras text
transformer with a dynamic batch dimension (Embedding, MultiHeadAttention, LayerNormalization,
Dense) converted full-integer int8, and a tf.function that computes with tf.shape / tf.range /
tf.gather / tf.strided_slice / tf.where ... on run-time int32 values.  Every output and every
intermediate tensor must be LiteRT's bytes; ``quantspec check`` finds nothing on the int32 tensors.

Single-op models (tests/support/litert_build.py) cover what the converter folds away or never emits
(SELECT, LOGICAL_NOT, EQUAL, SQUEEZE on int32, edge values of FLOOR_DIV / FLOOR_MOD / CAST / NEG).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from litert_modes import MODES, RESOLVER
from refs import require

SEQ, VOCAB, WIDTH = 8, 50, 16


def _tf():
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
    return require("tensorflow")


def _text_transformer(tf) -> bytes:
    tf.keras.utils.set_random_seed(3)
    inp = tf.keras.Input((SEQ,), dtype="int32", batch_size=None)
    x = tf.keras.layers.Embedding(VOCAB, WIDTH)(inp)
    a = tf.keras.layers.MultiHeadAttention(2, 8)(x, x)
    x = tf.keras.layers.LayerNormalization()(x + a)
    x = tf.keras.layers.Dense(WIDTH, activation="relu")(x)
    x = tf.keras.layers.GlobalAveragePooling1D()(x)
    out = tf.keras.layers.Dense(3)(x)
    model = tf.keras.Model(inp, out)
    rng = np.random.default_rng(0)

    def rep():
        for _ in range(8):
            yield [rng.integers(0, VOCAB, (1, SEQ)).astype(np.int32)]

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = rep
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    return bytes(conv.convert())


def _int32_ops(tf) -> bytes:
    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 6], tf.float32, name="a"),
                                      tf.TensorSpec([None], tf.int32, name="b")])
        def f(self, x, v):
            s = tf.shape(x)
            n = s[0]
            prod = tf.reduce_prod(s)
            fd = tf.math.floordiv(v, 3)
            fm = tf.math.floormod(v, -4)
            lg = tf.logical_or(tf.logical_and(tf.less(v, fd), tf.greater(v, 2)), tf.logical_not(tf.equal(fm, 0)))
            sel = tf.where(lg, -v, fm)
            mx, mn = tf.maximum(v, fd), tf.minimum(v, fm)
            casted = tf.cast(v, tf.float32)
            vv = tf.reshape(tf.concat([v, mx, mn], 0), [3, -1])
            e = tf.expand_dims(v, 1)
            u0, u1, u2 = tf.unstack(vv, axis=0)
            return {
                "r": tf.range(n), "sel": sel, "filled": tf.fill(tf.stack([n, 2]), prod),
                "c64": tf.cast(tf.cast(v, tf.int64) * 3, tf.int32), "cb": tf.cast(tf.cast(v, tf.bool), tf.int32),
                "am": tf.argmax(vv, axis=0, output_type=tf.int32), "an": tf.argmin(vv, axis=1, output_type=tf.int32),
                "sl": vv[1:, ::-1], "sl2": tf.slice(vv, [0, 1], [2, tf.shape(vv)[1] - 1]),
                "g": tf.gather(vv, tf.math.floormod(v, 3), axis=0),
                "gnd": tf.gather_nd(vv, tf.stack([tf.math.floormod(v, 3), tf.math.floormod(v, tf.shape(v)[0])], 1)),
                "b": tf.broadcast_to(e, tf.stack([tf.shape(v)[0], n])), "ti": tf.tile(e, tf.stack([1, n])),
                "sq": u1 + u2, "u0": u0,
                "y": tf.gather(x, tf.math.floormod(v, n), axis=0) * 2.0 + tf.reduce_sum(casted),
            }

    m = M()
    rng = np.random.default_rng(1)

    def rep():
        for _ in range(8):
            yield {"a": rng.uniform(-1, 1, (4, 6)).astype(np.float32), "b": rng.integers(-9, 9, (5,)).astype(np.int32)}

    conv = tf.lite.TFLiteConverter.from_concrete_functions([m.f.get_concrete_function()], m)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = rep
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    return bytes(conv.convert())


def _dense_3d(tf) -> bytes:
    """Dense on a [batch, 8, 16] input with a dynamic batch: the converter's Tensordot shape arithmetic
    (SHAPE, GATHER, REDUCE_PROD, PACK, CONCATENATION on int32) around int8 FULLY_CONNECTED."""
    tf.keras.utils.set_random_seed(1)
    inp = tf.keras.Input((8, 16), batch_size=None)
    x = tf.keras.layers.Dense(16, activation="relu")(inp)
    x = tf.keras.layers.GlobalAveragePooling1D()(x)
    model = tf.keras.Model(inp, tf.keras.layers.Dense(3)(x))
    rng = np.random.default_rng(0)

    def rep():
        for _ in range(8):
            yield [rng.uniform(-1, 1, (1, 8, 16)).astype(np.float32)]

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = rep
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = conv.inference_output_type = tf.int8
    return bytes(conv.convert())


@pytest.fixture(scope="session")
def converted(tmp_path_factory):
    tf = _tf()
    d = tmp_path_factory.mktemp("shape_arith")
    out = {}
    for name, make in (("textxf", _text_transformer), ("int32ops", _int32_ops), ("dense3d", _dense_3d)):
        path = d / f"{name}.tflite"
        path.write_bytes(make(tf))
        out[name] = path
    return out


def _ops(path) -> set[str]:
    from quantspec.litert.model import load_model

    return {op.name for op in load_model(path).main.operators}


def _key(name: str) -> str:
    """The input's key in a test's shapes: ``a`` / ``b`` of the tf.function, ``x`` for the transformer."""
    for k in ("_a:", "_b:"):
        if k in name:
            return k[1]
    return "x"


def _feed(key: str, shape, rng) -> np.ndarray:
    if key == "x" and len(shape) == 3:                 # dense3d's int8 input
        return rng.integers(-128, 128, shape).astype(np.int8)
    if key == "x":
        return rng.integers(0, VOCAB, shape).astype(np.int32)
    if key == "a":
        return rng.uniform(-1.2, 1.2, shape).astype(np.float32)
    b = rng.integers(-40, 40, shape).astype(np.int32)
    if b.size >= 2:
        b[:2] = (-2**31 + 5, 2**31 - 7)              # wrap-around in c64, extremes in the min/max paths
    return b


def _litert(model: bytes, mode: str, shapes):
    ip = require("ai_edge_litert.interpreter")
    it = ip.Interpreter(model_content=model, experimental_preserve_all_tensors=True,
                        experimental_op_resolver_type=getattr(ip.OpResolverType, RESOLVER[mode]))
    for d in it.get_input_details():
        it.resize_tensor_input(d["index"], list(shapes[_key(d["name"])]))
    it.allocate_tensors()
    return it


def _get(it, i):
    """LiteRT's tensor ``i``, or None where its Python API cannot read it (an empty tensor has no buffer:
    'Invalid tensor size')."""
    try:
        return it.get_tensor(i)
    except ValueError:
        return None


def _compare(path, name: str, mode: str, shapes: dict, runs: int = 3) -> int:
    """Outputs and the output of every operator (run on LiteRT's own input tensors) byte for byte;
    returns how many tensors were compared."""
    from quantspec.litert import Interpreter
    from quantspec.litert.interpreter import prepare_operator
    from quantspec.litert.kernels.base import TensorSpec

    model = path.read_bytes()
    interp = Interpreter(model, kernels=mode, sum_semantics="reference" if mode == "reference" else "correct")
    it = _litert(model, mode, shapes)
    sg = interp.model.main
    graph = interp._main
    rng = np.random.default_rng([7, len(name), MODES.index(mode), sum(s[0] for s in shapes.values())])
    compared = 0
    for _ in range(runs):
        feeds = {i: _feed(_key(sg.tensors[i].name), shapes[_key(sg.tensors[i].name)], rng) for i in sg.inputs}
        for i, x in feeds.items():
            it.set_tensor(i, x)
        it.invoke()
        ours = interp.run([feeds[i] for i in sg.inputs])
        for op, kernel, prepared in graph.prepared:
            arrays = [None if i < 0 else (sg.tensors[i].data if sg.tensors[i].data is not None else _get(it, i))
                      for i in op.inputs]
            if any(a is None for i, a in zip(op.inputs, arrays) if i >= 0) or any(_get(it, i) is None for i in op.outputs):
                continue
            # LiteRT's shapes differ from the stored ones (a resized input, or the stored 1 of a dynamic
            # dimension): prepare the operator again for them, as quantspec's interpreter does
            specs = {}
            for i in (*op.inputs, *op.outputs):
                if i >= 0:
                    s = graph.specs[i]
                    specs[i] = s if s.data is not None else TensorSpec(tuple(_get(it, i).shape), s.dtype,
                                                                       s.params, None, s.name)
            prepared = prepare_operator(op, kernel, graph.options[op.index], specs)
            for i, y in zip(op.outputs, kernel.compute(prepared, arrays)):
                theirs = it.get_tensor(i)
                assert y.dtype == theirs.dtype and y.tobytes() == theirs.tobytes(), \
                    (f"{name} ({mode}) operator {op.index} ({op.name}) on {interp.engines[op.index]}: tensor {i} "
                     f"differs: quantspec {y.reshape(-1)[:8]}, LiteRT {theirs.reshape(-1)[:8]}")
                compared += 1
        for i, y in zip(sg.outputs, ours):
            theirs = _get(it, i)
            if theirs is None:
                assert y.size == 0
                continue
            assert y.dtype == theirs.dtype and y.shape == theirs.shape and y.tobytes() == theirs.tobytes(), \
                (name, mode, sg.tensors[i].name, y, theirs)
            compared += 1
    return compared


def test_converter_emits_the_shape_arithmetic(converted):
    ops = _ops(converted["textxf"])
    assert {"SHAPE", "REDUCE_PROD", "NEG", "SELECT_V2", "PACK", "GATHER", "CONCATENATION"} <= ops, ops
    ops = _ops(converted["int32ops"])
    assert {"RANGE", "FILL", "CAST", "FLOOR_DIV", "FLOOR_MOD", "SELECT_V2", "LOGICAL_AND", "LOGICAL_OR", "GATHER_ND",
            "BROADCAST_TO", "TILE", "ARG_MAX", "ARG_MIN", "EXPAND_DIMS", "STRIDED_SLICE", "SLICE", "UNPACK",
            "MAXIMUM", "MINIMUM", "REDUCE_PROD", "NEG", "LESS", "GREATER"} <= ops, ops


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("batch", [1, 3])
def test_text_transformer_dynamic_batch(converted, mode, batch):
    assert _compare(converted["textxf"], "textxf", mode, {"x": (batch, SEQ)}) > 0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shapes", [{"a": (4, 6), "b": (5,)}, {"a": (1, 6), "b": (1,)}, {"a": (2, 6), "b": (7,)}],
                         ids=["4x5", "stored", "2x7"])
def test_int32_shape_ops(converted, mode, shapes):
    assert _compare(converted["int32ops"], "int32ops", mode, shapes) > 0


@pytest.mark.parametrize("mode", MODES)
def test_run_cli_runs_the_text_transformer(converted, mode, capsys):
    """``quantspec run MODEL --random`` draws the token ids inside the embedding table (an id outside
    it makes LiteRT fail too) and matches LiteRT's resolver of the mode."""
    from quantspec.cli import main

    assert main(["run", str(converted["textxf"]), "--random", "0", "--compare-litert", "--kernels", mode]) == 0
    assert "identical" in capsys.readouterr().out



# -- the checker on shape arithmetic -----------------------------------------------------------------

def _shape_tensors(path) -> set[int]:
    from quantspec.litert.model import load_model

    sg = load_model(path).main
    return {t.index for t in sg.tensors if t.params is None and t.type_name in ("INT32", "INT64", "BOOL")}


@pytest.mark.parametrize("name", ["textxf", "int32ops", "dense3d"])
def test_check_finds_nothing_on_int32_shape_tensors(converted, name):
    from quantspec.litert.checker import check_model
    from quantspec.litert.model import load_model

    path = converted[name]
    assert _shape_tensors(path)                        # the model has them: the test can fail
    report = check_model(path)
    sg = load_model(path).main
    on_shapes = [v for v in report.violations if v.tensor_index in _shape_tensors(path)]
    assert on_shapes == [], report.render()
    shape_ops = [v for v in report.violations if v.rule == "op-not-in-spec"
                 and all(sg.tensors[i].params is None and sg.tensors[i].type_name in ("INT32", "INT64", "BOOL")
                         for i in (*sg.operators[v.op_index].inputs, *sg.operators[v.op_index].outputs) if i >= 0)]
    assert shape_ops == [], report.render()
    assert not report.unsupported, report.render()


def test_check_exits_0_on_a_dynamic_batch_dense_model(converted, capsys):
    """The converter's Tensordot shape arithmetic (int32 SHAPE / GATHER / REDUCE_PROD / PACK /
    CONCATENATION) around int8 FULLY_CONNECTED: nothing else is wrong, so check exits 0; LiteRT runs it."""
    from quantspec.cli import main

    assert {"SHAPE", "REDUCE_PROD", "PACK", "GATHER", "CONCATENATION"} <= _ops(converted["dense3d"])
    assert main(["check", str(converted["dense3d"])]) == 0, capsys.readouterr().out
    for mode in MODES:
        assert _compare(converted["dense3d"], "dense3d", mode, {"x": (2, 8, 16)}, runs=1) > 0


def _island_model() -> bytes:
    """int8 x -> DEQUANTIZE -> NEG -> ADD(float, float) -> QUANTIZE -> int8 y, and beside it a second
    float region DEQUANTIZE -> NEG -> QUANTIZE: two float islands (of 2 and 1 operators) in an int8
    model, and an int32 ADD on a second input."""
    from litert_build import T, build_graph

    tensors = [T((4,), "int8", 0.1, 3), T((4,), "float"), T((4,), "float"), T((4,), "float"), T((4,), "int8", 0.2, -1),
               T((4,), "float"), T((4,), "float"), T((4,), "int8", 0.1, 0), T((2,), "int32"), T((2,), "int32"),
               T((4,), "float", data=np.array([0.5, -1, 2, 0], np.float32))]
    ops = [("DEQUANTIZE", [0], [1], None), ("NEG", [1], [2], None),
           ("ADD", [2, 10], [3], {"fused_activation_function": "NONE"}), ("QUANTIZE", [3], [4], None),
           ("DEQUANTIZE", [4], [5], None), ("NEG", [5], [6], None), ("QUANTIZE", [6], [7], None),
           ("ADD", [8, 8], [9], {"fused_activation_function": "NONE"})]
    return build_graph(tensors, ops, [0, 8], [7, 9])


def test_a_float_island_is_one_finding():
    from quantspec.litert.checker import check_model

    from litert_modes import litert_run

    model = _island_model()
    x = np.array([-128, 0, 7, 127], np.int8)
    n = np.array([5, -3], np.int32)
    want = litert_run(model, [x, n], "reference")         # LiteRT runs it: float kernels for the islands
    from quantspec.litert import Interpreter

    got = Interpreter(model).run([x, n])
    assert [g.tobytes() for g in got] == [w.tobytes() for w in want]
    report = check_model(model)
    islands = [v for v in report.violations if v.rule == "dtype" and v.found == "float"]
    assert [(v.op_index, v.tensor_index) for v in islands] == [(1, None), (5, None)], report.render()
    assert "2 operator(s)" in islands[0].message and "1 operator(s)" in islands[1].message
    assert [v for v in report.violations if v not in islands] == [], report.render()


def test_real_violations_stay():
    """An int8 activation without quantization parameters is still a finding (it is not shape arithmetic)."""
    from litert_build import T, build
    from quantspec.litert.checker import check_model

    concat = build("CONCATENATION", [T((2,), "int8", 0.1, 0), T((2,), "int8")], [T((4,), "int8", 0.1, 0)],
                   {"axis": 0})
    found = {(v.rule, v.tensor_index) for v in check_model(concat).violations}
    assert ("granularity", 1) in found, found
