"""Converter-made full-integer models of common architectures (``benchmarks/litert_zoo.py``: Keras
MobileNetV2, MobileNetV3 Small / Large, EfficientNetB0, ResNet50, DenseNet121 and a small
transformer encoder; int8, and int16x8 where the converter makes it), run by
``quantspec.litert.Interpreter`` and by LiteRT BUILTIN_REF on random inputs: every output and every
intermediate tensor LiteRT exposes (``experimental_preserve_all_tensors``) byte for byte; and
``check_model`` reports a rule LiteRT fails on exactly when LiteRT fails on the model (the int16x8
transformer: LiteRT has no int16 SQUARED_DIFFERENCE kernel and fails at invoke — quantspec's
interpreter refuses it too).

The models are built with TensorFlow's converter on first use and cached (``litert_zoo.cache_dir``:
``$QUANTSPEC_ZOO_CACHE``, ``$QUANTSPEC_TEST_CACHE/zoo`` or ``~/.cache/quantspec/zoo``).  Building all
of them takes a few minutes of CPU, so by default the suite runs a subset:

- ``QUANTSPEC_ZOO_ARCHS``: comma-separated architectures, or ``all`` (default:
  ``mobilenet_v2,mobilenet_v3_small,transformer``);
- ``QUANTSPEC_ZOO_QUANTS``: ``int8``, ``int16x8`` or both (default both);
- ``QUANTSPEC_ZOO_INPUTS``: random inputs per model (default 3; the acceptance run uses 20).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from refs import require

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import litert_zoo  # noqa: E402

_ARCHS = os.environ.get("QUANTSPEC_ZOO_ARCHS", "mobilenet_v2,mobilenet_v3_small,transformer")
ARCHS = litert_zoo.ARCHS if _ARCHS == "all" else tuple(a for a in _ARCHS.split(",") if a)
QUANTS = tuple(q for q in os.environ.get("QUANTSPEC_ZOO_QUANTS", "int8,int16x8").split(",") if q)
INPUTS = int(os.environ.get("QUANTSPEC_ZOO_INPUTS", "3"))
SEED = int(os.environ.get("QUANTSPEC_TEST_SEED", "0"))

#: the converter cannot make these (it has no 16x8 HARD_SWISH)
UNSUPPORTED = {("mobilenet_v3_small", "int16x8"), ("mobilenet_v3_large", "int16x8")}
#: models LiteRT BUILTIN_REF cannot run, and the rule check_model reports for them
LITERT_FAILS = {("transformer", "int16x8"): "no-int16-kernel"}


CASES = [(a, q) for a in ARCHS for q in QUANTS if (a, q) not in UNSUPPORTED]


def _model(arch: str, quant: str) -> Path:
    require("tensorflow")
    return litert_zoo.build(arch, quant)


def _random_inputs(interp, rng):
    out = []
    for t in interp.inputs:
        if t.type_name == "INT32":               # token ids
            out.append(rng.integers(0, litert_zoo.VOCAB, t.shape).astype(np.int32))
        else:
            info = np.iinfo(t.dtype.dtype)
            out.append(rng.integers(info.min, info.max + 1, t.shape).astype(t.dtype.dtype))
    return out


@pytest.mark.parametrize("arch, quant", CASES)
def test_zoo_model_is_byte_identical_to_builtin_ref(arch, quant):
    interp_mod = require("ai_edge_litert.interpreter")
    from quantspec.litert import Interpreter, load_model

    from quantspec.errors import QuantSpecError

    path = _model(arch, quant)
    data = path.read_bytes()
    model = load_model(data)
    ref = interp_mod.Interpreter(model_content=data, experimental_op_resolver_type=interp_mod.OpResolverType.BUILTIN_REF,
                                 experimental_preserve_all_tensors=True)
    ref.allocate_tensors()
    if (arch, quant) in LITERT_FAILS:        # LiteRT fails at invoke: quantspec refuses the model
        for d in ref.get_input_details():
            ref.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
        with pytest.raises(RuntimeError):
            ref.invoke()
        with pytest.raises(QuantSpecError) as caught:
            Interpreter(model)
        assert getattr(caught.value, "limit", None) == LITERT_FAILS[(arch, quant)]
        return
    ours = Interpreter(model, preserve_all_tensors=True)
    rng = np.random.default_rng([SEED, len(arch), len(quant)])
    compared = 0
    for k in range(INPUTS):
        inputs = _random_inputs(ours, rng)
        outputs = ours.run(inputs)
        for d, x in zip(ref.get_input_details(), inputs):
            ref.set_tensor(d["index"], x)
        ref.invoke()
        for j, (d, y) in enumerate(zip(ref.get_output_details(), outputs)):
            want = ref.get_tensor(d["index"])
            assert y.dtype == want.dtype and y.shape == want.shape
            assert y.tobytes() == want.tobytes(), f"{arch} {quant} input {k}: output {j} differs"
        for t in model.main.tensors:
            if t.data is not None or t.dtype is None:
                continue
            got, want = ours.get_tensor(t.index), ref.get_tensor(t.index)
            assert got.shape == want.shape and got.dtype == want.dtype, (t.index, t.name)
            if got.tobytes() != want.tobytes():
                bad = int(np.count_nonzero(got != want))
                raise AssertionError(f"{arch} {quant} input {k}: tensor {t.index} {t.name!r} differs in {bad} of "
                                     f"{got.size} values")
            compared += 1
    assert compared >= INPUTS * len(model.main.operators) // 2


@pytest.mark.parametrize("arch, quant", CASES)
def test_zoo_check_reports_exactly_what_litert_fails_on(arch, quant):
    """check == run: no rule LiteRT rejects or aborts on for the models it runs; the failing rule for
    the one it does not; a 16x8 model is checked with the 16x8 rules."""
    from quantspec.litert import check_model

    report = check_model(_model(arch, quant))
    if (arch, quant) in LITERT_FAILS:
        assert {v.rule for v in report.rejected_by_litert} == {LITERT_FAILS[(arch, quant)]}, report.render()
    else:
        assert not report.rejected_by_litert, report.render()
    assert report.mode == ("int16x8" if quant == "int16x8" else "int8")


def test_the_converter_refuses_what_the_zoo_leaves_out():
    require("tensorflow")
    cases = [c for c in sorted(UNSUPPORTED) if c[0] in ARCHS and c[1] in QUANTS] or [("mobilenet_v3_small", "int16x8")]
    for arch, quant in cases:
        with pytest.raises(litert_zoo.Unsupported, match="16x8"):
            litert_zoo.build(arch, quant)
