"""The LiteRT section of ``quantspec demo`` (the main job) runs on the shipped example models."""

import io

import numpy as np

from quantspec.litert import OPS
from quantspec.litert._demo import section


def test_demo_section():
    out = io.StringIO()
    section(np.random.default_rng(0).normal(0, 0.05, (16, 32)).astype(np.float32), out)
    text = out.getvalue()
    assert text.count("conformant") == 3
    assert "[fixed-scale] operator 2 SOFTMAX, tensor 7 'Identity'" in text and "rejects at prepare" in text
    if {"FULLY_CONNECTED", "SOFTMAX"} <= set(OPS):
        assert "as probabilities" in text and "byte-identical" in text
