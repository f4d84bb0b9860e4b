"""Property-based fuzzing of the public functions of quantspec.onnx, quantspec.tf and quantspec.litert
(:data:`fuzz_api.TARGETS`): random shapes (0-d, empty, huge broadcast views), dtypes, layouts, special
values, wrong parameters and ``out=`` arrays.  Each call returns normally -- and then equals the
oracle, where one runs on the same call (onnx.reference, onnxruntime, TensorFlow, the LiteRT
interpreter, the scalar C++ models of gemmlowp's fixed point) -- or raises a quantspec error; in the
``reference`` compat mode quantspec refuses exactly where onnx.reference fails.  Nothing else:
no other exception, no numpy warning, no crash, no hang (huge views run in a subprocess with a time
limit).  ``QUANTSPEC_FUZZ_EXAMPLES`` scales it (fuzz_support).

After the fuzzer, the regression tests of what it found across the three specs: arguments checked
before the data, results too large for memory, 0-d inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, seed
from hypothesis import strategies as st

import fuzz_api
import fuzz_support as F
import refs
from argument_checks import huge_broadcast, refused_quickly
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


# --- every argument is checked before the data is touched -----------------------------------------

def test_other_arguments_are_checked_before_the_data():
    """Found by the API fuzzer: a bad argument beside a huge input is named at once (nothing scanned,
    copied or allocated)."""
    import quantspec.litert as L
    import quantspec.onnx as O
    import quantspec.tf as T
    from quantspec import errors

    xf, xi = huge_broadcast(np.float32), huge_broadcast(np.int8)
    cases = [
        (lambda: O.quantize_linear(xf, np.float32(0.1), np.int8(0), axis=7, block_size=2), errors.QuantSpecError),
        (lambda: O.dequantize_linear(xi, np.float32(0.1), np.uint8(0)), errors.DTypeError),
        (lambda: T.quantize(xf, 1.0, -1.0, "qint8"), errors.InvalidArgumentError),
        (lambda: T.quantize_and_dequantize_v2(xf, num_bits=99), errors.RangeError),
        (lambda: T.fake_quant_with_min_max_args(xf, num_bits=1), errors.RangeError),
        (lambda: L.quantize(xf, L.QuantParams([0.1, 0.2], 0, 1)), errors.ShapeError),
        (lambda: L.quantize_weights(xf, L.QuantParams(0.1, 3)), errors.InvalidArgumentError),
        (lambda: L.quantize_weights(huge_broadcast(np.float64), L.QuantParams(0.1, 3)), errors.InvalidArgumentError),
        (lambda: L.quantize_bias(xf, L.QuantParams(0.1, 1)), errors.InvalidArgumentError),
        (lambda: L.dequantize(xi, L.QuantParams([0.1, 0.2], 0, 5)), errors.AxisError),
        (lambda: L.fixedpoint.multiply_by_quantized_multiplier(huge_broadcast(np.int64), 1 << 30, 99), errors.QuantSpecError),
    ]
    for call, error in cases:
        refused_quickly(call, error)


# --- a result too large for memory is a quantspec error, before anything is allocated -------------

def _too_large_calls():
    import quantspec.litert as L
    import quantspec.onnx as O
    import quantspec.tf as T

    p = L.QuantParams(0.1, 0)
    return {
        "onnx.quantize_linear": lambda x: O.quantize_linear(x, np.float32(0.1), np.int8(0)),
        "onnx.quantize_linear_packed": lambda x: O.quantize_linear_packed(x, np.float32(0.1), output_dtype="int4"),
        "onnx.dequantize_linear": lambda x: O.dequantize_linear(np.broadcast_to(np.int8(3), x.shape), np.float32(0.1)),
        "onnx.pack": lambda x: O.pack(np.broadcast_to(np.int8(3), x.shape)),
        "tf.quantize": lambda x: T.quantize(x, -1.0, 1.0, "qint8"),
        "tf.dequantize": lambda x: T.dequantize(np.broadcast_to(np.int8(3), x.shape), -1.0, 1.0),
        "tf.quantize_and_dequantize_v2": lambda x: T.quantize_and_dequantize_v2(x, -1.0, 1.0, range_given=True),
        "tf.quantize_and_dequantize_v3": lambda x: T.quantize_and_dequantize_v3(x, -1.0, 1.0, 8),
        "tf.quantize_and_dequantize_v4": lambda x: T.quantize_and_dequantize_v4(x),
        "tf.fake_quant_with_min_max_args": lambda x: T.fake_quant_with_min_max_args(x),
        "tf.fake_quant_with_min_max_vars": lambda x: T.fake_quant_with_min_max_vars(x, -1.0, 1.0),
        "tf.fake_quant_with_min_max_vars_per_channel": lambda x: T.fake_quant_with_min_max_vars_per_channel(
            x, np.full(x.shape[-1], -1, np.float32), np.ones(x.shape[-1], np.float32)),
        "litert.quantize": lambda x: L.quantize(x, p),
        "litert.quantize_weights": lambda x: L.quantize_weights(x, p),
        "litert.quantize_bias": lambda x: L.quantize_bias(x, p),
        "litert.dequantize": lambda x: L.dequantize(np.broadcast_to(np.int8(3), x.shape), p),
        "litert.fixedpoint.multiply_by_quantized_multiplier": lambda x: L.fixedpoint.multiply_by_quantized_multiplier(
            np.broadcast_to(np.int32(3), x.shape), 1 << 30, 1),
        "litert.fixedpoint.saturating_rounding_doubling_high_mul (broadcast)":
            lambda x: L.fixedpoint.saturating_rounding_doubling_high_mul(
                np.broadcast_to(np.int32(1), (2 ** (x.size.bit_length() // 2), 1)),
                np.broadcast_to(np.int32(1), (1, x.size // 2 ** (x.size.bit_length() // 2)))),
        "big-endian x": lambda x: O.quantize_linear(np.broadcast_to(np.array(0.5, ">f4"), x.shape), np.float32(0.1)),
    }


@pytest.mark.parametrize("n", [31, 40, 58])
@pytest.mark.parametrize("name", sorted(_too_large_calls()))
def test_huge_results_are_too_large_errors(name, n, monkeypatch):
    """Found by the API fuzzer: a result too large for memory is a quantspec error (a TooLargeError,
    also a MemoryError), raised before anything is allocated."""
    from quantspec import errors
    from quantspec._semantics import arrays

    monkeypatch.setattr(arrays, "_MEMORY_LIMIT", [1 << 30])     # a 1 GiB machine, wherever the test runs
    x = huge_broadcast(np.float32, n, shape=(2 ** (n - 8), 2 ** 8))   # 256 channels on the last axis
    e = refused_quickly(lambda: _too_large_calls()[name](x), errors.TooLargeError)
    assert isinstance(e, MemoryError) and isinstance(e, ValueError)
    assert "bytes" in str(e) and e.argument
    if "broadcast" not in name or n < 58:   # (at 2^58 an operand is already too large for its work arrays)
        assert f"{2 ** n} elements" in str(e)


def test_a_result_that_fits_in_memory_still_runs(monkeypatch):
    """Found by the API fuzzer (results too large for memory are refused): what fits still runs."""
    import quantspec.onnx as O
    from quantspec._semantics import arrays

    monkeypatch.setattr(arrays, "_MEMORY_LIMIT", [1 << 30])
    x = np.broadcast_to(np.float32(0.5), (1000, 1000))
    assert O.quantize_linear(x, np.float32(0.1), np.int8(0)).tolist() == np.full((1000, 1000), 5, np.int8).tolist()


# --- a 0-d input gives 0-d arrays, everywhere -----------------------------------------------------

def _zero_d_calls():
    import quantspec.litert as L
    import quantspec.onnx as O
    import quantspec.tf as T
    from quantspec.litert import fixedpoint as F

    x, q, p = np.array(0.7, np.float32), np.array(3, np.int8), L.QuantParams(0.1, 0)
    i = np.array(-12345, np.int32)
    s = np.array(1 << 30, np.int32)
    return {
        "litert.quantize": lambda: L.quantize(x, p),
        "litert.quantize_weights": lambda: L.quantize_weights(x, p),
        "litert.quantize_weights (python float)": lambda: L.quantize_weights(0.7, p),
        "litert.quantize_weights (per-tensor, own range)": lambda: L.quantize_weights(x, L.weight_params(x, None)),
        "litert.quantize_bias": lambda: L.quantize_bias(x, p),
        "litert.dequantize": lambda: L.dequantize(q, p),
        "onnx.quantize_linear": lambda: O.quantize_linear(x, np.float32(0.1)),
        "onnx.dequantize_linear": lambda: O.dequantize_linear(q, np.float32(0.1)),
        "onnx.unpack": lambda: O.unpack(b"\x03", "int8", ()),
        "tf.quantize": lambda: T.quantize(x, -1.0, 1.0, "qint8"),
        "tf.dequantize": lambda: T.dequantize(q, -1.0, 1.0),
        "tf.quantize_and_dequantize_v2": lambda: T.quantize_and_dequantize_v2(x, -1.0, 1.0, range_given=True),
        "tf.fake_quant_with_min_max_args": lambda: T.fake_quant_with_min_max_args(x),
        "tf.fake_quant_with_min_max_vars": lambda: T.fake_quant_with_min_max_vars(x, -1.0, 1.0),
        "fixedpoint.quantize_multiplier": lambda: F.quantize_multiplier(np.array(0.3)),
        "fixedpoint.saturating_rounding_doubling_high_mul": lambda: F.saturating_rounding_doubling_high_mul(i, s),
        "fixedpoint.rounding_divide_by_pot": lambda: F.rounding_divide_by_pot(i, np.array(3)),
        "fixedpoint.multiply_by_quantized_multiplier": lambda: F.multiply_by_quantized_multiplier(i, s, np.array(1)),
        "fixedpoint.multiply_by_quantized_multiplier single": lambda: F.multiply_by_quantized_multiplier(
            i, s, np.array(1), rounding="single"),
        "fixedpoint.multiply_by_quantized_multiplier_smaller_than_one_exp":
            lambda: F.multiply_by_quantized_multiplier_smaller_than_one_exp(i, s, np.array(-1)),
        "fixedpoint.multiply_by_quantized_multiplier_greater_than_one":
            lambda: F.multiply_by_quantized_multiplier_greater_than_one(i, s, np.array(1)),
        "fixedpoint.multiply_by_quantized_multiplier_int64":
            lambda: F.multiply_by_quantized_multiplier_int64(i, s, np.array(1)),
        "fixedpoint.saturating_rounding_multiply_by_pot": lambda: F.saturating_rounding_multiply_by_pot(i, 3),
        "fixedpoint.saturating_left_shift": lambda: F.saturating_left_shift(i, 3),
        "fixedpoint.wrap_int32": lambda: F.wrap_int32(np.array(1 << 40)),
        "fixedpoint.saturate_int32": lambda: F.saturate_int32(np.array(1 << 40)),
        "fixedpoint.rounding_half_sum": lambda: F.rounding_half_sum(i, s),
        "fixedpoint.count_leading_zeros": lambda: F.count_leading_zeros(i),
        "fixedpoint.exp_on_interval_between_negative_one_quarter_and_0_excl":
            lambda: F.exp_on_interval_between_negative_one_quarter_and_0_excl(np.array(-(1 << 28), np.int32)),
        "fixedpoint.exp_on_negative_values": lambda: F.exp_on_negative_values(i, 5),
        "fixedpoint.one_over_one_plus_x_for_x_in_0_1": lambda: F.one_over_one_plus_x_for_x_in_0_1(s),
        "fixedpoint.one_minus_x_over_one_plus_x_for_x_in_0_1": lambda: F.one_minus_x_over_one_plus_x_for_x_in_0_1(s),
        "fixedpoint.logistic": lambda: F.logistic(i, 5),
        "fixedpoint.tanh": lambda: F.tanh(i, 5),
        "fixedpoint.log_x_for_x_greater_than_or_equal_to_1":
            lambda: F.log_x_for_x_greater_than_or_equal_to_1(np.array(1 << 28, np.int32), 5, 5),
        "fixedpoint.get_reciprocal": lambda: F.get_reciprocal(np.array(1000, np.int32), 12),
        "fixedpoint.get_inv_sqrt_quantized_multiplier_exp":
            lambda: F.get_inv_sqrt_quantized_multiplier_exp(np.array(1000, np.int32), -1),
        "fixedpoint.rescale": lambda: F.rescale(i, 5, 8),
    }


@pytest.mark.parametrize("name", sorted(_zero_d_calls()))
def test_zero_d_inputs_give_zero_d_arrays(name):
    """Found by the API fuzzer: a 0-d input gives 0-d arrays, everywhere."""
    result = _zero_d_calls()[name]()
    for r in (result if isinstance(result, tuple) else (result,)):
        assert type(r) is np.ndarray and r.shape == (), (name, type(r), r)
