"""The divergence table of docs/litert.md (``quantspec.litert.divergence.DIVERGENCES``), row by row:
each example runs in LiteRT with its three CPU configurations (BUILTIN_REF, the optimized kernels,
the default resolver with XNNPACK) and in quantspec's three kernel modes; LiteRT gives the bytes the
row documents (or fails / aborts where it says so), quantspec gives the same bytes (or refuses),
and the configurations the row names do differ from BUILTIN_REF."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from litert_build import T, build
from litert_modes import litert_run
from quantspec.errors import QuantSpecError
from quantspec.litert import divergence

ROWS = list(divergence.DIVERGENCES)
MODES = ("reference", "optimized", "xnnpack")


def _model(row) -> bytes:
    ts = [T(t.shape, t.dtype, t.scale, t.zero_point, t.quantized_dimension,
            None if t.data is None else np.asarray(t.data)) for t in (*row.inputs, *row.outputs)]
    return build(row.op, ts[:len(row.inputs)], ts[len(row.inputs):], row.options, row.version)


def _litert(row, mode):
    """LiteRT's outputs, or "fails" / "aborts", run in a forked child (BUILTIN_REF may abort)."""
    import pickle

    model = _model(row)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                               # child
        os.close(r)
        try:
            import faulthandler

            faulthandler.disable()                             # an abort is an expected outcome here
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
            result = ("ok", [np.asarray(y) for y in litert_run(model, list(row.feeds), mode)])
        except Exception as e:
            result = ("fails", str(e))
        with os.fdopen(w, "wb") as f:
            pickle.dump(result, f)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGABRT, status
        return "aborts"
    kind, value = pickle.loads(data)
    return value if kind == "ok" else "fails"


def _flat(outputs):
    return [v for y in outputs for v in np.asarray(y).reshape(-1).tolist()]


@pytest.mark.parametrize("index", range(len(ROWS)), ids=[f"{r.op}-{'+'.join(r.differs_in)}" for r in ROWS])
def test_row(index):
    row = ROWS[index]
    for mode in MODES:
        expected = row.expected[mode]
        theirs = _litert(row, mode)
        if isinstance(expected, str):
            assert theirs == expected, (row.op, mode, theirs)
            with pytest.raises(QuantSpecError):
                divergence.run(row, mode)
            continue
        assert not isinstance(theirs, str), (row.op, mode, theirs)
        assert _flat(theirs) == expected, (row.op, mode, _flat(theirs))
        ours = divergence.run(row, mode)
        assert [y.dtype for y in ours] == [y.dtype for y in theirs]
        assert _flat(ours) == expected, (row.op, mode, _flat(ours))
    for mode in row.differs_in:
        assert row.expected[mode] != row.expected["reference"], (row.op, mode)
    for mode in set(MODES) - set(row.differs_in) - {"reference"}:
        assert row.expected[mode] == row.expected["reference"], (row.op, mode)


def test_table_lists_every_row():
    table = divergence.markdown_table()
    assert len(table.strip().splitlines()) == len(ROWS) + 2
