"""Checking a .tflite model against the LiteRT 8-bit quantization spec: :func:`check_model`
(the LiteRT 8-bit quantization specification, https://ai.google.dev/edge/litert/models/quantization_spec).

Every rule comes from the op table (:data:`quantspec.litert.optable.OP_TABLE`): for each operator of
each subgraph, the table's restrictions are evaluated on the operator's tensors
(:func:`quantspec.litert.optable.findings`), and each broken one becomes a :class:`Violation` at that
operator and tensor, saying what LiteRT itself does with it (rejects the model, aborts, or runs and
silently computes numbers that are not the spec's).  The checker adds the rules that concern the
model rather than one operator's restriction:

- ``op-not-in-spec``: an operator outside the spec's int8 list (DEQUANTIZE, which the converter puts
  at float outputs, is accepted);
- ``legacy-uint8``: a quantized uint8 tensor (the legacy scheme) where the spec wants int8;
- ``quantization-malformed``: quantization parameters LiteRT refuses to load (``ParseQuantization``:
  scales without zero points or with a different number of them, a quantized dimension outside the
  tensor's rank, a number of scales that is neither 1 nor the size of the quantized dimension);
- ``litert-load``: other structure LiteRT's ``InterpreterBuilder`` refuses when it loads the model: an
  operator code (used or not) naming an operator version LiteRT has no kernel for
  (:mod:`quantspec.litert._opversions`), a custom operator no operator uses (LiteRT resolves it all
  the same), a variable tensor with constant data.

LiteRT's Python interpreter has three CPU op resolvers, and they do not fail on the same models:
``BUILTIN_REF`` (the reference kernels, ``kernels="reference"``), ``BUILTIN_WITHOUT_DEFAULT_DELEGATES``
(the optimized kernels, ``"optimized"``) and the default resolver, which applies the XNNPACK delegate
to the operators it takes and runs the optimized kernels for the rest (``"xnnpack"``).  Every
violation carries a verdict per resolver (:attr:`Violation.verdicts`; the data is
:data:`quantspec.litert.optable.RESOLVER_VERDICTS`, and for XNNPACK the delegate's own checks,
:mod:`quantspec.litert.kernels.xnnpack.delegate`), and :func:`check_model` takes the resolvers the
report speaks for (``kernels=``): a model is non-conformant when it breaks a spec rule, or a LiteRT
limit one of those resolvers rejects, aborts on or runs with undefined behaviour; a limit only other
resolvers have is listed apart (:attr:`CheckReport.other_kernels`).  A failure of XNNPACK no other
rule explains (a requantization scale of 256 or more, a subnormal scale) is reported as
``xnnpack-runtime``.

Tensor-level rules (``scale``, ``zero-point-range``, ``granularity``, ``legacy-uint8``,
``quantization-malformed``) are reported once per tensor, at the first operator that uses it.  The
checker follows what LiteRT accepts where LiteRT has moved past the spec text: per-axis
FULLY_CONNECTED weights (quantized dimension 0) with a per-axis bias are conformant (the table says
so).  Rule ids are stable strings, listed with their meaning in :data:`RULES`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import AxisError, InvalidArgumentError, QuantSpecError, ShapeError
from . import optable
from .model import Model, Operator, Subgraph, Tensor, load_model

__all__ = ["check_model", "CheckReport", "Violation", "Verdict", "RULES", "RESOLVERS", "KERNEL_CHOICES"]

#: rule id -> what it requires: the op table's rules and the model-level ones
RULES: dict[str, str] = {
    **optable.RULES,
    "op-not-in-spec": "every operator is one of the spec's int8 list (or DEQUANTIZE at a float output)",
    "legacy-uint8": "quantized tensors are int8, not the legacy uint8 scheme",
    "quantization-malformed": "quantization parameters LiteRT can load: as many zero points as scales, a "
                              "quantized dimension inside the tensor's rank, 1 scale or one per slice of it",
    "litert-load": "structure LiteRT can load: operator versions it has kernels for, no variable tensor "
                   "with constant data",
}

#: the LiteRT limits beyond the spec's rules (optable.LIMITS): a violation's ``rule`` is one of RULES,
#: one of these ids, or ``xnnpack-runtime`` (optable.XNNPACK_RUNTIME)
LIMITS = optable.LIMITS

#: LiteRT's op resolvers, by the names of quantspec's kernel modes (``reference``: BUILTIN_REF,
#: ``optimized``: BUILTIN_WITHOUT_DEFAULT_DELEGATES, ``xnnpack``: the default resolver, AUTO)
RESOLVERS = optable.RESOLVERS
#: what ``check_model(kernels=...)`` accepts: one resolver, "all", or a sequence of resolvers
KERNEL_CHOICES = (*RESOLVERS, "all")

#: rules about a tensor itself, reported once per tensor
TENSOR_RULES = frozenset({"scale", "zero-point-range", "granularity", "legacy-uint8", "quantization-malformed"})

#: what LiteRT does with a violation (``Violation.litert``); None: it depends on more than the rule
#: (an operator or a type outside the spec, which LiteRT may run with other kernels or refuse)
REJECTS, ABORTS, SILENT, UNDEFINED = optable.REJECTS, optable.ABORTS, optable.SILENT, optable.UNDEFINED
RUNS = optable.RUNS
_LITERT_WORDS = {REJECTS: "rejects", ABORTS: "aborts", SILENT: "silently computes",
                 UNDEFINED: "runs with undefined behaviour", None: "n/a (outside the spec)", RUNS: "runs"}


def _kernels(kernels: Any) -> tuple[str, ...]:
    """``kernels`` as a tuple of resolvers, in RESOLVERS order."""
    if isinstance(kernels, str):
        if kernels == "all":
            return RESOLVERS
        if kernels in RESOLVERS:
            return (kernels,)
    elif isinstance(kernels, (list, tuple, set, frozenset)) and kernels and all(
            isinstance(k, str) and k in RESOLVERS for k in kernels):
        return tuple(r for r in RESOLVERS if r in kernels)
    raise InvalidArgumentError("kernels", "must be " + ", ".join(map(repr, KERNEL_CHOICES)) +
                               " or a non-empty list of " + ", ".join(map(repr, RESOLVERS)), kernels)


@dataclass(frozen=True)
class Verdict:
    """What one LiteRT resolver does with a violation: ``action`` is ``"rejects"`` (an error at
    ``stage``: "load", "prepare" or "eval"), ``"aborts"`` (a CHECK failure kills the process),
    ``"silent"`` (it runs and computes numbers that are not the spec's), ``"undefined"`` (it runs
    with undefined behaviour of its C++), ``"runs"`` (a limit of another resolver's kernels: this
    one runs the model) or None (outside the spec: it depends on more than the rule)."""

    action: str | None
    stage: str | None = None
    check: str = ""

    @property
    def fails(self) -> bool:
        """True when the resolver does not produce a result (it rejects the model or aborts)."""
        return self.action in (REJECTS, ABORTS)

    @property
    def text(self) -> str:
        words = _LITERT_WORDS.get(self.action, str(self.action))
        if self.fails and self.stage:
            words += f" at {self.stage}"
        return words

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "stage": self.stage, "check": self.check, "fails": self.fails}


def _grouped(pairs) -> str:
    """"aborts at prepare (reference); runs (optimized, xnnpack)": resolvers grouped by verdict."""
    groups: dict[str, list[str]] = {}
    for r, v in pairs:
        groups.setdefault(v.text, []).append(r)
    return "; ".join(f"{text} ({', '.join(rs)})" for text, rs in groups.items())


@dataclass(frozen=True)
class Violation:
    """One broken rule, located at an operator and a tensor.

    ``litert`` says what the LiteRT interpreter does with the model: ``"rejects"`` (an error when the
    model is loaded, prepared or run, at ``litert_stage``), ``"aborts"`` (a CHECK failure kills the
    process), ``"silent"`` (it runs and silently computes numbers that are not the spec's), or None
    when that depends on more than the rule (an operator or a type outside the spec, which LiteRT
    may run with kernels the spec does not cover, or refuse); ``litert_check`` says more.  These
    ``litert*`` fields are the reference resolver's (``BUILTIN_REF``) verdict.

    ``resolvers`` holds the verdict of each of LiteRT's op resolvers (:class:`Verdict`, keyed
    ``"reference"``, ``"optimized"``, ``"xnnpack"``; see :attr:`verdicts`); a violation built
    without it has the reference verdict for all three."""

    rule: str
    op_index: int | None
    tensor_index: int | None
    message: str
    op_name: str | None = None
    tensor_name: str | None = None
    position: str = ""              # "input 1 (filter)", "output 0 (output)", ...
    expected: Any = None
    found: Any = None
    litert: str | None = None
    litert_stage: str | None = None
    litert_check: str = ""
    subgraph: int = 0
    resolvers: tuple[tuple[str, Verdict], ...] = ()

    def verdict(self, resolver: str) -> Verdict:
        """The :class:`Verdict` of one resolver ("reference", "optimized" or "xnnpack")."""
        for r, v in self.resolvers:
            if r == resolver:
                return v
        if resolver not in RESOLVERS:
            raise InvalidArgumentError("resolver", "must be one of " + ", ".join(map(repr, RESOLVERS)), resolver)
        return Verdict(self.litert, self.litert_stage, self.litert_check)

    @property
    def verdicts(self) -> dict[str, str | None]:
        """resolver -> action ("rejects", "aborts", "silent", "undefined", "runs" or None)."""
        return {r: self.verdict(r).action for r in RESOLVERS}

    @property
    def stages(self) -> dict[str, str | None]:
        """resolver -> the stage at which it rejects or aborts (None where it does not)."""
        return {r: self.verdict(r).stage if self.verdict(r).fails else None for r in RESOLVERS}

    def rejected_by(self, kernels: Any = "all") -> tuple[str, ...]:
        """The resolvers among ``kernels`` that reject the model or abort on it."""
        return tuple(r for r in _kernels(kernels) if self.verdict(r).fails)

    def resolvers_text(self, kernels: Any = "all") -> str:
        """The verdicts of ``kernels``, grouped: "aborts at prepare (reference); runs (optimized, xnnpack)"."""
        return _grouped((r, self.verdict(r)) for r in _kernels(kernels))

    @property
    def litert_rejects(self) -> bool:
        """True when LiteRT does not produce a result for the model (it rejects it or aborts)."""
        return self.litert in (REJECTS, ABORTS)

    @property
    def litert_text(self) -> str:
        words = _LITERT_WORDS.get(self.litert, str(self.litert))
        if self.litert in (REJECTS, ABORTS) and self.litert_stage:
            words += f" at {self.litert_stage}"
        return words

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "subgraph": self.subgraph, "op_index": self.op_index, "op_name": self.op_name,
                "tensor_index": self.tensor_index, "tensor_name": self.tensor_name, "position": self.position,
                "expected": _jsonable(self.expected), "found": _jsonable(self.found), "message": self.message,
                "litert": self.litert, "litert_stage": self.litert_stage, "litert_check": self.litert_check,
                "litert_rejects": self.litert_rejects,
                "verdicts": {r: self.verdict(r).to_json() for r in RESOLVERS},
                "rejected_by": list(self.rejected_by())}

    def __str__(self) -> str:
        where = [f"op {self.op_index} {self.op_name}" if self.op_index is not None else "model"]
        if self.tensor_index is not None:
            where.append(f"tensor {self.tensor_index} {self.tensor_name!r}")
        return (f"[{self.rule}] {', '.join(where)}: {self.message} (expected {_show(self.expected)}, found "
                f"{_show(self.found)}); LiteRT: {self.resolvers_text()}")


@dataclass(frozen=True)
class CheckReport:
    """The result of :func:`check_model`: ``ok`` when there is no violation.

    ``kernels``: the resolvers the report speaks for.  ``violations`` holds every broken spec rule
    and every LiteRT limit one of them does not simply run (rejects, aborts on, or runs with
    undefined behaviour); ``other_kernels`` the limits only the other resolvers have (e.g.
    ``softmax-input-multiplier``, on which BUILTIN_REF aborts, in a report for ``"optimized"``)."""

    violations: tuple[Violation, ...]
    operators: int = 0
    tensors: int = 0
    model: str | None = None        # the path, when the model was read from one
    op_names: tuple[str, ...] = field(default=())
    #: operators quantspec's kernels refuse to prepare for a reason that is not a LiteRT limit (rule
    #: "quantspec-unsupported"): not a spec violation, so they do not make the model non-conformant
    unsupported: tuple[Violation, ...] = ()
    #: "int8" (every quantized activation int8), "int16x8" (int16 activations: LiteRT's 16x8 kernels,
    #: checked with their own rules), "mixed", or "none" (no quantized activation)
    mode: str = "int8"
    kernels: tuple[str, ...] = RESOLVERS
    other_kernels: tuple[Violation, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def rejected_by_litert(self) -> tuple[Violation, ...]:
        """The violations LiteRT itself refuses with one of the report's resolvers (the model fails to
        load, prepare or run, or the process aborts)."""
        return tuple(v for v in self.violations if v.rejected_by(self.kernels))

    def rejected_by(self, resolver: str) -> tuple[Violation, ...]:
        """The violations one resolver refuses (it rejects the model or aborts on it)."""
        return tuple(v for v in (*self.violations, *self.other_kernels) if v.verdict(resolver).fails)

    @property
    def silently_wrong(self) -> tuple[Violation, ...]:
        """The violations LiteRT runs with, silently computing numbers that are not the spec's (with one
        of the report's resolvers)."""
        return tuple(v for v in self.violations if any(v.verdict(r).action == SILENT for r in self.kernels))

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "ok": self.ok, "mode": self.mode, "kernels": list(self.kernels),
                "operators": self.operators,
                "tensors": self.tensors, "violations": [v.to_json() for v in self.violations],
                "other_kernels": [v.to_json() for v in self.other_kernels],
                "unsupported": [v.to_json() for v in self.unsupported],
                "summary": {"violations": len(self.violations), "litert_rejects": len(self.rejected_by_litert),
                            "litert_silently_computes": len(self.silently_wrong),
                            "rejected_by": {r: len([v for v in self.violations if v.verdict(r).fails])
                                            for r in self.kernels},
                            "rules": sorted({v.rule for v in self.violations})}}

    def json(self, **kwargs) -> str:
        return json.dumps(self.to_json(), **kwargs)

    def render(self, width: int = 38) -> str:
        """A readable table, one row per violation."""
        head = self.model or "model"
        what = "LiteRT's 16x8 quantization (int16 activations, int8 weights)" if self.mode == "int16x8" else \
            "the LiteRT int8 spec"
        notes = ""
        if self.unsupported:
            notes = "\nquantspec's kernels refuse: " + "; ".join(f"op {v.op_index} {v.op_name}: {v.message}"
                                                             for v in self.unsupported)
        if self.other_kernels:
            notes += "\nother resolvers' limits (not the checked kernels'): " + "; ".join(
                f"[{v.rule}] op {v.op_index} {v.op_name}: {v.resolvers_text()}" for v in self.other_kernels)
        kernels = "kernels: " + ", ".join(self.kernels)
        if self.ok:
            return (f"{head}: conformant to {what} ({self.operators} operators, "
                    f"{self.tensors} tensors checked; {kernels})" + notes)
        cols = ("rule", "op", "tensor", "expected", "found", "LiteRT")
        rows = []
        for v in self.violations:
            op = "-" if v.op_index is None else f"{v.op_index} {v.op_name}"
            if v.subgraph:
                op = f"sg{v.subgraph}:{op}"
            tensor = "-" if v.tensor_index is None else f"{v.tensor_index} {v.tensor_name}"
            if v.position:
                tensor += f" [{v.position}]"
            rows.append((v.rule, op, tensor, _show(v.expected), _show(v.found), v.resolvers_text(self.kernels)))
        rows = [tuple(_clip(c, width) for c in r[:-1]) + r[-1:] for r in rows]
        widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
        line = "  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip()
        out = [f"{head}: {len(self.violations)} violation(s) of {what} "
               f"({len(self.rejected_by_litert)} LiteRT rejects, {len(self.silently_wrong)} it silently computes; "
               f"{kernels})",
               "", line, "  ".join("-" * w for w in widths)]
        out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        out.append("")
        out.append("details:")
        for k, v in enumerate(self.violations, 1):
            out.append(f"  {k}. {v}")
            if v.litert_check:
                out.append(f"     LiteRT: {v.litert_check}")
        return "\n".join(out) + notes

    __str__ = render


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.9g}"
    if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
        return " or ".join(value)
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return f"[{value[0]}, {value[1]}]"
    return str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (np.generic,)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


# ------------------------------------------------------------------------------------------------
# the checks
# ------------------------------------------------------------------------------------------------

def _spec(t: Tensor):
    from .kernels.base import TensorSpec

    return TensorSpec(shape=tuple(t.shape), dtype=t.dtype, params=t.params, data=t.data, name=t.name)


def _load_refusal(t: Tensor) -> tuple[str, Any, Any] | None:
    """Why LiteRT's ``InterpreterBuilder::ParseQuantization`` refuses this tensor's quantization
    (message, expected, found), or None."""
    q = t.quantization
    if q is None or q.details == "BlockwiseQuantization" or q.scale.size == 0:
        return None
    n = int(q.scale.size)
    if not q.zero_point_present:
        return "has scales but no zero points", n, 0
    if q.zero_point.size != n:
        return "needs as many zero points as scales", n, int(q.zero_point.size)
    d, rank = q.quantized_dimension, len(t.shape)
    if d < 0 or (rank and d >= rank):
        return "has a quantized dimension outside the tensor's rank", f"[0, {rank})", d
    if n != 1 and rank and n != t.shape[d]:
        return f"needs 1 scale or one per slice of its quantized dimension {d}", t.shape[d], n
    return None


class _Collector:
    def __init__(self, sg: Subgraph):
        self.sg = sg
        self.out: list[Violation] = []
        self.seen: set[tuple[str, int]] = set()
        self.refusal_reported: set[int] = set()
        self.generic_done: set[int] = set()

    def add(self, rule: str, op: Operator | None, tensor: Tensor | None, message: str, *, position: str = "",
            expected: Any = None, found: Any = None, litert: str | None = None, stage: str | None = None,
            check: str = "") -> None:
        if tensor is not None and rule in TENSOR_RULES:
            key = (rule, tensor.index)
            if key in self.seen:
                return
            self.seen.add(key)
        self.out.append(Violation(rule=rule, op_index=None if op is None else op.index,
                                  tensor_index=None if tensor is None else tensor.index, message=message,
                                  op_name=None if op is None else op.name,
                                  tensor_name=None if tensor is None else tensor.name, position=position,
                                  expected=expected, found=found, litert=litert, litert_stage=stage,
                                  litert_check=check, subgraph=self.sg.index))


def _tensor_checks(c: _Collector, op: Operator | None, t: Tensor, position: str,
                   refusal: tuple[str, Any, Any] | None) -> None:
    """The rules about a tensor itself, for tensors the op table does not cover (operators outside
    the table, unused tensors) and the load-time refusals the table cannot see."""
    if refusal is not None and t.index not in c.refusal_reported:
        message, expected, found = refusal
        c.refusal_reported.add(t.index)
        c.add("quantization-malformed", op, t, message, position=position, expected=expected, found=found,
              litert=REJECTS, stage="load", check=_LOAD_CHECK)
    if t.params is None or t.dtype is None or t.index in c.generic_done:
        return
    c.generic_done.add(t.index)
    if t.dtype.name == "uint8":
        _legacy_uint8(c, op, t, position)
    # the op table's own tensor-level restrictions, as on any activation (optable.act)
    spec = _spec(t)
    for r in _GENERIC.restrictions:
        if r.rule in ("scale", "zero-point-range"):
            with np.errstate(all="ignore"):
                result = optable.evaluate(r, _GENERIC, spec, [spec], [], None)
            if result is not None:
                message, expected, found, _ = result
                e = r.litert[0]
                c.add(r.rule, op, t, message, position=position, expected=expected, found=found,
                      litert=e.action, stage=e.stage, check=e.check)


def _legacy_uint8(c: _Collector, op: Operator | None, t: Tensor, position: str) -> None:
    c.add("legacy-uint8", op, t, "quantized uint8 is the legacy scheme; the spec's tensors are int8",
          position=position, expected="int8", found="uint8", litert=None, check=_UINT8_CHECK)


#: the restrictions every quantized tensor has, whatever reads it
_GENERIC = optable.act("tensor")

_REFUSAL_RULES = ("weight-axis", "granularity", "bias-granularity")

#: types for which LiteRT has kernels outside the int8 spec: a tensor of one of these where the spec
#: wants int8 may make LiteRT run another kernel rather than fail (the table's type check is about
#: types with no kernel path)
_OTHER_KERNELS = {"float": "LiteRT has float32 kernels: it runs the op unquantized when its tensors are float "
                           "(hybrid kernels for some mixes), and rejects other mixes of types",
                  "int16": "LiteRT has 16x8 kernels (int16 activations, outside the 8-bit spec) for some ops; "
                           "other mixes of types fail Prepare"}
#: an op whose activations are int16 runs LiteRT's 16x8 kernel (optable.SIXTEEN_BY_EIGHT), which has
#: rules of its own: zero points 0, fixed outputs (1/32768, 0) for SOFTMAX, LOGISTIC and TANH, an int64
#: bias (or int32 with quantized_bias_type INT32) for FULLY_CONNECTED, CONV_2D and DEPTHWISE_CONV_2D.
#: The 8-bit values of those rules do not apply there; the 16x8 kernel's checks are reported by the
#: prepare pass (optable.LIMITS: int16-zero-point, int16-output-scale, int16-bias-type, ...).


#: the non-quantized types of the shape arithmetic converter-made models put around dynamic dimensions
#: (SHAPE, STRIDED_SLICE, REDUCE_PROD, PACK, GATHER, SELECT_V2... on index, shape and mask tensors):
#: outside the int8 spec, which is about quantized tensors, and so never findings of its rules
OUTSIDE_SPEC_TYPES = ("INT32", "INT64", "BOOL", "STRING")


def _shape_arithmetic(t: Tensor | None, trule: optable.TensorRule | None) -> bool:
    """A tensor of shape arithmetic: not quantized, of one of :data:`OUTSIDE_SPEC_TYPES`, and not the
    bias or weights of an operator (an unquantized int32 bias is a real violation)."""
    if t is None or t.params is not None or t.type_name not in OUTSIDE_SPEC_TYPES:
        return False
    return trule is None or trule.role not in (optable.BIAS, optable.WEIGHT)


def _float(t: Tensor | None) -> bool:
    return t is not None and t.params is None and t.type_name == "FLOAT32"


#: operators at the edges of a float region, which the spec has (a float input quantized, a float output)
_EDGES = frozenset({"QUANTIZE", "DEQUANTIZE"})


def _float_islands(sg: Subgraph, found: list[Violation]) -> list[Violation]:
    """In a quantized model, the findings about float32 computation (a ``dtype`` finding whose type is
    float, an ``op-not-in-spec`` operator computing on float32) merged into one ``dtype`` finding per
    float island: a connected region of operators that read or write unquantized float32 tensors
    (QUANTIZE and DEQUANTIZE, its edges, aside), connected through those tensors."""
    ops = [op for op in sg.operators if op.name not in _EDGES
           and any(_float(sg.tensors[i]) for i in (*op.inputs, *op.outputs) if i >= 0)]
    if not ops:
        return found
    parent = {op.index: op.index for op in ops}

    def root(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    users: dict[int, int] = {}
    for op in ops:
        for i in (*op.inputs, *op.outputs):
            if i >= 0 and _float(sg.tensors[i]) and sg.tensors[i].data is None:
                if i in users:
                    parent[root(op.index)] = root(users[i])
                else:
                    users[i] = op.index
    island = {op.index: root(op.index) for op in ops}

    def about_float(v: Violation) -> bool:
        if v.op_index not in island or v.subgraph != sg.index:
            return False
        if v.rule == "dtype":
            return v.found == "float" and v.litert is None and (
                v.tensor_index is None or _float(sg.tensors[v.tensor_index]))
        return v.rule == "op-not-in-spec"

    merged: dict[int, list[Violation]] = {}
    out: list[Violation] = []
    for v in found:
        if about_float(v):
            group = merged.setdefault(island[v.op_index], [])
            if not group:
                out.append(v)              # its place in the report: the island's first finding
            group.append(v)
        else:
            out.append(v)
    names = {op.index: op.name for op in sg.operators}
    for k, v in enumerate(out):
        group = merged.get(island.get(v.op_index, -1)) if about_float(v) else None
        if not group or group[0] is not v:
            continue
        members = sorted(i for i, r in island.items() if r == island[v.op_index])
        listed = ", ".join(f"{i} {names[i]}" for i in members[:8]) + (", ..." if len(members) > 8 else "")
        out[k] = Violation(rule="dtype", op_index=members[0], tensor_index=None,
                           message=f"a float32 island of {len(members)} operator(s) ({listed}) computes unquantized "
                           "inside the quantized model", op_name=names[members[0]], expected="int8",
                           found="float", litert=None, litert_check=_OTHER_KERNELS["float"], subgraph=sg.index)
    return out


def _runs_16x8(rule_op: optable.OpRule, specs_in: list) -> bool:
    """True when the op's first activation input is int16 and LiteRT has a 16x8 kernel for it."""
    if rule_op.name not in optable.SIXTEEN_BY_EIGHT:
        return False
    for k, spec in enumerate(specs_in):
        trule = rule_op.input_rule(k)
        if spec is not None and trule is not None and trule.role == optable.ACTIVATION:
            return spec.dtype is not None and spec.dtype.name == "int16"
    return False


_OTHER_TYPE_RUNS = ("outside the 8-bit spec, but the op's kernel has a path for these types (LiteRT runs it; so "
                    "does quantspec's kernel)")
_UINT8_CHECK = ("LiteRT has legacy uint8 kernels for many ops: it runs the op when its types fit one of them "
                "and rejects mixes of int8 and uint8")
_LOAD_CHECK = "InterpreterBuilder::ParseQuantization refuses the tensor when the model is loaded"


def _check_op(c: _Collector, op: Operator, refusals: dict[int, tuple[str, Any, Any]],
              prepares: bool = False) -> None:
    """The op table's rules on one operator.  ``prepares``: quantspec's kernel (which refuses every type
    LiteRT's kernel has no path for) prepares the operator, so a type outside the table is one LiteRT
    runs too."""
    sg = c.sg
    rule_op = optable.OP_TABLE.get(op.name)

    def position(side: str, k: int, name: str | None) -> str:
        return f"{side} {k}" + (f" ({name})" if name else "")

    if rule_op is None:
        tensors = [sg.tensors[i] for i in (*op.inputs, *op.outputs) if i >= 0]
        if tensors and all(_shape_arithmetic(t, None) for t in tensors):
            return                         # shape arithmetic on int32 / int64 / bool: outside the int8 spec
        c.add("op-not-in-spec", op, None, "the operator is not in the LiteRT int8 spec's list", expected="an op of "
              "the spec's int8 list", found=op.name, litert=None,
              check="no spec guarantee: LiteRT runs the op with whatever kernel it has, or rejects it")
        for side, indices in (("input", op.inputs), ("output", op.outputs)):
            for k, i in enumerate(indices):
                if i >= 0:
                    _tensor_checks(c, op, sg.tensors[i], position(side, k, None), refusals.get(i))
        return

    specs_in, specs_out = [], []
    for side, indices, specs in (("input", op.inputs, specs_in), ("output", op.outputs, specs_out)):
        for k, i in enumerate(indices):
            t = sg.tensors[i] if i >= 0 else None
            trule = (rule_op.input_rule(k) if side == "input" else
                     rule_op.outputs[k] if k < len(rule_op.outputs) else None)
            if t is not None and t.dtype is None and trule is not None:
                # a type quantspec has no row for (STRING, COMPLEX64, ...): the table cannot evaluate it
                c.add("dtype", op, t, f"type must be {' or '.join(trule.dtypes)}",
                      position=position(side, k, trule.name), expected=trule.dtypes, found=t.type_name.lower(),
                      litert=REJECTS, stage="prepare", check="the kernel's type checks")
                t = None
            specs.append(None if t is None else _spec(t))
    try:
        with np.errstate(all="ignore"):
            found = optable.findings(op.name, specs_in, specs_out)
    except QuantSpecError:  # pragma: no cover - the table raises only for ops it does not have
        found = []
    sixteen = _runs_16x8(rule_op, specs_in)
    for f in found:
        indices = op.inputs if f.side == "input" else op.outputs
        t = sg.tensors[indices[f.index]]
        trule = rule_op.input_rule(f.index) if f.side == "input" else rule_op.outputs[f.index]
        if prepares and _shape_arithmetic(t, trule):
            continue                       # int32 / int64 / bool index and shape tensors: outside the int8 spec
        pos = position(f.side, f.index, trule.name if trule else None)
        e = f.enforcement
        rule, litert, stage, check = f.rule, e.action, e.stage, e.check
        message, expected, value = f.message, f.expected, f.found
        if rule == "dtype" and f.found == "uint8" and t.params is not None:
            _legacy_uint8(c, op, t, pos)
            continue
        verdict = (optable.TYPE_VERDICTS.get((op.name, trule.name if trule else "", f.found))
                   if rule == "dtype" else None)
        if verdict is not None:  # what LiteRT does with this very type here (measured)
            litert, stage, check = verdict.action, verdict.stage, verdict.check
        elif (rule == "dtype" and f.found in _OTHER_KERNELS and e.fails
              and (f.found == "float" or trule is not None and trule.role == optable.ACTIVATION)):
            # the table's type check is about types with no kernel path; these have one (int16: the
            # 16x8 kernels, for activations only; an int16 bias or parameter tensor fails Prepare)
            litert, stage, check = None, None, _OTHER_KERNELS[f.found]
        elif rule == "dtype" and e.fails and prepares:
            litert, stage, check = None, None, _OTHER_TYPE_RUNS
        if sixteen:
            # the 16x8 kernel's own rules (int16 zero points 0, its fixed outputs, its bias types) are the
            # kernel's checks, reported by the prepare pass; the 8-bit values do not apply
            if rule in ("fixed-scale", "fixed-zero-point"):
                continue
            if rule == "dtype" and trule is not None and (
                    trule.role == optable.ACTIVATION and f.found == "int16"
                    or trule.role == optable.BIAS and f.found in ("int32", "int64")):
                continue
        if t.index in refusals and rule in _REFUSAL_RULES:
            # LiteRT does not get as far as the kernel: it refuses the tensor when it loads the model
            litert, stage, check = REJECTS, "load", _LOAD_CHECK
            if t.params is None:  # the table sees no parameters at all: say what is wrong with them
                rule = "quantization-malformed"
                message, expected, value = refusals[t.index]
            c.refusal_reported.add(t.index)
        c.add(rule, op, t, message, position=pos, expected=expected, found=value, litert=litert,
              stage=stage, check=check)
    for side, indices in (("input", op.inputs), ("output", op.outputs)):
        for k, i in enumerate(indices):
            if i >= 0:
                trule = (rule_op.input_rule(k) if side == "input" else
                         rule_op.outputs[k] if k < len(rule_op.outputs) else None)
                _tensor_checks(c, op, sg.tensors[i], position(side, k, trule.name if trule else None),
                               refusals.get(i))


def _load_checks(model: Model) -> list[Violation]:
    """The ``litert-load`` rule: what InterpreterBuilder refuses besides quantization parameters,
    located at the first operator that uses the operator code or the tensor (when one does)."""
    import dataclasses

    from ._opversions import REFERENCE_VERSIONS, VERSIONS

    out = []

    def add(message, expected, found, sg=None, op=None, tensor=None, position=""):
        out.append(Violation(rule="litert-load", op_index=None if op is None else op.index,
                             tensor_index=None if tensor is None else tensor.index, message=message,
                             op_name=None if op is None else op.name,
                             tensor_name=None if tensor is None else tensor.name, position=position,
                             expected=expected, found=found, litert=REJECTS, litert_stage="load",
                             litert_check="InterpreterBuilder refuses the model when it is loaded",
                             subgraph=0 if sg is None else sg.index))

    def first_user(k):
        for sg in model.subgraphs:
            for op in sg.operators:
                if op.opcode_index == k:
                    return sg, op
        return None, None

    for k, (name, version) in enumerate(model.operator_codes):
        sg, op = first_user(k)
        if name.startswith("CUSTOM"):
            if op is None:
                add(f"operator code {k} is the custom operator {name[7:]!r}, which LiteRT cannot resolve without "
                    "a registered kernel (no operator uses it, but LiteRT resolves every code)",
                    "a registered custom operator", name)
            continue
        span = VERSIONS.get(name)
        if span is None:
            add(f"operator code {k} names {name}, which LiteRT has no kernel for", "an operator LiteRT has", name,
                sg, op)
        elif not span[0] <= version <= span[1]:
            add(f"operator code {k} names {name} version {version}, which LiteRT has no kernel for", span, version,
                sg, op)
        else:
            ref = REFERENCE_VERSIONS.get(name)
            if ref is None or not ref[0] <= version <= ref[1]:
                # the stock resolvers register the version; BUILTIN_REF does not
                add(f"operator code {k} names {name} version {version}, which LiteRT's reference kernels "
                    "(BUILTIN_REF) have no kernel for", ref, version, sg, op)
                runs = Verdict(RUNS, None, "the builtin op resolver registers this version")
                out[-1] = dataclasses.replace(out[-1], resolvers=(
                    ("reference", Verdict(REJECTS, "load", out[-1].litert_check)), ("optimized", runs),
                    ("xnnpack", runs)))
    for sg in model.subgraphs:
        for t in sg.tensors:
            if t.is_variable and (t.data is not None or t.external_buffer):
                op, position = _first_use(sg, t)
                add("is a variable tensor with constant data (LiteRT: 'a variable tensor with buffer or external "
                    "buffer. It's not supported now')", "no constant data", "constant data", sg, op, t, position)
            overflow = _bytes_required_overflows(t)
            if overflow:
                op, position = _first_use(sg, t)
                add(f"has a shape whose number of {overflow} overflows 64 bits, counted as LiteRT counts it (its "
                    "dimensions as unsigned 64-bit numbers; LiteRT: 'BytesRequired number of "
                    f"{overflow} overflowed', 'Tensor {t.index} is invalidly specified in schema')",
                    "a shape of fewer than 2^64 elements and bytes", list(t.shape), sg, op, t, position)
    return out


def _first_use(sg, t: Tensor) -> tuple[Operator | None, str]:
    """The first operator of ``sg`` that reads or writes ``t``, and where (``"input 1"``); (None, "")."""
    return next(((op, f"{side} {i}") for op in sg.operators
                 for side, ids in (("input", op.inputs), ("output", op.outputs))
                 for i, j in enumerate(ids) if j == t.index), (None, ""))


def _bytes_required_overflows(t: Tensor) -> str | None:
    """LiteRT's ``BytesRequired`` for a tensor's shape, which it runs on every tensor but strings,
    resources and variants when it loads a model: the product of the dimensions as ``size_t`` (a
    negative dimension wraps to a huge one), each step checked for overflow, then times the type's
    size; "elements" or "bytes" where a product passes 2^64, else None."""
    if t.dtype is None or t.type_name in ("STRING", "RESOURCE", "VARIANT"):
        return None
    top = 1 << 64
    count = 1
    for d in t.shape:
        b = int(d) % top
        if count and count * b >= top:
            return "elements"
        count = count * b
    return "bytes" if count * t.dtype.dtype.itemsize >= top else None


#: the prepare pass skips operators with a tensor of more elements than this (a damaged or hostile model
#: declaring huge shapes: preparing the kernel would allocate tables that large)
_PREPARE_PASS_ELEMENTS = 1 << 26


def _prepare_pass(c: _Collector, op: Operator, refusals: dict[int, Any]) -> bool | None:
    """Prepare the operator with quantspec's kernel, as the interpreter does: every LiteRT limit the
    model breaks (optable.LIMITS, each kernel error tagged with its rule) becomes a violation, so
    that check_model reports exactly the models the interpreter refuses."""
    from .interpreter import CONTROL_FLOW, STATEFUL, _dynamic, prepare_operator, tensor_spec as runtime_spec
    from .kernels import OPS

    kernel = OPS.get(op.name)
    if kernel is None or op.name in CONTROL_FLOW or op.name in STATEFUL:
        return None
    sg = c.sg
    used = [i for i in (*op.inputs, *op.outputs) if i >= 0]
    if any(i in refusals for i in used):
        return None                        # LiteRT refuses the model when it loads it: reported already
    specs = {i: runtime_spec(sg.tensors[i]) for i in used}
    if any(v is None for v in specs.values()):
        return None
    sizes = [math.prod(max(int(d), 0) for d in sg.tensors[i].shape) for i in used]
    if max(sizes, default=0) > _PREPARE_PASS_ELEMENTS or sum(sizes) > 4 * _PREPARE_PASS_ELEMENTS:
        return None                        # shapes this large (a damaged model?): the kernel's tables would be too
    try:
        with np.errstate(all="ignore"):
            prepare_operator(op, kernel, dict(op.options), specs)
        return True
    except (ShapeError, AxisError) as e:
        if getattr(e, "limit", None) is None and any(_dynamic(sg.tensors[i]) for i in used):
            # a model with dynamic dimensions stores 1 for each, so the stored shapes of the tensors
            # computed from them need not agree; LiteRT (and quantspec's interpreter) prepare on the
            # shapes a run computes: the types passed the kernel's checks
            return True
        return _refused(c, op, e)
    except QuantSpecError as e:
        return _refused(c, op, e)
    except (ValueError, MemoryError) as e:  # pragma: no cover - a damaged model's sizes
        c.add("quantspec-unsupported", op, None, f"{type(e).__name__}: {e}", litert=None)
        return False


def _refused(c: _Collector, op: Operator, e: QuantSpecError) -> bool | None:
    """The prepare pass's verdict on a kernel's error: a violation of the limit it names, or of the
    table rule it reports, or a ``quantspec-unsupported`` note."""
    rule = getattr(e, "limit", None)
    if rule is not None and any(v.op_index == op.index and v.rule == rule for v in c.out):
        return                         # a table rule the op-table pass reported already
    lim = optable.LIMITS.get(rule) if rule is not None else None
    if lim is not None:
        litert, stage, check = lim.action, lim.stage if lim.fails else None, lim.source
        message = e.rule if isinstance(e.rule, str) else str(e)
        expected = lim.requires
    elif rule == "granularity":        # LiteRT reads the tensor's legacy parameters (scale 0, zero point 0)
        g = _GENERIC.restriction("granularity").litert[0]
        litert, stage, check, message, expected = g.action, g.stage, g.check, str(e.rule), optable.PER_TENSOR
    elif rule is not None:             # a table rule the table pass could not see (e.g. on int16)
        litert, stage, check, message, expected = REJECTS, "prepare", "the kernel's check", str(e.rule), None
    else:
        if any(v.op_index == op.index and v.rule == "dtype" for v in c.out):
            return False               # a type outside the spec: the table pass reported it
        rule, litert, stage, check = "quantspec-unsupported", None, None, ""
        message, expected = str(e), None
    c.add(rule, op, None, message, expected=expected, found=_jsonable(e.value), litert=litert, stage=stage,
          check=check)
    return False


def _delegate_view(sg: Subgraph) -> tuple[dict[int, bool], dict[int, str]]:
    """For each operator of ``sg``: whether LiteRT's XNNPACK delegate takes it, and for those it takes,
    why XNNPACK then fails to create its runtime (quantspec's model of the delegate,
    :mod:`quantspec.litert.kernels.xnnpack.delegate`)."""
    from .interpreter import tensor_spec as runtime_spec
    from .kernels.xnnpack import delegate

    taken: dict[int, bool] = {}
    failing: dict[int, str] = {}
    for op in sg.operators:
        try:
            ins = [None if i < 0 else runtime_spec(sg.tensors[i]) for i in op.inputs]
            outs = [runtime_spec(sg.tensors[i]) for i in op.outputs]
            if any(t is None for t in outs) or any(t is None for i, t in zip(op.inputs, ins) if i >= 0):
                taken[op.index] = False
                continue
            with np.errstate(all="ignore"):
                taken[op.index] = delegate.declines(op.name, ins, outs, dict(op.options)) is None
                why = delegate.fails(op.name, ins, outs) if taken[op.index] else None
        except (QuantSpecError, AttributeError, IndexError, KeyError, TypeError, ValueError):
            taken[op.index], why = False, None
        if why is not None:
            failing[op.index] = why
    return taken, failing


def _with_resolvers(sg: Subgraph, found: list[Violation]) -> list[Violation]:
    """``found`` (one subgraph's violations, with the op table's verdict) with the verdict of every
    resolver (optable.resolver_verdict; the ``litert*`` fields become BUILTIN_REF's), plus an
    ``xnnpack-runtime`` violation for each operator the XNNPACK delegate takes and then fails on that
    no other violation explains.  A tensor rule's verdict is that of the first operator using the
    tensor that fails on it (XNNPACK's failures come first: the delegate is applied before the
    builtin kernels are prepared), else that of the operator it is reported at."""
    import dataclasses

    taken, failing = _delegate_view(sg)
    users: dict[int, list[tuple[Operator, str]]] = {}
    for op in sg.operators:
        for side, ids in (("input", op.inputs), ("output", op.outputs)):
            for k, i in enumerate(ids):
                if i >= 0:
                    users.setdefault(i, []).append((op, f"{side} {k}"))
    explained: set[int] = set()
    order = {"load": 0, "prepare": 1, "eval": 2}
    out = []
    for v in found:
        table = optable.Enforcement(v.litert, v.litert_stage, v.litert_check) if v.litert is not None else None
        t = sg.tensors[v.tensor_index] if v.tensor_index is not None and v.tensor_index < len(sg.tensors) else None
        per_axis = None if t is None or t.params is None else bool(t.params.per_axis)
        if table is None or v.litert_stage == "load":
            out.append(v)                  # outside the spec, or refused before any resolver runs: one verdict
            continue
        dtype = None if t is None or t.dtype is None else t.dtype.name
        if v.rule in ("scale", "zero-point-range") and t is not None:
            places = [(op, side) for op, side in users.get(t.index, ())]
        else:
            places = []
        own = sg.operators[v.op_index] if v.op_index is not None and v.op_index < len(sg.operators) else None
        verdicts = []
        for r in RESOLVERS:
            def at(op: Operator | None, position: str | None, r=r):
                name = v.op_name if op is None else op.name
                index = v.op_index if op is None else op.index
                if v.rule in ("scale", "zero-point-range"):
                    delegated = index in failing          # XNNPACK refuses the tensor at an operator it takes
                else:
                    delegated = bool(taken.get(index))
                e = optable.resolver_verdict(v.rule, name, r, table, delegated=delegated, tensor_per_axis=per_axis,
                                             position=position, found=v.found, dtype=dtype,
                                             weights_per_axis=_weights_per_axis(sg, op or own))
                return e, (r == "xnnpack" and delegated and e.fails), index

            mine = at(own, v.position or None)
            failures = [c for c in (mine, *(at(op, position) for op, position in places)) if c[0].fails]
            e = min(failures, key=lambda c: (order.get(c[0].stage, 1), not c[1], c[2] or 0))[0] if failures else mine[0]
            explained.update(c[2] for c in failures if c[1])      # every XNNPACK failure this tensor explains
            verdicts.append((r, Verdict(e.action, e.stage if e.action in (REJECTS, ABORTS) else None,
                                        e.check or v.litert_check)))
        ref = verdicts[0][1]
        out.append(dataclasses.replace(v, litert=ref.action, litert_stage=ref.stage, litert_check=ref.check,
                                       resolvers=tuple(verdicts)))
    for k, why in failing.items():
        if k in explained:
            continue
        op = sg.operators[k]
        runs = Verdict(RUNS, None, "the XNNPACK delegate's limit: this resolver runs the operator")
        action = ABORTS if op.name in optable.XNNPACK_ABORTS else REJECTS
        check = ("the XNNPACK delegate takes the operator, then fails to create its runtime (" +
                 ("the process aborts" if action == ABORTS else "allocate_tensors raises") + ")")
        out.append(Violation(rule=optable.XNNPACK_RUNTIME, op_index=k, tensor_index=None,
                             message=f"XNNPACK cannot run this operator: {why}", op_name=op.name,
                             expected="parameters XNNPACK accepts", found=why, litert=RUNS,
                             litert_check=runs.check, subgraph=sg.index,
                             resolvers=(("reference", runs), ("optimized", runs),
                                        ("xnnpack", Verdict(action, "prepare", check)))))
    return out


def _weights_per_axis(sg: Subgraph, op: Operator | None) -> bool | None:
    """Whether a CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED has per-axis weights (None for other
    operators, or weights without quantization)."""
    if op is None or op.name not in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED") or len(op.inputs) < 2 \
            or not 0 <= op.inputs[1] < len(sg.tensors):
        return None
    p = sg.tensors[op.inputs[1]].params
    return None if p is None else bool(p.per_axis)


def _matters(v: Violation, kernels: tuple[str, ...]) -> bool:
    """Whether a violation concerns the resolvers ``kernels``: a broken spec rule always does; a
    LiteRT limit does unless each of them runs the model."""
    return any(v.verdict(r).action != RUNS for r in kernels)


def check_model(path_or_bytes: Any, kernels: Any = "all") -> CheckReport:
    """Check a .tflite model (a path, its bytes, or a loaded :class:`~quantspec.litert.model.Model`)
    against the LiteRT int8 spec, for LiteRT's op resolvers ``kernels``: ``"reference"``
    (BUILTIN_REF), ``"optimized"`` (BUILTIN_WITHOUT_DEFAULT_DELEGATES), ``"xnnpack"`` (the default
    resolver, with the XNNPACK delegate), ``"all"`` (the default) or a list of them.  Every violation
    says what each resolver does (:attr:`Violation.verdicts`); the report is not ``ok`` when the
    model breaks a spec rule, or a LiteRT limit one of ``kernels`` rejects, aborts on or runs with
    undefined behaviour.  Raises :class:`quantspec.errors.InvalidArgumentError` for another
    ``kernels`` and :class:`quantspec.errors.ModelError` when the model cannot be read at all."""
    chosen = _kernels(kernels)
    model: Model = load_model(path_or_bytes)
    violations: list[Violation] = _load_checks(model)
    unsupported: list[Violation] = []
    n_ops = n_tensors = 0
    quantized = _mode(model) != "none"     # float islands: in a quantized model, one finding per island
    for sg in model.subgraphs:
        c = _Collector(sg)
        refusals = {t.index: r for t in sg.tensors if (r := _load_refusal(t)) is not None}
        for op in sg.operators:
            probe = _Collector(sg)         # the kernel's verdict first: it tells which types LiteRT runs
            prepares = _prepare_pass(probe, op, refusals) is True
            _check_op(c, op, refusals, prepares)
            for v in probe.out:            # the kernel's refusals, unless the table pass said the same
                if v.rule == "quantspec-unsupported" and any(w.op_index == op.index and w.rule == "dtype"
                                                             for w in c.out):
                    continue
                if not any(w.op_index == op.index and w.rule == v.rule for w in c.out):
                    c.out.append(v)
        used = {i for op in sg.operators for i in (*op.inputs, *op.outputs) if i >= 0}
        for t in sg.tensors:  # tensors no operator uses (graph inputs passed straight through, leftovers)
            if t.index not in used:
                _tensor_checks(c, None, t, "", refusals.get(t.index))
        if quantized:
            c.out = _float_islands(sg, c.out)
        c.out = _with_resolvers(sg, c.out)
        violations += [v for v in c.out if v.rule != "quantspec-unsupported"]
        unsupported += [v for v in c.out if v.rule == "quantspec-unsupported"]
        n_ops += len(sg.operators)
        n_tensors += len(sg.tensors)
    path = None
    if not isinstance(path_or_bytes, (bytes, bytearray, memoryview, Model, np.ndarray)):
        try:
            path = str(path_or_bytes)
        except Exception:  # pragma: no cover
            path = None
    return CheckReport(violations=tuple(v for v in violations if _matters(v, chosen)), operators=n_ops,
                       tensors=n_tensors, model=path,
                       op_names=tuple(sorted({op.name for sg in model.subgraphs for op in sg.operators})),
                       unsupported=tuple(unsupported), mode=_mode(model), kernels=chosen,
                       other_kernels=tuple(v for v in violations if not _matters(v, chosen)))


def _mode(model: Model) -> str:
    """int8 / int16x8 / mixed / none: the types of the quantized activations operators read or write
    (constant tensors — weights, biases — aside)."""
    kinds = set()
    for sg in model.subgraphs:
        for op in sg.operators:
            for i in (*op.inputs, *op.outputs):
                t = sg.tensors[i] if i >= 0 else None
                if t is not None and t.data is None and t.params is not None and t.type_name in ("INT8", "INT16"):
                    kinds.add(t.type_name)
    if not kinds:
        return "none"
    if kinds == {"INT16"}:
        return "int16x8"
    return "int8" if kinds == {"INT8"} else "mixed"
