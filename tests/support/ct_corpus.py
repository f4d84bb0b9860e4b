"""Adversarial weights for the compressed-tensors presets: a safetensors "checkpoint" whose Linear-named
weights hold what the presets' arithmetic must get right — ties of the quotient in the weight's type,
±0, subnormals, huge values, all-zero rows and groups, exact float4 / float8 grid values and the
values beside them, heavy tails, partial 128-blocks and partial packed words — with the fused names
(q/k/v of a ``self_attn``, gate/up of an ``mlp``) whose NVFP4 global scales are shared, and a norm."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np

DTYPES = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float": np.float32}


def _edges(rng, rows: int, cols: int) -> np.ndarray:
    a = rng.standard_t(2, (rows, cols)) * 0.02
    a[0] = 0
    a[1, :128] = 0
    a[2] = -0.0
    grid = [0.5, -0.5, 1, -1, 1.5, 2.5, -2.5, 0.25, 0.75, 3.5, 5.0, -5.0, 6.0, -6.0, 1.25, 1.75]
    a[3] = rng.choice(grid, cols) * 2.0 ** rng.integers(-8, 4, cols)
    a[4] = rng.normal(0, 1e-30, cols)
    a[5] = rng.normal(0, 1e3, cols)
    a[6] = 1e-40
    a[7] = np.linspace(-1, 1, cols)
    a[8, ::2], a[8, 1::2] = 7.5, -8.0
    a[9] = rng.integers(-127, 128, cols) / 127.5
    a[10] = rng.normal(0, 1e30, cols)
    a[11] = np.abs(rng.normal(0, 0.1, cols))
    a[12] = -np.abs(rng.normal(0, 0.1, cols))
    a[13] = rng.integers(-8, 8, cols) * 0.1
    a[14] = rng.choice([448.0, -448.0, 464.0, 240.0, 0.001953125, 2.0 ** -9], cols) * rng.choice([1, 2.0 ** -10], cols)
    a[15, :64] = 3e-5
    a[15, 64:] = -np.float32(6e-8)
    return a


def weights(seed: int, dtype: str = "bfloat16", rows: int = 256, cols: int = 512) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = DTYPES[dtype]
    out: dict[str, np.ndarray] = {}

    def put(name, a):
        a = np.asarray(a, np.float64)
        if dtype == "float16":
            a = np.clip(a, -6e4, 6e4)
        out[name] = np.ascontiguousarray(a.astype(np.float32).astype(t))

    put("model.layers.0.mlp.down_proj.weight", rng.normal(0, 0.05, (rows, cols)))
    put("model.layers.0.mlp.up_proj.weight", _edges(rng, rows, cols))
    put("model.layers.0.mlp.gate_proj.weight", rng.normal(0, 0.2, (rows, cols)))
    put("model.layers.0.self_attn.q_proj.weight", rng.normal(0, 0.01, (rows, cols)))
    put("model.layers.0.self_attn.k_proj.weight", _edges(rng, rows // 2 + 1, cols))      # odd rows
    put("model.layers.0.self_attn.v_proj.weight", rng.uniform(-1, 1, (rows // 2 + 1, cols)) * 0.5)
    put("model.layers.0.self_attn.o_proj.weight", rng.normal(0, 0.05, (201, 384)))       # partial blocks, words
    put("model.layers.1.mlp.down_proj.weight", np.zeros((64, 256)))                     # all zero
    put("model.layers.0.input_layernorm.weight", rng.normal(1, 0.1, cols))
    return out


_CODE = {"bfloat16": "BF16", "float16": "F16", "float": "F32"}


def write(path: Path, seed: int, dtype: str = "bfloat16") -> Path:
    """The corpus as ``path/model.safetensors`` (a directory, as a checkpoint), written byte by byte
    (safetensors' numpy API has no bfloat16)."""
    import json
    import struct

    path.mkdir(parents=True, exist_ok=True)
    w = weights(seed, dtype)
    header, blobs, pos = {"__metadata__": {"format": "pt"}}, [], 0
    for k, v in w.items():
        b = np.ascontiguousarray(v).tobytes()
        header[k] = {"dtype": _CODE[dtype], "shape": list(v.shape), "data_offsets": [pos, pos + len(b)]}
        blobs.append(b)
        pos += len(b)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    (path / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    # a config.json for the tools to add their quantization_config to
    (path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    return path
