"""The LiteRT int8 op table, as data (the LiteRT 8-bit quantization specification,
https://ai.google.dev/edge/litert/models/quantization_spec, and what the converter and the
interpreter were measured to do).

:data:`OP_TABLE` maps a builtin operator name to an :class:`OpRule`: for every op of the 8-bit
spec's list (plus QUANTIZE's float input and DEQUANTIZE, which appear at the edges of int8 models)
it says, per input and output tensor, what the spec requires — and, for every requirement, what the
LiteRT interpreter itself does with a model that breaks it.  The kernels' prepare steps read it (a
rule that LiteRT enforces makes the kernel raise exactly where LiteRT fails), the model checker
reads it, and the docs render it (:func:`markdown_table`).  No rule is written anywhere else.

Schema
------
``OP_TABLE[name]`` is an :class:`OpRule`:

- ``name``, ``builtin`` (the ``BuiltinOperator`` number of the flatbuffer schema), ``in_spec``
  (False only for DEQUANTIZE, which the spec's list does not name), ``inputs`` and ``outputs``
  (tuples of :class:`TensorRule`, in operator order), ``limits`` (LiteRT limitations that are not
  spec rules: configurations the interpreter aborts on or computes with undefined behaviour),
  ``notes``.
- A :class:`TensorRule` has a ``name`` (``"input"``, ``"filter"``, ``"bias"``, ``"axis"``...), a
  ``role`` (:data:`ACTIVATION`: a quantized run-time tensor; :data:`WEIGHT`; :data:`BIAS`;
  :data:`PARAMETER`: a non-quantized integer tensor such as a shape, axis, padding or index tensor;
  :data:`ANY`: anything, e.g. SHAPE's input), ``dtypes`` (quantspec type names, the spec's first),
  ``range`` (allowed stored values), ``granularity`` (:data:`PER_TENSOR`, :data:`PER_AXIS`,
  :data:`PER_TENSOR_OR_AXIS` or None for unquantized tensors), ``quantized_dimension`` (per-axis
  tensors), ``optional`` (may be absent, index -1), ``variadic`` (CONCATENATION: the rule repeats
  for every input) and ``restrictions``.
- A :class:`Restriction` is one checkable requirement with a stable ``rule`` id (see
  :data:`RULES`), the spec's wording (``text``), its parameters (``value``: the fixed scale or zero
  point; ``("output", 0)`` for same-as rules; the weight axis...), and ``litert``: a tuple of
  :class:`Enforcement` — what LiteRT does on a violation, possibly depending on a ``condition``
  (:data:`PER_TENSOR_WEIGHTS` / :data:`PER_AXIS_WEIGHTS`).
- An :class:`Enforcement` has an ``action`` — :data:`REJECTS` (the interpreter returns an error:
  ``allocate_tensors`` at ``stage="prepare"``, ``invoke`` at ``stage="eval"``), :data:`ABORTS` (a
  ``TFLITE_CHECK`` kills the process) or :data:`SILENT` (it runs and computes a result that is not
  the spec's) — the ``check`` LiteRT makes in words, the ``tolerance`` of that check where it has
  one (:class:`Tolerance`: exact, absolute, or relative to the output scale, in float32 or double,
  as LiteRT computes it) and the ``source`` (file and function).

Every REJECTS entry is confirmed against ai-edge-litert 2.3.0 by ``tests/test_litert_optable.py``
(a model breaking the rule fails in the interpreter, one just inside the tolerance runs).

:func:`findings` evaluates the rules of one operator over :class:`~.kernels.base.TensorSpec`
descriptions; :func:`enforce` raises the quantspec error for the first finding LiteRT itself
rejects or aborts on (the kernels call it from ``prepare``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import DTypeError, InvalidArgumentError, RangeError, ShapeError, UnsupportedError

__all__ = [
    "OP_TABLE", "OpRule", "TensorRule", "Restriction", "Enforcement", "Tolerance", "Finding", "RULES",
    "ACTIVATION", "WEIGHT", "BIAS", "PARAMETER", "ANY", "PER_TENSOR", "PER_AXIS", "PER_TENSOR_OR_AXIS",
    "REJECTS", "ABORTS", "SILENT", "PER_TENSOR_WEIGHTS", "PER_AXIS_WEIGHTS", "ONE_SCALE", "SEVERAL_SCALES",
    "findings", "enforce", "markdown_table", "builtin_name", "TYPE_VERDICTS", "Limit", "LIMITS", "UNDEFINED",
    "SIXTEEN_BY_EIGHT", "limits_markdown", "RESOLVERS", "RESOLVER_TYPES", "RUNS", "ResolverVerdict",
    "RESOLVER_VERDICTS", "resolver_verdict", "resolvers_markdown", "XNNPACK_RUNTIME", "XNNPACK_ABORTS",
    "XNNPACK_SAME_QUANTIZATION", "VERDICTS_MEASURED_WITH",
]

# roles
ACTIVATION, WEIGHT, BIAS, PARAMETER, ANY = "activation", "weight", "bias", "parameter", "any"
# granularities
PER_TENSOR, PER_AXIS, PER_TENSOR_OR_AXIS = "per-tensor", "per-axis", "per-tensor or per-axis"
# what LiteRT does on a violation
REJECTS, ABORTS, SILENT = "rejects", "aborts", "silent"
# conditions under which an enforcement applies: on the op's weights, or on the tensor itself.  LiteRT
# kernels read a tensor's legacy (scale, zero point) pair, which is (0, 0) when it has several scales.
PER_TENSOR_WEIGHTS, PER_AXIS_WEIGHTS = "per-tensor weights", "per-axis weights"
ONE_SCALE, SEVERAL_SCALES = "the tensor has one scale", "the tensor has several scales"

#: rule id -> what it requires
RULES: dict[str, str] = {
    "dtype": "the tensor's type is one of the rule's dtypes",
    "granularity": "the number of (scale, zero point) pairs fits the granularity: exactly one per-tensor; "
                   "one, or one per slice of the quantized dimension, per-axis",
    "scale": "every scale is finite and > 0",
    "zero-point-range": "every zero point lies in the tensor type's range",
    "weight-zero-point": "every weight zero point is 0 (symmetric weights)",
    "weight-range": "weight values lie in [-127, 127] (-128 is not used)",
    "weight-axis": "per-axis weights are quantized along the op's dimension, one scale per slice",
    "bias-zero-point": "every bias zero point is 0",
    "bias-scale": "bias scale[c] = input scale * weight scale[c] (to float32 rounding)",
    "bias-granularity": "the bias is per-axis exactly when the weights are, with as many scales",
    "fixed-scale": "the output scale is the op's fixed scale",
    "fixed-zero-point": "the output zero point is the op's fixed zero point",
    "same-scale": "the tensor's scale equals the output's",
    "same-zero-point": "the tensor's zero point equals the output's",
}


@dataclass(frozen=True)
class Tolerance:
    """How closely LiteRT's own check compares a found value with the expected one.

    ``kind``: ``"exact"`` (``found == expected``), ``"absolute"`` (``|found - expected| <= value``)
    or ``"relative-to-output-scale"`` (``|found - expected| / output_scale <= value``), computed in
    ``precision`` (``"float32"`` or ``"float64"``) exactly as LiteRT computes it."""

    kind: str = "exact"
    value: float = 0.0
    precision: str = "float64"

    def accepts(self, found: float, expected: float, output_scale: float | None = None) -> bool:
        t = np.float32 if self.precision == "float32" else np.float64
        f, e = t(found), t(expected)
        if self.kind == "exact":
            return bool(f == e)
        with np.errstate(all="ignore"):
            delta = t(abs(f - e))
            if self.kind == "absolute":
                # TF_LITE_ENSURE_NEAR fails when found < expected - value or expected + value < found:
                # a NaN passes it
                return not bool(f < e - t(self.value) or e + t(self.value) < f)
            if self.kind == "relative-to-output-scale":
                return bool(delta / t(output_scale) <= t(self.value))
        raise ValueError(f"unknown tolerance kind {self.kind!r}")  # pragma: no cover - table bug

    def __str__(self) -> str:
        if self.kind == "exact":
            return f"exact ({self.precision})"
        if self.kind == "absolute":
            return f"|found - expected| <= {self.value:.6g} ({self.precision})"
        return f"|found - expected| / output scale <= {self.value:g} ({self.precision})"


EXACT = Tolerance("exact", 0.0, "float64")


@dataclass(frozen=True)
class Enforcement:
    """What the LiteRT interpreter does with a model that breaks a restriction."""

    action: str                          # REJECTS, ABORTS or SILENT
    stage: str | None = None             # "prepare" or "eval" for REJECTS / ABORTS
    check: str = ""                      # LiteRT's own test, in words ("" = none)
    tolerance: Tolerance | None = None   # the tolerance of that test
    source: str = ""                     # file: function
    condition: str | None = None         # applies only under this condition (PER_TENSOR_WEIGHTS...)

    @property
    def fails(self) -> bool:
        """True when LiteRT does not produce a result (it rejects or aborts)."""
        return self.action in (REJECTS, ABORTS)


@dataclass(frozen=True)
class Restriction:
    """One requirement of the spec on one tensor, and LiteRT's enforcement of it."""

    rule: str                                # an id of RULES
    text: str                                # the spec's wording
    litert: tuple[Enforcement, ...]
    value: Any = None                        # fixed value, referenced tensor, axis...


@dataclass(frozen=True)
class TensorRule:
    """The spec's requirements on one input or output of an op."""

    name: str
    role: str
    dtypes: tuple[str, ...]
    range: tuple[int, int] | None = None
    granularity: str | None = None
    quantized_dimension: int | None = None
    restrictions: tuple[Restriction, ...] = ()
    optional: bool = False
    variadic: bool = False

    def restriction(self, rule: str) -> Restriction | None:
        for r in self.restrictions:
            if r.rule == rule:
                return r
        return None


@dataclass(frozen=True)
class OpRule:
    """The spec's requirements on one builtin operator."""

    name: str
    builtin: int
    inputs: tuple[TensorRule, ...]
    outputs: tuple[TensorRule, ...]
    in_spec: bool = True
    limits: tuple[str, ...] = ()
    notes: str = ""

    def input_rule(self, index: int) -> TensorRule | None:
        """The rule of input ``index`` (the variadic rule repeats)."""
        if index < len(self.inputs):
            return self.inputs[index]
        if self.inputs and self.inputs[-1].variadic:
            return self.inputs[-1]
        return None


#: what LiteRT does on a violated limit beyond REJECTS and ABORTS: it runs, and what it computes
#: depends on undefined behaviour of its C++ (a shift out of range, a read past a buffer), so
#: quantspec cannot reproduce it and refuses the model
UNDEFINED = "undefined"


@dataclass(frozen=True)
class Limit:
    """A check LiteRT's kernels make beyond the spec's tensor rules (a multiplier range, a shape, a
    type a kernel does not have): where a model breaks it, LiteRT rejects it (an error at
    ``allocate_tensors`` for ``stage="prepare"``, at ``invoke`` for ``"eval"``), aborts (a
    ``TFLITE_CHECK`` kills the process) or runs with undefined behaviour (:data:`UNDEFINED`).

    ``rule`` is a stable id (the checker's ``Violation.rule``); ``requires`` says in words what holds
    on a model LiteRT runs; ``data_dependent`` marks the limits that depend on the input values, not
    the model (the interpreter raises at run time; the checker cannot decide them).  quantspec's
    kernels raise exactly where a model breaks a limit, each error tagged with its rule id, and the
    checker reports them by preparing each operator as the interpreter does."""

    rule: str
    ops: tuple[str, ...]
    requires: str
    action: str                 # REJECTS, ABORTS or UNDEFINED
    stage: str                  # "prepare" or "eval"
    source: str = ""
    data_dependent: bool = False

    @property
    def fails(self) -> bool:
        """True when LiteRT does not produce a result (it rejects or aborts)."""
        return self.action in (REJECTS, ABORTS)


_BINARY_OPS = ("ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "PRELU", "LESS", "LESS_EQUAL",
               "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL")
_FUSED_OPS = ("ADD", "SUB", "MUL", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "AVERAGE_POOL_2D",
              "MAX_POOL_2D", "TRANSPOSE_CONV")
#: ops with a 16x8 kernel (int16 activations, int8 weights) in LiteRT's reference resolver
SIXTEEN_BY_EIGHT = frozenset({
    "ADD", "SUB", "MUL", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "MEAN", "SOFTMAX", "LOGISTIC", "TANH",
    "AVERAGE_POOL_2D", "MAX_POOL_2D", "QUANTIZE", "DEQUANTIZE", "CONCATENATION", "RESHAPE", "SQUEEZE", "TRANSPOSE",
    "GATHER", "PAD", "PADV2", "SLICE", "STRIDED_SLICE", "SPLIT", "SPLIT_V", "PACK", "UNPACK", "BATCH_MATMUL", "GELU",
    "RSQRT", "RELU", "RELU6", "LEAKY_RELU", "PRELU", "MAXIMUM", "MINIMUM", "TRANSPOSE_CONV", "RESIZE_BILINEAR",
    "SPACE_TO_DEPTH", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "ARG_MAX", "SHAPE"})

_K = "tflite/kernels/"
_LIMITS: list[Limit] = [
    Limit("activation-range", _FUSED_OPS, "the fused activation's bounds divided by the output scale fit int32",
          REJECTS, "prepare", _K + "kernel_util.cc: CalculateActivationRangeQuantized"),
    Limit("broadcast-rank", _BINARY_OPS, "broadcast shapes of rank 8 or less (6 for the 6-D kernels)", ABORTS,
          "eval", _K + "internal/reference/broadcast_loop.h: BroadcastBinaryOpSimple"),
    Limit("add-output-multiplier", ("ADD", "SQUARED_DIFFERENCE"),
          "the output multiplier 2 max(s1, s2) / (2^20 s_out) (2^15 for int16; SQUARED_DIFFERENCE: "
          "(2 max(s1, s2))^2 / (2^14 s_out)) is below 1", ABORTS, "prepare",
          _K + "add.cc, squared_difference.cc: Prepare (QuantizeMultiplierSmallerThanOneExp CHECK)"),
    Limit("sub-output-multiplier", ("SUB",), "the output multiplier 2 max(s1, s2) / (2^20 s_out) is not exactly 1",
          ABORTS, "prepare", _K + "sub.cc: PrepareGeneralSubOp (QuantizeMultiplierSmallerThanOneExp CHECK)"),
    Limit("sub-output-multiplier-above-one", ("SUB",), "an output multiplier above 1 is applied to values small "
          "enough that LiteRT's RoundingDivideByPOT with a negative exponent gives the same result on every code "
          "path", UNDEFINED, "eval", _K + "internal/common.h: MultiplyByQuantizedMultiplierSmallerThanOneExp",
          data_dependent=True),
    Limit("comparison-scale-one", ("LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"),
          "no input scale is exactly 1.0", ABORTS, "eval",
          _K + "comparisons.cc: ComparisonQuantized (QuantizeMultiplierGreaterThanOne CHECK)"),
    Limit("comparison-large-scale", ("LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"),
          "inputs with a scale > 1 stay small enough that RoundingDivideByPOT with a negative exponent gives the "
          "same result on every code path", UNDEFINED, "eval", _K + "comparisons.cc", data_dependent=True),
    Limit("softmax-input-multiplier", ("SOFTMAX", "LOG_SOFTMAX"), "beta * input scale * 2^26 > 1", ABORTS,
          "prepare", _K + "activations.cc: SoftmaxPrepare (QuantizeMultiplierGreaterThanOne CHECK)"),
    Limit("log-softmax-reverse-multiplier", ("LOG_SOFTMAX",), "the reverse scaling multiplier is below 1",
          ABORTS, "prepare", _K + "activations.cc: LogSoftmaxPrepare (QuantizeMultiplierSmallerThanOneExp CHECK)"),
    Limit("softmax-sum", ("SOFTMAX",), "fewer than 512 values of a row lie near its maximum (int8)", ABORTS,
          "eval", _K + "internal/reference/softmax.h: GetReciprocal exponent CHECK", data_dependent=True),
    Limit("int16-zero-point", tuple(sorted(SIXTEEN_BY_EIGHT)), "int16 activations have zero point 0", REJECTS,
          "prepare", _K + "*.cc: Prepare (MUL: at Eval)"),
    Limit("int16-output-scale", ("SOFTMAX", "LOGISTIC", "TANH"), "the int16 output scale is 1/32768 (SOFTMAX: "
          "within 0.001/32768)", REJECTS, "prepare", _K + "activations.cc: SoftmaxPrepare, SigmoidPrepare, "
          "TanhPrepare"),
    Limit("int16-pot-scales", ("ADD", "SUB"), "with power-of-two int16 scales (pot_scale_int16), one input has the "
          "output's scale and the other one no larger", REJECTS, "prepare", _K + "add.cc, sub.cc: Prepare"),
    Limit("int16-pot-broadcast", ("ADD",), "the power-of-two int16 ADD has inputs of one size (it does not "
          "broadcast)", ABORTS, "eval", _K + "internal/types.h: MatchingElementsSize CHECK"),
    Limit("int16-bias-type", ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"), "an int16 kernel's bias is int64, "
          "or int32 where quantized_bias_type says INT32 (DEPTHWISE_CONV_2D: int64)", REJECTS, "prepare",
          _K + "conv.cc, depthwise_conv.cc, fully_connected.cc: Prepare"),
    Limit("int16-bias-read-as-int64", ("CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"), "an int32 bias of an int16 kernel comes with "
          "quantized_bias_type INT32 (without it the kernel reads the bias as int64, past its end)", UNDEFINED,
          "eval", _K + "conv.cc: EvalQuantizedPerChannel16x8; fully_connected.cc: FullyConnectedInt16"),
    Limit("no-int16-kernel", ("SQUARED_DIFFERENCE",), "the op has an int16 kernel (SQUARED_DIFFERENCE has none)",
          REJECTS, "eval", _K + "squared_difference.cc: Eval"),
    Limit("multiplier-shift", ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "MUL", "MEAN", "SUM", "QUANTIZE", "BATCH_MATMUL",
                               "RELU", "RELU6", "LEAKY_RELU", "PRELU", "RSQRT", "HARD_SWISH", "SOFTMAX"),
          "every effective scale is below 2^30 (a larger one needs a left shift of 31 or more, undefined in C++)",
          UNDEFINED, "eval", _K + "internal/common.cc: MultiplyByQuantizedMultiplier"),
    Limit("hard-swish-output-multiplier", ("HARD_SWISH",), "input scale / 128 / output scale is below 1",
          REJECTS, "prepare", _K + "activations.cc: HardSwishPrepare"),
    Limit("batch-matmul-shape", ("BATCH_MATMUL",), "ranks 2 to 5, batch dimensions that broadcast, equal "
          "accumulation depths", REJECTS, "prepare", _K + "batch_matmul.cc: Prepare"),
    Limit("prelu-shape", ("PRELU",), "the alpha broadcasts to the input's shape", REJECTS, "prepare",
          _K + "activations.cc: PreluPrepare"),
    Limit("pool-empty-window", ("AVERAGE_POOL_2D",), "every window has a tap inside the image", REJECTS, "eval",
          _K + "internal/reference/integer_ops/pooling.h: AveragePool"),
    Limit("l2norm-activation", ("L2_NORMALIZATION",), "the fused activation is NONE", REJECTS, "prepare",
          _K + "l2norm.cc: Prepare"),
    Limit("conv-bias", ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV"), "CONV_2D has a bias; a third input of DEPTHWISE_CONV_2D is "
          "present; the bias has one element per output channel", REJECTS, "prepare",
          _K + "conv.cc, depthwise_conv.cc: Prepare"),
    Limit("op-shape", ("STRIDED_SLICE", "SPLIT", "SPLIT_V", "PACK", "UNPACK", "TRANSPOSE_CONV"),
          "the op's shapes, axes and counts are ones its kernel accepts (non-zero strides, an axis inside the rank, "
          "splits that add up, as many outputs as the options say)", REJECTS, "prepare",
          _K + "strided_slice.cc, split.cc, split_v.cc, pack.cc, unpack.cc, transpose_conv.cc: Prepare"),
    Limit("strided-slice-unwritten", ("STRIDED_SLICE",), "every output element is written: a shrunk axis starts "
          "inside the dimension and runs forwards; with offset, the end stays inside", UNDEFINED, "eval",
          _K + "internal/reference/strided_slice.h: StridedSlice (the output stays partly uninitialised)"),
    Limit("rsqrt-negative", ("RSQRT",), "no input is below the zero point", REJECTS, "eval",
          _K + "elementwise.cc: RsqrtEvalQuantized", data_dependent=True),
    Limit("index-out-of-range", ("GATHER",), "every index lies inside the gathered dimension", REJECTS, "eval",
          _K + "gather.cc: Eval", data_dependent=True),
]

#: rule id -> Limit
LIMITS: Mapping[str, Limit] = {lim.rule: lim for lim in _LIMITS}


# -------------------------------------------------------------------------------------------------
# building blocks
# -------------------------------------------------------------------------------------------------

K = "tflite/kernels/"
_SILENT = (Enforcement(SILENT, check="not checked"),)
_UNCHECKED_SCALE = (Enforcement(SILENT, check="not checked: kernels divide by the scale; a zero or "
                                "non-finite scale gives meaningless multipliers (or a TFLITE_CHECK abort "
                                "in QuantizeMultiplier*)"),)
_TYPE_CHECK = (Enforcement(REJECTS, "prepare", "the kernel's type checks: a type with no kernel path fails "
                           "Prepare (uint8 and int16 select LiteRT's legacy-uint8 and 16x8 kernels instead)",
                           source=K + "*.cc: Prepare"),)
_PER_TENSOR_ACT = (Enforcement(SILENT, check="not checked: a tensor with several scales reaches the int8 "
                               "kernels as scale 0, zero point 0 (TfLiteTensor.params, set only for one scale); "
                               "most kernels then compute meaningless values, some fail a later check or abort",
                               source="tflite/core/subgraph.cc: GetLegacyQuantization"),)


def _common(dtypes: tuple[str, ...], zp_litert=_SILENT, granularity_litert=_PER_TENSOR_ACT) -> tuple[Restriction, ...]:
    out = [Restriction("dtype", "data_type: " + " or ".join(dtypes), _TYPE_CHECK)]
    out.append(Restriction("granularity", "granularity: per-tensor", granularity_litert))
    out.append(Restriction("scale", "scale finite and > 0", _UNCHECKED_SCALE))
    out.append(Restriction("zero-point-range", "zero_point in [-128, 127]", zp_litert))
    return tuple(out)


def act(name: str = "input", *extra: Restriction, zp_litert=_SILENT, dtypes=("int8",), optional=False,
        variadic=False) -> TensorRule:
    """An int8 per-tensor activation."""
    return TensorRule(name, ACTIVATION, dtypes, (-128, 127), PER_TENSOR, None,
                      _common(dtypes, zp_litert) + tuple(extra), optional=optional, variadic=variadic)


def param(name: str, dtypes: tuple[str, ...] = ("int32",), optional: bool = False) -> TensorRule:
    """A non-quantized integer parameter tensor (shape, axis, paddings, indices...)."""
    return TensorRule(name, PARAMETER, dtypes, None, None, None,
                      (Restriction("dtype", "data_type: " + " or ".join(dtypes), _TYPE_CHECK),), optional=optional)


def same_as_output(litert: tuple[Enforcement, ...] = _SILENT, what: str = "Input and outputs must all have same "
                   "scale/zero_point") -> tuple[Restriction, Restriction]:
    return (Restriction("same-scale", what, litert, ("output", 0)),
            Restriction("same-zero-point", what, litert, ("output", 0)))


def fixed(scale: float, zero_point: int, scale_litert, zp_litert) -> tuple[Restriction, Restriction]:
    text = f"(scale, zero_point) = ({_frac(scale)}, {zero_point})"
    return (Restriction("fixed-scale", text, scale_litert, scale),
            Restriction("fixed-zero-point", text, zp_litert, zero_point))


def _frac(v: float) -> str:
    return {1 / 256: "1.0 / 256.0", 1 / 128: "1.0 / 128.0", 16 / 256: "16.0 / 256.0"}.get(v, repr(v))


def _rejects(stage: str, check: str, source: str, tolerance: Tolerance | None = EXACT, condition=None) -> Enforcement:
    return Enforcement(REJECTS, stage, check, tolerance, source, condition)


def weights(dim: int | None, zp_litert, axis_litert, per_axis_text: str, granularity: str) -> TensorRule:
    """Symmetric int8 weights, per-axis on ``dim``."""
    restrictions = (
        Restriction("dtype", "data_type: int8", _TYPE_CHECK),
        Restriction("scale", "scale finite and > 0", _UNCHECKED_SCALE),
        Restriction("weight-zero-point", "restriction: zero_point = 0", zp_litert, 0),
        Restriction("weight-range", "range: [-127, 127]",
                    (Enforcement(SILENT, check="not checked: -128 is used as -128"),), (-127, 127)),
        Restriction("weight-axis", per_axis_text, axis_litert, dim),
    )
    return TensorRule("filter", WEIGHT, ("int8",), (-127, 127), granularity, dim, restrictions)


def bias(zp_litert, scale_litert, granularity: str, optional: bool = False,
         dtype_litert=_TYPE_CHECK) -> TensorRule:
    restrictions = (
        Restriction("dtype", "data_type: int32", dtype_litert),
        Restriction("bias-zero-point", "restriction: zero_point = 0", zp_litert, 0),
        Restriction("bias-scale", "restriction: (scale, zero_point) = (input0_scale * input1_scale[...], 0)",
                    scale_litert),
        Restriction("bias-granularity", "granularity: per-axis exactly when the weights are, one scale per "
                    "weight scale", (Enforcement(SILENT, check="not checked: the kernels ignore the bias "
                                                 "scales and add the raw int32 values"),)),
    )
    return TensorRule("bias", BIAS, ("int32",), (-(1 << 31), (1 << 31) - 1), granularity, 0, restrictions,
                      optional=optional)


def out(*extra: Restriction, zp_litert=_SILENT) -> TensorRule:
    return act("output", *extra, zp_litert=zp_litert)


_SAME_SCALE_DCHECK = (Enforcement(SILENT, check="only a TFLITE_DCHECK (compiled out): the int8 values are "
                                  "selected/averaged as they are, read with the output's parameters",
                                  source=K + "pooling.cc: GenericPrepare"),)
_DATA_MOVEMENT = (Enforcement(SILENT, check="not checked: the int8 bytes are moved unchanged, so the output "
                              "reads them with its own parameters"),)


def _same_rejected(source: str, stage: str = "prepare") -> tuple[Enforcement, ...]:
    return (_rejects(stage, "TF_LITE_ENSURE_EQ on the float scales and the zero points (exact)", source),)


def _unary_same(name: str, builtin: int, params: tuple[TensorRule, ...] = (), litert=_DATA_MOVEMENT,
                notes: str = "") -> OpRule:
    return OpRule(name, builtin, (act("input", *same_as_output(litert)),) + params, (out(),), notes=notes)


def _binary_free(name: str, builtin: int, limits: tuple[str, ...] = (), zp_litert=_SILENT) -> OpRule:
    return OpRule(name, builtin, (act("input1", zp_litert=zp_litert), act("input2", zp_litert=zp_litert)),
                  (out(zp_litert=zp_litert),), limits=limits)


def _comparison(name: str, builtin: int) -> OpRule:
    return OpRule(name, builtin, (act("input1"), act("input2")),
                  (TensorRule("output", ANY, ("bool",)),),
                  limits=("comparison-scale-one", "comparison-large-scale", "broadcast-rank"),
                  notes="inputs may have different scales and zero points; both are rescaled to a common "
                        "fixed-point scale (left shift 8) before comparing")


_CONV_AXIS = (_rejects("prepare", "#scales must be 1 or the output channel count, and (per-axis) equal "
                       "filter.dims[quantized_dimension]; the quantized dimension itself is not checked",
                       K + "conv.cc: Prepare; kernel_util.cc: PopulateConvolutionQuantizationParams", None),)
_DW_AXIS = (_rejects("prepare", "#scales must be 1 or the output channel count (filter.dims[3]), and (per-axis) "
                     "equal filter.dims[quantized_dimension]; the quantized dimension itself is not checked",
                     K + "depthwise_conv.cc: Prepare; kernel_util.cc: PopulateConvolutionQuantizationParams",
                     None),)
#: ops whose LiteRT weight check counts the scales and does not look at the quantized dimension
_AXIS_COUNTED_ONLY = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D"})
_FC_AXIS = (_rejects("prepare", "per-axis weights need quantized_dimension == 0 and #scales == "
                     "filter.dims[0]", K + "fully_connected.cc: PrepareImpl", None),)
_BIAS_ZP_REJECTED = (_rejects("prepare", "TF_LITE_ENSURE_EQ(bias zero point, 0) on the legacy zero point",
                              K + "conv.cc / depthwise_conv.cc: Prepare", condition=ONE_SCALE),
                     Enforcement(SILENT, check="not checked: with several scales the legacy zero point LiteRT "
                                 "checks is 0; the kernels ignore the bias zero point", condition=SEVERAL_SCALES))
_BIAS_SCALE_UNCHECKED = (Enforcement(SILENT, check="not checked for int8 (only legacy uint8 checks "
                                     "|s_in*s_w - s_b| / s_out <= 0.02): the raw int32 values are added",
                                     source=K + "kernel_util.cc: PopulateConvolutionQuantizationParams"),)
_FC_BIAS_SCALE = (
    _rejects("prepare", "GetQuantizedConvolutionMultipler: |double(s_in) * double(s_w) - double(s_b)| / "
             "double(s_out) <= 0.02, with the first bias and weight scales",
             K + "fully_connected.cc: PrepareImpl; kernel_util.cc: GetQuantizedConvolutionMultipler",
             Tolerance("relative-to-output-scale", 0.02, "float64"), PER_TENSOR_WEIGHTS),
    Enforcement(SILENT, check="not checked: the raw int32 values are added", condition=PER_AXIS_WEIGHTS),
)

_FC_NOTE = ("The spec text says per-tensor weights and bias; LiteRT runs per-axis FULLY_CONNECTED weights "
            "(quantized dimension 0) with a per-axis bias, as the current converter writes them, and quantspec "
            "treats that as conformant.")

_OPS: list[OpRule] = [
    _binary_free("ADD", 0, limits=("add-output-multiplier", "broadcast-rank", "activation-range",
                                   "int16-zero-point", "int16-pot-scales", "int16-pot-broadcast")),
    _unary_same("AVERAGE_POOL_2D", 1, litert=_SAME_SCALE_DCHECK),
    OpRule("CONCATENATION", 2,
           (act("input", *same_as_output(_same_rejected(K + "concatenation.cc: Prepare")), variadic=True),),
           (out(),)),
    OpRule("CONV_2D", 3,
           (act("input"),
            weights(0, (_rejects("prepare", "every filter zero point must be 0", K + "conv.cc: Prepare"),),
                    _CONV_AXIS, "granularity: per-axis (dim = 0)", PER_AXIS),
            bias(_BIAS_ZP_REJECTED, _BIAS_SCALE_UNCHECKED, PER_AXIS)),
           (out(),)),
    OpRule("DEPTHWISE_CONV_2D", 4,
           (act("input"),
            weights(3, (Enforcement(SILENT, check="not checked: the per-channel kernel ignores the filter "
                                    "zero point"),), _DW_AXIS, "granularity: per-axis (dim = 3)", PER_AXIS),
            bias(_BIAS_ZP_REJECTED, _BIAS_SCALE_UNCHECKED, PER_AXIS, optional=True)),
           (out(),)),
    OpRule("DEQUANTIZE", 6, (act("input"),), (TensorRule("output", ANY, ("float",)),), in_spec=False,
           notes="not in the spec's list; int8 -> float32 at the model's edges"),
    OpRule("FULLY_CONNECTED", 9,
           (act("input"),
            weights(0, (Enforcement(SILENT, check="not checked for int8 (only int4/int2 weights): the "
                                    "per-tensor kernel subtracts the zero point, the per-channel kernel ignores "
                                    "it"),), _FC_AXIS, "granularity: per-tensor (per-axis dim = 0 accepted)",
                    PER_TENSOR_OR_AXIS),
            bias((Enforcement(SILENT, check="not checked: the raw int32 values are added"),), _FC_BIAS_SCALE,
                 PER_TENSOR_OR_AXIS, optional=True,
                 dtype_litert=(_rejects("prepare", "int32 or int64 bias (CheckTypes)",
                                        K + "fully_connected.cc: CheckTypes", None),))),
           (out(),), notes=_FC_NOTE),
    OpRule("L2_NORMALIZATION", 11, (act("input"),),
           (out(*fixed(1 / 128, 0,
                       (_rejects("prepare", "output scale == 1.0/128 (float widened to double)",
                                 K + "l2norm.cc: Prepare"),),
                       (_rejects("prepare", "output zero point == 0", K + "l2norm.cc: Prepare"),))),),
           limits=("l2norm-activation",)),
    OpRule("LOGISTIC", 14, (act("input"),),
           (out(*fixed(1 / 256, -128,
                       (_rejects("prepare", "output scale == 1.0/256 (float widened to double)",
                                 K + "activations.cc: SigmoidPrepare"),),
                       (Enforcement(SILENT, check="not checked by the int8 LUT path: the LUT adds the "
                                    "output's own zero point", source=K + "activations.cc: SigmoidPrepare"),))),)),
    _unary_same("MAX_POOL_2D", 17, litert=_SAME_SCALE_DCHECK),
    _binary_free("MUL", 18),
    _unary_same("RESHAPE", 22, (param("shape", ("int32",), optional=True),)),
    _unary_same("RESIZE_BILINEAR", 23, (param("size"),)),
    OpRule("SOFTMAX", 25, (act("input"),),
           (out(*fixed(1 / 256, -128,
                       (_rejects("prepare", "TF_LITE_ENSURE_NEAR(output scale, 1.f/256, 0.001f/256) in float32",
                                 K + "activations.cc: SoftmaxPrepare",
                                 Tolerance("absolute", float(np.float32(0.001) / np.float32(256)), "float32")),),
                       (_rejects("prepare", "output zero point == -128", K + "activations.cc: SoftmaxPrepare"),))),),
           limits=("softmax-input-multiplier", "softmax-sum", "int16-zero-point", "int16-output-scale")),
    _unary_same("SPACE_TO_DEPTH", 26),
    OpRule("TANH", 28, (act("input"),),
           (out(*fixed(1 / 128, 0,
                       (Enforcement(SILENT, check="not checked: the LUT quantizes with the output's own "
                                    "parameters", source=K + "activations.cc: TanhPrepare"),),
                       (Enforcement(SILENT, check="not checked", source=K + "activations.cc: TanhPrepare"),))),)),
    OpRule("PAD", 34, (act("input", *same_as_output()), param("paddings", ("int32", "int64", "int16"))),
           (out(zp_litert=(_rejects("eval", "the output zero point must fit int8 (it is the pad value)",
                                    K + "pad.cc: EvalInt", None),)),)),
    OpRule("GATHER", 36, (act("params", *same_as_output()), param("indices", ("int32", "int64", "int16"))),
           (out(),)),
    OpRule("BATCH_TO_SPACE_ND", 37,
           (act("input", *same_as_output(_same_rejected(K + "batch_to_space_nd.cc: Prepare"))),
            param("block_shape"), param("crops")), (out(),)),
    OpRule("SPACE_TO_BATCH_ND", 38,
           (act("input", *same_as_output(_same_rejected(K + "space_to_batch_nd.cc: Prepare"))),
            param("block_shape"), param("paddings")), (out(),)),
    _unary_same("TRANSPOSE", 39, (param("perm", ("int32", "int64")),)),
    OpRule("MEAN", 40, (act("input"), param("axis")), (out(),)),
    _binary_free("SUB", 41, zp_litert=(_rejects("prepare", "zero points of both inputs and the output in "
                                                "[-128, 127]", K + "sub.cc: PrepareGeneralSubOp", None),),
                 limits=("sub-output-multiplier", "sub-output-multiplier-above-one", "broadcast-rank",
                         "activation-range", "int16-zero-point", "int16-pot-scales")),
    _unary_same("SQUEEZE", 43),
    OpRule("LOG_SOFTMAX", 50, (act("input"),),
           (out(*fixed(16 / 256, 127,
                       (_rejects("prepare", "output scale == 16.0/256 (float widened to double)",
                                 K + "activations.cc: LogSoftmaxPrepare"),),
                       (_rejects("prepare", "output zero point == 127", K + "activations.cc: LogSoftmaxPrepare"),))),),
           limits=("softmax-input-multiplier", "log-softmax-reverse-multiplier")),
    OpRule("MAXIMUM", 55, (act("input1", *same_as_output()), act("input2", *same_as_output())), (out(),),
           notes="the spec lists Input 0 only; its restriction ('inputs and outputs') is applied to both inputs"),
    OpRule("ARG_MAX", 56, (act("input"), param("axis", ("int32", "int64"))),
           (TensorRule("output", ANY, ("int32", "int64")),), notes="the first index wins ties"),
    OpRule("MINIMUM", 57, (act("input1", *same_as_output()), act("input2", *same_as_output())), (out(),),
           notes="the spec lists Input 0 only; its restriction ('inputs and outputs') is applied to both inputs"),
    _comparison("LESS", 58),
    OpRule("PADV2", 60,
           (act("input", *same_as_output()), param("paddings", ("int32", "int64", "int16")),
            act("constant_values", *same_as_output(_same_rejected(K + "pad.cc: EvalInt", "eval"),
                                                   "constant_values share the output's scale/zero_point"),
                optional=True)),
           (out(),)),
    _comparison("GREATER", 61),
    _comparison("GREATER_EQUAL", 62),
    _comparison("LESS_EQUAL", 63),
    OpRule("SLICE", 65, (act("input", *same_as_output()), param("begin", ("int32", "int64")),
                         param("size", ("int32", "int64"))), (out(),)),
    _comparison("EQUAL", 71),
    _comparison("NOT_EQUAL", 72),
    OpRule("SUM", 74, (act("input"), param("axis")), (out(),),
           notes="BUILTIN_REF reads int8 data as uint8 (a LiteRT bug): quantspec computes the correct sum by "
                 "default and the reference kernel's bytes with quantspec_sum_semantics='reference'"),
    OpRule("SHAPE", 77, (TensorRule("input", ANY, ("int8",)),), (TensorRule("output", ANY, ("int32", "int64")),)),
    OpRule("QUANTIZE", 114, (act("input", dtypes=("int8", "float")),),
           (act("output", zp_litert=_SILENT),),
           notes="int8 -> int8 requantizes (spec); float32 -> int8 quantizes at the model's input"),
]

#: builtin operator name -> OpRule
OP_TABLE: Mapping[str, OpRule] = {op.name: op for op in _OPS}

_INT4_FILTER = Enforcement(None, check="LiteRT has int4 filters (outside the 8-bit spec): it unpacks the constant "
                           "filter to int8 values and runs its int8 kernel, the same result as the int8 filter of "
                           "those values", source=K + "fully_connected.cc, conv.cc, depthwise_conv.cc: Prepare")

_DEQUANTIZE_WIDE = Enforcement(None, check="LiteRT's DEQUANTIZE also takes float16 (the converter's float16 "
                               "quantization) and int4 / uint4 / int2 inputs (weight-only quantization), outside the "
                               "8-bit spec: it runs them", source=K + "dequantize.cc: Prepare")

#: What LiteRT does with a tensor of one type where the spec wants another, where that is not the
#: rule's own enforcement (the kernel's type checks reject the other types):
#: (op, tensor rule name, found type) -> Enforcement.  Measured against the BUILTIN_REF interpreter
#: (tests/test_litert_checker.py).
TYPE_VERDICTS: Mapping[tuple[str, str, str], Enforcement] = {
    ("FULLY_CONNECTED", "filter", "int4"): _INT4_FILTER,
    ("CONV_2D", "filter", "int4"): _INT4_FILTER,
    ("DEPTHWISE_CONV_2D", "filter", "int4"): _INT4_FILTER,
    **{("DEQUANTIZE", "input", t): _DEQUANTIZE_WIDE for t in ("float16", "int4", "uint4", "int2")},
    ("FULLY_CONNECTED", "bias", "int64"): Enforcement(
        SILENT, check="CheckTypes accepts an int32 or an int64 bias, but the int8 kernel reads the bias as int32: "
        "the first outputs get the halves of the int64 values (wrong sums)", source=K + "fully_connected.cc: "
        "CheckTypes, EvalQuantized"),
}
_BY_NUMBER = {op.builtin: op.name for op in _OPS}


def builtin_name(number: int) -> str | None:
    """The op name of a builtin operator number, if the table has it."""
    return _BY_NUMBER.get(int(number))


# -------------------------------------------------------------------------------------------------
# evaluation
# -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Finding:
    """One broken restriction: which rule, on which tensor, expected vs found, and what LiteRT does."""

    op: str
    rule: str
    side: str                # "input" or "output"
    index: int
    tensor: str
    message: str
    expected: Any
    found: Any
    enforcement: Enforcement


def _enforcement_for(r: Restriction, weights_per_axis: bool | None, tensor_per_axis: bool | None = None) -> Enforcement:
    holds = {None: True, PER_TENSOR_WEIGHTS: weights_per_axis is False, PER_AXIS_WEIGHTS: weights_per_axis is True,
             ONE_SCALE: tensor_per_axis is False, SEVERAL_SCALES: tensor_per_axis is True}
    for e in r.litert:
        if holds.get(e.condition, False):
            return e
    return r.litert[-1]


def _legacy(p) -> tuple[float, int]:
    """The (scale, zero point) a LiteRT kernel reads: (0, 0) unless the tensor has one scale."""
    if p is None or len(p) != 1:
        return 0.0, 0
    return float(p.scale[0]), int(p.zero_point[0])


def _f32(v) -> float:
    return float(np.float32(v))


def findings(op: str, inputs: Sequence[Any], outputs: Sequence[Any]) -> list[Finding]:
    """Every restriction of ``OP_TABLE[op]`` that the tensors break.

    ``inputs`` / ``outputs`` are :class:`~quantspec.litert.kernels.base.TensorSpec` (shape, dtype,
    params, data) or None for absent optional inputs.  Only rules that can be decided from those are
    evaluated (weight values need constant data)."""
    rule_op = OP_TABLE.get(op)
    if rule_op is None:
        raise UnsupportedError("op", "is not in the LiteRT int8 op table", op)
    weights_t = inputs[1] if rule_op.name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED") \
        and len(inputs) > 1 else None
    w_per_axis = None
    if weights_t is not None and weights_t.params is not None:
        w_per_axis = weights_t.params.per_axis
    result: list[Finding] = []
    sides = [("input", i, rule_op.input_rule(i), t) for i, t in enumerate(inputs)]
    sides += [("output", i, rule_op.outputs[i] if i < len(rule_op.outputs) else None, t)
              for i, t in enumerate(outputs)]
    for side, index, trule, t in sides:
        if trule is None or t is None:
            continue
        for r in trule.restrictions:
            found = evaluate(r, trule, t, inputs, outputs, rule_op)
            if found is None:
                continue
            message, expected, value, litert_accepts = found
            e = _enforcement_for(r, w_per_axis, None if t.params is None else t.params.per_axis)
            if litert_accepts and e.fails:
                e = Enforcement(SILENT, None, "within the tolerance of LiteRT's check: " + e.check, e.tolerance,
                                e.source, e.condition)
            result.append(Finding(rule_op.name, r.rule, side, index, t.name or f"{side}{index}", message,
                                  expected, value, e))
    return result


def evaluate(r: Restriction, trule: TensorRule, t, inputs, outputs, op: OpRule):
    """None when ``t`` satisfies ``r``, else (message, expected, found, litert_accepts) where
    ``litert_accepts`` is True when LiteRT's own check has a tolerance and the value is within it."""
    p = t.params
    rule = r.rule
    if rule == "dtype":
        if t.dtype.name not in trule.dtypes:
            return f"type must be {' or '.join(trule.dtypes)}", trule.dtypes, t.dtype.name, None
        return None
    if p is None:
        if rule == "granularity" and trule.granularity is not None and t.dtype.is_int:
            return "has no quantization parameters", trule.granularity, None, None
        return None
    scales, zps = p.scale, p.zero_point
    if rule == "granularity":
        if trule.granularity == PER_TENSOR and p.per_axis:
            return "must be quantized per-tensor (one scale and zero point)", 1, len(p), None
        return None
    if rule == "scale":
        bad = ~np.isfinite(scales) | (scales <= 0)
        if np.any(bad):
            return "scales must be finite and > 0", "> 0", float(scales[bad][0]), None
        return None
    if rule == "zero-point-range":
        lo, hi = int(t.dtype.qmin), int(t.dtype.qmax)
        bad = (zps < lo) | (zps > hi)
        if t.dtype.is_int and np.any(bad):
            return f"zero points must lie in [{lo}, {hi}]", (lo, hi), int(zps[bad][0]), None
        return None
    if rule in ("weight-zero-point", "bias-zero-point"):
        if np.any(zps != 0):
            return "zero points must be 0", 0, int(zps[zps != 0][0]), None
        return None
    if rule == "weight-range":
        if t.data is not None and t.data.size and int(np.min(t.data)) < -127:
            return "weight values must lie in [-127, 127]", (-127, 127), int(np.min(t.data)), None
        return None
    if rule == "weight-axis":
        dim, n = r.value, len(p)
        if n == 1:
            return None
        if p.quantized_dimension != dim:
            # LiteRT's CONV_2D / DEPTHWISE_CONV_2D checks count the scales only: with one scale per slice
            # of both the stored and the op's dimension it runs, applying them along the op's dimension
            qd = p.quantized_dimension
            accepts = (op.name in _AXIS_COUNTED_ONLY and qd < len(t.shape) and dim < len(t.shape)
                       and n == t.shape[qd] == t.shape[dim])
            return f"per-axis weights must be quantized along dimension {dim}", dim, qd, accepts
        if dim >= len(t.shape) or n != t.shape[dim]:
            size = t.shape[dim] if dim < len(t.shape) else None
            return f"needs one scale per slice of dimension {dim}", size, n, None
        return None
    if rule == "bias-scale":
        w = inputs[1] if len(inputs) > 1 else None
        x = inputs[0]
        if w is None or w.params is None or x is None or x.params is None:
            return None
        s_in = np.float64(x.params.scale[0])
        sw = w.params.scale.astype(np.float64)
        if len(scales) not in (1, len(sw)):
            return None            # bias-granularity reports it
        expected = (s_in * sw).astype(np.float32).astype(np.float64)
        found = np.broadcast_to(scales.astype(np.float64), expected.shape)
        # the converter writes f32(double product); a float32 product differs by an ulp or so
        bad = np.abs(found - expected) > 1e-6 * np.abs(expected)
        if not np.any(bad):
            return None
        i = int(np.argmax(bad))
        accepts = None
        tol = _enforcement_for(r, w.params.per_axis).tolerance
        o = outputs[0] if outputs else None
        if tol is not None and o is not None and o.params is not None:
            accepts = tol.accepts(_legacy(p)[0], float(np.float64(_legacy(x.params)[0]) * _legacy(w.params)[0]),
                                  _legacy(o.params)[0])
        return "bias scale must be input scale * weight scale", float(expected[i]), float(found[i]), accepts
    if rule == "bias-granularity":
        w = inputs[1] if len(inputs) > 1 else None
        if w is None or w.params is None:
            return None
        if len(p) != len(w.params):
            return "the bias needs as many scales as the weights", len(w.params), len(p), None
        return None
    if rule == "fixed-scale":
        if _f32(scales[0]) == _f32(r.value):
            return None
        tol = r.litert[0].tolerance
        accepts = tol.accepts(_legacy(p)[0], r.value) if tol is not None else None
        return f"output scale must be {_frac(r.value)}", r.value, float(scales[0]), accepts
    if rule == "fixed-zero-point":
        if int(zps[0]) != r.value:
            return f"output zero point must be {r.value}", r.value, int(zps[0]), None
        return None
    if rule in ("same-scale", "same-zero-point"):
        side, k = r.value
        others = outputs if side == "output" else inputs
        other = others[k] if k < len(others) else None
        if other is None or other.params is None:
            return None
        if rule == "same-scale":
            if _f32(scales[0]) != _f32(other.params.scale[0]):
                return "scale must equal the output's", float(other.params.scale[0]), float(scales[0]), None
            return None
        if int(zps[0]) != int(other.params.zero_point[0]):
            return "zero point must equal the output's", int(other.params.zero_point[0]), int(zps[0]), None
        return None
    raise ValueError(f"unknown rule {rule!r}")  # pragma: no cover - table bug


_ERROR_FOR_RULE = {"dtype": DTypeError, "granularity": ShapeError, "weight-axis": ShapeError,
                   "zero-point-range": RangeError}


def enforce(op: str, inputs: Sequence[Any], outputs: Sequence[Any], *, stages: tuple[str, ...] = ("prepare", "eval"),
            skip: tuple[str, ...] = ()) -> list[Finding]:
    """Raise for the first broken restriction that LiteRT itself rejects or aborts on (at one of
    ``stages``); return the findings LiteRT lets through (silently computed).  Kernels call this from
    ``prepare``.  ``skip`` lists rule ids the caller checks itself (e.g. "dtype", to raise a more
    specific error)."""
    silent = []
    for f in findings(op, inputs, outputs):
        if f.rule in skip:
            continue
        if f.enforcement.fails and f.enforcement.stage in stages:
            cls = _ERROR_FOR_RULE.get(f.rule, InvalidArgumentError)
            where = f"{f.side} {f.index}" + (f" ({f.tensor})" if f.tensor else "")
            error = cls(f"{op} {where}", f"{f.message}: LiteRT {f.enforcement.action} this model at "
                        f"{f.enforcement.stage} ({f.enforcement.check})", f.found)
            error.limit = f.rule
            raise error
        silent.append(f)
    return silent


# -------------------------------------------------------------------------------------------------
# documentation
# -------------------------------------------------------------------------------------------------

def _restriction_cell(tr: TensorRule) -> str:
    parts = []
    for r in tr.restrictions:
        if r.rule in ("dtype", "scale", "granularity", "zero-point-range", "weight-range"):
            continue
        if r.rule == "same-zero-point" or r.rule == "fixed-zero-point" and tr.restriction("fixed-scale"):
            continue
        if r.rule in ("same-scale",):
            parts.append("same scale/zp as output")
        elif r.rule == "fixed-scale":
            parts.append(r.text.replace("restriction: ", ""))
        elif r.rule == "weight-axis":
            continue
        else:
            parts.append(r.text.replace("restriction: ", "").replace("granularity: ", ""))
    return "; ".join(parts)


def _enforcement_cell(tr: TensorRule) -> str:
    parts = []
    for r in tr.restrictions:
        if r.rule in ("dtype", "scale", "same-zero-point"):
            continue
        for e in r.litert:
            if e.action == SILENT and r.rule in ("granularity", "zero-point-range", "weight-range"):
                continue
            cond = f" ({e.condition})" if e.condition else ""
            tol = f", {e.tolerance}" if e.tolerance is not None and e.tolerance.kind != "exact" else ""
            what = {REJECTS: f"rejects at {e.stage}", ABORTS: f"aborts at {e.stage}", SILENT: "silent"}[e.action]
            parts.append(f"{r.rule}{cond}: {what}{tol}")
    return "; ".join(parts)


def markdown_table() -> str:
    """The op table as a Markdown table (one row per tensor), for docs/litert.md."""
    lines = ["| op (builtin) | tensor | role | dtype | range | granularity | restriction | LiteRT on a violation |",
             "|---|---|---|---|---|---|---|---|"]
    for name in sorted(OP_TABLE):
        op = OP_TABLE[name]
        first = True
        for side, rules in (("in", op.inputs), ("out", op.outputs)):
            for i, tr in enumerate(rules):
                label = f"{name} ({op.builtin})" + ("" if op.in_spec else " *") if first else ""
                first = False
                idx = f"{side} {i}{'...' if tr.variadic else ''}: {tr.name}{' (optional)' if tr.optional else ''}"
                rng = f"[{tr.range[0]}, {tr.range[1]}]" if tr.range and tr.role != BIAS else (
                    "int32" if tr.role == BIAS else "")
                gran = tr.granularity or ""
                if tr.quantized_dimension is not None and tr.role == WEIGHT:
                    gran += f" (dim {tr.quantized_dimension})"
                cells = [label, idx, tr.role, ", ".join(tr.dtypes), rng, gran, _restriction_cell(tr),
                         _enforcement_cell(tr)]
                lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)


def limits_markdown() -> str:
    """The LiteRT limits (:data:`LIMITS`) as a Markdown table, for docs/litert.md."""
    words = {REJECTS: "rejects", ABORTS: "aborts", UNDEFINED: "undefined behaviour (quantspec refuses)"}
    lines = ["| rule | ops | LiteRT requires | on a violation | decided by |", "|---|---|---|---|---|"]
    for lim in sorted(LIMITS.values(), key=lambda x: x.rule):
        ops = ", ".join(lim.ops) if len(lim.ops) <= 6 else ", ".join(lim.ops[:5]) + f", ... ({len(lim.ops)} ops)"
        what = words[lim.action] + ("" if lim.action == UNDEFINED else f" at {lim.stage}")
        decided = "the input values (run time)" if lim.data_dependent else "the model (check)"
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in (f"`{lim.rule}`", ops, lim.requires, what,
                                                                        decided)) + " |")
    return "\n".join(lines)


# -------------------------------------------------------------------------------------------------
# the three op resolvers
# -------------------------------------------------------------------------------------------------

#: LiteRT's three CPU op resolvers, by the names quantspec's kernel modes give them
RESOLVERS = ("reference", "optimized", "xnnpack")
#: resolver -> the ``OpResolverType`` of LiteRT's Python interpreter
RESOLVER_TYPES = {"reference": "BUILTIN_REF", "optimized": "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "xnnpack": "AUTO"}
#: the LiteRT release the per-resolver verdicts were measured with
VERDICTS_MEASURED_WITH = "ai-edge-litert 2.3.0 (x86-64)"
#: what a resolver does with a LiteRT limit it does not have: it runs the model (and computes what
#: the spec says: the limit is a property of another resolver's kernel, not of the model)
RUNS = "runs"

_XNN = "tflite/delegates/xnnpack/xnnpack_delegate.cc"
_XNN_RUNTIME = ("the XNNPACK delegate takes the operator and then fails to create its runtime (xnn_define_* "
                "refuses the tensor): allocate_tensors raises")
_XNN_SAME = ("XNNPACK src/subgraph/validation.c: xnn_subgraph_check_quantization_parameter_matches, called by "
             "xnn_define_max_pooling_2d, xnn_define_static_slice, xnn_define_static_resize_bilinear_2d, "
             "xnn_define_space_to_depth_2d, ...")
_XNN_ABORT = ("the XNNPACK delegate takes the QUANTIZE and then aborts the process creating its runtime (a "
              "quantization parameter XNNPACK refuses)")
#: the operators on which an XNNPACK runtime failure (kernels.xnnpack.delegate.fails) aborts the process
#: rather than raising
XNNPACK_ABORTS = ("QUANTIZE",)


@dataclass(frozen=True)
class ResolverVerdict:
    """What one resolver other than ``BUILTIN_REF`` does with a broken rule where it differs from the
    reference verdict (the op table's :class:`Enforcement` or the :class:`Limit`'s action).

    ``ops``: the operators it concerns (empty: any).  ``delegated``: for ``resolver="xnnpack"``, True
    when it holds for an operator the XNNPACK delegate takes (an operator it declines runs the
    optimized kernel, with the optimized verdict).  ``condition``: :data:`SEVERAL_SCALES` /
    :data:`ONE_SCALE` on the tensor, or None."""

    rule: str
    ops: tuple[str, ...]
    resolver: str
    enforcement: Enforcement
    delegated: bool = False
    condition: str | None = None
    #: where the tensor is, for tensor rules: "input", "output", or "input 0" (one operand)
    places: tuple[str, ...] = ("input", "output")
    #: the broken values it holds for (``scale``: "zero", "negative", "nan", "inf"; empty: any)
    values: tuple[str, ...] = ()
    #: the tensor types it holds for (empty: any)
    dtypes: tuple[str, ...] = ()

    def applies(self, rule: str, op: str | None, resolver: str, delegated: bool | None,
                tensor_per_axis: bool | None, position: str | None = None, found: Any = None,
                dtype: str | None = None, weights_per_axis: bool | None = None) -> bool:
        """Whether this entry says what ``resolver`` does; ``delegated`` None: ask for the entries
        that hold whether or not the XNNPACK delegate takes the operator (``delegated=False`` ones)."""
        if self.rule != rule or self.resolver != resolver or (self.ops and op not in self.ops):
            return False
        if delegated is None and self.delegated or delegated is False and self.delegated:
            return False
        if self.condition == SEVERAL_SCALES and tensor_per_axis is not True:
            return False
        if self.condition == ONE_SCALE and tensor_per_axis is not False:
            return False
        if self.condition == PER_TENSOR_WEIGHTS and weights_per_axis is not False:
            return False
        if self.condition == PER_AXIS_WEIGHTS and weights_per_axis is not True:
            return False
        if position is not None and not any(position == p or position.startswith(p + " ") for p in self.places):
            return False
        if self.values and value_class(found) not in self.values:
            return False
        if self.dtypes and dtype not in self.dtypes:
            return False
        return True


def value_class(found: Any) -> str | None:
    """"zero", "negative", "nan", "inf" (either sign) for a broken scale, else None."""
    if isinstance(found, (int, float, np.floating)):
        f = float(found)
        return "nan" if f != f else "inf" if f in (float("inf"), float("-inf")) else "zero" if f == 0 else \
            "negative" if f < 0 else None
    return None


#: the operators whose XNNPACK operator (xnn_define_*) requires its input and output to share one
#: quantization, and fails to be created otherwise (CONCATENATION's builtin Prepare rejects it first)
XNNPACK_SAME_QUANTIZATION = ("MAX_POOL_2D", "TRANSPOSE", "PAD", "SLICE", "SPACE_TO_DEPTH", "RESIZE_BILINEAR",
                             "CONCATENATION")

_OPT_SOFTMAX = Enforcement(RUNS, None, "the optimized kernel's Prepare builds a float32 exp table instead of the "
                           "fixed-point multipliers (no QuantizeMultiplierGreaterThanOne / SmallerThanOneExp CHECK)",
                           source=K + "activations.cc: SoftmaxPrepare, LogSoftmaxPrepare (kernel_type != kReference)")

_COMPARISONS = ("LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL")
_FC_SCALE = Enforcement(REJECTS, "prepare", "Prepare's real multiplier s_in * s_w / s_out must be finite and the "
                        "input product non-negative", source=K + "kernel_util.cc: GetQuantizedConvolutionMultipler; "
                        "fully_connected.cc: Prepare")
_ADD_SUB_SCALE = Enforcement(ABORTS, "prepare", "Prepare turns the scales into multipliers with "
                             "QuantizeMultiplierSmallerThanOneExp, whose CHECK 0 < m < 1 fails for a scale that is 0, "
                             "negative or not finite", source=K + "add.cc, sub.cc: Prepare")

#: the per-resolver verdicts that differ from the op table's (``resolver="reference"``: where
#: BUILTIN_REF itself does more than the table's tensor rule says, for some operators) or from the
#: reference one (measured with :data:`VERDICTS_MEASURED_WITH`, each resolver in a child process;
#: tests/test_litert_checker_resolvers.py)
RESOLVER_VERDICTS: tuple[ResolverVerdict, ...] = (
    # the scale rule is "silent" in the table (most kernels divide by the scale), but ADD and SUB
    # make multipliers of their scales in Prepare and CHECK them (SUB's output scale 0 passes: its
    # multiplier is then infinite, which its check lets through)
    ResolverVerdict("scale", ("ADD",), "reference", _ADD_SUB_SCALE),
    ResolverVerdict("scale", ("SUB",), "reference", _ADD_SUB_SCALE, places=("input",)),
    ResolverVerdict("scale", ("SUB",), "reference", _ADD_SUB_SCALE, places=("output",),
                    values=("negative", "nan", "inf")),
    # the comparisons rescale their inputs with QuantizeMultiplierSmallerThanOneExp when they run
    ResolverVerdict("scale", _COMPARISONS, "reference", Enforcement(
        ABORTS, "eval", "Eval rescales the inputs with QuantizeMultiplierSmallerThanOneExp, whose CHECK fails for "
        "a scale that is 0, negative or NaN", source=K + "comparisons.cc: ComparisonQuantized"), places=("input",),
        values=("zero", "negative", "nan")),
    # several scales on an activation: the builtin kernels read scale 0, zero point 0 (as for a zero scale,
    # resolver_verdict), which CONCATENATION's same-scale check then rejects
    ResolverVerdict("granularity", ("CONCATENATION",), "reference", Enforcement(
        REJECTS, "prepare", "the input's legacy scale (0 with several scales) differs from the output's",
        source=K + "concatenation.cc: Prepare"), places=("input",)),
    # FULLY_CONNECTED's Prepare checks the real multiplier s_in * s_w / s_out (GetQuantizedConvolutionMultipler)
    # with per-tensor weights (the per-channel path computes one multiplier per channel without that check)
    ResolverVerdict("scale", ("FULLY_CONNECTED",), "reference", _FC_SCALE, places=("input 0",),
                    condition=PER_TENSOR_WEIGHTS),
    ResolverVerdict("scale", ("FULLY_CONNECTED",), "reference", _FC_SCALE, places=("output",), values=("zero", "nan"),
                    condition=PER_TENSOR_WEIGHTS),
    # the reference kernels' fixed-point softmax limits: the optimized kernels have none of them, and
    # the XNNPACK delegate does not take int8 SOFTMAX / LOG_SOFTMAX
    ResolverVerdict("softmax-input-multiplier", ("SOFTMAX", "LOG_SOFTMAX"), "optimized", _OPT_SOFTMAX),
    ResolverVerdict("log-softmax-reverse-multiplier", ("LOG_SOFTMAX",), "optimized", _OPT_SOFTMAX),
    ResolverVerdict("softmax-sum", ("SOFTMAX",), "optimized", Enforcement(
        RUNS, None, "the optimized kernel sums float32 exponentials (no fixed-point reciprocal CHECK)",
        source=K + "internal/optimized/optimized_ops.h: Softmax (float table)")),
    # operators the XNNPACK delegate takes: its own checks replace the builtin Prepare's.  A scale or a
    # zero point XNNPACK refuses (not positive, finite and normal; outside [-128, 127]) on a tensor of
    # an operator it takes: "delegated" here means that operator fails (kernels.xnnpack.delegate.fails)
    ResolverVerdict("scale", XNNPACK_ABORTS, "xnnpack", Enforcement(ABORTS, "prepare", _XNN_ABORT, source=_XNN),
                    dtypes=("int8",)),
    ResolverVerdict("zero-point-range", XNNPACK_ABORTS, "xnnpack", Enforcement(ABORTS, "prepare", _XNN_ABORT,
                                                                                source=_XNN), dtypes=("int8",)),
    ResolverVerdict("scale", ("ADD", "SUB", "MUL"), "xnnpack", Enforcement(
        REJECTS, "prepare", _XNN_RUNTIME + " (the delegate's scale-ratio range checks let a NaN through)",
        source=_XNN), values=("nan",), dtypes=("int8",)),
    ResolverVerdict("scale", (), "xnnpack", Enforcement(REJECTS, "prepare", _XNN_RUNTIME, source=_XNN), delegated=True),
    ResolverVerdict("zero-point-range", (), "xnnpack", Enforcement(REJECTS, "prepare", _XNN_RUNTIME, source=_XNN),
                    delegated=True),
    ResolverVerdict("same-scale", XNNPACK_SAME_QUANTIZATION, "xnnpack", Enforcement(
        REJECTS, "prepare", _XNN_RUNTIME + " (input and output quantization differ)", source=_XNN_SAME),
        delegated=True),
    ResolverVerdict("same-zero-point", XNNPACK_SAME_QUANTIZATION, "xnnpack", Enforcement(
        REJECTS, "prepare", _XNN_RUNTIME + " (input and output quantization differ)", source=_XNN_SAME),
        delegated=True),
    ResolverVerdict("bias-zero-point", ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"), "xnnpack", Enforcement(
        REJECTS, "prepare", _XNN_RUNTIME + " (a per-channel int32 bias with a non-zero zero point)", source=_XNN),
        delegated=True, condition=SEVERAL_SCALES),
    ResolverVerdict("bias-granularity", ("CONV_2D", "DEPTHWISE_CONV_2D"), "xnnpack", Enforcement(
        REJECTS, "prepare", _XNN_RUNTIME + " (a bias with another number of scales than the filter)", source=_XNN),
        delegated=True),
    ResolverVerdict("weight-zero-point", ("FULLY_CONNECTED",), "xnnpack", Enforcement(
        REJECTS, "prepare", _XNN_RUNTIME + " (a per-channel filter with a non-zero zero point)", source=_XNN),
        condition=SEVERAL_SCALES),
    ResolverVerdict("weight-zero-point", ("DEPTHWISE_CONV_2D",), "xnnpack", Enforcement(
        REJECTS, "prepare", _XNN_RUNTIME + " (a per-tensor filter with a non-zero zero point)", source=_XNN),
        condition=ONE_SCALE),
    ResolverVerdict("fixed-scale", ("LOGISTIC",), "xnnpack", Enforcement(
        SILENT, None, "the delegate takes the LOGISTIC and XNNPACK's sigmoid quantizes to the output's own "
        "parameters (the builtin Prepare's output-scale check does not run)", source=_XNN), delegated=True),
)

#: the rule a resolver-specific failure is reported under where no spec rule or LiteRT limit
#: covers it (e.g. a requantization scale of 256 or more, which XNNPACK refuses)
XNNPACK_RUNTIME = "xnnpack-runtime"


def resolver_verdict(rule: str, op: str | None, resolver: str, table: Enforcement, *, delegated: bool = False,
                     tensor_per_axis: bool | None = None, position: str | None = None, found: Any = None,
                     dtype: str | None = None, weights_per_axis: bool | None = None) -> Enforcement:
    """What ``resolver`` does with a broken ``rule`` at ``op``, given the op table's (or the limit's)
    verdict ``table``; ``position`` ("input 0 (input)", "output 0"...), ``found`` and ``dtype`` say
    where the broken tensor is, its value and its type, ``weights_per_axis`` whether the operator's
    weights are per-axis, for the verdicts that depend on them.

    BUILTIN_REF does what the table says except where :data:`RESOLVER_VERDICTS` has a
    ``"reference"`` entry; the optimized resolver shares the builtin kernels' Prepare checks, so it
    does what BUILTIN_REF does except where an ``"optimized"`` entry says otherwise; the XNNPACK
    resolver does what an ``"xnnpack"`` entry without ``delegated`` says, else runs the optimized
    kernel for an operator its delegate declines (``delegated=False``), and for one it takes does
    what a ``delegated`` ``"xnnpack"`` entry says, else what BUILTIN_REF does."""
    def entry(name: str, default: Enforcement, taken: bool | None) -> Enforcement:
        for v in RESOLVER_VERDICTS:
            if v.applies(rule, op, name, taken, tensor_per_axis, position, found, dtype, weights_per_axis):
                return v.enforcement
        return default

    reference = entry("reference", table, None)
    if rule == "granularity" and reference == table:
        # an activation with several scales reaches the builtin kernels as scale 0, zero point 0
        reference = resolver_verdict("scale", op, "reference", table, position=position, found=0.0, dtype=dtype,
                                     weights_per_axis=weights_per_axis)
    if resolver == "reference":
        return reference
    if resolver == "xnnpack":
        for v in RESOLVER_VERDICTS:
            if v.applies(rule, op, "xnnpack", None, tensor_per_axis, position, found, dtype, weights_per_axis):
                return v.enforcement
        if delegated:
            return entry("xnnpack", reference, True)
    return entry("optimized", reference, None)


def resolvers_markdown() -> str:
    """:data:`RESOLVER_VERDICTS` as a Markdown table (rule x resolver), for docs/litert-models.md."""
    words = {REJECTS: "rejects", ABORTS: "aborts", SILENT: "silently computes", RUNS: "runs",
             UNDEFINED: "undefined behaviour"}

    def cell(e: Enforcement) -> str:
        return words[e.action] + (f" at {e.stage}" if e.stage and e.action in (REJECTS, ABORTS) else "")

    lines = ["| rule | ops | reference (BUILTIN_REF) | optimized | xnnpack (default) |", "|---|---|---|---|---|"]
    for v in RESOLVER_VERDICTS:
        lim = LIMITS.get(v.rule)
        if lim is not None:
            ref = cell(Enforcement(lim.action, lim.stage))
        else:
            ref = "the op table's verdict"
        if v.resolver == "reference":
            ref, opt, xnn = cell(v.enforcement), "as reference", "as reference (unless the delegate takes the op)"
        else:
            opt = cell(v.enforcement) if v.resolver == "optimized" else "as reference"
            xnn = cell(v.enforcement) if v.resolver == "xnnpack" else "as optimized (the delegate does not take the op)"
        cond = []
        if v.delegated:
            cond.append("when the XNNPACK delegate takes the operator")
        if v.condition:
            cond.append(v.condition)
        if v.resolver == "xnnpack" and cond:
            xnn += " (" + "; ".join(cond) + ")"
        ops = ", ".join(v.ops) if v.ops else "any"
        where = [f"on {' / '.join(v.places)}"] if v.places != ("input", "output") else []
        where += [f"found {' / '.join(v.values)}"] if v.values else []
        where += [f"{' / '.join(v.dtypes)} tensors"] if v.dtypes else []
        if where:
            ops += " (" + "; ".join(where) + ")"
        lines.append(f"| `{v.rule}` | {ops} | {ref} | {opt} | {xnn} |")
    return "\n".join(lines)
