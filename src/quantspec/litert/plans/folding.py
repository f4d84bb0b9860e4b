"""Table plans in a row made one on the interpreter's fast loop: :func:`fold` and :func:`chain`."""

from __future__ import annotations

import numpy as np

from .base import Plan, bind
from .elementwise import PairTablePlan
from .unary import UnaryTablePlan

__all__ = ["FoldedPairPlan", "FoldedUnaryPlan", "PairChainPlan", "byte_table", "chain", "fold"]


def byte_table(plan, invalid_ok: bool = False) -> bool:
    """A table plan indexed by one-byte codes that never defers to its kernel (or, ``invalid_ok``,
    defers only where its input holds a code its ``invalid`` marks)."""
    return type(plan) is UnaryTablePlan and (invalid_ok or plan.invalid is None) \
        and plan.unsigned.itemsize == 1 and plan.table.size == 256


class FoldedPairPlan(PairTablePlan):
    """A pair table followed by a unary table with invalid codes (RSQRT of a layer norm): the composed
    table, and the composed marks checked first; where an input pair reaches a marked code, the two
    plans run one after the other, and the second raises as its kernel does."""

    __slots__ = ("bad", "first", "second")

    def compute(self, unused, arrays):
        if self.dims is not None:
            out = np.empty(self.size, np.int8)
            args = (arrays[0].reshape(-1).view(np.uint8), arrays[1].reshape(-1).view(np.uint8), self.table,
                    self.bad, self.dims, self.xs, self.ys, out)
            entry = self.entry
            if entry is None:
                entry = self.entry = bind("gather2_checked", args)
            if not entry(*args):
                return [out.reshape(self.shape)]
        return self.second.compute(None, self.first.compute(None, arrays))


class FoldedUnaryPlan(UnaryTablePlan):
    """A unary table followed by one with invalid codes, composed; as :class:`FoldedPairPlan` where an
    input reaches a marked code."""

    __slots__ = ("first", "second")

    def reference(self, arrays):
        return self.second.compute(None, self.first.compute(None, arrays))


def _walk_n(shapes, out_shape):
    """(dims, [strides per input]) of the output walked as at most four dimensions, each input's
    element strides 0 along its broadcast dimensions; None beyond four."""
    rank = len(out_shape)
    full = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]

    def strides(shape):
        st, acc = [], 1
        for d in reversed(shape):
            st.append(acc)
            acc *= d
        return list(reversed(st))

    st = [strides(s) for s in full]
    dims = []
    for i, d in enumerate(out_shape):
        if d == 1:
            continue
        dims.append([d] + [st[j][i] if full[j][i] != 1 else 0 for j in range(len(shapes))])
    merged: list[list[int]] = []
    for row in dims:
        if merged and all(merged[-1][j + 1] == row[j + 1] * row[0] for j in range(len(shapes))):
            merged[-1] = [merged[-1][0] * row[0]] + row[1:]
            continue
        merged.append(row)
    if len(merged) > 4:
        return None
    merged = [[1] + [0] * len(shapes)] * (4 - len(merged)) + merged
    return (np.array([m[0] for m in merged], np.int64),
            [np.array([m[j + 1] for m in merged], np.int64) for j in range(len(shapes))])


class PairChainPlan(Plan):
    """Two pair tables in a row, the first's output read only by the second: one pass over the three
    inputs (:func:`~quantspec.litert._jitted_plans.gather3`), the intermediate code never stored."""

    __slots__ = ("first", "second", "tpos", "dims", "xs", "ys", "zs", "size", "shape")

    def compute(self, unused, arrays):
        out = np.empty(self.size, np.int8)
        args = (arrays[0].reshape(-1).view(np.uint8), arrays[1].reshape(-1).view(np.uint8),
                arrays[2].reshape(-1).view(np.uint8), self.first, self.second, self.tpos, self.dims, self.xs,
                self.ys, self.zs, out)
        entry = self.entry
        if entry is None:
            entry = self.entry = bind("gather3", args)
        entry(*args)
        return [out.reshape(self.shape)]


def chain(first: Plan, second: Plan, tpos: int, shapes) -> Plan | None:
    """One plan for the pair table ``second`` whose input ``tpos`` (0 or 1) is the output of the pair
    table ``first`` (the same bytes: the second table indexed by the first's entry, element by
    element); ``shapes``: the shapes of the first's two inputs and of the second's other input.  None
    where they do not chain (a table that is not a plain pair table, an intermediate the second
    broadcasts, more than four dimensions)."""
    if type(first) is not PairTablePlan or type(second) is not PairTablePlan or first.dims is None \
            or second.dims is None or tuple(first.shape) != tuple(second.shape):
        return None
    walk = _walk_n(shapes, tuple(second.shape))
    if walk is None:
        return None
    plan = PairChainPlan(second.kernel, second.prepared)
    plan.first, plan.second, plan.tpos = first.table, second.table, int(tpos)
    plan.dims, (plan.xs, plan.ys, plan.zs) = walk
    plan.size, plan.shape = second.size, tuple(second.shape)
    return plan


def fold(first: Plan, second: Plan) -> Plan | None:
    """One plan for ``second`` applied to the output of ``first``, where both are tables: a unary
    table (``second``, indexed by one-byte codes) after a pair table or after another unary table of
    one-byte codes is the table of the composition, ``second.table[first.table]``, entry by entry
    (the same bytes by construction).  Where ``second`` marks codes on which LiteRT fails (RSQRT of a
    negative value), the composition carries the marks of the entries that reach them, and an input
    that reaches one runs both plans (the second raises).  None where they do not compose.  The
    interpreter folds an operator into the one before it only where nothing else reads the tensor
    between them."""
    if not byte_table(second, invalid_ok=True):
        return None
    marks = second.invalid
    if type(first) is PairTablePlan and second.table.dtype == np.int8:
        index = first.table.view(np.uint8)
        table = np.ascontiguousarray(second.table[index])
        table.setflags(write=False)
        walk = None if first.dims is None else (first.dims, first.xs, first.ys)
        if marks is None:
            return PairTablePlan(first.kernel, first.prepared, table, walk, first.shape)
        plan = FoldedPairPlan(first.kernel, first.prepared, table, walk, first.shape)
        plan.bad = np.ascontiguousarray(np.asarray(marks, np.bool_)[index])
        plan.first, plan.second = first, second
        return plan
    if byte_table(first) and first.table.dtype.itemsize == 1:
        index = first.table.view(np.uint8)
        table = np.ascontiguousarray(second.table[index])
        table.setflags(write=False)
        if marks is None:
            return UnaryTablePlan(first.kernel, first.prepared, table, np.uint8, None)
        plan = FoldedUnaryPlan(first.kernel, first.prepared, table, np.uint8,
                               np.ascontiguousarray(np.asarray(marks)[index]))
        plan.first, plan.second = first, second
        return plan
    return None
