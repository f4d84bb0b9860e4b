"""quantspec's copy of the LiteRT schema (``quantspec.litert._schema``) against the schema that ships
in ai-edge-litert (``ai_edge_litert.schema_py_generated``, the flatc output of ``schema.fbs``).

The field ids, scalar types, defaults and vector element sizes are read back from the generated
builder functions (``<Table>Add<Field>`` calls ``builder.Prepend<Type>Slot(id, value, default)``),
through a recording stand-in for the flatbuffers builder, so this test does not share code with the
generator (tools/make_litert_schema.py).
"""

from __future__ import annotations

import pytest

from quantspec.litert import _schema
from refs import require


@pytest.fixture(scope="module")
def S():
    return require("ai_edge_litert.schema_py_generated")


class Recorder:
    """Stands in for ``flatbuffers.Builder``: records the slot calls of the generated functions."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def record(*args):
            self.calls.append((name, args))
            return 0
        return record


def camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def pascal(snake: str) -> str:
    c = camel(snake)
    return c[:1].upper() + c[1:]


_PREPEND = {"bool": "PrependBoolSlot", "int8": "PrependInt8Slot", "uint8": "PrependUint8Slot",
            "int16": "PrependInt16Slot", "uint16": "PrependUint16Slot", "int32": "PrependInt32Slot",
            "uint32": "PrependUint32Slot", "int64": "PrependInt64Slot", "uint64": "PrependUint64Slot",
            "float32": "PrependFloat32Slot", "float64": "PrependFloat64Slot"}
_SIZES = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
          "uint64": 8, "float32": 4, "float64": 8}


def test_enums_match(S):
    for name, members in _schema.ENUMS.items():
        cls = getattr(S, name)
        expected = {v: k for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int)}
        assert members == expected, name


def test_every_builtin_options_member_has_a_table(S):
    members = {k for k, v in vars(S.BuiltinOptions).items() if not k.startswith("_") and k != "NONE"}
    assert members <= set(_schema.TABLES)


@pytest.mark.parametrize("table", sorted(_schema.TABLES))
def test_table_fields_match(S, table):
    fields = _schema.TABLES[table]
    rec = Recorder()
    getattr(S, f"{table}Start")(rec)
    ((start, (nfields,)),) = rec.calls
    assert start == "StartObject"
    # every field of the table is described (ids 0..n-1, minus the deprecated ids flatc skips)
    ids = [f[1] for f in fields]
    assert len(set(ids)) == len(ids) and (not ids or max(ids) == nfields - 1)
    generated_adds = {n for n in dir(S) if n.startswith(f"{table}Add")}
    assert generated_adds == {f"{table}Add{pascal(f[0])}" for f in fields}
    for fname, fid, ftype, default, enum in fields:
        rec = Recorder()
        getattr(S, f"{table}Add{pascal(fname)}")(rec, 7)
        ((method, args),) = rec.calls
        assert args[0] == fid, (table, fname)
        if ftype in _PREPEND:
            assert method == _PREPEND[ftype], (table, fname)
            assert args[2] == default and type(args[2]) in (type(default), int), (table, fname)
        else:
            assert method == "PrependUOffsetTRelativeSlot", (table, fname)
        if ftype.startswith("[") and hasattr(S, f"{table}Start{pascal(fname)}Vector"):
            rec = Recorder()
            getattr(S, f"{table}Start{pascal(fname)}Vector")(rec, 3)
            ((method, (elem_size, n, _align)),) = rec.calls
            elem = ftype[1:-1]
            assert elem_size == _SIZES.get(elem, 4), (table, fname)
        if enum is not None:
            values = _schema.ENUMS[enum]
            bits = 8 * _SIZES[ftype]
            lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if ftype.startswith("int") else (0, (1 << bits) - 1)
            assert all(lo <= v <= hi for v in values), (table, fname)


def test_table_and_union_field_types_match(S):
    """Sub-table, string and union fields have the type the generated accessors read."""
    import inspect

    for table, fields in _schema.TABLES.items():
        for fname, fid, ftype, default, enum in fields:
            if ftype in _PREPEND:
                continue
            src = inspect.getsource(getattr(getattr(S, table), pascal(fname)))
            assert f"Offset({4 + 2 * fid})" in src, (table, fname)
            if ftype == "string":
                assert "self._tab.String(o + self._tab.Pos)" in src
            elif ftype.startswith("union:"):
                assert "self._tab.Union(" in src
                type_field = [f for f in fields if f[0] == fname + "_type"]
                assert type_field and type_field[0][1] == fid - 1 and type_field[0][4] == ftype[6:]
            elif ftype.startswith("["):
                assert "self._tab.Vector(o)" in src
                elem = ftype[1:-1]
                if elem not in _SIZES and elem != "string":
                    assert f"obj = {elem}()" in src
            else:
                assert f"obj = {ftype}()" in src and "Indirect(o + self._tab.Pos)" in src


def test_eight_bit_option_fields_are_enums():
    """In the BuiltinOptions tables every 8-bit integer field is an enum in schema.fbs (padding,
    fused activation, tensor types, modes); the generated Python does not say so, so this checks
    that the hand-kept list of enum fields misses none."""
    members = set(_schema.ENUMS["BuiltinOptions"].values()) - {"NONE"}
    for table in members:
        for fname, fid, ftype, default, enum in _schema.TABLES[table]:
            if ftype in ("int8", "uint8"):
                assert enum is not None, (table, fname)


def test_op_options_match_the_test_builder():
    from litert_build import OPTIONS_TABLE

    assert _schema.OP_OPTIONS == OPTIONS_TABLE


def test_operator_versions_match_the_installed_litert():
    """quantspec.litert._opversions (tools/make_litert_op_versions.py) against LiteRT itself, for the
    operators of the int8 op table: the highest version loads, the next one and version 0 do not."""
    require("ai_edge_litert.interpreter")
    import sys
    from pathlib import Path

    from quantspec.litert import OP_TABLE
    from quantspec.litert._opversions import REFERENCE_VERSIONS, VERSIONS

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    try:
        from make_litert_op_versions import loads
    finally:
        sys.path.pop(0)
    from ai_edge_litert import interpreter as L
    from ai_edge_litert import schema_py_generated as S

    for table, resolver in ((VERSIONS, L.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES),
                            (REFERENCE_VERSIONS, L.OpResolverType.BUILTIN_REF)):
        for name in sorted(set(OP_TABLE) | {"QUANTIZE", "DEQUANTIZE"}):
            code = getattr(S.BuiltinOperator, name)
            lo, hi = table[name]
            assert loads(code, hi, resolver) and loads(code, lo, resolver), name
            assert not loads(code, hi + 1, resolver) and not loads(code, lo - 1, resolver), name
