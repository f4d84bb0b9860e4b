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
  same tensors (float32 conversion not timed), with the codes compared to quantspec's;
- **compressed-tensors presets** (:data:`PRESETS`: W4A16, W8A8, FP8_DYNAMIC, NVFP4A16, FP8_BLOCK,
  MXFP4A16, W8A16, W4A16_ASYM): converted in this process beside the schemes above, then each in
  fresh processes (:func:`presets_section`) beside llm-compressor's ``model_free_ptq(src, dst,
  scheme=PRESET, ignore=["model.embed_tokens"], max_workers=2, device="cpu")`` (quantspec keeps the
  embeddings; both quantize ``lm_head``) run by the interpreter ``$QUANTSPEC_LLMC_PYTHON`` (its own
  environment: llm-compressor pins other versions of compressed-tensors and transformers; skipped,
  with a note, when that is unset or lacks llmcompressor).  Each process's wall time (the call alone,
  and from start to exit), CPU time per GB of bfloat16 input and peak RSS come from ``os.wait4``;
  both outputs are compared tensor by tensor (name, dtype, shape, bytes).

Every scheme and preset is first converted once, untimed, on a small checkpoint (kernels compiled or
loaded from numba's cache), so that no timed round pays for compilation.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["synthetic_checkpoint", "llama_shapes", "llama_config", "run", "read_rate", "PRESETS",
           "presets_section", "tensor_digests", "compare_outputs", "peer_python", "ChildRun"]

#: the compressed-tensors presets the bench converts (in this process, and beside llm-compressor's)
PRESETS = ("W4A16", "W8A8", "FP8_DYNAMIC", "NVFP4A16", "FP8_BLOCK", "MXFP4A16", "W8A16", "W4A16_ASYM")
#: the environment variable naming the interpreter of llm-compressor's environment
LLMC_ENV = "QUANTSPEC_LLMC_PYTHON"
#: what llm-compressor must leave alone to do quantspec's work (quantspec keeps the embeddings by default)
PEER_IGNORE = ["model.embed_tokens"]
#: llm-compressor's worker threads
PEER_WORKERS = 2
#: llm-compressor's runs of a preset stop once they total this many seconds (at least one run)
PEER_BUDGET = 20.0


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


def llama_config(hidden: int, intermediate: int, layers: int, vocab: int, kv: int | None = None) -> dict:
    """A ``config.json`` (``LlamaForCausalLM``, heads of 64) for :func:`llama_shapes` of these sizes."""
    kv = kv or hidden
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
            "intermediate_size": intermediate, "num_hidden_layers": layers, "num_attention_heads": max(1, hidden // 64),
            "num_key_value_heads": max(1, kv // 64), "head_dim": 64 if hidden >= 64 else hidden, "vocab_size": vocab,
            "torch_dtype": "bfloat16", "tie_word_embeddings": False, "rms_norm_eps": 1e-5, "hidden_act": "silu",
            "max_position_embeddings": 4096}


def synthetic_checkpoint(path: str | os.PathLike, shapes: dict, shards: int = 2, dtype: str = "bfloat16",
                         seed: int = 0, config: dict | None = None) -> Path:
    """Write ``shapes`` (name -> shape) as a sharded safetensors checkpoint with an index in the
    directory ``path`` (normal weights, norms near 1), and ``config`` as its ``config.json`` when
    given; returns the index's path."""
    from .._tensorfiles import tensorio

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
    if config is not None:
        (path / "config.json").write_text(json.dumps(config, indent=2))
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


# -- compressed-tensors presets in fresh processes, beside llm-compressor ---------------------------------
_MARK = "QUANTSPEC-BENCH-RESULT "

#: what each fresh process prints last: its timings and its own peak RSS (Linux: ``VmHWM``, the high-water
#: mark of the memory of the program it runs, where ``ru_maxrss`` would also count the memory of the
#: process it was started from, as the kernel carries that over through ``exec``)
_REPORT = """
def _report(t0, t1, t2, c1, c2):
    peak = None
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    peak = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    print(%r + json.dumps({"import": t1 - t0, "call": t2 - t1, "cpu": c2 - c1, "peak": peak}), flush=True)
""" % _MARK

#: a fresh process converting one preset with quantspec: argv src dst preset
_OURS = """
import json, sys, time
t0 = time.perf_counter()
from quantspec.checkpoint import convert
from quantspec._fastpath import jit
jit.announce_compiles()          # a kernel compiled (numba's cache missed) says so in the log
t1, c1 = time.perf_counter(), time.process_time()
convert(sys.argv[1], sys.argv[2], sys.argv[3], progress=False, resume=False)
t2, c2 = time.perf_counter(), time.process_time()
""" + _REPORT + "_report(t0, t1, t2, c1, c2)\n"

#: the same with llm-compressor: argv src dst preset ignore(json) workers
_PEER = """
import json, sys, time
t0 = time.perf_counter()
import llmcompressor
t1, c1 = time.perf_counter(), time.process_time()
llmcompressor.model_free_ptq(sys.argv[1], sys.argv[2], scheme=sys.argv[3], ignore=json.loads(sys.argv[4]),
                             max_workers=int(sys.argv[5]), device="cpu")
t2, c2 = time.perf_counter(), time.process_time()
""" + _REPORT + "_report(t0, t1, t2, c1, c2)\n"

_PROBE = """
import importlib.metadata as m
print(" ".join(m.version(d) for d in ("llmcompressor", "compressed-tensors", "torch")))
"""


@dataclass
class ChildRun:
    """One conversion in a fresh process: wall seconds from start to exit (``total``), of the call
    alone (``call``) and of the imports before it (``imported``); CPU seconds of the call (the
    process's ``time.process_time``) and of the whole process (user + system, ``os.wait4``); the
    process's peak resident set in bytes (its ``VmHWM`` where ``/proc`` has it, else ``ru_maxrss``)."""

    total: float
    call: float
    imported: float
    cpu_call: float
    cpu_total: float
    peak: int
    compiled: bool = False      # quantspec compiled a kernel in it (numba's cache did not hold it)


def _child(argv: list[str], env: dict | None, log: Path) -> tuple[ChildRun | None, str]:
    """Run ``argv`` to its end (output to ``log``); its :class:`ChildRun`, or None and why it failed."""
    with open(log, "w+b") as f:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, env=env)
        try:
            if hasattr(os, "wait4"):
                _, status, ru = os.wait4(p.pid, 0)
                p.returncode = os.waitstatus_to_exitcode(status)     # reaped here: Popen must not wait again
            else:                                                    # no rusage of one child (Windows)
                p.wait()
                ru = None
        except BaseException:                                        # interrupted: the child goes too
            p.kill()
            p.wait()
            raise
        total = time.perf_counter() - t0
        f.seek(0)
        text = f.read().decode(errors="replace")
    found = [line for line in text.splitlines() if line.startswith(_MARK)]
    if p.returncode or not found:
        tail = [line for line in text.splitlines() if line.strip()][-3:]
        return None, f"exit status {p.returncode}: " + " | ".join(tail)[-600:]
    r = json.loads(found[-1][len(_MARK):])
    peak = r.get("peak") or 0
    if not peak and ru is not None:       # no /proc: ru_maxrss (bytes on macOS, KiB elsewhere), an upper bound
        peak = ru.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    return ChildRun(total, r["call"], r["import"], r["cpu"], math.nan if ru is None else ru.ru_utime + ru.ru_stime,
                    peak, "quantspec: compiling fast kernels" in text), ""


def _peer_env() -> dict[str, str]:
    """llm-compressor's environment: this one without what would reach into its interpreter
    (PYTHONPATH and the like, quantspec's settings, an active virtual environment), CPU only, offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "QUANTSPEC_", "VIRTUAL_ENV", "CONDA_"))}
    env.update(CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1",
               TOKENIZERS_PARALLELISM="false", PYTHONNOUSERSITE="1")
    return env


def peer_python() -> tuple[str | None, str]:
    """(interpreter, "llmcompressor X, compressed-tensors Y, torch Z") of ``$QUANTSPEC_LLMC_PYTHON``, or
    (None, why llm-compressor cannot run)."""
    python = os.environ.get(LLMC_ENV)
    if not python:
        return None, f"${LLMC_ENV} is not set (./dev test creates .venv/llmc and sets it)"
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        return None, f"${LLMC_ENV}={python!r} is not an executable file"
    try:
        p = subprocess.run([python, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=120, env=_peer_env())
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{python} did not run: {e}"
    if p.returncode:
        return None, f"{python} has no llmcompressor (or compressed-tensors, torch) installed"
    llmc, ct, torch = p.stdout.split()[-3:]
    return python, f"llm-compressor {llmc}, compressed-tensors {ct}, torch {torch}"


def tensor_digests(root: Path) -> dict[str, tuple[str, tuple, str]]:
    """name -> (safetensors dtype, shape, sha256 of the bytes) of every tensor in the ``*.safetensors``
    files of the directory ``root``."""
    from ..errors import TensorFileError

    out = {}
    for path in sorted(Path(root).glob("*.safetensors")):
        with open(path, "rb") as f:
            try:
                n = struct.unpack("<Q", f.read(8))[0]
                header = json.loads(f.read(n))
            except (struct.error, ValueError) as e:
                raise TensorFileError("path", "is not a readable safetensors file", str(path), detail=str(e)) from None
            for name, v in header.items():
                if name == "__metadata__":
                    continue
                a, b = v["data_offsets"]
                f.seek(8 + n + a)
                h = hashlib.sha256()
                left = b - a
                while left:
                    chunk = f.read(min(left, 64 << 20))
                    if not chunk:
                        raise TensorFileError("path", f"ends inside tensor {name!r}", str(path))
                    h.update(chunk)
                    left -= len(chunk)
                out[name] = (v["dtype"], tuple(v["shape"]), h.hexdigest())
    return out


def compare_outputs(a: Path, b: Path) -> tuple[bool, int, list[str]]:
    """Whether the checkpoints in the directories ``a`` and ``b`` hold the same tensors (names, dtypes,
    shapes and bytes, over all shards); the number of tensors in ``a``; the names that differ."""
    da, db = tensor_digests(a), tensor_digests(b)
    differ = sorted(n for n in set(da) | set(db) if da.get(n) != db.get(n))
    return not differ and bool(da), len(da), differ


def _best(runs: list[ChildRun]) -> ChildRun:
    """The run of the shortest total wall time, with the highest peak RSS of all the runs."""
    best = min(runs, key=lambda r: r.total)
    return ChildRun(best.total, best.call, best.imported, best.cpu_call, best.cpu_total, max(r.peak for r in runs),
                    best.compiled)


def presets_section(src: Path, base: Path, total: int, presets, runs: int, say,
                    inprocess_cpu: dict | None = None) -> bool:
    """Convert each of ``presets`` in fresh processes, with quantspec (best of ``runs``) and, when
    ``$QUANTSPEC_LLMC_PYTHON`` holds it, with llm-compressor's ``model_free_ptq`` (best of up to
    ``runs``, stopping once its runs total :data:`PEER_BUDGET` seconds), on the checkpoint ``src``
    (``total`` bytes of bfloat16); print per preset each one's times, CPU seconds per GB of input and
    peak RSS, the ratios, and whether both wrote the same tensors.  ``inprocess_cpu``: preset -> CPU
    seconds of its best conversion in this process (for the CPU goal).  True when every output equals
    the peer's and every run succeeded."""
    gb = total / 1e9
    python, about = peer_python()
    say()
    say(f"compressed-tensors presets, each conversion in a fresh process: quantspec (`python -c` "
        f"checkpoint.convert(src, dst, PRESET)) beside llm-compressor's model_free_ptq(src, dst, scheme=PRESET, "
        f"ignore={PEER_IGNORE}, max_workers={PEER_WORKERS}, device=\"cpu\")")
    if python is None:
        say(f"llm-compressor: skipped, {about}")
    else:
        say(f"llm-compressor: {about} ({python}, in a clean environment, CUDA_VISIBLE_DEVICES=\"\"); "
            f"runs stop once they total {PEER_BUDGET:.0f} s")
    say("call: the convert() / model_free_ptq() call alone, timed inside the process (quantspec's loads its kernels "
        "from numba's cache in it); total: the process from start to exit, interpreter start and imports included; "
        "import: the imports before the call")
    say(f"CPU: user + system seconds per GB of bfloat16 input ({gb:.3f} GB): of the call (the process's "
        f"time.process_time) and of the whole process (os.wait4); peak: the process's peak RSS (its VmHWM at exit; "
        f"ru_maxrss where there is no /proc), the highest of its runs; each row is the run of the shortest total time")
    say(f"{'preset':<12} {'process':<15} {'runs':>4} {'call s':>8} {'total s':>8} {'import s':>8} "
        f"{'CPU s/GB call':>13} {'total':>7} {'peak MiB':>9}")

    def row(first, who, n, r: ChildRun):
        say(f"{first:<12} {who:<15} {n:>4} {r.call:8.2f} {r.total:8.2f} {r.imported:8.2f} "
            f"{r.cpu_call / gb:13.2f} {r.cpu_total / gb:7.2f} {r.peak / 2**20:9.0f}"
            + ("  (compiled kernels: numba's cache missed)" if r.compiled else ""))

    ok = True
    speed, memory = {}, {}
    env = os.environ.copy()                  # quantspec runs in the user's environment, as it is
    for name in presets:
        ours_dst, peer_dst = base / f"child-quantspec-{name}", base / f"child-llmc-{name}"
        ours: list[ChildRun] = []
        failed = ""
        for _ in range(runs):
            shutil.rmtree(ours_dst, ignore_errors=True)
            r, failed = _child([sys.executable, "-c", _OURS, str(src), str(ours_dst), name], env,
                               base / "child-quantspec.log")
            if r is None:
                break
            ours.append(r)
        if failed:
            say(f"{name:<12} {'quantspec':<15} FAILED ({failed})")
            ok = False
            continue
        row(name, "quantspec", len(ours), _best(ours))
        if python is None:
            shutil.rmtree(ours_dst, ignore_errors=True)
            continue
        peer: list[ChildRun] = []
        while len(peer) < runs and sum(r.total for r in peer) < PEER_BUDGET:
            shutil.rmtree(peer_dst, ignore_errors=True)
            r, failed = _child([python, "-I", "-c", _PEER, str(src), str(peer_dst), name, json.dumps(PEER_IGNORE),
                                str(PEER_WORKERS)], _peer_env(), base / "child-llmc.log")
            if r is None:
                break
            peer.append(r)
        if failed:
            say(f"{'':<12} {'llm-compressor':<15} FAILED ({failed})")
            ok = False
            shutil.rmtree(ours_dst, ignore_errors=True)
            continue
        a, b = _best(ours), _best(peer)
        row("", "llm-compressor", len(peer), b)
        same, n, differ = compare_outputs(ours_dst, peer_dst)
        ok &= same
        speed[name] = (b.call / a.call, b.total / a.total)
        memory[name] = b.peak / a.peak if a.peak else math.nan
        more = ", ..." if len(differ) > 3 else ""
        verdict = (f"tensors identical ({n})" if same else
                   f"tensors DIFFERENT ({len(differ)} of {n}: {', '.join(differ[:3])}{more})")
        say(f"{'':<12} llm-compressor / quantspec: {speed[name][0]:.1f}x the time (call), {speed[name][1]:.1f}x "
            f"(total); {memory[name]:.1f}x the peak RSS; {verdict}")
        shutil.rmtree(ours_dst, ignore_errors=True)
        shutil.rmtree(peer_dst, ignore_errors=True)

    def goal(label, values: dict, met, worst, fmt):
        if not values:
            say(f"  {label}: not measured (no llm-compressor)")
            return
        k = worst(values, key=values.get)
        say(f"  {label}: met in {sum(met(v) for v in values.values())} of {len(values)} presets "
            f"({'lowest' if worst is min else 'highest'} {fmt(values[k])}, {k})")

    say("goals (the issue's):")
    goal("speed >= 3x llm-compressor's (the smaller of the call and total ratios)",
         {k: min(v) for k, v in speed.items()}, lambda v: v >= 3, min, lambda v: f"{v:.1f}x")
    goal("peak RSS <= 1/10 of llm-compressor's", memory, lambda v: v >= 10, min, lambda v: f"1/{v:.1f}")
    if inprocess_cpu:
        goal("CPU <= 0.4 s per GB of bfloat16 input (the conversion in this process, warm)",
             {k: v / gb for k, v in inprocess_cpu.items()}, lambda v: v <= 0.4, max, lambda v: f"{v:.2f} s/GB")
    return ok


def _cpu() -> tuple[float, float]:
    """This process's (user, system) CPU seconds, all threads (``time.process_time`` as user where there
    is no ``resource`` module)."""
    try:
        import resource
    except ImportError:                  # Windows
        return time.process_time(), 0.0
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


def _warm_up(base: Path, schemes, presets) -> None:
    """Convert a small checkpoint once with every scheme and preset, so that no timed round compiles
    (or loads from numba's cache) a kernel."""
    from . import convert

    src = base / "warm-up"
    synthetic_checkpoint(src, llama_shapes(128, 256, 1, 256, kv=128), shards=1,
                         config=llama_config(128, 256, 1, 256, kv=128))
    for s in (*schemes, *presets):
        dst = base / f"warm-up-{s}"
        convert(src, dst, s, progress=False, resume=False)
        shutil.rmtree(dst, ignore_errors=True)
    shutil.rmtree(src, ignore_errors=True)


def run(size: int, rounds: int, schemes: tuple[str, ...] = ("int4-b32", "int8", "fp8-e4m3", "mxfp4"),
        keep: str | None = None, dask=None, presets: tuple[str, ...] = PRESETS, child_runs: int | None = None,
        ort: bool = True) -> bool:
    """Run the benchmark (``size``: the checkpoint's bytes); True when quantspec's int4 codes and
    scales equal onnxruntime's on every weight, when every preset's output equals llm-compressor's
    (where it runs) and (with ``dask``) when every run on the cluster wrote the single-process run's
    bytes.  ``presets``: the compressed-tensors presets to time (:data:`PRESETS`; none: ``()``), in
    this process and in fresh processes beside llm-compressor (best of ``child_runs``, default
    ``min(rounds, 3)``); ``ort``: whether to time onnxruntime's routines."""
    from . import convert, sources
    from .presets import preset

    presets = tuple(preset(p).name for p in presets)      # an unknown name is a quantspec error, before any work

    def say(text=""):
        print(text, flush=True)

    hidden = 2048 if size >= (512 << 20) else 256
    # the intermediate size a multiple of 128 (the presets' groups and blocks), as real models have it
    inter, vocab = -(-hidden * 11 // 4 // 128) * 128, 32000 if hidden >= 1024 else 2048
    per_layer = 2 * (2 * hidden * hidden + 2 * hidden * hidden // 4 + 3 * hidden * inter)
    layers = max(1, (size - 4 * vocab * hidden) // per_layer)
    shapes = llama_shapes(hidden, inter, layers, vocab, kv=hidden // 4)
    base = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="quantspec-bench-convert-"))
    src = base / "src"
    try:
        if not (src / "model.safetensors.index.json").exists():
            synthetic_checkpoint(src, shapes, shards=max(1, min(4, size // (256 << 20))),
                                 config=llama_config(hidden, inter, layers, vocab, kv=hidden // 4))
        total = sum(t.nbytes for t in _tensors(src))
        say(f"checkpoint: {len(shapes)} tensors (Llama-style, hidden {hidden}, {layers} layers), bfloat16, "
            f"{total / 1e9:.2f} GB in {len(list(src.glob('*.safetensors')))} shards; {os.cpu_count()} cores; "
            f"best of {rounds}; timings on a shared machine are noisy")
        _warm_up(base, schemes, presets)
        read_rate(src, False)                            # into the page cache
        best, cpu, split = {}, {}, {}

        def timed(key, fn):
            u0, t0 = _cpu(), time.perf_counter()
            fn()
            wall, u1 = time.perf_counter() - t0, _cpu()
            if wall < best.get(key, math.inf):
                best[key], cpu[key], split[key] = wall, sum(u1) - sum(u0), (u1[0] - u0[0], u1[1] - u0[1])

        for r in range(rounds):
            timed("read", lambda: read_rate(src, False))
            timed("readinto", lambda: read_rate(src, True))
            for s in (*schemes, *presets):
                dst = base / f"out-{s}"
                shutil.rmtree(dst, ignore_errors=True)
                timed(s, lambda: convert(src, dst, s, progress=False, resume=False))
                if s in presets or r < rounds - 1:       # the last round's scheme outputs are compared below
                    shutil.rmtree(dst, ignore_errors=True)   # each conversion starts with the others' files gone
        rate = total / best["read"]

        def line(label, key, extra=""):
            u, k = split[key]
            say(f"{label:<44} {total / best[key] / 1e9:7.2f} GB/s  {extra}(CPU {cpu[key] / total * 1e9:.2f} s/GB: "
                f"user {u / total * 1e9:.2f}, system {k / total * 1e9:.2f})")

        say("warm-up: every scheme and preset converted once, untimed, on a small checkpoint (kernels compiled or "
            "loaded from the cache); each output deleted once timed (not the last round's of the schemes)")
        say("rates: best wall time; CPU: the process's CPU seconds per GB in that round (all threads; user and system)")
        line("read (f.read per tensor, fresh buffers)", "read")
        line("read (readinto one reused buffer)", "readinto")
        for s in schemes:
            line("convert " + s, s, f"{100 * total / best[s] / rate:5.0f}% of the f.read rate ")
        for s in presets:
            line(f"convert {s} (compressed-tensors)", s, f"{100 * total / best[s] / rate:5.0f}% of the f.read rate ")

        equal = True
        if ort:
            def reader(t):
                raw = sources.read_rows(t, 0, t.rows)
                return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(t.shape)

            tensors = _tensors(src)
            secs, elems, equal = _ort_nbits(tensors, reader, base / "out-int4-b32" if "int4-b32" in schemes else None)
            ours = f"; quantspec int4-b32 end to end: {total / 2 / best['int4-b32'] / 1e9:.2f} Gelem/s" \
                if "int4-b32" in best else ""
            say(f"{'onnxruntime MatMulNBits int4 b32 routine':<44} {elems / secs / 1e9:7.2f} Gelem/s "
                f"(compute only{ours}); codes and scales {'byte-identical' if equal else 'DIFFERENT'}")
            secs, elems = _ort_quantize_data(tensors, reader, 1 << 24)
            say(f"{'onnxruntime quantize_data, int8 per channel':<44} {elems / secs / 1e9:7.3f} Gelem/s (compute only, "
                f"{elems} elements)")
        sources.close_all()
        if presets:
            equal &= presets_section(src, base, total, presets, child_runs or max(1, min(rounds, 3)), say,
                                     {p: cpu[p] for p in presets})
        if dask is not None and schemes:
            scheme = "int4-b32" if "int4-b32" in best else schemes[0]
            equal &= dask_section(src, base, total, best[scheme], rounds, dask, say, scheme)
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
    return equal
