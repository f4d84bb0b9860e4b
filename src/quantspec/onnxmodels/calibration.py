"""Calibration of a float ONNX model: the activation ranges onnxruntime's ``quantize_static`` computes.

:func:`collect_ranges` gives, per calibrated tensor, the :class:`~quantspec.calibrate.CalibrationRange`
(the fields of onnxruntime's ``TensorData``) that ``onnxruntime.quantization.quantize_static``
obtains from its calibrator for the same model, data and options (verified with onnxruntime 1.31.1):

- **which tensors**: the float32 / float16 inputs and outputs of the nodes whose op type is in
  ``op_types`` (default: the op types ``quantize_static`` quantizes, :data:`DEFAULT_OP_TYPES`), as
  onnxruntime's ``select_tensors_to_calibrate`` finds them on the shape-inferred model (a tensor
  shape inference gives no type is not calibrated; initializers never are);
- **the activations**: the model runs in onnxruntime on the CPU with every graph optimization off
  (``ORT_DISABLE_ALL``, the calibrator's own session options), one inference per sample, the chosen
  tensors exposed as outputs; each inference's values go to one observer per tensor
  (:mod:`quantspec.calibrate`) and are then dropped;
- **the methods** (``method``, a name or onnxruntime's ``CalibrationMethod``): ``minmax``
  (:class:`~quantspec.calibrate.MinMaxObserver`), ``entropy``, ``percentile`` and ``distribution``
  (the histogram observers), with the defaults ``create_calibrator`` uses;
- **the options** ``quantize_static`` reads from ``extra_options``: ``CalibTensorRangeSymmetric``,
  ``CalibMovingAverage``, ``CalibMovingAverageConstant``, ``CalibMaxIntermediateOutputs`` (MinMax:
  every time that many inferences are held, onnxruntime drops them without using them, so only the
  inferences after the last multiple count), ``CalibPercentile`` and ``CalibStridedMinMax`` (the
  samples in consecutive groups of that size, each group one ``collect_data`` call).  Other keys
  (the quantizer's options) are ignored.

The data (:func:`iter_feeds`): a dict ``{input name: stacked samples}`` (first axis = samples; an
array of the input's own rank is cut into batches of one along its first axis), a list of feed
dicts, an object with ``get_next()`` (onnxruntime's ``CalibrationDataReader``), or the path of an
``.npz`` file holding one array per input by name (with one input an unnamed ``arr_0`` is fine).

The histogram methods keep a call's activations until the call ends, as onnxruntime does (the
histogram's range is that of all of them): their memory grows with the number of samples, MinMax's
does not.  The model is calibrated as given; ``quantize_static`` first raises the opset of a model
below opset 10 (or below 21 for 16-bit types), which its caller does before calibrating.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .io import tensor_size, without_initializers
from ..errors import (DTypeError, InvalidArgumentError, QuantSpecError, RuntimeUnsupportedError, ShapeError,
                      UnsupportedError)

__all__ = ["collect_ranges", "iter_feeds", "count_samples", "select_tensors", "calibration_options",
           "CalibrationOptions", "DEFAULT_OP_TYPES", "METHODS", "model_inputs"]

#: the op types ``quantize_static`` calibrates and quantizes when none are named (onnxruntime 1.31.1:
#: the union of its QOperator and QDQ registries)
DEFAULT_OP_TYPES = frozenset({
    "Add", "ArgMax", "AveragePool", "BatchNormalization", "Clip", "Concat", "Conv", "ConvTranspose", "CumSum",
    "EmbedLayerNormalization", "Flatten", "Gather", "GatherElements", "Gemm", "GlobalAveragePool",
    "InstanceNormalization", "LayerNormalization", "LeakyRelu", "MatMul", "MaxPool", "Mul", "Pad", "Relu",
    "Reshape", "Resize", "Sigmoid", "Slice", "Softmax", "Split", "Squeeze", "TopK", "Transpose", "Unsqueeze",
    "Where"})

#: method name -> onnxruntime's ``CalibrationMethod`` member name
METHODS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile", "distribution": "Distribution"}

_FLOAT, _FLOAT16 = 1, 10


@dataclass(frozen=True)
class CalibrationOptions:
    """The calibrator settings ``quantize_static`` derives from its arguments."""

    method: str                       # minmax | entropy | percentile | distribution
    symmetric: bool
    moving_average: bool = False
    averaging_constant: float = 0.01
    max_intermediate_outputs: int | None = None
    percentile: float = 99.999
    stride: int | None = None

    def observer(self):
        """A fresh observer for one tensor."""
        from ..calibrate import DistributionObserver, EntropyObserver, PercentileObserver

        if self.method == "minmax":
            return _MinMax(symmetric=self.symmetric, moving_average=self.moving_average,
                           averaging_constant=self.averaging_constant)
        if self.method == "entropy":
            return EntropyObserver(num_bins=128, num_quantized_bins=128, symmetric=self.symmetric)
        if self.method == "percentile":
            return PercentileObserver(num_bins=2048, percentile=self.percentile, symmetric=self.symmetric)
        return DistributionObserver(num_bins=2048, scenario="same")


def method_name(method: Any) -> str:
    """``method`` (a name in any case, or onnxruntime's ``CalibrationMethod``) as a key of :data:`METHODS`."""
    name = getattr(method, "name", method)
    if isinstance(name, str):
        key = name.lower().replace("_", "").replace("-", "")
        if key in METHODS:
            return key
    raise InvalidArgumentError("method", "must be one of " + ", ".join(METHODS) + " (or onnxruntime's "
                               "CalibrationMethod)", method)


def _flag(extra: Mapping, key: str, default: bool) -> bool:
    if key not in extra:
        return default
    value = extra[key]
    if value is not None and not isinstance(value, (bool, np.bool_, int, np.integer)):
        raise InvalidArgumentError(f"extra_options[{key!r}]", "must be True or False", value)
    return bool(value)


def _number(extra: Mapping, key: str, default, lo=None, hi=None):
    if key not in extra:
        return default
    value = extra[key]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidArgumentError(f"extra_options[{key!r}]", "must be a number", value)
    if value != value:
        raise InvalidArgumentError(f"extra_options[{key!r}]", "must be a number, not NaN", value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise InvalidArgumentError(f"extra_options[{key!r}]", f"must be in [{lo}, {hi}]", value)
    return value


def _count(extra: Mapping, key: str):
    if key not in extra or extra[key] is None or extra[key] == 0 and key == "CalibStridedMinMax":
        return None
    value = extra[key]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidArgumentError(f"extra_options[{key!r}]", "must be a positive integer", value)
    return int(value)


def calibration_options(method: Any = "minmax", extra_options: Mapping | None = None) -> CalibrationOptions:
    """The calibrator settings for ``method`` and ``quantize_static``'s ``extra_options`` (the
    ``Calib*`` keys; the others are ignored), with ``create_calibrator``'s defaults."""
    name = method_name(method)
    if extra_options is None:
        extra_options = {}
    if not isinstance(extra_options, Mapping):
        raise InvalidArgumentError("extra_options", "must be a dict", extra_options)
    extra = dict(extra_options)
    symmetric = _flag(extra, "CalibTensorRangeSymmetric", name == "percentile")
    moving = _flag(extra, "CalibMovingAverage", False)
    constant = _number(extra, "CalibMovingAverageConstant", 0.01, *((0, 1) if moving and name == "minmax"
                                                                    else (None, None)))
    percentile = _number(extra, "CalibPercentile", 99.999, 0, 100)
    return CalibrationOptions(
        method=name, symmetric=symmetric if name != "distribution" else False, moving_average=moving,
        averaging_constant=constant, max_intermediate_outputs=_count(extra, "CalibMaxIntermediateOutputs"),
        percentile=percentile, stride=_count(extra, "CalibStridedMinMax"))


def _minmax_class():
    from ..calibrate import MinMaxObserver

    class MinMax(MinMaxObserver):
        def discard_pending(self) -> None:
            """onnxruntime's ``clear_collected_data`` inside ``collect_data``: the inferences held
            since the last range are dropped without being used."""
            self._mins, self._maxs = [], []

    return MinMax


def _MinMax(**kw):
    global _MINMAX
    if _MINMAX is None:
        _MINMAX = _minmax_class()
    return _MINMAX(**kw)


_MINMAX = None


# --------------------------------------------------------------------------------------------- model

def _onnx():
    try:
        import onnx
    except ImportError as e:  # pragma: no cover - onnx is a dependency of the onnx extra
        raise UnsupportedError("onnx", "calibrating a model needs the onnx package (pip install 'quantspec[onnx]')",
                               detail=str(e)) from None
    return onnx


def _load(model) -> Any:
    """The model as a ModelProto (a path is read with its external data)."""
    onnx = _onnx()
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (str, Path)):
        p = Path(model)
        if not p.is_file():
            raise InvalidArgumentError("model", "must be an ONNX file that exists", str(model))
        try:
            return onnx.load(str(p))
        except Exception as e:
            raise InvalidArgumentError("model", "must be an ONNX model file onnx can read", str(model),
                                       detail=f"{type(e).__name__}: {e}") from None
    raise InvalidArgumentError("model", "must be a path or an onnx.ModelProto", type(model).__name__)


#: initializers larger than this are given to shape inference without their values (only their
#: type and dims): the values shape inference reads (a Reshape's shape, Slice's starts...) are small
_SHAPE_DATA_UP_TO = 4096
_DATA_FIELDS = ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data")


def _infer(proto):
    """The shape-inferred model onnxruntime's calibrator selects its tensors from
    (``onnx.shape_inference`` with its default options), computed on a copy whose large initializers
    carry no values (the result is only read for its value infos)."""
    onnx = _onnx()
    light = without_initializers(proto)              # every field but the graph's initializers, copied
    for t in proto.graph.initializer:
        if tensor_size(t) > _SHAPE_DATA_UP_TO:           # name, type and dims only
            skeleton = light.graph.initializer.add()
            skeleton.name, skeleton.data_type = t.name, t.data_type
            skeleton.dims.extend(t.dims)
        else:
            light.graph.initializer.add().CopyFrom(t)
    try:
        return onnx.shape_inference.infer_shapes(light)
    except Exception as e:
        raise InvalidArgumentError("model", "must pass onnx's shape inference (onnxruntime's quantizer runs it "
                                   "first)", detail=f"{type(e).__name__}: {e}") from None


@dataclass(frozen=True)
class ModelInput:
    name: str
    dtype: np.dtype | None
    rank: int | None


def model_inputs(proto) -> list[ModelInput]:
    """The graph inputs a feed gives (initializers listed as inputs excluded), with their numpy
    dtype and rank where the model states them."""
    onnx = _onnx()
    inits = {t.name for t in proto.graph.initializer}
    out = []
    for vi in proto.graph.input:
        if vi.name in inits:
            continue
        dtype = rank = None
        if vi.type.HasField("tensor_type"):
            tt = vi.type.tensor_type
            if tt.elem_type:
                try:
                    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
                except Exception:
                    dtype = None
            if tt.HasField("shape"):
                rank = len(tt.shape.dim)
        out.append(ModelInput(vi.name, dtype, rank))
    return out


def select_tensors(inferred, op_types=None) -> dict[str, int]:
    """``{tensor name: onnx element type}`` of the tensors onnxruntime's
    ``select_tensors_to_calibrate`` picks in the shape-inferred model ``inferred`` for ``op_types``
    (None or empty: :data:`DEFAULT_OP_TYPES`, what ``quantize_static`` passes), in the order they
    first appear in the graph's nodes."""
    ops = DEFAULT_OP_TYPES if not op_types else _op_types(op_types)
    g = inferred.graph
    infos = {vi.name: vi for vi in g.value_info}
    infos.update({vi.name: vi for vi in g.output})
    infos.update({vi.name: vi for vi in g.input})
    inits = {t.name for t in g.initializer}
    chosen: dict[str, int] = {}
    for node in g.node:
        if node.op_type not in ops:
            continue
        for name in list(node.input) + list(node.output):
            vi = infos.get(name)
            if vi is None or name in inits or name in chosen or not vi.type.HasField("tensor_type"):
                continue
            if vi.type.tensor_type.elem_type in (_FLOAT, _FLOAT16):
                chosen[name] = vi.type.tensor_type.elem_type
    return chosen


def _op_types(op_types) -> frozenset:
    if isinstance(op_types, str):
        op_types = [op_types]
    try:
        ops = frozenset(op_types)
    except TypeError:
        raise InvalidArgumentError("op_types", "must be None or a list of op type names", op_types) from None
    bad = [o for o in ops if not isinstance(o, str)]
    if bad:
        raise InvalidArgumentError("op_types", "must name op types as strings", bad[0])
    return ops


# ---------------------------------------------------------------------------------------------- data

def _is_reader(data) -> bool:
    return hasattr(data, "get_next") and callable(data.get_next)


def _as_array(value, where: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    try:
        return np.asarray(value)
    except Exception:
        raise InvalidArgumentError(where, "must be an array", type(value).__name__) from None


def _read_npz(path, argument: str = "calibration_data") -> dict[str, np.ndarray]:
    p = Path(path)
    if not p.is_file():
        raise InvalidArgumentError(argument, "must be an .npz file that exists", str(path))
    try:
        f = np.load(str(p), allow_pickle=False)
        if not hasattr(f, "files"):                   # a .npy file: numpy gives its one array
            raise InvalidArgumentError(argument, "must be an .npz file (one array per model input), not a single "
                                       ".npy array", str(path))
        with f:
            return {k: f[k] for k in f.files}
    except InvalidArgumentError:
        raise
    except Exception as e:
        raise InvalidArgumentError(argument, "must be an .npz file numpy can read", str(path),
                                   detail=f"{type(e).__name__}: {e}") from None


def _check_feed_value(inp: ModelInput, a: np.ndarray, where: str, *, stacked: bool) -> None:
    if inp.dtype is not None and a.dtype != inp.dtype:
        raise DTypeError(where, f"must have the dtype of model input {inp.name!r} ({inp.dtype}); convert it with "
                         f".astype(np.{inp.dtype})", str(a.dtype))
    if inp.rank is not None:
        ok = (inp.rank, inp.rank + 1) if stacked else (inp.rank,)
        if a.ndim not in ok:
            want = (f"rank {inp.rank + 1} (samples, then the input's {inp.rank} axes) or {inp.rank} (samples along "
                    "the input's first axis, fed one at a time)") if stacked else f"rank {inp.rank}"
            raise ShapeError(where, f"must have {want} for model input {inp.name!r}", a.shape)


def _named_arrays(inputs: list[ModelInput], data: Mapping, where: str) -> dict[str, np.ndarray]:
    """The dict form checked: every input given once, nothing else."""
    names = [i.name for i in inputs]
    data = dict(data)
    if len(names) == 1 and list(data) == ["arr_0"] and names[0] != "arr_0":
        data = {names[0]: data["arr_0"]}
    unknown = [k for k in data if k not in names]
    if unknown:
        raise InvalidArgumentError(where, "must name only the model's inputs (" + ", ".join(map(repr, names)) + ")",
                                   unknown[0])
    missing = [n for n in names if n not in data]
    if missing:
        raise InvalidArgumentError(where, "must give every model input; missing", missing[0])
    return {k: _as_array(data[k], f"{where}[{k!r}]") for k in names}


class _Feeds:
    """The calibration data as feed dicts (see :func:`iter_feeds`)."""

    def __init__(self, inputs: list[ModelInput], data):
        self.inputs = inputs
        self.by_name = {i.name: i for i in inputs}
        self.reader = None
        self.samples = None        # dict form: name -> (array, stacked-with-extra-axis)
        self.feeds = None          # list form
        if isinstance(data, (str, Path)):
            data = _read_npz(data)
        if _is_reader(data):
            self.reader = data
        elif isinstance(data, Mapping):
            arrays = _named_arrays(inputs, data, "calibration_data")
            counts = {}
            self.samples = {}
            for inp in inputs:
                a = arrays[inp.name]
                _check_feed_value(inp, a, f"calibration_data[{inp.name!r}]", stacked=True)
                if a.ndim == 0:
                    raise ShapeError(f"calibration_data[{inp.name!r}]", "must have a first axis of samples", a.shape)
                counts[inp.name] = a.shape[0]
                extra_axis = inp.rank is None or a.ndim == inp.rank + 1
                self.samples[inp.name] = (a, extra_axis)
            if len(set(counts.values())) > 1:
                raise ShapeError("calibration_data", "must give every input the same number of samples (first axis)",
                                 counts)
            self.n = next(iter(counts.values())) if counts else 0
        elif isinstance(data, (list, tuple)):
            self.feeds = list(data)
            self.n = len(self.feeds)
            for i, feed in enumerate(self.feeds):
                if not isinstance(feed, Mapping):
                    raise InvalidArgumentError(f"calibration_data[{i}]", "must be a feed dict {input name: array}",
                                               type(feed).__name__)
        else:
            raise InvalidArgumentError("calibration_data", "must be a dict of stacked samples, a list of feed dicts, "
                                       "a CalibrationDataReader (get_next()) or an .npz path", type(data).__name__)
        if self.reader is None and self.n == 0:
            raise InvalidArgumentError("calibration_data", "must hold at least one sample (onnxruntime: 'No data is "
                                       "collected.')", 0)

    def count(self) -> int | None:
        if self.reader is not None:
            try:
                return int(len(self.reader))
            except Exception:
                return None
        return self.n

    def check(self, feed: Mapping, where: str) -> dict[str, np.ndarray]:
        arrays = _named_arrays(self.inputs, feed, where)
        for name, a in arrays.items():
            _check_feed_value(self.by_name[name], a, f"{where}[{name!r}]", stacked=False)
        return arrays

    def sample(self, i: int) -> dict[str, np.ndarray]:
        if self.samples is not None:
            return {k: (a[i] if extra else a[i:i + 1]) for k, (a, extra) in self.samples.items()}
        return self.check(self.feeds[i], f"calibration_data[{i}]")

    def iterate(self, start: int = 0, stop: int | None = None) -> Iterator[dict[str, np.ndarray]]:
        if self.reader is not None:
            i = 0
            while True:
                feed = self.reader.get_next()
                if not feed:          # onnxruntime stops at None or an empty dict
                    return
                yield self.check(feed, f"calibration_data (feed {i})")
                i += 1
        for i in range(start, self.n if stop is None else stop):
            yield self.sample(i)


def iter_feeds(model, calibration_data) -> Iterator[dict[str, np.ndarray]]:
    """The calibration data as feed dicts for ``model`` (a path or ModelProto), one per inference,
    checked against the model's inputs (names, dtypes, ranks; the same number of samples per input).
    ``calibration_data``: a dict of stacked samples, a list of feed dicts, a ``CalibrationDataReader``
    or an ``.npz`` path (see the module docstring).  The dict, list and .npz forms are checked before
    the first feed is given, a reader's feeds one by one."""
    feeds = _Feeds(model_inputs(_load(model)), calibration_data)
    return feeds.iterate()


def count_samples(model, calibration_data) -> int | None:
    """How many feeds :func:`iter_feeds` gives (None for a reader without ``len``)."""
    return _Feeds(model_inputs(_load(model)), calibration_data).count()


# ------------------------------------------------------------------------------------------ running

#: initializers of at least this many bytes reach onnxruntime as arrays, not inside the serialized model
_HAND_OVER_FROM = 1 << 16
_PLAIN = {1: np.float32, 10: np.float16, 11: np.float64, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16,
          6: np.int32, 7: np.int64}


def _array(t):
    """The values of initializer ``t`` as a numpy array onnxruntime can take as it is, or None."""
    onnx = _onnx()
    if t.data_type not in _PLAIN or t.data_location == onnx.TensorProto.EXTERNAL or t.ByteSize() < _HAND_OVER_FROM:
        return None
    if t.raw_data:
        return np.frombuffer(t.raw_data, dtype=np.dtype(_PLAIN[t.data_type]).newbyteorder("<")).reshape(tuple(t.dims))
    return onnx.numpy_helper.to_array(t)


def _session(proto, names: list[str]):
    """An onnxruntime session of ``proto`` with ``names`` as extra float32 outputs, with the
    calibrator's session options (``proto`` is left as it was).  The large initializers are handed to
    onnxruntime as arrays (``add_external_initializers``), the rest of the model serialized without
    their bytes: the same values, without copying the weights into a second serialized model."""
    from .ortrun import ort_module

    onnx = _onnx()
    ort = ort_module()
    m = without_initializers(proto)
    handed, values = [], []
    for t in proto.graph.initializer:
        a = _array(t)
        if a is None:
            m.graph.initializer.add().CopyFrom(t)
            continue
        skeleton = m.graph.initializer.add()          # replaced by the array given below
        skeleton.name, skeleton.data_type = t.name, t.data_type
        skeleton.dims.extend(t.dims)
        skeleton.data_location = onnx.TensorProto.EXTERNAL
        entry = skeleton.external_data.add()
        entry.key, entry.value = "location", "quantspec-calibration-arrays"
        handed.append(t.name)
        values.append(ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(a)))
    have = {o.name for o in m.graph.output}
    for name in names:
        if name not in have:
            m.graph.output.append(onnx.helper.make_tensor_value_info(name, _FLOAT, None))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    if handed:
        so.add_external_initializers(handed, values)
    try:
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception as e:
        raise RuntimeUnsupportedError("model", f"onnxruntime {ort.__version__} cannot load it",
                                      detail=" ".join(str(e).split())[:400]) from None
    sess._quantspec_arrays = values           # onnxruntime reads them in place: kept alive with the session
    return sess


def collect_ranges(model, calibration_data, *, method: Any = "minmax", op_types=None,
                   extra_options: Mapping | None = None) -> dict:
    """The calibrated range of every tensor onnxruntime's ``quantize_static`` calibrates, as
    ``{tensor name: CalibrationRange}`` in graph order (see the module docstring).

    ``model``: a path or an ``onnx.ModelProto`` (a float model); ``calibration_data``: see
    :func:`iter_feeds`; ``method``: minmax, entropy, percentile, distribution (or onnxruntime's
    ``CalibrationMethod``); ``op_types``: onnxruntime's ``op_types_to_calibrate`` (None: the op types
    ``quantize_static`` quantizes by default); ``extra_options``: ``quantize_static``'s, of which the
    ``Calib*`` keys are read."""
    opts = calibration_options(method, extra_options)
    proto = _load(model)
    inferred = _infer(proto)
    tensors = select_tensors(inferred, op_types)
    for name, elem in tensors.items():
        if elem != _FLOAT:
            raise UnsupportedError("model", "has a float16 tensor to calibrate; quantspec's calibration reads float32 "
                                   "activations", name)
    feeds = _Feeds(model_inputs(proto), calibration_data)
    names = list(tensors)
    observers = {name: opts.observer() for name in names}
    sess = _session(proto, names) if names else None

    def run_call(samples: Iterator) -> int:
        """One ``collect_data`` call."""
        held = used = 0
        for feed in samples:
            used += 1
            if sess is None:
                continue
            try:
                values = sess.run(names, feed)
            except Exception as e:
                raise InvalidArgumentError("calibration_data", "must be inputs onnxruntime can run the model on",
                                           detail=" ".join(str(e).split())[:400]) from None
            for name, v in zip(names, values):
                with _naming(name, opts.method):
                    observers[name].update(v)
            held += 1
            if opts.method == "minmax" and opts.max_intermediate_outputs == held:
                for o in observers.values():
                    o.discard_pending()
                held = 0
        for name, o in observers.items():
            with _naming(name, opts.method):
                o.flush()
        return used

    any_data = False
    if opts.stride:
        total = feeds.count()
        if total is None:
            raise InvalidArgumentError("calibration_data", "must have a length (len()) with CalibStridedMinMax",
                                       type(calibration_data).__name__)
        if total % opts.stride:
            raise InvalidArgumentError("extra_options['CalibStridedMinMax']", f"must divide the number of samples "
                                       f"({total})", opts.stride)
        for start in range(0, total, opts.stride):
            if feeds.reader is not None:
                feeds.reader.set_range(start_index=start, end_index=start + opts.stride)
                got = run_call(feeds.iterate())
            else:
                got = run_call(feeds.iterate(start, start + opts.stride))
            any_data |= got > 0
    else:
        any_data = run_call(feeds.iterate()) > 0
    if not any_data:
        raise InvalidArgumentError("calibration_data", "must hold at least one sample (onnxruntime: 'No data is "
                                   "collected.')", 0)
    out = {}
    for name, o in observers.items():
        with _naming(name, opts.method):
            out[name] = o.range()
    return out


class _naming:
    """An observer's error as an error of ``calibration_data`` that names the tensor (the observer
    names its own argument, ``batch``)."""

    def __init__(self, tensor: str, method: str):
        self.tensor, self.method = tensor, method

    def __enter__(self):
        return self

    def __exit__(self, kind, e, tb):
        if e is None or not isinstance(e, QuantSpecError) or getattr(e, "argument", "") == "calibration_data":
            return False
        rule = f"gives tensor {self.tensor!r} values the {self.method} calibration cannot take: {e.rule}"
        err = type(e)("calibration_data", rule, e.value if e.value is not None else ...)
        raise err from None
