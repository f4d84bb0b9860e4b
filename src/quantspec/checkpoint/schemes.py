"""The quantization schemes of ``quantspec convert``, one object each, and the recipes that assign them.

One :class:`Scheme` per scheme name: its codes' type, its granularity, its parameter rule (a
:class:`~quantspec.checkpoint.rules.ParamRule`: how the scales and zero points are chosen), its
codes rule (a :class:`~quantspec.checkpoint.rules.CodesRule`: how the codes follow from the stored
scale and zero point), how it is stored (quantspec's layout from its types and granularity;
compressed-tensors' from its ``ct`` record, :class:`CTStorage`), the ONNX opset whose
QuantizeLinear / DequantizeLinear has everything it uses, and which tool it matches.  :data:`SCHEMES`
is the table of them; :func:`register` adds one (``convert`` and ``verify`` then take its name).
Weights are stored ``[out_features, in_features]`` (PyTorch / Hugging Face layout): "per channel" is
axis 0, blocks run along axis 1.

Where each piece lives: the rules' arithmetic, numpy path and kernel calls in
:mod:`quantspec.checkpoint.rules` (one class per rule; the kernels themselves in
:mod:`quantspec.checkpoint._jitted`); the reference path that composes them in
:mod:`quantspec.checkpoint.reference`; the fast path in :mod:`quantspec.checkpoint.encode`; codes
from stored parameters (``verify --params-from-dst``) in :mod:`quantspec.checkpoint.rederive`;
quantspec's storage in :mod:`quantspec.checkpoint.layout`, compressed-tensors' in
:mod:`quantspec.checkpoint.ctlayout`.  None of them tests a scheme's or rule's name.

Parameter rules (``params``, the manifest's ``"parameters"``):

- ``ort-int``: ``onnxruntime.quantization``'s weight parameters (``quantize_data`` /
  ``compute_scale_zp``, reduce_range off): symmetric int8 ``scale = float32((float64(m) -
  float64(-m)) / 254)`` with ``m = max(|min|, |max|)`` (0 included), asymmetric uint8 ``scale =
  float32((float64(max) - float64(min)) / 255)`` and ``zero_point = round_half_even(0 -
  float64(min) / scale64)``; a float64 scale below float32's smallest normal gives scale 1, zero
  point 0.
- ``ort-nbits``: onnxruntime's ``MatMulNBitsQuantizer`` (default RTN, QDQ format), the MLAS routine
  ``BlockwiseQDQQuantizer::QuantizeColumnWise``: per block, symmetric ``scale = -v / 8`` where ``v`` is
  the block's minimum or maximum of larger magnitude (the minimum on a tie; no zero is added to the
  range, so the scale is negative when that value is positive); asymmetric ``scale = (max - min) / 15``
  and ``zero_point = clamp(roundf(0 - min / scale), 0, 15)`` with min <= 0 <= max; float32 arithmetic.
- ``amax``: ``scale = float32(amax) / float32(largest finite value of the codes' type)``, one IEEE
  division; 1.0 when amax is 0 or the quotient is 0.
- ``mx``: the OCP Microscaling v1.0 rule: per block of 32, ``X = 2^(floor(log2(amax)) - emax)``
  with ``emax`` the exponent of the element type's largest normal value, the exponent clamped to
  [-127, 127] (an all-zero block gets 2^-127); the stored float8e8m0 scale is ``X`` (``X * 2^-6``
  for MXINT8, whose elements are int8 values times 2^-6; clamped at 2^-127 too).
- ``litert``: ``quantspec.litert.weight_params`` (the TFLite converter), per output channel.

Codes rules (``codes_rule.name``, the manifest's ``"codes_rule"``): ``onnx``: ONNX QuantizeLinear of
the stored scale and zero point (saturating for float types); ``ort-nbits``: the MLAS routine's
``clamp(int(roundf(x * (1 / scale))) + zero_point)`` (a reciprocal multiply, rounding half away from
zero); ``litert``: the converter's ``clamp(round_half_away(x * float32(1 / float64(scale))), -127,
127)``.
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ..dtypes import qtype
from ..errors import InvalidArgumentError
from .presets import PRESETS, REFUSED, preset
from .rules import (AMAX, CODES_RULES, CT_CODES, CT_PRESET, LITERT, LITERT_CODES, MX, ONNX, ORT_INT, ORT_NBITS,
                    ORT_NBITS_CODES, CodesRule, ParamRule)

__all__ = ["Scheme", "SCHEMES", "PRESET_SCHEMES", "KEEP", "scheme", "register", "unregister", "codes_rule", "CTStorage", "Assignment",
           "Recipe", "load_recipe", "QUANTIZABLE"]

KEEP = "keep"
#: the source types a scheme quantizes; every other type is kept as it is
QUANTIZABLE = ("float", "float16", "bfloat16")


def onnx_attributes(granularity: str, block: int) -> dict[str, int]:
    """The attributes of ONNX QuantizeLinear / DequantizeLinear for parameters of this granularity
    ("tensor"; "channel": one per row; otherwise blocks of ``block`` along a row)."""
    if granularity == "tensor":
        return {}
    if granularity == "channel":
        return {"axis": 0}
    return {"axis": 1, "block_size": block}


class CTStorage(NamedTuple):
    """How compressed-tensors stores a scheme's weights (:mod:`quantspec.checkpoint.ctlayout`): its
    format (``int-quantized``, ``float-quantized``, ``pack-quantized``) and the ``QuantizationArgs``
    it declares (type, bits, strategy, symmetric; a group's size is the scheme's block)."""

    format: str
    type: str
    bits: int
    strategy: str
    symmetric: bool


@dataclass(frozen=True)
class Scheme:
    """One scheme: everything the converter, the manifest and the docs say about it, its rules
    included (module docstring).  A new scheme is one of these, given to :func:`register`."""

    name: str
    codes: str                 # quantspec type name of the codes
    granularity: str           # "tensor", "channel" (axis 0) or "block" (along axis 1)
    block: int                 # elements per block (granularity "block"), else 0
    zero_point: bool           # a zero point is stored (asymmetric)
    param_rule: ParamRule      # how the scales (and zero points) are chosen (:mod:`.rules`)
    codes_rule: CodesRule      # how the codes follow from the stored parameters (:mod:`.rules`)
    scale_type: str            # "float" or "float8e8m0"
    opset: int                 # the first ONNX opset whose Q/DQ has the types and attributes used
    tool: str                  # what the parameters (and codes) match
    ranks: tuple[int, ...] = ()  # the ranks it takes (empty: 2 or more)
    emax: int = 0              # mx: exponent of the element type's largest normal value
    scale_shift: int = 0       # mx: the stored scale is X * 2**scale_shift (MXINT8: -6)
    ct: CTStorage | None = None  # how compressed-tensors stores it (None: that layout cannot)
    preset: Any = None         # a compressed-tensors preset (:mod:`.presets`): its own arithmetic and layout

    @property
    def params(self) -> str:
        """The parameter rule's name (the manifest's ``"parameters"``)."""
        return self.param_rule.name

    @property
    def spec(self) -> str:
        return self.codes_rule.spec

    def attributes(self) -> dict[str, int]:
        """The attributes of ONNX QuantizeLinear / DequantizeLinear for the stored parameters."""
        return onnx_attributes(self.granularity, self.block)

    def takes(self, dtype: str, shape: tuple[int, ...]) -> str | None:
        """None if this scheme quantizes a tensor of this type and shape, else why not."""
        if dtype not in QUANTIZABLE:
            return f"{dtype} tensors are not quantized (only {', '.join(QUANTIZABLE)})"
        if self.ranks and len(shape) not in self.ranks:
            return f"{self.name} takes {' or '.join(f'{r}-D' for r in self.ranks)} weights (got {len(shape)}-D)"
        if not self.ranks and len(shape) < 2:
            return f"{self.name} takes weights of 2 or more dimensions (got {len(shape)}-D)"
        if any(d == 0 for d in shape):
            return "the tensor is empty"
        return self.param_rule.refuses(self, tuple(shape))


def _ct_int8(strategy, symmetric):
    return CTStorage("int-quantized", "int", 8, strategy, symmetric)


def _ort(name, codes, gran, zp):
    return Scheme(name, codes, gran, 0, zp, ORT_INT, ONNX, "float", 10 if gran == "tensor" else 13,
                  "onnxruntime.quantization weight parameters (quantize_data, "
                  + ("asymmetric" if zp else "symmetric") + (", per tensor)" if gran == "tensor" else ", per channel)"),
                  ct=_ct_int8(gran, not zp))


def _nbits(n, zp):
    return Scheme(f"uint4-b{n}-asym" if zp else f"int4-b{n}", "uint4" if zp else "int4", "block", n, zp, ORT_NBITS,
                  ORT_NBITS_CODES, "float", 21,
                  "onnxruntime MatMulNBitsQuantizer (DefaultWeightOnlyQuantConfig, RTN, QDQ format, "
                  + ("asymmetric)" if zp else "symmetric)"), ranks=(2,),
                  ct=CTStorage("pack-quantized", "int", 4, "group", not zp))


def _fp8(name, codes, gran):
    # compressed-tensors has one float8 type, e4m3
    ct = CTStorage("float-quantized", "float", 8, gran, True) if codes == "float8e4m3fn" else None
    return Scheme(name, codes, gran, 0, False, AMAX, ONNX, "float", 19,
                  "amax scaling: scale = float32(amax) / float32(max finite), one IEEE division", ct=ct)


def _mx(name, codes, emax, shift=0):
    return Scheme(name, codes, "block", 32, False, MX, ONNX, "float8e8m0", 28 if qtype(codes).bits == 6 else 24,
                  "the OCP Microscaling (MX) v1.0 shared-exponent rule, block 32", ranks=(2,), emax=emax,
                  scale_shift=shift)


#: every scheme, by name (the order of the docs' table); :func:`register` adds to it
SCHEMES: dict[str, Scheme] = {s.name: s for s in (
    _ort("int8", "int8", "channel", False),
    _ort("int8-tensor", "int8", "tensor", False),
    _ort("uint8-asym", "uint8", "channel", True),
    *(_nbits(n, False) for n in (16, 32, 64, 128, 256)),
    *(_nbits(n, True) for n in (16, 32, 64, 128, 256)),
    _fp8("fp8-e4m3", "float8e4m3fn", "tensor"),
    _fp8("fp8-e5m2", "float8e5m2", "tensor"),
    _fp8("fp8-e4m3-channel", "float8e4m3fn", "channel"),
    _mx("mxfp4", "float4e2m1", 2),
    _mx("mxfp6-e2m3", "float6e2m3", 2),
    _mx("mxfp6-e3m2", "float6e3m2", 4),
    _mx("mxfp8-e4m3", "float8e4m3fn", 8),
    _mx("mxfp8-e5m2", "float8e5m2", 15),
    _mx("mxint8", "int8", 0, -6),
    Scheme("litert", "int8", "channel", 0, False, LITERT, LITERT_CODES, "float", 13,
           "quantspec.litert.weight_params / quantize_weights (the TFLite converter's weights)",
           ct=_ct_int8("channel", True)),
)}


def _preset(p) -> Scheme:
    a = p.weights
    gran = "channel" if a.strategy == "channel" else "block"
    block = a.group if a.strategy in ("group", "tensor_group") else a.block[1] if a.strategy == "block" else 0
    scale = {None: "float", "float8e4m3fn": "float8e4m3fn", "uint8": "float8e8m0"}[a.scale_dtype]
    return Scheme(p.name, p.codes, gran, block, not a.symmetric, CT_PRESET, CT_CODES, scale, 0,
                  f"llm-compressor model_free_ptq, preset {p.name} (compressed-tensors {p.format})", ranks=(2,),
                  preset=p)


#: the compressed-tensors presets as schemes, under their names (upper case; :func:`scheme` takes any
#: case); ``SCHEMES[name]`` finds them too, but iterating :data:`SCHEMES` gives quantspec's own schemes
PRESET_SCHEMES: dict[str, Scheme] = {name: _preset(p) for name, p in PRESETS.items() if name == p.name}


class _Schemes(dict):
    """quantspec's schemes by name (iteration, ``len``); a preset's name is looked up in
    :data:`PRESET_SCHEMES` (``SCHEMES[name]``, ``get``, ``in``)."""

    def __missing__(self, name):
        return PRESET_SCHEMES[name]

    def get(self, name, default=None):
        return dict.get(self, name, PRESET_SCHEMES.get(name, default) if isinstance(name, str) else default)

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or (isinstance(name, str) and name in PRESET_SCHEMES)


SCHEMES = _Schemes(SCHEMES)
_BUILTIN = frozenset(SCHEMES) | frozenset(PRESET_SCHEMES)


def register(s: Scheme, *, replace: bool = False) -> Scheme:
    """Add the scheme ``s`` to :data:`SCHEMES`: ``convert`` and recipes then take its name, and
    ``verify`` checks checkpoints that use it, in this process (the workers of a Dask cluster must
    register it too, e.g. by importing the module that does).  ``replace``: allow replacing a registered
    scheme of the same name (never a built-in one).  Returns ``s``."""
    if not isinstance(s, Scheme):
        raise InvalidArgumentError("scheme", "must be a quantspec.checkpoint.schemes.Scheme", type(s).__name__)
    if not isinstance(s.param_rule, ParamRule) or not isinstance(s.codes_rule, CodesRule):
        raise InvalidArgumentError("scheme", "must hold a ParamRule and a CodesRule (quantspec.checkpoint.rules)",
                                   s.name)
    if not isinstance(s.name, str) or not s.name or s.name == KEEP:
        raise InvalidArgumentError("scheme.name", f"must be a non-empty name other than {KEEP!r}", s.name)
    if s.name in SCHEMES and (s.name in _BUILTIN or not replace) and SCHEMES[s.name] is not s:
        raise InvalidArgumentError("scheme.name", "names a scheme already registered", s.name)
    if s.granularity not in ("tensor", "channel", "block") or (s.granularity == "block") != (s.block > 0):
        raise InvalidArgumentError("scheme.granularity", "must be 'tensor', 'channel', or 'block' with a block > 0",
                                   (s.granularity, s.block))
    qtype(s.codes)
    qtype(s.scale_type)
    SCHEMES[s.name] = s
    return s


def unregister(name: str) -> None:
    """Remove a scheme :func:`register` added (built-in schemes stay)."""
    if name in _BUILTIN:
        raise InvalidArgumentError("name", "names a built-in scheme", name)
    SCHEMES.pop(name, None)


def codes_rule(name: Any) -> CodesRule:
    """The codes rule called ``name`` (a built-in one, or one a registered scheme holds); a
    :class:`~quantspec.checkpoint.rules.CodesRule` is returned as it is."""
    if isinstance(name, CodesRule):
        return name
    if name in CODES_RULES:
        return CODES_RULES[name]
    for s in SCHEMES.values():
        if s.codes_rule.name == name:
            return s.codes_rule
    raise ValueError(f"unknown codes rule {name!r}")


def table_markdown() -> str:
    """The docs' table of schemes (docs/checkpoints.md), from :data:`SCHEMES`."""
    rows = ["| scheme | codes | granularity | parameters | codes rule | matches | opset |", "|---|---|---|---|---|---|---|"]
    for s in SCHEMES.values():
        codes = s.codes + (" + zero point" if s.zero_point else "")
        gran = {"tensor": "per tensor", "channel": "per channel (axis 0)"}.get(
            s.granularity, f"blocks of {s.block} along axis 1")
        sym = "" if not s.param_rule.shows_symmetry else (", asymmetric" if s.zero_point else ", symmetric")
        scale = ", float8e8m0 scale" if s.scale_type == "float8e8m0" else ""
        rows.append(f"| `{s.name}` | {codes} | {gran} | {s.param_rule.text}{sym}{scale} | "
                    f"{s.codes_rule.text} | {s.tool} | {s.opset} |")
    return "\n".join(rows) + "\n"


def scheme(name: Any, argument: str = "scheme") -> Scheme:
    """The scheme called ``name`` (a compressed-tensors preset's name in any case)."""
    if isinstance(name, Scheme):
        return name
    if isinstance(name, str) and name not in SCHEMES and name.upper() in PRESETS:
        return SCHEMES[PRESETS[name.upper()].name]
    if isinstance(name, str) and name.upper() in REFUSED:
        preset(name)                               # raises: why this preset cannot be made without data
    if not isinstance(name, str) or name not in SCHEMES:
        raise InvalidArgumentError(argument, "must name a scheme: " + ", ".join(SCHEMES), name)
    return SCHEMES[name]


# -- recipes -------------------------------------------------------------------------------------
_GLOB = set("*?[")


@dataclass(frozen=True)
class Assignment:
    """What the converter does with one tensor: ``scheme`` (a name, or ``"keep"``), why, and whether
    a rule named the tensor exactly (then a scheme that cannot take it is an error)."""

    scheme: str
    reason: str
    explicit: bool = False


@dataclass(frozen=True)
class Recipe:
    """Rules mapping tensor names to schemes: the first rule whose glob matches wins, else the
    default.  ``include`` / ``exclude``: only tensors matching an include glob (when any is given)
    and no exclude glob are quantized; the others are kept."""

    default: str | None = None
    rules: tuple[tuple[str, str], ...] = ()
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    source: str = "arguments"

    def assign(self, name: str, dtype: str, shape: tuple[int, ...]) -> Assignment:
        if self.include and not any(fnmatch.fnmatchcase(name, g) for g in self.include):
            return Assignment(KEEP, "not matched by --include")
        for g in self.exclude:
            if fnmatch.fnmatchcase(name, g):
                return Assignment(KEEP, f"excluded by {g!r}")
        chosen, explicit, why = None, False, "no rule names it"
        for pattern, name_ in self.rules:
            if fnmatch.fnmatchcase(name, pattern):
                chosen, explicit = name_, not (_GLOB & set(pattern))
                why = f"rule {pattern!r}"
                break
        else:
            if self.default is not None:
                chosen, why = self.default, "the default scheme"
        if chosen is None:
            return Assignment(KEEP, why)
        if chosen == KEEP:
            return Assignment(KEEP, f"kept by {why}", explicit)
        refusal = SCHEMES[chosen].takes(dtype, shape)
        if refusal is not None:
            return Assignment(KEEP, refusal, explicit) if not explicit else Assignment(chosen, refusal, True)
        return Assignment(chosen, why, explicit)

    def describe(self) -> dict:
        return {"default": self.default, "rules": [{"match": m, "scheme": s} for m, s in self.rules],
                "include": list(self.include), "exclude": list(self.exclude), "from": self.source}


def _globs(value: Any, argument: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    try:
        items = tuple(value)
    except TypeError:
        raise InvalidArgumentError(argument, "must be a glob or a list of globs", value) from None
    for g in items:
        if not isinstance(g, str) or not g:
            raise InvalidArgumentError(argument, "must hold non-empty glob strings", g)
    return items


def _scheme_or_keep(value: Any, argument: str) -> str:
    if value == KEEP:
        return KEEP
    return scheme(value, argument).name


def load_recipe(recipe: Any = None, default: Any = None, include: Any = None, exclude: Any = None) -> Recipe:
    """The :class:`Recipe` of ``convert``'s arguments.  ``recipe``: None, a dict
    ``{"default": SCHEME, "rules": [{"match": GLOB, "scheme": SCHEME or "keep"}, ...]}`` or the path
    of a TOML file holding the same (``default = "int4-b32"`` and ``[[rules]]`` tables).  ``default``
    (the ``scheme`` argument) overrides the recipe's default."""
    source = "arguments"
    data: dict = {}
    if recipe is not None:
        if isinstance(recipe, (str, os.PathLike)):
            path = Path(recipe)
            source = str(path)
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                raise InvalidArgumentError("recipe", "must name an existing TOML file", str(path)) from None
            except (OSError, UnicodeDecodeError) as e:
                raise InvalidArgumentError("recipe", "could not be read", str(path), detail=str(e)) from None
            except tomllib.TOMLDecodeError as e:
                raise InvalidArgumentError("recipe", "is not valid TOML", str(path), detail=str(e)) from None
        elif isinstance(recipe, dict):
            data = recipe
            source = "dict"
        else:
            raise InvalidArgumentError("recipe", "must be a TOML path or a dict", type(recipe).__name__)
    unknown = sorted(set(data) - {"default", "rules"})
    if unknown:
        raise InvalidArgumentError("recipe", "has keys other than 'default' and 'rules'", unknown)
    rules_in = data.get("rules", [])
    if not isinstance(rules_in, list):
        raise InvalidArgumentError("recipe.rules", "must be a list of {match, scheme} tables", rules_in)
    rules = []
    for i, r in enumerate(rules_in):
        where = f"recipe.rules[{i}]"
        if not isinstance(r, dict) or set(r) != {"match", "scheme"}:
            raise InvalidArgumentError(where, "must be a table with exactly the keys 'match' and 'scheme'", r)
        if not isinstance(r["match"], str) or not r["match"]:
            raise InvalidArgumentError(where + ".match", "must be a non-empty glob", r["match"])
        rules.append((r["match"], _scheme_or_keep(r["scheme"], where + ".scheme")))
    chosen = default if default is not None else data.get("default")
    if chosen is not None:
        chosen = _scheme_or_keep(chosen, "scheme" if default is not None else "recipe.default")
        if chosen == KEEP:
            chosen = None
    if chosen is None and not rules:
        raise InvalidArgumentError("scheme", "is required (give a scheme, or a recipe with a default or rules)", None)
    return Recipe(chosen, tuple(rules), _globs(include, "include"), _globs(exclude, "exclude"), source)
