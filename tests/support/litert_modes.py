"""Test helper: run one single-op model in LiteRT with the resolver of a kernel mode and through
quantspec's kernel for that mode, and compare bytes.

    outs = check_mode("ADD", inputs, outputs, options, feeds, mode="xnnpack")

``mode`` is one of quantspec's kernel modes; LiteRT runs the matching ``OpResolverType``
(``reference`` -> ``BUILTIN_REF``, ``optimized`` -> ``BUILTIN_WITHOUT_DEFAULT_DELEGATES``,
``xnnpack`` -> ``AUTO``, the default resolver with the XNNPACK delegate).  quantspec picks the kernel
exactly as its interpreter does (:func:`quantspec.litert.kernels.modes.select`), so a test also
covers the delegate's take-or-decline rules.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any, Mapping, Sequence

import numpy as np

from litert_build import T, build
from litert_kernel_check import spec
from refs import require

#: random cases per (op, mode) test (QUANTSPEC_LITERT_MODE_CASES scales the defaults)
SCALE = float(os.environ.get("QUANTSPEC_LITERT_MODE_CASES", "1"))
MODES = ("reference", "optimized", "xnnpack")
RESOLVER = {"reference": "BUILTIN_REF", "optimized": "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "xnnpack": "AUTO"}

#: (op, mode) -> [cases, elements, elements where LiteRT's mode differs from BUILTIN_REF's bytes, plus
#: one per model BUILTIN_REF refuses and the mode runs]
SEEN: dict[tuple[str, str], list[int]] = {}
#: (op, mode, engine) -> how many cases quantspec ran on that engine
ENGINES: Counter = Counter()


def cases(default: int) -> range:
    return range(max(1, int(round(default * SCALE))))


def litert_run(model: bytes, feeds: Sequence[np.ndarray], mode: str, threads: int = 1) -> list[np.ndarray]:
    interp_mod = require("ai_edge_litert.interpreter")
    it = interp_mod.Interpreter(model_content=model, num_threads=threads,
                                experimental_op_resolver_type=getattr(interp_mod.OpResolverType, RESOLVER[mode]))
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], np.require(x, requirements="C"))
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def quantspec_run(op: str, inputs: Sequence[T | None], outputs: Sequence[T], options: Mapping[str, Any] | None,
                  feeds: Sequence[np.ndarray], mode: str, threads: int = 1) -> tuple[list[np.ndarray], str]:
    """quantspec's kernel for ``mode`` on the model's tensors: (outputs, engine)."""
    from quantspec.litert.kernels.modes import kernel_options, select

    ins = [spec(t) for t in inputs]
    outs = [spec(t) for t in outputs]
    opts = dict(options or {})
    kernel, engine = select(mode, op, ins, outs, opts)
    if engine != "reference":
        opts.update(kernel_options(op, threads))
    prepared = kernel.prepare(ins, outs, opts)
    it = iter(feeds)
    arrays = [None if t is None else (np.asarray(t.data) if t.data is not None else next(it)) for t in inputs]
    return kernel.compute(prepared, arrays), engine


def check_mode(op: str, inputs: Sequence[T | None], outputs: Sequence[T], options: Mapping[str, Any] | None,
               feeds: Sequence[np.ndarray], mode: str, version: int = 2, threads: int = 1) -> list[np.ndarray]:
    """Assert that LiteRT (resolver of ``mode``) and quantspec (kernel of ``mode``) give the same
    bytes; return LiteRT's outputs.  Records how many elements differ from BUILTIN_REF (SEEN)."""
    model = build(op, inputs, outputs, options, version)
    theirs = litert_run(model, feeds, mode, threads)
    ours, engine = quantspec_run(op, inputs, outputs, options, feeds, mode, threads)
    ENGINES[(op, mode, engine)] += 1
    assert len(ours) == len(theirs)
    for r, o in zip(theirs, ours):
        assert o.dtype == r.dtype and o.shape == r.shape, (op, mode, o.dtype, r.dtype, o.shape, r.shape)
        if o.tobytes() != r.tobytes():
            bad = np.flatnonzero(o.reshape(-1) != r.reshape(-1))
            raise AssertionError(f"{op} ({mode}, quantspec engine {engine}): {bad.size} of {r.size} differ; first at "
                                 f"{bad[:5]}: quantspec {o.reshape(-1)[bad[:5]]}, LiteRT {r.reshape(-1)[bad[:5]]}; "
                                 f"inputs {inputs}, outputs {outputs}, options {options}")
    s = SEEN.setdefault((op, mode), [0, 0, 0])
    s[0] += 1
    s[1] += sum(r.size for r in theirs)
    if mode != "reference":
        if _ref_ok(op, inputs, outputs, options, feeds):
            ref = litert_run(model, feeds, "reference")
            s[2] += sum(int(np.sum(a.reshape(-1) != b.reshape(-1))) if a.shape == b.shape else max(a.size, b.size)
                        for a, b in zip(ref, theirs))          # another shape: every element differs
        else:                       # BUILTIN_REF refuses (fails or aborts) a model this mode runs
            s[2] += 1
    return theirs


def _ref_ok(op, inputs, outputs, options, feeds) -> bool:
    """Whether LiteRT BUILTIN_REF can run the model on ``feeds`` (quantspec's reference kernel
    prepares and computes it; where it refuses, LiteRT aborts or fails, so the comparison with
    BUILTIN_REF is skipped)."""
    from quantspec.errors import QuantSpecError
    from quantspec.litert import OPS

    try:
        kernel = OPS[op]
        prepared = kernel.prepare([spec(t) for t in inputs], [spec(t) for t in outputs], dict(options or {}))
        it = iter(feeds)
        kernel.compute(prepared, [None if t is None else (np.asarray(t.data) if t.data is not None else next(it))
                                  for t in inputs])
    except QuantSpecError:
        return False
    return True


def differing(op: str, mode: str) -> int:
    """Elements where LiteRT's ``mode`` differed from BUILTIN_REF in the cases checked so far."""
    return SEEN.get((op, mode), [0, 0, 0])[2]


def int8(r: np.random.Generator, shape) -> np.ndarray:
    return r.integers(-128, 128, shape).astype(np.int8)


def pow2(r: np.random.Generator, lo: int, hi: int) -> float:
    """A power-of-two scale: products and ratios of such scales are exact, so requantized values
    fall exactly halfway between integers often (the corpus of ties)."""
    return float(2.0 ** int(r.integers(lo, hi + 1)))


def scale(r: np.random.Generator, lo: float = -3, hi: float = 0) -> float:
    return float(np.float32(10.0 ** r.uniform(lo, hi)))


def zero_point(r: np.random.Generator) -> int:
    return int(r.choice([-128, 127, 0, int(r.integers(-128, 128)), int(r.integers(-128, 128))]))
