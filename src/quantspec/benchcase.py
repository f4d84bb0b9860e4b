"""What ``quantspec bench`` times: a :class:`Case` (quantspec's call, its output) and its :class:`Peer` calls
(the same work in a runtime).  Each package's bench module builds cases of these; :mod:`quantspec.bench`
runs them side by side."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Peer", "Case"]


@dataclass
class Peer:
    name: str
    run: Callable[[], object] | None = None   # timed
    output: Callable[[], object] | None = None  # bytes, array or sha256 of what ``run`` computed
    seconds: float | None = None              # set by an outside timer (TensorFlow's subprocess)
    note: str = ""


@dataclass
class Case:
    name: str
    elements: int
    bytes_per_element: float
    run: Callable[[], object]
    output: Callable[[], np.ndarray]
    peers: list[Peer] = field(default_factory=list)
    unit: str = "Gelem/s"


