"""TensorFlow's quantization rules as data.

Everything the kernels, the argument checks, the command line and the docs need to know about
the TensorFlow ops and that is a *fact* rather than arithmetic lives here, once:

- :data:`TYPES`: the five quantized types, their limits read from :mod:`quantspec.dtypes`;
- the attribute vocabularies (:data:`MODES`, :data:`ROUND_MODES`, ...) and which combinations
  TensorFlow accepts (:data:`QUANTIZE_ROUND_MODES`, :data:`DEQUANTIZE_DTYPES`, ...);
- :data:`ONEDNN_REWRITES` and :data:`ONEDNN_KERNEL_TYPES`: which calls stock TensorFlow on
  x86-64 Linux hands to its oneDNN (``_Mkl*``) kernels, and where those kernels are missing;
- :func:`route`: the kernel that really runs a given call under ``kernel="eigen"|"onednn"``.

Sources: TensorFlow's kernels (``quantize_op.cc``, ``dequantize_op.cc``, the oneDNN ones); every row was re-measured on
TensorFlow 2.21.0 (tests/test_tf_conformance.py, tests/test_tf_onednn.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..dtypes import QType

__all__ = [
    "TFType", "TYPES", "tf_type", "MODES", "ROUND_MODES", "QUANTIZE_ROUND_MODES", "PER_AXIS_MODES",
    "DEQUANTIZE_DTYPES", "ONEDNN_DEQUANTIZE_DTYPES", "QDQ_ROUND_MODES", "QDQ_DTYPES", "QDQ_MAX_BITS",
    "FAKE_QUANT_BITS", "KERNELS", "ONEDNN_RANKS", "OneDNNRewrite", "ONEDNN_REWRITES",
    "ONEDNN_KERNEL_TYPES", "Route", "route", "onednn_table_markdown",
]


@dataclass(frozen=True)
class TFType:
    """A TensorFlow quantized type (``qint8`` ...), backed by its row of the type table."""

    name: str
    qtype: QType

    @property
    def dtype(self) -> np.dtype:
        """The numpy storage dtype of the codes (int8, uint8, int16, uint16, int32)."""
        return self.qtype.dtype

    @property
    def bits(self) -> int:
        return self.qtype.bits

    @property
    def signed(self) -> bool:
        return self.qtype.signed

    @property
    def lowest(self) -> int:
        """``std::numeric_limits<T>::lowest()``."""
        return int(self.qtype.qmin)

    @property
    def highest(self) -> int:
        """``std::numeric_limits<T>::max()``."""
        return int(self.qtype.qmax)


#: The five quantized types TensorFlow's QuantizeV2 / Dequantize kernels are registered for, by width,
#: signed first.
TYPES: dict[str, TFType] = {t.tf: TFType(t.tf, t)
                            for t in sorted((t for t in dtypes.TABLE if t.tf), key=lambda t: (t.bits, not t.signed))}


def tf_type(value, argument: str = "T") -> TFType:
    """Resolve ``"qint8"``, ``"int8"``, ``np.int8`` ... to its :class:`TFType`."""
    from ..errors import DTypeError

    if isinstance(value, TFType):
        return value
    try:
        row = dtypes.qtype(value, argument)
    except DTypeError:
        row = None
    if row is None or not row.tf:
        raise DTypeError(argument, "must be a TensorFlow quantized type: " + ", ".join(TYPES), value)
    return TYPES[row.tf]


#: QuantizeV2 / Dequantize ``mode``.
MODES = ("MIN_COMBINED", "MIN_FIRST", "SCALED")
#: QuantizeV2 ``round_mode``.
ROUND_MODES = ("HALF_AWAY_FROM_ZERO", "HALF_TO_EVEN")
#: The round modes QuantizeV2 accepts with each mode ("Round mode 'HALF_TO_EVEN' only supported
#: for mode 'SCALED'"); the first is the default.
QUANTIZE_ROUND_MODES = {
    "MIN_COMBINED": ("HALF_AWAY_FROM_ZERO",),
    "MIN_FIRST": ("HALF_AWAY_FROM_ZERO",),
    "SCALED": ("HALF_AWAY_FROM_ZERO", "HALF_TO_EVEN"),
}
#: Modes with a per-axis kernel.  MIN_FIRST raises Unimplemented for an axis with more than
#: one slice (an axis of length 1 takes the per-tensor path and works), in both ops.
PER_AXIS_MODES = ("MIN_COMBINED", "SCALED")
#: Dequantize ``dtype`` -> the modes the Eigen kernel accepts with it.
DEQUANTIZE_DTYPES = {"float32": MODES, "bfloat16": ("MIN_COMBINED",)}
#: The same under oneDNN: the rewritten SCALED kernel also writes bfloat16.
ONEDNN_DEQUANTIZE_DTYPES = {"float32": MODES, "bfloat16": ("MIN_COMBINED", "SCALED")}

#: QuantizeAndDequantizeV2/V4 ``round_mode`` (V3 always rounds half to even).
QDQ_ROUND_MODES = ("HALF_TO_EVEN", "HALF_UP")
#: QuantizeAndDequantize has CPU kernels for these input types only (half and bfloat16 are in the
#: op definition but have no CPU kernel).
QDQ_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
#: QuantizeAndDequantize ``num_bits`` must satisfy 0 < num_bits <= QDQ_MAX_BITS[signed_input].
QDQ_MAX_BITS = {True: 61, False: 62}
#: FakeQuantWithMinMax* ``num_bits`` range, inclusive.
FAKE_QUANT_BITS = (2, 16)

#: ``kernel=`` values: the portable Eigen kernels (TF_ENABLE_ONEDNN_OPTS=0) and the oneDNN kernels
#: stock TensorFlow on x86-64 Linux uses where its layout pass rewrites the op.
KERNELS = ("eigen", "onednn")
#: Input ranks the oneDNN kernels accept.  Quantize MIN_FIRST also has a rank-0 path of its own.
ONEDNN_RANKS = (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class OneDNNRewrite:
    """One rule of TensorFlow's MKL layout pass (``QuantizeOpRewrite`` / ``DequantizeRewrite``):
    calls matching it are rewritten to the ``_Mkl`` op when oneDNN is on.  All rules also require
    a non-constant input (always the case for eager calls and for quantspec) and ``axis == -1``."""

    op: str                            # "quantize" | "dequantize"
    mode: str
    round_modes: tuple[str, ...] | None  # None: any
    types: tuple[str, ...]             # T values the rule applies to
    narrow_range: tuple[bool, ...]     # narrow_range values the rule applies to


ONEDNN_REWRITES: tuple[OneDNNRewrite, ...] = (
    OneDNNRewrite("quantize", "SCALED", ("HALF_TO_EVEN",), tuple(TYPES), (False,)),
    OneDNNRewrite("quantize", "MIN_FIRST", None, ("quint8",), (False,)),
    OneDNNRewrite("dequantize", "SCALED", None, tuple(TYPES), (False, True)),
)

#: What a rewritten call finds, per type: a oneDNN kernel ("onednn"); no rewrite after all, so the
#: Eigen kernel runs ("eigen": 16-bit types); or a rewrite to an op without a kernel (None: qint32,
#: TensorFlow raises NotFoundError "No registered '_MklQuantizeV2' OpKernel").
ONEDNN_KERNEL_TYPES: dict[str, str | None] = {
    "qint8": "onednn", "quint8": "onednn", "qint16": "eigen", "quint16": "eigen", "qint32": None,
}


@dataclass(frozen=True)
class Route:
    """The kernel a call really runs: ``"eigen"`` or ``"onednn"``; ``"missing"`` where TensorFlow
    rewrites the call to a oneDNN op that has no kernel for the type."""

    kernel: str
    rule: OneDNNRewrite | None = None


def route(op: str, kernel: str, mode: str, T: str, *, narrow_range: bool = False,
          round_mode: str | None = None, per_axis: bool = False) -> Route:
    """Which kernel TensorFlow runs for this call (``kernel`` is the user's choice)."""
    if kernel == "eigen" or per_axis:
        return Route("eigen")
    for rule in ONEDNN_REWRITES:
        if (rule.op == op and rule.mode == mode and T in rule.types
                and (rule.round_modes is None or round_mode in rule.round_modes)
                and narrow_range in rule.narrow_range):
            found = ONEDNN_KERNEL_TYPES[T]
            return Route("missing" if found is None else found, rule)
    return Route("eigen")


def onednn_table_markdown() -> str:
    """The routing table of docs/tensorflow.md, generated from the data above (a test checks
    that the page carries exactly this text)."""
    lines = ["| op | mode | round_mode | narrow_range | axis | " + " | ".join(TYPES) + " |",
             "|---|---|---|---|---|" + "---|" * len(TYPES)]
    for rule in ONEDNN_REWRITES:
        cells = []
        for t in TYPES:
            if t not in rule.types:
                cells.append("Eigen")
            else:
                found = ONEDNN_KERNEL_TYPES[t]
                cells.append("oneDNN" if found == "onednn" else "Eigen" if found == "eigen" else "**error**")
        rm = "any" if rule.round_modes is None else " / ".join(rule.round_modes)
        nr = " / ".join(str(v) for v in rule.narrow_range)
        lines.append(f"| {rule.op} | {rule.mode} | {rm} | {nr} | None | " + " | ".join(cells) + " |")
    lines.append("| any other call | | | | | " + " | ".join(["Eigen"] * len(TYPES)) + " |")
    return "\n".join(lines)
