#!/usr/bin/env python3
"""Regenerate ``src/quantspec/litert/_schema.py`` from the schema that ships in ai-edge-litert.

quantspec reads .tflite files with its own flatbuffer reader (``quantspec.litert.model``) and does
not import ai-edge-litert at run time.  The schema facts that reader needs (field ids and types of
every table it reads, enum and union numbers) are kept as data in ``_schema.py``; this script
derives them from ``ai_edge_litert/schema_py_generated.py`` (the flatc output of LiteRT's
``schema.fbs``) and writes that module.  ``tests/test_litert_model_schema.py`` checks the data
against the installed schema, so the two cannot drift.

Run after upgrading ai-edge-litert:  ``.venv/bin/python tools/make_litert_schema.py``
"""

from __future__ import annotations

import inspect
import pprint
import re
import sys
from pathlib import Path

from ai_edge_litert import schema_py_generated as S

OUT = Path(__file__).resolve().parents[1] / "src" / "quantspec" / "litert" / "_schema.py"

#: The tables the reader walks, besides every member table of the BuiltinOptions union.  Every other
#: table reachable from ``Model`` (sub-tables, vector elements, members of the other unions) is
#: added too: the verifier (``quantspec.litert._verify``) checks the whole file, as LiteRT's does.
CORE_TABLES = ("Model", "OperatorCode", "SubGraph", "Tensor", "QuantizationParameters", "Buffer",
               "Operator", "SignatureDef", "TensorMap", "Metadata", "SparsityParameters",
               "BlockwiseQuantization", "ExternalBuffer", "ExternalBufferGroup")

#: Enum-typed scalar fields (schema.fbs declares them with an enum type; the generated Python only
#: shows the underlying integer).  In the BuiltinOptions tables every 8-bit integer field is an
#: enum; those are named here too, and the test checks that none is missed.
ENUM_FIELDS = {
    ("Tensor", "type"): "TensorType",
    ("Operator", "builtin_options_type"): "BuiltinOptions",
    ("Operator", "builtin_options2_type"): "BuiltinOptions2",
    ("Operator", "custom_options_format"): "CustomOptionsFormat",
    ("QuantizationParameters", "details_type"): "QuantizationDetails",
}
OPTION_ENUMS = {  # option field name -> enum, in every BuiltinOptions table that has the field
    "fused_activation_function": "ActivationFunctionType",
    "padding": "Padding",
    "quantized_bias_type": "TensorType",
    "output_type": "TensorType",
    "out_type": "TensorType",
    "idx_out_type": "TensorType",
    "in_data_type": "TensorType",
    "out_data_type": "TensorType",
    "key_dtype": "TensorType",
    "value_dtype": "TensorType",
    "weights_format": "FullyConnectedOptionsWeightsFormat",
    "kernel_type": "LSTMKernelType",
    "combiner": "CombinerType",
    "mode": "MirrorPadMode",
    ("LSHProjectionOptions", "type"): "LSHProjectionType",
}

def op_options() -> dict:
    """Builtin operator -> the BuiltinOptions table its parser reads (tflite/core/api/
    flatbuffer_conversions.cc ``ParseOpData``: ``op->builtin_options_as_<Table>()``), for the ops of
    the int8 spec list and QUANTIZE / DEQUANTIZE; None: the op has no options.  The test model
    builder (tests/support/litert_build.py) keeps this table; it is copied from there."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
    try:
        from litert_build import OPTIONS_TABLE
    finally:
        sys.path.pop(0)
    return dict(OPTIONS_TABLE)


_SCALARS = {"Bool": "bool", "Int8": "int8", "Uint8": "uint8", "Int16": "int16", "Uint16": "uint16",
            "Int32": "int32", "Uint32": "uint32", "Int64": "int64", "Uint64": "uint64",
            "Float32": "float32", "Float64": "float64"}


def snake(camel: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel)


def enums() -> dict[str, dict[int, str]]:
    out = {}
    for name, cls in vars(S).items():
        if not inspect.isclass(cls) or name.endswith("T") and hasattr(S, name[:-1]):
            continue
        attrs = {k: v for k, v in vars(cls).items() if not k.startswith("_")}
        if attrs and all(type(v) is int for v in attrs.values()):
            out[name] = {v: k for k, v in sorted(attrs.items(), key=lambda kv: kv[1])}
    return dict(sorted(out.items()))


def table_fields(table: str, union_names: set[str]) -> list[tuple]:
    src = inspect.getsource(S)
    adds = re.findall(rf"^def {table}Add(\w+)\(builder, (\w+)\):\n    builder\.Prepend(\w+?)Slot\((\d+), .*, (.+)\)$",
                      src, re.M)
    fields = []
    for camel_method, param, kind, slot, default in adds:
        name = snake(param)
        enum = ENUM_FIELDS.get((table, name))
        if kind != "UOffsetTRelative":
            ftype = _SCALARS[kind]
            value = {"True": True, "False": False}.get(default, None)
            value = value if value is not None else (float(default) if ftype.startswith("float") else int(default))
            if ftype == "bool":
                value = bool(value)
            if table in union_names or table in OPTION_TABLES:
                enum = enum or OPTION_ENUMS.get((table, name)) or OPTION_ENUMS.get(name)
        else:
            acc = inspect.getsource(getattr(getattr(S, table), camel_method))
            value = None
            if "self._tab.Union(" in acc:
                unpack = inspect.getsource(getattr(S, table + "T")._UnPack)
                m = re.search(rf"(\w+)Creator\(self\.{param}Type", unpack)
                ftype = "union:" + m.group(1)
            elif "self._tab.Vector(o)" in acc:
                if "Indirect(x)" in acc:
                    ftype = "[" + re.search(r"obj = (\w+)\(\)", acc).group(1) + "]"
                elif "self._tab.String(" in acc:
                    ftype = "[string]"
                else:
                    ftype = "[" + _SCALARS[re.search(r"number_types\.(\w+)Flags, a", acc).group(1)] + "]"
            elif "self._tab.String(" in acc:
                ftype = "string"
            elif "Indirect(o + self._tab.Pos)" in acc:
                ftype = re.search(r"obj = (\w+)\(\)", acc).group(1)
            else:
                raise SystemExit(f"cannot classify {table}.{param}:\n{acc}")
        fields.append((name, int(slot), ftype, value, enum))
    if not fields and not hasattr(S, table + "Start"):
        raise SystemExit(f"no table {table}")
    return sorted(fields, key=lambda f: f[1])


OPTION_TABLES: set[str] = set()


def main() -> int:
    all_enums = enums()
    OPTION_TABLES.update(v for k, v in all_enums["BuiltinOptions"].items() if k != 0)
    tables = {}
    for t in (*CORE_TABLES, *sorted(OPTION_TABLES)):
        tables[t] = tuple(table_fields(t, set()))
    # the rest of what is reachable from Model, in the order found
    pending = list(tables)
    while pending:
        for fname, fid, ftype, default, enum in tables[pending.pop(0)]:
            inner = ftype[1:-1] if ftype.startswith("[") else ftype
            refs = ([v for k, v in all_enums[inner[6:]].items() if k != 0] if inner.startswith("union:")
                    else [inner] if hasattr(S, inner + "Start") else [])
            for t in refs:
                if t not in tables:
                    tables[t] = tuple(table_fields(t, set()))
                    pending.append(t)
    # a union's type field is an enum: the union's
    for t, fields in tables.items():
        unions = {f[0] + "_type": f[2][6:] for f in fields if f[2].startswith("union:")}
        tables[t] = tuple((n, i, ty, d, e or unions.get(n)) for n, i, ty, d, e in fields)
    OP_OPTIONS = op_options()
    for op, table in OP_OPTIONS.items():
        assert op in all_enums["BuiltinOperator"].values(), op
        assert table is None or table in tables, table
    used_enums = sorted({f[4] for fs in tables.values() for f in fs if f[4]} | {"BuiltinOperator", "TensorType"})
    text = [
        '"""The LiteRT flatbuffer schema as data: what quantspec\'s .tflite reader needs to know.',
        "",
        "GENERATED by tools/make_litert_schema.py from ai_edge_litert/schema_py_generated.py",
        f"(ai-edge-litert {_version()}); do not edit by hand.  tests/test_litert_model_schema.py checks",
        "every number here against the installed schema.",
        "",
        "- ``ENUMS``: enum name -> {number: member name} (BuiltinOperator, TensorType, the option enums,",
        "  and the union type enums BuiltinOptions / BuiltinOptions2 / QuantizationDetails, whose member",
        "  names are the table names of the union's members).",
        "- ``TABLES``: table name -> fields, each ``(snake_case name, field id, type, default, enum)``;",
        "  type is a scalar (``int8`` ... ``float64``, ``bool``), ``string``, a table name, ``[elem]``",
        "  for a vector, or ``union:Name`` for a union value (its type field is the field before it).",
        "- ``OP_OPTIONS``: builtin operator -> the options table its parser reads (None: no options),",
        "  for the ops of the int8 spec list and QUANTIZE / DEQUANTIZE.",
        '"""',
        "",
        "# fmt: off",
        "ENUMS = {",
        *[_wrapped(f"    {e!r}: ", all_enums[e]) for e in used_enums],
        "}",
        "",
        "TABLES = " + pprint.pformat(tables, width=110, compact=False, sort_dicts=False),
        "",
        "OP_OPTIONS = " + pprint.pformat(OP_OPTIONS, width=110, compact=True, sort_dicts=False),
        "",
    ]
    OUT.write_text("\n".join(text))
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(tables)} tables)")
    return 0


def _wrapped(head: str, mapping: dict) -> str:
    """``head`` + the dict literal of ``mapping``, wrapped at 110 columns, with a trailing comma."""
    items = [f"{k!r}: {v!r}" for k, v in mapping.items()]
    lines, line = [], head + "{"
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "},")
        if len(line) + len(piece) + 1 > 110:
            lines.append(line.rstrip())
            line = " " * (len(head) + 1)
        line += piece + " "
    lines.append(line.rstrip())
    return "\n".join(lines)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("ai-edge-litert")
    except Exception:  # pragma: no cover
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
