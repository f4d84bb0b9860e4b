"""``quantspec bench [--quick]``: quantspec's throughput side by side with every installed peer.

One process, warm buffers (every output preallocated and written once before timing), best of N
rounds, the contenders of a case timed in turn within each round (in a shuffled order) so that they
share the machine's state.  Every thread pool keeps its default settings — no ``OMP_WAIT_POLICY``,
no ``OPENBLAS_NUM_THREADS``, onnxruntime's own spinning — so the figures are what a user gets:
within a round each contender is called a few times in a row and its best call kept, so that the
previous contender's threads, still spinning after its last call, do not count against the next
one.  For each case it prints quantspec's rate (elements per second), the fraction of this
machine's copy bandwidth that rate moves (the bytes read and written per element against the
fastest warm float32 copy measured on the same threads, :func:`copy_bandwidth`), each peer's rate,
the ratio quantspec / peer of the best times, the *paired* ratio (the median over rounds of the two
contenders' ratio within a round: steadier on a noisy machine, :func:`paired_ratio`), and whether
the peer's output is **byte-identical** to quantspec's (the exit status is 1 when one is not).

Peers, each when it is installed:

- onnxruntime (CPU EP, 2 intra-op threads, ``ORT_DISABLE_ALL``), through IO binding into
  preallocated outputs;
- onnx.reference (``ReferenceEvaluator``);
- TensorFlow's raw QuantizeV2 / Dequantize, Eigen kernels, in a subprocess with
  ``TF_ENABLE_ONEDNN_OPTS=0`` and 2 intra-op threads (outputs compared by SHA-256);
- torch (``quantize_per_tensor`` / ``dequantize``, 2 threads), on a power-of-two scale: torch
  multiplies by the reciprocal of the scale (FBGEMM), which is ONNX's division only for such scales;
- LiteRT's interpreter with ``BUILTIN_REF`` kernels, on the bundled int8 CNN
  (``quantspec/data/bench_cnn.tflite``, made by ``benchmarks/make_bench_cnn.py``), on a converter-made
  int8 MobileNetV2 when the checkout's ``benchmarks/litert_zoo.py`` can build it, and on any
  ``--model`` given; and per model, kernel mode and thread setting (one thread, each side's default),
  LiteRT with the op resolver the mode reproduces, on the bundled models and converter-made
  EfficientNetB0, MobileNetV3Small and a small transformer (:mod:`quantspec.litert._bench`).

``--quick`` runs 256 Ki elements and 3 rounds, without the MobileNetV2 (seconds; a test runs it
smaller still); the full run uses 64 Mi elements and 7 rounds.  Results and the machine are recorded in docs/performance.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from typing import Callable

import numpy as np

from .benchcase import Case, Peer
from .onnxmodels.io import one_node_model

__all__ = ["main", "machine", "copy_bandwidth", "paired_ratio"]

THREADS = 2
SEED = 20260601
#: calls of a contender in a row within a round (its best counts)
REPEAT = 3


# -- the machine ----------------------------------------------------------------------------------
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(module: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:
        return None


def machine() -> dict:
    """What the numbers were measured on."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    versions = {name: _version(dist) for name, dist in
                (("numpy", "numpy"), ("numba", "numba"), ("onnxruntime", "onnxruntime"), ("onnx", "onnx"),
                 ("tensorflow", "tensorflow-cpu"), ("torch", "torch"), ("ai-edge-litert", "ai-edge-litert"))}
    if versions["tensorflow"] is None:
        versions["tensorflow"] = _version("tensorflow")
    return {"cpu": _cpu_model(), "cores": cores, "python": platform.python_version(), **versions}


# -- timing ---------------------------------------------------------------------------------------
def _timed(contenders: dict[str, Callable[[], object]], rounds: int, seed: int = SEED,
           repeat: int = REPEAT) -> dict[str, list[float]]:
    """Wall times of each contender in ``rounds`` rounds (after one warm call each).  Within a round
    every contender runs ``repeat`` times in a row, in an order of contenders shuffled per round
    (seeded), and its best call counts: no contender always follows the same one, and the first
    call after another contender's (whose thread pool may still be spinning) does not decide."""
    import random

    for f in contenders.values():
        f()
    order = list(contenders)
    shuffle = random.Random(seed).shuffle
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(rounds):
        shuffle(order)
        for k in order:
            f = contenders[k]
            best = float("inf")
            for _ in range(repeat):
                t0 = time.perf_counter()
                f()
                best = min(best, time.perf_counter() - t0)
            times[k].append(best)
    return times


def _best(contenders: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Best wall time of each contender over ``rounds`` rounds (:func:`_timed`)."""
    return {k: min(v) for k, v in _timed(contenders, rounds).items()}


def paired_ratio(ours: list[float], theirs: list[float]) -> float:
    """The median over rounds of (peer's time / quantspec's time) in the same round.  On a shared,
    noisy machine this is steadier than the ratio of the two bests: both contenders of a round saw
    the same machine state."""
    return float(np.median(np.asarray(theirs) / np.asarray(ours)))


def _copiers() -> dict[str, Callable]:
    """float32 copies ``(a, b)``: numpy's (one thread), and on THREADS threads of quantspec's pool
    (the threads the kernels use) with ordinary stores and with streaming stores (what the kernels
    use for large outputs; ``b`` 64-byte aligned, its size a multiple of 256)."""
    copiers = {"np.copyto, 1 thread": lambda a, b: np.copyto(b, a)}
    try:
        from numba import njit

        from ._fastpath import pool
        from ._fastpath.nbprim import claim, finished, stream_fence, stream_line
    except Exception:
        return copiers
    block = 1 << 15

    @njit(nogil=True, cache=False)
    def plain(a, b, claims, step):
        work = a.size // block
        while True:
            w0 = claim(claims, step)
            if w0 >= work:
                break
            w1 = min(w0 + step, work)
            for i in range(np.uint64(w0 * block), np.uint64(w1 * block)):
                b[i] = a[i]
            finished(claims, w1 - w0)
        return finished(claims, 0)

    @njit(nogil=True, cache=False)
    def streamed(a, b, claims, step):
        work = a.size // block
        buf = np.empty(256, np.float32)
        while True:
            w0 = claim(claims, step)
            if w0 >= work:
                break
            w1 = min(w0 + step, work)
            for i in range(np.uint64(w0 * block), np.uint64(w1 * block), np.uint64(256)):
                for j in range(256):
                    buf[j] = a[i + j]
                for c in range(0, 256, 16):
                    stream_line(b, i + c, buf, c)
            stream_fence()
            finished(claims, w1 - w0)
        return finished(claims, 0)

    def on_threads(kernel):
        def copy(a, b):
            work = a.size // block
            claims = np.zeros(2, np.int64)
            pool.run(kernel, (a, b, claims, max(1, work // (THREADS * 16))), claims, work, THREADS)
        return copy

    copiers[f"{THREADS} threads"] = on_threads(plain)
    copiers[f"{THREADS} threads, streaming stores"] = on_threads(streamed)
    return copiers


def _aligned(n: int, dtype) -> np.ndarray:
    raw = np.zeros(n * np.dtype(dtype).itemsize + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    return raw[off:off + n * np.dtype(dtype).itemsize].view(dtype)


def copy_bandwidth(n: int, rounds: int) -> tuple[float, str]:
    """Bytes per second of the fastest warm float32 copy of ``n`` elements (numpy's, and numba's on
    THREADS threads with ordinary and with streaming stores), read + write counted (8 bytes an
    element; the read-for-ownership of ordinary stores is not counted), and how it was copied: the
    ceiling a kernel that reads and writes as much could reach on this machine."""
    n = max(n // (1 << 15), 1) << 15
    a = np.ones(n, np.float32)
    b = _aligned(n, np.float32)
    copiers = _copiers()
    times = _timed({k: (lambda f=f: f(a, b)) for k, f in copiers.items()}, rounds)
    how = min(times, key=lambda k: min(times[k]))
    assert np.array_equal(a, b)
    return 8 * n / min(times[how]), how


def _sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


# -- the cases --------------------------------------------------------------------------------------
def _data(n: int, seed: int = SEED) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(0, 40, n).astype(np.float32)


def _onnx_cases(n: int, rounds: int) -> list[Case]:
    import ml_dtypes

    from . import onnx as qo

    x = _data(n)
    side = int(np.sqrt(n))
    x2 = x[: side * side].reshape(side, side)
    s, z = np.float32(0.8), np.int8(3)
    sa = np.linspace(0.5, 1.2, side).astype(np.float32)
    za = (np.arange(side) % 7 - 3).astype(np.int8)
    block = 32
    sb = np.linspace(0.5, 1.2, side * (side // block)).astype(np.float32).reshape(side, side // block)

    y8 = np.zeros(n, np.int8)
    y_axis = np.zeros((side, side), np.int8)
    y_axis1 = np.zeros((side, side), np.int8)
    y4 = np.zeros((side, side), ml_dtypes.int4)
    yf8 = np.zeros(n, ml_dtypes.float8_e4m3fn)
    q8 = qo.quantize_linear(x, s, z)
    d = np.zeros(n, np.float32)
    # torch multiplies by the reciprocal and adds the zero point before rounding: it is ONNX's
    # arithmetic only for a power-of-two scale and an even zero point
    pow2, z0 = np.float32(0.125), np.int8(0)
    y_pow2 = np.zeros(n, np.int8)
    d_pow2 = np.zeros(n, np.float32)
    q_pow2 = qo.quantize_linear(x, pow2, z0)

    cases = [
        Case("onnx Q f32->int8 per-tensor", n, 5, lambda: qo.quantize_linear(x, s, z, out=y8), lambda: y8),
        Case("onnx Q f32->int8 per-axis (axis 0)", side * side, 5,
             lambda: qo.quantize_linear(x2, sa, za, axis=0, out=y_axis), lambda: y_axis),
        Case("onnx Q f32->int8 per-axis (axis 1, last)", side * side, 5,
             lambda: qo.quantize_linear(x2, sa, za, axis=1, out=y_axis1), lambda: y_axis1),
        Case("onnx DQ int8->f32 per-tensor", n, 5, lambda: qo.dequantize_linear(q8, s, z, out=d), lambda: d),
        Case(f"onnx Q f32->int4 blocked ({block}, last axis)", side * side, 5,
             lambda: qo.quantize_linear(x2, sb, axis=1, block_size=block, output_dtype="int4", out=y4), lambda: y4),
        Case("onnx Q f32->float8e4m3fn per-tensor", n, 5,
             lambda: qo.quantize_linear(x, s, output_dtype="float8e4m3fn", out=yf8), lambda: yf8),
        Case("onnx Q f32->int8, scale 2^-3, zp 0 (torch)", n, 5, lambda: qo.quantize_linear(x, pow2, z0, out=y_pow2),
             lambda: y_pow2),
        Case("onnx DQ int8->f32, scale 2^-3, zp 0 (torch)", n, 5,
             lambda: qo.dequantize_linear(q_pow2, pow2, z0, out=d_pow2), lambda: d_pow2),
    ]
    inputs = {cases[0].name: ("QuantizeLinear", x, s, z, {}, "int8"),
              cases[1].name: ("QuantizeLinear", x2, sa, za, {"axis": 0}, "int8"),
              cases[2].name: ("QuantizeLinear", x2, sa, za, {"axis": 1}, "int8"),
              cases[3].name: ("DequantizeLinear", q8, s, z, {}, "float"),
              cases[4].name: ("QuantizeLinear", x2, sb, None, {"axis": 1, "block_size": block, "output_dtype": 22},
                              "int4"),
              cases[5].name: ("QuantizeLinear", x, s, None, {"output_dtype": 17}, "float8e4m3fn")}
    for case in cases:
        if case.name in inputs:
            peer = _ort_peer(*inputs[case.name])
            if peer:
                case.peers.append(peer)
    for case in (cases[0], cases[3]):
        peer = _reference_peer(*inputs[case.name])
        if peer:
            case.peers.append(peer)
    for case, kind in ((cases[6], "q"), (cases[7], "dq")):
        peer = _torch_peer(kind, x if kind == "q" else q_pow2, float(pow2), int(z0))
        if peer:
            case.peers.append(peer)
    return cases


def ort_session(model, spin: bool = True):
    """The onnxruntime peer's session for an ONNX model: THREADS intra-op threads, no graph
    optimisation, CPU; idle threads spin a while (onnxruntime's default) unless ``spin`` is False."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _ort_peer(op, x, scale, zp, attrs, out_type) -> Peer | None:
    try:
        import onnxruntime as ort
    except Exception:
        return None
    import ctypes

    from .dtypes import qtype

    model = one_node_model(op, x, scale, zp, attrs, out_type)
    sess = ort_session(model)
    io = sess.io_binding()
    io.bind_ortvalue_input("x", ort.OrtValue.ortvalue_from_numpy(x))
    t = qtype(out_type)
    if t.name in ("int8", "uint8", "float"):
        y = np.zeros(x.shape, t.dtype)
        io.bind_ortvalue_output("y", ort.OrtValue.ortvalue_from_numpy(y))
        return Peer("onnxruntime", lambda: sess.run_with_iobinding(io), lambda: y)
    io.bind_output("y", "cpu")                      # no numpy type: read the raw bytes

    def raw():
        (ov,) = io.get_outputs()
        nbytes = (x.size * t.bits + 7) // 8
        return ctypes.string_at(ov.data_ptr(), nbytes)

    return Peer("onnxruntime", lambda: sess.run_with_iobinding(io), raw, note="raw bytes")


def _reference_peer(op, x, scale, zp, attrs, out_type) -> Peer | None:
    try:
        from onnx.reference import ReferenceEvaluator
    except Exception:
        return None
    model = one_node_model(op, x, scale, zp, attrs, out_type)
    ref = ReferenceEvaluator(model)
    box = {}

    def run():
        with np.errstate(all="ignore"):
            (box["y"],) = ref.run(None, {"x": x})

    return Peer("onnx.reference", run, lambda: box["y"])


def _torch_peer(kind: str, x: np.ndarray, scale: float, zp: int) -> Peer | None:
    try:
        import torch
    except Exception:
        return None
    import warnings

    torch.set_num_threads(THREADS)
    warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
    box = {}
    if kind == "q":
        xt = torch.from_numpy(x)

        def run():
            box["y"] = torch.quantize_per_tensor(xt, scale, zp, torch.qint8)

        return Peer("torch", run, lambda: box["y"].int_repr().numpy())
    qt = torch._make_per_tensor_quantized_tensor(torch.from_numpy(x), scale, zp)

    def run():
        box["y"] = qt.dequantize()

    return Peer("torch", run, lambda: box["y"].numpy())


# -- TensorFlow (a subprocess: TF_ENABLE_ONEDNN_OPTS=0 must be set before TensorFlow is imported) ------
TF_CASES = [("quantize", "qint8", "MIN_COMBINED"), ("quantize", "quint8", "MIN_FIRST"), ("quantize", "qint8", "SCALED"),
            ("dequantize", "qint8", "MIN_COMBINED"), ("dequantize", "quint8", "MIN_FIRST"),
            ("dequantize", "qint8", "SCALED")]
TF_RANGE = (-100.0, 90.0)


def _tf_inputs(n: int, kind: str, T: str, mode: str):
    x = _data(n)
    if kind == "quantize":
        return x
    from . import tf as qtf

    q, lo, hi = qtf.quantize(x, *TF_RANGE, T, mode=mode)
    return q, lo, hi


def _tf_worker(n: int, rounds: int) -> None:
    """Run in the subprocess: time TensorFlow's raw ops on the cases' inputs; print JSON."""
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    results = {}
    for kind, T, mode in TF_CASES:
        dtype = getattr(tf, T)
        if kind == "quantize":
            x = tf.constant(_tf_inputs(n, kind, T, mode))
            lo, hi = tf.constant(np.float32(TF_RANGE[0])), tf.constant(np.float32(TF_RANGE[1]))
            box = {}

            def run():
                box["y"] = tf.raw_ops.QuantizeV2(input=x, min_range=lo, max_range=hi, T=dtype, mode=mode)[0]
                box["y"].numpy()              # eager ops are synchronous; fetching a view is free
        else:
            q, lo_, hi_ = _tf_inputs(n, kind, T, mode)
            qt = tf.bitcast(tf.constant(q), dtype)
            lo, hi = tf.constant(lo_), tf.constant(hi_)
            box = {}

            def run():
                box["y"] = tf.raw_ops.Dequantize(input=qt, min_range=lo, max_range=hi, mode=mode)
                box["y"].numpy()
        t = _best({"tf": run}, rounds)["tf"]
        y = box["y"].numpy()
        results[f"{kind} {T} {mode}"] = {"seconds": t, "sha256": _sha(y.view(np.uint8))}
    print(json.dumps(results))


def _tf_cases(n: int, rounds: int) -> list[Case]:
    from . import tf as qtf

    peer_results = None
    if _version("tensorflow-cpu") or _version("tensorflow"):
        env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0", TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
        proc = subprocess.run([sys.executable, "-m", "quantspec.bench", "--tf-worker", str(n), str(rounds)],
                              capture_output=True, text=True, env=env)
        if proc.returncode == 0:
            peer_results = json.loads(proc.stdout.strip().splitlines()[-1])
        else:
            print(f"(TensorFlow peer failed: {proc.stderr.strip().splitlines()[-1:]})", file=sys.stderr)
    cases = []
    for kind, T, mode in TF_CASES:
        key = f"{kind} {T} {mode}"
        if kind == "quantize":
            x = _tf_inputs(n, kind, T, mode)
            out = np.zeros(n, qtf.quantize_op.spec.tf_type(T).dtype)

            def run(x=x, out=out, T=T, mode=mode):
                qtf.quantize(x, *TF_RANGE, T, mode=mode, out=out)

            case = Case(f"tf QuantizeV2 {T} {mode}", n, 5, run, lambda out=out: out)
        else:
            q, lo, hi = _tf_inputs(n, kind, T, mode)
            out = np.zeros(n, np.float32)

            def run(q=q, lo=lo, hi=hi, mode=mode, out=out):
                qtf.dequantize(q, lo, hi, mode=mode, out=out)

            case = Case(f"tf Dequantize {T} {mode}", n, 5, run, lambda out=out: out)
        if peer_results and key in peer_results:
            r = peer_results[key]
            case.peers.append(Peer("tensorflow", None, lambda r=r: r["sha256"], seconds=r["seconds"],
                                   note="Eigen, subprocess"))
        cases.append(case)
    return cases


# -- LiteRT: whole int8 models ---------------------------------------------------------------------------
def _zoo_model(arch: str) -> tuple[str | None, str]:
    """(path, "") of a converter-made model built by the checkout's ``benchmarks/litert_zoo.py``, or
    (None, why not)."""
    from .litert._bench import zoo_model

    return zoo_model(arch)


def _litert_cases(rounds: int, models: list[str] | None = None, zoo: bool = True) -> list[Case]:
    paths = [("CNN (bench_cnn.tflite)", os.path.join(os.path.dirname(__file__), "data", "bench_cnn.tflite"))]
    mobilenet, why = _zoo_model("mobilenet_v2") if zoo else (None, "not with --quick")
    if mobilenet:
        paths.append(("MobileNetV2 (converter-made)", mobilenet))
    else:
        print(f"(litert int8 MobileNetV2 skipped: {why})", flush=True)
    paths += [(os.path.basename(m), m) for m in models or ()]
    return [_litert_case(label, path) for label, path in paths]


def _litert_case(label: str, path: str) -> Case:
    from . import litert as L
    from .litert._bench import inputs

    interp = L.Interpreter(path)
    (x,) = inputs(interp, SEED)
    box = {}

    def run():
        box["y"] = interp.run([x])[0]

    case = Case(f"litert int8 {label}, one inference", 1, 0, run, lambda: box["y"], unit="inferences/s")
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except Exception:
        return case
    ref = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_REF, num_threads=1)
    ref.allocate_tensors()
    i_in, i_out = ref.get_input_details()[0]["index"], ref.get_output_details()[0]["index"]
    rbox = {}

    def run_ref():
        ref.set_tensor(i_in, x)
        ref.invoke()
        rbox["y"] = ref.get_tensor(i_out)

    case.peers.append(Peer("LiteRT BUILTIN_REF", run_ref, lambda: rbox["y"]))
    return case


# -- report ------------------------------------------------------------------------------------------------
def _as_bytes(v) -> bytes:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    return np.ascontiguousarray(np.asarray(v)).tobytes()


def _equal(case: Case, peer: Peer, ours: np.ndarray) -> bool:
    theirs = peer.output()
    if isinstance(theirs, str):                      # a SHA-256 from a subprocess
        return theirs == _sha(np.asarray(ours).view(np.uint8))
    if peer.note == "raw bytes":                     # onnxruntime's packed sub-byte output
        from .onnx import pack

        return _as_bytes(theirs) == pack(ours) if ours.dtype.itemsize == 1 and "int4" in str(ours.dtype) \
            else _as_bytes(theirs) == np.ascontiguousarray(ours).view(np.uint8).tobytes()
    return np.asarray(theirs).dtype.itemsize == ours.dtype.itemsize and _as_bytes(theirs) == _as_bytes(ours)


def _fmt_rate(v: float, unit: str) -> str:
    return f"{v / 1e9:7.2f}" if unit == "Gelem/s" else f"{v:7.0f}"


def run_cases(cases: list[Case], rounds: int, bandwidth: float, lines: list[str]) -> bool:
    ok = True
    for case in cases:
        contenders = {"quantspec": case.run}
        contenders.update({p.name: p.run for p in case.peers if p.run is not None})
        times = _timed(contenders, rounds)
        best = {k: min(v) for k, v in times.items()}
        for p in case.peers:
            if p.seconds is not None:
                best[p.name] = p.seconds
        ours = np.asarray(case.output())
        rate = case.elements / best["quantspec"]
        frac = (f"{rate * case.bytes_per_element / bandwidth:5.0%}" if case.bytes_per_element else "    -")
        head = f"{case.name:<48} {_fmt_rate(rate, case.unit)} {case.unit:<13} {frac:>6}"
        if not case.peers:
            lines.append(head)
        for i, p in enumerate(case.peers):
            equal = _equal(case, p, ours)
            ok &= equal
            prate = case.elements / best[p.name]
            paired = (f"{paired_ratio(times['quantspec'], times[p.name]):7.2f}x" if p.name in times
                      else f"{'-':>8}")         # a peer timed in a subprocess has no rounds here
            lines.append(f"{head if i == 0 else ' ' * len(head)}  {p.name:<19} {_fmt_rate(prate, case.unit)}  "
                         f"{rate / prate:7.2f}x  {paired}  {'equal' if equal else 'DIFFERENT'}")
        print("\n".join(lines[-max(1, len(case.peers)):]), flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="quantspec bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="256 Ki elements, 3 rounds (seconds)")
    parser.add_argument("--size", type=int, default=None, help="elements per case (default 64 Mi, --quick 256 Ki)")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds per case, best kept (default 7, --quick 3)")
    parser.add_argument("--only", action="append", choices=("onnx", "tf", "litert", "equiv", "calibrate", "convert",
                                                             "onnx-models"),
                        help="run only these groups (convert: whole checkpoints; onnx-models: whole ONNX models "
                        "against onnxruntime's quantize_static and MatMulNBitsQuantizer; both only when asked)")
    parser.add_argument("--dask", metavar="local:N|ADDRESS", help="with --only convert: also time the conversion on a "
                        "Dask cluster (local:N: 1 to N worker processes), with the per-task overhead")
    parser.add_argument("--model", action="append", metavar="MODEL.tflite",
                        help="also time this int8 .tflite model against LiteRT's BUILTIN_REF (repeatable)")
    parser.add_argument("--tf-worker", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.tf_worker:
        _tf_worker(*args.tf_worker)
        return 0
    n = args.size or ((1 << 18) if args.quick else (64 << 20))
    rounds = args.rounds or (3 if args.quick else 7)
    groups = args.only or ["onnx", "tf", "litert", "equiv", "calibrate"]

    from ._fastpath import jit

    m = machine()
    print(f"machine: {m['cpu']}, {m['cores']} cores; python {m['python']}, numpy {m['numpy']}, numba {m['numba']}")
    print("peers: " + ", ".join(f"{k} {v}" for k, v in m.items()
                                if k in ("onnxruntime", "onnx", "tensorflow", "torch", "ai-edge-litert") and v))
    print(f"fast path: {'on' if jit.enabled() else 'OFF (numba missing or QUANTSPEC_FAST=0)'}; "
          f"{n} elements per case, best of {rounds} rounds, warm buffers")
    bandwidth, how = copy_bandwidth(n, rounds)
    print(f"copy bandwidth (float32, {how}; read + write counted): {bandwidth / 1e9:.1f} GB/s\n")
    print(f"{'case':<48} {'quantspec':>7} {'':<13} {'% copy':>6}  {'peer':<19} {'peer':>7}  {'ratio':>8}  "
          f"{'paired':>8}  output")
    lines: list[str] = []
    ok = True
    if "onnx" in groups:
        ok &= run_cases(_onnx_cases(n, rounds), rounds, bandwidth, lines)
    if "tf" in groups:
        ok &= run_cases(_tf_cases(n, rounds), rounds, bandwidth, lines)
    if "litert" in groups:
        ok &= run_cases(_litert_cases(rounds, args.model, zoo=not args.quick), max(rounds, 10), bandwidth, lines)
        from .litert._bench import mode_cases

        ok &= run_cases(mode_cases(rounds, zoo=not args.quick), max(rounds, 10), bandwidth, lines)
    for group, section in (("equiv", "quantspec.equiv.bench"), ("calibrate", "quantspec.calibrate.bench")):
        if group in groups:            # each section is its module's lines(); a "DIFFERENT" fails the run
            import importlib

            mod = importlib.import_module(section)
            out = mod.lines(args.size, args.quick) if group == "equiv" else mod.lines(args.quick, rounds)
            print(f"\n{group}:\n" + "\n".join(out), flush=True)
            ok &= not any("DIFFERENT" in line for line in out)
    if "convert" in groups:   # a bfloat16 checkpoint of 2 bytes per element (default 1 GiB, --quick 32 MiB)
        from .checkpoint import bench as convert_bench

        print()
        ok &= convert_bench.run(2 * args.size if args.size else (32 << 20) if args.quick else (1 << 30), rounds,
                                dask=args.dask)
    if "onnx-models" in groups:   # whole ONNX models (quantspec.onnxmodels.bench)
        from .onnxmodels import bench as models_bench

        out = models_bench.lines(args.quick, rounds)
        print("\nonnx-models:\n" + "\n".join(out), flush=True)
        ok &= not any("DIFFERENT" in line for line in out)
    print("\nall timed outputs equal the peers'" if ok else "\nSOME OUTPUTS DIFFER FROM THE PEER'S")
    return 0 if ok else 1


if __name__ == "__main__":  # pragma: no cover - the TensorFlow worker and direct runs
    sys.exit(main())
