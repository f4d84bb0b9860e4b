"""The table of docs/translate.md: what the real converters make of a quantizer, and on how many
inputs the two differ, counted over every input.

    python tools/translate_table.py           # recompute everything (every float32 input: minutes)
                                              # and rewrite the table in docs/translate.md
    python tools/translate_table.py --check   # recompute the records and the float16 counts and
                                              # compare them with the table (the tests run this)
    python tools/translate_table.py --check --full   # ... and the float32 counts too

The table sits between ``<!-- BEGIN translate-table -->`` and ``<!-- END translate-table -->``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "translate.md"
BEGIN, END = "<!-- BEGIN translate-table -->", "<!-- END translate-table -->"

#: (converter, source, target of translate)
ROWS = [
    ("TFLite converter", "tf:FakeQuant variant=args min=-6 max=6", "litert"),
    ("TFLite converter", "tf:FakeQuant variant=args min=-1.3 max=2.7", "litert"),
    ("TFLite converter", "tf:FakeQuant variant=args min=-1.3 max=2.7 narrow_range=true", "litert"),
    ("TFLite converter", "tf:FakeQuant variant=vars min=0.5 max=2.7", "litert"),
    ("tf2onnx", "tf:FakeQuant variant=args min=-6 max=6", "onnx"),
    ("tf2onnx", "tf:FakeQuant variant=vars min=-1.3 max=2.7", "onnx"),
    ("tf2onnx", "tf:QuantizeAndDequantize version=3 min=-1.3 max=2.7", "onnx"),
    ("tf2onnx", "tf:QuantizeAndDequantize version=4 min=0 max=3 signed_input=false range_given=true", "onnx"),
    ("tf2onnx --tflite", "litert:QUANTIZE scale=0.05 zero_point=-3", "onnx"),
    ("tf2onnx --tflite", "litert:DEQUANTIZE scale=0.05 zero_point=-3", "onnx"),
    ("none (tf2onnx refuses)", "tf:QuantizeV2 mode=MIN_COMBINED T=qint8 min=-6 max=6", "onnx"),
    ("none (tf2onnx refuses)", "tf:QuantizeV2 mode=SCALED round_mode=HALF_TO_EVEN T=qint8 min=-6 max=6", "onnx"),
    ("none (tf2onnx refuses)", "tf:QuantizeV2 mode=MIN_FIRST T=quint8 min=-1.3 max=2.7", "onnx"),
]

HEADER = ("| converter | source | the converter's record | differing float32 inputs: all (inside / outside / "
          "inf-NaN) | differing float16 inputs | translate's choice | its differing float32 inputs |\n"
          "|---|---|---|---|---|---|---|")


def _count(report) -> str:
    if report is None:
        return "-"
    if report.kind == "values":
        return f"{report.differing:,} of {report.inputs:,} codes"
    return f"{report.differing:,} ({report.inside:,} / {report.outside:,} / {report.nonfinite:,})"


def compute(full: bool) -> list[list[str]]:
    """The table's cells; the float32 counts only when ``full`` (else "?")."""
    sys.path.insert(0, str(ROOT / "src"))
    from quantspec.equiv import equivalent, parse, translate

    rows = []
    for converter, source, target in ROWS:
        src = parse(source)
        t = translate(src, target, inputs=None)
        conv = t.converter.record if t.converter is not None else None
        dq = src.kind == "dequantize"
        conv_cell = conv.spec_string() if conv is not None else "—"
        f16 = f32 = "-"
        if conv is not None:
            f16 = _count(equivalent(src, conv, "codes" if dq else "float16"))
            if full or dq:
                f32 = _count(equivalent(src, conv, "codes" if dq else "float32", keep=0))
            else:
                f32 = "?"
        if conv is not None and t.target == conv:
            choice, choice32 = "the same", "the same"
        else:
            choice = t.target.spec_string()
            choice32 = _count(equivalent(src, t.target, "codes" if dq else "float32", keep=0)) if (full or dq) else "?"
        rows.append([converter, f"`{source}`", f"`{conv_cell}`" if conv is not None else conv_cell, f32, f16,
                     f"`{choice}`" if choice != "the same" else choice, choice32])
    return rows


def render(rows: list[list[str]]) -> str:
    return HEADER + "\n" + "\n".join("| " + " | ".join(r) + " |" for r in rows) + "\n"


def _current() -> list[list[str]]:
    text = DOC.read_text()
    body = text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip().splitlines()[2:]
    return [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in body]


def check(full: bool) -> list[str]:
    """The cells of the table that differ from a fresh computation (float32 counts only with ``full``)."""
    have = _current()
    want = compute(full)
    bad = []
    if len(have) != len(want):
        return [f"the table has {len(have)} rows, the script {len(want)}"]
    for i, (h, w) in enumerate(zip(have, want)):
        for j, (hc, wc) in enumerate(zip(h, w)):
            if wc == "?":
                continue
            if hc != wc:
                bad.append(f"row {i + 1}, column {j + 1}: the table says {hc!r}, the script {wc!r}")
    return bad


def write() -> None:
    text = DOC.read_text()
    start, stop = text.index(BEGIN) + len(BEGIN), text.index(END)
    DOC.write_text(text[:start] + "\n" + render(compute(True)) + text[stop:])


def main(argv: list[str]) -> int:
    if "--check" in argv:
        bad = check("--full" in argv)
        for b in bad:
            print(b)
        return 1 if bad else 0
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
