"""``quantspec example DIR`` writes the files the README's shell lines use, each readable by the
library that reads its format."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from refs import require

ROOT = Path(__file__).resolve().parents[1]


def test_example_writes_every_file(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "quantspec", "example", str(tmp_path / "ex")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    from quantspec.examples import FILES

    d = tmp_path / "ex"
    assert sorted(p.name for p in d.iterdir()) == sorted(FILES)
    assert np.load(d / "weights.npy").dtype == np.float32 and np.load(d / "x.npy").dtype == np.int8

    onnx = require("onnx")
    onnx.checker.check_model(onnx.load(str(d / "model.onnx")), full_check=True)

    safetensors = require("safetensors")
    index = json.loads((d / "llama-bf16" / "model.safetensors.index.json").read_text())
    seen = {}
    for shard in sorted(set(index["weight_map"].values())):
        with safetensors.safe_open(str(d / "llama-bf16" / shard), framework="numpy") as f:
            for name in f.keys():
                seen[name] = shard
                assert str(f.get_tensor(name).dtype) == "bfloat16"
    assert seen == index["weight_map"]
    assert index["metadata"]["total_size"] == sum(os.path.getsize(d / "llama-bf16" / s) for s in set(seen.values())) \
        - sum(8 + int.from_bytes((d / "llama-bf16" / s).read_bytes()[:8], "little") for s in set(seen.values()))


def test_example_into_an_unwritable_place_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "quantspec", "example", str(blocker / "sub")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
