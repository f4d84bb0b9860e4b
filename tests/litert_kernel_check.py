"""Run one single-op model in LiteRT BUILTIN_REF and through quantspec's kernel; compare bytes.

Test-only helper for the kernel conformance tests: the same :class:`litert_build.T` descriptions
become the flatbuffer model (run by the interpreter, the oracle) and quantspec
:class:`~quantspec.litert.kernels.TensorSpec`\\ s (run by the kernel).
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import numpy as np

from litert_build import T, build, run_ref

#: how many random cases each conformance test draws (QUANTSPEC_LITERT_CASES scales the default)
SCALE = float(os.environ.get("QUANTSPEC_LITERT_CASES", "1"))


def cases(default: int) -> range:
    return range(max(1, int(round(default * SCALE))))


def spec(t: T | None):
    from quantspec.dtypes import qtype
    from quantspec.litert.kernels import TensorSpec
    from quantspec.litert.params import QuantParams

    if t is None:
        return None
    qt = qtype(t.dtype)
    params = None if t.scale is None else QuantParams(t.scale, t.zero_point, t.quantized_dimension)
    data = None if t.data is None else np.asarray(t.data).astype(qt.dtype).reshape(tuple(t.shape))
    return TensorSpec(tuple(int(s) for s in t.shape), qt, params, data, t.name)


def run_quantspec(op: str, inputs: Sequence[T | None], outputs: Sequence[T], options: Mapping[str, Any] | None,
                  arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """quantspec's kernel on the model's tensors; ``arrays`` are the non-constant inputs in order."""
    from quantspec.litert.kernels import OPS

    it = iter(arrays)
    full = [None if t is None else (None if t.data is not None else next(it)) for t in inputs]
    kernel = OPS[op]
    prepared = kernel.prepare([spec(t) for t in inputs], [spec(t) for t in outputs], dict(options or {}))
    return kernel.compute(prepared, full)


def check(op: str, inputs: Sequence[T | None], outputs: Sequence[T], options: Mapping[str, Any] | None,
          arrays: Sequence[np.ndarray], version: int = 1) -> list[np.ndarray]:
    """Assert quantspec's outputs equal LiteRT BUILTIN_REF's byte for byte; return them."""
    model = build(op, inputs, outputs, options, version)
    want = run_ref(model, arrays)
    got = run_quantspec(op, inputs, outputs, options, arrays)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, f"output {i}: dtype {g.dtype} != LiteRT {w.dtype}"
        assert g.shape == w.shape, f"output {i}: shape {g.shape} != LiteRT {w.shape}"
        if g.tobytes() != w.tobytes():
            diff = np.argwhere(g != w)
            raise AssertionError(f"output {i}: {len(diff)} of {w.size} elements differ from LiteRT BUILTIN_REF; "
                                 f"first at {tuple(diff[0])}: quantspec {g[tuple(diff[0])]} vs LiteRT "
                                 f"{w[tuple(diff[0])]}")
    return got


def ref_fails(op: str, inputs, outputs, options, arrays, version: int = 1) -> str | None:
    """The interpreter's error message when it refuses the model, else None."""
    try:
        run_ref(build(op, inputs, outputs, options, version), arrays)
    except Exception as e:  # the interpreter raises RuntimeError / ValueError
        return str(e)
    return None
