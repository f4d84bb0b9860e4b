#!/usr/bin/env python3
"""A zoo of converter-made full-integer LiteRT models of common architectures, built and cached.

``build(arch, quant="int8" | "int16x8", cache_dir=None) -> pathlib.Path`` returns the path of a
``.tflite`` file made by TensorFlow's converter (full-integer post-training quantization) from a
Keras architecture with seeded random weights.  Random weights alone give near-constant outputs
(activations shrink or blow up layer after layer), so the CNNs' statistics are recalibrated first: every
batch normalization layer gets the mean and variance its input really has on random images (one
forward pass in training mode with momentum 0 and dropout off), with random scale and offset.  The
input images are small.  Everything the script controls is seeded (weights, calibration data,
Keras state cleared before each model), but TensorFlow 2.21's converter itself is not deterministic:
two conversions of the same model may order tensors and buffers differently, and the GRU's
sometimes keep one SPLIT in float32 (DEQUANTIZE, SPLIT, QUANTIZE) where another run quantizes it
(measured: three distinct files in five conversions, in fresh processes, with one CPU, a fixed
``PYTHONHASHSEED`` and address randomization off alike).  The cache keeps the first build, and the
tests compare whatever was built.

Architectures (:data:`ARCHS`):

- ``mobilenet_v2``, ``mobilenet_v3_small``, ``mobilenet_v3_large``, ``efficientnet_b0``,
  ``resnet50``, ``densenet121``: Keras applications, 10 classes, softmax output, on 64x64 images
  (EfficientNetB0 on 32x32, the smallest it takes, to keep it cheap: :data:`IMAGE_SIZES`, and with
  a dynamic batch dimension: :data:`DYNAMIC_BATCH`);
- ``keras_layers``: one small image model (16x16, a **dynamic batch dimension**: the converter
  computes the Conv2DTranspose output shape and the reshapes at run time with SHAPE, STRIDED_SLICE,
  PACK) made of many common Keras layers: Conv2D with a
  ReLU6, SeparableConv2D, DepthwiseConv2D, LeakyReLU, BatchNormalization, tanh, max and average
  pooling, the merge layers (Add, Multiply, Subtract, Maximum, Minimum, Concatenate), swish,
  bilinear UpSampling2D, Conv2DTranspose, ZeroPadding2D, Cropping2D, GELU, Reshape, Conv1D, global
  max and average pooling, Flatten, Dense with hard sigmoid, sigmoid and softmax;
- ``keras_layers_2``: more of them (16x16): Rescaling, a dilated Conv2D, ReLU with a maximum and a
  negative slope, a grouped Conv2D, LayerNormalization, Resizing, a Conv2D with selu (EXP, GREATER,
  SELECT), Reshape, Attention, Bidirectional(LSTM) unrolled, Dense with softplus (EXP, LOG) and
  softsign (ABS, DIV), PReLU, Softmax.  In int16x8 the
  converter refuses it (no 16x8 NEG, which LayerNormalization needs);
- ``keras_layers_1d``: sequence layers (16 steps of 6 features): Conv1D, Conv1DTranspose,
  DepthwiseConv1D, ZeroPadding1D, MaxPooling1D, Cropping1D, AveragePooling1D, Permute,
  TimeDistributed(Dense), UnitNormalization (a float32 SQUARE between DEQUANTIZE and QUANTIZE, an
  int8 SUM: BUILTIN_REF's reads int8 as uint8), global max and average pooling, Dot, Reshape,
  Flatten, Concatenate, softmax.  In int16x8 the converter refuses it (no 16x8 SQUARE);
- ``upsampling_nearest``: a convolution, ``UpSampling2D(interpolation="nearest")`` and a
  convolution.  The converter writes the upsampling as RESHAPE and TILE **version 3**, which the
  stock resolvers of ai-edge-litert 2.3.0 run and its reference resolver (BUILTIN_REF, TILE up to
  version 2) refuses to load;
- ``transformer``: a small encoder written with TensorFlow ops: token embedding lookup (GATHER),
  learned position embedding, two pre-norm blocks of multi-head attention (BATCH_MATMUL, SOFTMAX)
  and a GELU feed-forward, layer norms written as TensorFlow's ops (MEAN, SQUARED_DIFFERENCE,
  RSQRT), mean pooling and a softmax classifier;
- ``text_transformer``: a Keras text model with a **dynamic batch dimension** (``Embedding``,
  ``MultiHeadAttention``, ``LayerNormalization``, ``Dense``, ``GlobalAveragePooling1D``); the
  converter surrounds the integer layers with int32 / bool arithmetic on the token ids (LESS,
  SELECT_V2) and on the run-time batch size (SHAPE, GATHER, REDUCE_PROD, PACK, CONCATENATION);
- ``lstm``, ``gru``, ``simple_rnn``: Keras ``LSTM`` / ``GRU`` / ``SimpleRNN`` layers with
  ``unroll=True`` (a fixed number of time steps), then a dense softmax classifier: the converter
  makes plain integer operators of each step (FULLY_CONNECTED, SPLIT, LOGISTIC, TANH, MUL, ADD,
  UNPACK, ...);
- ``lstm_loop``, ``gru_loop``, ``simple_rnn_loop``: the same layers without ``unroll`` (a loop over
  the time steps).  TensorFlow 2.21's converter (Keras 3) turns the loop into a WHILE with float32
  subgraphs; in full-integer quantization (int8 and int16x8 alike) its calibration step crashes the
  converting process (SIGSEGV), so :func:`build` runs those conversions in a child process and
  raises :class:`Unsupported` saying so.

Quantization modes:

- ``"int8"``: ``TFLITE_BUILTINS_INT8``, int8 inputs and outputs (the transformers' inputs stay
  int32 token ids);
- ``"int16x8"``: ``EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8`` (int16
  activations, int8 weights, int64 bias), int16 inputs and outputs.  :func:`build` raises
  :class:`Unsupported` where the converter cannot make the model in that mode.

Models are cached (a file per arch, quant and version (:func:`version`), written to a temporary
name and renamed, under a lock so that parallel test workers build each model once; what the
converter cannot make is cached as a ``.unsupported`` file with its message) in ``cache_dir``, else
``$QUANTSPEC_ZOO_CACHE``, else ``$QUANTSPEC_TEST_CACHE/zoo``, else ``~/.cache/quantspec/zoo``.
Building needs TensorFlow (a test dependency); a cached model does not.

    python benchmarks/litert_zoo.py                      # every arch, both modes; prints the op lists
    python benchmarks/litert_zoo.py mobilenet_v2 --quant int8
    python benchmarks/litert_zoo.py --speed              # quantspec's Interpreter against BUILTIN_REF, per model

``--speed`` times ``quantspec.litert.Interpreter.run`` (default settings) and LiteRT's ``invoke`` with
``BUILTIN_REF`` side by side on the same random input, alternating, best of ``--rounds``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import sys
from pathlib import Path

__all__ = ["ARCHS", "QUANTS", "VERSION", "build", "cache_dir", "op_names", "Unsupported", "input_size",
           "random_inputs", "time_reference_mode", "version", "image_size"]

#: bump when a change to this script changes every model it makes (one arch: :data:`VERSIONS`)
VERSION = 1
#: the version of the archs whose bytes changed since (their cache file names carry it)
VERSIONS = {"efficientnet_b0": 3, "keras_layers": 3, "keras_layers_2": 2}
ARCHS = ("mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0", "resnet50",
         "densenet121", "keras_layers", "keras_layers_2", "keras_layers_1d", "upsampling_nearest", "transformer", "text_transformer", "lstm", "gru",
         "simple_rnn", "lstm_loop", "gru_loop", "simple_rnn_loop")
QUANTS = ("int8", "int16x8")
#: the image side of the CNNs
IMAGE = 64
#: the image models with a dynamic batch dimension
DYNAMIC_BATCH = ("keras_layers", "efficientnet_b0")
#: the CNNs with another image side
IMAGE_SIZES = {"efficientnet_b0": 32, "keras_layers": 16, "keras_layers_2": 16, "upsampling_nearest": 16}
#: text_transformer: sequence length, model width, heads, key width, feed-forward width (VOCAB as above)
TEXT_SEQ, TEXT_WIDTH, TEXT_HEADS, TEXT_KEY, TEXT_FFN = 12, 32, 4, 8, 64
#: keras_layers_1d: steps and features
SEQUENCE_1D, FEATURES_1D = 16, 6
#: lstm / gru: time steps, features, units, classes
STEPS, FEATURES, UNITS, RNN_CLASSES = 10, 8, 16, 5
#: classes of the CNNs' softmax classifier (few, so that the probabilities vary)
CLASSES = 10
#: transformer: sequence length, vocabulary, model width, heads, feed-forward width, blocks
SEQ, VOCAB, WIDTH, HEADS, FFN, BLOCKS = 16, 100, 32, 4, 64, 2
#: images for the statistics pass and the representative dataset
CALIBRATION_SAMPLES = 32
SEED = 20240


class Unsupported(RuntimeError):
    """The converter cannot make this architecture in this quantization mode."""


def cache_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    if os.environ.get("QUANTSPEC_ZOO_CACHE"):
        return Path(os.environ["QUANTSPEC_ZOO_CACHE"])
    if os.environ.get("QUANTSPEC_TEST_CACHE"):
        return Path(os.environ["QUANTSPEC_TEST_CACHE"]) / "zoo"
    return Path.home() / ".cache" / "quantspec" / "zoo"


def version(arch: str) -> int:
    """The version in the cache file name of ``arch``."""
    return VERSIONS.get(arch, VERSION)


def image_size(arch: str) -> int:
    return IMAGE_SIZES.get(arch, IMAGE)


def input_size(arch: str) -> tuple[int, ...]:
    """The model input's shape (batch 1)."""
    if arch == "transformer":
        return (1, SEQ)
    if arch == "text_transformer":
        return (1, TEXT_SEQ)
    if arch in _RNNS:
        return (1, STEPS, FEATURES)
    if arch == "keras_layers_1d":
        return (1, SEQUENCE_1D, FEATURES_1D)
    return (1, image_size(arch), image_size(arch), 3)


_RNNS = ("lstm", "gru", "simple_rnn", "lstm_loop", "gru_loop", "simple_rnn_loop")


def _check(arch: str, quant: str) -> None:
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {', '.join(ARCHS)}; got {arch!r}")
    if quant not in QUANTS:
        raise ValueError(f"quant must be one of {', '.join(QUANTS)}; got {quant!r}")


@contextlib.contextmanager
def _lock(path: Path):
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def build(arch: str, quant: str = "int8", cache_dir: str | os.PathLike | None = None) -> Path:
    """The path of the cached ``.tflite`` of ``arch`` in ``quant`` mode, built if it is not there yet."""
    _check(arch, quant)
    root = globals()["cache_dir"](cache_dir)
    path = root / f"{arch}-{quant}-v{version(arch)}.tflite"
    failed = path.with_suffix(".unsupported")
    if path.exists():
        return path
    if failed.exists():
        raise Unsupported(failed.read_text())
    with _lock(root / f".{arch}-{quant}.lock"):
        if path.exists():
            return path
        if failed.exists():
            raise Unsupported(failed.read_text())
        try:
            data = _convert(arch, quant)
        except Unsupported as e:
            failed.write_text(str(e))
            raise
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    return path


def op_names(path: str | os.PathLike) -> list[str]:
    """The sorted distinct operator names of every subgraph of a model (quantspec's reader)."""
    from quantspec.litert import load_model

    m = load_model(Path(path))
    return sorted({op.name for sg in m.subgraphs for op in sg.operators})


# ------------------------------------------------------------------------------------------------
# building (TensorFlow)
# ------------------------------------------------------------------------------------------------

def _tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    import tensorflow as tf

    return tf


def _images(arch: str, n: int, seed: int):
    """Random images in the range the architecture expects: [0, 255] for models that rescale their
    input themselves (MobileNetV3, EfficientNet), [-1, 1] otherwise."""
    import numpy as np

    rng = np.random.default_rng(seed)
    side = image_size(arch)
    shape = (n, side, side, 3)
    # smooth random images: noise on a coarse grid, upsampled, plus fine noise
    coarse = rng.uniform(-1, 1, (n, side // 8, side // 8, 3))
    x = np.repeat(np.repeat(coarse, 8, axis=1), 8, axis=2) * 0.7 + rng.uniform(-0.3, 0.3, shape)
    x = np.clip(x, -1, 1).astype(np.float32)
    if arch in ("mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0"):
        x = ((x + 1) * 127.5).astype(np.float32)
    return x


def _keras_model(arch: str):
    tf = _tf()
    apps = tf.keras.applications
    shape = (image_size(arch), image_size(arch), 3)
    common = dict(weights=None, input_shape=shape, classes=CLASSES)
    if arch == "mobilenet_v2":
        return apps.MobileNetV2(**common)
    if arch == "mobilenet_v3_small":
        return apps.MobileNetV3Small(**common)
    if arch == "mobilenet_v3_large":
        return apps.MobileNetV3Large(**common)
    if arch == "efficientnet_b0":
        return apps.EfficientNetB0(**common)
    if arch == "resnet50":
        return apps.ResNet50(**common)
    if arch == "densenet121":
        return apps.DenseNet121(**common)
    if arch == "keras_layers":
        return _layers_model(shape)
    if arch == "keras_layers_2":
        return _layers_model_2(shape)
    if arch == "upsampling_nearest":
        L = tf.keras.layers
        inp = tf.keras.Input(shape, batch_size=1, name="image")
        x = L.UpSampling2D(2, interpolation="nearest")(L.Conv2D(4, 3, padding="same", activation="relu")(inp))
        return tf.keras.Model(inp, L.Conv2D(4, 3, padding="same")(x))
    raise ValueError(arch)  # pragma: no cover


def _layers_1d():
    """Sequence layers of Keras in one small model (see the module docstring), as a tf.function."""
    import numpy as np

    tf = _tf()
    L = tf.keras.layers
    inp = tf.keras.Input((SEQUENCE_1D, FEATURES_1D), batch_size=1, name="sequence")
    x = L.Conv1D(8, 3, padding="same", activation="relu")(inp)
    x = L.DepthwiseConv1D(3, padding="same")(L.Conv1DTranspose(8, 3, strides=2, padding="same")(x))
    x = L.MaxPooling1D(2)(L.ZeroPadding1D(1)(x))
    x = L.AveragePooling1D(2)(L.Cropping1D(1)(x))
    x = L.UnitNormalization()(L.TimeDistributed(L.Dense(5))(L.Permute((2, 1))(x)))
    y = L.GlobalMaxPooling1D()(x)
    z = L.Dot(axes=1)([y, L.GlobalAveragePooling1D()(x)])
    r = L.Flatten()(L.Reshape((5, 1))(y))
    model = tf.keras.Model(inp, L.Dense(4, activation="softmax")(L.Concatenate()([r, z])))
    spec = tf.TensorSpec((1, SEQUENCE_1D, FEATURES_1D), tf.float32, name="sequence")
    fn = tf.function(lambda t: model(t, training=False), input_signature=[spec])
    rng = np.random.default_rng(SEED + 7)
    samples = [rng.uniform(-1, 1, (1, SEQUENCE_1D, FEATURES_1D)).astype(np.float32) for _ in range(CALIBRATION_SAMPLES)]
    return fn, samples


def _layers_model_2(shape):
    """More common Keras layers in one small image model (see the module docstring)."""
    tf = _tf()
    L = tf.keras.layers
    inp = tf.keras.Input(shape, batch_size=1, name="image")
    x = L.Conv2D(8, 3, padding="same", dilation_rate=2)(L.Rescaling(0.5, offset=0.1)(inp))
    x = L.ReLU(max_value=4.0, negative_slope=0.1)(x)
    x = L.LayerNormalization()(L.Conv2D(8, 3, padding="same", groups=2, activation="relu")(x))
    x = L.Conv2D(8, 3, strides=2, activation="selu")(L.Resizing(12, 12)(x))
    seq = L.Reshape((-1, 8))(x)
    x = L.Bidirectional(L.LSTM(4, unroll=True))(L.Attention()([seq, seq]))
    x = L.Dense(6, activation="softsign")(L.Dense(6, activation="softplus")(x))
    x = L.PReLU()(L.Dense(6)(x))
    return tf.keras.Model(inp, L.Softmax()(L.Dense(CLASSES)(x)))


def _layers_model(shape):
    """Many common Keras layers in one small image model (see the module docstring)."""
    tf = _tf()
    L = tf.keras.layers
    inp = tf.keras.Input(shape, batch_size=None, name="image")     # a dynamic batch
    x = L.Conv2D(8, 3, padding="same", activation="relu6")(inp)
    a = L.LeakyReLU(0.2)(L.SeparableConv2D(8, 3, padding="same")(x))
    b = L.Activation("relu")(L.DepthwiseConv2D(3, padding="same")(x))
    c = L.Activation("tanh")(L.BatchNormalization()(L.Concatenate()([a, b])))
    d, e = L.MaxPooling2D(2)(c), L.AveragePooling2D(2)(c)
    k = L.Concatenate()([L.Add()([d, e]), L.Multiply()([d, e]), L.Subtract()([d, e]), L.Maximum()([d, e]),
                         L.Minimum()([d, e])])
    k = L.Conv2D(16, 1, activation="swish")(k)
    up = [L.UpSampling2D(2, interpolation="bilinear")(k), L.Conv2DTranspose(8, 3, strides=2, padding="same")(k)]
    z = L.Cropping2D(1)(L.ZeroPadding2D(1)(L.Concatenate()(up)))
    z = L.Conv2D(8, 3, strides=2, activation="gelu")(z)
    seq = L.GlobalAveragePooling1D()(L.Conv1D(8, 3, activation="tanh")(L.Reshape((-1, 8))(z)))
    feat = L.Concatenate()([L.GlobalMaxPooling2D()(z), L.GlobalAveragePooling2D()(z),
                            L.Dense(8)(L.Flatten()(L.MaxPooling2D(2)(z))), seq])
    feat = L.Dense(16, activation="sigmoid")(L.Dense(16, activation="hard_sigmoid")(feat))
    return tf.keras.Model(inp, L.Dense(CLASSES, activation="softmax")(feat))


def _recalibrate(model, images) -> None:
    """Random scale and offset for every batch normalization, then its moving statistics set to
    the batch statistics of its input on ``images`` (training-mode pass, momentum 0, dropout off)."""
    import numpy as np

    tf = _tf()
    rng = np.random.default_rng(SEED + 1)
    bns = []
    for layer in model.layers:
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            bns.append(layer)
            if layer.gamma is not None:
                layer.gamma.assign(rng.uniform(0.5, 1.5, layer.gamma.shape).astype(np.float32))
            if layer.beta is not None:
                layer.beta.assign(rng.uniform(-0.5, 0.5, layer.beta.shape).astype(np.float32))
            layer.momentum = 0.0
        elif isinstance(layer, tf.keras.layers.Dropout):
            layer.rate = 0.0
    model(tf.constant(images), training=True)
    for layer in bns:
        layer.momentum = 0.99


def _representative(samples):
    def gen():                      # every sample has its batch dimension already
        for s in samples:
            yield [s]
    return gen


def _converter(tf, fn, samples, quant: str, integer_io: bool):
    c = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()])
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = _representative(samples)
    if quant == "int8":
        c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        io = tf.int8
    else:
        c.target_spec.supported_ops = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
        io = tf.int16
    if integer_io:
        c.inference_input_type = io
    c.inference_output_type = io
    return c


def _convert(arch: str, quant: str) -> bytes:
    tf = _tf()
    tf.keras.backend.clear_session()     # layer names and Keras state as in a fresh process
    tf.keras.utils.set_random_seed(SEED)
    if arch.endswith("_loop"):
        return _convert_in_child(arch, quant)
    if arch == "transformer":
        fn, samples = _transformer()
        integer_io = False               # token ids: int32 in any case
    elif arch == "text_transformer":
        fn, samples = _text_transformer()
        integer_io = False
    elif arch in _RNNS:
        fn, samples = _rnn(arch)
        integer_io = True
    elif arch == "keras_layers_1d":
        fn, samples = _layers_1d()
        integer_io = True
    else:
        model = _keras_model(arch)
        images = _images(arch, CALIBRATION_SAMPLES, SEED + 2)
        _recalibrate(model, images)
        batch = None if arch in DYNAMIC_BATCH else 1
        spec = tf.TensorSpec((batch, image_size(arch), image_size(arch), 3), tf.float32, name="image")
        fn = tf.function(lambda x: model(x, training=False), input_signature=[spec])
        samples = [images[k:k + 1] for k in range(len(images))]
        integer_io = True
    try:
        data = _converter(tf, fn, samples, quant, integer_io).convert()
    except Exception as e:  # the converter's ConverterError and friends
        raise Unsupported(f"{arch} {quant}: the converter fails: {type(e).__name__}: "
                          f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}") from None
    return bytes(data)


def _convert_in_child(arch: str, quant: str) -> bytes:
    """The conversion in a child process (the converter may crash the process)."""
    import signal
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "model.tflite"
        r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--convert-child", arch, quant, str(out)],
                           capture_output=True, text=True)
        if r.returncode < 0:
            name = signal.Signals(-r.returncode).name
            if -r.returncode in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):    # killed, not crashed
                raise RuntimeError(f"{arch} {quant}: the converting process was killed ({name})")
            raise Unsupported(f"{arch} {quant}: the converter crashes ({name}) while calibrating the model "
                              "(the process dies)")
        if r.returncode != 0:
            last = (r.stdout.strip().splitlines() or [""])[-1]
            raise Unsupported(f"{arch} {quant}: the converter fails: {last}")
        return out.read_bytes()


def _child(arch: str, quant: str, out: str) -> int:
    tf = _tf()
    tf.keras.utils.set_random_seed(SEED)
    fn, samples = _rnn(arch)
    try:
        data = _converter(tf, fn, samples, quant, True).convert()
    except Exception as e:  # the converter's ConverterError and friends
        print(f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")
        return 1
    tmp = out + ".tmp"
    Path(tmp).write_bytes(bytes(data))
    os.replace(tmp, out)
    return 0


def _text_transformer():
    """A Keras text encoder with a dynamic batch: token embedding, one block of multi-head
    self-attention and a ReLU feed-forward with residual connections and layer norms, mean pooling
    over the sequence and a softmax classifier."""
    import numpy as np

    tf = _tf()
    layers = tf.keras.layers
    inp = tf.keras.Input((TEXT_SEQ,), dtype="int32", batch_size=None, name="tokens")
    x = layers.Embedding(VOCAB, TEXT_WIDTH)(inp)
    a = layers.MultiHeadAttention(TEXT_HEADS, TEXT_KEY)(x, x)
    x = layers.LayerNormalization()(x + a)
    f = layers.Dense(TEXT_WIDTH)(layers.Dense(TEXT_FFN, activation="relu")(x))
    x = layers.LayerNormalization()(x + f)
    x = layers.GlobalAveragePooling1D()(x)
    out = layers.Dense(4, activation="softmax")(x)
    model = tf.keras.Model(inp, out)
    spec = tf.TensorSpec((None, TEXT_SEQ), tf.int32, name="tokens")
    fn = tf.function(lambda t: model(t, training=False), input_signature=[spec])
    rng = np.random.default_rng(SEED + 5)
    samples = [rng.integers(0, VOCAB, (1, TEXT_SEQ)).astype(np.int32) for _ in range(CALIBRATION_SAMPLES)]
    return fn, samples


def _rnn(arch: str):
    """An LSTM, GRU or SimpleRNN layer over ``STEPS`` time steps (unrolled, except the ``*_loop``
    archs), then a
    dense softmax classifier."""
    import numpy as np

    tf = _tf()
    layers = tf.keras.layers
    kind = arch.removesuffix("_loop")
    cell = {"lstm": layers.LSTM, "gru": layers.GRU, "simple_rnn": layers.SimpleRNN}[kind]
    inp = tf.keras.Input((STEPS, FEATURES), batch_size=1, name="sequence")
    x = cell(UNITS, unroll=not arch.endswith("_loop"))(inp)
    out = layers.Dense(RNN_CLASSES, activation="softmax")(x)
    model = tf.keras.Model(inp, out)
    spec = tf.TensorSpec((1, STEPS, FEATURES), tf.float32, name="sequence")
    fn = tf.function(lambda t: model(t, training=False), input_signature=[spec])
    rng = np.random.default_rng(SEED + 6)
    t = np.linspace(0, 3, STEPS, dtype=np.float32)[None, :, None]
    samples = [(np.sin(t * rng.uniform(0.5, 3, (1, 1, FEATURES)) + rng.uniform(0, 6, (1, 1, FEATURES)))
                + rng.normal(0, 0.2, (1, STEPS, FEATURES))).astype(np.float32) for _ in range(CALIBRATION_SAMPLES)]
    return fn, samples


def _transformer():
    """A small pre-norm transformer encoder over token ids, as a tf.function."""
    import numpy as np

    tf = _tf()
    rng = np.random.default_rng(SEED + 3)

    def dense(n_in, n_out, gain=1.0):
        w = rng.standard_normal((n_in, n_out)).astype(np.float32) * np.float32(gain / np.sqrt(n_in))
        b = rng.standard_normal(n_out).astype(np.float32) * np.float32(0.1)
        return tf.constant(w), tf.constant(b)

    emb = tf.constant(rng.standard_normal((VOCAB, WIDTH)).astype(np.float32))
    pos = tf.constant(rng.standard_normal((1, SEQ, WIDTH)).astype(np.float32) * np.float32(0.3))
    blocks = []
    for _ in range(BLOCKS):
        blocks.append(dict(
            ln1=(tf.constant(rng.uniform(0.5, 1.5, WIDTH).astype(np.float32)),
                 tf.constant(rng.uniform(-0.2, 0.2, WIDTH).astype(np.float32))),
            q=dense(WIDTH, WIDTH), k=dense(WIDTH, WIDTH), v=dense(WIDTH, WIDTH), o=dense(WIDTH, WIDTH),
            ln2=(tf.constant(rng.uniform(0.5, 1.5, WIDTH).astype(np.float32)),
                 tf.constant(rng.uniform(-0.2, 0.2, WIDTH).astype(np.float32))),
            f1=dense(WIDTH, FFN), f2=dense(FFN, WIDTH)))
    final_ln = (tf.constant(np.ones(WIDTH, np.float32)), tf.constant(np.zeros(WIDTH, np.float32)))
    head = dense(WIDTH, 10, gain=2.0)
    depth = WIDTH // HEADS

    def layer_norm(x, gb):
        mean = tf.reduce_mean(x, axis=-1, keepdims=True)
        var = tf.reduce_mean(tf.math.squared_difference(x, mean), axis=-1, keepdims=True)
        return (x - mean) * tf.math.rsqrt(var + 1e-5) * gb[0] + gb[1]

    def linear(x, wb):
        return tf.matmul(x, wb[0]) + wb[1]

    def heads(x):
        return tf.transpose(tf.reshape(x, (1, SEQ, HEADS, depth)), (0, 2, 1, 3))

    @tf.function(input_signature=[tf.TensorSpec((1, SEQ), tf.int32, name="tokens")])
    def encoder(tokens):
        x = tf.gather(emb, tokens) + pos
        for b in blocks:
            h = layer_norm(x, b["ln1"])
            q, k, v = heads(linear(h, b["q"])), heads(linear(h, b["k"])), heads(linear(h, b["v"]))
            scores = tf.matmul(q, k, transpose_b=True) * np.float32(1 / np.sqrt(depth))
            att = tf.matmul(tf.nn.softmax(scores, axis=-1), v)
            att = tf.reshape(tf.transpose(att, (0, 2, 1, 3)), (1, SEQ, WIDTH))
            x = x + linear(att, b["o"])
            h = layer_norm(x, b["ln2"])
            x = x + linear(tf.nn.gelu(linear(h, b["f1"])), b["f2"])
        x = layer_norm(x, final_ln)
        return tf.nn.softmax(linear(tf.reduce_mean(x, axis=1), head), axis=-1)

    data_rng = np.random.default_rng(SEED + 4)
    samples = [data_rng.integers(0, VOCAB, (1, SEQ)).astype(np.int32) for _ in range(CALIBRATION_SAMPLES)]
    return encoder, samples


# ------------------------------------------------------------------------------------------------
# timing
# ------------------------------------------------------------------------------------------------

def random_inputs(path: str | os.PathLike, seed: int = 0) -> list:
    """One random input per model input: token ids for the transformers, codes of the full range
    otherwise."""
    import numpy as np

    from quantspec.litert import load_model

    m = load_model(Path(path))
    rng = np.random.default_rng(seed)
    out = []
    for i in m.inputs:
        t = m.tensors[i]
        if t.type_name == "INT32":
            out.append(rng.integers(0, VOCAB, t.shape).astype(np.int32))
        else:
            info = np.iinfo(t.dtype.dtype)
            out.append(rng.integers(info.min, info.max + 1, t.shape).astype(t.dtype.dtype))
    return out


def time_reference_mode(path: str | os.PathLike, rounds: int = 7) -> tuple[float, float]:
    """(quantspec seconds, LiteRT BUILTIN_REF seconds): best of ``rounds`` runs each, alternating."""
    import time

    from ai_edge_litert.interpreter import Interpreter as LiteRT, OpResolverType

    from quantspec.litert import Interpreter

    inputs = random_inputs(path)
    ours = Interpreter(Path(path))
    ref = LiteRT(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    ref.allocate_tensors()
    for d, x in zip(ref.get_input_details(), inputs):
        ref.set_tensor(d["index"], x)
    ours.run(inputs)
    ref.invoke()
    best_q = best_r = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        ours.run(inputs)
        best_q = min(best_q, time.perf_counter() - t0)
        t0 = time.perf_counter()
        ref.invoke()
        best_r = min(best_r, time.perf_counter() - t0)
    return best_q, best_r


# ------------------------------------------------------------------------------------------------
# command line
# ------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--convert-child"]:
        return _child(*argv[1:4])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("arch", nargs="*", help="architectures (default: all)")
    p.add_argument("--quant", choices=QUANTS, action="append", help="quantization modes (default: both)")
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--speed", action="store_true", help="time quantspec against LiteRT BUILTIN_REF")
    p.add_argument("--rounds", type=int, default=7)
    a = p.parse_args(argv)
    archs = a.arch or list(ARCHS)
    bad = [x for x in archs if x not in ARCHS]
    if bad:
        p.error(f"unknown arch {bad[0]!r}; choose from {', '.join(ARCHS)}")
    for arch in archs:
        for quant in a.quant or QUANTS:
            try:
                path = build(arch, quant, a.cache_dir)
            except Unsupported as e:
                print(f"{arch:20s} {quant:8s} unsupported: {e}")
                continue
            if a.speed:
                try:
                    tq, tr = time_reference_mode(path, a.rounds)
                except Exception as e:  # a model LiteRT or quantspec cannot run
                    print(f"{arch:20s} {quant:8s} not timed: {type(e).__name__}: {str(e).splitlines()[0][:100]}")
                    continue
                print(f"{arch:20s} {quant:8s} quantspec {tq * 1e3:9.2f} ms   BUILTIN_REF {tr * 1e3:9.2f} ms   "
                      f"BUILTIN_REF / quantspec {tr / tq:5.2f}", flush=True)
                continue
            digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
            print(f"{arch:20s} {quant:8s} {path.stat().st_size:>10d} bytes  sha256 {digest}  {path}")
            print("    " + " ".join(op_names(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
