"""Plan of operators whose prepared record is a code-to-code table (unary ops, LOGISTIC, TANH, ...)."""

from __future__ import annotations

import numpy as np

from .base import Plan, bind, jitted

__all__ = ["UnaryTablePlan", "unary_plan"]


class UnaryTablePlan(Plan):
    """A prepared code-to-code table, gathered with the input's unsigned view as the index."""

    __slots__ = ("table", "unsigned", "invalid")

    def __init__(self, kernel, p, table, unsigned, invalid):
        super().__init__(kernel, p)
        self.table, self.unsigned, self.invalid = table, np.dtype(unsigned), invalid

    def compute(self, unused, arrays):
        x = arrays[0]
        if self.unsigned.itemsize != 1:
            if self.invalid is None:
                return [np.take(self.table, x.view(self.unsigned))]
            out = np.empty(x.shape, self.table.dtype)
            if jitted().lut(x.reshape(-1).view(self.unsigned), self.table, self.invalid, out.reshape(-1)):
                return self.reference(arrays)               # raises as LiteRT fails
            return [out]
        # one-byte codes: the kernel through its entry point (no invalid codes: an empty mask)
        out = np.empty(x.shape, self.table.dtype)
        args = (x.reshape(-1).view(np.uint8), self.table, _NONE_INVALID if self.invalid is None else self.invalid,
                out.reshape(-1))
        entry = self.entry
        if entry is None:
            entry = self.entry = bind("lut", args)
        if entry(*args):
            return self.reference(arrays)                   # raises as LiteRT fails
        return [out]


#: the ``invalid`` mask of a table without invalid codes
_NONE_INVALID = np.zeros(0, np.bool_)


def unary_plan(kernel, p, ins, outs):
    table = getattr(p, "table", None)
    if table is None:
        table = getattr(p, "lut", None)
    if not isinstance(table, np.ndarray) or table.ndim != 1 or table.size not in (256, 65536):
        return None
    x = ins[0]
    if x is None or x.dtype.name not in ("int8", "int16") or (table.size == 256) != (x.dtype.name == "int8"):
        return None
    return UnaryTablePlan(kernel, p, table, np.uint8 if table.size == 256 else np.uint16,
                          getattr(p, "invalid", None))
