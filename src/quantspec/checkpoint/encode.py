"""The unit of work: one slab of rows of one tensor, from its source bytes to its output bytes at their
final offsets.

:func:`run` is a pure function of its :class:`Task` (and the files): it reads the slab's source
bytes, hashes them, computes the outputs of those rows and writes each output's bytes at the
offset the plan gave it in the (temporary) shard file.  It returns a :class:`SlabResult`: the slab's
digest, its quantization error sums, and for the first phase of a per-tensor scheme the slab's
minimum and maximum.  Any worker of any backend can run any task in any order: nothing is shared but
the files, and no two tasks write the same bytes (packed outputs start each slab on a byte boundary).

The outputs come from the scheme's rules (:mod:`.rules`): on the fast path, the fused kernel of
:mod:`._jitted` that the parameter rule calls (:meth:`~.rules.ParamRule.fast`; per tensor, the codes
rule's :meth:`~.rules.CodesRule.fast_tensor`), the numpy path of :mod:`.reference` where the rule has
no kernel; on the reference path (the fast path off), the numpy path.  Nothing here depends on
which rule it is.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass

import numpy as np

from .._fastpath import jit
from .._semantics.packing import pack_codes, packed_size
from ..dtypes import qtype
from ..errors import RangeError
from . import digest as _digest
from . import reference, sources
from .layout import Entry
from .rules import Slab
from .schemes import SCHEMES, Scheme

__all__ = ["Task", "SlabResult", "run", "compute", "encode_rows", "placed", "tensor_params", "write_at", "close_file", "close_all",
           "digest", "add_error_sums"]

_KIND = {"float": 0, "float16": 1, "bfloat16": 2}
_SRC_DTYPE = {"float": np.float32, "float16": np.float16}
#: how the compressed-tensors layout stores a scale of each type: the kernels' ``sround``
_SROUND = {"bfloat16": 1, "float16": 2, "float": 3}


def _scale_store(e: Entry) -> str:
    """The numpy path's ``scale_type`` (:func:`quantspec.checkpoint.reference.stored_scale`)."""
    return ("ct:" + e.output("scale").type) if getattr(e.format, "ct_scales", False) else "float"


def _sround(e: Entry) -> int:
    """The kernels' ``sround`` for ``e``'s scale: 0 (as computed) unless its layout stores scales as
    compressed-tensors does."""
    return _SROUND.get(e.output("scale").type, 0) if getattr(e.format, "ct_scales", False) else 0


@dataclass(frozen=True)
class Task:
    """Rows ``[r0, r1)`` of plan entry ``entry``.  ``phase``: "stats" (the min and max of a per-tensor
    scheme's slab, and its digest), "encode" (compute and write; ``params``: a per-tensor scheme's
    (scale, zero point)), "copy" (a kept tensor) or "hash" (the digest only: checking a finished
    shard)."""

    entry: Entry
    r0: int
    r1: int
    phase: str
    target: str | None = None          # the shard file written
    params: tuple | None = None
    hash: bool = True                  # compute the slab's digest (a scanned tensor has it already)

    @property
    def nbytes(self) -> int:
        return (self.r1 - self.r0) * self.entry.source.row_bytes


@dataclass
class SlabResult:
    task: Task
    digest: bytes | None
    stats: np.ndarray | None = None    # [sum (x-dq)^2, sum x^2, max |x-dq|]
    minmax: tuple[float, float] | None = None


def add_error_sums(acc: np.ndarray, stats: np.ndarray) -> None:
    """Add a slab's error sums ``[sum (x-dq)^2, sum x^2, max |x-dq|]`` to a tensor's ``acc`` (slabs in
    plan order, so that convert and verify get the same bits)."""
    acc[0] += stats[0]
    acc[1] += stats[1]
    acc[2] = max(acc[2], stats[2])


def digest(pieces) -> str:
    """A tensor's digest from its slabs' hashes, in order (:mod:`.digest`)."""
    return _digest.combine(pieces)


# -- files written --------------------------------------------------------------------------------
_OUT: dict[str, int] = {}
_OUT_LOCK = threading.Lock()


def _out_fd(path: str) -> int:
    fd = _OUT.get(path)
    if fd is None:
        with _OUT_LOCK:
            fd = _OUT.get(path)
            if fd is None:
                fd = _OUT[path] = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    return fd


def close_file(path: str) -> None:
    """Close this process's descriptor of ``path`` (a finished shard)."""
    with _OUT_LOCK:
        fd = _OUT.pop(path, None)
    if fd is not None:
        os.close(fd)


def close_all() -> None:
    with _OUT_LOCK:
        for fd in _OUT.values():
            try:
                os.close(fd)
            except OSError:
                pass
        _OUT.clear()


def _libc_sync_file_range():
    """Linux's ``sync_file_range`` (through ctypes, which releases the GIL), or None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        f = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    f.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    f.restype = ctypes.c_int
    return f


_SYNC_FILE_RANGE = _libc_sync_file_range()
_SYNC_FILE_RANGE_WRITE = 2


def _start_writeback(fd: int, offset: int, nbytes: int) -> None:
    """Ask the system to start writing ``nbytes`` just written at ``offset`` to the disk, without
    waiting (``sync_file_range(..., SYNC_FILE_RANGE_WRITE)``): the shard's ``fsync`` at its end then
    finds little left to write, instead of a whole shard's bytes while the conversion waits.  Only a
    hint: where the call is missing or fails, the ``fsync`` does all the work, as before."""
    if _SYNC_FILE_RANGE is not None and nbytes:
        _SYNC_FILE_RANGE(fd, offset, nbytes, _SYNC_FILE_RANGE_WRITE)


def write_at(path: str, offset: int, data: np.ndarray) -> None:
    """Write ``data``'s bytes at ``offset`` of ``path`` (opened once per process)."""
    view = memoryview(np.ascontiguousarray(data).reshape(-1).view(np.uint8))
    done = 0
    own = sources.private()      # a cluster's task: the file is opened for this write only
    fd = -1
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)) if own else _out_fd(path)
        while done < len(view):
            done += os.pwrite(fd, view[done:], offset + done)
        _start_writeback(fd, offset, done)
        if own:
            f, fd = fd, -1
            os.close(f)          # on a network file system, close reports a failed write
    except OSError as e:   # a full disk, a quota, an I/O error: the shards finished before are kept
        from .writer import _write_error

        raise _write_error(e, "while writing a shard", path, "the shards finished before are kept") from None
    finally:
        if own and fd >= 0:
            os.close(fd)


# -- per-thread scratch buffers ---------------------------------------------------------------------
_LOCAL = threading.local()


def _scratch(name: str, n: int, dtype=np.uint8) -> np.ndarray:
    """A reusable buffer of at least ``n`` elements (its pages stay mapped between slabs)."""
    buf = getattr(_LOCAL, name, None)
    if buf is None or buf.size < n:
        buf = np.empty(max(n, 1), dtype)
        buf[:] = 0                                  # written once: its pages are real from now on
        setattr(_LOCAL, name, buf)
    return buf[:n]


# -- parameters of per-tensor schemes --------------------------------------------------------------
def tensor_params(entry: Entry, mn: float, mx: float) -> tuple[float, int]:
    """(scale, zero point) of a per-tensor scheme from the whole tensor's min and max."""
    scale, zp = reference.tensor_params(SCHEMES[entry.scheme], mn, mx, _scale_store(entry))
    return float(scale), zp


# -- one task ----------------------------------------------------------------------------------------
def run(task: Task) -> SlabResult:
    """Run one task (see :class:`Task`)."""
    e, t = task.entry, task.entry.source
    raw = sources.read_rows(t, task.r0, task.r1, _scratch("src", task.nbytes))
    h = _digest.piece(raw) if task.hash else None
    if task.phase == "hash":
        return SlabResult(task, h)
    if task.phase == "copy":
        write_at(task.target, e.outputs[0].offset + task.r0 * t.row_bytes, raw)
        return SlabResult(task, h)
    rows = task.r1 - task.r0
    cols = e.cols
    if task.phase == "stats":
        out = _minmax(raw, t.dtype, rows, cols)
        _check_finite(e, task, out[2])
        return SlabResult(task, h, minmax=(out[0], out[1]))
    stats, arrays = compute(task, raw)
    _check_finite(e, task, stats[3])
    _write(e, task, arrays)
    return SlabResult(task, h, stats=stats[:3].copy())


def compute(task: Task, raw: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The outputs of an "encode" task's rows from their source bytes ``raw``, not written: (error
    sums ``[sum (x-dq)^2, sum x^2, max |x-dq|, first row holding NaN or inf (-1: none)]``, role ->
    array as the kernels give it).  The arrays are this thread's scratch buffers: use them before
    the thread's next task."""
    e = task.entry
    rows, cols = task.r1 - task.r0, e.cols
    s = SCHEMES[e.scheme]
    if s.preset is not None:
        return encode_preset(s, e.source.dtype, raw, rows, cols, task.params)
    return _encode_fast(e, task, raw, rows, cols) if jit.enabled() else _encode_reference(e, task, raw, rows, cols)


def encode_preset(s: Scheme, dtype: str, raw: np.ndarray, rows: int, cols: int, params: tuple | None
                  ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """A compressed-tensors preset's outputs of a slab (:func:`quantspec.checkpoint.presets.encode_weight`,
    by role: codes, scale, zero_point, shape, global_scale) and its error sums against compressed-tensors'
    decompression; ``params``: ``(global scale,)`` for NVFP4.  The kernels of :mod:`._jitted_ct` when the
    fast path is on (:func:`_preset_fast`: the arrays are then this thread's scratch buffers, valid until
    its next call), else the numpy path (:mod:`.ctarith`)."""
    from . import ctarith

    if jit.enabled():
        fast = _preset_fast(s.preset, dtype, raw, rows, cols, params)
        if fast is not None:
            return fast
    x, stats = _finite_rows(raw, dtype, rows, cols)
    if stats[3] >= 0:
        return stats, {}
    p = s.preset
    g = np.float32(params[0]) if params else None
    if g is None and p.weights.strategy == "tensor_group":
        g = ctarith.global_scale(ctarith.absmax(x), dtype)    # the slab's own (encode_weight's), for dq too
    tensors, (c, scale, zp) = _presets().encode_weight(p, x, dtype, g, parts=True)
    dq = ctarith.dequantize(c, scale, zp, p.weights, dtype, g)
    x64 = x.astype(np.float64)
    d = x64 - dq.astype(np.float64)
    stats[:3] = (_ordered_sum(d * d), _ordered_sum(x64 * x64),
                 float(np.abs(x - dq).max()) if d.size else 0.0)
    roles = {"weight_packed": "codes", "weight": "codes", "weight_scale": "scale", "weight_zero_point": "zero_point",
             "weight_shape": "shape", "weight_global_scale": "global_scale"}
    return stats, {roles[k]: v for k, v in tensors.items()}


def _preset_fast(p, dtype: str, raw: np.ndarray, rows: int, cols: int, params: tuple | None
                 ) -> tuple[np.ndarray, dict[str, np.ndarray]] | None:
    """:func:`encode_preset` on the kernels of :mod:`._jitted_ct` (the same bytes and statistics as the
    numpy path), or None where they do not apply and the numpy path runs (and says what is wrong): no
    rows, fewer bytes than the rows hold, a shape the preset does not take, a big-endian machine, NVFP4
    with a global scale that is not finite and positive, or a case without a kernel (an asymmetric
    int-quantized preset; packed rows that are not whole int32 words: neither is in the table).  The
    outputs are this thread's scratch buffers (bytes, each a whole number of 8-byte words and 8 to
    spare), viewed as the stored types and shapes of :func:`quantspec.checkpoint.presets.encode_weight`."""
    import ml_dtypes

    from . import ctarith

    a = p.weights
    src = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)
    if (rows <= 0 or cols <= 0 or src.size < rows * cols * (4 if dtype == "float" else 2) or sys.byteorder != "little"
            or a.takes(rows, cols) is not None):
        return None
    tg = a.strategy == "tensor_group"
    if tg:
        g = np.float32(params[0]) if params else ctarith.global_scale(
            ctarith.absmax(_as_float32(raw, dtype, rows, cols)), dtype)
        if not (np.isfinite(g) and g > 0):
            return None
    if (p.format == "int-quantized" and not a.symmetric) or (p.format == "pack-quantized" and cols % 32):
        return None

    def buffer(name: str, nbytes: int, zero: bool = False) -> np.ndarray:
        b = _scratch(name, (nbytes + 7) // 8 * 8 + 8)
        if zero:
            b[:] = 0
        return b

    k = jit.load("quantspec.checkpoint._jitted_ct")
    kind = _KIND[dtype]
    wt = np.dtype(ctarith.WT[dtype])
    pr, pc = a.param_shape(rows, cols)
    stats = np.zeros(4)
    stats[3] = -1
    out: dict[str, np.ndarray] = {}
    if p.format in ("pack-quantized", "int-quantized"):
        packed = p.format == "pack-quantized"
        words = -(-cols * a.bits // 32)
        codes = buffer("ct_codes", rows * words * 4 if packed else rows * cols)
        scale = buffer("ct_scale", pr * pc * wt.itemsize)
        zr = -(-rows * a.bits // 32)
        zp = buffer("ct_zp", 0 if a.symmetric else zr * pc * 4, zero=True)
        k.INTS[kind](src, rows, cols, a.bits, cols if a.strategy == "channel" else a.group, a.symmetric, packed,
                     codes, scale, zp, stats)
        if packed:
            out["codes"] = codes[:rows * words * 4].view(np.int32).reshape(rows, words)
        else:
            out["codes"] = codes[:rows * cols].view(np.int8).reshape(rows, cols)
        out["scale"] = scale[:pr * pc * wt.itemsize].view(wt).reshape(pr, pc)
        if not a.symmetric:
            out["zero_point"] = zp[:zr * pc * 4].view(np.int32).reshape(zr, pc)
        if packed:
            out["shape"] = np.array([rows, cols], np.int64)
    elif p.format == "float-quantized":
        bh, bw = (1, cols) if a.strategy == "channel" else a.block
        codes = buffer("ct_codes", rows * cols)
        scale = buffer("ct_scale", pr * pc * wt.itemsize)
        k.FP8[kind](src, rows, cols, bh, bw, codes, scale, stats)
        out["codes"] = codes[:rows * cols].view(ml_dtypes.float8_e4m3fn).reshape(rows, cols)
        out["scale"] = scale[:pr * pc * wt.itemsize].view(wt).reshape(pr, pc)
    elif p.format in ("nvfp4-pack-quantized", "mxfp4-pack-quantized"):
        codes = buffer("ct_codes", rows * cols // 2)
        scale = buffer("ct_scale", pr * pc)
        k.FP4[kind](src, rows, cols, not tg, float(g) if tg else 1.0, codes, scale, stats)
        out["codes"] = codes[:rows * cols // 2].reshape(rows, cols // 2)
        out["scale"] = scale[:pr * pc].view(ml_dtypes.float8_e4m3fn if tg else np.uint8).reshape(pr, pc)
        if tg:
            out["global_scale"] = np.array([g], np.float32)
    else:                                            # pragma: no cover - the table's formats
        return None
    if stats[3] >= 0:
        stats[:3] = 0
        return stats, {}
    return stats, out


def _presets():
    from . import presets

    return presets


def _check_finite(e: Entry, task: Task, bad: float) -> None:
    if bad >= 0:
        r = task.r0 + int(bad)
        raise RangeError("src", f"tensor {e.source.name!r} holds NaN or infinity (row {r}); quantization "
                         "parameters cannot be chosen from it", e.source.path,
                         detail="nothing was written; fix or keep the tensor (a recipe rule with scheme 'keep')")


def _jitted():
    """The kernel module (:func:`quantspec._fastpath.jit.load` imports its module once; a thread that asks while
    another imports it waits for the import to finish)."""
    return jit.load("quantspec.checkpoint._jitted")


def _minmax(raw: np.ndarray, dtype: str, rows: int, cols: int) -> np.ndarray:
    out = np.zeros(3)
    if jit.enabled():
        _jitted().minmax(raw, _KIND[dtype], rows, cols, out, _scratch("row", cols, np.float32))
        return out
    x = _as_float32(raw, dtype, rows, cols)
    finite = np.isfinite(x).all(axis=1)
    if not finite.all():
        out[2] = int(np.argmin(finite))
        return out
    out[:] = x.min(), x.max(), -1
    return out


def _finite_rows(raw: np.ndarray, dtype: str, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference path's float32 rows of a slab and its zeroed error sums, whose last entry is the
    first row holding NaN or infinity (-1: none)."""
    x = _as_float32(raw, dtype, rows, cols)
    stats = np.zeros(4)
    stats[3] = -1
    finite = np.isfinite(x).all(axis=1)
    if not finite.all():
        stats[3] = int(np.argmin(finite))
    return x, stats


def _as_float32(raw: np.ndarray, dtype: str, rows: int, cols: int) -> np.ndarray:
    """The reference path's float32 rows of a slab (exact)."""
    if dtype == "bfloat16":
        return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(rows, cols)
    return raw.view(_SRC_DTYPE[dtype]).astype(np.float32).reshape(rows, cols)


def _positions(e: Entry, r0: int) -> dict[str, int]:
    """Byte offset, within each output tensor, of row ``r0``'s first element."""
    s = SCHEMES[e.scheme]
    cols = e.cols
    codes = e.output("codes")
    out = {"codes": r0 * cols * codes.bits // 8}
    scale = e.output("scale")
    per_row = 0 if s.granularity == "tensor" else 1 if s.granularity == "channel" else -(-cols // s.block)
    out["scale"] = r0 * per_row * qtype(scale.type).dtype.itemsize
    zp = e.output("zero_point")
    if zp is not None:
        out["zero_point"] = r0 * per_row * zp.bits // 8
    return out


def placed(e: Entry, r0: int, r1: int, arrays: dict[str, np.ndarray]) -> list[tuple[str, int, np.ndarray]]:
    """(role, offset in the file, data) of each output of rows ``[r0, r1)`` (offsets from the
    plan's; relative to each output's start when its ``offset`` is 0)."""
    if e.format is not None:                        # a layout that places its bytes itself
        return e.format.place(e, r0, r1, arrays)
    pos = _positions(e, r0)
    out = []
    for role, data in arrays.items():
        o = e.output(role)
        if role == "scale" and SCHEMES[e.scheme].granularity == "tensor" and r0 != 0:
            continue                                # the per-tensor scale: written once, by the first slab
        out.append((role, o.offset + pos[role], data))
    return out


def _write(e: Entry, task: Task, arrays: dict[str, np.ndarray]) -> None:
    for _, offset, data in placed(e, task.r0, task.r1, arrays):
        write_at(task.target, offset, data)


def encode_rows(s: Scheme, dtype: str, raw: np.ndarray, rows: int, cols: int, params: tuple | None = None, *,
                name: str = "", path: str = "") -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The outputs of ``rows`` rows of one tensor under scheme ``s``, free of any plan or file: ``raw``
    holds the rows' bytes (``dtype``: float, float16 or bfloat16; ``[rows, cols]``, row-major);
    ``params``: a per-tensor scheme's (scale, zero point).  Returns ``(outputs, stats)``: ``outputs``
    maps codes / scale / zero_point to their stored bytes (sub-byte types packed from the slab's first
    element; this thread's scratch buffers, valid until its next call; float32 scales) and ``stats`` is
    [sum (x-dq)^2, sum x^2, max |x-dq|, first row holding NaN or infinity or -1] (then ``outputs`` is
    empty).  ``name`` and ``path`` name the tensor in errors.  The fast kernels, or the reference path
    when the fast path is off."""
    if s.preset is not None:
        stats, outputs = encode_preset(s, dtype, raw, rows, cols, params)
        return outputs, stats
    impl = _fast_outputs if jit.enabled() else _reference_outputs
    stats, outputs = impl(s, dtype, raw, rows, cols, params, name, path, 0, "float")
    return outputs, stats


def _encode_fast(e: Entry, task: Task, raw: np.ndarray, rows: int, cols: int) -> tuple[np.ndarray, dict]:
    return _fast_outputs(SCHEMES[e.scheme], e.source.dtype, raw, rows, cols, task.params, e.source.name,
                         e.source.path, _sround(e), _scale_store(e))


def _fast_outputs(s: Scheme, dtype: str, raw: np.ndarray, rows: int, cols: int, params, name: str, path: str,
                  sround: int, scale_store: str) -> tuple[np.ndarray, dict]:
    """The fast path: the kernel of the scheme's parameter rule (per tensor: of its codes rule, given
    the tensor's parameters), or, for a rule without one, the numpy path."""
    t = qtype(s.codes)
    n = rows * cols
    stats = np.zeros(4)
    stats[3] = -1
    nbytes = packed_size(n, t.bits) if t.bits < 8 else n
    codes = _scratch("codes", nbytes)
    if t.bits < 8:
        codes[:] = 0
    slab = Slab(_jitted(), raw, _KIND[dtype], rows, cols, sround, t, _float_format(t), codes, stats,
                _scratch("row", cols, np.float32), _scratch("dq", cols, np.float32), _scratch("cbuf", cols), _scratch)
    if s.granularity == "tensor":
        out = s.codes_rule.fast_tensor(s, slab, *params)
    else:
        out = s.param_rule.fast(s, slab)
    if out is None:                                 # no kernel for this rule: the numpy path
        return _reference_outputs(s, dtype, raw, rows, cols, params, name, path, sround, scale_store)
    if stats[3] >= 0:
        return stats, {}
    s.param_rule.check_scale(out["scale"], name, path)
    return stats, {"codes": codes, **out}


_FORMATS: dict = {}


def _float_format(t):
    """The narrow-float record of a codes type: saturating, as ONNX QuantizeLinear (a placeholder for
    integer codes, which do not read it)."""
    hit = _FORMATS.get(t.name)
    if hit is None:
        from ..onnx.fast import float_format

        hit = _FORMATS[t.name] = float_format(t if t.is_float else qtype("float8e4m3fn"), True, "spec")
    return hit


def _encode_reference(e: Entry, task: Task, raw: np.ndarray, rows: int, cols: int) -> tuple[np.ndarray, dict]:
    return _reference_outputs(SCHEMES[e.scheme], e.source.dtype, raw, rows, cols, task.params, e.source.name,
                              e.source.path, _sround(e), _scale_store(e))


STATS_LANES = 64


def _ordered_sum(a: np.ndarray) -> float:
    """The sum of the float64 ``a`` [rows, cols] in the statistics' fixed order, the same in every
    path (the fast kernels' ``_err``): in each row element ``j`` goes to lane ``j % 64`` (each lane
    summed in element order from +0), the lanes are combined pairwise (lane ``k`` = lane ``2k`` +
    lane ``2k+1``, 64 -> 32 -> ... -> 1) and the rows are added in order from +0.  (Sums of squares:
    the zeros that pad a row's last group change nothing.)"""
    rows, cols = a.shape
    if rows == 0:
        return 0.0
    groups = -(-cols // STATS_LANES)
    padded = np.zeros((rows, max(groups, 1) * STATS_LANES))
    padded[:, :cols] = a
    lane = np.add.accumulate(padded.reshape(rows, -1, STATS_LANES), axis=1)[:, -1, :]
    while lane.shape[1] > 1:
        lane = lane[:, 0::2] + lane[:, 1::2]
    return float(np.add.accumulate(lane[:, 0])[-1])


def _reference_outputs(s: Scheme, dtype: str, raw: np.ndarray, rows: int, cols: int, params, name: str, path: str,
                       sround: int, scale_store: str) -> tuple[np.ndarray, dict]:
    x, stats = _finite_rows(raw, dtype, rows, cols)
    if stats[3] >= 0:
        return stats, {}
    codes, scale, zp = reference.encode(s, x, params, scale_store)
    s.param_rule.check_scale(scale, name, path)
    dq = reference.dequantize(s, codes, scale, zp)
    x64 = x.astype(np.float64)
    d = x64 - dq.astype(np.float64)
    stats[:3] = _ordered_sum(d * d), _ordered_sum(x64 * x64), float(np.abs(x - dq.astype(np.float32)).max()) if d.size else 0.0
    t = qtype(s.codes)
    scale_type = s.scale_type if scale_store == "float" else scale_store[len("ct:"):]
    out = {"codes": _bytes(codes, t), "scale": _bytes(scale, qtype(scale_type))}
    if zp is not None:
        out["zero_point"] = _bytes(zp, t)
    return stats, out


def _bytes(a: np.ndarray, t) -> np.ndarray:
    """The stored bytes of an unpacked array of type ``t``: packed for sub-byte types."""
    a = np.ascontiguousarray(a)
    if t.is_packed:
        return np.frombuffer(pack_codes(a.reshape(-1).view(np.uint8), t.bits), np.uint8)
    if a.dtype != t.dtype:
        a = a.astype(t.dtype)
    return a.reshape(-1).view(np.uint8)
