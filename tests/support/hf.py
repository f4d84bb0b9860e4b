"""Hugging Face transformers as the loader of checkpoints: the test environment's transformers and
compressed-tensors (requirements/test.txt), on CPU, in this process.

:func:`load` is ``AutoModelForCausalLM.from_pretrained(ckpt, dtype=<the checkpoint's dtype>,
device_map=None)`` that fails loudly: an exception, and also a load that transformers completes with
missing, unexpected or mismatched keys (which it would fill with random values) or conversion errors,
is an AssertionError carrying transformers' load report.  :func:`logits` runs a checkpoint on fixed
token ids (:func:`input_ids`).

A compressed-tensors checkpoint loads in one of two ways (transformers' ``CompressedTensorsConfig``):

- the default (``dequantize=False``): compressed-tensors builds the compressed modules, loads the
  stored tensors into them and decompresses them on the first forward pass; each quantized Linear
  keeps its ``quantization_scheme`` and runs compressed-tensors' quantized forward, which
  fake-quantizes the layer's input when the config group declares ``input_activations`` (W8A8:
  dynamic per-token quantization) and then runs the plain Linear on the decompressed weight;
- ``dequantize=True``: every quantized weight is decompressed while loading and the model is a plain
  dense model (no activation quantization).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import warnings
from pathlib import Path

import numpy as np

from refs import require

#: the token ids :func:`logits` runs by default (taken modulo the vocabulary)
SHAPE = (2, 12)


@contextlib.contextmanager
def one_thread():
    """torch on one thread for the duration (then as it was): the models are tiny, and the suite runs
    two pytest workers on two cores, where torch's own threads only contend (measured: loading and
    running a tiny checkpoint six times took 0.3-0.9 s on one thread, 6-11 s on two, with two such
    processes side by side; 0.3 s against 1.7 s alone)."""
    torch = require("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def input_ids(vocab_size: int, shape: tuple[int, int] = SHAPE):
    """Fixed token ids: ``arange(prod(shape)) % vocab_size`` as a ``[batch, sequence]`` int64 tensor."""
    torch = require("torch")
    n = int(np.prod(shape))
    return (torch.arange(n, dtype=torch.int64) % vocab_size).reshape(shape)


def checkpoint_dtype(ckpt_dir: str | os.PathLike) -> str:
    """The checkpoint's float type as its ``config.json`` names it (``dtype``, or ``torch_dtype`` as
    transformers before 5 wrote it)."""
    config = json.loads((Path(ckpt_dir) / "config.json").read_text())
    dtype = config.get("dtype") or config.get("torch_dtype")
    assert isinstance(dtype, str) and dtype in ("bfloat16", "float16", "float32"), \
        f"{ckpt_dir}/config.json names no float dtype (dtype={dtype!r})"
    return dtype


def load(ckpt_dir: str | os.PathLike, *, dequantize: bool = False):
    """The checkpoint as a ``AutoModelForCausalLM`` on CPU, in eval mode, in the checkpoint's dtype;
    ``dequantize=True`` loads a compressed-tensors checkpoint with
    ``CompressedTensorsConfig(dequantize=True)``.  Any load problem is an AssertionError."""
    torch = require("torch")
    transformers = require("transformers")
    dtype = checkpoint_dtype(ckpt_dir)
    kw = {}
    if dequantize:
        kw["quantization_config"] = transformers.CompressedTensorsConfig(dequantize=True)
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    handler.setLevel(logging.WARNING)
    root = logging.getLogger("transformers")
    root.addHandler(handler)
    what = f"transformers {transformers.__version__} AutoModelForCausalLM.from_pretrained({str(ckpt_dir)!r}" + (
        ", quantization_config=CompressedTensorsConfig(dequantize=True))" if dequantize else ")")
    try:
        with warnings.catch_warnings(), one_thread():
            # "You passed `quantization_config` ... the model already has one": the loading
            # attribute (dequantize) is taken from ours, which is the point
            warnings.filterwarnings("ignore", message=".*already has a `quantization_config`")
            model, info = transformers.AutoModelForCausalLM.from_pretrained(
                str(ckpt_dir), dtype=getattr(torch, dtype), device_map=None, output_loading_info=True, **kw)
    except Exception as e:
        raise AssertionError(f"{what} failed: {type(e).__name__}: {e}\n--- transformers' log ---\n"
                             f"{log.getvalue()}") from e
    finally:
        root.removeHandler(handler)
    problems = {k: sorted(map(str, v)) for k, v in info.items()
                if k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs", "conversion_errors")
                and v}
    assert not problems, f"{what} loaded with problems: {problems}\n--- transformers' log ---\n{log.getvalue()}"
    model.eval()
    return model


def run(model, ids=None) -> np.ndarray:
    """The model's logits on ``ids`` (default :func:`input_ids` of its vocabulary) as float32 numpy
    (exact: every bfloat16 and float16 value is a float32)."""
    torch = require("torch")
    if ids is None:
        ids = input_ids(model.config.vocab_size)
    try:
        with torch.no_grad(), one_thread():
            out = model(input_ids=ids).logits
    except Exception as e:
        raise AssertionError(f"the loaded model fails to run: {type(e).__name__}: {e}") from e
    return out.float().numpy()


def logits(ckpt_dir: str | os.PathLike, input_ids=None, *, dequantize: bool = False) -> np.ndarray:
    """Load the checkpoint (:func:`load`) and return its logits on ``input_ids`` (default: the fixed
    ids of :func:`input_ids`), ``[batch, sequence, vocab]`` float32."""
    return run(load(ckpt_dir, dequantize=dequantize), input_ids)
