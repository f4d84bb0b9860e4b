"""Build ``src/quantspec/data/bench_cnn.tflite``: the small int8 CNN of ``quantspec bench``.

A MobileNet-like block stack on a 64x64x3 float input (CONV_2D, DEPTHWISE_CONV_2D, a residual ADD,
MEAN, FULLY_CONNECTED, SOFTMAX), converted by TensorFlow's converter with full-integer quantization
(int8 inside, QUANTIZE / DEQUANTIZE at the float edges), seeded so the file is reproducible.

    TF_ENABLE_ONEDNN_OPTS=0 .venv/bin/python benchmarks/make_bench_cnn.py
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "src" / "quantspec" / "data" / "bench_cnn.tflite"


def model() -> tf.keras.Model:
    tf.keras.utils.set_random_seed(1234)
    L = tf.keras.layers
    x = inp = tf.keras.Input((64, 64, 3), batch_size=1, name="image")
    x = L.Conv2D(16, 3, strides=2, padding="same", activation="relu6")(x)
    x = L.DepthwiseConv2D(3, padding="same", activation="relu6")(x)
    x = L.Conv2D(32, 1, activation="relu6")(x)
    x = L.DepthwiseConv2D(3, strides=2, padding="same", activation="relu6")(x)
    x = L.Conv2D(64, 1)(x)
    y = L.DepthwiseConv2D(3, padding="same", activation="relu6")(x)
    y = L.Conv2D(64, 1)(y)
    x = L.Add()([x, y])
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dense(10)(x)
    x = L.Softmax()(x)
    return tf.keras.Model(inp, x)


def main() -> None:
    m = model()
    rng = np.random.default_rng(0)

    def representative():
        for _ in range(16):
            yield [rng.normal(0, 1, (1, 64, 64, 3)).astype(np.float32)]

    conv = tf.lite.TFLiteConverter.from_keras_model(m)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = representative
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    OUT.write_bytes(conv.convert())
    print(f"{OUT}: {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main()
