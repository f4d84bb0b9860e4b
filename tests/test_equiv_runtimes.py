"""The equivalence proof checked against the real runtimes, pair by pair.

For each pair (TensorFlow's modes and round modes against ONNX, LiteRT QUANTIZE against ONNX int8 and
uint8, FakeQuant against LiteRT and ONNX QDQ, QuantizeAndDequantize against ONNX, float16 / bfloat16
ONNX against float32, dequantizers), the second record is the first's translation (or given), and:

1. ``quantspec.equivalent`` compares the two over their domain: every float16 / bfloat16 bit pattern
   (or code), and for float32 pairs seeded windows of QUANTSPEC_EQUIV_SIZE bit patterns (default
   2^20) inside the range on each side of zero — all 2^32 patterns for the first float32 pair, and
   for every pair with QUANTSPEC_EQUIV_FULL=1;
2. a sample of inputs is built: every differing input the proof kept, every decision threshold of
   both quantizers with its neighbours (ties among them), the ends of both ranges, IEEE specials,
   random bit patterns and random values in range — QUANTSPEC_EQUIV_SAMPLE inputs (default 2 * 10^5;
   10^7 with QUANTSPEC_EQUIV_FULL=1);
3. both real runtimes (TensorFlow, onnxruntime or onnx.reference by the record's compat, LiteRT's
   BUILTIN_REF interpreter) run on the sample: each must give quantspec's bytes, and the inputs on
   which the two runtimes' codes differ must be exactly the proof's differing inputs among the
   sample (where the proof covered the input: inside its windows, and up to the last differing input
   it kept where it kept only the first ``keep``); and ``quantspec.equivalent`` run on the sample itself
   (an array of inputs) must count and find exactly the inputs on which the runtimes differ.

The one exception to byte equality is TensorFlow QuantizeV2's position-dependent NaN code (signed
8/16-bit MIN_COMBINED / SCALED: its scalar tail gives 0 where its vectorised loop gives minT); there
TensorFlow's code may be 0, and such inputs are left out of the differing-set check.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import pytest

import equiv_runtimes as R
from refs import require, require_fast

from quantspec.equiv import thresholds as th
from quantspec.equiv._jitted import NO_CODE
from quantspec.equiv.prove import code_offset, decoder, equivalent
from quantspec.equiv.specstring import parse
from quantspec.equiv.translate import translate

FULL = os.environ.get("QUANTSPEC_EQUIV_FULL") == "1"
SEED = int(os.environ.get("QUANTSPEC_SEED", "20260701"))
WINDOW = int(os.environ.get("QUANTSPEC_EQUIV_SIZE", str(1 << 20)))
SAMPLE = int(os.environ.get("QUANTSPEC_EQUIV_SAMPLE", str(10_000_000 if FULL else 200_000)))
KEEP = 5_000_000 if FULL else 200_000


@dataclass(frozen=True)
class Pair:
    id: str
    a: str
    b: str                  # a spec string, or "to:<target>": a's translation
    domain: str = "float32"
    full_in_ci: bool = False


PAIRS = [
    # TensorFlow QuantizeV2, every mode and round mode, against ONNX QuantizeLinear
    Pair("tf-mincombined-qint8", "tf:QuantizeV2 mode=MIN_COMBINED T=qint8 min=-6 max=6", "to:onnx"),
    Pair("tf-mincombined-quint8", "tf:QuantizeV2 mode=MIN_COMBINED T=quint8 min=-1.3 max=2.7", "to:onnx"),
    Pair("tf-mincombined-qint16", "tf:QuantizeV2 mode=MIN_COMBINED T=qint16 min=-3 max=5", "to:onnx"),
    Pair("tf-mincombined-quint16", "tf:QuantizeV2 mode=MIN_COMBINED T=quint16 min=0 max=4", "to:onnx"),
    Pair("tf-minfirst-quint8", "tf:QuantizeV2 mode=MIN_FIRST T=quint8 min=-1.3 max=2.7", "to:onnx"),
    Pair("tf-minfirst-qint8", "tf:QuantizeV2 mode=MIN_FIRST T=qint8 min=-6 max=6", "to:onnx"),
    Pair("tf-scaled-even-qint8", "tf:QuantizeV2 mode=SCALED round_mode=HALF_TO_EVEN T=qint8 min=-6 max=6", "to:onnx"),
    Pair("tf-scaled-away-qint8", "tf:QuantizeV2 mode=SCALED round_mode=HALF_AWAY_FROM_ZERO T=qint8 min=-6 max=6",
         "to:onnx"),
    Pair("tf-scaled-even-quint8", "tf:QuantizeV2 mode=SCALED round_mode=HALF_TO_EVEN T=quint8 min=0 max=5", "to:onnx"),
    Pair("tf-scaled-away-qint16", "tf:QuantizeV2 mode=SCALED T=qint16 min=-2 max=3", "to:onnx"),
    Pair("tf-scaled-narrow-qint8", "tf:QuantizeV2 mode=SCALED round_mode=HALF_TO_EVEN T=qint8 min=-1 max=1 "
         "narrow_range=true", "to:onnx"),
    Pair("tf-mincombined-axis", "tf:QuantizeV2 mode=MIN_COMBINED T=qint8 min=-1,-2 max=1,3 axis=0", "to:onnx"),
    Pair("tf-scaled-even-qint8-f16", "tf:QuantizeV2 mode=SCALED round_mode=HALF_TO_EVEN T=qint8 min=-6 max=6",
         "to:onnx", "float16"),
    # LiteRT QUANTIZE against ONNX int8 and uint8
    Pair("litert-onnx-int8", "litert:QUANTIZE scale=0.05 zero_point=-3", "to:onnx", full_in_ci=True),
    Pair("litert-onnx-uint8", "litert:QUANTIZE scale=0.05 zero_point=-3", "to:onnx output_dtype=uint8"),
    Pair("litert-onnx-int8-b", "litert:QUANTIZE scale=0.1 zero_point=10", "to:onnx"),
    Pair("litert-onnx-int8-pow2", "litert:QUANTIZE scale=0.0078125 zero_point=0", "to:onnx"),
    Pair("litert-onnx-axis", "litert:QUANTIZE scale=0.05,0.02 zero_point=-3,5 quantized_dimension=0", "to:onnx"),
    Pair("litert-onnx-int8-f16", "litert:QUANTIZE scale=0.05 zero_point=-3", "to:onnx", "float16"),
    # FakeQuant against LiteRT and ONNX QDQ
    Pair("fq-args-litert", "tf:FakeQuant variant=args min=-6 max=6", "to:litert"),
    Pair("fq-args-litert-b", "tf:FakeQuant variant=args min=-1.3 max=2.7", "to:litert"),
    Pair("fq-vars-litert", "tf:FakeQuant variant=vars min=0.5 max=2.7", "to:litert"),
    Pair("fq-narrow-litert", "tf:FakeQuant variant=args min=-1.3 max=2.7 narrow_range=true", "to:litert"),
    Pair("fq-args-onnx", "tf:FakeQuant variant=args min=-6 max=6", "to:onnx"),
    Pair("fq-vars-onnx", "tf:FakeQuant variant=vars min=-1.3 max=2.7", "to:onnx"),
    Pair("fq-4bit-onnx", "tf:FakeQuant variant=args min=-1 max=1 num_bits=4", "to:onnx compat=reference"),
    Pair("fq-channel-onnx", "tf:FakeQuant variant=per_channel min=-1,-2 max=1,3", "to:onnx"),
    Pair("fq-args-litert-f16", "tf:FakeQuant variant=args min=-1.3 max=2.7", "to:litert", "float16"),
    # QuantizeAndDequantize against ONNX QDQ (tf2onnx)
    Pair("qdq-v3-onnx", "tf:QuantizeAndDequantizeV3 min=-1.3 max=2.7", "to:onnx"),
    Pair("qdq-v4-unsigned-onnx", "tf:QuantizeAndDequantizeV4 min=0 max=3 signed_input=false range_given=true",
         "to:onnx"),
    # with an axis and a given range (TensorFlow 2.21 refuses V2 / V4 there: the oracle runs the slice)
    Pair("qdq-v4-axis-onnx", "tf:QuantizeAndDequantize version=4 min=-1.0661212 max=2.2142518 signed_input=true "
         "num_bits=8 range_given=true round_mode=HALF_TO_EVEN axis=0", "onnx:QuantizeLinear opset=13 "
         "scale=0.017435053 zero_point=0 output_dtype=int8", "bfloat16"),
    Pair("qdq-v2-axis-halfup-onnx", "tf:QuantizeAndDequantize version=2 min=-1,-0.5 max=2,0.5 range_given=true "
         "round_mode=HALF_UP axis=1", "to:onnx"),
    # float16 and bfloat16 ONNX against float32
    Pair("onnx-f16-f32", "onnx:QuantizeLinear opset=21 scale=0.05 zero_point=-3 output_dtype=int8 x_dtype=float16 "
         "compat=onnxruntime", "onnx:QuantizeLinear opset=21 scale=0.049987793 zero_point=-3 output_dtype=int8",
         "float16"),
    Pair("onnx-f16-spec-f32", "onnx:QuantizeLinear opset=21 scale=0.05 zero_point=-3 output_dtype=int8 "
         "x_dtype=float16 compat=reference", "onnx:QuantizeLinear opset=21 scale=0.049987793 zero_point=-3 "
         "output_dtype=int8", "float16"),
    Pair("onnx-bf16-f32", "onnx:QuantizeLinear opset=23 scale=0.05 zero_point=-3 output_dtype=int8 x_dtype=bfloat16 "
         "compat=reference", "onnx:QuantizeLinear opset=23 scale=0.050048828 zero_point=-3 output_dtype=int8",
         "bfloat16"),
    Pair("onnx-f16-f32-uint8", "onnx:QuantizeLinear opset=21 scale=0.1 zero_point=128 output_dtype=uint8 "
         "x_dtype=float16 compat=reference", "to:onnx x_dtype=float", "float16"),
    Pair("onnx-bf16-f32-uint8", "onnx:QuantizeLinear opset=23 scale=0.1 zero_point=128 output_dtype=uint8 "
         "x_dtype=bfloat16 compat=reference", "to:onnx x_dtype=float", "bfloat16"),
    # dequantizers
    Pair("tf-dq-onnx", "tf:Dequantize mode=MIN_COMBINED T=qint8 min=-6 max=6", "to:onnx", "codes"),
    Pair("tf-dq-scaled-litert", "tf:Dequantize mode=SCALED T=qint8 min=-6 max=6", "to:litert", "codes"),
    Pair("litert-dq-onnx", "litert:DEQUANTIZE scale=0.05 zero_point=-3", "to:onnx", "codes"),
]


def test_enough_pairs():
    assert len(PAIRS) >= 30
    assert len({p.id for p in PAIRS}) == len(PAIRS)


def _records(pair: Pair):
    a = parse(pair.a)
    b = translate(a, pair.b[3:], inputs=None).target if pair.b.startswith("to:") else parse(pair.b)
    return a, b


def _windows(a, b, rng) -> list[tuple[int, int]]:
    """Seeded windows of WINDOW float32 bit patterns inside the range, on each side of zero."""
    lo, hi = a.real_range()
    out = []
    for value in (hi, lo):
        if value == 0:
            continue
        top = int(np.float32(abs(value)).view(np.uint32))
        start = int(rng.integers(max(top - 40 * WINDOW, 0), max(top - WINDOW, 1)))
        base = 0 if value > 0 else 1 << 31
        out.append((base + start, base + start + WINDOW))
    return out


def _prove(pair, a, b, rng):
    """[(domain arg, subrange, report)] for the pair."""
    if pair.domain == "codes":
        return [equivalent(a, b, "codes", keep=KEEP)]
    if pair.domain != "float32" or FULL or pair.full_in_ci:
        return [equivalent(a, b, pair.domain, keep=KEEP)]
    return [equivalent(a, b, "float32", subrange=w, keep=KEEP) for w in _windows(a, b, rng)]


def _sample(pair, a, b, reports, rng) -> np.ndarray:
    """Bit patterns (uint64) of the sample, in the pair's domain."""
    if pair.domain == "codes":
        t = a.code_type
        return np.arange(int(t.qmin), int(t.qmax) + 1).astype(t.storage).view(
            {1: np.uint8, 2: np.uint16, 4: np.uint32}[np.dtype(t.storage).itemsize]).astype(np.uint64)
    dt = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[pair.domain]
    order = th.ordinals_for(dt)
    ut = {32: np.uint32, 16: np.uint16}[order.bits]
    parts = [np.concatenate([r.differing_bits for r in reports])[: SAMPLE // 2]]
    lo = min(a.real_range()[0], b.real_range()[0])
    hi = max(a.real_range()[1], b.real_range()[1])
    bound = 4 * max(abs(lo), abs(hi))
    steps = []
    for rec, off in ((a, 0), (b, -code_offset(a, b))):
        for c in range(rec.channels):
            steps.append(th.thresholds(rec.channel(c) if rec.channels > 1 else rec, off, order, bound))
    parts.append(th.boundary_inputs(steps, 3))
    with np.errstate(over="ignore"):
        ends = np.array([lo, hi, -lo, -hi, 0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan,
                         float(ml_dtypes.finfo(dt).max), -float(ml_dtypes.finfo(dt).max),
                         float(ml_dtypes.finfo(dt).tiny), -float(ml_dtypes.finfo(dt).tiny)]).astype(dt)
    e = order.of_bits(ends.view(ut))
    e = (e[:, None] + np.arange(-3, 4)[None, :]).reshape(-1)
    e = e[(e >= 0) & (e < (1 << order.bits))]
    parts.append(order.to_bits(e).astype(np.uint64))
    parts.append(np.array([0x7f800001, 0xff800001, 0x7fc00000, 0xffc00000, 0x7fffffff, 0x00000001, 0x80000001]
                          if order.bits == 32 else [0x7c01, 0xfc01, 0x7e00, 0xfe00, 0x0001, 0x8001],
                          np.uint64))
    have = sum(p.size for p in parts)
    rest = max(SAMPLE - have, 0)
    parts.append(rng.integers(0, 1 << order.bits, rest // 2, dtype=np.uint64))
    vals = rng.uniform(1.5 * lo, 1.5 * hi, rest - rest // 2).astype(dt)
    parts.append(vals.view(ut).astype(np.uint64))
    bits = np.unique(np.concatenate(parts))
    return bits


def _codes(rec, y, offset):
    mode, step, zero = decoder(rec, offset)
    if mode == 0:
        raw = y if y.dtype.kind in "iu" else y.view(rec.code_type.storage)
        return raw.astype(np.int64) + zero
    v = y.astype(np.float64)
    out = np.full(v.size, NO_CODE, np.int64)
    ok = ~np.isnan(v)
    out[ok] = np.rint(v[ok] / step).astype(np.int64) + zero
    return out


def _bytes_equal(rec, want, got, x) -> np.ndarray:
    """Where quantspec's output equals the runtime's, byte for byte (NaN outputs by payload)."""
    w = np.ascontiguousarray(want).view(np.uint8).reshape(want.size, -1)
    g = np.ascontiguousarray(got).view(np.uint8).reshape(got.size, -1)
    same = (w == g).all(axis=1)
    if rec.spec == "tf" and rec.op == "QuantizeV2" and rec.code_type.signed and rec.code_type.bits < 32:
        xf = np.asarray(x, np.float64)
        corner = np.isnan(xf) & (np.asarray(want).astype(np.int64) == 0)   # TensorFlow's scalar tail
        same |= corner
    return same


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.id)
def test_pair_against_runtimes(pair):
    require_fast()
    for runtime in ("tensorflow", "onnxruntime", "onnx", "ai_edge_litert"):
        require(runtime)
    rng = np.random.default_rng([SEED, abs(hash(pair.id)) % (1 << 32)])
    a, b = _records(pair)
    reports = _prove(pair, a, b, rng)
    bits = _sample(pair, a, b, reports, rng)
    offset = code_offset(a, b) if a.kind != "dequantize" else 0
    if pair.domain == "codes":
        dom_dtype = a.input_dtype
    else:
        dom_dtype = np.dtype({"float32": np.float32, "float16": np.float16,
                              "bfloat16": ml_dtypes.bfloat16}[pair.domain])
    ut = {1: np.uint8, 2: np.uint16, 4: np.uint32}[np.dtype(dom_dtype).itemsize]
    x_dom = bits.astype(ut).view(dom_dtype)
    channels = max(a.channels, b.channels)
    checked = 0                # sample inputs where the proof's differing set was compared with the runtimes'
    for c in range(channels):
        ac = a.channel(c) if a.channels > 1 else a
        bc = b.channel(c) if b.channels > 1 else b
        xa = x_dom.astype(ac.input_dtype)
        xb = x_dom.astype(bc.input_dtype)
        qa, qb = np.empty(bits.size, ac.out_dtype), np.empty(bits.size, bc.out_dtype)
        ac.run(xa, qa)
        bc.run(xb, qb)
        ra, rb = R.run(ac, xa), R.run(bc, xb)
        sa, sb = _bytes_equal(ac, ra, qa, xa), _bytes_equal(bc, rb, qb, xb)
        assert sa.all(), f"{pair.id} channel {c}: quantspec's {ac} differs from its runtime on " \
                         f"{np.count_nonzero(~sa)} inputs, e.g. {xa[~sa][:4]}: {qa[~sa][:4]} vs {ra[~sa][:4]}"
        assert sb.all(), f"{pair.id} channel {c}: quantspec's {bc} differs from its runtime on " \
                         f"{np.count_nonzero(~sb)} inputs, e.g. {xb[~sb][:4]}: {qb[~sb][:4]} vs {rb[~sb][:4]}"
        # the runtimes' own disagreement against the proof's
        if a.kind == "dequantize":
            va, vb = ra.astype(np.float64), rb.astype(np.float64)
            rt_diff = ~((va == vb) | (np.isnan(va) & np.isnan(vb)))
        else:
            rt_diff = _codes(ac, ra, offset) != _codes(bc, rb, 0)
        tf_corner = (np.isnan(np.asarray(xa, np.float64)) if ac.spec == "tf" and ac.op == "QuantizeV2" else
                     np.zeros(bits.size, bool))
        if bc.spec == "tf" and bc.op == "QuantizeV2":
            tf_corner |= np.isnan(np.asarray(xb, np.float64))
        for r in reports:
            kept = r.differing_bits[r.channel_of_differing == c] if r.channels and len(r.channels) > 1 else \
                r.differing_bits
            in_sample = np.isin(bits, kept)
            assert rt_diff[in_sample & ~tf_corner].all(), \
                f"{pair.id}: inputs the proof found differing agree in the runtimes"
        # where the proof's kept differing inputs are all of its differing inputs: the whole window
        # (or domain) when the report kept every one; else the window's bit patterns up to the last
        # one kept (the proof keeps them in the domain's order, so none before it is missing)
        covered = np.zeros(bits.size, bool)
        proof = np.zeros(bits.size, bool)
        for r in reports:
            multi = len(r.channels) > 1
            kept = r.differing_bits[r.channel_of_differing == c] if multi else r.differing_bits
            n_diff = (r.channels[c] if multi else r.channels[0]).differing
            dom = r.domain
            if "[" in dom:
                s0, s1 = (int(v, 16) for v in dom[dom.index("[") + 1:-1].split(", "))
            else:
                s0, s1 = 0, 1 << 64
            if kept.size < n_diff:
                s1 = int(kept.max()) + 1 if kept.size else s0
            covered |= (bits >= s0) & (bits < s1)
            proof |= np.isin(bits, kept)
        check = covered & ~tf_corner
        checked += int(check.sum())
        assert np.array_equal(rt_diff[check], proof[check]), \
            f"{pair.id}: the runtimes differ on {int(rt_diff[check].sum())} covered sample inputs, the proof " \
            f"on {int(proof[check].sum())}"
        # the comparison run on the whole sample as an array of inputs: its count and its differing
        # inputs are the runtimes'
        on_sample = equivalent(ac, bc, x_dom, keep=bits.size)
        assert on_sample.complete
        flagged = np.isin(bits, on_sample.differing_bits)
        assert np.array_equal(flagged[~tf_corner], rt_diff[~tf_corner]), \
            f"{pair.id}: on the sample the runtimes differ on {int(rt_diff[~tf_corner].sum())} inputs, " \
            f"quantspec.equivalent on {int(flagged[~tf_corner].sum())}"
        assert on_sample.differing == int(flagged.sum())
    assert checked > 0, f"{pair.id}: no sample input is covered by the proof's kept differing inputs"


def test_litert_refuses_an_int16_dequantize_with_a_zero_point_the_record_takes():
    """What docs/translate.md says: LiteRT's DEQUANTIZE kernel refuses an int16 input whose zero
    point is not 0 when the model is prepared; the record computes ``litert.dequantize``'s
    arithmetic, and LiteRT's own result with a zero point of 0 equals the record's."""
    import equiv_runtimes as R

    from quantspec.equiv import parse

    x = np.array([-32768, -9710, 25466, -1, 0, 7, 32767], np.int16)
    rec = parse("litert:DEQUANTIZE scale=0.025490688 zero_point=5440 input_dtype=int16")
    assert np.array_equal(rec(x), (np.float64(np.float32(0.025490688)) * (x.astype(np.int64) - 5440)).astype(np.float32))
    with pytest.raises(RuntimeError, match="zero_point"):
        R.run(rec, x)
    zero = parse("litert:DEQUANTIZE scale=0.025490688 zero_point=0 input_dtype=int16")
    assert R.run(zero, x).tobytes() == zero(x).tobytes()
