"""The first fast-path calls of a process, made from several threads at once, each get their result.

Kernel modules are imported on first use; a thread that arrives while another is importing one must
wait for that import instead of reading the half-initialized module (it used to raise
``AttributeError: partially initialized module 'quantspec._fastpath.fastmap'``)."""

import subprocess
import sys

from refs import require_fast

_CODE = r"""
import threading
import numpy as np
import quantspec
from quantspec._fastpath import jit

x = np.linspace(-3, 3, 1 << 20, dtype=np.float32)
q = np.round(x * 10).clip(-128, 127).astype(np.int8)
barrier = threading.Barrier(4)
results, errors = {}, []

def call(i):
    barrier.wait()
    try:
        if i % 2:
            results[i] = quantspec.onnx.quantize_linear(x, np.float32(0.1), np.int8(0))
        else:
            results[i] = quantspec.onnx.dequantize_linear(q, np.float32(0.1), np.int8(0))
    except Exception as e:
        errors.append(repr(e))

threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
with jit.reference_only():
    want_q = quantspec.onnx.quantize_linear(x, np.float32(0.1), np.int8(0))
    want_dq = quantspec.onnx.dequantize_linear(q, np.float32(0.1), np.int8(0))
for i, got in results.items():
    want = want_q if i % 2 else want_dq
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), i
print("ok", len(results))
"""


def test_first_fast_calls_from_several_threads_at_once():
    require_fast()
    for _ in range(3):                       # the race needs the import to be in progress: try a few times
        r = subprocess.run([sys.executable, "-c", _CODE], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        assert r.stdout.strip() == "ok 4"
