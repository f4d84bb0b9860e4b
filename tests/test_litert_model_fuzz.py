"""Acceptance 3 of issue 5: truncated, corrupted and fuzzed model files never crash the loader or the
checker.  Each damaged file either loads (and then checks to a clean report) or raises
:class:`quantspec.errors.ModelError`; nothing else escapes, and every file is handled quickly.
Seeded, so a failure reproduces."""

from __future__ import annotations

import random
import time

import pytest

from litert_models import EXAMPLES, example_bytes, externalize_buffers
from quantspec.errors import ModelError
import quantspec.litert as litert
from quantspec.litert import load_model

#: the most CPU time one file may take (seconds; CPU time, so that a busy machine does not count).  A
#: damaged size can ask RESIZE_BILINEAR's prepare (which the checker runs) for index plans of
#: millions of positions, within the memory check: about 1-2 s, linear in the declared size
PER_FILE_LIMIT = 5.0


def outcome(data: bytes) -> str:
    """'ok' or 'error'; any other exception, or a slow file, fails the test."""
    t0 = time.process_time()
    try:
        model = load_model(data)
    except ModelError as e:
        assert str(e)
        result = "error"
    else:
        report = litert.check_model(model)
        assert isinstance(report.ok, bool)
        report.render()
        report.to_json()
        result = "ok"
    elapsed = time.process_time() - t0
    assert elapsed < PER_FILE_LIMIT, f"{elapsed:.2f} s of CPU time for one file"
    return result


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_truncation(name):
    data = example_bytes(name)
    results = [outcome(data[:n]) for n in range(len(data))]
    assert results.count("error") > len(data) // 2
    assert outcome(data) == "ok"


def test_every_truncation_of_a_model_with_external_buffers():
    data = externalize_buffers(example_bytes("mlp_softmax"))
    for n in range(0, len(data), 3):
        outcome(data[:n])


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_byte_corrupted(name):
    """Each byte in turn replaced by its complement, and by 0x00 / 0xFF / 0x7F."""
    data = example_bytes(name)
    rng = random.Random(len(data))
    for k in range(len(data)):
        for value in (data[k] ^ 0xFF, rng.choice((0x00, 0xFF, 0x7F, 0x80))):
            b = bytearray(data)
            b[k] = value
            outcome(bytes(b))


INTERESTING = [b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", b"\xff\xff\xff\x7f", b"\x00\x00\x00\x80",
               b"\x01\x00\x00\x00", b"\x04\x00", b"\xff\xff", b"\x00\x00\x01\x00"]


def mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        k = rng.randrange(len(b))
        r = rng.random()
        if r < 0.35:
            b[k] ^= 1 << rng.randrange(8)
        elif r < 0.6:
            b[k] = rng.randrange(256)
        elif r < 0.8:
            v = rng.choice(INTERESTING)
            b[k:k + len(v)] = v
        elif r < 0.9:  # copy a chunk from elsewhere (splices offsets and vtables into new places)
            j, n = rng.randrange(len(b)), rng.randint(2, 32)
            b[k:k + n] = b[j:j + n]
        elif r < 0.95:
            del b[k:k + rng.randint(1, 8)]
        else:
            b[k:k] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        if not b:
            break
    return bytes(b)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_fuzzed_models(name):
    data = example_bytes(name)
    rng = random.Random(f"fuzz-{name}")
    t0 = time.process_time()
    results = [outcome(mutate(data, rng)) for _ in range(1500)]
    assert time.process_time() - t0 < 60
    assert "ok" in results and "error" in results  # both outcomes occur: the mutations are not all fatal


def _shared_tensor_model(n_tensors: int, rank: int) -> bytes:
    """A crafted file: one tensor table with a ``rank``-long shape, referenced ``n_tensors`` times by
    the subgraph's tensors vector (flatbuffers let offsets share a target), so decoding it naively
    costs n_tensors x rank."""
    flatbuffers = __import__("refs").require("flatbuffers")
    S = __import__("litert_models").schema()
    b = flatbuffers.Builder(1024)
    S.TensorStartShapeVector(b, rank)
    for _ in range(rank):
        b.PrependInt32(1)
    shape = b.EndVector()
    S.TensorStart(b)
    S.TensorAddShape(b, shape)
    S.TensorAddType(b, S.TensorType.INT8)
    tensor = S.TensorEnd(b)
    S.SubGraphStartTensorsVector(b, n_tensors)
    for _ in range(n_tensors):
        b.PrependUOffsetTRelative(tensor)
    tensors = b.EndVector()
    S.SubGraphStart(b)
    S.SubGraphAddTensors(b, tensors)
    subgraph = S.SubGraphEnd(b)
    S.ModelStartSubgraphsVector(b, 1)
    b.PrependUOffsetTRelative(subgraph)
    subgraphs = b.EndVector()
    S.BufferStart(b)
    empty = S.BufferEnd(b)
    S.ModelStartBuffersVector(b, 1)
    b.PrependUOffsetTRelative(empty)
    buffers = b.EndVector()
    S.ModelStart(b)
    S.ModelAddVersion(b, 3)
    S.ModelAddSubgraphs(b, subgraphs)
    S.ModelAddBuffers(b, buffers)
    b.Finish(S.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_shared_objects_cannot_blow_up_the_work():
    small = _shared_tensor_model(50, 4)                  # sharing as such is legal flatbuffers
    assert len(load_model(small).tensors) == 50
    crafted = _shared_tensor_model(20000, 20000)         # 160 kB that would decode to 4e8 dimensions
    t0 = time.process_time()
    with pytest.raises(ModelError, match="far more structure than its size allows"):
        load_model(crafted)
    assert time.process_time() - t0 < PER_FILE_LIMIT
