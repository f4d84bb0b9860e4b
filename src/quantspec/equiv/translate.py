"""``quantspec.translate(source, to)``: the quantizer of another spec that agrees with ``source`` on the
most inputs.

How it chooses
--------------
1. **The grid.**  Every record says which affine grid its codes stand for, ``real(q) ~= step * (q -
   zero)`` (``record.grid()``); TensorFlow MIN_COMBINED with a signed type has a fractional ``zero``.
   The target's codes are the source's, shifted where the two types differ only in signedness
   (uint8 -> int8: -128).
2. **Candidates.**  The target parameters that express that grid: for ONNX QuantizeLinear and LiteRT
   QUANTIZE, the scales ``float32(step)`` and its two neighbours on each side (plus the source's own
   float32 scale where it has one) with the zero points ``round(zero)``, ``floor(zero)`` and
   ``ceil(zero)``; for TensorFlow QuantizeV2, the ranges ``[(qmin - zero) * step, (qmax - zero) *
   step]`` (MIN_COMBINED, MIN_FIRST) or ``[min_out * step, max_out * step]`` (SCALED, both round modes),
   each end and its float32 neighbours; dequantizers alike.  The real converter's record for this
   conversion (:mod:`.converters`), where there is one, is a candidate too.
3. **Scores.**  Each candidate is scored by the exact number of finite inputs of magnitude up to four
   times the source's range on which its codes differ from the source's (from the two quantizers'
   decision thresholds, :mod:`.thresholds`; exact because the quantizers are monotone there),
   plus the inf/NaN inputs (each NaN of a sign counted as its quiet NaN).  Dequantizers are scored
   on every code.  The lowest score wins; ties go to the converter's record, then to the first
   candidate in the order above.
4. **The report.**  The winner is then compared with the source over every input of the domain by
   :func:`quantspec.equivalent` (the counts reported are the exhaustive ones; pass ``inputs=None`` to
   skip it).

Per-axis sources are translated channel by channel (the fields that are not per channel, such as a
TensorFlow mode, are chosen for the smallest total).  :attr:`Translation.converter` holds the real
converter's choice; :attr:`Translation.same_as_converter` says whether the two coincide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._semantics.oprecord import QuantizerRecord
from ..dtypes import qtype
from ..errors import DTypeError, InvalidArgumentError, QuantSpecError, UnsupportedError
from . import thresholds as th
from .converters import ConverterChoice, converter_choice
from .prove import code_offset, equivalent
from .report import EquivalenceReport
from .specstring import parse, parse_target

__all__ = ["translate", "Translation", "Candidate"]


@dataclass
class Candidate:
    """One scored target record: ``finite`` inputs (within the scoring bound) and ``nonfinite`` ones
    on which it differs from the source (dequantizers: codes whose values differ), the largest code
    difference, and the ``rule`` that proposed it."""

    record: Any
    rule: str
    finite: int = 0
    nonfinite: int = 0
    largest: int | float = 0

    @property
    def score(self) -> int:
        return self.finite + self.nonfinite

    def to_dict(self) -> dict:
        return {"record": self.record.spec_string(), "rule": self.rule, "finite": self.finite,
                "nonfinite": self.nonfinite, "largest": self.largest}


@dataclass
class Translation:
    """The result of :func:`translate`: the chosen ``target`` record, the ``rule`` that proposed it,
    the scored ``candidates`` (per channel for per-axis sources: those of channel 0), the real
    ``converter``'s choice where one exists, and the exhaustive ``report`` of ``source`` against
    ``target`` (None when skipped)."""

    source: Any
    target: Any
    rule: str
    candidates: list[Candidate]
    converter: ConverterChoice | None = None
    report: EquivalenceReport | None = None
    bound: float = 0.0
    channel_rules: list[str] = field(default_factory=list)

    @property
    def same_as_converter(self) -> bool | None:
        """True when the real converter makes this same record; None when no converter makes it."""
        if self.converter is None or self.converter.record is None:
            return None
        return self.converter.record == self.target

    def to_dict(self) -> dict:
        return {"source": self.source.spec_string(), "target": self.target.spec_string(), "rule": self.rule,
                "converter": None if self.converter is None else self.converter.to_dict(),
                "same_as_converter": self.same_as_converter, "score_bound": self.bound,
                "candidates": [c.to_dict() for c in self.candidates],
                "report": None if self.report is None else self.report.to_dict()}

    def __str__(self) -> str:
        lines = [f"source:    {self.source.spec_string()}", f"target:    {self.target.spec_string()}",
                 f"rule:      {self.rule}"]
        if self.converter is not None:
            conv = self.converter
            if conv.record is None:
                lines.append(f"converter: {conv.converter}: no conversion ({conv.note})")
            else:
                same = "the same record" if self.same_as_converter else "a different record"
                lines.append(f"converter: {conv.converter}: {conv.record.spec_string()} ({same}; {conv.note})")
        else:
            lines.append("converter: none makes this conversion")
        best = self.candidates[:4]
        lines.append(f"candidates ({len(self.candidates)} scored on the finite inputs with |x| <= {self.bound:g} "
                     "and on inf/NaN):")
        for c in best:
            lines.append(f"  {c.score:>12,} differ  {c.record.spec_string()}  [{c.rule}]")
        if self.report is not None:
            lines.append("")
            lines.append(str(self.report))
        return "\n".join(lines)


# -- the target ops ----------------------------------------------------------------------------------
_DEFAULT_OP = {("onnx", False): "quantizelinear", ("onnx", True): "dequantizelinear",
               ("litert", False): "quantize", ("litert", True): "dequantize",
               ("tf", False): "quantizev2", ("tf", True): "dequantize"}


def _f32(v: float) -> float:
    with np.errstate(over="ignore"):
        return float(np.float32(v))


def _neighbours(v: float, k: int = 2) -> list[float]:
    """``v`` as float32 and its ``k`` float32 neighbours on each side (finite, same sign; a ``v``
    beyond float32's range: float32's largest value and those below it)."""
    with np.errstate(over="ignore"):
        f = np.float32(v)
    out = [float(f)]
    up = down = f
    for _ in range(k):
        up = np.nextafter(up, np.float32(np.inf))
        down = np.nextafter(down, np.float32(-np.inf))
        out += [float(up), float(down)]
    return [x for x in dict.fromkeys(out) if math.isfinite(x)]


def _zeros(zero: float, lo: int, hi: int) -> list[int]:
    r = int(np.rint(zero))
    out = [r, math.floor(zero), math.ceil(zero)]
    return list(dict.fromkeys(min(max(z, lo), hi) for z in out))


def _type_offset(source_type, target_type) -> int:
    if source_type.bits != target_type.bits:
        raise UnsupportedError("to", f"gives {target_type.name} codes for the source's {source_type.name} codes: a "
                               "translation keeps the number of codes (give output_dtype of the same width)",
                               target_type.name)
    if source_type.signed != target_type.signed:
        return int(target_type.qmin) - int(source_type.qmin)
    return 0


def _input_name(dtype) -> str:
    return qtype(dtype).name


def _scales(source, step: float) -> list[float]:
    out = _neighbours(step)
    own = _own_scale(source)
    if own is not None and own not in out:
        out.insert(1, own)
    return [s for s in out if s > 0]


def _own_scale(source) -> float | None:
    """A float32 scale the source itself holds (its reciprocal where it multiplies), if any."""
    plan = getattr(source, "_plan", None)
    if source.spec == "tf" and source.op == "QuantizeV2" and plan is not None:
        return _f32(1.0 / float(plan.scale[0])) if float(plan.scale[0]) > 0 else None
    return None


def _onnx_q(source, fixed: dict) -> list[tuple[Any, str, tuple]]:
    from ..onnx.ops import QuantizeLinearOp

    step, zero = source.grid()
    out_name = fixed.get("output_dtype") or source.code_type.name
    out = qtype(out_name, "output_dtype")
    if not out.is_int:
        raise UnsupportedError("to", "translates to integer QuantizeLinear outputs only", out.name)
    if out.name not in ("int8", "uint8", "int16", "uint16", "int4", "uint4", "int2", "uint2"):
        raise UnsupportedError("to", "names no ONNX QuantizeLinear output type for these codes "
                               "(QuantizeLinear has no 32-bit integer output)", out.name)
    zero_t = zero + _type_offset(source.code_type, out)
    base = {k: v for k, v in fixed.items() if k not in ("scale", "zero_point", "output_dtype")}
    base.setdefault("x_dtype", _input_name(source.input_dtype))
    scales = [float(fixed["scale"])] if "scale" in fixed else _scales(source, step)
    zps = [int(fixed["zero_point"])] if "zero_point" in fixed else _zeros(zero_t, int(out.qmin), int(out.qmax))
    key = tuple(sorted((k, v) for k, v in base.items())) + (("output_dtype", out.name),)
    cands = []
    for z in zps:
        for i, s in enumerate(scales):
            rule = (f"scale = float32(step){'' if i == 0 else f' neighbour {i}'}, zero point = "
                    f"{'round' if z == zps[0] else 'floor/ceil'}(zero)")
            cands.append((lambda s=s, z=z: QuantizeLinearOp(s, z, out.name, **base), rule, key))
    return cands


def _litert_q(source, fixed: dict):
    from ..litert.ops import QuantizeOp
    from ..litert.params import QuantParams

    step, zero = source.grid()
    zero_t = zero + _type_offset(source.code_type, qtype("int8"))
    scales = [float(fixed["scale"])] if "scale" in fixed else _scales(source, step)
    zps = [int(fixed["zero_point"])] if "zero_point" in fixed else _zeros(zero_t, -128, 127)
    cands = []
    for z in zps:
        for i, s in enumerate(scales):
            rule = (f"scale = float32(step){'' if i == 0 else f' neighbour {i}'}, zero point = "
                    f"{'round' if z == zps[0] else 'floor/ceil'}(zero)")
            cands.append((lambda s=s, z=z: QuantizeOp(QuantParams(s, z)), rule, ()))
    return cands


def _tf_q(source, fixed: dict):
    from ..tf import spec as tfspec
    from ..tf.ops import QuantizeV2Op

    step, zero = source.grid()
    t_name = fixed.get("T") or source.code_type.tf
    if not t_name:
        raise UnsupportedError("to", "has no TensorFlow quantized type for these codes (give T=...)",
                               source.code_type.name)
    T = tfspec.tf_type(t_name)
    zero_t = zero + _type_offset(source.code_type, T.qtype)
    modes = [fixed["mode"].upper()] if "mode" in fixed else ["MIN_COMBINED", "MIN_FIRST", "SCALED"]
    base = {k: v for k, v in fixed.items() if k not in ("mode", "round_mode", "min_range", "max_range", "T",
                                                        "narrow_range")}
    cands = []
    for mode in modes:
        if mode in ("MIN_COMBINED", "MIN_FIRST"):
            lo, hi = (T.lowest - zero_t) * step, (T.highest - zero_t) * step
            variants = [("HALF_AWAY_FROM_ZERO", False, lo, hi)]
        else:
            variants = []
            rms = [fixed["round_mode"].upper()] if "round_mode" in fixed else ["HALF_TO_EVEN", "HALF_AWAY_FROM_ZERO"]
            narrows = [bool(fixed["narrow_range"])] if "narrow_range" in fixed else ([False, True] if T.signed
                                                                                   else [False])
            for rm in rms:
                for narrow in narrows:
                    lo = (T.lowest + (1 if narrow else 0)) * step if T.signed else 0.0
                    variants.append((rm, narrow, lo, T.highest * step))
        for rm, narrow, lo, hi in variants:
            for i, mn in enumerate(_neighbours(lo, 1)):
                for j, mx in enumerate(_neighbours(hi, 1)):
                    rule = f"{mode} range [(qmin - zero) * step, (qmax - zero) * step]" if mode != "SCALED" else \
                        f"SCALED range [min_out * step, max_out * step], {rm}"
                    if i or j:
                        rule += " (float32 neighbours)"
                    key = (mode, rm, narrow, tuple(sorted(base.items())))
                    cands.append((lambda mn=mn, mx=mx, mode=mode, rm=rm, narrow=narrow:
                                  QuantizeV2Op(mn, mx, T.name, mode, rm, narrow, **base), rule, key))
    return cands


def _onnx_dq(source, fixed: dict):
    from ..onnx.ops import DequantizeLinearOp

    step, zero = source.grid()
    x_name = fixed.get("x_dtype") or source.code_type.name
    xt = qtype(x_name, "x_dtype")
    zero_t = zero + _type_offset(source.code_type, xt)
    base = {k: v for k, v in fixed.items() if k not in ("scale", "zero_point", "x_dtype")}
    scales = _scales(source, step)
    zps = _zeros(zero_t, int(xt.qmin), int(xt.qmax))
    if xt.name == "int32":
        zps = [None]
    return [(lambda s=s, z=z: DequantizeLinearOp(s, z, xt.name, **base),
             f"scale = float32(step){'' if i == 0 else f' neighbour {i}'}, zero point = round/floor/ceil(zero)",
             tuple(sorted(base.items())))
            for z in zps for i, s in enumerate(scales)]


def _litert_dq(source, fixed: dict):
    from ..litert.ops import DequantizeOp
    from ..litert.params import QuantParams

    step, zero = source.grid()
    x_name = fixed.get("input_dtype_name") or source.code_type.name
    xt = qtype(x_name)
    zero_t = zero + _type_offset(source.code_type, xt)
    return [(lambda s=s, z=z: DequantizeOp(QuantParams(s, z), xt.name),
             f"scale = float32(step){'' if i == 0 else f' neighbour {i}'}, zero point = round/floor/ceil(zero)", ())
            for z in _zeros(zero_t, int(xt.qmin), int(xt.qmax)) for i, s in enumerate(_scales(source, step))]


def _tf_dq(source, fixed: dict):
    from ..tf import spec as tfspec
    from ..tf.ops import DequantizeOp

    step, zero = source.grid()
    T = tfspec.tf_type(fixed.get("T") or source.code_type.tf or source.code_type.name)
    zero_t = zero + _type_offset(source.code_type, T.qtype)
    modes = [fixed["mode"].upper()] if "mode" in fixed else ["MIN_COMBINED", "MIN_FIRST", "SCALED"]
    base = {k: v for k, v in fixed.items() if k not in ("mode", "min_range", "max_range", "T")}
    cands = []
    for mode in modes:
        if mode == "SCALED":
            lo, hi = (T.lowest * step if T.signed else 0.0), T.highest * step
        else:
            lo, hi = (T.lowest - zero_t) * step, (T.highest - zero_t) * step
        for mn in _neighbours(lo, 1):
            for mx in _neighbours(hi, 1):
                cands.append((lambda mn=mn, mx=mx, mode=mode: DequantizeOp(mn, mx, T.name, mode, **base),
                              f"{mode} range from the grid", (mode, tuple(sorted(base.items())))))
    return cands


_GENERATORS = {("onnx", "quantizelinear"): _onnx_q, ("litert", "quantize"): _litert_q, ("tf", "quantizev2"): _tf_q,
               ("onnx", "dequantizelinear"): _onnx_dq, ("litert", "dequantize"): _litert_dq,
               ("tf", "dequantize"): _tf_dq}


# -- combining per-channel choices ------------------------------------------------------------------
def _source_axis(source) -> int | None:
    if source.channels == 1:
        return None
    if source.spec == "litert":
        return source.params.quantized_dimension
    if source.spec == "tf" and source.op == "FakeQuant":
        return -1
    return source.axis


def _combine(records: list, axis: int | None, fixed: dict):
    """One per-axis record from per-channel records of one class and key."""
    if len(records) == 1:
        return records[0]
    first = records[0]
    cls = type(first)
    if first.spec == "onnx":
        scales = tuple(r.scale for r in records)
        zps = None if first.zero_point is None else tuple(r.zero_point for r in records)
        kw = {f: getattr(first, f) for f in _init_fields(cls) if f not in ("scale", "zero_point", "axis")}
        return cls(scales, zps, axis=axis, **kw)
    if first.spec == "litert":
        from ..litert.params import QuantParams

        dim = fixed.get("quantized_dimension", axis)
        if dim is None or dim < 0:
            raise InvalidArgumentError("to", "needs quantized_dimension=N for a per-channel LiteRT record (the "
                                       "source's channel axis counts from the end)", axis)
        p = QuantParams([float(r.params.scale[0]) for r in records], [int(r.params.zero_point[0]) for r in records],
                        dim)
        return cls(p) if first.op == "QUANTIZE" else cls(p, first.input_dtype_name)
    if first.op == "QuantizeV2":
        return cls(tuple(r.min_range for r in records), tuple(r.max_range for r in records), first.T, first.mode,
                   first.round_mode, first.narrow_range, axis, first.ensure_minimum_range, first.kernel)
    return cls(tuple(r.min_range for r in records), tuple(r.max_range for r in records), first.T, first.mode,
               first.narrow_range, axis, first.dtype, first.kernel)


def _init_fields(cls) -> set:
    import dataclasses

    return {f.name for f in dataclasses.fields(cls)}


# -- scoring -------------------------------------------------------------------------------------------
def _order_for(source, target_probe) -> th.Ordinals:
    """The domain candidates are scored on: the source's input type, or the narrower float type of
    the two (a float16 model sees float16 inputs)."""
    a, b = np.dtype(source.input_dtype), np.dtype(target_probe.input_dtype)
    narrow = b if (a == np.dtype(np.float32) and b != a) else a
    return th.ordinals_for(narrow)


def _score_quantizers(source, made: list[tuple[Any, str]], bound: float) -> list[Candidate]:
    order = _order_for(source, made[0][0])
    src_steps = th.thresholds(source, 0, order, bound)
    out = []
    for rec, rule in made:
        offset = code_offset(source, rec)
        try:
            steps = th.thresholds(rec, -offset, order, bound)
        except QuantSpecError:
            continue
        finite, largest = th.disagreement(src_steps, steps)
        nonfinite = th.nonfinite_disagreement(source, rec, offset, order)
        out.append(Candidate(rec, rule, finite, nonfinite, largest))
    return out


def _score_dequantizers(source, made: list[tuple[Any, str]]) -> list[Candidate]:
    out = []
    for rec, rule in made:
        r = equivalent(source, rec, "codes", keep=0, examples=0)
        out.append(Candidate(rec, rule, r.differing, 0, r.max_difference))
    return out


def _bound(source) -> float:
    if source.kind == "dequantize":
        return 0.0
    lo, hi = source.real_range()
    return 4.0 * max(abs(lo), abs(hi), 1e-30)


def _translate_channel(source, spec: str, key: str, fixed: dict, converter_record, generator):
    made: list[tuple[Any, str, tuple]] = []
    errors: list[Exception] = []
    try:
        step, zero = source.grid()
    except QuantSpecError:
        raise
    except (ZeroDivisionError, ValueError, OverflowError):     # a zero or NaN scale (an infinite range)
        step, zero = math.nan, math.nan
    if not (math.isfinite(step) and math.isfinite(zero) and step > 0):
        raise UnsupportedError("source", f"has no finite grid (step {step}, zero {zero}: an infinite or NaN range): "
                               "no record of another spec expresses it", source.spec_string())
    for make, rule, k in generator(source, fixed):
        try:
            made.append((make(), rule, k))
        except QuantSpecError as e:           # a candidate the target's rules refuse
            errors.append(e)
    if converter_record is not None:
        made.insert(0, (converter_record, "the converter's choice", _key_of(converter_record, made)))
    unique: dict = {}
    for rec, rule, k in made:
        unique.setdefault(rec, (rule, k))
    if not unique:
        raise errors[0] if errors else UnsupportedError("to", "gives no valid candidate record", spec)
    pairs = [(rec, rule) for rec, (rule, _) in unique.items()]
    if source.kind == "dequantize":
        scored = _score_dequantizers(source, pairs)
    else:
        scored = _score_quantizers(source, pairs, _bound(source))
    keys = {rec: k for rec, (_, k) in unique.items()}
    return scored, keys


def _field_matches(record, name: str, value) -> bool:
    """Whether ``record`` has the fixed field ``name=value`` of a target (type names compared as types)."""
    have = getattr(record, name, None)
    if have is None and name == "input_dtype_name":
        have = getattr(record, "input_dtype_name", None)
    try:
        if isinstance(value, str) and isinstance(have, str):
            return qtype(value).name == qtype(have).name if name.endswith(("dtype", "dtype_name")) \
                else value.upper() == have.upper()
    except QuantSpecError:
        return value == have
    return have == value


def _key_of(record, made) -> tuple:
    for rec, _, k in made:
        if type(rec) is type(record) and getattr(rec, "output_dtype", None) == getattr(record, "output_dtype", None):
            return k
    return ("converter",)


def translate(source, to, *, inputs="float32", keep: int = 100_000) -> Translation:
    """The record of the spec (and op) ``to`` whose parameters make it agree with ``source`` on the most
    inputs, with the real converter's choice and the exhaustive comparison of the two.

    ``source``: a quantizer record, or its spec string.  ``to``: ``"onnx"``, ``"litert"``, ``"tf"``,
    ``"SPEC:OP"``, optionally with fixed fields (``"onnx output_dtype=uint8 opset=13"``,
    ``"tf:QuantizeV2 mode=SCALED"``), or a record class.  ``inputs``: the domain of the report (as
    :func:`quantspec.equivalent` takes it; where either record takes float16 or bfloat16 inputs, that
    type's domain), or None to skip the report.  See the module docstring for how it chooses."""
    if isinstance(source, str):
        source = parse(source)
    if not isinstance(source, QuantizerRecord):
        raise DTypeError("source", "must be a quantizer record or its spec string", type(source).__name__)
    if isinstance(to, type) and issubclass(to, QuantizerRecord):
        spec, key, fixed = to.spec, to.op.lower(), {}
    else:
        spec, key, fixed = parse_target(to)
    dq = source.kind == "dequantize"
    key = key or _DEFAULT_OP[spec, dq]
    if (key, spec) not in {(k, s) for (s, k) in _GENERATORS}:
        what = "dequantizer" if dq else "quantizer"
        raise UnsupportedError("to", f"names an op translate does not target for a {what}"
                               " (targets: " + ", ".join(f"{s}:{k}" for s, k in _GENERATORS) + ")", to)
    if dq != (key in ("dequantizelinear", "dequantize")):
        raise UnsupportedError("to", "must be of the source's kind (a quantizer for a quantizer, a dequantizer for a "
                               "dequantizer)", to)
    generator = _GENERATORS[spec, key]
    conv = converter_choice(source, spec, key)
    conv_fits = conv is not None and conv.record is not None and all(
        _field_matches(conv.record, k, v) for k, v in fixed.items())
    channels = source.channels
    axis = _source_axis(source)
    per_channel: list[tuple[list[Candidate], dict]] = []
    for c in range(channels):
        conv_c = None
        if conv_fits:
            conv_c = conv.record if channels == 1 else (conv.record.channel(c) if conv.record.channels == channels
                                                        else None)
        per_channel.append(_translate_channel(source.channel(c) if channels > 1 else source, spec, key, fixed,
                                              conv_c, generator))
    # the fields shared by all channels: the key with the smallest total of the channels' bests
    totals: dict = {}
    for scored, keys in per_channel:
        best_by_key: dict = {}
        for cand in scored:
            k = keys[cand.record]
            if k not in best_by_key or cand.score < best_by_key[k].score:
                best_by_key[k] = cand
        for k, cand in best_by_key.items():
            t = totals.setdefault(k, [0, 0])
            t[0] += cand.score
            t[1] += 1
    complete = [k for k, (s, n) in totals.items() if n == channels]
    if not complete:
        raise UnsupportedError("to", "gives no record that fits every channel", to)
    first_keys = per_channel[0][1]
    order = {k: i for i, k in enumerate(dict.fromkeys(first_keys.values()))}
    best_key = min(complete, key=lambda k: (totals[k][0], order.get(k, len(order))))
    chosen: list[Candidate] = []
    conv_records = {conv.record} if conv_fits and channels == 1 else set()
    for scored, keys in per_channel:
        fit = [c for c in scored if keys[c.record] == best_key]
        # lowest score; ties: the converter's record, then the candidates' order
        fit.sort(key=lambda c: (c.score, c.record not in conv_records and c.rule != "the converter's choice"))
        chosen.append(fit[0])
    target = _combine([c.record for c in chosen], axis, fixed)
    scored0 = sorted(per_channel[0][0], key=lambda c: c.score)
    report = None
    if inputs is not None:
        domain = inputs
        if isinstance(inputs, str) and dq:
            domain = "codes"
        elif isinstance(inputs, str):
            for rec in (source, target):
                name = qtype(rec.input_dtype).name if rec.kind != "dequantize" else None
                if name in ("float16", "bfloat16"):
                    domain = name
        report = equivalent(source, target, domain, keep=keep)
    return Translation(source, target, chosen[0].rule, scored0, conv, report, _bound(source),
                       [c.rule for c in chosen])
