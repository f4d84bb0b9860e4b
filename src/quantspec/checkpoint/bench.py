"""``quantspec bench --only convert``: whole-checkpoint conversion against the rate of reading it.

It writes a synthetic bfloat16 checkpoint with the names and shapes of a Llama-style model
(:func:`synthetic_checkpoint`; ``--size`` bytes, default 1 GiB, ``--quick`` 32 MiB) in a temporary
directory, reads it once so the page cache holds it, and then, side by side in this process, best of
``--rounds``:

- **read**: the rate at which this process reads the same files, a tensor at a time into fresh
  buffers (``f.read``, what a loader does), and into one reused buffer (``readinto``);
- **convert**: :func:`quantspec.checkpoint.convert` end to end (planning, reading, hashing,
  quantizing, writing, ``fsync``) under several schemes, as a fraction of the ``f.read`` rate;
- **Dask** (``--dask local:N`` or an address): the int4-b32 conversion on clusters of 1 to N worker
  processes beside the single-process run, with the per-task overhead;
- **onnxruntime**: the routine ``MatMulNBitsQuantizer`` runs for each weight
  (``quantize_qdq_matmul_4bits``, on the float32 transposed weight it builds) and
  ``quantization.quant_utils.quantize_data`` per output channel (its per-channel weight path), on the
  same tensors (float32 conversion not timed), with the codes compared to quantspec's.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

__all__ = ["synthetic_checkpoint", "llama_shapes", "run", "read_rate"]


def llama_shapes(hidden: int, intermediate: int, layers: int, vocab: int, kv: int | None = None) -> dict:
    """name -> shape of a Llama-style checkpoint (``[out_features, in_features]`` weights, 1-D norms)."""
    kv = kv or hidden
    shapes = {"model.embed_tokens.weight": (vocab, hidden)}
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes.update({
            p + "self_attn.q_proj.weight": (hidden, hidden), p + "self_attn.k_proj.weight": (kv, hidden),
            p + "self_attn.v_proj.weight": (kv, hidden), p + "self_attn.o_proj.weight": (hidden, hidden),
            p + "mlp.gate_proj.weight": (intermediate, hidden), p + "mlp.up_proj.weight": (intermediate, hidden),
            p + "mlp.down_proj.weight": (hidden, intermediate),
            p + "input_layernorm.weight": (hidden,), p + "post_attention_layernorm.weight": (hidden,),
        })
    shapes["model.norm.weight"] = (hidden,)
    shapes["lm_head.weight"] = (vocab, hidden)
    return shapes


def _fill(rng, n: int, dtype: str) -> np.ndarray:
    """n weight-like values (normal, std 0.02), as bfloat16 / float16 / float32."""
    x = (rng.standard_normal(n, dtype=np.float32) * np.float32(0.02))
    if dtype == "bfloat16":
        import ml_dtypes
        return x.astype(ml_dtypes.bfloat16)
    return x.astype(np.float16 if dtype == "float16" else np.float32)


def synthetic_checkpoint(path: str | os.PathLike, shapes: dict, shards: int = 2, dtype: str = "bfloat16",
                         seed: int = 0) -> Path:
    """Write ``shapes`` (name -> shape) as a sharded safetensors checkpoint with an index in the
    directory ``path`` (normal weights, norms near 1); returns the index's path."""
    from .._tensorfiles import tensorio
    import json

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    names = list(shapes)
    sizes = [math.prod(shapes[n]) for n in names]
    total = sum(sizes)
    groups: list[list[str]] = [[] for _ in range(shards)]
    acc = 0
    for n, s in zip(names, sizes):
        groups[min(shards - 1, acc * shards // max(total, 1))].append(n)
        acc += s
    groups = [g for g in groups if g]
    weight_map = {}
    for k, g in enumerate(groups):
        fname = f"model-{k + 1:05d}-of-{len(groups):05d}.safetensors"
        tensors = {}
        for n in g:
            shape = shapes[n]
            a = _fill(rng, math.prod(shape), dtype).reshape(shape)
            if len(shape) == 1:
                a = (a.astype(np.float32) + 1).astype(a.dtype)
            tensors[n] = a
            weight_map[n] = fname
        tensorio.write_tensors(path / fname, tensors)
    index = path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": sum(s * 2 for s in sizes)}, "weight_map": weight_map}))
    return index


def _tensors(root: Path):
    from . import sources
    return sources.discover(root).tensors


def read_rate(root: Path, reuse: bool) -> tuple[float, int]:
    """Seconds to read every tensor of the checkpoint (fresh buffers, or one reused buffer), bytes."""
    tensors = _tensors(root)
    total = sum(t.nbytes for t in tensors)
    buf = bytearray(max(t.nbytes for t in tensors)) if reuse else None
    t0 = time.perf_counter()
    files = {}
    try:
        for t in tensors:
            f = files.get(t.path) or files.setdefault(t.path, open(t.path, "rb", buffering=0))
            f.seek(t.offset)
            if reuse:
                f.readinto(memoryview(buf)[:t.nbytes])
            else:
                data = f.read(t.nbytes)
                del data
    finally:
        for f in files.values():
            f.close()
    return time.perf_counter() - t0, total


def _ort_nbits(tensors, raw_reader, converted: Path | None):
    """Seconds onnxruntime's blocked int4 routine takes on every 2-D weight; whether its codes and
    scales equal quantspec's int4-b32 output (``converted``) on every weight."""
    from onnxruntime.capi._pybind_state import quantize_qdq_matmul_4bits

    from . import open as open_checkpoint

    ck = open_checkpoint(converted) if converted is not None else None
    spent, elems, equal = 0.0, 0, True
    for t in tensors:
        if len(t.shape) != 2:
            continue
        w = raw_reader(t)
        b = np.ascontiguousarray(w.T)                    # the [K, N] MatMul weight the quantizer sees
        rows, cols = b.shape
        kb = -(-rows // 32)
        packed = np.zeros((rows * cols + 1) // 2, np.uint8)
        zp = np.zeros((cols * kb + 1) // 2, np.uint8)
        sc = np.zeros((kb, cols), np.float32)
        t0 = time.perf_counter()
        quantize_qdq_matmul_4bits(packed, b, sc, zp, 32, cols, rows, True)
        spent += time.perf_counter() - t0
        elems += w.size
        if ck is not None:
            codes = np.empty(packed.size * 2, np.uint8)
            codes[0::2], codes[1::2] = packed & 15, packed >> 4
            ours = ck.codes(t.name).view(np.uint8) & 15
            equal &= bool((codes[:rows * cols].reshape(rows, cols).T == ours).all())
            equal &= np.ascontiguousarray(sc.T).tobytes() == ck.params(t.name)[0].tobytes()
    return spent, elems, equal


def _ort_quantize_data(tensors, raw_reader, limit_elems: int):
    """Seconds ``quantize_data`` takes per output channel (int8, symmetric) on the weights (up to
    ``limit_elems`` elements: it runs in numpy, one channel at a time)."""
    from onnx import TensorProto
    from onnxruntime.quantization.quant_utils import quantize_data

    spent, elems = 0.0, 0
    for t in tensors:
        if len(t.shape) != 2 or elems >= limit_elems:
            continue
        w = raw_reader(t)
        t0 = time.perf_counter()
        for c in range(w.shape[0]):
            quantize_data(w[c].flatten(), TensorProto.INT8, True)
        spent += time.perf_counter() - t0
        elems += w.size
    return spent, elems


def _noop(x):
    """A task that does nothing (the per-task overhead of a cluster)."""
    return x


def _same_files(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.iterdir())
    return names == sorted(p.name for p in b.iterdir()) and all((a / n).read_bytes() == (b / n).read_bytes()
                                                                 for n in names)


def dask_section(src: Path, base: Path, total: int, local_best: float, rounds: int, dask, say,
                 scheme: str = "int4-b32") -> bool:
    """Time ``scheme``'s conversion on Dask: for ``local:N``, clusters of 1 to N worker processes
    (one thread each), else the cluster given; beside the single-process run (``local_best``
    seconds), with the per-task overhead (no-op tasks through the same backend) and the share of
    the run it accounts for.  True when every cluster run wrote the single-process run's bytes."""
    from . import convert, layout, schemes as schemes_module, sources
    from .cluster import DaskBackend, parse

    kind, value = parse(dask)
    plan = layout.plan(sources.discover(src), schemes_module.load_recipe(None, scheme), layout.DEFAULT_MAX_SHARD_SIZE)
    tasks = sum(len(e.slabs()) for e in plan.entries)
    specs = [f"local:{n}" for n in range(1, value + 1)] if kind == "local" else [dask]
    say(f"Dask: {scheme}, {tasks} tasks (slabs of about {layout.SLAB_BYTES >> 20} MiB); beside this process's "
        f"{os.cpu_count()} threads: {total / local_best / 1e9:.2f} GB/s")
    ok = True
    for spec in specs:
        be = DaskBackend(spec)
        try:
            client = be.client
            dst = base / f"dask-{scheme}"
            shutil.rmtree(dst, ignore_errors=True)
            convert(src, dst, scheme, progress=False, resume=False, dask=client)      # workers load the kernels
            best = math.inf
            for _ in range(rounds):
                shutil.rmtree(dst, ignore_errors=True)
                t0 = time.perf_counter()
                convert(src, dst, scheme, progress=False, resume=False, dask=client)
                best = min(best, time.perf_counter() - t0)
            same = _same_files(dst, base / f"out-{scheme}") if (base / f"out-{scheme}").exists() else True
            ok &= same
            k = 200
            be.map(_noop, range(20), lambda i, r: None)
            t0 = time.perf_counter()
            be.map(_noop, range(k), lambda i, r: None)
            per_task = (time.perf_counter() - t0) / k
            label = f"{be.workers} worker{'s' if be.workers > 1 else ''}" + (" (local processes)" if kind == "local"
                                                                              else f" at {dask}")
            say(f"{'convert ' + scheme + ' on Dask, ' + label:<44} {total / best / 1e9:7.2f} GB/s  "
                f"({100 * local_best / best:.0f}% of one process's rate; per-task overhead {per_task * 1e3:.1f} ms, "
                f"{100 * per_task * tasks / best:.0f}% of the wall time; bytes "
                f"{'identical' if same else 'DIFFERENT'})")
        finally:
            be.close()
    return ok


def run(size: int, rounds: int, schemes: tuple[str, ...] = ("int4-b32", "int8", "fp8-e4m3", "mxfp4"),
        keep: str | None = None, dask=None) -> bool:
    """Run the benchmark (``size``: the checkpoint's bytes); True when quantspec's int4 codes and
    scales equal onnxruntime's on every weight (and, with ``dask``, when every run on the cluster
    wrote the single-process run's bytes)."""
    from . import convert, sources

    def say(text=""):
        print(text, flush=True)

    hidden = 2048 if size >= (512 << 20) else 256
    inter, vocab = hidden * 11 // 4, 32000 if hidden >= 1024 else 2048
    per_layer = 2 * (2 * hidden * hidden + 2 * hidden * hidden // 4 + 3 * hidden * inter)
    layers = max(1, (size - 4 * vocab * hidden) // per_layer)
    shapes = llama_shapes(hidden, inter, layers, vocab, kv=hidden // 4)
    base = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="quantspec-bench-convert-"))
    src = base / "src"
    try:
        if not (src / "model.safetensors.index.json").exists():
            synthetic_checkpoint(src, shapes, shards=max(1, min(4, size // (256 << 20))))
        total = sum(t.nbytes for t in _tensors(src))
        say(f"checkpoint: {len(shapes)} tensors (Llama-style, hidden {hidden}, {layers} layers), bfloat16, "
            f"{total / 1e9:.2f} GB in {len(list(src.glob('*.safetensors')))} shards; {os.cpu_count()} cores; "
            f"best of {rounds}; timings on a shared machine are noisy")
        read_rate(src, False)                            # into the page cache
        best, cpu = {}, {}

        def timed(key, fn):
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            wall, used = time.perf_counter() - t0, time.process_time() - c0
            if wall < best.get(key, math.inf):
                best[key], cpu[key] = wall, used

        for _ in range(rounds):
            timed("read", lambda: read_rate(src, False))
            timed("readinto", lambda: read_rate(src, True))
            for s in schemes:
                dst = base / f"out-{s}"
                shutil.rmtree(dst, ignore_errors=True)
                timed(s, lambda: convert(src, dst, s, progress=False, resume=False))
        rate = total / best["read"]

        def line(label, key, extra=""):
            say(f"{label:<44} {total / best[key] / 1e9:7.2f} GB/s  {extra}(CPU {cpu[key] / total * 1e9:.2f} s/GB)")

        say("rates: best wall time; CPU: the process's CPU seconds per GB in that round (all threads)")
        line("read (f.read per tensor, fresh buffers)", "read")
        line("read (readinto one reused buffer)", "readinto")
        for s in schemes:
            line("convert " + s, s, f"{100 * total / best[s] / rate:5.0f}% of the f.read rate ")

        def reader(t):
            raw = sources.read_rows(t, 0, t.rows)
            return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(t.shape)

        tensors = _tensors(src)
        secs, elems, equal = _ort_nbits(tensors, reader, base / "out-int4-b32" if "int4-b32" in schemes else None)
        ours = f"; quantspec int4-b32 end to end: {total / 2 / best['int4-b32'] / 1e9:.2f} Gelem/s" \
            if "int4-b32" in best else ""
        say(f"{'onnxruntime MatMulNBits int4 b32 routine':<44} {elems / secs / 1e9:7.2f} Gelem/s (compute only{ours}); "
            f"codes and scales {'byte-identical' if equal else 'DIFFERENT'}")
        secs, elems = _ort_quantize_data(tensors, reader, 1 << 24)
        say(f"{'onnxruntime quantize_data, int8 per channel':<44} {elems / secs / 1e9:7.3f} Gelem/s (compute only, "
            f"{elems} elements)")
        sources.close_all()
        if dask is not None:
            scheme = "int4-b32" if "int4-b32" in best else schemes[0]
            equal &= dask_section(src, base, total, best[scheme], rounds, dask, say, scheme)
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
    return equal
