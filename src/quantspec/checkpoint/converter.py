"""``quantspec.checkpoint.convert``: a float checkpoint in, a quantized one out.

The steps, each before the next:

1. **Plan** (:mod:`.sources`, :mod:`.schemes`, :mod:`.layout`): headers only; every check of the
   input (names, shards, index, recipe, types) and every output byte's place.
2. **Resume** (``resume=True``): shards an earlier run of the same plan finished are kept when the
   digests they record equal the source's (the source is read and hashed, not converted again).
3. **Scan**: tensors under a per-tensor scheme are read once for their range (and digest).
4. **Convert**: every slab of every tensor still to do is a task (:mod:`.encode`) run by the backend
   (:mod:`.backend`); each shard, when its last slab is written, gets its final header and is
   flushed and renamed (:mod:`.writer`).
5. **Commit**: final names, the index and the manifest.

A bad value found in step 3 or 4 (NaN or infinity) stops the run and removes what it wrote; an
interruption (Ctrl-C) keeps the finished shards for the next run.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__
from ..errors import InvalidArgumentError, QuantSpecError, UnsupportedError
from . import encode, layout, sources
from .cluster import backend as make_backend
from .cluster import parse as parse_dask
from .ctlayout import CompressedTensorsFormat
from .encode import Task
from .layout import FORMAT_VERSION, Plan
from .paths import local_path
from .progress import progress_for
from .report import ConversionReport, TensorReport, format_stats, parse_stats
from .schemes import KEEP, SCHEMES, load_recipe
from .writer import Output, read_header

__all__ = ["convert", "FORMATS", "manifest", "finish_record"]

FORMATS = {"quantspec": layout.QuantspecFormat, "compressed-tensors": CompressedTensorsFormat}


def convert(src: str | os.PathLike, dst: str | os.PathLike, scheme: str | None = None, *, recipe: Any = None,
            include: Any = None, exclude: Any = None, max_shard_size: Any = None, format: str | None = None,
            dask: Any = None, progress: Any = None, resume: bool = True) -> ConversionReport:
    """Convert the checkpoint ``src`` into a quantized checkpoint in the directory ``dst``.

    ``src``: a .safetensors file, a directory of them, a ``*.safetensors.index.json``, an .npz or
    an .npy (float32, float16 and bfloat16 tensors are quantized; other types are kept).
    ``scheme``: the scheme of every tensor no recipe rule names (``docs/checkpoints.md`` lists them).
    ``recipe``: a TOML path or a dict ``{"default": SCHEME, "rules": [{"match": GLOB, "scheme":
    SCHEME or "keep"}, ...]}``, first match wins.  ``include`` / ``exclude``: globs over tensor
    names; tensors not included, or excluded, are kept.  Tensors a scheme cannot take (1-D norms and
    biases, integer tensors, a blocked scheme's non-2-D tensors) are kept and reported, unless a rule
    names them exactly (then it is an error).  ``max_shard_size``: "2GB", "500MiB" or bytes
    (default 5 GB).  ``format``: "quantspec", or "compressed-tensors" (the layout vLLM and transformers
    load; :mod:`.ctlayout`); None: "compressed-tensors" when the scheme or a rule names a
    compressed-tensors preset (``W4A16``, ``FP8_BLOCK``, ...: :mod:`.presets`, which only that layout
    holds), else "quantspec".  ``dask``: None (this machine's cores), "local:N" (N worker processes
    here), a scheduler address or a ``dask.distributed.Client`` (:mod:`.cluster`).
    ``progress``: None (bars on a terminal), True, False, or a callable taking
    :class:`~quantspec.checkpoint.progress.ProgressEvent`.  ``resume``: keep the shards an
    interrupted run of the same conversion finished.
    """
    start = time.perf_counter()
    if format is not None and format not in FORMATS:
        raise UnsupportedError("format", "must be 'quantspec' or 'compressed-tensors'", format)
    if not isinstance(resume, bool):
        raise InvalidArgumentError("resume", "must be True or False", resume)
    rules = load_recipe(recipe, scheme, include, exclude)
    format = layout_for(rules, format)
    size = layout.parse_size(max_shard_size)
    src, dst = local_path(src, "src"), local_path(dst, "dst")
    if dask is not None:
        parse_dask(dask)
    source = sources.discover(src)
    plan = layout.plan(source, rules, size, FORMATS[format]())
    be = make_backend(dask)
    out = Output(dst, plan)
    prog = progress_for(progress)
    made: list[Path] = []
    opened = False
    try:
        out.open()
        opened = True
        out.clean(keep_done=resume)
        run = _Run(plan, out, be, prog)
        candidates = run.candidates() if resume else []
        checked = {sh.index for sh, _ in candidates}

        def volume(shards):       # source bytes read: once per shard (hashed, or converted), and a scan
            return sum(plan.entries[i].source.nbytes for sh in shards for i in sh.entries) + run.scan_bytes(shards)

        prog.start(volume([sh for sh in plan.shards if sh.index not in checked])
                   + sum(plan.entries[i].source.nbytes for sh, _ in candidates for i in sh.entries), len(plan.shards))
        run.verify(candidates)
        todo = [sh for sh in plan.shards if sh.index not in run.kept]
        prog.grow(volume([sh for sh in todo if sh.index in checked]))
        out.check_space(todo)
        run.scan(todo)
        run.convert(todo, made)
        manifest = run.manifest(src)
        out.commit(manifest)
    except BaseException as e:
        if opened:
            out.clean(keep_done=True)
        if isinstance(e, QuantSpecError) and not getattr(e, "keeps_finished", False):
            # bad input: nothing this run wrote stays (tasks failing on a cluster keep finished shards)
            for p in made:
                p.unlink(missing_ok=True)
        raise
    finally:
        prog.close()
        out.close()
        be.close()
        encode.close_all()
        sources.close_all()
    report = run.report(str(src), str(dst))
    report.seconds = time.perf_counter() - start
    return report


class _Run:
    """The state of one conversion: digests, error sums and ranges per entry, shards kept."""

    def __init__(self, plan: Plan, out: Output, be, prog):
        self.plan, self.out, self.be, self.prog = plan, out, be, prog
        self.pieces: dict[int, list[bytes]] = {}
        self.stats: dict[int, np.ndarray] = {}
        self.ranges: dict[int, list[float]] = {}
        self.kept: set[int] = set()
        self.records: dict[str, dict] = {}        # source name -> manifest record, for kept shards

    # -- step 2 ------------------------------------------------------------------------------------
    def candidates(self) -> list:
        """The finished shards of an earlier run of this plan (``.done``, or under their final names):
        (shard, its manifest records); others of theirs are removed."""
        plan, out = self.plan, self.out
        candidates = []
        for sh in plan.shards:
            path = out.done(sh) if out.done(sh).exists() else out.final(sh) if out.final(sh).exists() else None
            if path is None:
                continue
            header = read_header(path)
            meta = (header or {}).get("__metadata__", {})
            ok = (isinstance(meta, dict) and meta.get("quantspec.plan") == plan.shard_fingerprints[sh.index]
                  and path.stat().st_size == sh.size)
            try:
                records = json.loads(meta["quantspec.manifest"])["tensors"] if ok else None
            except Exception:
                records = None
            if records is not None and not self._fits(sh, records):
                records = None
            if records is None:
                if path == out.done(sh):
                    path.unlink(missing_ok=True)
                continue
            candidates.append((sh, records))
        return candidates

    def _fits(self, sh, records) -> bool:
        """Whether a finished shard's header records are those this plan writes for its tensors, but
        for the source digests and error sums, which must be a digest and three numbers (a damaged
        header is converted again, not kept)."""
        plan = self.plan
        if not isinstance(records, dict) or set(records) != {plan.entries[i].source.name for i in sh.entries}:
            return False
        for i in sh.entries:
            e = plan.entries[i]
            rec = records[e.source.name]
            src = rec.get("source") if isinstance(rec, dict) else None
            digest = src.get("digest") if isinstance(src, dict) else None
            stats = rec.get("stats") if isinstance(rec, dict) and e.scheme != KEEP else None
            if not isinstance(digest, str) or (e.scheme != KEEP and not isinstance(stats, str)):
                return False
            if rec != plan.format.entry_manifest(e, digest, stats):
                return False
            try:
                finish_record(plan, i, rec)
            except (TypeError, ValueError):
                return False
        return True

    def verify(self, candidates) -> None:
        """Keep each candidate whose recorded source digests equal the source's now."""
        plan, out = self.plan, self.out
        if not candidates:
            return
        digests: dict[int, list[bytes]] = {}

        def tasks():
            for sh, _ in candidates:
                for i in sh.entries:
                    for r0, r1 in plan.entries[i].slabs():
                        yield Task(plan.entries[i], r0, r1, "hash")

        def done(task, res):
            digests.setdefault(task.entry.index, []).append(res.digest)
            self.prog.advance(task.nbytes, task.entry.source.name, scan=True)

        self.be.map(encode.run, tasks(), done)
        for sh, records in candidates:
            same = all(records.get(plan.entries[i].source.name, {}).get("source", {}).get("digest")
                       == encode.digest(digests[i]) for i in sh.entries)
            if same:
                self.kept.add(sh.index)
                self.records.update(records)
            elif out.done(sh).exists():
                out.done(sh).unlink(missing_ok=True)

    # -- step 3 ------------------------------------------------------------------------------------
    def _scanned(self, todo) -> list[int]:
        """The entries whose whole-tensor range the conversion of ``todo`` needs first: per-tensor schemes,
        and NVFP4's global scales (with every fused partner, wherever it is)."""
        plan = self.plan
        out = [i for sh in todo for i in sh.entries
               if plan.entries[i].scheme != KEEP and scans(SCHEMES[plan.entries[i].scheme])]
        partners = global_sets(plan)
        extra = sorted({j for i in out for j in partners.get(i, ())} - set(out))
        return out + extra

    def scan_bytes(self, todo) -> int:
        return sum(self.plan.entries[i].source.nbytes for i in self._scanned(todo))

    def scan(self, todo) -> None:
        entries = [self.plan.entries[i] for i in self._scanned(todo)]
        if not entries:
            return

        def tasks():
            for e in entries:
                for r0, r1 in e.slabs():
                    yield Task(e, r0, r1, "stats")

        def done(task, res):
            i = task.entry.index
            self.pieces.setdefault(i, []).append(res.digest)
            lo, hi = res.minmax
            r = self.ranges.setdefault(i, [lo, hi])
            r[0], r[1] = min(r[0], lo), max(r[1], hi)
            self.prog.advance(task.nbytes, task.entry.source.name, scan=True)

        self.be.map(encode.run, tasks(), done)

    # -- step 4 ------------------------------------------------------------------------------------
    def convert(self, todo, made: list[Path]) -> None:
        plan, out = self.plan, self.out
        targets = {}
        for sh in todo:
            targets[sh.index] = out.create(sh)
        params = scanned_params(plan, self.ranges)
        left = {sh.index: sum(len(plan.entries[i].slabs()) for i in sh.entries) for sh in todo}
        current = [None]

        def tasks():
            for sh in todo:
                for i in sh.entries:
                    e = plan.entries[i]
                    phase = "copy" if e.scheme == KEEP else "encode"
                    for r0, r1 in e.slabs():
                        yield Task(e, r0, r1, phase, targets[sh.index], params.get(i), hash=i not in self.ranges)

        def done(task, res):
            e = task.entry
            i = e.index
            sh = plan.shards[e.shard]
            if current[0] != sh.index:
                current[0] = sh.index
                self.prog.shard(sh.name, sum(plan.entries[k].source.nbytes for k in sh.entries))
            if res.digest is not None:
                self.pieces.setdefault(i, []).append(res.digest)
            if res.stats is not None:
                encode.add_error_sums(self.stats.setdefault(i, np.zeros(3)), res.stats)
            self.prog.advance(task.nbytes, e.source.name)
            left[sh.index] -= 1
            if left[sh.index] == 0:
                encode.close_file(targets[sh.index])
                out.finish(sh, {k: self._done(k) for k in sh.entries})
                made.append(out.done(sh))
                self.prog.shard_done()

        self.be.map(encode.run, tasks(), done)

    def _done(self, i: int) -> tuple[str, str | None]:
        e = self.plan.entries[i]
        stats = None if e.scheme == KEEP else format_stats(self.stats.get(i, np.zeros(3)))
        return encode.digest(self.pieces.get(i, [])), stats

    # -- step 5 ------------------------------------------------------------------------------------
    def _record(self, i: int) -> dict:
        rec = self.records.get(self.plan.entries[i].source.name)
        if rec is None:
            digest, stats = self._done(i)
            rec = self.plan.format.entry_manifest(self.plan.entries[i], digest, stats)
        return finish_record(self.plan, i, rec)

    def manifest(self, src) -> dict:
        return manifest(self.plan, src, self._record)

    def report(self, src: str, dst: str) -> ConversionReport:
        plan = self.plan
        rep = ConversionReport(src, dst, shards=[sh.name for sh in plan.shards],
                               resumed=[plan.shards[k].name for k in sorted(self.kept)])
        for e in plan.entries:
            rec = self._record(e.index)
            t = TensorReport(e.source.name, e.scheme, e.source.nbytes, e.nbytes_out, rec["shard"],
                             reason=e.reason if e.scheme == KEEP else "", resumed=e.shard in self.kept)
            if e.scheme != KEEP:
                t.rel_rms, t.max_abs = rec["error"]["rel_rms"], rec["error"]["max_abs"]
            rep.tensors.append(t)
        return rep


def layout_for(rules, format: str | None) -> str:
    """The layout of a conversion: ``format``, or (None) compressed-tensors' when the recipe uses a
    compressed-tensors preset; a preset in quantspec's layout is refused."""
    used = [n for n in {rules.default} | {s for _, s in rules.rules} if n not in (None, KEEP)]
    presets = sorted(n for n in used if SCHEMES[n].preset is not None)
    if format is None:
        return "compressed-tensors" if presets else "quantspec"
    if presets and format != "compressed-tensors":
        raise UnsupportedError("format", f"compressed-tensors presets ({', '.join(presets)}) are written in the "
                               "compressed-tensors layout only", format)
    return format


def scans(s) -> bool:
    """Whether a scheme needs its tensor's range before encoding it (per tensor; NVFP4's global scale)."""
    return s.granularity == "tensor" or (s.preset is not None and s.preset.weights.strategy == "tensor_group")


def global_sets(plan: Plan) -> dict[int, list[int]]:
    """Entry -> the entries whose range its NVFP4 global scale takes (itself and its fused partners
    under the same preset: q/k/v, gate/up, w1/w3; :func:`quantspec.checkpoint.presets.fused_key`)."""
    from .presets import fused_key

    chosen = {e.source.name: e for e in plan.entries
              if e.scheme != KEEP and SCHEMES[e.scheme].preset is not None
              and SCHEMES[e.scheme].preset.weights.strategy == "tensor_group"}
    names = set(chosen)
    sets: dict[str, list[int]] = {}
    for name, e in chosen.items():
        key = fused_key(name, names)
        sets.setdefault(f"{e.scheme}:{key}" if key else f"{e.scheme}:{name}", []).append(e.index)
    return {i: members for members in sets.values() for i in members}


def scanned_params(plan: Plan, ranges: dict[int, list[float]]) -> dict[int, tuple]:
    """The parameters scanned entries are encoded with: a per-tensor scheme's (scale, zero point);
    NVFP4's (global scale,) of its fused set's absolute maximum."""
    from .ctarith import global_scale

    out: dict[int, tuple] = {}
    sets = global_sets(plan)
    for i, r in ranges.items():
        e = plan.entries[i]
        if i in sets:
            if any(j not in ranges for j in sets[i]):
                continue
            amax = max(max(-min(ranges[j][0], 0.0), max(ranges[j][1], 0.0)) for j in sets[i])
            out[i] = (float(global_scale(amax, e.source.dtype)),)
        elif SCHEMES[e.scheme].preset is None:
            out[i] = encode.tensor_params(e, *r)
    return out


def finish_record(plan: Plan, i: int, rec: dict) -> dict:
    """Entry ``i``'s record in ``quantspec.json``: its shard's record ``rec`` (what the shard's header
    repeats) with the fields known once every shard is written, its shard's name and, for a quantized
    tensor, the error summary its error sums give."""
    e = plan.entries[i]
    rec = dict(rec)
    rec["shard"] = plan.shards[e.shard].name
    if e.scheme != KEEP:
        rel, mx = TensorReport.errors(*parse_stats(rec["stats"]))
        rec["error"] = {"rel_rms": rel, "max_abs": mx}
    return rec


def manifest(plan: Plan, src, record) -> dict:
    """``quantspec.json`` of the conversion planned as ``plan`` from the source ``src``; ``record(i)``:
    entry ``i``'s record (:func:`finish_record`)."""
    root = Path(plan.source.root).resolve()
    return {
        "format": plan.format.name, "version": FORMAT_VERSION, "quantspec": __version__,
        "source": {"path": str(src), "kind": plan.source.kind,
                   "files": [str(Path(f).relative_to(root)) if Path(f).is_relative_to(root) else Path(f).name
                             for f in plan.source.files]},
        "recipe": plan.recipe.describe(),
        "max_shard_size": plan.max_shard_size,
        "slab_bytes": plan.slab_bytes,
        "shards": [{"name": sh.name, "size": sh.size, "tensors": [plan.entries[i].source.name for i in sh.entries]}
                   for sh in plan.shards],
        "tensors": {plan.entries[i].source.name: record(i) for i in range(len(plan.entries))},
    }
