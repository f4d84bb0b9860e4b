"""Converter-made full-integer models of common Keras architectures (``benchmarks/litert_zoo.py``),
run by ``quantspec.litert.Interpreter`` in its three kernel modes and by LiteRT (ai-edge-litert) with
the matching op resolver, on random inputs, byte for byte:

============  ==========================================  ==========================================
mode          LiteRT                                      compared
============  ==========================================  ==========================================
reference     ``BUILTIN_REF``                             every output and every non-constant tensor
optimized     ``BUILTIN_WITHOUT_DEFAULT_DELEGATES``       every output and every non-constant tensor
xnnpack       ``AUTO`` (the XNNPACK delegate, then the    every output and every non-constant tensor
              optimized kernels)                          LiteRT exposes (see below)
============  ==========================================  ==========================================

In the reference mode quantspec runs SUM with ``sum_semantics="reference"`` (BUILTIN_REF's int8
SUM reads int8 as uint8; quantspec's default is the correct sum).  The outputs are compared with
LiteRT as it runs by default and with
``experimental_preserve_all_tensors``, which exposes the intermediates.  With the XNNPACK delegate the tensors inside
a delegated partition are computed by XNNPACK in its own buffers; ai-edge-litert 2.3.0 still writes
them back (each delegated operator's output is readable, and differs from the optimized kernels'
where XNNPACK's arithmetic does), so they are compared like the others; a tensor LiteRT cannot read
(an empty tensor: "Invalid tensor size") is left out in every mode.

Models and quantizations (``QUANTSPEC_ZOO_ARCHS`` / ``QUANTSPEC_ZOO_QUANTS``): MobileNetV2,
MobileNetV3Small, EfficientNetB0 (32x32, a dynamic batch: run at batch 1 and 3), three models of
many common Keras layers (the first with a dynamic batch, run at batch 1 and 3, in int8 and
int16x8), nearest-neighbour upsampling, a transformer encoder written with TensorFlow ops, a Keras
text transformer with a dynamic batch dimension (run at batch 1 and batch 3: LiteRT resizes the
input, quantspec runs the larger batch), and unrolled Keras LSTM, GRU and SimpleRNN layers; int8 and
int16x8.

What the converter or LiteRT cannot do is asserted too:

- the converter refuses MobileNetV3 in int16x8 (no 16x8 HARD_SWISH), the second layer model in
  int16x8 (no 16x8 NEG, which LayerNormalization needs), the sequence-layer model in int16x8 (no
  16x8 SQUARE, which UnitNormalization needs) and the dynamic-batch text
  transformer in int16x8 (its calibration records no range for the token input); converting a Keras
  LSTM, GRU or SimpleRNN that is not unrolled (a WHILE loop) in full-integer quantization crashes
  the converting process (SIGSEGV) in int8 and int16x8 alike;
- nearest-neighbour ``UpSampling2D`` converts to TILE version 3, which LiteRT's BUILTIN_REF cannot
  load (the stock resolvers run it); quantspec's reference mode refuses it too (it resolves the
  operator versions as each resolver does);
- the int16x8 transformer encoder converts, but LiteRT has no int16 SQUARED_DIFFERENCE kernel: every
  resolver fails at invoke, and quantspec's interpreter refuses the model in every mode with the same
  rule (``no-int16-kernel``), which ``check_model`` reports.

The models are built with TensorFlow's converter on first use and cached (``litert_zoo.cache_dir``:
``$QUANTSPEC_ZOO_CACHE``, ``$QUANTSPEC_TEST_CACHE/zoo`` or ``~/.cache/quantspec/zoo``).

- ``QUANTSPEC_ZOO_ARCHS``: comma-separated architectures, or ``all`` (default: the ones above; the
  larger CNNs ``mobilenet_v3_large``, ``resnet50``, ``densenet121`` run with ``all``);
- ``QUANTSPEC_ZOO_QUANTS``: ``int8``, ``int16x8`` or both (default both);
- ``QUANTSPEC_ZOO_INPUTS``: random inputs per model and mode (default 2; the acceptance run uses 20).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from litert_modes import MODES, RESOLVER
from refs import require

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import litert_zoo  # noqa: E402

DEFAULT = ("mobilenet_v2,mobilenet_v3_small,efficientnet_b0,keras_layers,keras_layers_2,keras_layers_1d,"
           "upsampling_nearest,"
           "transformer,text_transformer,lstm,gru,simple_rnn,lstm_loop,gru_loop,simple_rnn_loop")
_ARCHS = os.environ.get("QUANTSPEC_ZOO_ARCHS", DEFAULT)
ARCHS = litert_zoo.ARCHS if _ARCHS == "all" else tuple(a for a in _ARCHS.split(",") if a)
QUANTS = tuple(q for q in os.environ.get("QUANTSPEC_ZOO_QUANTS", "int8,int16x8").split(",") if q)
INPUTS = int(os.environ.get("QUANTSPEC_ZOO_INPUTS", "2"))
SEED = int(os.environ.get("QUANTSPEC_TEST_SEED", "0"))

#: what the converter cannot make, and how it says so
UNSUPPORTED = {("mobilenet_v3_small", "int16x8"): "16x8", ("mobilenet_v3_large", "int16x8"): "16x8",
               ("keras_layers_2", "int16x8"): "16x8-bit not yet supported for op: 'NEG'",
               ("keras_layers_1d", "int16x8"): "16x8-bit not yet supported for op: 'SQUARE'",
               ("text_transformer", "int16x8"): "Max and min for dynamic tensors",
               **{(f"{rnn}_loop", q): "crashes \\(SIGSEGV\\)" for rnn in ("lstm", "gru", "simple_rnn")
                  for q in ("int8", "int16x8")}}
#: models no LiteRT resolver can run, and the rule quantspec (and check_model) reports for them
LITERT_FAILS = {("transformer", "int16x8"): "no-int16-kernel"}
#: the batch sizes the dynamic-batch models run at
BATCHES = {"text_transformer": (1, 3), "keras_layers": (1, 3), "efficientnet_b0": (1, 3)}
#: models LiteRT's reference resolver cannot load (an operator version BUILTIN_REF does not register),
#: and its message; the stock resolvers run them
REFERENCE_CANNOT_LOAD = {"upsampling_nearest": "Didn't find op for builtin opcode 'TILE' version '3'"}

CASES = [(a, q) for a in ARCHS for q in QUANTS if (a, q) not in UNSUPPORTED]
RUNS = [(a, q, b, m) for a, q in CASES if (a, q) not in LITERT_FAILS for b in BATCHES.get(a, (1,)) for m in MODES]


def _model(arch: str, quant: str) -> Path:
    try:
        return litert_zoo.build(arch, quant)
    except ImportError:
        require("tensorflow")
        raise


def _random_inputs(model, batch: int, rng) -> list[np.ndarray]:
    out = []
    for i in model.main.inputs:
        t = model.main.tensors[i]
        shape = (batch, *t.shape[1:])
        if t.type_name == "INT32":               # token ids
            out.append(rng.integers(0, litert_zoo.VOCAB, shape).astype(np.int32))
        else:
            info = np.iinfo(t.dtype.dtype)
            out.append(rng.integers(info.min, info.max + 1, shape).astype(t.dtype.dtype))
    return out


def _litert(data: bytes, mode: str, feeds, preserve: bool = True):
    ip = require("ai_edge_litert.interpreter")
    it = ip.Interpreter(model_content=data, experimental_preserve_all_tensors=preserve,
                        experimental_op_resolver_type=getattr(ip.OpResolverType, RESOLVER[mode]))
    for d, x in zip(it.get_input_details(), feeds):
        if tuple(d["shape"]) != x.shape:
            it.resize_tensor_input(d["index"], list(x.shape))
    it.allocate_tensors()
    return it


def _get(it, i):
    """LiteRT's tensor ``i``, or None where its Python API cannot read it (an empty tensor)."""
    try:
        return it.get_tensor(i)
    except ValueError:
        return None


@pytest.mark.filterwarnings("ignore:Warning. Enabling `experimental_preserve_all_tensors`")
@pytest.mark.parametrize("arch, quant, batch, mode", RUNS)
def test_zoo_model_is_byte_identical_to_litert(arch, quant, batch, mode):
    from quantspec.errors import QuantSpecError
    from quantspec.litert import Interpreter, load_model

    data = _model(arch, quant).read_bytes()
    model = load_model(data)
    if mode == "reference" and arch in REFERENCE_CANNOT_LOAD:      # both refuse the model
        with pytest.raises(ValueError, match=REFERENCE_CANNOT_LOAD[arch]):
            _litert(data, mode, [])
        with pytest.raises(QuantSpecError, match="litert-load") as e:
            Interpreter(model, kernels=mode)
        assert "TILE version 3" in str(e.value)
        return
    # BUILTIN_REF's int8 SUM reads int8 as uint8: quantspec's "reference" SUM semantics reproduce it
    ours = Interpreter(model, kernels=mode, preserve_all_tensors=True,
                       sum_semantics="reference" if mode == "reference" else "correct")
    rng = np.random.default_rng([SEED, sum(map(ord, arch)), len(quant), batch, MODES.index(mode)])
    sg = model.main
    compared = 0
    for k in range(INPUTS):
        feeds = _random_inputs(model, batch, rng)
        outputs = ours.run(feeds)
        for preserve in (False, True):      # the outputs of the resolver as it runs by default, and with
            ref = _litert(data, mode, feeds, preserve)            # every tensor kept
            for d, x in zip(ref.get_input_details(), feeds):
                ref.set_tensor(d["index"], x)
            ref.invoke()
            for j, (d, y) in enumerate(zip(ref.get_output_details(), outputs)):
                want = ref.get_tensor(d["index"])
                assert y.dtype == want.dtype and y.shape == want.shape, (y.dtype, want.dtype, y.shape, want.shape)
                assert y.tobytes() == want.tobytes(), \
                    f"{arch} {quant} batch {batch} ({mode}, preserve_all_tensors={preserve}) input {k}: output {j} differs"
        for t in sg.tensors:
            if t.data is not None or t.dtype is None:
                continue
            want = _get(ref, t.index)
            if want is None:
                continue
            got = ours.get_tensor(t.index)
            assert got.shape == want.shape and got.dtype == want.dtype, (t.index, t.name, got.shape, want.shape)
            if got.tobytes() != want.tobytes():
                bad = int(np.count_nonzero(got != want))
                producer = next((f"operator {op.index} ({op.name}, engine {ours.engines[op.index]})"
                                 for op in sg.operators if t.index in op.outputs), "an input")
                raise AssertionError(f"{arch} {quant} batch {batch} ({mode}) input {k}: tensor {t.index} {t.name!r} "
                                     f"of {producer} differs in {bad} of {got.size} values")
            compared += 1
    assert compared >= INPUTS * len(sg.operators) // 2


@pytest.mark.parametrize("arch, quant", [c for c in CASES if c in LITERT_FAILS])
def test_zoo_model_no_resolver_runs_is_refused_in_every_mode(arch, quant):
    """No LiteRT resolver runs it (each fails at invoke), and quantspec refuses it in each mode with
    the rule check_model reports."""
    from quantspec.errors import QuantSpecError
    from quantspec.litert import Interpreter, check_model

    data = _model(arch, quant).read_bytes()
    for mode in MODES:
        ip = require("ai_edge_litert.interpreter")
        ref = ip.Interpreter(model_content=data,
                             experimental_op_resolver_type=getattr(ip.OpResolverType, RESOLVER[mode]))
        ref.allocate_tensors()
        for d in ref.get_input_details():
            ref.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
        with pytest.raises(RuntimeError):
            ref.invoke()
        with pytest.raises(QuantSpecError) as caught:
            Interpreter(data, kernels=mode)
        assert getattr(caught.value, "limit", None) == LITERT_FAILS[(arch, quant)], (mode, caught.value)
    report = check_model(data)
    assert {v.rule for v in report.rejected_by_litert} == {LITERT_FAILS[(arch, quant)]}, report.render()


@pytest.mark.parametrize("arch, quant", CASES)
def test_zoo_check_reports_exactly_what_litert_fails_on(arch, quant):
    """check == run: no rule LiteRT rejects or aborts on for the models it runs (the reference
    resolver's load refusal for those it cannot load); a 16x8 model is checked with the 16x8 rules."""
    from quantspec.litert import check_model

    report = check_model(_model(arch, quant))
    if arch in REFERENCE_CANNOT_LOAD:         # the reference resolver only, when it loads the model
        assert {(v.rule, v.rejected_by(), v.verdict("reference").stage) for v in report.rejected_by_litert} == \
            {("litert-load", ("reference",), "load")}, report.render()
        assert not check_model(_model(arch, quant), kernels=["optimized", "xnnpack"]).rejected_by_litert
    elif (arch, quant) not in LITERT_FAILS:
        assert not report.rejected_by_litert, report.render()
    assert report.mode == ("int16x8" if quant == "int16x8" else "int8")


def test_the_converter_refuses_what_the_zoo_leaves_out():
    cases = [c for c in sorted(UNSUPPORTED) if c[0] in ARCHS and c[1] in QUANTS] or [("mobilenet_v3_small", "int16x8")]
    for arch, quant in cases:
        with pytest.raises(litert_zoo.Unsupported, match=UNSUPPORTED[(arch, quant)]):
            _model(arch, quant)


def test_the_zoo_has_the_operators_it_is_meant_to_cover():
    """The dynamic-batch text transformer carries the int32 shape arithmetic; the unrolled RNNs are
    plain integer operators."""
    from quantspec.litert import load_model

    if "text_transformer" in ARCHS and "int8" in QUANTS:
        path = _model("text_transformer", "int8")
        assert {"SHAPE", "REDUCE_PROD", "PACK", "SELECT_V2", "MEAN", "BATCH_MATMUL", "SOFTMAX"} <= \
            set(litert_zoo.op_names(path))
        t = load_model(path).main.tensors[load_model(path).main.inputs[0]]
        assert t.shape_signature is not None and t.shape_signature[0] == -1
    for arch in ("lstm", "gru", "simple_rnn"):
        for quant in QUANTS:
            if arch in ARCHS:
                path = _model(arch, quant)
                ops = set(litert_zoo.op_names(path))
                gates = {"LOGISTIC", "MUL"} if arch != "simple_rnn" else set()
                assert {"FULLY_CONNECTED", "TANH", "ADD", "UNPACK"} | gates <= ops, ops
                assert not ops & {"WHILE", "UNIDIRECTIONAL_SEQUENCE_LSTM"}, ops
                # integer throughout, but for the one SPLIT some conversions of the GRU keep in float32
                sg = load_model(path).main
                floats = {op.name for op in sg.operators
                          if any(sg.tensors[i].type_name == "FLOAT32" for i in (*op.inputs, *op.outputs) if i >= 0)}
                assert floats <= {"DEQUANTIZE", "SPLIT", "QUANTIZE"}, (arch, quant, floats)
