"""The one-line syntax of a quantizer: ``SPEC:OP key=value ...``.

::

    tf:QuantizeV2 mode=MIN_COMBINED T=qint8 min=-6 max=6
    tf:QuantizeV2 mode=SCALED round_mode=HALF_TO_EVEN T=qint8 min=-1,-2 max=1,2 axis=0
    tf:Dequantize mode=MIN_FIRST T=quint8 min=-1 max=3
    tf:FakeQuant variant=args min=-6 max=6 num_bits=8 narrow_range=false
    tf:QuantizeAndDequantize version=3 min=-1.3 max=2.7 signed_input=true num_bits=8
    onnx:QuantizeLinear opset=21 scale=0.05 zero_point=0 output_dtype=int8
    onnx:QuantizeLinear opset=23 scale=0.05 zero_point=-3 output_dtype=int8 x_dtype=float16
    onnx:DequantizeLinear scale=0.05 zero_point=-3 x_dtype=int8
    litert:QUANTIZE scale=0.05 zero_point=-3
    litert:DEQUANTIZE scale=0.05 zero_point=-3

Keys are the fields of the record (:class:`quantspec.tf.QuantizeV2Op`, :class:`quantspec.tf.DequantizeOp`,
:class:`quantspec.tf.FakeQuantOp`, :class:`quantspec.tf.QuantizeAndDequantizeOp`,
:class:`quantspec.onnx.QuantizeLinearOp`, :class:`quantspec.onnx.DequantizeLinearOp`,
:class:`quantspec.litert.QuantizeOp`, :class:`quantspec.litert.DequantizeOp`), with ``min`` / ``max``
for the TensorFlow ranges and, for LiteRT, ``scale`` / ``zero_point`` / ``quantized_dimension`` (and
``input_dtype`` for DEQUANTIZE).  Values: numbers, comma-separated numbers (one per channel),
``true`` / ``false``, names.  Op names are matched without regard to case; the TensorFlow op names
``FakeQuantWithMinMaxArgs`` / ``...Vars`` / ``...VarsPerChannel`` and ``QuantizeAndDequantizeV2`` /
``V3`` / ``V4`` set the variant / version.  Every record prints itself in this syntax
(``record.spec_string()``), which reads back as the same record.

A *target* (``quantspec translate`` / ``quantspec equiv --to``) is a spec, optionally with an op
and fixed keys: ``onnx``, ``litert``, ``tf:QuantizeV2 mode=SCALED``, ``onnx output_dtype=uint8 opset=13``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from ..errors import InvalidArgumentError, QuantSpecError

__all__ = ["parse", "parse_target", "required_fields", "OPS", "SPECS"]


def _records():
    from ..litert.ops import DequantizeOp as LDequantize
    from ..litert.ops import QuantizeOp as LQuantize
    from ..onnx.ops import DequantizeLinearOp, QuantizeLinearOp
    from ..tf.ops import DequantizeOp, FakeQuantOp, QuantizeAndDequantizeOp, QuantizeV2Op

    return {("tf", "quantizev2"): QuantizeV2Op, ("tf", "dequantize"): DequantizeOp, ("tf", "fakequant"): FakeQuantOp,
            ("tf", "quantizeanddequantize"): QuantizeAndDequantizeOp,
            ("onnx", "quantizelinear"): QuantizeLinearOp, ("onnx", "dequantizelinear"): DequantizeLinearOp,
            ("litert", "quantize"): LQuantize, ("litert", "dequantize"): LDequantize}


#: spec -> its op names as the syntax spells them
OPS = {"tf": ("QuantizeV2", "Dequantize", "FakeQuant", "QuantizeAndDequantize"),
       "onnx": ("QuantizeLinear", "DequantizeLinear"), "litert": ("QUANTIZE", "DEQUANTIZE")}
SPECS = tuple(OPS)
_SPEC_ALIASES = {"tensorflow": "tf", "tflite": "litert", "lite": "litert"}
#: TensorFlow op names that fix a field
_OP_ALIASES = {
    ("tf", "fakequantwithminmaxargs"): ("fakequant", {"variant": "args"}),
    ("tf", "fakequantwithminmaxvars"): ("fakequant", {"variant": "vars"}),
    ("tf", "fakequantwithminmaxvarsperchannel"): ("fakequant", {"variant": "per_channel"}),
    ("tf", "quantizeanddequantizev2"): ("quantizeanddequantize", {"version": 2}),
    ("tf", "quantizeanddequantizev3"): ("quantizeanddequantize", {"version": 3}),
    ("tf", "quantizeanddequantizev4"): ("quantizeanddequantize", {"version": 4}),
    ("tf", "quantize"): ("quantizev2", {}),
}
#: key spellings -> field names, per record
_KEYS = {
    ("tf", "quantizev2"): {"min": "min_range", "max": "max_range", "emr": "ensure_minimum_range"},
    ("tf", "dequantize"): {"min": "min_range", "max": "max_range"},
    ("tf", "quantizeanddequantize"): {"min": "input_min", "max": "input_max"},
    ("onnx", "quantizelinear"): {"zp": "zero_point", "y_scale": "scale", "y_zero_point": "zero_point"},
    ("onnx", "dequantizelinear"): {"zp": "zero_point", "x_scale": "scale", "x_zero_point": "zero_point"},
    ("litert", "quantize"): {"zp": "zero_point"},
    ("litert", "dequantize"): {"zp": "zero_point", "input_dtype": "input_dtype_name"},
}
_INT_FIELDS = {"axis", "opset", "num_bits", "version", "quantized_dimension"}
_BOOL_FIELDS = {"narrow_range", "saturate", "signed_input", "range_given"}
_NUMBER_FIELDS = {"min_range", "max_range", "input_min", "input_max", "min", "max", "scale", "zero_point",
                  "ensure_minimum_range"}
_TOKEN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(\S+)$")


def _fail(text: str, rule: str) -> QuantSpecError:
    return InvalidArgumentError("spec", rule, text)


def _head(text: str, word: str, allow_bare: bool):
    spec, sep, op = word.partition(":")
    spec = _SPEC_ALIASES.get(spec.strip().lower(), spec.strip().lower())
    if spec not in OPS:
        raise _fail(text, "must start with SPEC:OP, SPEC one of " + ", ".join(SPECS))
    if not sep:
        if allow_bare:
            return spec, None, {}
        raise _fail(text, f"must name an op after the spec: {spec}:" + " | ".join(OPS[spec]))
    key = op.strip().lower()
    fixed: dict[str, Any] = {}
    if (spec, key) in _OP_ALIASES:
        key, fixed = _OP_ALIASES[spec, key]
        fixed = dict(fixed)
    if (spec, key) not in _records():
        raise _fail(text, f"names no {spec} op this syntax knows: " + ", ".join(OPS[spec]))
    return spec, key, fixed


def _value(text: str, field: str, raw: str) -> Any:
    low = raw.lower()
    if field in _BOOL_FIELDS:
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        raise _fail(text, f"gives {field}={raw!r}; expected true or false")
    if field in _INT_FIELDS:
        if low in ("none", "null"):
            return None
        try:
            return int(raw)
        except ValueError:
            raise _fail(text, f"gives {field}={raw!r}; expected an integer") from None
    if field in _NUMBER_FIELDS:
        if low in ("none", "null") and field == "zero_point":
            return None
        parts = raw.split(",")
        try:
            nums = [float(p) if any(c in p.lower() for c in ".en") or p.lower() in ("inf", "-inf") else int(p)
                    for p in parts]
        except ValueError:
            raise _fail(text, f"gives {field}={raw!r}; expected a number or comma-separated numbers") from None
        return tuple(nums) if len(nums) > 1 else nums[0]
    if low in ("none", "null"):
        return None
    return raw


def _fields(text: str, spec: str, key: str, tokens: list[str], fixed: dict) -> dict:
    aliases = _KEYS.get((spec, key), {})
    out = dict(fixed)
    for tok in tokens:
        m = _TOKEN.match(tok)
        if not m:
            raise _fail(text, f"has {tok!r} where key=value was expected")
        name = aliases.get(m.group(1).lower(), m.group(1))
        if name in out and name not in fixed:
            raise _fail(text, f"gives {m.group(1)} twice")
        out[name] = _value(text, name, m.group(2))
    return out


def _make(text: str, spec: str, key: str, fields: dict):
    cls = _records()[spec, key]
    try:
        if spec == "litert":
            from ..litert.params import QuantParams

            known = {"scale", "zero_point", "quantized_dimension", "input_dtype_name"}
            unknown = set(fields) - known
            if unknown:
                raise _fail(text, f"has keys {cls.op} does not take: {', '.join(sorted(unknown))} "
                            "(it takes scale, zero_point, quantized_dimension"
                            + (", input_dtype)" if key == "dequantize" else ")"))
            if "scale" not in fields:
                raise _fail(text, "needs scale=...")
            params = QuantParams(_listify(fields["scale"]), _listify(fields.get("zero_point", 0)),
                                 fields.get("quantized_dimension", 0))
            extra = {"input_dtype_name": fields["input_dtype_name"]} if "input_dtype_name" in fields else {}
            return cls(params, **extra)
        return cls(**fields)
    except QuantSpecError:
        raise
    except TypeError as e:
        names = [f.name for f in dataclasses.fields(cls)]
        raise _fail(text, f"has a key {cls.spec}:{cls.op} does not take, or lacks one it needs "
                    f"(fields: {', '.join(names)}): {e}") from None


def required_fields(spec: str, key: str) -> set[str]:
    """The keys a record of ``spec:key`` cannot do without."""
    if spec == "litert":
        return {"scale"}
    cls = _records()[spec, key]
    return {f.name for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}


def _listify(v):
    return list(v) if isinstance(v, tuple) else v


def parse(text: str):
    """The quantizer record a spec string describes (see the module docstring); a bad string raises
    :class:`quantspec.errors.InvalidArgumentError` naming what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgumentError("spec", "must be a non-empty string SPEC:OP key=value ...", text)
    words = text.split()
    spec, key, fixed = _head(text, words[0], allow_bare=False)
    return _make(text, spec, key, _fields(text, spec, key, words[1:], fixed))


def parse_target(text: str) -> tuple[str, str | None, dict]:
    """``(spec, op key or None, fixed fields)`` of a translation target: ``onnx``, ``litert:QUANTIZE``,
    ``tf:QuantizeV2 mode=SCALED``, ``onnx output_dtype=uint8``."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgumentError("to", "must name a spec (tf, onnx, litert), optionally SPEC:OP and key=value "
                                   "fields", text)
    words = text.split()
    spec, key, fixed = _head(text, words[0], allow_bare=True)
    if key is None:
        aliases: dict = {}
        for (s, k), a in _KEYS.items():
            if s == spec:
                aliases.update(a)
        out = {}
        for tok in words[1:]:
            m = _TOKEN.match(tok)
            if not m:
                raise _fail(text, f"has {tok!r} where key=value was expected")
            name = aliases.get(m.group(1).lower(), m.group(1))
            out[name] = _value(text, name, m.group(2))
        return spec, None, out
    return spec, key, _fields(text, spec, key, words[1:], fixed)
