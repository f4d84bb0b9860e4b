"""Cold-call latency: what a first call costs a fresh process on a machine whose kernel cache is empty.

Each case runs in a new Python process with an empty numba cache (``NUMBA_CACHE_DIR`` set to a
fresh directory, which quantspec's cache follows), then once more with the cache that run filled
(warm).  It prints, per case, the whole process's wall time and CPU time (user + system, the
children's ``getrusage``) and the first call's own wall time as the process measured it:

- ``onnx``: ``quantize_linear`` of 4096 float32 values to int8, per-tensor (a new combination of
  types: one kernel);
- ``tf``: ``tf.quantize`` of 4096 float32 values, qint8 MIN_COMBINED;
- ``litert``: the first ``Interpreter.run`` of bundled models (``cnn.tflite``: CONV_2D,
  DEPTHWISE_CONV_2D, ADD, pooling, MEAN, 1 x 16 x 16 x 3; ``bench_cnn.tflite``, the benchmark's
  64 x 64 x 3 CNN; ``mlp_softmax.tflite``);
- ``demo``: ``quantspec demo`` (the command), and ``QUANTSPEC_FAST=1 quantspec demo`` (the fast path
  forced: every kernel the demo's calls use compiled).

    python benchmarks/cold_start.py [--src DIR] [--repeat N] [--only onnx,tf,litert,demo]

``--src`` runs another checkout's ``src`` (to compare with an earlier version); ``--repeat`` runs each
cold case N times and keeps the fastest (the machine's load varies).  docs/performance.md quotes it.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROLOGUE = "import time; t0 = time.perf_counter()\n"
CASES = {
    "onnx": """
import numpy as np, quantspec.onnx as qo
x = np.linspace(-3, 3, 4096, dtype=np.float32)
t = time.perf_counter(); qo.quantize_linear(x, np.float32(0.05), np.int8(0)); call = time.perf_counter() - t
""",
    "tf": """
import numpy as np, quantspec.tf as qtf
x = np.linspace(-3, 3, 4096, dtype=np.float32)
t = time.perf_counter(); qtf.quantize(x, -3.0, 3.0, "qint8", mode="MIN_COMBINED"); call = time.perf_counter() - t
""",
    "litert cnn.tflite": """
import numpy as np, quantspec.litert as L
it = L.Interpreter(L.example_model("cnn.tflite"))
x = [np.zeros(t.shape, t.dtype.dtype) for t in it.inputs]
t = time.perf_counter(); it.run(x); call = time.perf_counter() - t
""",
    "litert bench_cnn.tflite": """
import os, numpy as np, quantspec, quantspec.litert as L
it = L.Interpreter(os.path.join(os.path.dirname(quantspec.__file__), "data", "bench_cnn.tflite"))
x = [np.zeros(t.shape, t.dtype.dtype) for t in it.inputs]
t = time.perf_counter(); it.run(x); call = time.perf_counter() - t
""",
    "litert mlp_softmax.tflite": """
import numpy as np, quantspec.litert as L
it = L.Interpreter(L.example_model("mlp_softmax.tflite"))
x = [np.zeros(t.shape, t.dtype.dtype) for t in it.inputs]
t = time.perf_counter(); it.run(x); call = time.perf_counter() - t
""",
}
EPILOGUE = "print('CALL', call, 'TOTAL', time.perf_counter() - t0)\n"


def _run(argv: list[str], env: dict) -> tuple[float, float, float | None]:
    """(wall, cpu, the call's own time or None) of a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])}... failed:\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    call = None
    for line in proc.stdout.splitlines():
        if line.startswith("CALL "):
            call = float(line.split()[1])
    return wall, cpu, call


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", default=str(ROOT / "src"), help="the package source directory to run")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", default="onnx,tf,litert,demo")
    args = ap.parse_args(argv)
    groups = args.only.split(",")
    base = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "QUANTSPEC_CACHE_DIR", "QUANTSPEC_FAST")}
    base.update(PYTHONPATH=args.src, TF_CPP_MIN_LOG_LEVEL="2")
    jobs = [(name, [sys.executable, "-c", PROLOGUE + code + EPILOGUE], {}) for name, code in CASES.items()
            if name.split()[0] in groups]
    if "demo" in groups:
        jobs.append(("quantspec demo", [sys.executable, "-m", "quantspec", "demo"], {}))
        jobs.append(("QUANTSPEC_FAST=1 quantspec demo", [sys.executable, "-m", "quantspec", "demo"],
                     {"QUANTSPEC_FAST": "1"}))
    print(f"{args.src}; each case in a new process; cold: an empty kernel cache (best of {args.repeat}); warm: the "
          "cache that run filled")
    print(f"{'case':<34} {'cold wall':>10} {'cold cpu':>9} {'first call':>11} {'warm wall':>10} {'warm call':>10}")
    for name, cmd, extra in jobs:
        best = None
        for _ in range(args.repeat):
            cache = tempfile.mkdtemp(prefix="quantspec-cold-")
            env = dict(base, NUMBA_CACHE_DIR=cache, **extra)
            try:
                cold = _run(cmd, env)
                warm = _run(cmd, env)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
            if best is None or cold[0] < best[0][0]:
                best = (cold, warm)
        (cw, cc, ccall), (ww, _, wcall) = best
        fmt = lambda v: f"{v:9.2f}s" if v is not None else f"{'-':>10}"
        print(f"{name:<34} {cw:9.2f}s {cc:8.2f}s {fmt(ccall):>11} {ww:9.2f}s {fmt(wcall):>10}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
