"""Property-based fuzzing of the public functions of quantspec.onnx, quantspec.tf and quantspec.litert
(:data:`fuzz_api.TARGETS`): random shapes (0-d, empty, huge broadcast views), dtypes, layouts, special
values, wrong parameters and ``out=`` arrays.  Each call returns normally -- and then equals the
oracle, where one runs on the same call (onnx.reference, onnxruntime, TensorFlow, the LiteRT
interpreter, the scalar C++ models of gemmlowp's fixed point) -- or raises a quantspec error; in the
``reference`` compat mode quantspec refuses exactly where onnx.reference fails.  Nothing else:
no other exception, no numpy warning, no crash, no hang (huge views run in a subprocess with a time
limit).  ``QUANTSPEC_FUZZ_EXAMPLES`` scales it (fuzz_support)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, seed
from hypothesis import strategies as st

import fuzz_api
import fuzz_support as F
import refs
from quantspec.errors import DTypeError, OpsetError


#: per target: calls, quantspec errors, results compared with the oracle, refusals confirmed by it,
#: calls run in a subprocess (printed with -s; the docs' figures)
STATS: dict[str, dict[str, int]] = {}


def check(case: fuzz_api.Case, stats: dict[str, int] | None = None) -> None:
    """The outcome rule for one drawn call."""
    stats = stats if stats is not None else {}
    stats["calls"] = stats.get("calls", 0) + 1
    if case.isolate:
        F.isolated(case.call, timeout=60, what=case.what)
        stats["isolated"] = stats.get("isolated", 0) + 1
        return
    out = F.outcome(case.call, case.what)
    if not out.ok:
        stats["errors"] = stats.get("errors", 0) + 1
    if out.ok and case.check is not None:
        case.check(out.value)
    if case.oracle is None or not (out.ok or case.refusals_match):
        return
    with F.quiet():
        try:
            want, refused = case.oracle(), None
        except AssertionError:
            raise
        except fuzz_api.OracleCannot:
            stats["oracle out of memory"] = stats.get("oracle out of memory", 0) + 1
            return
        except Exception as e:  # noqa: BLE001 - the runtime refuses: an answer to compare
            want, refused = None, e
    if out.ok:
        assert refused is None, f"quantspec accepts what the oracle refuses ({type(refused).__name__}: " \
                                f"{refused}): {case.what}"
        assert case.same(want, out.value), f"differs from the oracle: {case.what}\n  oracle: {want!r}\n  " \
                                           f"quantspec: {out.value!r}"
        stats["compared"] = stats.get("compared", 0) + 1
    elif case.refusals_match and not isinstance(out.error, (DTypeError, OpsetError)):
        # types and attributes outside the operator's schema are refused whatever the runtime computes
        # (onnx.reference checks no type); the rest (shapes, values) must be refused exactly there
        assert refused is not None, f"quantspec refuses ({out}) what the oracle accepts: {case.what}"
        stats["refusals confirmed"] = stats.get("refusals confirmed", 0) + 1


@pytest.mark.parametrize("name", sorted(fuzz_api.TARGETS))
def test_fuzz_public_function(name):
    recipe, weight = fuzz_api.TARGETS[name]
    if name.startswith("onnx"):
        refs.require("onnx")
        refs.require("onnxruntime")
    elif name.startswith("tf"):
        refs.require("tensorflow")
    elif name in ("litert.quantize", "litert.dequantize"):
        refs.require("ai_edge_litert.interpreter")
    elif name == "equiv.equivalent":
        for runtime in ("tensorflow", "onnx", "onnxruntime", "ai_edge_litert.interpreter"):
            refs.require(runtime)
    elif name.startswith("calibrate."):
        refs.require("onnxruntime")

    stats = STATS.setdefault(name, {})

    @F.fuzz_settings(weight)
    @seed(F.SEED)
    @given(st.data())
    def run(data):
        check(recipe(data.draw), stats)

    with np.errstate(all="warn", under="ignore"):   # numpy's defaults: a warning escaping fails the call
        run()
    print(f"{name}: {stats}")
    if name in WITH_ORACLE and stats.get("calls", 0) >= 40:
        assert stats.get("compared", 0) > 0, f"no result was compared with the oracle: {stats}"


#: the targets with an oracle: the fuzzer must compare some of their results (not a vacuous run)
WITH_ORACLE = {"onnx.quantize_linear", "onnx.dequantize_linear", "onnx.pack", "tf.quantize", "tf.dequantize",
               "tf.quantize_and_dequantize_v2/v3/v4", "tf.fake_quant_with_min_max_args",
               "tf.fake_quant_with_min_max_vars", "tf.fake_quant_with_min_max_vars_per_channel", "litert.quantize",
               "litert.dequantize", "litert.fixedpoint (multiplications)", "litert.fixedpoint (functions)",
               "equiv.equivalent", "calibrate.observers", "calibrate.params"}
