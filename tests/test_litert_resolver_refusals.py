"""quantspec's Interpreter refuses, in each kernel mode, what the matching LiteRT resolver refuses
when it loads or prepares a model, and check_model says the same (each outcome measured with
ai-edge-litert in a child process, tests/test_litert_checker_resolvers.py's ``litert_outcome``):

- an operator code whose version the mode's resolver registers no kernel for, used or not
  (``InterpreterBuilder`` resolves every code: BUILTIN_REF registers fewer versions than the
  builtin resolver, which the XNNPACK mode resolves with before the delegate takes any node);
- the data-movement operators the XNNPACK delegate takes and XNNPACK refuses when their input and
  output quantization differ (SLICE, SPACE_TO_DEPTH; the others are among the resolver cases).
"""

from __future__ import annotations

import numpy as np
import pytest

from litert_build import T, build
from litert_models import edit, example_bytes, schema
from quantspec.errors import QuantSpecError
from quantspec.litert import Interpreter, check_model, optable
from quantspec.litert._opversions import REFERENCE_VERSIONS, VERSIONS
from test_litert_checker_resolvers import litert_outcome, outcome_of

RESOLVERS = optable.RESOLVERS
I32 = np.int32


def _unused_code(name: str, version: int):
    """The mlp example with one more operator code, which no operator uses."""
    def change(obj):
        S = schema()
        code = S.OperatorCodeT()
        code.builtinCode = code.deprecatedBuiltinCode = getattr(S.BuiltinOperator, name)
        code.version = version
        obj.operatorCodes.append(code)
    return edit(example_bytes("mlp_softmax"), change)


def _tile(version: int):
    return build("TILE", [T((1, 2, 2, 2), "int8", 0.1, 0), T((4,), "int32", None, None, 0, np.array([1, 2, 1, 1], I32))],
                 [T((1, 4, 2, 2), "int8", 0.1, 0)], {}, version)


_SLICE_INPUTS = [T((1, 4, 4, 2), "int8", 0.1, 0), T((4,), "int32", None, None, 0, np.array([0, 1, 1, 0], I32)),
                 T((4,), "int32", None, None, 0, np.array([1, 2, 2, 2], I32))]
MODELS = {
    "tile-v3": lambda: _tile(3),                        # BUILTIN_REF registers TILE 1 to 2, the others 1 to 3
    "tile-v2": lambda: _tile(2),
    "unused-tile-v3": lambda: _unused_code("TILE", 3),
    "unused-add-v99": lambda: _unused_code("ADD", 99),
    "slice-scale": lambda: build("SLICE", _SLICE_INPUTS, [T((1, 2, 2, 2), "int8", 0.2, 0)], {}, 2),
    "slice-zero-point": lambda: build("SLICE", _SLICE_INPUTS, [T((1, 2, 2, 2), "int8", 0.1, 3)], {}, 2),
    "space-to-depth-scale": lambda: build("SPACE_TO_DEPTH", [T((1, 4, 4, 2), "int8", 0.1, 0)],
                                          [T((1, 2, 2, 8), "int8", 0.2, 0)], {"block_size": 2}, 2),
}
#: LiteRT's outcome (ai-edge-litert 2.3.0), asserted again below
OUTCOMES = {
    "tile-v3": {"reference": "load", "optimized": "ok", "xnnpack": "ok"},
    "tile-v2": {"reference": "ok", "optimized": "ok", "xnnpack": "ok"},
    "unused-tile-v3": {"reference": "load", "optimized": "ok", "xnnpack": "ok"},
    "unused-add-v99": {"reference": "load", "optimized": "load", "xnnpack": "load"},
    "slice-scale": {"reference": "ok", "optimized": "ok", "xnnpack": "prepare"},
    "slice-zero-point": {"reference": "ok", "optimized": "ok", "xnnpack": "prepare"},
    "space-to-depth-scale": {"reference": "ok", "optimized": "ok", "xnnpack": "prepare"},
}


def test_the_tile_versions_differ_between_the_resolvers():
    assert REFERENCE_VERSIONS["TILE"] == (1, 2) and VERSIONS["TILE"] == (1, 3)


@pytest.mark.parametrize("key", sorted(MODELS))
@pytest.mark.parametrize("r", RESOLVERS)
def test_the_interpreter_refuses_what_the_resolver_refuses(key, r):
    model = MODELS[key]()
    outcome = litert_outcome(model, r)
    assert outcome == OUTCOMES[key][r], (key, r, outcome)
    assert outcome_of(check_model(model, kernels=r), r) == outcome
    if outcome == "ok":
        it = Interpreter(model, kernels=r)
        it.run([np.zeros(t.shape, t.dtype.dtype) for t in it.inputs])
        return
    with pytest.raises(QuantSpecError) as e:
        Interpreter(model, kernels=r)
    if outcome == "load":
        assert "rule litert-load" in str(e.value) and ("TILE version 3" in str(e.value) or "ADD version 99" in
                                                        str(e.value)), str(e.value)
    else:
        assert "XNNPACK" in str(e.value) and "quantization" in str(e.value), str(e.value)
