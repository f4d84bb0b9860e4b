"""Test helper: run one single-op model in LiteRT (BUILTIN_REF) and through quantspec's kernel with
the very same description, and compare bytes.

    check(op, inputs=[T(...), ...], outputs=[T(...)], options={...}, feeds=[x, ...])

``inputs`` / ``outputs`` are :class:`litert_build.T`; constant inputs carry ``data``, the others are
fed from ``feeds`` in order.  The kernel gets ``TensorSpec``s built from the same ``T``s, the same
options mapping, and the arrays in operator order.
"""

from __future__ import annotations

import os
import signal
import zlib
from typing import Any, Mapping, Sequence

import numpy as np

from litert_build import T, build, run_ref

#: models per op and per test (QUANTSPEC_LITERT_MODELS; the default keeps the suite fast)
N_MODELS = int(os.environ.get("QUANTSPEC_LITERT_MODELS", "12"))
SEED = int(os.environ.get("QUANTSPEC_TEST_SEED", "0"))


def spec(t: T | None):
    from quantspec.dtypes import qtype
    from quantspec.litert.kernels.base import TensorSpec
    from quantspec.litert.params import QuantParams

    if t is None:
        return None
    q = qtype(t.dtype)
    params = None if t.scale is None else QuantParams(t.scale, t.zero_point, t.quantized_dimension)
    data = None if t.data is None else np.asarray(t.data, q.dtype).reshape(tuple(t.shape))
    return TensorSpec(tuple(int(s) for s in t.shape), q, params, data, t.name)


def _prepare_only(op: str, inputs, outputs, options):
    from quantspec.litert import OPS

    return OPS[op].prepare([spec(t) for t in inputs], [spec(t) for t in outputs], dict(options or {}))


#: LiteRT limits that depend on the input values, not on the model (the checker cannot decide them)
def _data_dependent():
    from quantspec.litert.optable import LIMITS

    return frozenset(k for k, v in LIMITS.items() if v.data_dependent)


DATA_DEPENDENT = _data_dependent()


def check_agrees(model: bytes, litert_fails: bool, op: str = "", model_options=None) -> None:
    """check == run: ``check_model`` for the reference kernels reports a rule LiteRT's BUILTIN_REF
    rejects or aborts on exactly when it fails on the model (at allocate_tensors, or at invoke for a
    reason that is not the data)."""
    from quantspec.litert import check_model

    report = check_model(model, kernels="reference")
    bad = report.rejected_by_litert
    if litert_fails:
        assert bad, f"{op}: LiteRT fails on the model, check_model reports no such rule: {report.render()}\n" \
                    f"options {model_options}"
    else:
        assert not bad, f"{op}: LiteRT runs the model, check_model says it fails: {report.render()}\n" \
                        f"options {model_options}"


def quantspec_run(op: str, inputs: Sequence[T | None], outputs: Sequence[T], options: Mapping[str, Any] | None,
                  feeds: Sequence[np.ndarray], prepared=None) -> list[np.ndarray]:
    """The kernel's outputs.  Where the fast path (quantspec.litert.fast) is available the kernel runs
    on it and on the reference path, which must agree byte for byte (tests/test_litert_fast.py)."""
    from quantspec._fastpath import jit
    from quantspec.litert import OPS

    kernel = OPS[op]
    if prepared is None:
        prepared = _prepare_only(op, inputs, outputs, options)
    it = iter(feeds)
    arrays = [None if t is None else (np.asarray(t.data) if t.data is not None else next(it)) for t in inputs]
    result = kernel.compute(prepared, arrays)
    if jit.enabled():
        before = os.environ.get(jit.ENV)
        os.environ[jit.ENV] = "0"
        try:
            reference = kernel.compute(prepared, arrays)
        finally:
            if before is None:
                del os.environ[jit.ENV]
            else:
                os.environ[jit.ENV] = before
        for f, r in zip(result, reference):
            assert f.dtype == r.dtype and f.shape == r.shape and f.tobytes() == r.tobytes(), \
                f"{op}: the fast path and the reference path differ"
        # the interpreter's run plan of the operator (quantspec.litert.plans), where it has one
        from quantspec.litert import plans

        plan = plans.make(op, kernel, prepared, [spec(t) for t in inputs], [spec(t) for t in outputs],
                          dict(options or {}))
        if plan is not None:
            planned = plan.compute(None, arrays)
            for f, r in zip(planned, result):
                assert f.dtype == r.dtype and f.shape == r.shape and f.tobytes() == r.tobytes(), \
                    f"{op}: the run plan ({type(plan).__name__}) and the kernel differ"
    return result


#: the op of every model compared byte for byte (for reports)
CHECKED: list[str] = []
#: (op, LiteRT's message) of the random models both LiteRT and quantspec refused
REFUSED: list[tuple[str, str]] = []


def check(op: str, inputs: Sequence[T | None], outputs: Sequence[T], options: Mapping[str, Any] | None,
          feeds: Sequence[np.ndarray], version: int = 2, model_options: Mapping[str, Any] | None = None,
          allow_refusal: bool = False) -> list[np.ndarray] | None:
    """Assert that LiteRT and quantspec give byte-identical outputs; return LiteRT's outputs.  With
    ``allow_refusal`` (random parameter sweeps), a model quantspec refuses passes when LiteRT refuses
    it too — returns an error or aborts (None is returned and the refusal recorded in REFUSED).

    ``model_options`` (default: ``options``) are written into the model; ``options`` go to the
    kernel (they differ only by quantspec's own keys such as ``quantspec_sum_semantics``)."""
    from quantspec.errors import QuantSpecError

    model_opts = model_options if model_options is not None else options
    model = build(op, inputs, outputs, model_opts, version)
    if allow_refusal:
        # quantspec first: where it refuses, LiteRT must refuse too — run in a forked child, since
        # LiteRT may abort the process (a TFLITE_CHECK) rather than return an error
        try:
            prepared = _prepare_only(op, inputs, outputs, options)
        except QuantSpecError as e:
            # a refusal at prepare is a property of the model: check_model must say what LiteRT does
            if "undefined behaviour" in str(e):      # LiteRT computes, but not reproducibly
                REFUSED.append((op, f"undefined behaviour: {e}"[:160]))
                check_agrees(model, litert_fails=False, op=op, model_options=model_opts)
                return None
            outcome = litert_outcome(op, inputs, outputs, model_opts, feeds, version)
            assert outcome in ("error", "abort"), (f"{op}: quantspec refuses ({e}) but LiteRT computes; inputs "
                                                   f"{inputs}, outputs {outputs}, options {options}")
            REFUSED.append((op, f"LiteRT {outcome}: {e}"[:160]))
            check_agrees(model, litert_fails=True, op=op, model_options=model_opts)
            return None
        try:
            quantspec_run(op, inputs, outputs, options, feeds, prepared)
        except QuantSpecError as e:
            # a refusal at run time depends on the data (or on undefined behaviour): check_model cannot
            # decide it, and must not report a rule LiteRT fails on for the model itself
            if "undefined behaviour" in str(e):
                REFUSED.append((op, f"undefined behaviour: {e}"[:160]))
                return None
            outcome = litert_outcome(op, inputs, outputs, model_opts, feeds, version)
            assert outcome in ("error", "abort"), (f"{op}: quantspec refuses ({e}) but LiteRT computes; inputs "
                                                   f"{inputs}, outputs {outputs}, options {options}")
            REFUSED.append((op, f"LiteRT {outcome}: {e}"[:160]))
            assert getattr(e, "limit", None) in DATA_DEPENDENT or outcome == "abort" and getattr(e, "limit", None), \
                f"{op}: a run-time refusal not marked as data-dependent: {e}"
            return None
    ref = run_ref(model, feeds)
    ours = quantspec_run(op, inputs, outputs, options, feeds)
    CHECKED.append(op)
    check_agrees(model, litert_fails=False, op=op, model_options=model_opts)
    assert len(ours) == len(ref)
    for r, o in zip(ref, ours):
        assert o.dtype == r.dtype, (op, o.dtype, r.dtype)
        assert o.shape == r.shape, (op, o.shape, r.shape)
        if o.tobytes() != r.tobytes():
            bad = np.flatnonzero(o.ravel() != r.ravel())
            raise AssertionError(f"{op}: {bad.size} of {r.size} bytes differ; first at {bad[:5]}: "
                                 f"quantspec {o.ravel()[bad[:5]]}, LiteRT {r.ravel()[bad[:5]]}; "
                                 f"inputs {inputs}, outputs {outputs}, options {options}")
    return ref


def litert_outcome(op: str, inputs, outputs, options, feeds, version: int = 2) -> str:
    """'ok', 'error' (allocate_tensors / invoke raised) or 'abort' (the process died), run in a
    forked child so that an abort does not take the test process down."""
    model = build(op, inputs, outputs, options, version)
    pid = os.fork()
    if pid == 0:                                               # child
        try:
            import faulthandler
            faulthandler.disable()
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
            run_ref(model, feeds)
            code = 0
        except Exception:
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        assert os.WTERMSIG(status) == signal.SIGABRT, os.WTERMSIG(status)
        return "abort"
    return {0: "ok", 3: "error"}.get(os.WEXITSTATUS(status), f"exit {os.WEXITSTATUS(status)}")


# ---------------------------------------------------------------------------------------------
# random parameters
# ---------------------------------------------------------------------------------------------

def rng_for(*key) -> np.random.Generator:
    """A generator seeded by QUANTSPEC_TEST_SEED and ``key`` (strings hashed stably with crc32)."""
    return np.random.default_rng([SEED, *[zlib.crc32(k.encode()) if isinstance(k, str) else int(k) for k in key]])


def scale(r: np.random.Generator, lo: float = -4, hi: float = 1) -> float:
    """A float32 scale, log-uniform in [10^lo, 10^hi]."""
    return float(np.float32(10.0 ** r.uniform(lo, hi)))


def zero_point(r: np.random.Generator) -> int:
    return int(r.choice([-128, 127, 0, int(r.integers(-128, 128)), int(r.integers(-128, 128))]))


def shape(r: np.random.Generator, max_rank: int = 4, max_dim: int = 5, min_rank: int = 1) -> tuple[int, ...]:
    rank = int(r.integers(min_rank, max_rank + 1))
    return tuple(int(d) for d in r.integers(1, max_dim + 1, rank))


def broadcast_pair(r: np.random.Generator, max_rank: int = 6) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two shapes that broadcast: equal, one with ones, one shorter, or a scalar."""
    full = shape(r, max_rank, 4)
    kind = r.integers(0, 4)
    if kind == 0:
        return full, full
    other = tuple(1 if r.random() < 0.5 else d for d in full)
    if kind == 2:
        other = other[int(r.integers(0, len(other) + 1)):]
    if kind == 3:
        other = ()
    return (full, other) if r.random() < 0.5 else (other, full)


def int8(r: np.random.Generator, shp: tuple[int, ...], zp: int | None = None) -> np.ndarray:
    """Random int8 data with the extremes (and the zero point) present."""
    x = np.asarray(r.integers(-128, 128, shp)).astype(np.int8)
    flat = x.reshape(-1)
    specials = [-128, 127] + ([zp] if zp is not None and -128 <= zp <= 127 else [])
    for i, v in enumerate(specials[: flat.size]):
        flat[int(r.integers(0, flat.size))] = v
    return x


def sweep(*args, **kwargs):
    """:func:`check` for random parameter sweeps: a model LiteRT refuses passes when quantspec
    refuses it too."""
    return check(*args, allow_refusal=True, **kwargs)


# ---------------------------------------------------------------------------------------------
# strict comparison, case counts (the convolution / pooling / resize / data-movement tests)
# ---------------------------------------------------------------------------------------------

#: how many random cases those conformance tests draw (QUANTSPEC_LITERT_CASES scales their defaults)
SCALE = float(os.environ.get("QUANTSPEC_LITERT_CASES", "1"))


def cases(default: int) -> range:
    return range(max(1, int(round(default * SCALE))))


#: quantspec's kernel on the model's tensors; ``feeds`` are the non-constant inputs in order
run_quantspec = quantspec_run


def check_exact(op: str, inputs: Sequence[T | None], outputs: Sequence[T], options: Mapping[str, Any] | None,
                feeds: Sequence[np.ndarray], version: int = 1) -> list[np.ndarray]:
    """:func:`check` for a model LiteRT must accept: assert byte-identical outputs (a model both
    refuse is a failure here, not a pass)."""
    ref = check(op, inputs, outputs, options, feeds, version)
    assert ref is not None, f"{op}: LiteRT refused a model meant to be valid: {REFUSED[-1]}"
    return ref


def ref_fails(op: str, inputs, outputs, options, feeds, version: int = 1) -> str | None:
    """The interpreter's error message when it refuses the model, else None."""
    try:
        run_ref(build(op, inputs, outputs, options, version), feeds)
    except (RuntimeError, ValueError) as e:
        return str(e)
    return None
