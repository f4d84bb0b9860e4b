"""The LiteRT section of ``quantspec demo`` (the main job; see quantspec/demo.py).

1. The bundled weight tensor quantized as the TF 2.21 converter quantizes a FULLY_CONNECTED layer:
   per-axis (dimension 0) symmetric int8 and per-tensor, with the round-trip error.
2. ``quantspec check`` on the example models shipped in ``quantspec/data`` (all conformant), and on a
   copy of the MLP whose SOFTMAX output scale is 1/255 instead of the spec's 1/256.
3. ``quantspec run`` of the MLP on a seeded input, on quantspec's kernels; with ai-edge-litert
   installed, the LiteRT interpreter (reference kernels) runs the same input and the bytes are compared.
"""

from __future__ import annotations

import sys

import numpy as np

from ..errors import QuantSpecError

__all__ = ["section"]


def _weights(w: np.ndarray, out) -> None:
    from .params import dequantize, quantize_weights, weight_params

    print("  the bundled weights as the converter quantizes a FULLY_CONNECTED layer (int8, zero point 0, "
          "values in [-127, 127]):", file=out)
    for label, axis in (("per-axis (dimension 0)", 0), ("per-tensor", None)):
        p = weight_params(w, axis)
        q = quantize_weights(w, p)
        err = dequantize(q, p) - w
        print(f"    {label:<24} {len(p):>4} scale(s)  rel. RMS err {np.linalg.norm(err) / np.linalg.norm(w):.2e}  "
              f"max |err| {np.abs(err).max():.2e}", file=out)


def _check(out) -> None:
    from .checker import check_model
    from .model import EXAMPLE_MODELS, example_model, load_model

    print("\n  quantspec check, on the example models:", file=out)
    for name in EXAMPLE_MODELS:
        report = check_model(example_model(name))
        ops = ", ".join(report.op_names)
        print(f"    {name:<20} {'conformant' if report.ok else f'{len(report.violations)} violation(s)':<14} "
              f"({report.operators} operators: {ops})", file=out)
    data = bytearray(open(example_model("mlp_softmax"), "rb").read())
    at = data.find(np.float32(1 / 256).tobytes())
    data[at:at + 4] = np.float32(1 / 255).tobytes()       # the SOFTMAX output's scale
    report = check_model(load_model(bytes(data)))
    print("    mlp_softmax.tflite with the SOFTMAX output scale set to 1/255:", file=out)
    for v in report.violations:
        print(f"      [{v.rule}] operator {v.op_index} {v.op_name}, tensor {v.tensor_index} {v.tensor_name!r}: "
              f"expected {v.expected:.9g}, found {v.found:.9g}; LiteRT {v.litert_text}", file=out)


def _run(out) -> None:
    from .interpreter import Interpreter
    from .model import example_model

    path = example_model("mlp_softmax")
    print("\n  quantspec run mlp_softmax.tflite (int8 in and out), on quantspec's kernels:", file=out)
    try:
        interp = Interpreter(path)
    except QuantSpecError as e:
        print(f"    not available in this build: {e}", file=out)
        return
    (t,) = interp.inputs
    x = np.random.default_rng(0).integers(-128, 128, t.shape, dtype=np.int8)
    (y,) = interp.run([x])
    p = interp.outputs[0].params
    probs = (y.astype(np.float64) - int(p.zero_point[0])) * float(p.scale[0])
    print(f"    output (int8): {y.ravel().tolist()}", file=out)
    print(f"    as probabilities: class {int(np.argmax(probs))} at {probs.max():.3f}, sum {probs.sum():.3f}", file=out)
    try:
        from ._cli import run_litert_reference

        (ref,) = run_litert_reference(path, [x])
    except QuantSpecError:
        print("    (install ai-edge-litert to compare with the LiteRT interpreter)", file=out)
        return
    same = ref.tobytes() == y.tobytes()
    print(f"    LiteRT interpreter, reference kernels: {'byte-identical' if same else 'DIFFERENT'}", file=out)


def section(w: np.ndarray, out=sys.stdout) -> None:
    print("LiteRT int8 (the 8-bit quantization spec):\n", file=out)
    _weights(w, out)
    _check(out)
    _run(out)
