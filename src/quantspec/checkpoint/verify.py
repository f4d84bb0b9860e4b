"""``quantspec.checkpoint.verify``: does a quantized checkpoint hold exactly what its float source and
its scheme give?

``verify(src, dst)`` re-derives every tensor of the quantized checkpoint ``dst`` from the float
checkpoint ``src`` and ``dst``'s manifest — the scheme of each tensor, chosen parameters and codes,
placed as ``dst``'s layout stores them — and compares the bytes: codes, scales, zero points, kept
tensors; and checks that ``dst``'s manifest and index describe that run as ``convert`` writes it
(:func:`_check_description`).  ``params_from_dst=True`` takes ``dst``'s stored scales and zero points as given (for
checkpoints made by other tools, such as a compressed-tensors checkpoint without a quantspec manifest)
and checks only that each code is what the scheme's operator gives for its input and those
parameters (``quantspec.checkpoint.rederive``).

It streams as ``convert`` does: the unit of work is a slab of rows of one tensor (:class:`Check`), a
pure function of the two checkpoints' files, run by the same backends — this machine's threads, or a
Dask cluster (``dask=``) — so memory holds a few slabs whatever the size.

The report (:class:`VerifyReport`) lists, per tensor, the number of differing elements, the largest
code difference, and the first positions with their float input, the expected code and the code
found; scales and zero points likewise (in the default mode); whether the source bytes still have
the digest the manifest recorded; and, for codes in the compressed-tensors layout that differ, how
many of them are what compressed-tensors' own arithmetic gives (its division in the weight's type).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import __version__
from ..dtypes import qtype
from ..errors import InvalidArgumentError, QuantSpecError
from . import digest as digests
from . import encode, layout, rederive, sources
from .cluster import backend as make_backend
from .cluster import parse as parse_dask
from .ctlayout import CompressedTensorsFormat
from .encode import Task
from .paths import local_path
from .progress import progress_for
from .reader import QuantizedCheckpoint
from .report import Difference, TensorCheck, VerifyReport, format_stats, parse_stats
from .schemes import KEEP, SCHEMES, Recipe, codes_rule, load_recipe
from .stored import Part, Stored
from .writer import header_bytes

__all__ = ["verify", "Check", "CheckResult", "run_check", "POSITIONS"]

#: differing positions kept per tensor and kind (codes, scale, zero point)
POSITIONS = 8


@dataclass(frozen=True)
class Memory(Part):
    """Bytes held in memory that stand at ``base`` in a stored tensor (the expected bytes of a slab)."""

    data: bytes = b""
    base: int = 0

    def read(self, start: int, length: int, tensor: str) -> np.ndarray:
        i = start - self.base
        if i < 0 or i + length > len(self.data):
            raise AssertionError("expected bytes read outside the slab they were computed for")
        return np.frombuffer(self.data, np.uint8, length, i)


@dataclass(frozen=True)
class Check:
    """Rows ``[r0, r1)`` of tensor ``name``.  ``kind``: "scan" (a per-tensor scheme's range),
    "derive" (the default mode: compute the outputs, compare bytes), "params" (codes from the stored
    parameters) or "kept" (a tensor stored as it was: compare its bytes)."""

    kind: str
    name: str
    source: sources.SourceTensor
    r0: int
    r1: int
    entry: Any = None                 # derive / scan: the scheme's outputs in DST's layout (offsets 0)
    stored: Stored | None = None      # derive / params
    data: Part | None = None          # kept: the stored tensor; derive: compressed-tensors' weight_shape
    params: tuple | None = None       # derive: a per-tensor scheme's (scale, zero point)
    digest: str | None = None         # the algorithm of the digest to compute (None: none)
    explain: bool = False             # count the differing codes compressed-tensors' arithmetic gives

    @property
    def nbytes(self) -> int:
        return (self.r1 - self.r0) * self.source.row_bytes


@dataclass
class CheckResult:
    check: Check
    piece: bytes | None = None
    minmax: tuple[float, float] | None = None
    nonfinite_row: int = -1
    elements: int = 0
    codes: tuple[int, float, list] = (0, 0, [])        # (differing, largest difference, positions)
    scale: tuple[int, list] = (0, [])
    zero_point: tuple[int, list] = (0, [])
    other: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    explained: int = 0
    stats: np.ndarray | None = None                     # derive: the slab's error sums, as convert's


def _positions(diff: np.ndarray, shape: tuple[int, ...], r0: int) -> np.ndarray:
    flat = np.flatnonzero(diff)[:POSITIONS]
    cols = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return flat + r0 * cols if shape else flat


def _index(i: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(v) for v in np.unravel_index(i, shape)) if shape else ()


def _value(v) -> float | int:
    v = np.asarray(v)
    try:
        integer = qtype(v.dtype).kind == "int" or v.dtype.kind in "iub"
    except Exception:
        integer = v.dtype.kind in "iub"
    return int(v.astype(np.int64)) if integer else float(v.astype(np.float32))


def run_check(c: Check) -> CheckResult:
    """Run one check (see :class:`Check`)."""
    t = c.source
    raw = sources.read_rows(t, c.r0, c.r1)
    res = CheckResult(c, piece=digests.piece(raw, c.digest) if c.digest else None)
    rows = c.r1 - c.r0
    if c.kind == "kept":
        found = c.data.read(c.r0 * t.row_bytes, rows * t.row_bytes, c.name)
        item = max(1, t.itemsize)
        a, b = raw.reshape(-1, item), found.reshape(-1, item)
        diff = (a != b).any(axis=1)
        res.elements = diff.size
        if diff.any():
            view = _element_type(t.dtype, item)
            pos = [Difference(_index(int(i), t.shape), None, _value(a[int(i) - c.r0 * (diff.size // rows)].view(view)[0]),
                              _value(b[int(i) - c.r0 * (diff.size // rows)].view(view)[0]))
                   for i in _positions(diff, t.shape, c.r0)]
            res.codes = (int(diff.sum()), 0, pos)
        return res
    cols = c.entry.cols if c.entry is not None else c.stored.cols
    if c.kind == "scan":
        r = encode.run(Task(c.entry, c.r0, c.r1, "stats", hash=False))
        res.minmax = r.minmax
        return res
    x = encode._as_float32(raw, t.dtype, rows, cols)
    bad = ~np.isfinite(x).all(axis=1)
    if bad.any():
        res.nonfinite_row = c.r0 + int(np.argmax(bad))
        return res
    st = c.stored
    shape = (rows, *st.shape[1:])
    res.elements = rows * cols
    if c.kind == "derive":
        stats, arrays = encode.compute(Task(c.entry, c.r0, c.r1, "encode", None, c.params, hash=False), raw)
        res.stats = stats[:3].copy()
        expected = st
        parts = {"codes": st.codes_part, "scale": st.scale_part, "zero_point": st.zp_part, "shape": c.data}
        for role, offset, data in encode.placed(c.entry, c.r0, c.r1, arrays):
            data = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
            part = parts.get(role)
            if part is None:
                res.other.append(f"{role}: not stored")
                continue
            found = part.read(offset, data.size, c.name)
            if np.array_equal(found, data):
                continue
            if role == "shape":
                res.other.append("weight_shape differs")
                continue
            mem = Memory(part.name, part.path, part.offset, part.nbytes, part.dtype, part.shape, part.packing,
                         data=data.tobytes(), base=offset)
            key = {"codes": "codes_part", "scale": "scale_part", "zero_point": "zp_part"}[role]
            expected = dataclasses.replace(expected, **{key: mem})
        if expected is st:
            return res
        want_codes = expected.codes(c.r0, c.r1) if expected.codes_part is not st.codes_part else None
        for role, reader in (("scale", Stored.scale), ("zero_point", Stored.zero_point)):
            part_e = expected.scale_part if role == "scale" else expected.zp_part
            part_f = st.scale_part if role == "scale" else st.zp_part
            if part_e is part_f:
                continue
            e, f = reader(expected, c.r0, c.r1), reader(st, c.r0, c.r1)
            diff = np.asarray(e != f) if role == "zero_point" else ~_same(e, f)
            pshape = (st.rows, st.groups) if st.granularity == "block" else (st.rows,) if st.groups else ()
            pos = []
            for i in np.flatnonzero(diff)[:POSITIONS]:
                first = c.r0 * max(1, st.groups) if st.groups else 0
                pos.append(Difference(_index(int(i) + first, pshape), None, _value(np.asarray(e).reshape(-1)[i]),
                                      _value(np.asarray(f).reshape(-1)[i])))
            setattr(res, role, (int(np.count_nonzero(diff)), pos))
        if want_codes is None:
            return res
        got = st.codes(c.r0, c.r1)
    else:
        scale = st.scale(c.r0, c.r1)
        want_codes = rederive.codes(st.codes_rule, st.codes_type, x.reshape(shape), scale, st.zero_point(c.r0, c.r1),
                                    st.attributes())
        got = st.codes(c.r0, c.r1)
        if codes_rule(st.codes_rule).divides:
            # x / 0 is not defined: under a zero scale any code dequantizes to 0, none is checked
            zero = rederive._expand(np.asarray(scale).astype(np.float32), want_codes, st.attributes()) == 0
            if zero.any():
                want_codes = np.where(zero, got, want_codes)
                res.notes.append("codes under a zero scale are not checked (x / 0 is not defined; any code "
                                 "dequantizes to 0)")
    diff = ~_same(want_codes, got)
    if not diff.any():
        return res
    dist = rederive.code_distance(want_codes, got, st.codes_type)
    xs = x.reshape(-1)
    pos = []
    for i in _positions(diff.reshape(-1), st.shape, c.r0):
        j = int(i) - c.r0 * cols
        pos.append(Difference(_index(int(i), st.shape), float(xs[j]), _value(want_codes.reshape(-1)[j]),
                              _value(got.reshape(-1)[j])))
    res.codes = (int(diff.sum()), float(dist[diff].max()), pos)
    if c.explain:
        ct = rederive.ct_codes(st.codes_type, x.reshape(shape), st.scale(c.r0, c.r1), st.zero_point(c.r0, c.r1),
                               st.attributes(), t.dtype, _offset(st))
        res.explained = int((_same(ct, got) & diff).sum())
    return res


def _element_type(dtype: str, itemsize: int) -> np.dtype:
    """The numpy / ml_dtypes type of a kept tensor's elements (raw bytes when it has none)."""
    try:
        d = qtype(dtype).dtype
    except Exception:
        try:
            d = np.dtype(dtype)
        except TypeError:
            return np.dtype(np.uint8)
    return d if d.itemsize == itemsize else np.dtype(np.uint8)


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise equality of codes or scales by their bits (-0 and +0 differ; NaN equals NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f" or a.dtype.kind == "V" or qtype(a.dtype).kind == "float":
        n = a.dtype.itemsize
        u = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[n]
        return np.ascontiguousarray(a).view(u) == np.ascontiguousarray(b).astype(a.dtype).view(u)
    return a == b


def _offset(st: Stored) -> int:
    """What the layout adds to compressed-tensors' signed codes (quantspec's unsigned schemes)."""
    t = qtype(st.codes_type)
    return 0 if t.signed or t.is_float else 1 << (t.bits - 1)


# -- the run ----------------------------------------------------------------------------------------
RULES = ("scheme", "quantizelinear", "compressed-tensors")


def verify(src: str | os.PathLike, dst: str | os.PathLike, *, params_from_dst: bool = False, rule: str | None = None,
           dask: Any = None, progress: Any = False) -> VerifyReport:
    """Check the quantized checkpoint ``dst`` against its float source ``src`` (module docstring).

    ``params_from_dst``: take ``dst``'s stored scales and zero points as given and check only the
    codes.  ``rule``: what the codes are checked against — "scheme" (the manifest's scheme of each
    tensor, recomputed from ``src``), "quantizelinear" (QuantizeLinear of the stored parameters: the
    same as ``params_from_dst=True``), "compressed-tensors" (compressed-tensors' arithmetic,
    recomputed from ``src``: :mod:`.ctverify`); None: "compressed-tensors" for a compressed-tensors
    checkpoint without a quantspec manifest or made with a compressed-tensors preset,
    "quantizelinear" when ``params_from_dst``, else "scheme".  ``dask``: as for ``convert``.
    ``progress``: False (default), None (a bar on a terminal), True, or a callable.  Unreadable or
    damaged input raises a :class:`~quantspec.errors.TensorFileError`; differences are reported,
    not raised (``report.ok``)."""
    start = time.perf_counter()
    if not isinstance(params_from_dst, bool):
        raise InvalidArgumentError("params_from_dst", "must be True or False", params_from_dst)
    if dask is not None:
        parse_dask(dask)
    if rule is not None and rule not in RULES:
        raise InvalidArgumentError("rule", "must be one of " + ", ".join(RULES), rule)
    src, dst = local_path(src, "src"), local_path(dst, "dst")
    ck = QuantizedCheckpoint(dst)
    presets = not ck.foreign and any(SCHEMES.get(ck.scheme(n)) is not None and SCHEMES[ck.scheme(n)].preset
                                     is not None for n in ck.names() if ck.scheme(n) != KEEP)
    if rule is None:
        presets = not ck.foreign and any(SCHEMES.get(ck.scheme(n)) is not None and SCHEMES[ck.scheme(n)].preset
                                         is not None for n in ck.names() if ck.scheme(n) != KEEP)
        rule = ("quantizelinear" if params_from_dst else "compressed-tensors" if ck.foreign or presets
                else "scheme")
    if rule == "compressed-tensors":
        if params_from_dst:
            raise InvalidArgumentError("params_from_dst", "is the quantizelinear rule; the compressed-tensors rule "
                                       "recomputes every parameter from the source", True)
        if ck.layout != "compressed-tensors":
            raise InvalidArgumentError("rule", "compressed-tensors checks a compressed-tensors checkpoint; DST is in "
                                       f"the {ck.layout} layout", rule)
        from .ctverify import verify_ct

        report = verify_ct(src, dst)
        if ck.layout == "compressed-tensors" and not ck.foreign:
            _check_config(ck, sources.discover(src), report)
        report.seconds = time.perf_counter() - start
        return report
    if rule == "quantizelinear":
        params_from_dst = True
        if presets:
            raise InvalidArgumentError("rule", "quantizelinear does not express compressed-tensors presets (their "
                                       "quotient is rounded to the weight's type; NVFP4 and 2-D blocks have no "
                                       "QuantizeLinear form): check them with the compressed-tensors rule", rule)
    elif rule == "scheme" and ck.foreign:
        raise InvalidArgumentError("rule", "scheme needs the manifest of a quantspec conversion (DST has none): check "
                                   "it with the compressed-tensors rule, or quantizelinear", rule)
    source = sources.discover(src)
    report = VerifyReport(str(src), str(dst), params_from_dst, ck.layout, rule=rule)
    checks, scans, steps = _plan(ck, source, params_from_dst, report)
    if ck.layout == "compressed-tensors" and not ck.foreign:
        _check_config(ck, source, report)
    if not ck.foreign:
        _check_embedded(ck, report)
    be = make_backend(dask)
    prog = progress_for(progress)
    try:
        prog.start(sum(c.nbytes for c in checks) + sum(c.nbytes for c in scans), 0)
        sums = _run(be, prog, ck, checks, scans, report)
        if not ck.foreign and not params_from_dst:
            _check_description(ck, source, report, sums, steps)
    finally:
        prog.close()
        be.close()
        sources.close_all()
    report.seconds = time.perf_counter() - start
    return report


#: fields of a tensor's record in quantspec.json that its shard's header does not repeat (known only
#: once every shard is written)
_JSON_ONLY = ("shard", "error")


def _check_embedded(ck: QuantizedCheckpoint, report: VerifyReport) -> None:
    """Each shard's header repeats the manifest records of its tensors (``quantspec.manifest`` in its
    metadata: the checkpoint's description where ``quantspec.json`` is lost): they must be
    ``quantspec.json``'s records, less :data:`_JSON_ONLY`, for exactly the tensors that file places in
    the shard."""
    placed: dict[str, list[str]] = {}
    for name, rec in ck.manifest.get("tensors", {}).items():
        shard = rec.get("shard") if isinstance(rec, dict) else None
        if isinstance(shard, str):
            placed.setdefault(shard, []).append(name)
    for shard in sorted(placed):
        if not (ck.path / shard).is_file():
            continue                                   # reported by the tensors' checks
        try:
            embedded = json.loads(ck._metadata(shard).get("quantspec.manifest", ""))
            records = embedded["tensors"]
            ok = isinstance(records, dict)
        except (ValueError, TypeError, KeyError):
            ok = False
        if not ok:
            report.files.append(f"{shard}: its header's manifest is missing or damaged")
            continue
        for name in sorted(set(placed[shard]) | set(records)):
            rec = ck.manifest["tensors"].get(name)
            want = {k: v for k, v in rec.items() if k not in _JSON_ONLY} if isinstance(rec, dict) else None
            if name not in placed[shard] or records.get(name) != want:
                report.files.append(f"{shard}: its header's manifest differs from quantspec.json (tensor {name!r})")
                break


def _check_config(ck: QuantizedCheckpoint, source: sources.Source, report: VerifyReport) -> None:
    """A compressed-tensors checkpoint with a quantspec manifest: its ``config.json`` must be the
    source's ``config.json`` (if any) with the ``quantization_config`` that ``convert`` writes for the
    schemes the manifest records (vLLM and transformers read the config, not the manifest)."""
    by_name = {t.name: t for t in source.tensors}
    names = ck.names()
    if any(n not in by_name for n in names):
        return                                        # reported per tensor; no plan to rebuild
    plan = _ConfigPlan([_ConfigEntry(ck.scheme(n), by_name[n]) for n in names])
    fmt = CompressedTensorsFormat()
    want: dict = {}
    if source.kind == "safetensors":
        spath = os.path.join(source.root, fmt.config_name)
        if os.path.isfile(spath):
            want = _read_json(spath)
            if not isinstance(want, dict):
                want = {}
    try:
        want = dict(want)
        want["quantization_config"] = fmt.quantization_config(plan)
    except (KeyError, ValueError):
        return                                        # a scheme compressed-tensors cannot hold: reported per tensor
    got = _read_json(os.path.join(ck.path, fmt.config_name))
    if got is None:
        report.files.append("config.json: missing or not JSON")
    elif not isinstance(got, dict) or got.get("quantization_config") != want["quantization_config"]:
        report.files.append("config.json: its quantization_config is not the one the manifest's schemes give")
    elif got != want:
        report.files.append("config.json: differs from the source's config.json besides the quantization_config")


#: differences in the description of the run reported, at most
DESCRIPTION_LINES = 5


def _recorded_plan(ck: QuantizedCheckpoint, source: sources.Source):
    """The plan ``convert`` makes for ``source`` with the recipe, shard size and slab size that
    ``ck``'s manifest records; a text saying why there is none."""
    m = ck.manifest
    r = m.get("recipe")
    try:
        if not isinstance(r, dict) or set(r) != {"default", "rules", "include", "exclude", "from"} \
                or not isinstance(r["from"], str):
            raise InvalidArgumentError("recipe", "is not a recipe's description", r)
        given = {"rules": r["rules"]} if r["default"] is None else {"default": r["default"], "rules": r["rules"]}
        rules = load_recipe(given, None, r["include"], r["exclude"])
        recipe = Recipe(rules.default, rules.rules, rules.include, rules.exclude, r["from"])
    except QuantSpecError as e:
        return None, f"its recipe is damaged ({e})"
    sizes = {}
    for key in ("max_shard_size", "slab_bytes"):
        v = m.get(key)
        if type(v) is not int or v <= 0:
            return None, f"its {key} is damaged ({v!r})"
        sizes[key] = v
    try:
        from .converter import FORMATS
        return layout.plan(source, recipe, sizes["max_shard_size"], FORMATS[ck.layout](), sizes["slab_bytes"]), None
    except QuantSpecError as e:
        return None, f"convert cannot plan SRC with the recipe it records ({e})"


def _check_description(ck: QuantizedCheckpoint, source: sources.Source, report: VerifyReport,
                       sums: dict[str, np.ndarray], steps: dict[str, int]) -> None:
    """``quantspec.json`` and the index must describe the run that wrote ``ck``: what ``convert``
    writes for ``source`` with the recipe, shard size and slab size the manifest records — the
    scheme and reason of every tensor, the shards and their tensors, the error summary of every
    quantized tensor whose values are identical (recomputed from the same slabs), the index, and
    each shard's plan fingerprint (when written by this version of quantspec).  Not compared: where
    the source was (``source``, each record's ``file``), the version that wrote it, and the source
    digests (compared per tensor).  A manifest of an earlier format version is not checked."""
    from .converter import finish_record, manifest

    m = ck.manifest
    version = m.get("version")
    if type(version) is int and 0 < version < layout.FORMAT_VERSION:
        return
    found: list[str] = []
    if version != layout.FORMAT_VERSION:
        found.append(f"its format version is {version!r} (this quantspec writes {layout.FORMAT_VERSION})")
    plan, why = _recorded_plan(ck, source)
    if plan is None:
        report.files.append(f"{layout.QuantspecFormat.manifest_name}: {why}")
        return
    checks = {tc.name: tc for tc in report.tensors}
    records = m.get("tensors", {})

    def expected(i: int) -> dict:
        e = plan.entries[i]
        name = e.source.name
        rec = records.get(name) if isinstance(records.get(name), dict) else {}
        src = rec.get("source") if isinstance(rec.get("source"), dict) else {}
        digest = src.get("digest") if isinstance(src.get("digest"), str) else layout.DIGEST_PLACEHOLDER
        tc = checks.get(name)
        same_slabs = name in steps and min(steps[name], e.source.rows) == min(e.slab_rows, e.source.rows)
        ours = e.scheme != KEEP and tc is not None and tc.ok_values and same_slabs and \
            e.scheme == (rec.get("scheme") if isinstance(rec.get("scheme"), str) else None)
        stats = format_stats(sums.get(name, np.zeros(3))) if ours else None
        want = plan.format.entry_manifest(e, digest, stats)
        if e.scheme != KEEP and not ours:                # not recomputed: the recorded summary stands
            if not isinstance(rec.get("stats"), str):
                return {**want, "stats": None, "shard": plan.shards[e.shard].name, "error": None}
            want["stats"] = rec["stats"]
            try:
                return finish_record(plan, i, want)
            except (TypeError, ValueError):
                return {**want, "shard": plan.shards[e.shard].name, "error": rec.get("error")}
        return finish_record(plan, i, want)

    want = manifest(plan, m.get("source"), expected)
    for key in sorted(set(want) | set(m)):
        if key in ("source", "quantspec", "tensors", "version"):
            continue
        if m.get(key) != want.get(key):
            found.append(f"its {key!r} is not what convert writes for SRC")
    got_t = records if isinstance(records, dict) else {}
    found.extend(_source_described(m.get("source"), got_t))
    for name in list(want["tensors"]) + [n for n in got_t if n not in want["tensors"]]:
        a, b = got_t.get(name), want["tensors"].get(name)
        if a is None or b is None:
            found.append(f"tensor {name!r} is {'not recorded' if a is None else 'not in the plan of SRC'}")
            continue
        fields = [k for k in sorted(set(a) | set(b)) if not _same_json(_field(a, k), _field(b, k))]
        if fields:
            found.append(f"tensor {name!r}: its record's {', '.join(repr(f) for f in fields)} "
                         f"{'is' if len(fields) == 1 else 'are'} not what convert writes")
    mname = layout.QuantspecFormat.manifest_name
    for line in found[:DESCRIPTION_LINES]:
        report.files.append(f"{mname}: {line}")
    if len(found) > DESCRIPTION_LINES:
        report.files.append(f"{mname}: and {len(found) - DESCRIPTION_LINES} more differences from what convert writes")
    index = _read_json(os.path.join(ck.path, plan.format.index_name))
    if index != plan.format.index(plan):
        report.files.append(f"{plan.format.index_name}: is not the index convert writes for these shards")
    if m.get("quantspec") == __version__ and plan.shard_fingerprints:
        for sh in plan.shards:
            if not (ck.path / sh.name).is_file():
                continue
            try:
                meta = ck._metadata(sh.name)
            except QuantSpecError:
                continue                                      # reported by the tensors' checks
            if meta.get("quantspec.plan") != plan.shard_fingerprints[sh.index]:
                report.files.append(f"{sh.name}: its header's plan fingerprint is not that of the plan")
            elif not any(line.startswith(f"{sh.name}: ") for line in report.files) and \
                    header_bytes(ck.path / sh.name) != plan.format.header(plan, sh, _finished(plan, sh, got_t, want)):
                report.files.append(f"{sh.name}: its header is not the one convert writes for its tensors "
                                    "(metadata, records, types, shapes, offsets or padding)")


def _source_described(src, records: dict) -> list[str]:
    """Where the source was is not compared, but its description must be one: a path, one of the
    kinds of source, and its files as a list of names that holds the file of every tensor's record
    (for an ``.npz`` member, the file before ``:MEMBER``)."""
    if not isinstance(src, dict) or set(src) != {"path", "kind", "files"}:
        return ["its 'source' is not a description of a source (path, kind, files)"]
    out = []
    if not isinstance(src["path"], str):
        out.append(f"its source path is not a path ({src['path']!r})")
    if src["kind"] not in sources.KINDS:
        out.append(f"its source kind {src['kind']!r} is none of {', '.join(sources.KINDS)}")
    files = src["files"]
    if not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files):
        out.append("its source files are not a list of file names")
        return out
    for name, rec in records.items():
        where = rec.get("source") if isinstance(rec, dict) else None
        f = where.get("file") if isinstance(where, dict) else None
        if not sources.names_a_file_of(f, files, src["kind"]):
            out.append(f"tensor {name!r}: its record's source file {f!r} is not among the source files")
            break
    return out


def _finished(plan, sh, recorded: dict, want: dict) -> dict[int, tuple[str, str | None]]:
    """What ``convert`` passes when it writes the finished header of ``sh`` (entry -> source digest,
    error sums as text): the digests the manifest records (compared with the source's per tensor) and
    the error sums as checked above; a field of the wrong form is its placeholder, which no finished
    header holds."""
    out = {}
    for i in sh.entries:
        e = plan.entries[i]
        rec = recorded.get(e.source.name)
        src = rec.get("source") if isinstance(rec, dict) else None
        digest = src.get("digest") if isinstance(src, dict) else None
        if not (isinstance(digest, str) and len(digest) == len(layout.DIGEST_PLACEHOLDER)
                and digests.algorithm_of(digest)):
            digest = layout.DIGEST_PLACEHOLDER
        stats = None
        if e.scheme != KEEP:
            text = want["tensors"].get(e.source.name, {}).get("stats")
            try:
                if isinstance(text, str) and format_stats(parse_stats(text)) == text:
                    stats = text
            except ValueError:
                pass
        out[i] = (digest, stats)
    return out


def _same_json(a, b) -> bool:
    """Whether two fields of a record are equal as JSON writes them (a NaN error summary, from a
    dequantized value that is NaN under an infinite scale, equals NaN)."""
    if a == b:
        return True
    try:
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    except (TypeError, ValueError):
        return False


def _field(rec: dict, key: str):
    """A record's field as compared: its ``source`` without ``file`` and ``digest``."""
    v = rec.get(key)
    if key == "source" and isinstance(v, dict):
        return {k: x for k, x in v.items() if k not in ("file", "digest")}
    return v


@dataclass
class _ConfigEntry:
    scheme: str
    source: sources.SourceTensor


@dataclass
class _ConfigPlan:
    entries: list


def _read_json(path) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _plan(ck: QuantizedCheckpoint, source: sources.Source, params_from_dst: bool, report: VerifyReport):
    by_name = {t.name: t for t in source.tensors}
    fmt = CompressedTensorsFormat() if ck.layout == "compressed-tensors" else layout.QuantspecFormat()
    checks: list[Check] = []
    scans: list[Check] = []
    steps: dict[str, int] = {}          # rows per derive check, by tensor
    for name in ck.names():
        scheme = ck.scheme(name)
        tc = TensorCheck(name, scheme)
        report.tensors.append(tc)
        t = by_name.get(name)
        if t is None:
            tc.status = "missing in SRC"
            continue
        rec = ck.describe(name)
        recorded = rec.get("source", {}) if isinstance(rec.get("source"), dict) else {}
        want_digest = recorded.get("digest") if not ck.foreign else None
        algorithm = digests.algorithm_of(want_digest) if isinstance(want_digest, str) else None
        if scheme == KEEP:
            data = ck._part(rec.get("data", {"name": name}))
            if data.nbytes != t.nbytes or tuple(data.shape) != tuple(t.shape):
                tc.status = "different"
                tc.other.append(f"shape or size: {tuple(t.shape)} {t.dtype} in SRC, stored {tuple(data.shape)} "
                                f"({data.nbytes} bytes)")
                continue
            step = _slab_rows(t, 1, recorded.get("digest_rows") if algorithm else None)
            for r0 in range(0, t.rows, step):
                checks.append(Check("kept", name, t, r0, min(r0 + step, t.rows), data=data, digest=algorithm))
            if t.rows == 0:
                tc.status = "identical"
            continue
        st = ck.stored(name)
        if tuple(st.shape) != tuple(t.shape) or t.dtype not in ("float", "float16", "bfloat16"):
            tc.status = "different"
            tc.other.append(f"source is {tuple(t.shape)} {t.dtype}, the checkpoint holds {tuple(st.shape)}")
            continue
        if not ck.foreign and recorded.get("dtype") not in (None, t.dtype):
            tc.other.append(f"source type {t.dtype}, the checkpoint was made from {recorded.get('dtype')}")
        step = _slab_rows(t, st.row_step(), recorded.get("digest_rows") if algorithm else None)
        explain = params_from_dst and st.layout == "compressed-tensors"
        if params_from_dst:
            for r0 in range(0, t.rows, step):
                checks.append(Check("params", name, t, r0, min(r0 + step, t.rows), stored=st, digest=algorithm,
                                    explain=explain))
            continue
        outs = fmt.outputs(t, st.scheme)
        entry = layout.Entry(0, t, st.scheme, "", outs, step, format=fmt if hasattr(fmt, "place") else None)
        shape_part = ck._part(next(o.name for o in outs if o.role == "shape")) if any(
            o.role == "shape" for o in outs) else None
        per_tensor = SCHEMES[st.scheme].granularity == "tensor"
        steps[name] = step
        for r0 in range(0, t.rows, step):
            r1 = min(r0 + step, t.rows)
            if per_tensor:
                scans.append(Check("scan", name, t, r0, r1, entry=entry))
            checks.append(Check("derive", name, t, r0, r1, entry=entry, stored=st, data=shape_part, digest=algorithm))
    held = set(ck.names())
    for t in source.tensors:
        if t.name not in held:
            report.tensors.append(TensorCheck(t.name, "", status="missing in DST"))
    return checks, scans, steps


def _slab_rows(t: sources.SourceTensor, step: int, digest_rows: Any) -> int:
    """Rows per check: the manifest's digest slabs (so that the source digest can be compared) when
    they fit the stored layout's alignment, else about ``layout.SLAB_BYTES`` of source."""
    if isinstance(digest_rows, int) and digest_rows > 0 and digest_rows % step == 0 and \
            digest_rows * t.row_bytes <= 4 * layout.SLAB_BYTES:
        return digest_rows
    per = max(1, layout.SLAB_BYTES // max(t.row_bytes, 1))
    return max(step, per - per % step)


def _run(be, prog, ck: QuantizedCheckpoint, checks: list[Check], scans: list[Check],
         report: VerifyReport) -> dict[str, np.ndarray]:
    """Run the checks into ``report``; returns each derived tensor's error sums, added slab by slab in
    order as ``convert`` adds them."""
    by = {tc.name: tc for tc in report.tensors}
    sums: dict[str, np.ndarray] = {}
    ranges: dict[str, list[float]] = {}
    if scans:
        def scanned(c, res):
            lo, hi = res.minmax
            r = ranges.setdefault(c.name, [lo, hi])
            r[0], r[1] = min(r[0], lo), max(r[1], hi)
            prog.advance(c.nbytes, c.name, scan=True)

        be.map(run_check, scans, scanned)
        params = {name: encode.tensor_params(next(c.entry for c in scans if c.name == name), *r)
                  for name, r in ranges.items()}
        checks = [dataclasses.replace(c, params=params[c.name]) if c.name in params and c.kind == "derive" else c
                  for c in checks]
    pieces: dict[str, list[bytes]] = {}

    def done(c: Check, res: CheckResult):
        tc = by[c.name]
        tc.elements += res.elements
        if res.piece is not None:
            pieces.setdefault(c.name, []).append(res.piece)
        if res.stats is not None:
            encode.add_error_sums(sums.setdefault(c.name, np.zeros(3)), res.stats)
        if res.nonfinite_row >= 0 and not tc.other:
            tc.other.append(f"the source holds NaN or infinity (row {res.nonfinite_row})")
        n, largest, pos = res.codes
        tc.differing += n
        tc.max_code_diff = max(tc.max_code_diff, largest)
        tc.positions.extend(pos[:POSITIONS - len(tc.positions)])
        for role in ("scale", "zero_point"):
            n, pos = getattr(res, role)
            setattr(tc, f"{role}_differing", getattr(tc, f"{role}_differing") + n)
            lst = getattr(tc, f"{role}_positions")
            lst.extend(pos[:POSITIONS - len(lst)])
        for o in res.other:
            if o not in tc.other:
                tc.other.append(o)
        for o in res.notes:
            if o not in tc.notes:
                tc.notes.append(o)
        tc.explained += res.explained
        if c.explain:
            tc.explain = True
        prog.advance(c.nbytes, c.name)

    be.map(run_check, checks, done)
    for tc in report.tensors:
        if tc.status:
            continue
        rec = ck.describe(tc.name)
        want = rec.get("source", {}).get("digest") if not ck.foreign and isinstance(rec.get("source"), dict) else None
        algorithm = digests.algorithm_of(want) if isinstance(want, str) else None
        if algorithm and tc.name in pieces:
            tc.source_digest_ok = digests.combine(pieces[tc.name], algorithm) == want
        tc.status = "identical" if tc.ok_values else "different"
    return sums
