"""Where LiteRT's three CPU configurations give different int8 bytes — the reference kernels
(``BUILTIN_REF``), the optimized kernels (``BUILTIN_WITHOUT_DEFAULT_DELEGATES``) and the default
resolver with the XNNPACK delegate (``AUTO``) — as data: per row the operator, the configurations
that differ from the reference, the cause, and a single-operator example with the bytes each
configuration gives (measured with ai-edge-litert 2.3.0 on x86-64; ``tests/test_litert_divergence.py``
runs every row in LiteRT and in quantspec's three kernel modes).

:data:`DIVERGENCES` is the table; :func:`markdown_table` renders it for ``docs/litert.md``;
:func:`run` runs a row's example through quantspec's kernel for a mode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Tensor", "Divergence", "DIVERGENCES", "markdown_table", "run", "CONFIGURATIONS"]

#: kernel mode -> the LiteRT configuration it reproduces, as the table names it
CONFIGURATIONS = {"reference": "BUILTIN_REF", "optimized": "optimized", "xnnpack": "XNNPACK"}


@dataclass(frozen=True)
class Tensor:
    """One tensor of an example model (constant when ``data`` is given)."""

    shape: tuple[int, ...]
    dtype: str = "int8"
    scale: Any = None
    zero_point: Any = 0
    quantized_dimension: int = 0
    data: Any = None


@dataclass(frozen=True)
class Divergence:
    """One row: ``expected`` maps each kernel mode to the output values LiteRT's configuration gives
    (flattened), or to ``"fails"`` (the interpreter raises) / ``"aborts"`` (the process dies)."""

    op: str
    differs_in: tuple[str, ...]
    cause: str
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    options: dict
    feeds: tuple[Any, ...]
    expected: dict
    show: str                       # the example's input, in words
    at: int = 0                     # the output element the table quotes
    version: int = 2
    dtypes: tuple[str, ...] = field(default=())


def _c(shape, values, dtype=np.int8):
    return np.asarray(values, dtype).reshape(shape)


_MEAN_X = _c((1, 2, 2, 16), [
    2, -59, -50, -118, -109, -124, -84, 80, 38, 105, 0, 27, 120, 58, 33, 11,
    15, 111, -57, 80, 43, -128, -28, 91, 13, -120, 67, 58, 88, -84, -106, 92,
    -123, 10, -108, -52, -5, -20, -25, -121, -127, -97, -126, 43, 6, 37, -63, 29,
    67, -30, -11, 127, 78, 123, -31, 47, 115, 38, 87, 48, 52, -29, 96, -94])
_RESIZE_X = _c((1, 3, 3, 1), [-50, -118, -109, -124, -84, 80, 38, 105, 0])
_DQ_X = _c((8,), [-59, -50, -118, -109, -124, -84, 80, 38])


def _conv(x_codes, *, filt=1, s_in=1.0, s_w=0.125, s_out=1.0, z_out=0, act="NONE"):
    n = len(x_codes)
    return dict(
        inputs=(Tensor((1, 1, n, 1), "int8", s_in, 0), Tensor((1, 1, 1, 1), "int8", [s_w], 0, 0, _c((1, 1, 1, 1), [filt])),
                Tensor((1,), "int32", [s_in * s_w], 0, 0, _c((1,), [0], np.int32))),
        outputs=(Tensor((1, 1, n, 1), "int8", s_out, z_out),),
        options={"padding": "VALID", "stride_h": 1, "stride_w": 1, "fused_activation_function": act},
        feeds=(_c((1, 1, n, 1), x_codes),), version=3)


_ROUNDING = ("the requantization's final rounding: ties away from zero in the reference kernels "
             "(`RoundingDivideByPOT`); ties *up* in the optimized ones (ruy's and NEON's rounding right "
             "shift); XNNPACK multiplies in float32 and rounds ties to *even*")

DIVERGENCES: tuple[Divergence, ...] = (
    Divergence(
        "CONV_2D", ("optimized", "xnnpack"), _ROUNDING,
        **_conv([-12, -20]), expected={"reference": [-2, -3], "optimized": [-1, -2], "xnnpack": [-2, -2]},
        show="1×1 filter of 1, accumulators -12 and -20, effective scale 1/8 (-1.5 and -2.5)", at=1),
    Divergence(
        "DEPTHWISE_CONV_2D", ("optimized", "xnnpack"),
        "as CONV_2D; the optimized kernel requantizes the output channels 8 at a time with the vector "
        "rounding and the remaining `channels mod 8` with the reference rounding",
        inputs=(Tensor((1, 1, 1, 9), "int8", 1.0, 0), Tensor((1, 1, 1, 9), "int8", [0.125] * 9, 0, 3, np.ones((1, 1, 1, 9), np.int8)),
                Tensor((9,), "int32", [0.125] * 9, 0, 0, np.zeros(9, np.int32))),
        outputs=(Tensor((1, 1, 1, 9), "int8", 1.0, 0),),
        options={"padding": "VALID", "stride_h": 1, "stride_w": 1, "depth_multiplier": 1},
        feeds=(np.full((1, 1, 1, 9), -20, np.int8),), version=3,
        expected={"reference": [-3] * 9, "optimized": [-2] * 8 + [-3], "xnnpack": [-2] * 9},
        show="9 channels, each accumulator -20 at effective scale 1/8 (-2.5); channel 0 (channel 8: "
        "optimized -3)", at=0),
    Divergence(
        "FULLY_CONNECTED", ("optimized", "xnnpack"),
        "the reference kernel requantizes in double precision (ties away from zero); the optimized one with "
        "ruy's integer multiplier (ties up; with one filter scale the multiplier comes from the float32 "
        "product `s_in·s_w`); XNNPACK in float32 (ties to even)",
        inputs=(Tensor((2, 1), "int8", 1.0, 0), Tensor((1, 1), "int8", [0.125], 0, 0, np.ones((1, 1), np.int8)),
                Tensor((1,), "int32", [0.125], 0, 0, np.zeros(1, np.int32))),
        outputs=(Tensor((2, 1), "int8", 1.0, 0),), options={}, feeds=(_c((2, 1), [-12, -20]),), version=4,
        expected={"reference": [-2, -3], "optimized": [-1, -2], "xnnpack": [-2, -2]},
        show="weight 1, inputs -12 and -20, effective scale 1/8", at=1),
    Divergence(
        "ADD", ("optimized", "xnnpack"),
        "the optimized kernel's vector lanes narrow the requantized sum to int16 by truncation and add the "
        "output zero point in int16 before saturating, so a sum beyond int16 wraps (16 lanes; the tail and "
        "BUILTIN_REF saturate). XNNPACK declines this ADD (input/output scale ratio 1024 >= 256), so the "
        "default resolver runs the optimized kernel",
        inputs=(Tensor((16,), "int8", 1.0, 0), Tensor((16,), "int8", 1.0, 0)),
        outputs=(Tensor((16,), "int8", 2.0 ** -10, 0),), options={},
        feeds=(np.full(16, 100, np.int8), np.zeros(16, np.int8)),
        expected={"reference": [127] * 16, "optimized": [-128] * 16, "xnnpack": [-128] * 16},
        show="16 elements 100 + 0 at output scale 2^-10 (102400 codes)"),
    Divergence(
        "ADD", ("xnnpack",),
        "XNNPACK's qs8 addition: 21-bit integer multipliers `lrintf(s_i/s_out · 2^shift)` and one rounding "
        "shift (ties up), where the reference rescales each input with 31-bit multipliers and rounds twice",
        inputs=(Tensor((1,), "int8", 0.0625, 4), Tensor((1,), "int8", 0.125, 0)),
        outputs=(Tensor((1,), "int8", 0.25, 1),), options={},
        feeds=(_c((1,), [-50]), _c((1,), [-84])),
        expected={"reference": [-55], "optimized": [-55], "xnnpack": [-54]},
        show="-50 (scale 1/16, zp 4) + -84 (scale 1/8) at scale 1/4, zp 1"),
    Divergence(
        "MUL", ("optimized",),
        "the optimized kernel's vector lanes saturate the product to int16, then add the output zero point "
        "in int16 with wrap-around (16 lanes)",
        inputs=(Tensor((16,), "int8", 1.0, 0), Tensor((16,), "int8", 1.0, 0)),
        outputs=(Tensor((16,), "int8", 2.0 ** -6, 10),), options={},
        feeds=(np.full(16, 127, np.int8), np.full(16, 127, np.int8)),
        expected={"reference": [127] * 16, "optimized": [-128] * 16, "xnnpack": [127] * 16},
        show="16 elements 127 × 127 at output scale 2^-6, zp 10"),
    Divergence(
        "MEAN", ("optimized", "xnnpack"),
        "the optimized kernel (4-D input, `keep_dims`, axes 1 and 2) takes a float32 multiplier "
        "`s_in / (H·W·s_out)` and a float bias, rounds ties up in blocks of 16 channels per thread (so the "
        "bytes depend on the thread count); XNNPACK computes `sum · f32(s_in/s_out · 1/n) + zp'` in float32 "
        "with ties to even",
        inputs=(Tensor((1, 2, 2, 16), "int8", 0.125, 1), Tensor((2,), "int32", data=_c((2,), [1, 2], np.int32))),
        outputs=(Tensor((1, 1, 1, 16), "int8", 0.25, 4),), options={"keep_dims": True}, feeds=(_MEAN_X,),
        expected={"reference": [-1, 8, -25, 8, 5, -15, -18, 16, 9, -6, 7, 26, 37, 1, -2, 8],
                  "optimized": [-2, 7, -25, 8, 4, -15, -18, 15, 8, -6, 7, 25, 36, 1, -2, 8],
                  "xnnpack": [-1, 8, -25, 8, 4, -15, -18, 16, 8, -6, 7, 26, 37, 1, -2, 8]},
        show="2×2×16, channel 4: codes -109, 43, -5, 78 (scale 1/8, zp 1) to scale 1/4, zp 4", at=4),
    Divergence(
        "SUM", ("optimized", "xnnpack"),
        "BUILTIN_REF reads int8 data as uint8 (a bug; quantspec's `sum_semantics=\"reference\"` reproduces "
        "it); the optimized kernel computes in float32 and rounds ties away from zero; XNNPACK in float32 "
        "with ties to even",
        inputs=(Tensor((1, 4), "int8", 1.0, 0), Tensor((1,), "int32", data=_c((1,), [1], np.int32))),
        outputs=(Tensor((1,), "int8", 8.0, 0),), options={}, feeds=(_c((1, 4), [-1, -2, 3, 4]),),
        expected={"reference": [65], "optimized": [1], "xnnpack": [0]},
        show="codes -1, -2, 3, 4 (scale 1) summed to scale 8: 0.5"),
    Divergence(
        "SOFTMAX", ("optimized", "xnnpack"),
        "the optimized kernel computes in float32 from a table of `expf` (no fixed point), and runs where "
        "BUILTIN_REF aborts (`beta · s_in · 2^26 <= 1`); XNNPACK does not take int8 SOFTMAX",
        inputs=(Tensor((1, 4), "int8", 0.01, 0),), outputs=(Tensor((1, 4), "int8", 1 / 256, -128),),
        options={"beta": 1e-9}, feeds=(_c((1, 4), [0, 10, 20, 30]),),
        expected={"reference": "aborts", "optimized": [-64] * 4, "xnnpack": [-64] * 4},
        show="beta 1e-9, input scale 0.01"),
    Divergence(
        "LOG_SOFTMAX", ("optimized", "xnnpack"),
        "the optimized kernel computes in float32 (`expf`, `logf`) and rounds with `rint` (ties to even); "
        "XNNPACK does not take it, so the default resolver runs the optimized kernel",
        inputs=(Tensor((1, 4), "int8", 0.125, 2),), outputs=(Tensor((1, 4), "int8", 16 / 256, 127),),
        options={}, feeds=(_c((1, 4), [-29, 96, -94, 20]),),
        expected={"reference": [-128, 127, -128, -25], "optimized": [-123, 127, -128, -25],
                  "xnnpack": [-123, 127, -128, -25]},
        show="codes -29, 96, -94, 20 at scale 1/8, zp 2; the first"),
    Divergence(
        "QUANTIZE", ("optimized", "xnnpack"),
        "float32 -> int8: the optimized kernel's 8 lanes and XNNPACK multiply by the reciprocal of the scale "
        "and round ties to even; the reference divides and rounds ties away from zero (the optimized tail "
        "divides in double)",
        inputs=(Tensor((8,), "float"),), outputs=(Tensor((8,), "int8", 1.0, 0),), options={},
        feeds=(np.full(8, 0.5, np.float32),),
        expected={"reference": [1] * 8, "optimized": [0] * 8, "xnnpack": [0] * 8},
        show="8 values 0.5 at scale 1"),
    Divergence(
        "QUANTIZE", ("optimized", "xnnpack"),
        "int8 -> int8: the optimized kernel requantizes 16 lanes at a time with ties up; XNNPACK with an "
        "8-bit multiplier `lrintf(256 · s_in/s_out)` and ties up",
        inputs=(Tensor((16,), "int8", 1.0, 0),), outputs=(Tensor((16,), "int8", 4.0, 0),), options={},
        feeds=(np.full(16, -2, np.int8),),
        expected={"reference": [-1] * 16, "optimized": [0] * 16, "xnnpack": [0] * 16},
        show="16 codes -2, scale 1 to scale 4 (-0.5)"),
    Divergence(
        "QUANTIZE", ("xnnpack",),
        "int8 -> int8: XNNPACK's 8-bit multiplier is coarse: `lrintf(256 · 0.16486)` = 42, i.e. 0.16406",
        inputs=(Tensor((1,), "int8", 0.12225031107664108, 0),), outputs=(Tensor((1,), "int8", 0.7415575385093689, 0),),
        options={}, feeds=(_c((1,), [-57]),),
        expected={"reference": [-10], "optimized": [-10], "xnnpack": [-9]},
        show="code -57, scale 0.12225 to 0.74156 (-9.397)"),
    Divergence(
        "DEQUANTIZE", ("optimized",),
        "the optimized kernel's 8 lanes compute `f32(q)·f32(s) + f32(-z·s)` (two roundings) instead of "
        "`f32(s·(q - z))`",
        inputs=(Tensor((8,), "int8", 0.08144886791706085, 2),), outputs=(Tensor((8,), "float"),), options={},
        feeds=(_DQ_X,),
        expected={"reference": [-4.968380928039551, -4.2353410720825195, -9.773863792419434, -9.040823936462402,
                                -10.262557029724121, -7.004602432250977, 6.353011608123779, 2.932159185409546],
                  "optimized": [-4.968380928039551, -4.2353410720825195, -9.77386474609375, -9.040824890136719,
                                -10.262557983398438, -7.004602432250977, 6.353011608123779, 2.932159185409546],
                  "xnnpack": [-4.968380928039551, -4.2353410720825195, -9.773863792419434, -9.040823936462402,
                              -10.262557029724121, -7.004602432250977, 6.353011608123779, 2.932159185409546]},
        show="8 codes at scale 0.0814489, zp 2; code -118", at=2),
    Divergence(
        "LOGISTIC", ("xnnpack",),
        "XNNPACK's table: the sigmoid in double precision and `nearbyint` (ties to even), where LiteRT's "
        "table computes `1 / (1 + expf(-x))` in float32 and rounds ties away from zero",
        inputs=(Tensor((1,), "int8", 0.002146438229829073, -91),), outputs=(Tensor((1,), "int8", 1 / 256, -128),),
        options={}, feeds=(_c((1,), [120]),),
        expected={"reference": [29], "optimized": [29], "xnnpack": [28]},
        show="code 120 at scale 0.0021464, zp -91"),
    Divergence(
        "RESIZE_BILINEAR", ("xnnpack",),
        "XNNPACK computes the source positions in float32 and rounds the weights to 11 fractional bits; "
        "the reference kernels use 10-bit fixed-point positions",
        inputs=(Tensor((1, 3, 3, 1), "int8", 0.5, 0), Tensor((2,), "int32", data=_c((2,), [5, 4], np.int32))),
        outputs=(Tensor((1, 5, 4, 1), "int8", 0.5, 0),), options={"half_pixel_centers": True}, feeds=(_RESIZE_X,),
        expected={"reference": [-50, -93, -115, -109, -80, -95, -78, -34, -124, -99, -23, 80, -27, 8, 30, 32, 38, 80,
                                66, 0],
                  "optimized": [-50, -93, -115, -109, -80, -95, -78, -34, -124, -99, -23, 80, -27, 8, 30, 32, 38, 80,
                                66, 0],
                  "xnnpack": [-50, -92, -115, -109, -80, -95, -78, -33, -124, -99, -22, 80, -27, 8, 30, 32, 38, 80,
                              66, 0]},
        show="3×3 to 5×4 with half_pixel_centers; output (0, 1)", at=1, version=3),
    Divergence(
        "CONV_2D", ("xnnpack",),
        "a fused activation's bound: XNNPACK quantizes it as `lrintf(bound / s + zp)` (ties to even), "
        "LiteRT as `zp + round(bound / s)` (ties away from zero); also for DEPTHWISE_CONV_2D, "
        "FULLY_CONNECTED, ADD, SUB, MUL",
        **_conv([100], s_w=1.0, s_out=4.0, z_out=1, act="RELU6"),
        expected={"reference": [3], "optimized": [3], "xnnpack": [2]},
        show="RELU6 at output scale 4, zp 1 (6/4 + 1 = 2.5)"),
    Divergence(
        "CONV_2D", ("xnnpack",),
        "XNNPACK takes the operator, then refuses a requantization scale `s_in·s_w/s_out` of 256 or more "
        "when it builds its runtime: `allocate_tensors` raises (also DEPTHWISE_CONV_2D, FULLY_CONNECTED)",
        **_conv([1], s_in=16.0, s_w=16.0, s_out=1.0),
        expected={"reference": [127], "optimized": [127], "xnnpack": "fails"},
        show="s_in 16, s_w 16, s_out 1 (scale 256)"),
)


def _spec(t: Tensor):
    from ..dtypes import qtype
    from .kernels.base import TensorSpec
    from .params import QuantParams

    q = qtype(t.dtype)
    params = None if t.scale is None else QuantParams(t.scale, t.zero_point, t.quantized_dimension)
    data = None if t.data is None else np.asarray(t.data, q.dtype).reshape(t.shape)
    return TensorSpec(tuple(t.shape), q, params, data)


def run(row: Divergence, mode: str) -> list[np.ndarray]:
    """The row's example through quantspec's kernel for ``mode`` (its prepare raises where LiteRT
    fails or aborts)."""
    from .kernels.modes import kernel_options, select

    ins = [_spec(t) for t in row.inputs]
    outs = [_spec(t) for t in row.outputs]
    options = dict(row.options)
    kernel, engine = select(mode, row.op, ins, outs, options)
    if engine != "reference":
        options.update(kernel_options(row.op, 1))
    elif row.op == "SUM":                       # BUILTIN_REF's bytes (int8 read as uint8)
        options["quantspec_sum_semantics"] = "reference"
    prepared = kernel.prepare(ins, outs, options)
    feeds = iter(row.feeds)
    arrays = [np.asarray(t.data) if t.data is not None else next(feeds) for t in row.inputs]
    return kernel.compute(prepared, arrays)


def _value(v) -> str:
    if isinstance(v, str):
        return v
    return f"{v:.9g}" if isinstance(v, float) else str(v)


def markdown_table() -> str:
    """The table for docs/litert.md: per row the operator, the configurations that differ from
    BUILTIN_REF, the cause, and the example with each configuration's result."""
    lines = ["| op | differs in | cause | example: input -> BUILTIN_REF / optimized / XNNPACK |",
             "|---|---|---|---|"]
    for row in DIVERGENCES:
        got = []
        for mode in ("reference", "optimized", "xnnpack"):
            e = row.expected[mode]
            got.append(_value(e if isinstance(e, str) else e[row.at]))
        differs = ", ".join(CONFIGURATIONS[m] for m in row.differs_in)
        lines.append(f"| {row.op} | {differs} | {row.cause} | {row.show} -> {' / '.join(got)} |")
    return "\n".join(lines) + "\n"
