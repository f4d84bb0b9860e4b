"""Test helpers for whole .tflite models: the shipped example models, editing a model through the
flatbuffer object API of ai-edge-litert (``schema_py_generated.ModelT``), moving constant buffers
outside the flatbuffer (as large models store them), random inputs, and damaged models that LiteRT
refuses.

Test-only (needs ai-edge-litert and flatbuffers, test dependencies).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from quantspec.litert.model import EXAMPLE_MODELS, example_model
from refs import require

EXAMPLES = {name.removesuffix(".tflite"): example_model(name) for name in EXAMPLE_MODELS}


def schema():
    return require("ai_edge_litert.schema_py_generated")


def example_bytes(name: str) -> bytes:
    with open(EXAMPLES[name], "rb") as f:
        return f.read()


def to_object(model: bytes):
    """The mutable object form (``ModelT``) of a model."""
    return schema().ModelT.InitFromPackedBuf(bytearray(model), 0)


def to_bytes(obj) -> bytes:
    flatbuffers = require("flatbuffers")
    b = flatbuffers.Builder(1024)
    b.Finish(obj.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def edit(model: bytes, change: Callable) -> bytes:
    """Apply ``change(ModelT)`` (which edits in place) and return the new model bytes."""
    obj = to_object(model)
    change(obj)
    return to_bytes(obj)


def externalize_buffers(model: bytes, alignment: int = 16) -> bytes:
    """Move every non-empty constant buffer behind the flatbuffer: ``Buffer.data`` is dropped and
    ``Buffer.offset``/``size`` (relative to the start of the file) point at the appended bytes, the
    layout LiteRT's converter writes for models over 2 GB."""
    obj = to_object(model)
    payloads = []
    for k, buf in enumerate(obj.buffers):
        if buf.data is not None and len(buf.data):
            payloads.append((k, bytes(np.asarray(buf.data, np.uint8))))
            buf.data = None
            buf.offset, buf.size = 1 << 40, 1  # placeholders: same encoded size as the real values
    head = to_bytes(obj)
    offsets, pos = {}, len(head)
    for k, data in payloads:
        pos = -(-pos // alignment) * alignment
        offsets[k] = pos
        pos += len(data)
    for k, data in payloads:
        obj.buffers[k].offset, obj.buffers[k].size = offsets[k], len(data)
    head = to_bytes(obj)
    assert len(head) <= min(offsets.values(), default=len(head))
    out = bytearray(head)
    for k, data in payloads:
        out += b"\0" * (offsets[k] - len(out)) + data
    return bytes(out)


def random_inputs(model, seed: int) -> list[np.ndarray]:
    """Random inputs for a quantspec ``Model``: int8 over the full range, float32 over the range
    the input's quantization (if any) covers."""
    rng = np.random.default_rng(seed)
    out = []
    for i in model.inputs:
        t = model.tensors[i]
        if t.dtype is not None and t.dtype.name == "int8":
            out.append(rng.integers(-128, 128, t.shape, dtype=np.int8))
        else:
            out.append(rng.uniform(-1.2, 1.2, t.shape).astype(np.float32))
    return out


def litert_refuses(data: bytes) -> str:
    """LiteRT's reason for refusing to load ``data`` (the test fails if it loads it)."""
    L = require("ai_edge_litert.interpreter")
    with pytest.raises(ValueError) as e:
        L.Interpreter(model_content=data)
    return str(e.value)


def unterminated_string() -> bytes:
    """The bundled mlp_softmax.tflite with the NUL that ends the string "Identity" overwritten."""
    data = bytearray(example_bytes("mlp_softmax"))
    k = data.find(b"Identity\x00")
    assert k > 0
    data[k + 8] = 1
    return bytes(data)


def bias_quantized_dimension_5() -> bytes:
    """The bundled bench_cnn.tflite with a bias's quantized_dimension set to 5 (LiteRT refuses it at load)."""
    def change(obj):
        (t,) = [t for t in obj.subgraphs[0].tensors if t.name == b"arith.constant2"]
        t.quantization.quantizedDimension = 5

    return edit(Path(example_model("mlp_softmax")).with_name("bench_cnn.tflite").read_bytes(), change)
