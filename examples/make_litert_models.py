#!/usr/bin/env python3
"""Make the example int8 LiteRT models that ship with quantspec (``src/quantspec/data/*.tflite``).

Each model is built from seeded random weights with ``tf.function`` and converted by the
TensorFlow 2.21 converter with full-integer post-training quantization (notes/litert.md §7A):
``optimizations=[DEFAULT]``, a seeded representative dataset and ``TFLITE_BUILTINS_INT8``.

- ``mlp_softmax.tflite``: FULLY_CONNECTED (RELU) -> FULLY_CONNECTED -> SOFTMAX; int8 in and out.
- ``cnn.tflite``: CONV_2D (RELU6), DEPTHWISE_CONV_2D, ADD (residual), MAX_POOL_2D, AVERAGE_POOL_2D,
  MEAN; **float32 in and out**, so the converter puts QUANTIZE / DEQUANTIZE at the edges.
- ``mixed.tflite``: RESIZE_BILINEAR, PAD, TANH, LOGISTIC, CONCATENATION, TRANSPOSE; int8 in and out.

Run from the repository root with the test environment (TensorFlow is a test dependency only):
``.venv/bin/python examples/make_litert_models.py``.  The script is deterministic: running it
again rewrites the same bytes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "src" / "quantspec" / "data"


def convert(fn, input_shape, seed: int, low: float, high: float, int8_io: bool = True) -> bytes:
    rng = np.random.default_rng(seed)
    samples = [rng.uniform(low, high, input_shape).astype(np.float32) for _ in range(64)]

    def representative():
        for s in samples:
            yield [s]

    c = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()])
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = representative
    c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if int8_io:
        c.inference_input_type = tf.int8
        c.inference_output_type = tf.int8
    return c.convert()


def mlp() -> bytes:
    rng = np.random.default_rng(1)
    w1 = rng.standard_normal((20, 32)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(32).astype(np.float32) * 0.1
    w2 = rng.standard_normal((32, 10)).astype(np.float32) * 0.3
    b2 = rng.standard_normal(10).astype(np.float32) * 0.1

    @tf.function(input_signature=[tf.TensorSpec([1, 20], tf.float32, name="features")])
    def f(x):
        h = tf.nn.relu(tf.matmul(x, w1) + b1)
        return tf.nn.softmax(tf.matmul(h, w2) + b2)

    return convert(f, (1, 20), seed=11, low=-2.0, high=2.0)


def cnn() -> bytes:
    rng = np.random.default_rng(2)
    k1 = rng.standard_normal((3, 3, 3, 8)).astype(np.float32) * 0.3
    c1 = rng.standard_normal(8).astype(np.float32) * 0.1
    kd = rng.standard_normal((3, 3, 8, 1)).astype(np.float32) * 0.3
    cd = rng.standard_normal(8).astype(np.float32) * 0.1

    @tf.function(input_signature=[tf.TensorSpec([1, 12, 12, 3], tf.float32, name="image")])
    def f(x):
        a = tf.nn.relu6(tf.nn.conv2d(x, k1, strides=1, padding="SAME") + c1)
        d = tf.nn.depthwise_conv2d(a, kd, strides=[1, 1, 1, 1], padding="SAME") + cd
        s = a + d
        p = tf.nn.max_pool2d(s, ksize=2, strides=2, padding="VALID")
        q = tf.nn.avg_pool2d(p, ksize=3, strides=1, padding="SAME")
        return tf.reduce_mean(q, axis=[1, 2])

    return convert(f, (1, 12, 12, 3), seed=12, low=-1.0, high=1.0, int8_io=False)


def mixed() -> bytes:
    @tf.function(input_signature=[tf.TensorSpec([1, 6, 6, 4], tf.float32, name="grid")])
    def f(x):
        r = tf.compat.v1.image.resize_bilinear(x, [9, 9], align_corners=False, half_pixel_centers=True)
        p = tf.pad(r, [[0, 0], [1, 2], [2, 1], [0, 0]])
        t = tf.math.tanh(p)
        s = tf.math.sigmoid(p)
        c = tf.concat([t, s], axis=3)
        return tf.transpose(c, [0, 3, 1, 2])

    return convert(f, (1, 6, 6, 4), seed=13, low=-3.0, high=3.0)


MODELS = {"mlp_softmax.tflite": mlp, "cnn.tflite": cnn, "mixed.tflite": mixed}


def main() -> int:
    tf.random.set_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)
    for name, make in MODELS.items():
        data = make()
        (OUT / name).write_bytes(data)
        print(f"{name}: {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
