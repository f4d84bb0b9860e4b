"""quantspec.tf ``kernel="onednn"`` against stock TensorFlow 2.21 with oneDNN on (x86-64 Linux).

TensorFlow decides at import whether its oneDNN kernels run, and conftest switched them off for this
process, so one subprocess (tests/support/tf_onednn_worker.py) runs the whole oneDNN corpus of tf_oracle with
TF_ENABLE_ONEDNN_OPTS=1 and saves TensorFlow's answers; every case is then compared here, bytes for
bytes, with quantspec's ``kernel="onednn"`` result.  The corpus covers the rewritten calls, NaN (which
the oneDNN kernels treat deterministically), the rank-0 MIN_FIRST path, the calls the oneDNN kernels
refuse (both sides must refuse), and calls that are not rewritten (which must equal Eigen).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tf_oracle as O
from refs import REQUIRE, require

HERE = Path(__file__).parent / "support"


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    require("tensorflow")
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        message = "the oneDNN rewrite is stock TensorFlow's on x86-64 Linux only"
        if REQUIRE:
            pytest.fail(message + f" (this is {platform.system()} {platform.machine()})")
        pytest.skip(message)
    out = tmp_path_factory.mktemp("onednn") / "answers.npz"
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    proc = subprocess.run([sys.executable, str(HERE / "tf_onednn_worker.py"), str(out)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"the oneDNN worker failed:\n{proc.stderr[-3000:]}"
    z = np.load(out)
    return {"errors": json.loads(bytes(z["__errors__"]).decode()), "digest": bytes(z["__digest__"]).decode(),
            "witness": z["__witness__"], "arrays": {k: z[k] for k in z.files if not k.startswith("__")}}


def test_onednn_was_on(answers):
    # only _MklDequantize reads quint8 narrow_range as v_min = 1: code 255 in [0.5, 4] -> 127.5 (Eigen: 4.0)
    assert answers["witness"].tolist() == [127.5], "TensorFlow did not run its oneDNN kernels in the subprocess"


def test_onednn_corpus(answers):
    cases = O.onednn_cases()
    assert O.digest(cases) == answers["digest"], "the subprocess built a different corpus"
    bad, refused = [], 0
    for i, c in enumerate(cases):
        err = answers["errors"].get(str(i))
        if err is not None:
            refused += 1
            want = err
        else:
            n = 3 if c.op == "quantize" else 1
            want = tuple(answers["arrays"][f"{i}.{k}"] for k in range(n))  # bfloat16 as its uint16 bits
        got = O.run_qs(c, "onednn")
        d = O.compare(c, want, got)
        if d:
            bad.append(f"{c.label()[:300]}\n    -> {d}")
    assert not bad, f"{len(bad)} of {len(cases)} cases differ from TensorFlow with oneDNN:\n" + "\n".join(bad[:8])
    assert 0 < refused < len(cases) // 10


def test_onednn_differs_from_eigen_where_documented(answers):
    """The corpus is not vacuous: on the rewritten calls, the oneDNN answers differ from Eigen's."""
    cases = O.onednn_cases()
    differ = sum(1 for c in cases if c.op == "quantize" and c.attrs["mode"] in ("SCALED", "MIN_FIRST")
                 and c.attrs["T"] in ("qint8", "quint8") and not c.attrs["narrow_range"] and c.x.ndim
                 and O.compare(c, O.run_qs(c, "eigen"), O.run_qs(c, "onednn")) is not None)
    assert differ > 50
