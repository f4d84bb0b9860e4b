"""Recipes of the API fuzzer (tests/test_fuzz_api.py) for the translation between specs:
``quantspec.equiv.parse``, ``quantspec.equivalent`` and ``quantspec.translate``.

Records are drawn as spec strings (every record of the three specs, with valid and invalid fields:
TensorFlow QuantizeV2 / Dequantize / FakeQuant / QuantizeAndDequantize attributes and ranges, ONNX
QuantizeLinear / DequantizeLinear opset, scale, zero point, output type and axis, LiteRT QUANTIZE /
DEQUANTIZE parameters), sometimes broken (a token cut, a key repeated, junk inserted): ``parse`` either
returns a record whose own spec string reads back as the same record, or raises a quantspec error.
The parsed records are compared (``equivalent``) on float16 / bfloat16, on a small float32 subrange
(never the whole 2^32), on every code, or on an array of drawn values; and translated (``translate``)
to another spec.  The oracle, for two per-tensor records compared on an array: the real runtimes
(TensorFlow, onnxruntime or onnx.reference, LiteRT's BUILTIN_REF interpreter; tests/support/equiv_runtimes.py)
run each record on the inputs, and the inputs on which their codes differ must be exactly those the
report counts and keeps.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import fuzz_support as F
from fuzz_api import Case, _pick, _rare, _rng, _short

#: bit widths up to which a record is translated (16-bit codes take seconds each: too slow to draw)
_RANGES = ((-6.0, 6.0), (-1.3, 2.7), (0.0, 5.0), (-1.0, 1.0), (0.5, 2.7), (-3.0, 0.0), (-100.0, 250.0),
           (-0.01, 0.02))
_BAD_RANGES = ((0.0, 0.0), (2.0, 1.0), (float("nan"), 1.0), (-float("inf"), 1.0), (-1.0, float("inf")), (-3.4e38, 3.4e38),
               (1e-30, 2e-30), (-1e-45, 1e-45))


#: how often the field recipes draw an invalid value (1: as written; equivalent and translate lower it,
#: so that most of their records are valid and get compared)
_WILD = [1.0]


def _pk(draw, options, rare=(), p: float = 0.08):
    return _pick(draw, options, rare, p * _WILD[0])


def _num(v: float) -> str:
    """``v`` as a spec string writes it: rounded to float32 (a finite value past its range is inf)."""
    if not np.isfinite(v):
        return "nan" if np.isnan(v) else ("inf" if v > 0 else "-inf")
    with np.errstate(over="ignore"):
        return repr(float(np.float32(v)))


def _range(draw, rng, channels: int) -> tuple[str, str]:
    los, his = [], []
    for _ in range(channels):
        lo, hi = _pk(draw, _RANGES, _BAD_RANGES, 0.1)
        if not _rare(draw, 0.4):
            w = float(rng.uniform(0.5, 1.5))
            lo, hi = lo * w, hi * w
        los.append(_num(lo))
        his.append(_num(hi))
    return ",".join(los), ",".join(his)


def _scale(draw, rng, channels: int) -> str:
    out = []
    for _ in range(channels):
        s = float(10 ** rng.uniform(-3.5, 0.5))
        if _rare(draw, 0.06 * _WILD[0]):
            s = draw(st.sampled_from([0.0, -0.05, float("inf"), float("nan"), 1e-45, 3e38, 2.0 ** -20]))
        out.append(_num(s))
    return ",".join(out)


def _zero(draw, rng, t: str, channels: int) -> str:
    lo, hi = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535),
              "int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}.get(t, (0, 0))
    out = []
    for _ in range(channels):
        z = int(rng.integers(lo, hi + 1)) if not _rare(draw, 0.2) else 0
        if _rare(draw, 0.05 * _WILD[0]):
            z = draw(st.sampled_from([lo - 1, hi + 1, 1.5, 2 ** 40]))
        out.append(str(z))
    return ",".join(out)


def _channels(draw) -> int:
    return 1 if not _rare(draw, 0.12) else draw(st.integers(2, 3))


def _tf_fields(draw, rng, op: str) -> dict:
    f: dict = {}
    ch = _channels(draw) if op != "FakeQuant" else 1
    if op in ("QuantizeV2", "Dequantize"):
        f["T"] = _pk(draw, ("qint8", "quint8", "qint8", "quint8", "qint16", "quint16"), ("qint32", "int8", "x"), 0.05)
        f["mode"] = _pk(draw, ("MIN_COMBINED", "MIN_FIRST", "SCALED"), ("min_combined", "x"), 0.04)
        if op == "QuantizeV2" and (f["mode"] == "SCALED" or _rare(draw, 0.05)):
            f["round_mode"] = _pk(draw, ("HALF_AWAY_FROM_ZERO", "HALF_TO_EVEN"), ("HALF_UP",), 0.05)
        if op == "QuantizeV2" and _rare(draw, 0.1):
            f["ensure_minimum_range"] = _pk(draw, ("0.01", "0", "0.5"), ("-1", "nan"))
        if op == "Dequantize" and _rare(draw, 0.2):
            f["dtype"] = _pk(draw, ("float32", "bfloat16"), ("float16",))
    elif op == "FakeQuant":
        f["variant"] = _pk(draw, ("args", "vars", "per_channel"), ("x",), 0.04)
        if f["variant"] == "per_channel":
            ch = draw(st.integers(1, 3))
    else:
        f["version"] = _pk(draw, ("2", "3", "4"), ("1", "5"), 0.04)
        if _rare(draw, 0.3):
            f["signed_input"] = draw(st.sampled_from(["true", "false"]))
        if f["version"] != "2" or not _rare(draw, 0.3):
            f["range_given"] = _pk(draw, ("true", "true", "true", "false"), ("maybe",))
        if _rare(draw, 0.2):
            f["round_mode"] = _pk(draw, ("HALF_TO_EVEN", "HALF_UP"), ("HALF_AWAY_FROM_ZERO",))
    if op in ("FakeQuant", "QuantizeAndDequantize") and _rare(draw, 0.4):
        f["num_bits"] = _pk(draw, ("8", "4", "2", "7", "16"), ("1", "0", "17", "8.5"), 0.1)
    if _rare(draw, 0.2):
        f["narrow_range"] = _pk(draw, ("true", "false"), ("2",))
    lo, hi = _range(draw, rng, ch)
    f["min"], f["max"] = lo, hi
    if ch > 1 and op != "FakeQuant":
        f["axis"] = _pk(draw, ("0", "0", "-1"), ("1", "x"))
    elif _rare(draw, 0.05) and op != "FakeQuant":
        f["axis"] = _pk(draw, ("0", "none"), ("-2",))
    return f


def _onnx_fields(draw, rng, op: str) -> dict:
    f: dict = {}
    ch = _channels(draw)
    t = _pk(draw, ("int8", "uint8", "int8", "uint8", "int16", "uint16", "int4", "uint4"),
              ("int2", "float8e4m3fn", "int32", "float", "x"), 0.06)
    f["scale"] = _scale(draw, rng, ch)
    if not _rare(draw, 0.15):
        f["zero_point"] = _zero(draw, rng, t, ch)
    if op == "QuantizeLinear":
        f["output_dtype"] = t
        if _rare(draw, 0.2):
            f["x_dtype"] = _pk(draw, ("float", "float16", "bfloat16"), ("int8",))
        if _rare(draw, 0.1):
            f["saturate"] = _pk(draw, ("true", "false"), ("x",))
        if _rare(draw, 0.08):
            f["precision"] = _pk(draw, ("float", "float16"), ("int8",))
    else:
        f["x_dtype"] = t
        if _rare(draw, 0.1):
            f["output_dtype"] = _pk(draw, ("float", "float16"), ("int8",))
    if _rare(draw, 0.4):
        f["opset"] = _pk(draw, ("13", "19", "21", "23", "25"), ("10", "7", "30", "x"), 0.1)
    if not _rare(draw, 0.3):
        f["compat"] = _pk(draw, ("spec", "reference", "onnxruntime"), ("x",))
    if ch > 1 or _rare(draw, 0.05):
        f["axis"] = _pk(draw, ("0", "1", "-1"), ("x", "2"))
    return f


def _litert_fields(draw, rng, op: str) -> dict:
    f: dict = {}
    ch = _channels(draw)
    t = "int8"
    if op == "DEQUANTIZE" and _rare(draw, 0.3):
        t = _pk(draw, ("int8", "uint8", "int16", "float16"), ("int4", "int32", "x"))
        f["input_dtype"] = t
    f["scale"] = _scale(draw, rng, ch)
    if not _rare(draw, 0.1):
        f["zero_point"] = _zero(draw, rng, t if t != "float16" else "int2", ch)
    if ch > 1 or _rare(draw, 0.05):
        f["quantized_dimension"] = _pk(draw, ("0", "1"), ("-1", "x"))
    return f


_OPS = (("tf", "QuantizeV2"), ("tf", "Dequantize"), ("tf", "FakeQuant"), ("tf", "QuantizeAndDequantize"),
        ("onnx", "QuantizeLinear"), ("onnx", "DequantizeLinear"), ("litert", "QUANTIZE"), ("litert", "DEQUANTIZE"))


def spec_string(draw, kind: str | None = None, wild: float = 1.0) -> str:
    """A spec string of a drawn record (``kind``: "quantize" or "dequantize" to choose among those;
    ``wild`` scales how often a field is invalid)."""
    _WILD[0] = wild
    rng = _rng(draw)
    ops = [o for o in _OPS if kind is None or (("equantize" in o[1].lower() and "anddequantize" not in o[1].lower())
                                                == (kind == "dequantize"))]
    spec, op = draw(st.sampled_from(ops))
    fields = (_tf_fields if spec == "tf" else _onnx_fields if spec == "onnx" else _litert_fields)(draw, rng, op)
    if spec == "tf" and op in ("FakeQuant", "QuantizeAndDequantize") and _rare(draw, 0.2):
        # the TensorFlow op names that set the variant / version
        if op == "FakeQuant" and fields.get("variant") in ("args", "vars", "per_channel"):
            op = {"args": "FakeQuantWithMinMaxArgs", "vars": "FakeQuantWithMinMaxVars",
                  "per_channel": "FakeQuantWithMinMaxVarsPerChannel"}[fields.pop("variant")]
        elif op == "QuantizeAndDequantize" and fields.get("version") in ("2", "3", "4"):
            op = "QuantizeAndDequantizeV" + fields.pop("version")
    items = list(fields.items())
    draw(st.randoms()).shuffle(items)
    if _rare(draw, 0.3):
        op = draw(st.sampled_from([op.lower(), op.upper(), op]))
    return f"{spec}:{op} " + " ".join(f"{k}={v}" for k, v in items)


def _break(draw, text: str) -> str:
    """A malformed variant of a spec string."""
    how = draw(st.sampled_from(["cut", "junk", "twice", "unknown", "head", "empty", "noeq", "bytes"]))
    words = text.split()
    if how == "cut":
        i = draw(st.integers(0, len(text)))
        return text[:i]
    if how == "junk":
        words.insert(draw(st.integers(1, len(words))), draw(st.sampled_from(["=", "a=", "=3", "k==1", "x=1=2",
                                                                              "scale=", "min=1,,2", "\x00"])))
        return " ".join(words)
    if how == "twice" and len(words) > 1:
        return " ".join(words + [words[-1]])
    if how == "unknown":
        return text + " " + draw(st.sampled_from(["foo=1", "kernel=x", "scale=0.1", "T=qint8", "mode=SCALED"]))
    if how == "head":
        return draw(st.sampled_from(["tf", "onnx:", "litert:QUANTIZE_X", "x:QuantizeV2", ":", "tflite:quantize",
                                     "tensorflow:quantizev2"])) + " " + " ".join(words[1:])
    if how == "empty":
        return draw(st.sampled_from(["", "   ", "\t"]))
    if how == "noeq" and len(words) > 1:
        return " ".join(w.replace("=", " ", 1) if i == len(words) - 1 else w for i, w in enumerate(words))
    return text.replace(" ", "\u00a0" if how == "bytes" else "  ")


def _parsed(text: str):
    from quantspec.equiv import parse
    from quantspec.errors import QuantSpecError

    try:
        return parse(text)
    except QuantSpecError:
        return None
    except Exception as e:  # noqa: BLE001 - the outcome rule, checked by the parse recipe; here: not a record
        raise AssertionError(f"parse({text!r}) raised {type(e).__name__}: {e}") from None


def _roundtrip(rec) -> None:
    from quantspec.equiv import parse

    s = rec.spec_string()
    again = parse(s)
    assert again.spec_string() == s, f"{rec!r}: its spec string {s!r} reads back as {again.spec_string()!r}"


def equiv_parse(draw) -> Case:
    from quantspec.equiv import parse

    text = spec_string(draw)
    if _rare(draw, 0.35):
        text = _break(draw, text)
    if _rare(draw, 0.03):
        text = _pick(draw, (None, 3, b"tf:QuantizeV2 min=-1 max=1", ["onnx:QuantizeLinear scale=1"]))
    return Case(lambda: parse(text), f"quantspec.equiv.parse({text!r})", check=_roundtrip)


# -- equivalent -------------------------------------------------------------------------------------

def _input_values(draw, rng, rec) -> np.ndarray:
    """An array of inputs for ``rec``'s domain: floats of a float type (specials, ties, values around
    its range), or codes of a dequantizer's type."""
    n = draw(st.sampled_from([0, 1, 7, 64, 300, 1000]))
    if rec.kind == "dequantize":
        return F.values(rng, (n,), rec.input_dtype)
    dt = draw(st.sampled_from([np.float32, np.float16, "bfloat16"])) if np.dtype(rec.input_dtype) == np.float32 \
        else rec.input_dtype
    dt = np.dtype(dt)
    try:
        lo, hi = rec.real_range()
    except Exception:  # noqa: BLE001 - a record without a range: plain values
        lo, hi = -3.0, 3.0
    span = max(abs(lo), abs(hi), 1e-6)
    x = F.values(rng, (n,), dt, scale=span / 127)
    inside = rng.random(n) < 0.5
    ends = sorted((1.2 * lo if np.isfinite(lo) else -1.0, 1.2 * hi if np.isfinite(hi) else 1.0))  # min > max: taken
    with np.errstate(all="ignore"):
        x[inside] = rng.uniform(ends[0], ends[1], int(inside.sum())).astype(np.float32).astype(dt)
    return x


def _domain(draw, rng, a):
    """(inputs, subrange) for equivalent: enumerated float16 / bfloat16 / codes, a small float32
    subrange, or an array; sometimes a wrong one."""
    wide_codes = a.kind == "dequantize" and np.dtype(a.code_type.storage).itemsize > 2
    choice = draw(st.sampled_from(["array", "array", "array", "float16", "bfloat16", "subrange", "codes"]))
    if a.kind == "dequantize" and choice in ("float16", "bfloat16"):
        choice = "codes"
    if choice == "array":
        return _input_values(draw, rng, a), None
    width = draw(st.sampled_from([0, 1, 1000, 1 << 14]))
    top = (1 << 32) if choice == "subrange" or wide_codes else (1 << 16)
    start = int(rng.integers(0, top - width + 1))
    sub = (start, start + width)
    if _rare(draw, 0.1):
        sub = _pick(draw, ((5, 2), (-1, 10), (0, (1 << 32) + 1), (1.5, 2), "x", (1, 2, 3)))
    if choice == "subrange":
        return ("float32" if a.kind != "dequantize" else "codes"), (sub if wide_codes or a.kind != "dequantize"
                                                                    or _rare(draw, 0.05) else None)
    if choice == "codes":
        return ("codes" if a.kind == "dequantize" else "float32"), (sub if wide_codes or a.kind != "dequantize"
                                                                    else None)
    return choice, (sub if _rare(draw, 0.2) else None)


def _runtime_outputs(rec, x):
    import equiv_runtimes as R

    return R.run(rec, np.ascontiguousarray(x.astype(rec.input_dtype)))


def _equiv_oracle(a, b, x):
    """The inputs where the real runtimes' codes (dequantizers: values) differ, and those to leave out
    (TensorFlow QuantizeV2's NaN code, which depends on the input's position)."""
    import test_equiv_runtimes as T

    from quantspec.equiv.prove import code_offset

    ra, rb = _runtime_outputs(a, x), _runtime_outputs(b, x)
    if a.kind == "dequantize":
        va, vb = ra.astype(np.float64), rb.astype(np.float64)
        diff = ~((va == vb) | (np.isnan(va) & np.isnan(vb)))
    else:
        diff = T._codes(a, ra, code_offset(a, b)) != T._codes(b, rb, 0)
    corner = np.zeros(x.size, bool)
    for r in (a, b):
        if r.spec == "tf" and r.op == "QuantizeV2":
            corner |= np.isnan(np.asarray(x, np.float64))
    return diff, corner


def _same_diff(x):
    ut = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize]
    bits = x.view(ut).astype(np.uint64)

    def same(want, report):
        diff, corner = want
        flagged = np.isin(bits, report.differing_bits)
        if not np.array_equal(flagged[~corner], diff[~corner]):
            return False
        return bool(corner.any()) or report.differing == int(diff.sum())

    return same


def _second(draw, a):
    """``b`` for ``equivalent(a, b)``: another drawn record of a's kind, or a's translation."""
    from quantspec.equiv import translate

    if a is not None and _bits(a) <= 8 and not _rare(draw, 0.4):
        to = draw(st.sampled_from([s for s in ("tf", "onnx", "litert")]))
        try:
            return translate(a, to, inputs=None).target
        except Exception:  # noqa: BLE001 - not translatable: draw another record
            pass
    kind = None if a is None else ("dequantize" if a.kind == "dequantize" else "quantize")
    return _parsed(spec_string(draw, kind, wild=0.3))


def _bits(rec) -> int:
    try:
        return int(rec.code_type.bits)
    except Exception:  # noqa: BLE001
        return 99


def equiv_equivalent(draw) -> Case:
    from quantspec.equiv import equivalent

    rng = _rng(draw)
    text = spec_string(draw, wild=0.3)
    a = _parsed(text)
    b = _second(draw, a) if a is not None else None
    if a is None or b is None or _rare(draw, 0.04):
        # a wrong argument: not a record, a string, None
        bad_a = a if a is not None else _pick(draw, (text, None, 3))
        bad_b = b if b is not None else _pick(draw, (text, None, "onnx"))
        return Case(lambda: equivalent(bad_a, bad_b, "float16"), f"equivalent({bad_a!r}, {bad_b!r}, 'float16')")
    inputs, sub = _domain(draw, rng, a)
    kw = {}
    if _rare(draw, 0.15):
        kw["chunk"] = _pick(draw, (1, 7, 1000), (0, -1, 1.5, True))
    if _rare(draw, 0.1):
        kw["examples"] = _pick(draw, (0, 1, 3), (-1, "x"))
    if _rare(draw, 0.05):
        kw["keep"] = _pick(draw, (0, 5), (-1, None))
    if _rare(draw, 0.03):
        inputs = _pick(draw, ("float64", None, True, np.zeros(3, np.int64), "codes", "x"))
    if sub is not None:
        kw["subrange"] = sub
    what = f"equivalent(parse({a.spec_string()!r}), parse({b.spec_string()!r}), {_short(inputs)}, **{kw})"

    def call():
        return equivalent(a, b, inputs, **kw)

    oracle = same = None
    domain_types = (a.input_dtype,) if a.kind == "dequantize" else (np.float32, np.float16, "bfloat16")
    if (isinstance(inputs, np.ndarray) and inputs.size and a.channels == 1 and b.channels == 1 and not kw
            and inputs.dtype in [np.dtype(t) for t in domain_types] and _oracle_faithful(a) and _oracle_faithful(b)):
        x = inputs

        def oracle():
            return _equiv_oracle(a, b, x)

        same = _same_diff(x)
    return Case(call, what, oracle, same, False, check=_report_check)


def _oracle_faithful(rec) -> bool:
    """Whether the real runtime this record names computes what the record does on every input (the
    runtimes' own divergences from the spec are documented and tested elsewhere): ONNX records in
    the ``reference`` mode (onnx.reference) or ``onnxruntime`` mode (onnxruntime), float32 to 8/16-bit
    integers in the ``spec`` mode (run on onnxruntime) — but a DequantizeLinear record in the
    ``reference`` mode before opset 19, where onnx.reference has no implementation and quantspec
    computes the unchanged arithmetic (documented) —, every TensorFlow record, and every LiteRT
    record but a DEQUANTIZE that LiteRT's kernel refuses at Prepare (int16 codes with a zero point
    other than 0; uint16 and int32 codes), which the record computes as ``litert.dequantize`` does."""
    if rec.spec == "onnx":
        if rec.compat == "reference" and rec.kind == "dequantize" and _opset(rec) < 19:
            return False      # documented (dq-before-19): onnx.reference has no DequantizeLinear there
        return rec.compat in ("reference", "onnxruntime") or (
            rec.x_dtype == "float" and rec.code_type.name in ("int8", "uint8", "int16", "uint16")
            and getattr(rec, "precision", None) is None)
    if rec.spec == "litert" and rec.kind == "dequantize":
        name = rec.code_type.name
        return name in ("int8", "uint8") or (name == "int16" and not np.any(rec.params.zero_point))
    return True


def _opset(rec) -> int:
    from quantspec.onnx import opsets

    return opsets.version_for(rec.opset)


def _report_check(report) -> None:
    assert report.differing == report.inside + report.outside + report.nonfinite
    assert 0 <= report.differing <= report.inputs
    assert report.differing_bits.size <= report.differing
    str(report)
    report.to_dict()


# -- translate --------------------------------------------------------------------------------------

_TARGETS = ("tf", "onnx", "litert", "tf:QuantizeV2", "tf:Dequantize", "onnx:QuantizeLinear", "onnx:DequantizeLinear",
            "litert:QUANTIZE", "litert:DEQUANTIZE", "onnx output_dtype=uint8", "onnx output_dtype=int8 opset=13",
            "tf:QuantizeV2 mode=SCALED", "tf:QuantizeV2 mode=MIN_FIRST", "onnx compat=reference",
            "onnx x_dtype=float16", "tf T=quint8")
_BAD_TARGETS = ("x", "", "onnx:Foo", "tf:FakeQuant", "onnx output_dtype=x", "onnx foo", "litert scale=1",
                "tf:QuantizeAndDequantize", "onnx opset=x", None, 3)


def equiv_translate(draw) -> Case:
    from quantspec.equiv import translate

    rng = _rng(draw)
    text = spec_string(draw, wild=0.5)
    a = _parsed(text)
    if a is not None and _bits(a) > 8:
        text = _break(draw, text)         # 16-bit codes take seconds to score: a malformed string instead
        a = None
    to = _pick(draw, _TARGETS, _BAD_TARGETS, 0.1)
    inputs = _pick(draw, (None, None, "float16", "bfloat16", "array"), ("float64", True, "codes"), 0.05)
    if inputs == "array" and a is not None:
        inputs = _input_values(draw, rng, a)
    elif inputs == "array":
        inputs = None
    source = text if a is None or draw(st.booleans()) else a

    def check(t):
        assert t.target.spec == (to.split()[0].split(":")[0] if isinstance(to, str) else t.target.spec)
        _roundtrip(t.target)
        if t.report is not None:
            _report_check(t.report)
        str(t)
        t.to_dict()

    return Case(lambda: translate(source, to, inputs=inputs), f"translate({source!r}, {to!r}, inputs={_short(inputs)})",
                check=check)


TARGETS = {
    "equiv.parse": (equiv_parse, 2.0),
    "equiv.equivalent": (equiv_equivalent, 1.5),
    "equiv.translate": (equiv_translate, 1.0),
}
