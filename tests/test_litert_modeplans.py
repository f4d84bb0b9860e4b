"""The run plans of the optimized and XNNPACK kernel modes (``quantspec.litert.modeplans``) equal
the mode kernels they replace, byte for byte, and the whole models they run equal LiteRT.

- every mode plan of a model, on the tensors a run fed its operator and on random codes of the full
  range (requantization ties, saturation), against its kernel's numpy ``compute``;
- the models, run on the fast path (plans, folded tables, regions), against LiteRT's matching
  configuration on random inputs;
- ``self_pair`` (``x`` and a table of ``x``: a swish) against the two tables one after the other.

``QUANTSPEC_MODEPLANS_ARCHS``: the zoo architectures (``benchmarks/litert_zoo.py``; default
``mobilenet_v3_small,transformer``; ``efficientnet_b0`` adds LOGISTIC and the swish);
``QUANTSPEC_MODEPLANS_INPUTS``: random inputs per model (default 3).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from refs import require, require_fast

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import litert_zoo  # noqa: E402

SEED = int(os.environ.get("QUANTSPEC_TEST_SEED", "0"))
ARCHS = tuple(a for a in os.environ.get("QUANTSPEC_MODEPLANS_ARCHS", "mobilenet_v3_small,transformer").split(",")
              if a)
INPUTS = int(os.environ.get("QUANTSPEC_MODEPLANS_INPUTS", "3"))
MODES = ("optimized", "xnnpack")
RESOLVER = {"optimized": "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "xnnpack": "AUTO"}
BUNDLED = ("bench_cnn", "cnn", "mixed", "mlp_softmax")


def _model(name: str) -> bytes:
    if name in BUNDLED:
        import quantspec

        return (Path(quantspec.__file__).parent / "data" / f"{name}.tflite").read_bytes()
    try:
        return litert_zoo.build(name, "int8").read_bytes()
    except ImportError:
        require("tensorflow")
        raise


def _inputs(interp, rng):
    out = []
    for t in interp.inputs:
        dtype = np.dtype(t.dtype.dtype)
        if dtype == np.float32:
            out.append(rng.uniform(-1, 1, t.shape).astype(np.float32))
        elif dtype == np.int32:                              # the zoo transformer's token ids
            out.append(rng.integers(0, litert_zoo.VOCAB, t.shape).astype(np.int32))
        else:
            info = np.iinfo(dtype)
            out.append(rng.integers(info.min, info.max + 1, t.shape).astype(dtype))
    return out


def _mode_plans(interp):
    """(operator, plan, kernel, prepared record) of every operator a mode kernel's plan runs."""
    from quantspec.litert.kernels.base import REGISTRY

    g = interp._main
    g.plan_steps()
    out = []
    for step, planned in zip(g.steps, g.planned):
        k, op, kernel, prepared = step[:4]
        plan = planned[2]
        if kernel is not REGISTRY.get(op.name) and plan is not kernel:
            out.append((op, plan, kernel, prepared))
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", BUNDLED + ARCHS)
def test_plans_equal_kernels(name, mode):
    require_fast()
    from quantspec._fastpath import jit
    from quantspec.litert import Interpreter

    model = _model(name)
    interp = Interpreter(model, kernels=mode, preserve_all_tensors=True)
    rng = np.random.default_rng(SEED)
    interp.run(_inputs(interp, rng))
    plans = _mode_plans(interp)
    sg = interp.subgraph
    compared = 0
    for op, plan, kernel, prepared in plans:
        recorded = [None if i < 0 else interp.get_tensor(i) for i in op.inputs]
        random = [x if x is None or sg.tensors[i].data is not None or x.dtype not in (np.int8, np.int16) else
                  rng.integers(np.iinfo(x.dtype).min, np.iinfo(x.dtype).max + 1, x.shape).astype(x.dtype)
                  for i, x in zip(op.inputs, recorded)]
        for arrays in (recorded, random):
            ours = plan.compute(None, arrays)
            with jit.reference_only():
                theirs = kernel.compute(prepared, arrays)
            assert len(ours) == len(theirs)
            for a, b in zip(ours, theirs):
                a, b = np.asarray(a), np.asarray(b)
                assert a.dtype == b.dtype and a.shape == b.shape, (op.index, op.name, type(plan).__name__)
                assert a.tobytes() == b.tobytes(), (op.index, op.name, type(plan).__name__,
                                                    int(np.count_nonzero(a != b)))
            compared += 1
    assert compared > 0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", BUNDLED + ARCHS)
def test_models_equal_litert(name, mode):
    require_fast()
    interp_mod = require("ai_edge_litert.interpreter")
    from quantspec.litert import Interpreter

    model = _model(name)
    ours = Interpreter(model, kernels=mode)
    theirs = interp_mod.Interpreter(model_content=model,
                                    experimental_op_resolver_type=getattr(interp_mod.OpResolverType, RESOLVER[mode]))
    theirs.allocate_tensors()
    ins = [d["index"] for d in theirs.get_input_details()]
    outs = [d["index"] for d in theirs.get_output_details()]
    rng = np.random.default_rng(SEED + 1)
    for _ in range(INPUTS):
        x = _inputs(ours, rng)
        y = ours.run(x)
        for i, v in zip(ins, x):
            theirs.set_tensor(i, v)
        theirs.invoke()
        for a, j in zip(y, outs):
            b = theirs.get_tensor(j)
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    assert ours._main.program is not None or not ours._main.programmable   # the fast program ran where it can


def test_modes_plan_their_heavy_operators():
    """On a model of convolutions, depthwise convolutions, squeeze-excitation MUL and MEAN, no mode
    leaves its GEMMs, depthwise convolutions or element-wise tables to the numpy kernels."""
    require_fast()
    from quantspec.litert import Interpreter

    model = _model("mobilenet_v3_small")
    for mode in MODES:
        interp = Interpreter(model, kernels=mode)
        interp.run(_inputs(interp, np.random.default_rng(SEED)))
        g = interp._main
        for step, planned in zip(g.steps, g.planned):
            k, op = step[:2]
            if op.name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "MUL") and g.engines[k] != \
                    "reference":
                assert planned[2] is not step[2], (mode, op.index, op.name)


@pytest.mark.parametrize("tpos", (0, 1))
def test_self_pair(tpos):
    require_fast()
    from quantspec.litert.modeplans import self_pair
    from quantspec.litert.plans import PairTablePlan, UnaryTablePlan
    from quantspec.litert.plans.elementwise import _broadcast_walk

    rng = np.random.default_rng(SEED + tpos)
    shape = (1, 5, 7, 3)
    unary = rng.integers(-128, 128, 256).astype(np.int8)
    pair = rng.integers(-128, 128, 1 << 16).astype(np.int8)
    first = UnaryTablePlan(None, None, unary, np.uint8, None)
    second = PairTablePlan(None, None, pair, _broadcast_walk(shape, shape, shape), shape)
    fused = self_pair(first, second, tpos)
    x = np.concatenate([np.arange(-128, 128), rng.integers(-128, 128, 256 * 3 - 256)]).astype(np.int8)
    shape = (1, 16, 16, 3)
    x = rng.permutation(x).reshape(shape)
    second = PairTablePlan(None, None, pair, _broadcast_walk(shape, shape, shape), shape)
    fused = self_pair(first, second, tpos)
    (t,) = first.compute(None, [x])
    expected = second.compute(None, [x, t] if tpos == 1 else [t, x])[0]
    (ours,) = fused.compute(None, [x])
    assert ours.tobytes() == expected.tobytes()
    # a broadcast pair (inputs of two shapes) does not fold
    wide = PairTablePlan(None, None, pair, _broadcast_walk((1, 1, 1, 3), shape, shape), shape)
    assert self_pair(first, wide, tpos) is None


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("size", (21, 37, 64))
def test_quantize_tails(mode, size):
    """QUANTIZE float32 -> int8 and int8 -> int8 on sizes whose last values fall outside the optimized
    kernel's vector blocks (8 and 16 values): the plans against LiteRT and against the kernels."""
    require_fast()
    from litert_build import T, build, run_ref
    from quantspec._fastpath import jit
    from quantspec.litert import Interpreter

    rng = np.random.default_rng(SEED + size)
    s = 0.05
    # float values on the grid of ties (k + 0.5) * s, NaN-free, some beyond the int8 range
    xf = ((rng.integers(-300, 300, (1, size)) + rng.choice([0.0, 0.5], (1, size))) * s).astype(np.float32)
    xq = rng.integers(-128, 128, (1, size)).astype(np.int8)
    cases = [(T((1, size), "float32"), T((1, size), "int8", s, 3), xf),
             (T((1, size), "int8", 0.3, -5), T((1, size), "int8", 0.7, 9), xq)]
    for tin, tout, x in cases:
        model = build(op="QUANTIZE", inputs=[tin], outputs=[tout])
        (expected,) = run_ref(model, [x], resolver=RESOLVER[mode])
        interp = Interpreter(model, kernels=mode)
        (ours,) = interp.run([x])
        assert ours.tobytes() == expected.tobytes()
        (op, plan, kernel, prepared), = _mode_plans(interp)
        with jit.reference_only():
            (theirs,) = kernel.compute(prepared, [x])
        assert plan.compute(None, [x])[0].tobytes() == theirs.tobytes()


@pytest.mark.parametrize("mode", MODES)
def test_regions_take_mode_plans(mode):
    """A transformer encoder of small tensors runs as one region (plus its embedding lookup) in the
    modes too: the regions take the modes' GEMMs, SOFTMAX and MEAN (their bytes: test_models_equal_litert)."""
    require_fast()
    from quantspec.litert import Interpreter
    from quantspec.litert import modeplans as M
    from quantspec.litert.regions import RegionPlan

    interp = Interpreter(_model("transformer"), kernels=mode)
    x = _inputs(interp, np.random.default_rng(SEED))
    interp.run(x)
    interp.run(x)
    entries = [getattr(e[0], "__self__", None) for e in interp._main.program]
    inside = {type(p) for r in entries if isinstance(r, RegionPlan) for p in r.plans}
    assert len(entries) <= 2
    assert {M.RowsGemmPlan, M.SoftmaxTablePlan} <= inside
    assert (M.ReduceFp32Plan in inside) == (mode == "xnnpack")


@pytest.mark.parametrize("threads", (2, 3))
def test_optimized_mean_follows_num_threads(threads):
    """The optimized spatial MEAN's bytes depend on the thread count (its channel ranges); the plan
    takes the interpreter's ``num_threads`` as LiteRT's kernel takes the interpreter's."""
    require_fast()
    interp_mod = require("ai_edge_litert.interpreter")
    from quantspec.litert import Interpreter
    from quantspec.litert import modeplans as M

    model = _model("mobilenet_v3_small")           # squeeze-and-excitation: spatial MEANs of 16 to 576 channels
    ours = Interpreter(model, kernels="optimized", num_threads=threads, preserve_all_tensors=True)
    theirs = interp_mod.Interpreter(model_content=model, num_threads=threads, experimental_preserve_all_tensors=True,
                                    experimental_op_resolver_type=interp_mod.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    theirs.allocate_tensors()
    means = [op.outputs[0] for op, p, _, _ in _mode_plans(ours) if isinstance(p, M.SpatialMeanPlan)
             and p.vec.size >= 16]
    assert means
    rng = np.random.default_rng(SEED + threads)
    for _ in range(INPUTS):
        x = _inputs(ours, rng)
        ours.run(x)
        theirs.set_tensor(theirs.get_input_details()[0]["index"], x[0])
        theirs.invoke()
        for i in means:                      # every spatial MEAN's output, and the model's
            assert ours.get_tensor(i).tobytes() == theirs.get_tensor(i).tobytes()
        j = theirs.get_output_details()[0]["index"]
        assert ours.get_tensor(j).tobytes() == theirs.get_tensor(j).tobytes()


@pytest.mark.parametrize("name", ("bench_cnn",) + ARCHS)
def test_reference_few_rows(name):
    """The reference mode's 1x1 convolutions of at most 4 output pixels run as int32 dot products
    (``modeplans.few_rows``): each against the reference kernel on recorded and random codes."""
    require_fast()
    from quantspec._fastpath import jit
    from quantspec.litert import Interpreter
    from quantspec.litert import modeplans as M

    interp = Interpreter(_model(name), preserve_all_tensors=True)
    rng = np.random.default_rng(SEED)
    interp.run(_inputs(interp, rng))
    g = interp._main
    compared = 0
    for step, planned in zip(g.steps, g.planned):
        op, kernel, prepared, plan = step[1], step[2], step[3], planned[2]
        if type(plan) is not M.RowsGemmPlan:
            continue
        x = interp.get_tensor(op.inputs[0])
        for arrays in ([x], [rng.integers(-128, 128, x.shape).astype(np.int8)]):
            arrays = arrays + [None if i < 0 else interp.get_tensor(i) for i in op.inputs[1:]]
            with jit.reference_only():
                (theirs,) = kernel.compute(prepared, arrays)
            assert plan.compute(None, arrays)[0].tobytes() == theirs.tobytes(), (op.index, op.name)
            compared += 1
    if name == "mobilenet_v3_small":
        assert compared > 0
