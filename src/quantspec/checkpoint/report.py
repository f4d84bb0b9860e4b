"""What a conversion did: :class:`ConversionReport`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["TensorReport", "ConversionReport", "STATS_WIDTH", "format_stats", "parse_stats", "human", "Difference",
           "TensorCheck", "VerifyReport"]

#: width of each number of a shard header's fixed-width error statistics
STATS_WIDTH = 24


def human(n: float) -> str:
    """Bytes as B, kB, MB or GB (powers of 10)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def format_stats(values) -> str:
    """Three floats as fixed-width text (the header's length is planned before they are known)."""
    return " ".join(f"{float(v):+.15e}".rjust(STATS_WIDTH) for v in values)


def parse_stats(text: str) -> tuple[float, float, float]:
    a, b, c = (float(v) for v in text.split())
    return a, b, c


def worst_rel_rms(tensors) -> float | None:
    """The largest relative RMS error among ``tensors`` (reports of quantized tensors), or None; NaN
    when any is NaN (``max`` would keep or drop a NaN by its place in the list)."""
    values = [t.rel_rms for t in tensors if t.rel_rms is not None]
    if not values:
        return None
    return math.nan if any(math.isnan(v) for v in values) else max(values)


def nonfinite_errors(tensors) -> list[str]:
    """The names of the tensors (reports of quantized tensors) whose relative RMS error is not
    finite: a block or channel whose range passes the scale type's (an infinite scale) dequantizes
    to infinities and NaN."""
    return [t.name for t in tensors if t.rel_rms is not None and not math.isfinite(t.rel_rms)]


def error_cells(t) -> str:
    """A report table's last cells for tensor report ``t``: its relative RMS and largest error, and
    for a kept tensor the reason it was kept."""
    err = "" if t.rel_rms is None else f"{t.rel_rms:>9.3g} {t.max_abs:>10.3g}"
    return err + (f"  ({t.reason})" if t.scheme == "keep" and t.reason else "")


@dataclass
class TensorReport:
    """One source tensor: its scheme (``"keep"`` when kept as it was, with the ``reason``), the
    bytes read and written, and for quantized tensors the error of the stored values against the
    source: the relative RMS ``sqrt(sum (x - dq)^2 / sum x^2)`` and the largest ``|x - dq|``, where
    ``dq`` is DequantizeLinear of the stored codes."""

    name: str
    scheme: str
    bytes_in: int
    bytes_out: int
    shard: str
    reason: str = ""
    rel_rms: float | None = None
    max_abs: float | None = None
    resumed: bool = False

    @staticmethod
    def errors(sum_sq: float, sum_sq_source: float, max_abs: float) -> tuple[float, float]:
        """(relative RMS, largest error) from a tensor's error sums.  A NaN sum of squares means some
        dequantized value is NaN (an infinite scale): both are NaN then, since the running maximum
        passes over NaN and would report the largest of the other errors."""
        if math.isnan(sum_sq):
            return math.nan, math.nan
        if sum_sq_source > 0:
            rel = math.sqrt(sum_sq / sum_sq_source)
        else:
            rel = 0.0 if sum_sq == 0 else math.inf
        return rel, max_abs


@dataclass
class ConversionReport:
    """Per tensor (:class:`TensorReport`, in source order), totals and the wall time; which shards a
    rerun kept from an earlier, interrupted run (``resumed``)."""

    src: str
    dst: str
    tensors: list[TensorReport] = field(default_factory=list)
    shards: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def bytes_in(self) -> int:
        return sum(t.bytes_in for t in self.tensors)

    @property
    def bytes_out(self) -> int:
        return sum(t.bytes_out for t in self.tensors)

    @property
    def quantized(self) -> list[TensorReport]:
        return [t for t in self.tensors if t.scheme != "keep"]

    @property
    def kept(self) -> list[TensorReport]:
        return [t for t in self.tensors if t.scheme == "keep"]

    def __getitem__(self, name: str) -> TensorReport:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def summary(self) -> str:
        """One line: what was done, how fast."""
        rate = self.bytes_in / self.seconds if self.seconds > 0 else 0.0
        worst = worst_rel_rms(self.quantized)
        text = (f"{len(self.quantized)} tensors quantized, {len(self.kept)} kept; {human(self.bytes_in)} -> "
                f"{human(self.bytes_out)} in {len(self.shards)} shard{'s' if len(self.shards) != 1 else ''}, "
                f"{self.seconds:.1f} s ({human(rate)}/s)")
        if worst is not None:
            text += f"; worst relative RMS error {worst:.3g}"
        bad = nonfinite_errors(self.quantized)
        if bad:
            text += (f" (not finite for {len(bad)}: {', '.join(bad[:3])}{', ...' if len(bad) > 3 else ''}; "
                     "their dequantized values are not all finite)")
        if self.resumed:
            text += f"; {len(self.resumed)} shard{'s' if len(self.resumed) != 1 else ''} kept from an earlier run"
        return text

    def table(self) -> str:
        """A line per tensor."""
        lines = [f"{'tensor':<56} {'scheme':<16} {'in':>10} {'out':>10} {'rel RMS':>9} {'max |err|':>10}"]
        for t in self.tensors:
            lines.append(f"{t.name:<56} {t.scheme:<16} {t.bytes_in:>10} {t.bytes_out:>10} {error_cells(t)}")
        return "\n".join(lines)


# -- verify ------------------------------------------------------------------------------------------
@dataclass
class Difference:
    """One differing element: its ``index`` in the tensor (or in the scale / zero point), the float
    ``input`` it was quantized from (None for parameters and kept data), the ``expected`` and the
    ``found`` value (codes as integers or float values of their type)."""

    index: tuple[int, ...]
    input: float | None
    expected: float | int
    found: float | int

    def to_dict(self) -> dict:
        return {"index": list(self.index), "input": self.input, "expected": self.expected, "found": self.found}

    def __str__(self) -> str:
        where = "[" + ", ".join(map(str, self.index)) + "]"
        x = "" if self.input is None else f"input {self.input!r}: "
        return f"{where} {x}expected {self.expected!r}, found {self.found!r}"


@dataclass
class TensorCheck:
    """What ``verify`` found for one tensor.  ``status``: "identical", "different", "missing in SRC"
    or "missing in DST".  ``differing``: elements whose code (or, for a kept tensor, value) differs,
    ``max_code_diff`` the largest difference in code steps, ``positions`` the first few; the same for
    the scale and the zero point (compared in the default mode).  ``other``: other findings (a source
    of another shape or type, NaN in the source, compressed-tensors' weight_shape); ``notes``: remarks
    that are not differences (codes under a zero scale, which are not checked).  ``explained``:
    of the differing codes of a compressed-tensors checkpoint checked with ``params_from_dst``, how
    many are what compressed-tensors' own arithmetic gives (``explain``: that was checked).
    ``source_digest_ok``: whether the source bytes have the digest the manifest records (None: not
    compared)."""

    name: str
    scheme: str
    status: str = ""
    elements: int = 0
    differing: int = 0
    max_code_diff: float = 0.0
    positions: list[Difference] = field(default_factory=list)
    scale_differing: int = 0
    scale_positions: list[Difference] = field(default_factory=list)
    zero_point_differing: int = 0
    zero_point_positions: list[Difference] = field(default_factory=list)
    other: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    explained: int = 0
    explain: bool = False
    source_digest_ok: bool | None = None

    @property
    def ok_values(self) -> bool:
        return not (self.differing or self.scale_differing or self.zero_point_differing or self.other
                    or self.source_digest_ok is False)

    @property
    def ok(self) -> bool:
        return self.status == "identical"

    def to_dict(self) -> dict:
        return {"name": self.name, "scheme": self.scheme, "status": self.status, "elements": self.elements,
                "differing": self.differing, "max_code_diff": self.max_code_diff,
                "positions": [p.to_dict() for p in self.positions],
                "scale_differing": self.scale_differing,
                "scale_positions": [p.to_dict() for p in self.scale_positions],
                "zero_point_differing": self.zero_point_differing,
                "zero_point_positions": [p.to_dict() for p in self.zero_point_positions],
                "other": list(self.other), "notes": list(self.notes), "source_digest_ok": self.source_digest_ok,
                **({"compressed_tensors_arithmetic": self.explained} if self.explain else {})}

    def lines(self) -> list[str]:
        if self.status == "identical":
            return [f"{self.name}: identical ({self.elements} elements, {self.scheme})"]
        if self.status.startswith("missing"):
            return [f"{self.name}: {self.status}"]
        out = [f"{self.name}: {self.status} ({self.scheme})"]
        if self.differing:
            out.append(f"  codes: {self.differing} of {self.elements} differ, largest difference "
                       f"{self.max_code_diff:g}")
            if self.explain:
                out.append(f"  of them, {self.explained} are what compressed-tensors' own arithmetic gives (x / "
                           "scale rounded to the weight's type before rounding to an integer)")
            out += [f"    {p}" for p in self.positions]
        for role, n, pos in (("scale", self.scale_differing, self.scale_positions),
                             ("zero point", self.zero_point_differing, self.zero_point_positions)):
            if n:
                out.append(f"  {role}: {n} differ")
                out += [f"    {p}" for p in pos]
        out += [f"  {o}" for o in self.other]
        out += [f"  note: {o}" for o in self.notes]
        if self.source_digest_ok is False:
            out.append("  the source's bytes do not have the digest the manifest records (another source?)")
        return out


@dataclass
class VerifyReport:
    """What ``verify`` found: ``ok`` when every tensor of both checkpoints is identical; per tensor a
    :class:`TensorCheck` (``report[name]``, ``report.tensors``)."""

    src: str
    dst: str
    params_from_dst: bool
    layout: str
    tensors: list[TensorCheck] = field(default_factory=list)
    seconds: float = 0.0
    files: list[str] = field(default_factory=list)   # differences outside the tensors (config.json)
    #: what the codes were checked against: "scheme" (each tensor's recorded scheme, recomputed from
    #: the source), "quantizelinear" (QuantizeLinear of the stored parameters), "compressed-tensors"
    #: (compressed-tensors' arithmetic, recomputed from the source)
    rule: str = ""

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.tensors) and not self.files

    @property
    def different(self) -> list[TensorCheck]:
        return [t for t in self.tensors if not t.ok]

    def __getitem__(self, name: str) -> TensorCheck:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def summary(self) -> str:
        bad = self.different
        rule = self.rule or ("quantizelinear" if self.params_from_dst else "scheme")
        mode = {"quantizelinear": "rule quantizelinear: codes = QuantizeLinear of the stored parameters",
                "compressed-tensors": "rule compressed-tensors: every tensor as compressed-tensors' arithmetic "
                                      "makes it from the source",
                }.get(rule, "rule scheme: codes, scales and zero points of each tensor's scheme")
        files = "; " + "; ".join(self.files) if self.files else ""
        if not bad:
            return (f"{len(self.tensors)} tensors identical ({mode}; {self.layout} layout){files}, "
                    f"{self.seconds:.1f} s")
        codes = sum(t.differing for t in bad)
        return (f"{len(bad)} of {len(self.tensors)} tensors differ ({codes} codes; {mode}; {self.layout} layout): "
                + ", ".join(t.name for t in bad[:5]) + (", ..." if len(bad) > 5 else "") + files)

    def table(self) -> str:
        return "\n".join([line for t in self.tensors for line in (t.lines() if not t.ok else [])] + self.files)

    def to_dict(self) -> dict:
        return {"src": self.src, "dst": self.dst, "ok": self.ok, "params_from_dst": self.params_from_dst,
                "rule": self.rule or ("quantizelinear" if self.params_from_dst else "scheme"),
                "layout": self.layout, "seconds": self.seconds, "files": list(self.files),
                "tensors": [t.to_dict() for t in self.tensors]}
