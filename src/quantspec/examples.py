"""``quantspec example [DIR]``: write the files the README's shell examples use.

Writes into ``DIR`` (default: the current directory; made if missing), from data that ships with
quantspec:

- ``weights.npy``: the bundled weight tensor of ``quantspec demo`` (float32, 128 x 256);
- ``acts.npy``: activations, float32, 4096 values drawn from a seeded normal distribution;
- ``model.tflite``: the bundled int8 model ``mlp_softmax.tflite`` (FULLY_CONNECTED, FULLY_CONNECTED,
  SOFTMAX; int8 in and out);
- ``x.npy``: an input for that model (int8, its input shape, seeded);
- ``model.onnx``: the bundled float ONNX model ``mlp_float.onnx`` (MatMul 128x256, Relu, MatMul 256x10;
  float32 weights), for ``quantspec convert`` (and ``check`` / ``audit`` of what it makes);
- ``calib.npz``: calibration data for that model (``x``: 16 samples of its input ``[1, 128]``, float32,
  seeded), for ``quantspec calibrate`` and ``quantspec convert --static``;
- ``llama-bf16/``: a small sharded bfloat16 checkpoint with Llama-style tensor names and shapes (two
  safetensors shards and their ``model.safetensors.index.json``; seeded), for ``quantspec convert`` and
  ``quantspec verify``.

Existing files of those names are replaced (each written to a temporary name and renamed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

import numpy as np

__all__ = ["main", "write_examples", "FILES"]

FILES = ("weights.npy", "acts.npy", "model.tflite", "x.npy", "model.onnx", "calib.npz", "llama-bf16")


def _atomic(path: str, write) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".quantspec-", suffix=os.path.splitext(path)[1], dir=directory)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)                 # (mkstemp makes it private)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_examples(directory: str = ".") -> list[str]:
    """Write the example files into ``directory``; their paths."""
    from .demo import load_demo_weights
    from .litert.model import example_model, load_model

    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(2026)
    model = example_model("mlp_softmax.tflite")
    shape = load_model(model).main.tensors[load_model(model).inputs[0]].shape
    arrays = {
        "weights.npy": load_demo_weights().astype(np.float32),
        "acts.npy": rng.normal(0, 2, 4096).astype(np.float32),
        "x.npy": rng.integers(-128, 128, shape, dtype=np.int8),
    }
    paths = []
    for name in FILES:
        path = os.path.join(directory, name)
        if name == "model.tflite":
            _atomic(path, lambda tmp: shutil.copyfile(model, tmp))
        elif name == "model.onnx":
            _atomic(path, lambda tmp: shutil.copyfile(_data("mlp_float.onnx"), tmp))
        elif name == "calib.npz":
            x = rng.standard_normal((16, 1, 128)).astype(np.float32)
            _atomic(path, lambda tmp: np.savez(tmp, x=x))     # tmp ends in .npz: nothing is appended
        elif name == "llama-bf16":
            _checkpoint(path, rng)
        else:
            _atomic(path, lambda tmp, a=arrays[name]: np.save(tmp, a))
        paths.append(path)
    return paths


def _data(name: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", name)


#: the small checkpoint's tensors: (name, shape), hidden size 128, two decoder layers
_LLAMA = [("model.embed_tokens.weight", (512, 128))] + [
    (f"model.layers.{i}.{part}", shape) for i in range(2) for part, shape in (
        ("input_layernorm.weight", (128,)), ("self_attn.q_proj.weight", (128, 128)),
        ("self_attn.k_proj.weight", (64, 128)), ("self_attn.v_proj.weight", (64, 128)),
        ("self_attn.o_proj.weight", (128, 128)), ("post_attention_layernorm.weight", (128,)),
        ("mlp.gate_proj.weight", (256, 128)), ("mlp.up_proj.weight", (256, 128)),
        ("mlp.down_proj.weight", (128, 256)))] + [("model.norm.weight", (128,)), ("lm_head.weight", (512, 128))]


def _checkpoint(directory: str, rng: np.random.Generator) -> None:
    """The sharded bfloat16 checkpoint ``llama-bf16/``: layer 0 and the embedding in shard 1, the rest
    in shard 2, and the index naming each tensor's shard."""
    import json

    import ml_dtypes

    from ._tensorfiles.tensorio import write_tensors

    os.makedirs(directory, exist_ok=True)
    shards: dict[str, dict] = {}
    for name, shape in _LLAMA:
        if len(shape) == 1:
            a = 1 + 0.05 * rng.standard_normal(shape)          # a norm's weight
        else:
            a = rng.standard_normal(shape) * 0.02
        shard = 1 if name.startswith(("model.embed_tokens", "model.layers.0.")) else 2
        shards.setdefault(f"model-{shard:05d}-of-00002.safetensors", {})[name] = a.astype(ml_dtypes.bfloat16)
    weight_map = {}
    total = 0
    for file, tensors in shards.items():
        write_tensors(os.path.join(directory, file), tensors)
        weight_map.update({n: file for n in tensors})
        total += sum(t.nbytes for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    _atomic(os.path.join(directory, "model.safetensors.index.json"),
            lambda tmp: open(tmp, "w").write(json.dumps(index, indent=2) + "\n"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="quantspec example", epilog="Files: " + ", ".join(FILES),
        description="Write the files the README's shell examples use (a weight tensor, activations, a bundled "
        "int8 model and an input for it, a float ONNX model, a small sharded bfloat16 checkpoint) into DIR.")
    parser.add_argument("directory", nargs="?", default=".", metavar="DIR",
                        help="where to write them (default: the current directory)")
    args = parser.parse_args(argv)
    try:
        paths = write_examples(args.directory)
    except OSError as e:
        print(f"quantspec example: error: cannot write to {args.directory!r}: {e.strerror or e}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0
