"""The compressed-tensors presets' fast path (the kernels of :mod:`quantspec.checkpoint._jitted_ct`)
writes the bytes of the numpy reference path (:mod:`quantspec.checkpoint.ctarith`, proven against
llm-compressor itself), and the same error statistics, bit for bit.

Every preset of :data:`quantspec.checkpoint.presets.PRESETS`, from bfloat16, float16 and float32
weights, slab by slab through :func:`quantspec.checkpoint.encode.encode_preset` (fast path on, then
:func:`quantspec._fastpath.jit.reference_only`), on an adversarial corpus built per preset from its own
parameters (:func:`_weight`): each parameter group (a row, a group of columns, a 128x128 block) is one of

- a *sweep*: an anchor that makes the scale exactly 1, then every value of the weight's type inside
  the range (float32: a dense sample and the neighbours of every tie), so that every rounding the
  codes take is tried on every value;
- *ties*: an anchor of random or power-of-two size, then the values whose quotient lands on or next
  to a rounding boundary, at every step: the float32 quotient on a midpoint of the weight's type
  (double rounding), the quotient in the weight's type on an integer's .5, a float8 e4m3 midpoint or a
  float4 e2m1 threshold, and the code grid itself;
- zeros (of both signs), subnormals of the weight's type only (scales that round to 0 and become
  epsilons), huge values (1e30 and the largest finite values: float16's 65504, scales and codes that
  overflow to infinity), one nonzero value, or random values of random magnitudes;

with single rows, odd row counts, partial 128-row bands and 128-column blocks, and slabs cut where the
converter may cut them.  Then rows holding NaN or an infinity, which both paths report at the same row.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from refs import require_fast

from quantspec._fastpath import jit
from quantspec.checkpoint import ctarith as ar
from quantspec.checkpoint import encode
from quantspec.checkpoint.schemes import PRESET_SCHEMES

WT = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float": np.float32}
DTYPES = list(WT)
PRESETS = sorted(PRESET_SCHEMES)
_HUGE = {"bfloat16": [1e30, 3.3e38, 2.5e38], "float16": [65504.0, 60000.0, 49152.0], "float": [1e30, 3.4e38, 2.6e38]}
_E4M3 = np.arange(0, 0x7F, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)   # 0 .. 448
_FP4 = ar.FP4_VALUES.astype(np.float64)


@pytest.fixture(autouse=True)
def _fast():
    require_fast()


# -- the corpus ---------------------------------------------------------------------------------------
def _family(p) -> str:
    a = p.weights
    if a.type == "int":
        return "int" if a.symmetric else "asym"
    if a.bits == 8:
        return "fp8"
    return "nvfp4" if a.scale_dtype == "float8e4m3fn" else "mx"


def _unit(p) -> tuple[float, float]:
    """(lo, hi) of a group whose scale is exactly 1 (NVFP4: with a global scale of 1)."""
    a, fam = p.weights, _family(p)
    if fam in ("int", "asym"):
        h = 2.0 ** (a.bits - 1)
        return (-h, h - 1) if fam == "asym" else (-(2 * h - 1) / 2, (2 * h - 1) / 2)
    m = 448.0 if fam == "fp8" else 6.0
    return -m, m


def _ties(p) -> np.ndarray:
    """The code's rounding boundaries and grid, in units of the scale (both signs, sorted)."""
    fam = _family(p)
    if fam in ("int", "asym"):
        h = 2 ** (p.weights.bits - 1)
        k = np.arange(-h, h, dtype=np.float64)
        t = np.concatenate([k, k + 0.5])
    elif fam == "fp8":
        t = np.concatenate([_E4M3, (_E4M3[1:] + _E4M3[:-1]) / 2])
    else:
        t = np.concatenate([_FP4, (_FP4[1:] + _FP4[:-1]) / 2])
    return np.unique(np.concatenate([t, -t]))


def _all_values(wt: str, lo: float, hi: float, rng) -> np.ndarray:
    """Every value of ``wt`` in [lo, hi] (float32: a log-uniform sample), as float32."""
    if wt == "float":
        m = max(abs(lo), abs(hi), 1e-30)
        v = (np.float32(m) * np.exp2(-rng.uniform(0, 40, 20000))).astype(np.float32) * rng.choice([-1, 1], 20000)
        v = v.astype(np.float32)
    else:
        top = 0x7C00 if wt == "float16" else 0x7F80
        pos = np.arange(top, dtype=np.uint16).view(WT[wt]).astype(np.float32)
        v = np.concatenate([pos, -pos])
    return v[(v >= lo) & (v <= hi)]


def _quotients(p, wt: str, x: np.ndarray, s: float, zp: float, g) -> tuple[np.ndarray, np.ndarray]:
    """(the float32 quotient, the value the code rounds) of ``x`` in a group of stored scale ``s``,
    zero point ``zp`` (ctarith ``codes``)."""
    with np.errstate(all="ignore"):
        if _family(p) == "nvfp4":
            q = (x / np.float32(np.float32(s) / np.float32(g))).astype(np.float32)
            return q, q
        q32 = (x / np.float32(s)).astype(np.float32)
        q = ar.rnd(q32, wt)
        if _family(p) == "asym":
            q = ar.rnd(q + np.float32(zp), wt)
        return q32, q


_POOLS: dict = {}


def _candidates(p, wt: str, lo: float, hi: float, s: float, zp: float, g, rng, want: int) -> np.ndarray:
    """Values of ``wt`` in [lo, hi] whose quotient is on or next to a rounding boundary: of the code
    (``_ties``), and for bfloat16 / float16 of the weight's type (the float32 quotient on a midpoint)."""
    key = (p.name, wt, lo, hi, s, zp, g)
    if key not in _POOLS:
        x = _all_values(wt, lo, hi, rng)
        ties = _ties(p)
        if wt == "float":                            # the neighbours of every tie, in x
            up = down = (ties * np.float64(s) / (np.float64(g) if _family(p) == "nvfp4" else 1.0)).astype(np.float32)
            near = [up]
            for _ in range(3):
                up, down = np.nextafter(up, np.float32(np.inf)), np.nextafter(down, np.float32(-np.inf))
                near += [up, down]
            x = np.concatenate([x, *near]).astype(np.float32)
            x = x[(x >= lo) & (x <= hi)]
        q32, q = _quotients(p, wt, x, s, zp, g)
        i = np.clip(np.searchsorted(ties, q), 1, len(ties) - 1)
        d = np.minimum(np.abs(q - ties[i - 1]), np.abs(q - ties[i])) / np.maximum(np.abs(q), 2.0 ** -30)
        order = [np.argsort(d + rng.uniform(0, 1e-12, d.size), kind="stable")]
        if wt != "float":
            bits = q32.view(np.uint32)
            low = 0xFFFF if wt == "bfloat16" else 0x1FFF
            mid = (low + 1) // 2
            dw = np.abs((bits & low).astype(np.int64) - mid).astype(np.float64)
            order.append(np.argsort(dw + rng.uniform(0, 0.5, dw.size), kind="stable"))
        picks = np.unique(np.concatenate([o[:400] for o in order]))
        _POOLS[key] = x[picks] if picks.size else x[:1]
    pool = _POOLS[key]
    return rng.choice(pool, size=want) if pool.size else np.zeros(want, np.float32)


def _groups(a, rows: int, cols: int):
    """(rows, columns, position in the parameter array) of each parameter group."""
    if a.strategy == "channel":
        return [(slice(r, r + 1), slice(0, cols), (r, 0)) for r in range(rows)]
    if a.strategy == "block":
        bh, bw = a.block
        return [(slice(i, min(i + bh, rows)), slice(j, min(j + bw, cols)), (i // bh, j // bw))
                for i in range(0, rows, bh) for j in range(0, cols, bw)]
    G = a.group
    return [(slice(r, r + 1), slice(k, k + G), (r, k // G)) for r in range(rows) for k in range(0, cols, G)]


def _as_wt(v, wt: str) -> np.ndarray:
    return np.asarray(v, np.float32).astype(WT[wt]).astype(np.float32)


def _weight(p, wt: str, rows: int, cols: int, rng, g=None, mix="all") -> np.ndarray:
    """An adversarial ``[rows, cols]`` weight for preset ``p`` (float32 values of ``wt``); ``g``: NVFP4's
    global scale (None: the converter's, of the weight's absolute maximum, which the anchors decide),
    which the groups' ties are chosen for; ``mix`` "sweep": every group a sweep."""
    a, fam = p.weights, _family(p)
    x = np.zeros((rows, cols), np.float32)
    groups = _groups(a, rows, cols)
    kinds = ["sweep", "ties", "ties", "zeros", "tiny", "huge", "single", "random"]
    plan = []
    ulo, uhi = _unit(p)
    sweep = _all_values(wt, ulo, uhi, rng)
    rng.shuffle(sweep)
    si = 0
    tiny_top = {"bfloat16": 2.0 ** -126, "float16": 2.0 ** -14, "float": 2.0 ** -126}[wt]
    anchors = [rng.uniform(0.5, 2.0) * 2.0 ** rng.integers(-14, 6) for _ in range(3)] + \
              [2.0 ** rng.integers(-10, 4) for _ in range(3)]
    for rs, cs, pos in groups:
        view = x[rs, cs].reshape(-1)
        m = view.size
        kind = "sweep" if mix == "sweep" else kinds[rng.integers(len(kinds))]
        if kind == "zeros":
            view[:] = np.where(rng.random(m) < 0.5, np.float32(-0.0), np.float32(0.0))
        elif kind == "tiny":
            view[:] = _as_wt(rng.uniform(-tiny_top, tiny_top, m), wt)
        elif kind == "huge":
            h = _HUGE[wt][rng.integers(3)]
            view[:] = _as_wt(rng.uniform(-h, h, m) * (rng.random(m) < 0.3), wt)
            view[rng.integers(m)] = _as_wt(h * rng.choice([-1, 1]), wt)
        elif kind == "single":
            view[rng.integers(m)] = _as_wt(rng.standard_normal() * 2.0 ** rng.integers(-20, 10), wt)
        elif kind == "random":
            view[:] = _as_wt(rng.standard_normal(m) * 2.0 ** rng.integers(-20, 10), wt)
        else:                                        # sweep / ties: the anchors now, the rest once the scale is known
            u = 1.0 if kind == "sweep" else anchors[rng.integers(len(anchors))]
            lo, hi = _as_wt([ulo * u, uhi * u], wt)
            if fam == "asym" and kind == "ties" and rng.random() < 0.3:
                lo = 0.0 if rng.random() < 0.5 else lo        # one-sided ranges
                hi = 0.0 if lo != 0 else hi
            at = rng.choice(m, size=2, replace=False)
            view[at[0]] = lo if (fam == "asym" or rng.random() < 0.5) else -lo
            view[at[1]] = hi if fam == "asym" else view[at[1]]
            plan.append((rs, cs, pos, kind, set(at.tolist()) if fam == "asym" else {int(at[0])}))
        x[rs, cs] = view.reshape(x[rs, cs].shape)
    if fam == "nvfp4" and g is None:
        g = ar.global_scale(ar.absmax(x), wt)        # what the rest keeps: every value inside its group's range
    gg = np.float32(1.0 if g is None else g)
    scale, zp = ar.params(x, a, wt, gg if fam == "nvfp4" else None)
    for rs, cs, pos, kind, fixed in plan:
        view = x[rs, cs].reshape(-1)
        lo, hi = min(float(view.min()), 0.0), max(float(view.max()), 0.0)
        if fam != "asym":
            hi = max(-lo, hi)
            lo = -hi
        free = [i for i in range(view.size) if i not in fixed]
        if kind == "sweep":
            take = sweep[si:si + len(free)]
            si = (si + len(free)) % max(sweep.size, 1)
            take = np.resize(take, len(free)) if take.size else np.zeros(len(free), np.float32)
            take = take[(take >= lo) & (take <= hi)] if take.size else take
            view[free[:take.size]] = take
        else:
            z = float(zp[pos]) if zp is not None else 0.0
            view[free] = _candidates(p, wt, lo, hi, float(scale[pos]), z, float(gg), rng, len(free))
        x[rs, cs] = view.reshape(x[rs, cs].shape)
    assert np.array_equal(ar.params(x, a, wt, gg if fam == "nvfp4" else None)[0], scale)   # anchors kept
    return x


def _raw(x: np.ndarray, wt: str) -> np.ndarray:
    return np.ascontiguousarray(x.astype(WT[wt])).reshape(-1).view(np.uint8)


def _slabs(p, rows: int, rng) -> list[tuple[int, int]]:
    """Cuts of ``rows`` the converter may make: whole 128-row bands (2-D blocks), whole 8-row words of
    packed zero points, anywhere else."""
    a = p.weights
    step = a.block[0] if a.strategy == "block" else 8 if not a.symmetric else 1
    cuts, r = [], 0
    while r < rows:
        n = step * int(rng.integers(1, 3)) if step > 1 else int(rng.choice([1, 2, 5, 64, 129]))
        cuts.append((r, min(rows, r + n)))
        r += n
    return cuts


def _shapes(p) -> list[tuple[int, int]]:
    a = p.weights
    if a.strategy in ("channel", "block"):
        return [(1, 77), (3, 333), (130, 200), (257, 128)]
    G = a.group
    return [(1, G), (3, 3 * G), (130, max(2 * G, 64)), (9, 128 if G == 128 else 4 * G)]


# -- comparing the two paths ----------------------------------------------------------------------------
def _both(s, wt: str, raw: np.ndarray, rows: int, cols: int, params):
    """(stats, outputs) of the slab on the fast path, then on the reference path."""
    with np.errstate(all="ignore"):                  # the reference's 0 * inf in dq: NaN sums, on purpose
        fast_stats, fast = encode.encode_preset(s, wt, raw, rows, cols, params)
        fast = {k: np.array(v) for k, v in fast.items()}        # the scratch buffers, copied
        with jit.reference_only():
            ref_stats, ref = encode.encode_preset(s, wt, raw, rows, cols, params)
    return (fast_stats.copy(), fast), (ref_stats, ref)


def _same(got, want, what):
    (fs, fa), (rs, ra) = got, want
    assert fs.view(np.uint64).tolist() == rs.view(np.uint64).tolist(), (what, fs, rs)
    assert list(fa) == list(ra), (what, list(fa), list(ra))
    for k in ra:
        assert fa[k].dtype == ra[k].dtype and fa[k].shape == ra[k].shape, (what, k, fa[k].dtype, ra[k].dtype,
                                                                          fa[k].shape, ra[k].shape)
        a, b = fa[k].view(np.uint8).reshape(-1), np.ascontiguousarray(ra[k]).view(np.uint8).reshape(-1)
        if not np.array_equal(a, b):
            i = int(np.flatnonzero(a != b)[0])
            raise AssertionError(f"{what}: {k} differs first at byte {i} of {a.size}: {a[i]} != {b[i]}")


def _check(name: str, wt: str, x: np.ndarray, rng, g=None):
    s = PRESET_SCHEMES[name]
    p = s.preset
    rows, cols = x.shape
    if p.weights.strategy == "tensor_group" and g is None:
        g = float(ar.global_scale(ar.absmax(x), wt))          # the converter's: the whole tensor's
    params = (g,) if p.weights.strategy == "tensor_group" else None
    raw = _raw(x, wt)
    rb = raw.size // rows
    for r0, r1 in _slabs(p, rows, rng):
        slab = raw[r0 * rb:r1 * rb]
        assert encode._preset_fast(p, wt, slab, r1 - r0, cols, params) is not None, (name, wt)
        _same(*_both(s, wt, slab, r1 - r0, cols, params), (name, wt, x.shape, r0, r1))


@pytest.mark.parametrize("wt", DTYPES)
def test_every_preset_writes_the_reference_bytes_and_statistics(wt):
    """Every output byte, the outputs' types and shapes, and the bits of the error statistics, slab by
    slab, on the adversarial corpus (:func:`_weight`), for every preset."""
    rng = np.random.default_rng(sorted(WT).index(wt) + 41)
    for name in PRESETS:
        p = PRESET_SCHEMES[name].preset
        for rows, cols in _shapes(p):
            x = _weight(p, wt, rows, cols, rng)
            _check(name, wt, x, rng)


@pytest.mark.parametrize("wt", DTYPES)
def test_every_value_of_the_weight_type_is_rounded_as_the_reference(wt):
    """Sweeps: every group's scale exactly 1 and the group filled with every value of the weight's
    type in the preset's range, so that each rounding of the codes (the integers' half to even,
    float8 e4m3, float4 e2m1 with its signed zeros) meets every input it can get."""
    rng = np.random.default_rng(sorted(WT).index(wt) + 7)
    for name in ("W4A16", "W8A8", "W3A8", "W4A16_ASYM", "FP8_DYNAMIC", "FP8_BLOCK", "NVFP4A16", "MXFP4A16"):
        p = PRESET_SCHEMES[name].preset
        a = p.weights
        cols = 512 if a.strategy in ("group", "channel", "block") else 256
        count = _all_values(wt, *_unit(p), rng).size
        per_row = {"channel": cols - 1, "block": (cols - 1)}.get(a.strategy, cols - cols // (a.group or cols))
        rows = min(-(-count // per_row) + 1, 300)
        g = 1.0 if _family(p) == "nvfp4" else None
        x = _weight(p, wt, rows, cols, rng, g=g, mix="sweep")
        _check(name, wt, x, rng, g=g)


def test_nvfp4_global_scales_of_every_size():
    """NVFP4 with global scales that saturate every group scale, that make them all the float8
    epsilon, powers of two (exact ties) and none at all (the slab's own, as ``encode_weight`` takes it);
    an invalid global scale takes the reference path on both sides."""
    rng = np.random.default_rng(3)
    p = PRESET_SCHEMES["NVFP4A16"].preset
    for wt in DTYPES:
        x = _weight(p, wt, 20, 64, rng)
        for g in (2.0 ** -20, 2.0 ** -3, 1.0, 2.0 ** 7, 2.0 ** 40, 3.3e38):
            _check("NVFP4A16", wt, x, rng, g=g)
        raw = _raw(x, wt)
        _same(*_both(PRESET_SCHEMES["NVFP4A16"], wt, raw, 20, 64, None), (wt, "no global scale"))
        for g in (0.0, -1.0, float("inf"), float("nan")):
            assert encode._preset_fast(p, wt, raw, 20, 64, (g,)) is None
            _same(*_both(PRESET_SCHEMES["NVFP4A16"], wt, raw, 20, 64, (g,)), (wt, g))


def test_rows_holding_nan_or_infinity_are_reported_at_the_same_row():
    """A slab with NaN or ±infinity: no outputs and the first such row in ``stats[3]``, on both paths,
    wherever the row is (the first, inside a 128-row band, the last)."""
    rng = np.random.default_rng(11)
    bad = {"bfloat16": [0x7FC0, 0x7F80, 0xFF80, 0x7F81], "float16": [0x7E00, 0x7C00, 0xFC00, 0x7C01],
           "float": [0x7FC00000, 0x7F800000, 0xFF800000, 0x7F800001]}
    for name in ("W4A16", "W4A16_ASYM", "W8A8", "W4AFP8", "FP8_DYNAMIC", "FP8_BLOCK", "NVFP4A16", "MXFP4A16"):
        s = PRESET_SCHEMES[name]
        for wt in DTYPES:
            rows, cols = 130, 256
            x = _as_wt(rng.standard_normal((rows, cols)), wt)
            params = (float(ar.global_scale(ar.absmax(x), wt)),) if name == "NVFP4A16" else None
            for r in (0, 5, 127, 129):
                raw = _raw(x, wt).copy()
                item = 4 if wt == "float" else 2
                view = raw.view(np.uint32 if item == 4 else np.uint16)
                view[r * cols + int(rng.integers(cols))] = bad[wt][int(rng.integers(4))]
                (fs, fa), (rs, ra) = _both(s, wt, raw, rows, cols, params)
                assert fa == {} and ra == {} and fs[3] == rs[3] == r, (name, wt, r, fs, rs)
                assert fs.view(np.uint64).tolist() == rs.view(np.uint64).tolist()
