"""``verify(src, dst, rule="compressed-tensors")``: is a compressed-tensors checkpoint what
compressed-tensors' own arithmetic makes of its float source?

For a checkpoint made by llm-compressor (``model_free_ptq``, or ``oneshot`` with a data-free scheme)
or by ``quantspec convert --scheme PRESET``: each config group of ``config.json``'s
``quantization_config`` gives the weight arguments (:class:`quantspec.checkpoint.ctarith.Args`) and
the format; each module whose quantization parameters are stored is recomputed from the source's
weight by :func:`quantspec.checkpoint.presets.encode_weight` (NVFP4's global scale over the module's
fused set, as the tool shares it), and every stored tensor of the module is compared byte for byte:
codes (unpacked, so that a difference is named by its row and column), scales, zero points, global
scales, ``weight_shape``.  Every other tensor must equal the source's tensor of the same name
(type, shape, bytes).  A source tensor with no counterpart, or a stored one with no source, is a
difference too.

The work is one tensor at a time (a quantized weight is held whole, as the tool holds it), on this
machine's threads.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import ml_dtypes
import numpy as np

from ..errors import TensorFileError
from . import ctarith as ar
from . import sources
from .presets import Preset, codes_of, fused_key, group_preset
from .reader import QuantizedCheckpoint, config_group_of
from .report import Difference, TensorCheck, VerifyReport

__all__ = ["verify_ct", "RULE"]

RULE = "compressed-tensors"
_PARAMS = ("weight_packed", "weight", "weight_scale", "weight_zero_point", "weight_shape", "weight_global_scale")
_NP = {"BF16": ml_dtypes.bfloat16, "F16": np.float16, "F32": np.float32, "F64": np.float64, "I8": np.int8,
       "U8": np.uint8, "I16": np.int16, "U16": np.uint16, "I32": np.int32, "U32": np.uint32, "I64": np.int64,
       "U64": np.uint64, "F8_E4M3": ml_dtypes.float8_e4m3fn, "F8_E5M2": ml_dtypes.float8_e5m2, "BOOL": np.bool_}
_WT = {"bfloat16": "BF16", "float16": "F16", "float": "F32"}
POSITIONS = 8


class _Modules:
    """The quantized modules of ``dst`` and the preset of each (config groups by target; ``Linear`` and
    other class targets take every module no group names and ``ignore`` leaves out)."""

    def __init__(self, ck: QuantizedCheckpoint):
        where = str(Path(ck.path) / "config.json")
        try:
            config = json.loads(Path(where).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise TensorFileError("dst", "has no readable config.json", where, detail=str(e)) from None
        q = config.get("quantization_config") if isinstance(config, dict) else None
        if not isinstance(q, dict) or not isinstance(q.get("config_groups"), dict):
            raise TensorFileError("dst", "has no compressed-tensors quantization_config in config.json", where)
        self.groups = [(g.get("targets") or [], group_preset(g, q.get("format"), where))
                       for g in q["config_groups"].values() if isinstance(g, dict)]
        self.ignore = [i for i in q.get("ignore") or [] if isinstance(i, str)]
        names = set(ck._where)
        self.modules: dict[str, Preset] = {}
        for n in names:
            m, _, p = n.rpartition(".")
            if p == "weight_scale" and (m + ".weight" in names or m + ".weight_packed" in names):
                self.modules[m] = self._preset(m, where)

    def _preset(self, m: str, where: str) -> Preset:
        p = config_group_of(m, self.groups, self.ignore)
        if p is None:
            raise TensorFileError("dst", f"stores quantization parameters for module {m!r}, which no config group "
                                  "names", where)
        return p


def _stored(ck: QuantizedCheckpoint, name: str) -> tuple[str, tuple[int, ...], np.ndarray]:
    """(safetensors dtype, shape, bytes) of a stored tensor of ``dst``."""
    t = ck._tensor(name)
    raw = sources.read_rows(t, 0, t.rows) if t.rows else np.zeros(0, np.uint8)
    from .reader import _stored_code

    return _stored_code(t), tuple(t.shape), np.ascontiguousarray(raw).reshape(-1).view(np.uint8)


def _as_array(dtype: str, shape, raw: np.ndarray) -> np.ndarray:
    return raw.view(_NP.get(dtype, np.uint8)).reshape(shape) if dtype in _NP else raw


def _diffs(want: np.ndarray, got: np.ndarray, x: np.ndarray | None, shape) -> tuple[int, float, list]:
    """(count, largest difference, first positions) of two arrays of one shape, compared by value bits."""
    w = np.asarray(want)
    g = np.asarray(got)
    if w.dtype.kind == "f":
        diff = w.view(np.uint32 if w.dtype.itemsize == 4 else np.uint16 if w.dtype.itemsize == 2 else np.uint8) != \
            g.astype(w.dtype).view(np.uint32 if w.dtype.itemsize == 4 else np.uint16 if w.dtype.itemsize == 2
                                   else np.uint8)
    else:
        diff = w != g
    n = int(np.count_nonzero(diff))
    if not n:
        return 0, 0.0, []
    with np.errstate(invalid="ignore", over="ignore"):
        gap = np.abs(w.astype(np.float64) - g.astype(np.float64))
    big = float(np.nanmax(np.where(diff, gap, 0))) if gap.size else 0.0
    pos = []
    for i in np.flatnonzero(diff)[:POSITIONS]:
        idx = tuple(int(v) for v in np.unravel_index(int(i), shape))
        xi = float(x.reshape(-1)[i]) if x is not None else None
        pos.append(Difference(idx, xi, _num(w.reshape(-1)[i]), _num(g.reshape(-1)[i])))
    return n, big, pos


def _num(v) -> float | int:
    v = np.asarray(v)
    return int(v) if v.dtype.kind in "iub" else float(v.astype(np.float64))


def _check_module(ck, source_tensor: sources.SourceTensor, m: str, p: Preset, g: np.float32 | None,
                  stored_names: set[str]) -> TensorCheck:
    name = m + ".weight"
    tc = TensorCheck(name, p.name)
    t = source_tensor
    if len(t.shape) != 2 or t.dtype not in ("bfloat16", "float16", "float"):
        tc.status = "different"
        tc.other.append(f"the source tensor is {t.dtype} {list(t.shape)}, not a 2-D float weight")
        return tc
    rows, cols = t.shape
    raw = sources.read_rows(t, 0, rows)
    from .encode import _as_float32

    x = _as_float32(raw, t.dtype, rows, cols)
    tc.elements = rows * cols
    if not np.isfinite(x).all():
        tc.status = "different"
        tc.other.append(f"the source holds NaN or infinity (row {int(np.argmin(np.isfinite(x).all(axis=1)))})")
        return tc
    why = p.weights.takes(rows, cols)
    if why is not None:
        tc.status = "different"
        tc.other.append(f"compressed-tensors cannot quantize this weight: {why}")
        return tc
    expected, (c, _, _) = _encode(p, x, t.dtype, g)
    for suffix, want in expected.items():
        sname = f"{m}.{suffix}"
        if sname not in stored_names:
            tc.other.append(f"{suffix}: not stored")
            continue
        dtype, shape, got = _stored(ck, sname)
        want_dtype = _dtype_code(want)
        if dtype != want_dtype or tuple(shape) != tuple(want.shape):
            tc.other.append(f"{suffix}: stored as {dtype} {list(shape)}, compressed-tensors writes {want_dtype} "
                            f"{list(want.shape)}")
            continue
        wb = np.ascontiguousarray(want).reshape(-1).view(np.uint8)
        if np.array_equal(wb, got):
            continue
        garr = _as_array(dtype, shape, got)
        if suffix in ("weight_packed", "weight"):
            tc.differing, tc.max_code_diff, tc.positions = _diffs(codes_of(p, want, rows, cols),
                                                                  codes_of(p, garr, rows, cols), x, (rows, cols))
        elif suffix == "weight_scale":
            w32, g32 = (want, garr) if want.dtype == np.uint8 else (want.astype(np.float32), garr.astype(np.float32))
            tc.scale_differing, tc.scale_positions = _diffs(w32, g32, None, want.shape)[::2]
        elif suffix == "weight_zero_point":
            tc.zero_point_differing, tc.zero_point_positions = _diffs(want, garr, None, want.shape)[::2]
        else:
            tc.other.append(f"{suffix} differs: compressed-tensors writes {want.reshape(-1).tolist()}, stored "
                            f"{garr.reshape(-1).tolist()}")
    extra = sorted(f"{m}.{s}" for s in _PARAMS if f"{m}.{s}" in stored_names and s not in expected)
    if extra:
        tc.other.append("stored beside what compressed-tensors writes: " + ", ".join(extra))
    tc.status = "identical" if tc.ok_values else "different"
    return tc


def _dtype_code(a: np.ndarray) -> str:
    for code, t in _NP.items():
        if a.dtype == np.dtype(t):
            return code
    return "U8"


def _encode(p: Preset, x: np.ndarray, wt: str, g):
    from .presets import encode_weight

    return encode_weight(p, x, wt, g, parts=True)


def _check_kept(ck, t: sources.SourceTensor | None, name: str, stored_names: set[str]) -> TensorCheck:
    tc = TensorCheck(name, "keep")
    if t is None:
        tc.status = "missing in SRC"
        return tc
    if name not in stored_names:
        tc.status = "missing in DST"
        return tc
    dtype, shape, got = _stored(ck, name)
    from .reader import _stored_code

    want_dtype = _stored_code(t)
    raw = np.ascontiguousarray(sources.read_rows(t, 0, t.rows)).reshape(-1).view(np.uint8) if t.rows else \
        np.zeros(0, np.uint8)
    tc.elements = int(np.prod(t.shape)) if t.shape else 1
    if dtype != want_dtype or tuple(shape) != tuple(t.shape):
        tc.other.append(f"stored as {dtype} {list(shape)}; the source is {want_dtype} {list(t.shape)}")
    elif not np.array_equal(raw, got):
        item = max(1, t.itemsize)
        a, b = raw.reshape(-1, item), got.reshape(-1, item)
        diff = (a != b).any(axis=1)
        tc.differing = int(diff.sum())
        for i in np.flatnonzero(diff)[:POSITIONS]:
            idx = tuple(int(v) for v in np.unravel_index(int(i), t.shape)) if t.shape else ()
            tc.positions.append(Difference(idx, None, _num(_as_array(want_dtype, (-1,), a[i])[0]),
                                           _num(_as_array(dtype, (-1,), b[i])[0])))
    tc.status = "identical" if tc.ok_values else "different"
    return tc


def verify_ct(src, dst, *, threads: int | None = None) -> VerifyReport:
    """Verify the compressed-tensors checkpoint ``dst`` against ``src`` by compressed-tensors' arithmetic
    (module docstring).  ``src`` and ``dst``: local paths."""
    import os

    start = time.perf_counter()
    ck = QuantizedCheckpoint(dst)
    mods = _Modules(ck)
    source = sources.discover(src)
    by_name = {t.name: t for t in source.tensors}
    stored_names = set(ck._where)
    report = VerifyReport(str(src), str(dst), False, "compressed-tensors")
    report.rule = RULE
    # NVFP4: one global scale per fused set of the modules quantized under a tensor_group preset
    tg = {m: p for m, p in mods.modules.items() if p.weights.strategy == "tensor_group"}
    sets: dict[str, list[str]] = {}
    wnames = {m + ".weight" for m in tg}
    for m, p in tg.items():
        key = fused_key(m + ".weight", wnames)
        sets.setdefault(f"{p.name}:{key or m}", []).append(m)
    gscale: dict[str, np.float32] = {}
    for members in sets.values():
        ts = [by_name.get(m + ".weight") for m in members]
        if any(t is None or len(t.shape) != 2 for t in ts):
            continue
        amax = 0.0
        for t in ts:
            x = sources.read_rows(t, 0, t.rows)
            from .encode import _as_float32

            v = _as_float32(x, t.dtype, t.shape[0], t.shape[1])
            amax = max(amax, float(ar.absmax(v)))
        for m, t in zip(members, ts):
            gscale[m] = ar.global_scale(amax, t.dtype)

    jobs = []
    covered: set[str] = set()
    for m, p in sorted(mods.modules.items()):
        covered.update(f"{m}.{s}" for s in _PARAMS)
        t = by_name.get(m + ".weight")
        if t is None:
            jobs.append(("missing", m + ".weight"))
        else:
            jobs.append(("module", m, p, t))
    for n in sorted(stored_names - covered):
        jobs.append(("kept", n))
    for n in sorted(set(by_name) - stored_names - {m + ".weight" for m in mods.modules}):
        jobs.append(("kept", n))

    def run(job):
        if job[0] == "missing":
            tc = TensorCheck(job[1], "?")
            tc.status = "missing in SRC"
            return tc
        if job[0] == "module":
            _, m, p, t = job
            return _check_module(ck, t, m, p, gscale.get(m), stored_names)
        return _check_kept(ck, by_name.get(job[1]), job[1], stored_names)

    try:
        with ThreadPoolExecutor(threads or min(4, os.cpu_count() or 1)) as ex:
            report.tensors = list(ex.map(run, jobs))
    finally:
        sources.close_all()
    report.seconds = time.perf_counter() - start
    return report
