"""``quantize_static`` and ``quantize_with_ranges``: the entry points, and the report they return."""

from __future__ import annotations

import copy
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import InvalidArgumentError, ModelError, UnsupportedError
from .graph import Graph
from .options import StaticOptions, normalize_options
from .selection import check_excluded_names, op_types, to_ranges

_INFER_KEY, _INFER_VALUE = "onnx.infer", "onnxruntime.quant"


@dataclass(frozen=True)
class StaticQuantizationReport:
    """What a static quantization did.

    ``quantized_nodes``: the nodes (names, or op types for unnamed ones) a quantization rule handled;
    ``activations``: the tensors given activation scales / zero points (sorted);
    ``weights``: the initializers written quantized (weights, 8 or 16 bits; biases, int32), in order;
    ``removed_nodes``: activations folded into their producer (QDQ Relu / Clip);
    ``ranges``: how many calibrated ranges were used; ``output``: the file written, if any."""

    quant_format: str
    activation_type: str
    weight_type: str
    per_channel: bool
    reduce_range: bool
    calibrate_method: str
    quantized_nodes: tuple[str, ...]
    activations: tuple[str, ...]
    weights: tuple[str, ...]
    removed_nodes: tuple[str, ...] = ()
    ranges: int = 0
    output: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> str:
        return str(self)

    def to_json(self) -> dict[str, Any]:
        out = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}
        out["options"] = {k: (v if isinstance(v, (bool, int, float, str, type(None), list, dict)) else repr(v))
                          for k, v in self.options.items()}
        return out

    def __str__(self) -> str:
        kind = "per channel" if self.per_channel else "per tensor"
        return (f"{self.quant_format.upper()} {self.activation_type} activations / {self.weight_type} weights "
                f"({kind}{', reduced range' if self.reduce_range else ''}, {self.calibrate_method}): "
                f"{len(self.quantized_nodes)} nodes, {len(self.activations)} activations, "
                f"{len(self.weights)} initializers quantized")


def _has_infer_metadata(model) -> bool:
    return any(p.key == _INFER_KEY and p.value == _INFER_VALUE for p in model.metadata_props)


def prepare_model(model_input: Any):
    """The model as onnxruntime quantizes it: loaded with its external data, shape-inferred by
    ``onnx.shape_inference.infer_shapes_path`` on a copy, and marked as inferred."""
    import onnx

    with tempfile.TemporaryDirectory(prefix="quantspec-static-") as tmp:
        if isinstance(model_input, onnx.ModelProto):
            proto = copy.deepcopy(model_input)
        elif isinstance(model_input, (str, os.PathLike)):
            path = Path(model_input)
            if not path.is_file():
                raise ModelError("model_input", "must be an ONNX model file or an onnx.ModelProto", str(path))
            try:
                proto = onnx.load(str(path))
            except Exception as e:  # a file that is not a model
                raise ModelError("model_input", "must be a readable ONNX model", str(path),
                                 detail=f"{type(e).__name__}: {e}") from None
        else:
            raise ModelError("model_input", "must be a path or an onnx.ModelProto", type(model_input).__name__)
        src = Path(tmp) / "model.onnx"
        onnx.save_model(proto, str(src), save_as_external_data=True)
        inferred = Path(tmp) / "model-inferred.onnx"
        try:
            onnx.shape_inference.infer_shapes_path(str(src), str(inferred))
        except Exception as e:
            raise ModelError("model_input", "must pass ONNX shape inference", type(e).__name__,
                             detail=str(e)) from None
        model = onnx.load(str(inferred))
    props = {_INFER_KEY: _INFER_VALUE}
    props.update({p.key: p.value for p in model.metadata_props})
    onnx.helper.set_model_props(model, props)
    return model


def _check_model(graph: Graph) -> None:
    if graph.opset is None:
        raise ModelError("model_input", "must import the default ONNX domain exactly once", None)
    halves = [t.name for t in graph.graph.initializer if t.data_type == 10]
    halves += [n for n, vi in graph.value_infos.items()
               if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type == 10]
    if halves:
        raise UnsupportedError("model_input", "float16 tensors are not reproduced (onnxruntime's quantized "
                               "float16 models do not load at these opsets)", sorted(halves)[:4])
    if graph.opset < 10:
        raise UnsupportedError("model_input", "opset below 10 (onnxruntime converts it to opset 11 first, which is "
                               "not reproduced)", graph.opset)


def quantize_with_ranges(model: Any, ranges: dict, options: StaticOptions | None = None, **keywords):
    """Quantize ``model`` (ModelProto or path) with given calibrated ranges: ``{tensor: CalibrationRange}``
    (or onnxruntime ``TensorData``, or ``(lowest, highest)`` arrays).  ``options`` is a
    :class:`StaticOptions`, or the keywords of :func:`quantize_static` are given instead.  Returns
    ``(ModelProto, StaticQuantizationReport)``; writes nothing."""
    import onnx

    if options is None:
        options = normalize_options(**keywords)
    elif keywords:
        raise InvalidArgumentError("options", "give either a StaticOptions or keywords, not both", sorted(keywords))
    if isinstance(model, onnx.ModelProto) and _has_infer_metadata(model):
        model = copy.deepcopy(model)
    else:
        model = prepare_model(model)
    graph = Graph(model)
    _check_model(graph)
    check_excluded_names(graph, options)
    readable = to_ranges(ranges)
    if options.quant_format == "qdq":
        from .qdq import write_qdq

        info = write_qdq(graph, readable, options)
    else:
        from .qoperator import write_qoperator

        info = write_qoperator(graph, readable, options)
    graph.sort()
    model.producer_name = "quantspec"
    report = StaticQuantizationReport(
        quant_format=options.quant_format, activation_type=options.activation_type,
        weight_type=options.weight_type, per_channel=options.per_channel, reduce_range=options.reduce_range,
        calibrate_method=options.calibrate_method, quantized_nodes=tuple(info["nodes"]),
        activations=tuple(info["activations"]), weights=tuple(info["weights"]),
        removed_nodes=tuple(info["removed"]), ranges=len(readable), options=dict(options.extra))
    return model, report


def quantize_static(model_input: Any, model_output: Any, calibration_data: Any, *, quant_format: Any = "qdq",
                    per_channel: bool = False, reduce_range: bool = False, activation_type: Any = "uint8",
                    weight_type: Any = "int8", calibrate_method: Any = "minmax", op_types_to_quantize: Any = None,
                    nodes_to_exclude: Any = None, extra_options: Any = None) -> StaticQuantizationReport:
    """Static quantization of an ONNX model, byte for byte as onnxruntime 1.31.1's
    ``onnxruntime.quantization.quantize_static`` with the same data and options (see the package
    docstring of :mod:`quantspec.onnxmodels.static` for what is reproduced).  ``model_output`` (a path)
    is written to a temporary name and renamed; None writes nothing."""
    options = normalize_options(quant_format=quant_format, per_channel=per_channel, reduce_range=reduce_range,
                                activation_type=activation_type, weight_type=weight_type,
                                calibrate_method=calibrate_method, op_types_to_quantize=op_types_to_quantize,
                                nodes_to_exclude=nodes_to_exclude, extra_options=extra_options)
    if model_output is not None and not isinstance(model_output, (str, os.PathLike)):
        raise InvalidArgumentError("model_output", "must be a path (or None)", type(model_output).__name__)
    model = prepare_model(model_input)
    check_excluded_names(Graph(model), options)
    from ..calibration import collect_ranges  # the calibration reproduces onnxruntime's calibrators

    ranges = collect_ranges(model, calibration_data, method=options.calibrate_method,
                            op_types=list(op_types(options)), extra_options=options.calibration_extra)
    quantized, report = quantize_with_ranges(model, ranges, options)
    if model_output is not None:
        from ..io import save_model

        save_model(quantized, model_output)
        report = StaticQuantizationReport(**{**report.__dict__, "output": str(model_output)})
    return report
