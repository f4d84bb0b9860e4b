"""What :func:`quantspec.equivalent` reports: :class:`EquivalenceReport`, per channel and in all."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Example", "ChannelReport", "EquivalenceReport"]


@dataclass(frozen=True)
class Example:
    """One input on which the two quantizers differ: the input (as a float, and its bit pattern in
    the domain's type), and each one's code (None: a simulated quantizer's NaN output, which has no
    code) or, for dequantizers, each one's value."""

    channel: int
    x: float
    bits: int
    a: int | float | None
    b: int | float | None

    def to_dict(self) -> dict:
        return {"channel": self.channel, "x": _json_float(self.x), "bits": f"0x{self.bits:0{8}x}",
                "a": _json_float(self.a), "b": _json_float(self.b)}


def _json_float(v):
    if isinstance(v, float) and not np.isfinite(v):
        return str(v)
    return v


@dataclass
class ChannelReport:
    """The comparison over one channel (the whole record when per-tensor)."""

    channel: int
    inputs: int
    inside: int = 0                # finite inputs inside the range whose codes differ
    outside: int = 0               # finite inputs outside the range whose codes differ
    nonfinite: int = 0             # inf / NaN inputs whose codes differ
    max_difference: int | float = 0
    range: tuple[float, float] = (0.0, 0.0)
    examples: list[Example] = field(default_factory=list)

    @property
    def differing(self) -> int:
        return self.inside + self.outside + self.nonfinite

    def to_dict(self) -> dict:
        return {"channel": self.channel, "inputs": self.inputs, "differing": self.differing, "inside": self.inside,
                "outside": self.outside, "nonfinite": self.nonfinite, "max_difference": self.max_difference,
                "range": list(self.range), "examples": [e.to_dict() for e in self.examples]}


@dataclass
class EquivalenceReport:
    """The comparison of two quantizers ``a`` and ``b`` (their spec strings) over ``domain``.

    ``inputs``: inputs compared (all channels); ``differing`` = ``inside + outside + nonfinite``:
    inputs whose codes (dequantizers: values) differ, split by where the input lies: finite and
    inside the range (between the lower and the higher of the two quantizers' lowest
    representable values ... the higher of their highest), finite outside it, or inf / NaN.
    ``max_difference``: the largest difference of two codes (dequantizers: of two values).
    ``examples``: the first differing inputs in the domain's order, with both codes.
    ``differing_bits``: the bit patterns (in the domain's type) of differing inputs, in order, up
    to the ``keep`` asked for (``complete`` says whether that is all of them); per channel in
    ``channel_of_differing``.  ``offset``: added to ``a``'s codes before comparing (codes of
    types that differ only in signedness: -128 from uint8 to int8)."""

    a: str
    b: str
    domain: str
    inputs: int
    channels: list[ChannelReport]
    offset: int = 0
    seconds: float = 0.0
    differing_bits: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    channel_of_differing: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    complete: bool = True
    kind: str = "codes"            # "codes" or "values" (dequantizers)

    @property
    def inside(self) -> int:
        return sum(c.inside for c in self.channels)

    @property
    def outside(self) -> int:
        return sum(c.outside for c in self.channels)

    @property
    def nonfinite(self) -> int:
        return sum(c.nonfinite for c in self.channels)

    @property
    def differing(self) -> int:
        return sum(c.differing for c in self.channels)

    @property
    def equal(self) -> bool:
        """True when the two agree on every input of the domain."""
        return self.differing == 0

    @property
    def max_difference(self) -> int | float:
        return max((c.max_difference for c in self.channels), default=0)

    @property
    def examples(self) -> list[Example]:
        return [e for c in self.channels for e in c.examples]

    def counts(self) -> dict:
        """``{"inputs", "differing", "inside", "outside", "nonfinite", "max_difference"}``."""
        return {"inputs": self.inputs, "differing": self.differing, "inside": self.inside, "outside": self.outside,
                "nonfinite": self.nonfinite, "max_difference": self.max_difference}

    def to_dict(self) -> dict:
        d = {"a": self.a, "b": self.b, "domain": self.domain, "kind": self.kind, "offset": self.offset,
             **self.counts(), "equal": self.equal, "seconds": round(self.seconds, 3),
             "examples": [e.to_dict() for e in self.examples]}
        if len(self.channels) > 1:
            d["channels"] = [c.to_dict() for c in self.channels]
        return d

    def __str__(self) -> str:
        what = "values" if self.kind == "values" else "codes"
        lines = [f"a: {self.a}", f"b: {self.b}",
                 f"inputs: {self.domain}, {self.inputs:,} compared"
                 + (f" ({len(self.channels)} channels)" if len(self.channels) > 1 else "")
                 + f" in {self.seconds:.1f} s"]
        if self.offset:
            lines.append(f"a's codes shifted by {self.offset:+d} to compare with b's")
        if self.equal:
            lines.append(f"equivalent: the {what} agree on every input")
        else:
            share = self.differing / self.inputs if self.inputs else 0.0
            lines.append(f"differing {what}: {self.differing:,} ({share:.3g} of the inputs): {self.inside:,} finite "
                         f"inside the range, {self.outside:,} finite outside it, {self.nonfinite:,} inf/NaN")
            lines.append(f"largest difference: {self.max_difference}")
            if len(self.channels) > 1:
                for c in self.channels:
                    if c.differing:
                        lines.append(f"  channel {c.channel}: {c.differing:,} differ ({c.inside:,} inside, "
                                     f"{c.outside:,} outside, {c.nonfinite:,} inf/NaN), largest {c.max_difference}")
            lines.append("first differing inputs:")
            for e in self.examples[:8]:
                ch = f"channel {e.channel}, " if len(self.channels) > 1 else ""
                lines.append(f"  {ch}x = {e.x!r} (0x{e.bits:08x}): a -> {_show(e.a)}, b -> {_show(e.b)}")
        return "\n".join(lines)


def _show(v) -> str:
    return "NaN (no code)" if v is None else repr(v)
