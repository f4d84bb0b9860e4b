"""Bad input to the LiteRT half gets a quantspec error (argument, rule, value), never a builtin
ValueError / TypeError / OverflowError from Python or numpy, a numpy warning, or a silently wrong
answer: QuantParams and the converter's parameter functions, the exported functions of
quantspec.litert.fixedpoint, and the ``quantspec run`` / ``quantspec quantize --spec litert`` options."""

from __future__ import annotations

import time
from importlib.resources import files

import numpy as np
import pytest

import quantspec.litert as ql
from argument_checks import huge_broadcast, refused_quickly
from quantspec.cli import main
from quantspec.errors import DTypeError, QuantSpecError, RangeError, ShapeError
from quantspec.litert import fixedpoint as fp

Q = ql.QuantParams


def _raises(cls, match, call):
    """``call()`` raises exactly a quantspec ``cls`` (not a builtin error that merely subclasses the same base)."""
    with pytest.raises(QuantSpecError) as info:
        call()
    assert isinstance(info.value, cls), f"{type(info.value).__name__}: {info.value}"
    assert info.value.argument and info.value.rule
    if match is not None:
        info.match(match)
    return info.value


# ---------------------------------------------------------------------------------------------
# QuantParams and the converter's parameters
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("scale", ["abc", "0.5", 1j, {}, object(), True, np.array([True]), [0.5, "x"]])
def test_quantparams_refuses_a_scale_that_is_not_a_real_number(scale):
    e = _raises(DTypeError, r"^scale: must be a real number", lambda: Q(scale))
    assert e.argument == "scale"


def test_quantparams_refuses_ragged_scales_and_zero_points():
    _raises(ShapeError, r"^scale: must be a scalar or a non-empty 1-D array", lambda: Q([1.0, [2.0, 3.0]]))
    _raises(ShapeError, r"^zero_point: must be a scalar or a 1-D array", lambda: Q(0.5, [[1], [2, 3]]))


@pytest.mark.filterwarnings("error")
def test_quantparams_zero_points_beyond_int64():
    _raises(RangeError, r"^zero_point: must fit in int64 \(got 1e\+30\)", lambda: Q(0.5, 1e30))
    _raises(RangeError, r"^zero_point: must fit in int64", lambda: Q(0.5, np.uint64(2 ** 64 - 1)))


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("scale, shown, why", [(1e40, r"1e\+40", "overflows to inf"),
                                               (np.float64(-1e300) * -1, r"1e\+300", "overflows to inf"),
                                               ([0.5, 1e39], r"1e\+39", "overflows to inf"),
                                               (1e-50, r"1e-50", "underflows to 0")])
def test_a_scale_outside_float32_is_refused_where_used_like_inf_without_a_warning(scale, shown, why):
    """A scale that is not a finite float32 > 0 is accepted by the constructor (models can hold one;
    the checker reports it) and refused by every function that uses it; a float64 beyond the float32
    range becomes inf (0 below it) without numpy's overflow warning, and the error shows the value given."""
    p = Q(scale, 0, 0)
    assert not np.all(np.isfinite(p.scale) & (p.scale > 0))
    x = np.zeros(p.scale.size, np.float32)
    for call in (lambda: ql.quantize(x, p), lambda: ql.dequantize(x.astype(np.int8), p)):
        _raises(RangeError, rf"^params\.scale: must be finite and > 0 \(got {shown}\)\. .*{why}", call)
    _raises(RangeError, r"^params\.scale: must be finite and > 0 \(got inf\)$",
            lambda: ql.quantize(np.zeros(1, np.float32), Q(np.inf)))


@pytest.mark.filterwarnings("error")
def test_activation_params_outside_float32():
    _raises(RangeError, r"^min: must lie within the float32 range.*\(got -1e\+300\)",
            lambda: ql.activation_params(np.float64(-1e300), 1))
    _raises(RangeError, r"^max: must lie within the float32 range.*\(got 1e\+39\)",
            lambda: ql.activation_params(0, 1e39))
    _raises(RangeError, r"^min: must be finite \(got -inf\)", lambda: ql.activation_params(-np.inf, 1))
    _raises(RangeError, r"^max: gives a range wider than float32", lambda: ql.activation_params(-3e38, 3e38))


@pytest.mark.filterwarnings("error")
def test_weights_and_biases_outside_float32():
    _raises(RangeError, r"^w: must lie within the float32 range.*\(got 1e\+39\)", lambda: ql.weight_params([[1e39]]))
    _raises(RangeError, r"^w: must lie within the float32 range.*\(got -1e\+39\)",
            lambda: ql.weight_params(np.array([[1.0, -1e39]]), None))
    _raises(RangeError, r"^w: must be finite", lambda: ql.weight_params([[np.nan, 1e39]]))
    _raises(RangeError, r"^w: must lie within the float32 range",
            lambda: ql.quantize_weights(np.array([1e39, 1.0]), Q(0.1)))
    _raises(RangeError, r"^bias: must lie within the float32 range",
            lambda: ql.adjust_for_bias(Q(0.1), Q(0.1), [1e39]))
    _raises(RangeError, r"^b: must lie within the float32 range",
            lambda: ql.quantize_bias(np.array([1.0, 1e39]), Q(0.1)))
    # infinities and NaN given as such stay data for the bias (SafeCast), as before
    assert ql.quantize_bias(np.array([np.inf, np.nan, 1.0]), Q(0.1)).tolist() == [2 ** 31 - 1, 0, 10]


@pytest.mark.filterwarnings("error")
def test_bias_scales_outside_float32():
    _raises(RangeError, r"^weight_params: gives a bias scale that is 0 or not finite in float32 \(got inf\)",
            lambda: ql.bias_params(Q(1e38), Q(10.0)))
    _raises(RangeError, r"^weight_params: gives a bias scale", lambda: ql.bias_params(Q(3e38), Q([1e10, 1.0])))
    # the widened weight scale |b| / BIAS_MAX / input scale overflows float32
    for w in (Q(1e-6), Q([1e-6, 1e-6])):
        _raises(RangeError, r"^bias: needs a weight scale .* beyond the float32 range",
                lambda: ql.adjust_for_bias(Q(1e-30), w, [1e30] * len(w)))
    # a tiny bias scale: 1 / scale is inf in float32, and quantizing gives the saturated values quietly
    assert ql.quantize_bias(np.array([1.0, 0.0]), Q([1e-45, 1e-45])).tolist() == [2 ** 31 - 1, 0]


# ---------------------------------------------------------------------------------------------
# fixedpoint: every exported function checks its arguments
# ---------------------------------------------------------------------------------------------

INT_BITS = "must lie in \\[0, 31\\]"
BAD_FIXEDPOINT_CALLS = [
    # shapes that do not broadcast
    ("mbqm", lambda: fp.multiply_by_quantized_multiplier([1, 2, 3], [1 << 30, 1 << 29], 0), ShapeError,
     r"^multiplier: its shape must broadcast with that of x, \(3,\) \(got \(2,\)\)"),
    ("mbqm shift", lambda: fp.multiply_by_quantized_multiplier([1, 2, 3], 1 << 30, [0, 1]), ShapeError,
     r"^shift: its shape must broadcast with that of x and multiplier"),
    ("mbqm single", lambda: fp.multiply_by_quantized_multiplier([1, 2, 3], [1, 2], 0, rounding="single"),
     ShapeError, "^multiplier: "),
    ("mbqm < 1", lambda: fp.multiply_by_quantized_multiplier_smaller_than_one_exp([1, 2], [1, 2, 3], 0),
     ShapeError, "^multiplier: "),
    ("mbqm > 1", lambda: fp.multiply_by_quantized_multiplier_greater_than_one([1, 2], 1, [0, 1, 2]),
     ShapeError, "^shift: "),
    ("mbqm int64", lambda: fp.multiply_by_quantized_multiplier_int64([1, 2], [1, 2, 3], 0), ShapeError,
     "^multiplier: "),
    ("srdhm", lambda: fp.saturating_rounding_doubling_high_mul([1, 2], [1, 2, 3]), ShapeError, "^b: "),
    ("rdbpot", lambda: fp.rounding_divide_by_pot([1, 2], [1, 2, 3]), ShapeError, "^exponent: "),
    ("half sum", lambda: fp.rounding_half_sum([1, 2], [1, 2, 3]), ShapeError, "^b: "),
    ("ragged x", lambda: fp.multiply_by_quantized_multiplier([1, [2, 3]], 1 << 30, 0), ShapeError, "^x: "),
    ("ragged real", lambda: fp.quantize_multiplier([1.0, [2.0, 3.0]]), ShapeError, "^real: "),
    # integer-bit counts: gemmlowp's FixedPoint<int32, I> has 0 <= I <= 31
    ("one(32)", lambda: fp.one(32), RangeError, rf"^integer_bits: {INT_BITS} \(got 32\)"),
    ("one(-1)", lambda: fp.one(-1), RangeError, rf"^integer_bits: {INT_BITS} \(got -1\)"),
    ("one(1.5)", lambda: fp.one(1.5), DTypeError, r"^integer_bits: must be a single integer"),
    ("one(True)", lambda: fp.one(True), DTypeError, r"^integer_bits: must be a single integer"),
    ("exp 31", lambda: fp.exp_on_negative_values(-100, 31), RangeError,
     r"^integer_bits: must lie in \[0, 29\] \(got 31\)\. .*ConstantPOT<-2>"),
    ("exp 30", lambda: fp.exp_on_negative_values(-100, 30), RangeError, r"^integer_bits: must lie in \[0, 29\]"),
    ("logistic 31", lambda: fp.logistic(100, 31), RangeError, r"^integer_bits: must lie in \[0, 29\]"),
    ("logistic None", lambda: fp.logistic(100, None), DTypeError, r"^integer_bits: must be a single integer"),
    ("tanh 32", lambda: fp.tanh(100, 32), RangeError, r"^integer_bits: must lie in \[0, 28\]"),
    ("tanh 29", lambda: fp.tanh(100, 29), RangeError, r"^integer_bits: must lie in \[0, 28\]"),
    ("rescale src", lambda: fp.rescale(100, 40, 4), RangeError, rf"^src_integer_bits: {INT_BITS} \(got 40\)"),
    ("rescale dst", lambda: fp.rescale(100, 4, -1), RangeError, rf"^dst_integer_bits: {INT_BITS}"),
    ("log out bits", lambda: fp.log_x_for_x_greater_than_or_equal_to_1(5, 12, 3), RangeError,
     r"^output_integer_bits: must lie in \[4, 30\] \(got 3\)"),
    ("log out 31", lambda: fp.log_x_for_x_greater_than_or_equal_to_1(5, 12, 31), RangeError,
     r"^output_integer_bits: must lie in \[4, 30\]"),
    ("log in bits", lambda: fp.log_x_for_x_greater_than_or_equal_to_1(5, 32, 7), RangeError,
     rf"^input_integer_bits: {INT_BITS}"),
    ("reciprocal", lambda: fp.get_reciprocal(5, 40), RangeError, rf"^x_integer_digits: {INT_BITS}"),
    ("inv sqrt", lambda: fp.get_inv_sqrt_quantized_multiplier_exp(5, 2), RangeError,
     r"^reverse_shift: must be -1 or 1 \(.*\) \(got 2\)"),
    ("radius float", lambda: fp.calculate_input_radius(1.5, 2), DTypeError, r"^input_integer_bits: must be a single"),
    ("radius str", lambda: fp.calculate_input_radius(5, "2"), DTypeError, r"^input_left_shift: must be a single"),
    ("radius bits", lambda: fp.calculate_input_radius(5, 2, 40), RangeError, r"^total_signed_bits: must lie in"),
    ("radius ib", lambda: fp.calculate_input_radius(16, 2, 15), RangeError,
     r"^input_integer_bits: must lie in \[0, 15\]"),
    ("radius shift", lambda: fp.calculate_input_radius(5, -1), RangeError, r"^input_left_shift: must lie in"),
    # exponents that are template parameters: one integer
    ("srmbpot array", lambda: fp.saturating_rounding_multiply_by_pot([1, 2], [1, 2, 3]), DTypeError,
     r"^exponent: must be a single integer"),
    ("srmbpot range", lambda: fp.saturating_rounding_multiply_by_pot([1, 2], 32), RangeError,
     r"^exponent: must lie in \[-31, 31\]"),
    ("left shift array", lambda: fp.saturating_left_shift(1, [3]), DTypeError, r"^exponent: must be a single integer"),
    # values: integers, in range
    ("saturate str", lambda: fp.saturate_int32("a"), DTypeError, r"^x: must be an integer"),
    ("saturate big", lambda: fp.saturate_int32(2 ** 64), RangeError, r"^x: must lie in"),
    ("wrap str", lambda: fp.wrap_int32("a"), DTypeError, r"^x: must be an integer"),
    ("wrap float", lambda: fp.wrap_int32(np.array([1.5])), DTypeError, r"^x: must be an integer"),
    ("wrap big", lambda: fp.wrap_int32(1 << 70), RangeError, r"^x: must lie in"),
    ("clz str", lambda: fp.count_leading_zeros("a"), DTypeError, r"^x: must be an integer"),
    ("clz big", lambda: fp.count_leading_zeros(1 << 32), RangeError, r"^x: must lie in \[-2147483648, 4294967295\]"),
    ("half sum str", lambda: fp.rounding_half_sum("a", 1), DTypeError, r"^a: must be an integer"),
    ("exp str", lambda: fp.exp_on_negative_values("a", 5), DTypeError, r"^a: must be an integer"),
    ("exp big", lambda: fp.exp_on_negative_values(-(1 << 40), 5), RangeError, r"^a: must lie in"),
    ("quarter float", lambda: fp.exp_on_interval_between_negative_one_quarter_and_0_excl(-0.1), DTypeError, "^a: "),
    ("1/(1+x) big", lambda: fp.one_over_one_plus_x_for_x_in_0_1(1 << 40), RangeError, "^a: must lie in"),
    ("(1-x)/(1+x) str", lambda: fp.one_minus_x_over_one_plus_x_for_x_in_0_1("a"), DTypeError, "^a: "),
    ("logistic float", lambda: fp.logistic(np.array([0.5]), 4), DTypeError, "^a: "),
    ("tanh big", lambda: fp.tanh(1 << 31, 4), RangeError, "^a: must lie in"),
    ("rescale float", lambda: fp.rescale(1.5, 0, 1), DTypeError, "^x: "),
    ("log float", lambda: fp.log_x_for_x_greater_than_or_equal_to_1(1.5, 12, 5), DTypeError, "^x: "),
    ("reciprocal big", lambda: fp.get_reciprocal(1 << 31, 12), RangeError, "^x: must lie in"),
    ("inv sqrt str", lambda: fp.get_inv_sqrt_quantized_multiplier_exp("a", -1), DTypeError, "^x: "),
    # real multipliers
    ("qm > 1 list", lambda: fp.quantize_multiplier_greater_than_one([2.0]), DTypeError,
     r"^real: must be a single real number"),
    ("qm < 1 str", lambda: fp.quantize_multiplier_smaller_than_one_exp("a"), DTypeError,
     r"^real: must be a single real number"),
    ("qm < 1 huge", lambda: fp.quantize_multiplier_smaller_than_one_exp(10 ** 400), RangeError,
     r"^real: must be within the float64 range"),
    ("qm > 1 rounding", lambda: fp.quantize_multiplier_greater_than_one(2.0, rounding="up"), QuantSpecError,
     r"^rounding: "),
]


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("call, cls, match", [c[1:] for c in BAD_FIXEDPOINT_CALLS],
                         ids=[c[0] for c in BAD_FIXEDPOINT_CALLS])
def test_fixedpoint_functions_check_their_arguments(call, cls, match):
    _raises(cls, match, call)


def test_every_exported_fixedpoint_function_is_called_with_bad_arguments_here():
    import inspect
    import sys

    source = inspect.getsource(sys.modules[__name__])
    missing = [name for name in fp.__all__ if callable(getattr(fp, name)) and f"fp.{name}(" not in source]
    assert not missing


@pytest.mark.filterwarnings("error")
def test_fixedpoint_boundaries_still_compute():
    """The edges of the allowed ranges give gemmlowp's values, not errors."""
    assert fp.one(0) == 2 ** 31 - 1 and fp.one(1) == 1 << 30 and fp.one(31) == 1
    assert fp.one(np.int64(3)) == 1 << 28
    a = np.array([0, -1, -(1 << 20), -(2 ** 31)])
    assert fp.exp_on_negative_values(a, 29).tolist()[0] == 2 ** 31 - 1
    assert fp.exp_on_negative_values(a, 0).tolist()[0] == 2 ** 31 - 1
    assert fp.logistic(np.array([0]), 29).tolist() == [1 << 30]
    assert fp.tanh(np.array([0]), 28).tolist() == [0]
    assert fp.rescale(np.array([1]), 31, 0).tolist() == [2 ** 31 - 1]          # 1.0 saturates in Q0.31
    assert fp.rescale(np.array([1 << 30, (1 << 30) - 1]), 0, 31).tolist() == [1, 0]   # Q31.0: ties away from 0
    for ob in (4, 30):                                  # log(1.0) = 0, in every output format
        assert fp.log_x_for_x_greater_than_or_equal_to_1(np.array([1 << 19]), 12, ob).tolist() == [0]
    fp.get_reciprocal(np.array([1, 1 << 19]), 31)
    for rs in (-1, 1, np.int32(-1)):
        fp.get_inv_sqrt_quantized_multiplier_exp(np.array([4]), rs)
    assert fp.calculate_input_radius(5, 62) == 0 and fp.calculate_input_radius(0, 0, 0) == 0
    assert fp.saturating_rounding_multiply_by_pot([1, -1], np.int8(-31)).tolist() == [0, 0]
    assert fp.saturating_left_shift(1, np.array(3)).tolist() == 8
    # integers of every width and plain Python integers; wrap_int32 takes int64/uint64 values whole
    assert fp.wrap_int32([2 ** 31, -1, 2 ** 64 - 1]).tolist() == [-(2 ** 31), -1, -1]
    assert fp.wrap_int32(np.array([2 ** 63], np.uint64)).tolist() == [0]
    assert fp.count_leading_zeros(np.array([2 ** 32 - 1], np.uint32)).tolist() == [0]
    assert fp.saturate_int32(np.array([2 ** 40, -(2 ** 40)])).tolist() == [2 ** 31 - 1, -(2 ** 31)]
    assert fp.multiply_by_quantized_multiplier(np.array([[1], [2]], np.int8), [1 << 30, 1 << 30, 1 << 30],
                                               np.int16(1)).shape == (2, 3)
    assert fp.quantize_multiplier_greater_than_one(np.float32(2.0)) == (1 << 30, 2)
    assert fp.quantize_multiplier_smaller_than_one_exp(np.array(0.5)) == (1 << 30, 0)


def test_the_kernels_calls_are_unchecked_only_where_they_were():
    """wrap_int32 on an integer array (the kernels' call) is the core reduction, no copy of checks."""
    from quantspec._semantics.intcast import wrap_int32 as core

    x = np.array([2 ** 40 + 5, -(2 ** 33) - 1], np.int64)
    assert fp.wrap_int32(x).tolist() == core(x).tolist() == [5, -1]


# ---------------------------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------------------------

MODEL = str(files("quantspec") / "data" / "cnn.tflite")


@pytest.mark.parametrize("seed", ["-1", "-7", "x", "1.5"])
def test_run_refuses_a_bad_random_seed(seed, capsys):
    assert main(["run", MODEL, "--random", seed]) == 2
    err = capsys.readouterr().err
    assert "argument --random: must be a non-negative integer seed" in err and "Traceback" not in err


def test_run_takes_seed_zero(capsys):
    assert main(["run", MODEL, "--random", "0"]) == 0
    assert "1 output(s)" in capsys.readouterr().out


CONTRADICTIONS = [
    (["--range", "-3", "3", "--scale", "0.1", "--zero-point", "5"], "--scale", "--range"),
    (["--range", "-3", "3", "--zero-point", "5"], "--zero-point", "--range"),
    (["--range", "-3", "3", "--axis", "1"], "--axis", "--range"),
    (["--from-data", "--scale", "0.1"], "--scale", "--from-data"),
    (["--from-data", "--zero-point", "0"], "--zero-point", "--from-data"),
    (["--from-data", "--axis", "0"], "--axis", "--from-data"),
    (["--weights", "--per-tensor", "--scale", "0.1,0.2,0.3,0.4"], "--scale", "--per-tensor"),
    (["--weights", "--per-tensor", "--axis", "1"], "--axis", "--per-tensor"),
    (["--per-tensor", "--scale", "0.1"], "--per-tensor", "--weights"),
    (["--bias", "--per-tensor", "--scale", "0.1"], "--per-tensor", "--weights"),
    (["--weights", "--zero-point", "3"], "--zero-point", "--weights"),
    (["--weights", "--scale", "0.1", "--zero-point", "3"], "--zero-point", "--weights"),
    (["--bias", "--scale", "0.1", "--zero-point", "3"], "--zero-point", "--bias"),
]


@pytest.mark.parametrize("flags, option, other", CONTRADICTIONS, ids=[" ".join(c[0]) for c in CONTRADICTIONS])
def test_quantize_refuses_contradictory_options(tmp_path, capsys, flags, option, other):
    np.save(tmp_path / "x.npy", np.linspace(-3, 3, 16, dtype=np.float32).reshape(4, 4))
    assert main(["quantize", str(tmp_path / "x.npy"), str(tmp_path / "q.npy"), "--spec", "litert", *flags]) == 2
    err = capsys.readouterr().err
    assert f"InvalidArgumentError: {option}: " in err and other in err, err
    assert not (tmp_path / "q.npy").exists()


@pytest.mark.parametrize("flags, expected", [
    (["--weights", "--per-tensor", "--scale", "0.1"], lambda x: ql.quantize_weights(x, Q(0.1))),
    (["--weights", "--scale", "0.1,0.2,0.3,0.4", "--zero-point", "0", "--axis", "1"],
     lambda x: ql.quantize_weights(x, Q([0.1, 0.2, 0.3, 0.4], 0, 1))),
    (["--weights", "--axis", "1"], lambda x: ql.quantize_weights(x, ql.weight_params(x, 1))),
    (["--weights", "--per-tensor"], lambda x: ql.quantize_weights(x, ql.weight_params(x, None))),
    (["--bias", "--scale", "0.01", "--zero-point", "0"], lambda x: ql.quantize_bias(x, Q(0.01))),
    (["--scale", "0.1", "--zero-point", "3", "--axis", "1"], lambda x: ql.quantize(x, Q(0.1, 3))),
])
def test_quantize_consistent_options_still_work(tmp_path, flags, expected):
    x = np.linspace(-3, 3, 16, dtype=np.float32).reshape(4, 4)
    np.save(tmp_path / "x.npy", x)
    assert main(["quantize", str(tmp_path / "x.npy"), str(tmp_path / "q.npy"), "--spec", "litert", *flags]) == 0
    got = np.load(tmp_path / "q.npy")
    want = expected(x)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@pytest.mark.filterwarnings("error")
def test_quantize_takes_float64_beyond_float32_as_infinities_without_a_warning():
    got = ql.quantize(np.array([1e300, -1e300, 0.5]), ql.QuantParams(0.5, 0))
    assert got.tolist() == ql.quantize(np.array([np.inf, -np.inf, 0.5], np.float32), ql.QuantParams(0.5, 0)).tolist()


@pytest.mark.parametrize("zp", [2**63 - 1, -(2**63), 2**31, -(2**31) - 1])
def test_dequantize_refuses_a_zero_point_beyond_int32(zp):
    # q - zero_point wrapped around int64: [-5, 7] with 2^63 - 1 gave [9.2e17, -9.2e17]
    for shape in ((2,), (1 << 17,)):                       # the numpy path and the fast kernels
        q = np.resize(np.array([-5, 7], np.int32), shape)
        with pytest.raises(RangeError, match="params.zero_point.*int32"):
            ql.dequantize(q, ql.QuantParams([0.1], [zp]))
    with pytest.raises(RangeError, match="params.zero_point"):
        ql.dequantize(np.zeros((2, 3), np.int8), ql.QuantParams([0.1, 0.1], [0, zp], 0))


def test_dequantize_at_the_int32_zero_point_edges():
    q = np.array([-(2**31), -5, 0, 7, 2**31 - 1], np.int32)
    for zp in (2**31 - 1, -(2**31)):
        got = ql.dequantize(q, ql.QuantParams([0.5], [zp]))
        want = (np.float64(np.float32(0.5)) * (q.astype(np.float64) - zp)).astype(np.float32)
        assert got.tobytes() == want.tobytes()


def test_weight_params_checks_the_axis_before_reading_the_weights():
    """Found by the API fuzzer: every argument is checked before the data is touched (a bad axis
    beside huge weights is named at once)."""
    import quantspec.litert as L
    from quantspec.errors import AxisError

    for axis in (5, 1.0, np.float64(0), True, "0"):
        refused_quickly(lambda: L.weight_params(huge_broadcast(np.float32), axis=axis), AxisError)
    # a valid call over a broadcast view reads only its distinct values
    t0 = time.process_time()
    p = L.weight_params(huge_broadcast(np.float32, shape=(3, 2 ** 56)), axis=0)
    assert time.process_time() - t0 < 1.0 and p.scale.tolist() == [np.float32(0.5 / 127)] * 3
