"""What a model conversion did: :class:`ModelConversionReport`."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..checkpoint.report import error_cells, human, worst_rel_rms

__all__ = ["WeightReport", "ModelConversionReport"]


@dataclass
class WeightReport:
    """One initializer of the main graph: its scheme (``"keep"`` with the ``reason`` when kept as it
    was), where it is used as a weight (``use``: "MatMul B", "Gemm B (2 nodes)"...), its type and
    shape, the bytes it took and takes, and for a quantized weight the DequantizeLinear attributes
    (``axis``, ``block_size``) and the error of the dequantized values against the weight: relative
    RMS ``sqrt(sum (w - dq)^2 / sum w^2)`` and the largest ``|w - dq|``."""

    name: str
    scheme: str
    dtype: str
    shape: tuple[int, ...]
    bytes_in: int
    bytes_out: int
    use: str = ""
    reason: str = ""
    layout: str = ""
    attributes: dict = field(default_factory=dict)
    rel_rms: float | None = None
    max_abs: float | None = None

    def to_json(self) -> dict:
        return {"name": self.name, "scheme": self.scheme, "dtype": self.dtype, "shape": list(self.shape),
                "bytes_in": self.bytes_in, "bytes_out": self.bytes_out, "use": self.use, "reason": self.reason,
                "layout": self.layout, "attributes": dict(self.attributes), "rel_rms": self.rel_rms,
                "max_abs": self.max_abs}


@dataclass
class ModelConversionReport:
    """Per initializer of the main graph (:class:`WeightReport`, in model order); the opset before and
    after (``opset_from``, ``opset``), the IR version written, the files written and the wall time."""

    src: str
    dst: str
    opset_from: int
    opset: int
    ir_version: int
    tensors: list[WeightReport] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def quantized(self) -> list[WeightReport]:
        return [t for t in self.tensors if t.scheme != "keep"]

    @property
    def kept(self) -> list[WeightReport]:
        return [t for t in self.tensors if t.scheme == "keep"]

    @property
    def bytes_in(self) -> int:
        return sum(t.bytes_in for t in self.tensors)

    @property
    def bytes_out(self) -> int:
        return sum(t.bytes_out for t in self.tensors)

    def __getitem__(self, name: str) -> WeightReport:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def summary(self) -> str:
        """One line: what was done."""
        schemes = sorted({t.scheme for t in self.quantized})
        text = (f"{len(self.quantized)} weight{'s' if len(self.quantized) != 1 else ''} quantized"
                + (f" ({', '.join(schemes)})" if schemes else "") + f", {len(self.kept)} initializer"
                + ("s" if len(self.kept) != 1 else "") + " kept; opset "
                + (f"{self.opset_from} -> {self.opset}" if self.opset != self.opset_from else f"{self.opset}")
                + f"; initializers {human(self.bytes_in)} -> {human(self.bytes_out)}; {self.seconds:.1f} s")
        worst = worst_rel_rms(self.quantized)
        if worst is not None:
            text += f"; worst relative RMS error {worst:.3g}"
        return text

    def table(self) -> str:
        """A line per initializer."""
        lines = [f"{'initializer':<40} {'scheme':<16} {'use':<18} {'in':>10} {'out':>10} {'rel RMS':>9} {'max |err|':>10}"]
        for t in self.tensors:
            lines.append(f"{t.name:<40} {t.scheme:<16} {t.use:<18} {t.bytes_in:>10} {t.bytes_out:>10} "
                         f"{error_cells(t)}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"src": self.src, "dst": self.dst, "opset_from": self.opset_from, "opset": self.opset,
                "ir_version": self.ir_version, "files": list(self.files), "seconds": self.seconds,
                "bytes_in": self.bytes_in, "bytes_out": self.bytes_out,
                "tensors": [t.to_json() for t in self.tensors]}
