"""The options of a static quantization, normalised once into a frozen :class:`StaticOptions`.

onnxruntime's ``quantize_static`` keywords are accepted as strings (``"qdq"``, ``"uint8"``,
``"minmax"``...) or as onnxruntime's own enums (``QuantFormat``, ``QuantType``, ``CalibrationMethod``:
read by their names, so onnxruntime need not be importable).  ``extra_options`` keeps onnxruntime's
keys; a key onnxruntime honours but this package does not reproduce is refused, a key onnxruntime
ignores is ignored here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...errors import DTypeError, InvalidArgumentError, UnsupportedError

#: quant_format spellings -> "qdq" / "qoperator"
_FORMATS = {"qdq": "qdq", "qoperator": "qoperator", "qlinearops": "qoperator"}
#: activation_type / weight_type spellings -> ONNX element type name
_TYPES = {"uint8": "uint8", "quint8": "uint8", "u8": "uint8", "int8": "int8", "qint8": "int8", "i8": "int8",
          "uint16": "uint16", "quint16": "uint16", "int16": "int16", "qint16": "int16"}
#: types onnxruntime has that are not reproduced here
_OTHER_TYPES = {"int4", "qint4", "uint4", "quint4", "qfloat8e4m3fn", "float8e4m3fn"}
_METHODS = {"minmax": "minmax", "entropy": "entropy", "percentile": "percentile", "distribution": "distribution"}

#: extra_options keys reproduced, with their default (onnxruntime's)
EXTRA_DEFAULTS: dict[str, Any] = {
    "ActivationSymmetric": False,
    "WeightSymmetric": None,
    "ForceQuantizeNoInputCheck": False,
    "MatMulConstBOnly": False,
    "AddQDQPairToWeight": False,
    "OpTypesToExcludeOutputQuantization": [],
    "DedicatedQDQPair": False,
    "QDQOpTypePerChannelSupportToAxis": {},
    "QuantizeBias": True,
    "QDQKeepRemovableActivations": False,
    "QDQDisableWeightAdjustForInt32Bias": False,
    "MinimumRealRange": None,
    "extra.Sigmoid.nnapi": False,
    "ActivationRestrictedAsymmetric": False,
    "UseQDQContribOps": False,
    "TensorQuantOverrides": None,
}
#: calibration keys: passed to the calibration, not used by the graph writer
CALIBRATION_KEYS = ("CalibTensorRangeSymmetric", "CalibMovingAverage", "CalibMovingAverageConstant",
                    "CalibMaxIntermediateOutputs", "CalibPercentile", "CalibStridedMinMax")
#: keys onnxruntime honours that change the output, refused unless at their neutral value
_REFUSED = {"EnableSubgraph": False, "SmoothQuant": False, "BlockSize": 0, "DefaultTensorType": None}
#: keys onnxruntime 1.31.1 reads only when SmoothQuant is on (refused above)
_SMOOTH_QUANT_ONLY = ("SmoothQuantAlpha", "SmoothQuantFolding")


def _enum_name(value: Any) -> Any:
    """An onnxruntime enum member (QuantFormat.QDQ, QuantType.QUInt8, ...) -> its lower-case name."""
    cls = type(value)
    if hasattr(value, "name") and hasattr(cls, "__members__"):
        return value.name.lower()
    return value


def _choice(argument: str, value: Any, table: dict[str, str], allowed: str) -> str:
    key = _enum_name(value)
    if not isinstance(key, str):
        raise InvalidArgumentError(argument, f"must be one of {allowed} (or onnxruntime's enum)", value)
    norm = table.get(key.lower())
    if norm is None:
        if argument.endswith("_type") and key.lower() in _OTHER_TYPES:
            raise UnsupportedError(argument, "only uint8, int8, uint16 and int16 are reproduced (onnxruntime's "
                                   "4-bit and float8 static quantization is not)", value)
        raise InvalidArgumentError(argument, f"must be one of {allowed} (or onnxruntime's enum)", value)
    return norm


@dataclass(frozen=True)
class StaticOptions:
    """Every choice of a static quantization, normalised (see :func:`normalize_options`)."""

    quant_format: str = "qdq"
    per_channel: bool = False
    reduce_range: bool = False
    activation_type: str = "uint8"
    weight_type: str = "int8"
    calibrate_method: str = "minmax"
    op_types_to_quantize: tuple[str, ...] | None = None
    nodes_to_exclude: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    calibration_extra: dict[str, Any] = field(default_factory=dict)

    def opt(self, key: str) -> Any:
        """An extra option's value (onnxruntime's default when not given)."""
        return self.extra.get(key, EXTRA_DEFAULTS[key])

    @property
    def activation_symmetric(self) -> bool:
        return bool(self.opt("ActivationSymmetric"))

    def weight_symmetric(self, qtype: str) -> bool:
        """onnxruntime's rule: WeightSymmetric when given, else symmetric for the signed types."""
        explicit = self.opt("WeightSymmetric")
        if explicit is not None:
            return bool(explicit)
        return qtype in ("int8", "int16")


def normalize_options(*, quant_format: Any = "qdq", per_channel: Any = False, reduce_range: Any = False,
                      activation_type: Any = "uint8", weight_type: Any = "int8", calibrate_method: Any = "minmax",
                      op_types_to_quantize: Any = None, nodes_to_exclude: Any = None,
                      extra_options: Any = None) -> StaticOptions:
    """Check and normalise ``quantize_static``'s keywords; a :mod:`quantspec.errors` exception names the
    argument, the rule and the value of the first one that is wrong."""
    fmt = _choice("quant_format", quant_format, _FORMATS, "'qdq', 'qoperator'")
    act = _choice("activation_type", activation_type, _TYPES, "'uint8', 'int8', 'uint16', 'int16'")
    wt = _choice("weight_type", weight_type, _TYPES, "'uint8', 'int8', 'uint16', 'int16'")
    method = _choice("calibrate_method", calibrate_method, _METHODS,
                     "'minmax', 'entropy', 'percentile', 'distribution'")
    for name, flag in (("per_channel", per_channel), ("reduce_range", reduce_range)):
        if not isinstance(flag, (bool, int)) or isinstance(flag, float):
            raise DTypeError(name, "must be a bool", flag)
    if act == "int8" and wt == "uint8":
        raise UnsupportedError("weight_type", "uint8 weights with int8 activations are refused by onnxruntime's "
                               "quantize_static (activation_type=int8, weight_type=uint8)", weight_type)
    if fmt != "qdq" and (act.endswith("16") or wt.endswith("16")):
        raise UnsupportedError("quant_format", "16-bit types need the QDQ format (onnxruntime refuses them in "
                               "QOperator)", quant_format)

    def names(argument: str, value: Any) -> tuple[str, ...] | None:
        if value is None:
            return None
        if isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise DTypeError(argument, "must be a list of strings", value)
        return tuple(value)

    ops = names("op_types_to_quantize", op_types_to_quantize)
    excl = names("nodes_to_exclude", nodes_to_exclude) or ()
    if not isinstance(extra_options, (dict, type(None))):
        raise DTypeError("extra_options", "must be a dict of onnxruntime's extra option keys", extra_options)
    extra = dict(extra_options or {})
    known = (*EXTRA_DEFAULTS, *CALIBRATION_KEYS, *_REFUSED, *_SMOOTH_QUANT_ONLY)
    for key in extra:
        if key not in known:
            # onnxruntime ignores a key it does not read: a misspelt option would silently change nothing
            raise InvalidArgumentError(f"extra_options[{key!r}]", "must be one of onnxruntime 1.31.1's "
                                       "quantize_static options (" + ", ".join(sorted(map(str, known))) + ")", key)
    for key, neutral in _REFUSED.items():
        if key in extra and extra[key] not in (neutral, None, {}, 0, False):
            raise UnsupportedError(f"extra_options[{key!r}]", "is not reproduced (only its default is)", extra[key])
    from .overrides import check_structure

    if "TensorQuantOverrides" in extra:
        extra["TensorQuantOverrides"] = check_structure(extra["TensorQuantOverrides"]) or None
    calib = {k: extra[k] for k in CALIBRATION_KEYS if k in extra}
    kept = {k: v for k, v in extra.items() if k in EXTRA_DEFAULTS}
    axes = kept.get("QDQOpTypePerChannelSupportToAxis", {})
    if not isinstance(axes, dict):
        raise DTypeError("extra_options['QDQOpTypePerChannelSupportToAxis']", "must be a dict op type -> axis", axes)
    excl_out = kept.get("OpTypesToExcludeOutputQuantization", [])
    if isinstance(excl_out, str):
        raise DTypeError("extra_options['OpTypesToExcludeOutputQuantization']", "must be a list of op types", excl_out)
    mrr = kept.get("MinimumRealRange")
    if mrr is not None and not isinstance(mrr, (int, float)):
        raise DTypeError("extra_options['MinimumRealRange']", "must be a number or None", mrr)
    return StaticOptions(quant_format=fmt, per_channel=bool(per_channel), reduce_range=bool(reduce_range),
                         activation_type=act, weight_type=wt, calibrate_method=method, op_types_to_quantize=ops,
                         nodes_to_exclude=excl, extra=kept, calibration_extra=calib)
