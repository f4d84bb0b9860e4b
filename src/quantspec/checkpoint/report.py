"""What a conversion did: :class:`ConversionReport`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["TensorReport", "ConversionReport", "STATS_WIDTH", "format_stats", "parse_stats", "human"]

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
        worst = max((t.rel_rms for t in self.quantized if t.rel_rms is not None), default=None)
        text = (f"{len(self.quantized)} tensors quantized, {len(self.kept)} kept; {human(self.bytes_in)} -> "
                f"{human(self.bytes_out)} in {len(self.shards)} shard{'s' if len(self.shards) != 1 else ''}, "
                f"{self.seconds:.1f} s ({human(rate)}/s)")
        if worst is not None:
            text += f"; worst relative RMS error {worst:.3g}"
        if self.resumed:
            text += f"; {len(self.resumed)} shard{'s' if len(self.resumed) != 1 else ''} kept from an earlier run"
        return text

    def table(self) -> str:
        """A line per tensor."""
        lines = [f"{'tensor':<56} {'scheme':<16} {'in':>10} {'out':>10} {'rel RMS':>9} {'max |err|':>10}"]
        for t in self.tensors:
            err = "" if t.rel_rms is None else f"{t.rel_rms:>9.3g} {t.max_abs:>10.3g}"
            note = f"  ({t.reason})" if t.scheme == "keep" and t.reason else ""
            lines.append(f"{t.name:<56} {t.scheme:<16} {t.bytes_in:>10} {t.bytes_out:>10} {err}{note}")
        return "\n".join(lines)
