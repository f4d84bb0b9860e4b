"""``quantspec.equivalent(a, b, inputs="float32")``: run two quantizers on every input of a type and
count the inputs where they differ.

The input domain is enumerated, never stored: a chunk of bit patterns at a time (``chunk``
elements, 1 Mi by default: the chunk, its two outputs and their comparison stay in the last-level
cache) is written by a numba kernel into a reused buffer, viewed as the domain's type, converted
where a quantizer takes another type (float16 and bfloat16 widen exactly to float32), run through
each quantizer's own public function with a preallocated ``out=`` (no arithmetic is written here
for either quantizer), and the two outputs are compared by one fused reduction
(:mod:`quantspec.equiv._jitted`).

Domains: ``"float32"`` (all 2^32 bit patterns), ``"float16"`` and ``"bfloat16"`` (all 2^16), or an
array of inputs.  For two dequantizers the inputs are their codes: every code of their type (or an
array of codes).  ``subrange=(start, stop)`` restricts an enumerated domain to the bit patterns
``start <= bits < stop``.  Per-axis records are compared channel by channel (a per-tensor record
against every channel of a per-axis one).

Simulated quantizers (FakeQuant, QuantizeAndDequantize) run on the TensorFlow spec's fused kernels, on
quantspec's thread pool, as the quantize and dequantize operators do (the record's ``fast``); where the
fast path is off or does not cover them, on numpy, their chunk split over quantspec's thread count.
Timings: docs/translate.md and ``quantspec bench``.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import numpy as np

from .._fastpath import jit, pool
from .._semantics.oprecord import QuantizerRecord
from ..errors import DTypeError, InvalidArgumentError, RangeError, ShapeError, UnsupportedError
from .report import ChannelReport, EquivalenceReport, Example

__all__ = ["equivalent", "DOMAINS", "CHUNK", "code_offset", "decoder", "run_record"]

#: enumerated domains: name -> (dtype, unsigned dtype of the bit patterns, bits)
DOMAINS = {
    "float32": (np.dtype(np.float32), np.dtype(np.uint32), 32),
    "float16": (np.dtype(np.float16), np.dtype(np.uint16), 16),
    "bfloat16": (np.dtype(ml_dtypes.bfloat16), np.dtype(np.uint16), 16),
}
_ALIASES = {"float": "float32", "f32": "float32", "half": "float16", "f16": "float16", "bf16": "bfloat16"}
#: elements per chunk
CHUNK = 1 << 20
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _jitted():
    if not jit.numba_available():
        raise UnsupportedError("numba", "is needed by quantspec.equiv's enumeration and comparison kernels "
                               "(pip install 'quantspec[fast]')", None)
    return jit.load("quantspec.equiv._jitted")


def code_offset(a, b) -> int:
    """What is added to ``a``'s codes to compare them with ``b``'s: the shift between two code types
    of one width that differ in signedness (uint8 -> int8: -128), else 0."""
    ta, tb = a.code_type, b.code_type
    if ta.is_int and tb.is_int and ta.bits == tb.bits and ta.signed != tb.signed:
        return int(tb.qmin) - int(ta.qmin)
    return 0


def decoder(op, offset: int = 0) -> tuple[int, float, int]:
    """``(mode, step, zero)`` of :func:`quantspec.equiv._jitted.compare_codes` for ``op``'s outputs."""
    if op.kind == "fake":
        step, zero = op.decode()
        return 1, float(step), int(zero) + offset
    return 0, 1.0, offset


def _pool() -> ThreadPoolExecutor:
    """The threads of :func:`run_record` (as many as quantspec's thread count when first used; more
    parts than threads queue)."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(pool.threads(), thread_name_prefix="quantspec-equiv")
    return _POOL


_POOL = None


def run_record(op, x: np.ndarray, out: np.ndarray) -> None:
    """``op.run(x, out)``; a simulated quantizer on numpy (which releases the GIL) split over the
    threads quantspec uses (``QUANTSPEC_NUM_THREADS``, else the cores), a part of at least 64 Ki
    inputs each."""
    n = x.size
    parts = min(pool.threads(), n >> 16)
    if op.kind != "fake" or parts < 2 or getattr(op, "fast", False):
        op.run(x, out)
        return
    cuts = [n * k // parts for k in range(parts + 1)]
    futures = [_pool().submit(op.run, x[a:b], out[a:b]) for a, b in zip(cuts, cuts[1:])]
    for f in futures:
        f.result()


def _check_record(op, name: str):
    if not isinstance(op, QuantizerRecord):
        raise DTypeError(name, "must be a quantizer record (quantspec.tf.QuantizeV2Op, "
                         "quantspec.onnx.QuantizeLinearOp, quantspec.litert.QuantizeOp, ...; quantspec.equiv.parse() reads one from a spec string)",
                         type(op).__name__)
    return op


def _domain(inputs, a, b):
    """(name, dtype, unsigned dtype, bits) of an enumerated domain, or (name, array) for given inputs."""
    codes = a.kind == "dequantize"
    if isinstance(inputs, str):
        name = _ALIASES.get(inputs.strip().lower(), inputs.strip().lower())
        if codes:
            if name not in ("codes", "float32"):
                raise InvalidArgumentError("inputs", "must be 'codes' or an array of codes for two dequantizers",
                                           inputs)
            t = a.code_type
            dt = np.dtype(t.storage)
            if dt.itemsize <= 2:         # every code, as an array of the dequantizers' input type
                codes_all = np.arange(int(t.qmin), int(t.qmax) + 1, dtype=np.int64).astype(a.input_dtype)
                return f"codes:{t.name}", codes_all
            return f"codes:{t.name}", dt, np.dtype(_UINT[dt.itemsize]), dt.itemsize * 8
        if name not in DOMAINS:
            raise InvalidArgumentError("inputs", "must be 'float32', 'float16', 'bfloat16' or an array of inputs",
                                       inputs)
        dt, ut, bits = DOMAINS[name]
        return name, dt, ut, bits
    if isinstance(inputs, (bool, np.bool_)) or inputs is None:
        raise InvalidArgumentError("inputs", "must be 'float32', 'float16', 'bfloat16' or an array of inputs", inputs)
    arr = np.asarray(inputs)
    if codes:
        if arr.dtype != a.input_dtype:
            raise DTypeError("inputs", f"must be codes of the dequantizers' type ({a.code_type.name})", str(arr.dtype))
    elif arr.dtype not in (d for d, _, _ in DOMAINS.values()):
        raise DTypeError("inputs", "must be a float32, float16 or bfloat16 array", str(arr.dtype))
    arr = np.ascontiguousarray(arr).reshape(-1)
    return "array", arr


def _converter(domain_dtype: np.dtype, op, argument: str):
    """How a chunk of the domain becomes the op's input: None (the same type) or a conversion."""
    want = np.dtype(op.input_dtype)
    if want == domain_dtype:
        return None
    if want == np.dtype(np.float32) and domain_dtype in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
        return want
    raise DTypeError(argument, f"takes {want} inputs, which the {domain_dtype} domain does not convert to exactly "
                     "(float16 and bfloat16 widen to float32; not the other way)", str(want))


def _view_codes(y: np.ndarray, op) -> np.ndarray:
    t = op.code_type
    if y.dtype.kind in "iu":
        return y
    return y.view(t.storage) if y.dtype.itemsize == np.dtype(t.storage).itemsize else y


def _channel_pairs(a, b):
    ca, cb = a.channels, b.channels
    if ca == cb:
        return [(c, a.channel(c), b.channel(c)) for c in range(ca)]
    if ca == 1:
        return [(c, a, b.channel(c)) for c in range(cb)]
    if cb == 1:
        return [(c, a.channel(c), b) for c in range(ca)]
    raise ShapeError("b", f"must have one channel or as many as a ({ca})", cb)


def equivalent(a, b, inputs="float32", *, subrange: tuple[int, int] | None = None, examples: int = 8,
               keep: int = 100_000, chunk: int = CHUNK) -> EquivalenceReport:
    """Compare the quantizers ``a`` and ``b`` (quantizer records of any spec) on every input of
    ``inputs``: ``"float32"`` (all 2^32 bit patterns), ``"float16"`` or ``"bfloat16"`` (all 2^16), or an
    array; for two dequantizers, every code of their type.

    Returns an :class:`~quantspec.equiv.report.EquivalenceReport`: how many inputs give different
    codes, split into finite inside the range, finite outside it, and inf/NaN; the largest code
    difference; the first ``examples`` differing inputs with both codes; and the bit patterns of up
    to ``keep`` differing inputs.  ``subrange=(start, stop)``: only the bit patterns in [start, stop)
    of an enumerated domain.  Codes of two types that differ only in signedness (uint8 and int8) are
    compared after shifting ``a``'s by the difference of their lowest codes."""
    _check_record(a, "a")
    _check_record(b, "b")
    if (a.kind == "dequantize") != (b.kind == "dequantize"):
        raise UnsupportedError("b", "must be of a's kind: two quantizers (or simulated quantizers), or two "
                               "dequantizers", f"{a.spec}:{a.op} against {b.spec}:{b.op}")
    if a.kind == "dequantize" and np.dtype(a.input_dtype) != np.dtype(b.input_dtype):
        raise DTypeError("b", f"must take a's codes ({a.code_type.name}) to be compared on them", b.code_type.name)
    for name, v in (("examples", examples), ("keep", keep), ("chunk", chunk)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < (1 if name == "chunk" else 0):
            raise InvalidArgumentError(name, "must be a non-negative integer" if name != "chunk"
                                       else "must be a positive integer", v)
    dom = _domain(inputs, a, b)
    pairs = _channel_pairs(a, b)
    values = a.kind == "dequantize"
    offset = 0 if values else code_offset(a, b)
    for _, ac, bc in pairs:          # decoders and ranges exist (a simulated quantizer needs a grid)
        if not values:
            decoder(ac)
            decoder(bc)
            ac.real_range()
            bc.real_range()
    if len(dom) == 2:
        name, arr = dom
        total_per = arr.size
        if subrange is not None:
            raise InvalidArgumentError("subrange", "applies to an enumerated domain, not to an array of inputs",
                                       subrange)
    else:
        name, _, _, bits = dom
        total_per = 1 << bits
        if subrange is not None:
            try:
                s0, s1 = (int(v) for v in subrange)
            except (TypeError, ValueError):
                raise InvalidArgumentError("subrange", "must be a pair (start, stop) of bit patterns",
                                           subrange) from None
            if not 0 <= s0 <= s1 <= total_per:
                raise RangeError("subrange", f"must satisfy 0 <= start <= stop <= 2^{bits}", subrange)
            total_per = s1 - s0
            name = f"{name}[0x{s0:x}, 0x{s1:x})"
    t0 = time.perf_counter()
    reports: list[ChannelReport] = []
    kept_bits: list[np.ndarray] = []
    kept_channel: list[np.ndarray] = []
    budget = [int(keep)]
    for c, ac, bc in pairs:
        rep, kb = _prove_channel(c, ac, bc, dom, subrange, int(examples), budget, int(chunk), offset, values)
        reports.append(rep)
        if kb.size:
            kept_bits.append(kb)
            kept_channel.append(np.full(kb.size, c, np.int32))
    seconds = time.perf_counter() - t0
    differing = sum(r.differing for r in reports)
    bits_all = np.concatenate(kept_bits) if kept_bits else np.zeros(0, np.uint64)
    chan_all = np.concatenate(kept_channel) if kept_channel else np.zeros(0, np.int32)
    return EquivalenceReport(a.spec_string(), b.spec_string(), name, total_per * len(pairs), reports, offset, seconds,
                             bits_all, chan_all, complete=bits_all.size == differing,
                             kind="values" if values else "codes")


def _prove_channel(c, a, b, dom, subrange, n_examples, budget, chunk, offset, values):
    k = _jitted()
    given = len(dom) == 2
    if given:
        arr = dom[1]
        ddt = arr.dtype
        total = arr.size
        start = 0
    else:
        _, ddt, udt, bits = dom
        start, stop = (0, 1 << bits) if subrange is None else (int(subrange[0]), int(subrange[1]))
        total = stop - start
    n_buf = max(1, min(chunk, total))
    udt = np.dtype(_UINT[ddt.itemsize])
    pat = np.empty(n_buf, udt)
    x_dom = pat.view(ddt)
    conv_a = _converter(ddt, a, "a")
    conv_b = _converter(ddt, b, "b")
    xa_buf = np.empty(n_buf, conv_a) if conv_a is not None else None
    xb_buf = np.empty(n_buf, conv_b) if conv_b is not None else None
    # classification: the input as float32 (codes: as they are; all count as inside)
    if values:
        x32_buf = None
        lo, hi = -np.inf, np.inf
    else:
        x32_buf = None if ddt == np.dtype(np.float32) else (xa_buf if conv_a == np.dtype(np.float32) else
                                                           xb_buf if conv_b == np.dtype(np.float32) else
                                                           np.empty(n_buf, np.float32))
        ra, rb = a.real_range(), b.real_range()
        lo, hi = float(min(ra[0], rb[0])), float(max(ra[1], rb[1]))
    ya = np.empty(n_buf, a.out_dtype)
    yb = np.empty(n_buf, b.out_dtype)
    if values:
        va = ya if ya.dtype in (np.float32, np.float64) else np.empty(n_buf, np.float32)
        vb = yb if yb.dtype in (np.float32, np.float64) else np.empty(n_buf, np.float32)
        da = db = None
    else:
        va, vb = _view_codes(ya, a), _view_codes(yb, b)
        da, db = decoder(a, offset), decoder(b)
    rep = ChannelReport(c, total, range=(lo, hi))
    kept: list[np.ndarray] = []
    for s in range(0, total, n_buf):
        n = min(n_buf, total - s)
        if given:
            pat[:n] = arr[s:s + n].view(udt)
        else:
            k.fill(pat[:n], np.uint64(start + s))
        xa = x_dom[:n] if conv_a is None else _convert(x_dom[:n], xa_buf[:n])
        xb = x_dom[:n] if conv_b is None else (xa if conv_b == conv_a else _convert(x_dom[:n], xb_buf[:n]))
        run_record(a, xa, ya[:n])
        run_record(b, xb, yb[:n])
        if values:
            if va is not ya:
                np.copyto(va[:n], ya[:n], casting="unsafe")
            if vb is not yb:
                np.copyto(vb[:n], yb[:n], casting="unsafe")
            xc = pat[:n]
        else:
            if not k.count_codes(va[:n], vb[:n], *da, *db):
                continue
            if x32_buf is None:
                xc = x_dom[:n]
            else:
                xc = x32_buf[:n] if x32_buf is xa_buf or x32_buf is xb_buf else _convert(x_dom[:n], x32_buf[:n])
        want = max(n_examples - len(rep.examples), 0)
        cap = max(want, min(budget[0], n), 1)
        counts = np.zeros((1, 3), np.int64)
        maxd = np.zeros(1, np.float64 if values else np.int64)
        first = np.zeros((1, cap), np.int64)
        nfirst = np.zeros(1, np.int64)
        if values:
            k.compare_values(xc, va[:n], vb[:n], lo, hi, counts, maxd, first, nfirst)
        else:
            k.compare_codes(xc, va[:n], vb[:n], *da, *db, lo, hi, counts, maxd, first, nfirst)
        d = counts[0]
        if not d.any():
            continue
        rep.inside += int(d[0])
        rep.outside += int(d[1])
        rep.nonfinite += int(d[2])
        m = maxd[0]
        rep.max_difference = max(rep.max_difference, float(m) if values else int(m))
        idx = first[0, :nfirst[0]]
        rep.examples += [_example(c, i, pat, x_dom, va, vb, da, db, values) for i in idx[:want]]
        if budget[0] > 0:
            got = idx[:budget[0]]
            kept.append(pat[:n][got].astype(np.uint64))
            budget[0] -= got.size
    kb = np.concatenate(kept) if kept else np.zeros(0, np.uint64)
    return rep, kb


def _convert(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    np.copyto(dst, src, casting="unsafe")
    return dst


def _example(c, i, pat, x_dom, va, vb, da, db, values) -> Example:
    i = int(i)
    bits = int(pat[i])
    with np.errstate(invalid="ignore"):      # a signalling NaN input: the cast quiets it (x86 flags that)
        x = float(x_dom[i:i + 1].astype(np.float64)[0])
    if values:
        return Example(c, x, bits, float(va[i]), float(vb[i]))
    return Example(c, x, bits, _decode_one(va[i], da), _decode_one(vb[i], db))


def _decode_one(y, dec):
    mode, step, zero = dec
    if mode == 0:
        return int(y) + zero
    v = float(y)
    if v != v:
        return None
    return int(np.rint(v / step)) + zero
