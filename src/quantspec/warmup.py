"""``quantspec warmup [--spec onnx|tf|litert|calibrate|checkpoint|equiv]``: compile every fast kernel
ahead of time.

The fast path's kernels are compiled by numba the first time each combination of types is used
(about 1 s each on a 2-core machine), then kept in the on-disk cache, so a first call can wait while
a kernel compiles.  This command runs each spec's operations once for every type and layout the
kernels cover, on small arrays (and the calibration observers, a small checkpoint conversion under
every scheme and source type, and translations between the specs), in each of the three forms a kernel takes: serial (small arrays),
parallel, and parallel with streaming stores (large outputs) — the size thresholds are lowered for
the purpose, so that the signatures compiled are exactly those real calls use.  The work is split
across processes, one per core; every process saves what it compiles to the shared cache.

Combinations quantspec refuses (an output type an opset or a compat mode does not have, ...) are
skipped.  Arguments of unusual types (read-only or unaligned arrays) still compile on first use.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import sys
import time
from typing import Callable, Iterator

import numpy as np

__all__ = ["main", "warmup", "jobs", "SPECS", "GROUPS"]

SPECS = ("onnx", "tf", "litert")
#: the groups of kernels warmup compiles: each spec's operators, then the calibration observers, the
#: checkpoint conversion kernels and the equivalence proofs
GROUPS = SPECS + ("calibrate", "checkpoint", "equiv")


# -- the three forms of every kernel ------------------------------------------------------------------
@contextlib.contextmanager
def _thresholds(form: str):
    """Lower the size thresholds so that a small call takes kernel ``form`` ("serial", "parallel" or
    "streamed")."""
    from ._fastpath import runner as core

    names = ("SERIAL_BELOW", "SERIAL_BELOW_PASSIVE", "STREAM_FROM", "STREAM_BLOCK", "CHUNK")
    saved = {k: getattr(core, k) for k in names}
    if form == "serial":
        core.SERIAL_BELOW = core.SERIAL_BELOW_PASSIVE = 1 << 62
    else:
        core.SERIAL_BELOW = core.SERIAL_BELOW_PASSIVE = 1
        core.CHUNK = 256
        core.STREAM_FROM, core.STREAM_BLOCK = (64, 64) if form == "streamed" else (1 << 62, 1 << 62)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(core, k, v)


# -- what to run, per spec --------------------------------------------------------------------------------
_RNG = np.random.default_rng(0)
#: shapes and parameters that give each layout the kernels walk: per-tensor, per-axis along a long
#: inner axis (runs), per-axis along a short last axis (rows), blocked along the last axis (runs) and
#: along a middle axis (rows)
_SHAPE = (4, 40, 48)


def _x(dtype=np.float32, shape=_SHAPE) -> np.ndarray:
    return (_RNG.normal(0, 3, shape)).astype(dtype)


def _onnx_layouts():
    s = np.float32(0.05)
    yield {}, s
    yield {"axis": 1}, np.linspace(0.01, 0.1, _SHAPE[1]).astype(np.float32)
    yield {"axis": 2}, np.linspace(0.01, 0.1, _SHAPE[2]).astype(np.float32)
    yield {"axis": 2, "block_size": 16}, np.full((4, 40, 3), 0.05, np.float32)
    yield {"axis": 1, "block_size": 16}, np.full((4, 3, 48), 0.05, np.float32)


def _onnx_jobs() -> Iterator[Callable[[], object]]:
    import ml_dtypes

    from . import onnx as qo
    from .dtypes import qtype

    q_types = ("int8", "uint8", "int16", "uint16", "int4", "uint4", "int2", "uint2", "float8e4m3fn",
               "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1", "float6e2m3", "float6e3m2")
    x_types = (np.float32, np.float16, ml_dtypes.bfloat16)
    for compat, out, xt, (kw, s) in itertools.product(("spec", "onnxruntime"), q_types, x_types, _onnx_layouts()):
        t = qtype(out)
        zp = np.zeros(np.shape(s), t.dtype) if (t.is_int or t.bits < 8) else None
        x = _x(xt)
        yield lambda x=x, s=s, zp=zp, kw=kw, out=out, compat=compat: qo.quantize_linear(
            x, s.astype(x.dtype) if compat == "spec" and x.dtype != np.float32 else s, zp, output_dtype=out,
            compat=compat, **kw)
    for compat, code, dt, (kw, s) in itertools.product(("spec", "onnxruntime"), q_types + ("int32",),
                                                        ("float", "float16", "bfloat16"), _onnx_layouts()):
        t = qtype(code)
        q = np.zeros(_SHAPE, t.dtype)
        zp = np.zeros(np.shape(s), t.dtype) if t.is_int and t.bits <= 16 else None
        yield lambda q=q, s=s, zp=zp, kw=kw, dt=dt, compat=compat: qo.dequantize_linear(
            q, s, zp, output_dtype=dt, compat=compat, **kw)
    for out in ("int4", "uint2"):
        yield lambda out=out: qo.quantize_linear_packed(_x(), np.float32(0.05), output_dtype=out)


def _tf_jobs() -> Iterator[Callable[[], object]]:
    from . import tf as qtf

    types = ("qint8", "quint8", "qint16", "quint16", "qint32")
    modes = (("MIN_COMBINED", "HALF_AWAY_FROM_ZERO"), ("MIN_FIRST", "HALF_AWAY_FROM_ZERO"),
             ("SCALED", "HALF_AWAY_FROM_ZERO"), ("SCALED", "HALF_TO_EVEN"))
    ranges = ((np.float32(-3), np.float32(3), None), (np.full(_SHAPE[1], -3, np.float32),
                                                      np.full(_SHAPE[1], 3, np.float32), 1),
              (np.full(_SHAPE[2], -3, np.float32), np.full(_SHAPE[2], 3, np.float32), 2))
    for T, (mode, rmode), kernel, (lo, hi, axis) in itertools.product(types, modes, ("eigen", "onednn"), ranges):
        yield lambda T=T, mode=mode, rmode=rmode, kernel=kernel, lo=lo, hi=hi, axis=axis: qtf.quantize(
            _x(), lo, hi, T, mode=mode, round_mode=rmode, axis=axis, kernel=kernel)
    for T, mode, dtype, (lo, hi, axis) in itertools.product(types, ("MIN_COMBINED", "MIN_FIRST", "SCALED"),
                                                          ("float32", "bfloat16"), ranges):
        yield lambda T=T, mode=mode, dtype=dtype, lo=lo, hi=hi, axis=axis: qtf.dequantize(
            np.zeros(_SHAPE, qtf.quantize_op.spec.tf_type(T).dtype), lo, hi, T, mode=mode, dtype=dtype, axis=axis)
    last = np.full(_SHAPE[2], -3, np.float32), np.full(_SHAPE[2], 3, np.float32)
    yield lambda: qtf.fake_quant_with_min_max_args(_x(), min=-3.0, max=3.0)
    yield lambda: qtf.fake_quant_with_min_max_vars(_x(), np.float32(-3), np.float32(3))
    yield lambda: qtf.fake_quant_with_min_max_vars_per_channel(_x(), *last)
    for rmode, given, (lo, hi, axis) in itertools.product(("HALF_TO_EVEN", "HALF_UP"), (True, False), ranges):
        yield lambda rmode=rmode, given=given, lo=lo, hi=hi, axis=axis: qtf.quantize_and_dequantize_v4(
            _x(), lo, hi, range_given=given, round_mode=rmode, axis=axis)


def _litert_jobs() -> Iterator[Callable[[], object]]:
    from . import litert as L
    from .litert.model import EXAMPLE_MODELS, example_model

    per_tensor = L.QuantParams(np.float32([0.05]), np.int64([3]))
    per_axis = L.QuantParams(np.full(_SHAPE[1], 0.05, np.float32), np.zeros(_SHAPE[1], np.int64), 1)
    last_axis = L.QuantParams(np.full(_SHAPE[2], 0.05, np.float32), np.zeros(_SHAPE[2], np.int64), 2)
    for p in (per_tensor, per_axis, last_axis):
        yield lambda p=p: L.quantize(_x(), p)
        for dtype in (np.int8, np.uint8, np.int16, np.int32):
            yield lambda p=p, dtype=dtype: L.dequantize(np.zeros(_SHAPE, dtype), p)
    paths = [example_model(name) for name in EXAMPLE_MODELS]
    bench = os.path.join(os.path.dirname(__file__), "data", "bench_cnn.tflite")
    if os.path.exists(bench):
        paths.append(bench)
    for path, kernels in itertools.product(paths, ("reference", "optimized", "xnnpack")):
        def run(path=path, kernels=kernels):
            interp = L.Interpreter(path, kernels)
            for _ in range(2):          # the second run makes the fast program (its regions' kernel)
                interp.run([np.zeros(t.shape, t.dtype) for t in interp.inputs])
        yield run


def _calibrate_jobs() -> Iterator[Callable[[], object]]:
    from . import calibrate as C

    plain = _x().reshape(-1)
    odd = plain.copy()
    odd[::7] = np.nan
    odd[1::5] = -0.0
    batches = (plain, odd, np.abs(plain))
    observers = [(C.MinMaxObserver, {}), (C.MinMaxObserver, {"moving_average": True}), (C.TFLiteMinMaxObserver, {}),
                 (C.EntropyObserver, {}), (C.PercentileObserver, {}), (C.PercentileObserver, {"symmetric": False}),
                 (C.DistributionObserver, {})]
    for cls, options in observers:
        def run(cls=cls, options=options):
            obs = cls(**options)
            for b in batches:
                obs.update(b[~np.isnan(b)] if cls is C.PercentileObserver else b)
                obs.flush() if hasattr(obs, "flush") else None
            return obs.range()
        yield run


def _checkpoint_jobs() -> Iterator[Callable[[], object]]:
    import tempfile

    import ml_dtypes

    from . import checkpoint
    from ._tensorfiles.tensorio import write_tensors

    for scheme, dtype in itertools.product(sorted(checkpoint.SCHEMES), (np.float32, np.float16, ml_dtypes.bfloat16)):
        def run(scheme=scheme, dtype=dtype):
            with tempfile.TemporaryDirectory(prefix="quantspec-warmup-") as d:
                src = os.path.join(d, "model.safetensors")
                write_tensors(src, {"w": _x(dtype, (64, 256)), "norm": _x(dtype, (256,))})
                checkpoint.convert(src, os.path.join(d, "out"), scheme, progress=False)
                checkpoint.verify(src, os.path.join(d, "out"), progress=False)
        yield run
    # the compressed-tensors presets: one of each kernel family (integer groups, float8, float4)
    for preset, dtype in itertools.product(("W4A16", "FP8_BLOCK", "NVFP4A16"),
                                           (np.float32, np.float16, ml_dtypes.bfloat16)):
        def run(preset=preset, dtype=dtype):
            with tempfile.TemporaryDirectory(prefix="quantspec-warmup-") as d:
                src = os.path.join(d, "model.safetensors")
                write_tensors(src, {"m.weight": _x(dtype, (64, 256))})
                checkpoint.convert(src, os.path.join(d, "out"), preset, progress=False)
        yield run


def _equiv_jobs() -> Iterator[Callable[[], object]]:
    from . import equiv

    sources = ("tf:QuantizeV2 mode=MIN_COMBINED T=qint8 min=-6 max=6",
               "tf:QuantizeV2 mode=SCALED round_mode=HALF_TO_EVEN T=qint8 min=-6 max=6",
               "tf:FakeQuant variant=args min=-1.3 max=2.7",
               "tf:QuantizeAndDequantize version=4 min=0 max=3 signed_input=false range_given=true",
               "onnx:QuantizeLinear opset=13 scale=0.05 zero_point=-3 output_dtype=int8",
               "litert:QUANTIZE scale=0.05 zero_point=-3",
               "litert:DEQUANTIZE scale=0.05 zero_point=-3")
    for source, to, inputs in itertools.product(sources, ("onnx", "litert", "tf"), ("float16", "bfloat16")):
        if source.startswith(to + ":"):
            continue
        yield lambda source=source, to=to, inputs=inputs: equiv.translate(source, to, inputs=inputs)
    a = equiv.specstring.parse(sources[0])
    b = equiv.specstring.parse("onnx:QuantizeLinear scale=0.047058817 zero_point=-1 output_dtype=int8")
    yield lambda: equiv.equivalent(a, b, "float32", subrange=(0x3F000000, 0x3F010000))


_JOBS = {"onnx": _onnx_jobs, "tf": _tf_jobs, "litert": _litert_jobs, "calibrate": _calibrate_jobs,
         "checkpoint": _checkpoint_jobs, "equiv": _equiv_jobs}


def jobs(specs=GROUPS) -> list[tuple[str, int]]:
    """The (spec, index) of every job of ``specs``."""
    return [(spec, i) for spec in specs for i, _ in enumerate(_JOBS[spec]())]


def _run(selected: list[tuple[str, int]]) -> set[str]:
    """Run the jobs ``selected`` in each kernel form; the kernels (name and signature) compiled or
    loaded."""
    from .errors import QuantSpecError

    wanted: dict[str, set[int]] = {}
    for spec, i in selected:
        wanted.setdefault(spec, set()).add(i)
    with np.errstate(all="ignore"):
        for form in ("serial", "parallel", "streamed"):
            with _thresholds(form):
                for spec, indices in wanted.items():
                    for i, job in enumerate(_JOBS[spec]()):
                        if i in indices:
                            try:
                                job()
                            except QuantSpecError:
                                pass            # a combination quantspec refuses
    return _jitted()


def _jitted() -> set[str]:
    from ._fastpath import jit

    return {f"{d.py_func.__module__}.{d.py_func.__qualname__}{sig}" for d in jit.KERNELS for sig in d.overloads}


def _worker(selected: list[tuple[str, int]]) -> set[str]:
    os.environ.pop("QUANTSPEC_FAST", None)
    return _run(selected)


def warmup(specs=GROUPS, processes: int | None = None, out=sys.stderr) -> int:
    """Compile (or load from the cache) every kernel of ``specs``, in ``processes`` processes (one
    per core by default); the number of kernels."""
    from ._fastpath import jit
    from .errors import InvalidArgumentError

    if processes is not None and (isinstance(processes, bool) or not isinstance(processes, int) or processes < 1):
        raise InvalidArgumentError("processes", "must be None (one per core) or a positive integer", processes)
    if not jit.enabled():
        print("quantspec warmup: the fast path is off (QUANTSPEC_FAST or numba missing): nothing to compile",
              file=out)
        return 0
    jit.load("quantspec._fastpath.fastmap")
    if jit.cache_location() is None:
        print("quantspec warmup: there is no writable cache directory, so compiled kernels cannot be kept: "
              "nothing to do (set QUANTSPEC_CACHE_DIR)", file=out)
        return 0
    selected = jobs(specs)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    processes = max(1, min(processes or cores, len(selected)))
    if processes == 1:
        return len(_run(selected))
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # contiguous shares: neighbouring jobs share kernels, which one process then compiles once
    parts = [selected[len(selected) * k // processes:len(selected) * (k + 1) // processes] for k in range(processes)]
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        return len(set().union(*pool.map(_worker, parts)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="quantspec warmup",
        description="Compile every fast kernel ahead of time, once per machine (kernels are otherwise compiled "
        "on first use, about a second each, and cached). A few minutes on 2 cores the first time.")
    parser.add_argument("--spec", action="append", choices=GROUPS,
                        help="only this spec's kernels, or those of calibrate, checkpoint or equiv (repeatable)")
    parser.add_argument("--processes", type=int, default=None, help="processes to compile in (default: one per core)")
    args = parser.parse_args(argv)
    if args.processes is not None and args.processes < 1:
        parser.error(f"argument --processes: must be a positive integer (got {args.processes})")
    from ._fastpath import jit

    specs = tuple(args.spec or GROUPS)
    t0 = time.perf_counter()
    print(f"quantspec warmup: compiling the fast kernels of {', '.join(specs)} for this machine "
          f"({jit.KERNEL_SECONDS} each, a few minutes in all the first time)...", file=sys.stderr, flush=True)
    n = warmup(specs, args.processes)
    where = jit.cache_location()
    print(f"quantspec warmup: {n} kernels ready in {time.perf_counter() - t0:.1f} s"
          + (f" (cached in {where})" if where else ""))
    return 0
