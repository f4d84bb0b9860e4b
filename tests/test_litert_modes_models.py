"""Whole models in the three kernel modes against the matching LiteRT configuration: the bundled
models and converter-made int8 models of common architectures (``benchmarks/litert_zoo.py``), on
random inputs, outputs byte for byte; and every intermediate tensor, operator by operator: LiteRT
runs with ``experimental_preserve_all_tensors`` (which exposes the tensors inside the XNNPACK
partitions too), and each quantspec kernel, given the very tensors LiteRT fed that operator, must
produce the very tensor LiteRT produced.

- ``QUANTSPEC_MODES_ARCHS``: comma-separated zoo architectures, or ``all`` (default ``mobilenet_v2``);
- ``QUANTSPEC_MODES_QUANTS``: ``int8``, ``int16x8`` or both (default both);
  a model the converter cannot make, or quantspec's reference interpreter refuses (an operator or
  type without a reference kernel, a model LiteRT cannot run either), is skipped;
- ``QUANTSPEC_MODES_INPUTS``: random inputs per zoo model (default 20) and per bundled model (default 5).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from litert_modes import MODES, RESOLVER
from refs import require

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import litert_zoo  # noqa: E402

SEED = int(os.environ.get("QUANTSPEC_TEST_SEED", "0"))
_ARCHS = os.environ.get("QUANTSPEC_MODES_ARCHS", "mobilenet_v2")
ARCHS = litert_zoo.ARCHS if _ARCHS == "all" else tuple(a for a in _ARCHS.split(",") if a)
ZOO_INPUTS = int(os.environ.get("QUANTSPEC_MODES_INPUTS", "20"))
QUANTS = tuple(q for q in os.environ.get("QUANTSPEC_MODES_QUANTS", "int8,int16x8").split(",") if q)
BUNDLED_INPUTS = int(os.environ.get("QUANTSPEC_MODES_INPUTS", "5"))
BUNDLED = ("bench_cnn", "cnn", "mixed", "mlp_softmax")


def _litert(model: bytes, mode: str, preserve: bool):
    interp_mod = require("ai_edge_litert.interpreter")
    it = interp_mod.Interpreter(model_content=model, experimental_preserve_all_tensors=preserve,
                                experimental_op_resolver_type=getattr(interp_mod.OpResolverType, RESOLVER[mode]))
    it.allocate_tensors()
    return it


def _inputs(interp, rng):
    out = []
    for t in interp.inputs:
        if t.dtype.dtype == np.float32:
            out.append(rng.uniform(-1, 1, t.shape).astype(np.float32))
        elif t.dtype.dtype == np.int32:                      # the zoo transformer's token ids
            out.append(rng.integers(0, litert_zoo.VOCAB, t.shape).astype(np.int32))
        else:
            info = np.iinfo(t.dtype.dtype)
            out.append(rng.integers(info.min, info.max + 1, t.shape).astype(t.dtype.dtype))
    return out


def _prepared(interp):
    """The interpreter's (operator, kernel, prepared record) list of the subgraph it runs."""
    graph = getattr(interp, "_main", None)
    return graph.prepared if graph is not None and hasattr(graph, "prepared") else interp._prepared


def _compare(model: bytes, mode: str, n_inputs: int, seed_key: str) -> dict:
    """Outputs and per-operator intermediates of quantspec's ``mode`` against LiteRT's; returns the
    engines quantspec used and how many tensors were compared."""
    from quantspec.litert import Interpreter

    interp = Interpreter(model, kernels=mode)
    it = _litert(model, mode, preserve=True)
    sg = interp.model.main
    rng = np.random.default_rng([SEED, sum(map(ord, seed_key)), MODES.index(mode)])
    compared = 0
    for n in range(n_inputs):
        feeds = _inputs(interp, rng)
        for d, x in zip(it.get_input_details(), feeds):
            it.set_tensor(d["index"], x)
        it.invoke()
        ours = interp.run(feeds)
        for k, (d, y) in enumerate(zip(it.get_output_details(), ours)):
            theirs = it.get_tensor(d["index"])
            assert y.dtype == theirs.dtype and y.tobytes() == theirs.tobytes(), \
                f"{seed_key} ({mode}), input {n}: output {k} differs in {int(np.sum(y != theirs))} of {y.size}"
        # every operator on LiteRT's own inputs: its output must be LiteRT's intermediate
        for op, kernel, prepared in _prepared(interp):
            arrays = [None if i < 0 else (sg.tensors[i].data if sg.tensors[i].data is not None else it.get_tensor(i))
                      for i in op.inputs]
            for i, y in zip(op.outputs, kernel.compute(prepared, arrays)):
                theirs = it.get_tensor(i)
                assert y.tobytes() == theirs.tobytes(), \
                    (f"{seed_key} ({mode}), input {n}: operator {op.index} ({op.name}) on engine "
                     f"{interp.engines[op.index]}: tensor {i} differs in {int(np.sum(y != theirs))} of {y.size}")
                compared += 1
    return {"engines": set(interp.engines), "compared": compared}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_models(name, mode):
    import quantspec

    model = (Path(quantspec.__file__).parent / "data" / f"{name}.tflite").read_bytes()
    result = _compare(model, mode, BUNDLED_INPUTS, name)
    assert result["compared"] > 0


def _zoo_path(arch: str, quant: str = "int8") -> Path:
    """The cached converter-made model; building one needs TensorFlow (a missing TensorFlow fails
    under QUANTSPEC_REQUIRE_REFERENCES=1, else skips)."""
    try:
        return litert_zoo.build(arch, quant)
    except ImportError:
        require("tensorflow")
        raise
    except litert_zoo.Unsupported as e:
        pytest.skip(f"the converter cannot make {arch} {quant}: {e}")


def _zoo(arch: str, quant: str = "int8") -> bytes:
    return _zoo_path(arch, quant).read_bytes()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("quant", QUANTS)
@pytest.mark.parametrize("arch", ARCHS)
def test_zoo_models(arch, quant, mode):
    from quantspec.errors import DTypeError, UnsupportedError
    from quantspec.litert import Interpreter

    model = _zoo(arch, quant)
    try:
        Interpreter(model)
    except (UnsupportedError, DTypeError) as e:     # the reference interpreter's coverage is tested elsewhere
        pytest.skip(f"quantspec refuses {arch} {quant} (an operator or type this build has no reference kernel "
                    f"for, or a model LiteRT cannot run either): {e}")
    result = _compare(model, mode, ZOO_INPUTS if quant == "int8" else max(1, ZOO_INPUTS // 4), f"{arch}-{quant}")
    expected = {"reference": {"reference"}, "optimized": {"optimized"}, "xnnpack": {"xnnpack", "optimized"}}[mode]
    assert result["engines"] <= expected and result["engines"] & expected


def test_zoo_mobilenet_v2_differs_between_configurations():
    """The point of the modes: on a converter-made MobileNetV2, LiteRT's three configurations give
    three different results, and quantspec reproduces each."""
    from quantspec.litert.model import load_model

    model = _zoo("mobilenet_v2")
    sg = load_model(model).main
    activations = [op.outputs[0] for op in sg.operators]          # every operator's output, model order
    rng = np.random.default_rng([SEED, 22])
    x = rng.integers(-128, 128, sg.tensors[sg.inputs[0]].shape).astype(np.int8)
    outputs = {}
    for mode in MODES:
        it = _litert(model, mode, preserve=True)
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        outputs[mode] = np.concatenate([it.get_tensor(i).reshape(-1).astype(np.int64) for i in activations])
    assert np.any(outputs["reference"] != outputs["optimized"])
    assert np.any(outputs["reference"] != outputs["xnnpack"])
    assert np.any(outputs["optimized"] != outputs["xnnpack"])
