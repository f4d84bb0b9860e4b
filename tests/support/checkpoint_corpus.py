"""A small sharded bfloat16 checkpoint with Llama-style names and shapes, and the values that break
converters planted in it (test-only helper).

- Shapes exercise partial blocks (in_features 80 and 200: not multiples of 32, 64, 128 or 256), odd
  rows (77 columns: packed rows straddle bytes), 1-D norms, an int64 tensor, a 3-D tensor.
- Planted rows: exact ties for each rule (a row whose scale is exactly 1 and values k + 1/2; MX and
  float8 grid midpoints), +-0, all-zero rows and blocks (mixed zero signs), blocks of one sign
  (onnxruntime's int4 scale is then negative), bfloat16 subnormals, huge values (1e30), a single
  outlier per block.

``QUANTSPEC_CHECKPOINT_SCALE`` (default 1) multiplies the layer count, for a heavier local run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import ml_dtypes
import numpy as np

from quantspec._tensorfiles import tensorio
from quantspec.checkpoint.bench import llama_shapes

BF16 = ml_dtypes.bfloat16
SCALE = int(os.environ.get("QUANTSPEC_CHECKPOINT_SCALE", "1"))


def _planted(rng, rows: int, cols: int) -> np.ndarray:
    """A float32 weight with special rows planted (values exactly representable in bfloat16)."""
    w = (rng.standard_normal((rows, cols)) * 0.05).astype(np.float32)
    specials = []
    r = np.zeros(cols, np.float32)
    r[0], r[1:9] = 127, [2.5, -3.5, 0.5, -0.5, 1.5, 126.5, -126.5, 64.5]  # int8 scale 1 (amax 127): ties
    specials.append(r)
    r = np.zeros(cols, np.float32)
    r[0], r[1], r[2:8] = -8, 0, [2.5, -1.5, 0.5, 3.5, -2.5, 7.5]          # int4 scale 1 in the first block: ties
    specials.append(r)
    r = np.zeros(cols, np.float32)
    r[0], r[1:6] = 6, [1.25, 2.5, 5, 0.75, -1.75]                          # MX e2m1 (X = 1): grid midpoints
    specials.append(r)
    r = np.zeros(cols, np.float32)
    r[0], r[1:5] = 448, [1.0625, -1.1875, 17, 232]                         # float8 e4m3 scale 1: midpoints
    specials.append(r)
    specials.append(np.zeros(cols, np.float32))                            # an all-zero row
    r = np.zeros(cols, np.float32)
    r[::2] = -0.0                                                          # zeros of both signs
    r[5::7] = np.float32(-0.0)
    specials.append(np.copysign(r, np.where(np.arange(cols) % 3 == 0, -1, 1)).astype(np.float32))
    specials.append(np.abs(w[0]) + np.float32(0.01))                       # one sign: negative int4 scales
    specials.append(-(np.abs(w[1]) + np.float32(0.01)))
    r = np.full(cols, np.float32(1e-39))                                   # bfloat16 subnormals
    r[::3] = np.float32(-3e-39)
    specials.append(r)
    r = w[2].copy()
    r[::16] = np.float32(1e30)                                             # huge values
    r[7::16] = np.float32(-1e30)
    specials.append(r)
    r = w[3].copy() * np.float32(1e-3)
    r[::32] = np.float32(50.0)                                             # one outlier per block
    specials.append(r)
    for i, s in enumerate(specials):
        if i + 4 < rows:
            w[i + 4] = s
    return w.astype(BF16).astype(np.float32)


def build(path: str | os.PathLike, seed: int = 0, shards: int = 2) -> dict[str, np.ndarray]:
    """Write the checkpoint (shards + index) into ``path``; return its tensors (bfloat16 values as
    float32, other types as they are)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    shapes = llama_shapes(80, 200, 2 * SCALE, 96, kv=40)
    shapes["model.layers.0.mlp.odd_proj.weight"] = (33, 77)
    shapes["model.layers.0.conv.weight"] = (8, 4, 3)
    values: dict[str, np.ndarray] = {}
    for name, shape in shapes.items():
        if len(shape) == 2:
            values[name] = _planted(rng, *shape)
        elif len(shape) == 1:
            values[name] = (1 + rng.standard_normal(shape) * 0.1).astype(BF16).astype(np.float32)
        else:
            values[name] = rng.standard_normal(shape).astype(BF16).astype(np.float32)
    values["model.rotary.inv_freq_ids"] = np.arange(12, dtype=np.int64)
    names = list(values)
    half = len(names) // 2
    groups = [names[:half], names[half:]] if shards == 2 else [names]
    weight_map = {}
    for k, group in enumerate(groups):
        fname = f"model-{k + 1:05d}-of-{len(groups):05d}.safetensors"
        tensorio.write_tensors(path / fname, {n: (values[n].astype(BF16) if values[n].dtype == np.float32
                                                  else values[n]) for n in group})
        weight_map.update({n: fname for n in group})
    (path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return values


def build_ct(path: str | os.PathLike, seed: int = 1, dtype=BF16) -> dict[str, np.ndarray]:
    """A small Llama-style checkpoint whose weights take compressed-tensors' groups of 32 and 128
    (in_features 128 and 256), planted as :func:`build`; one shard and a config.json."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    shapes = llama_shapes(128, 256, 1, 64, kv=64)
    values: dict[str, np.ndarray] = {}
    for name, shape in shapes.items():
        if len(shape) == 2:
            values[name] = _planted(rng, *shape)
        else:
            values[name] = (1 + rng.standard_normal(shape) * 0.1).astype(BF16).astype(np.float32)
    if dtype is np.float16:                    # the huge planted values, at float16's largest
        values = {n: np.clip(v, -65504, 65504).astype(np.float16).astype(np.float32) for n, v in values.items()}
    tensorio.write_tensors(path / "model.safetensors", {n: v.astype(dtype) for n, v in values.items()})
    (path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                                  "hidden_size": 128, "torch_dtype": "bfloat16"}))
    return values
