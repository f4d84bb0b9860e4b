"""The reference runtimes are installed at the versions quantspec reproduces."""

import importlib.metadata

import pytest

from refs import PINNED, require

DISTRIBUTIONS = {"onnx": "onnx", "onnxruntime": "onnxruntime", "tensorflow": "tensorflow-cpu",
                 "ai_edge_litert": "ai-edge-litert"}


@pytest.mark.parametrize("module", sorted(PINNED))
def test_reference_runtime_pinned(module):
    require(module if module != "ai_edge_litert" else "ai_edge_litert.interpreter")
    assert importlib.metadata.version(DISTRIBUTIONS[module]) == PINNED[module]
