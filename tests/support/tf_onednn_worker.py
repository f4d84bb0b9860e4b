"""Run the oneDNN corpus of tf_oracle through TensorFlow with oneDNN ON and save the answers.

    python tests/support/tf_onednn_worker.py OUT.npz

Started as a subprocess by tests/test_tf_onednn.py (TensorFlow reads TF_ENABLE_ONEDNN_OPTS once, at
import, so the oneDNN kernels need a process of their own).  Output: for case i, either the arrays
``{i}.{k}`` or an entry in ``__errors__`` (JSON: case index -> TensorFlow exception class), plus
``__digest__``, a hash of every case's inputs (the test checks both sides built the same corpus),
and ``__witness__``, a Dequantize result that only the oneDNN kernel gives (proof that oneDNN ran).
"""

import json
import os
import sys

os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["CUDA_VISIBLE_DEVICES"] = ""
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import tf_oracle as O  # noqa: E402


def main(path: str) -> int:
    import tensorflow as tf

    cases = O.onednn_cases()
    arrays, errors = {}, {}
    for i, c in enumerate(cases):
        if c.op == "dequantize" and c.x.size == 0 and c.attrs["mode"] == "SCALED" and c.attrs["axis"] is None:
            errors[str(i)] = "abort"  # TF's oneDNN Dequantize aborts the process on an empty input
            continue
        r = O.run_tf(tf, c)
        if isinstance(r, str):
            errors[str(i)] = r
        else:
            for k, a in enumerate(r):
                a = np.asarray(a)
                arrays[f"{i}.{k}"] = a.view(np.uint16) if a.dtype.kind == "V" else a  # bfloat16: its bits
    q = tf.bitcast(tf.constant(np.array([255], np.uint8)), tf.quint8)
    witness = tf.raw_ops.Dequantize(input=q, min_range=np.float32(0.5), max_range=np.float32(4.0), mode="SCALED",
                                    narrow_range=True).numpy()
    np.savez(path, __errors__=np.frombuffer(json.dumps(errors).encode(), np.uint8),
             __digest__=np.frombuffer(O.digest(cases).encode(), np.uint8), __witness__=witness, **arrays)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
