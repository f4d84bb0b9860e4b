"""The QDQ writer: QuantizeLinear -> DequantizeLinear pairs on the quantized activations, quantized
weights read through a DequantizeLinear, int32 biases, as onnxruntime 1.31.1's ``QDQQuantizer``.

Steps: every quantized node marks the tensors it wants quantized (its rule in
:data:`registry.QDQ_RULES`, "base" for the others: every float input and output); then the
initializers' parameters are computed, weight scales raised where an int32 bias would saturate,
the Q/DQ pairs written (tensors that share their input's parameters last), the biases quantized,
removed activations dropped and unused initializers cleaned.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ...errors import InvalidArgumentError, ModelError, UnsupportedError
from . import params as P
from .graph import FLOAT_TYPES, Graph, scale_zp_initializers, write_bias
from .options import StaticOptions
from .overrides import Overrides
from .registry import CONV_WEIGHT_AXIS, QDQ_RULES
from .selection import Range, adjust_ranges, should_quantize

WEIGHT, ACTIVATION = "weight", "activation"


@dataclass
class _Mark:
    kind: str
    provider: tuple[str, str] | None = None  # (input tensor, node) whose parameters are shared
    axis: int | None = None
    data_type: int | None = None


@dataclass
class _Bias:
    node: str
    input: str
    weight: str
    beta: float


@dataclass
class _Written:
    q_name: str | None
    scale: str
    zero_point: str
    axis: int | None = None


class QDQWriter:
    def __init__(self, graph: Graph, ranges: dict[str, Range], options: StaticOptions):
        self.g = graph
        self.o = options
        self.act = options.activation_type
        self.wt = options.weight_type
        self.min_real_range = options.opt("MinimumRealRange")
        self.exclude_output = set(options.opt("OpTypesToExcludeOutputQuantization") or [])
        self.axes = options.opt("QDQOpTypePerChannelSupportToAxis") or {}
        self.domain = "com.microsoft" if options.opt("UseQDQContribOps") else None
        self.overrides = Overrides(options.opt("TensorQuantOverrides") or {}, graph, P.full_range)
        self.marks: dict[str, _Mark] = {}
        self.biases: dict[str, _Bias] = {}
        self.removed: list = []
        self.receivers: dict[str, list] = {}
        self.producing_dq: dict[str, object] = {}
        self.written: dict[str, _Written] = {}
        self.init_params: dict[str, dict] = {}
        self.report_weights: list[str] = []
        adjust_ranges(graph, ranges, options)
        self.ranges = ranges
        self.params = {name: (zp.squeeze(), sc.squeeze())
                       for name, (zp, sc) in P.activation_table(ranges, options).items()}

    # -- marking ---------------------------------------------------------------------------------
    def _quantizable(self, name: str) -> bool:
        return self.g.is_float(name)

    def _mark(self, name: str, kind: str = ACTIVATION, provider=None) -> None:
        if not self._quantizable(name):
            return
        if provider is not None:
            self.marks[name] = _Mark(kind, provider, data_type=self.g.elem_type(name))
        elif name not in self.marks:
            self.marks[name] = _Mark(kind, data_type=self.g.elem_type(name))

    def _mark_same_as_input(self, output: str, input_name: str, node_name: str) -> None:
        self._mark(output, ACTIVATION, (input_name, node_name))

    def _mark_weight_per_channel(self, name: str, axis: int) -> None:
        init = self.g.initializer(name)
        if init is not None and init.data_type in FLOAT_TYPES:
            self.marks[name] = _Mark(WEIGHT, axis=axis, data_type=init.data_type)

    def _is_marked(self, name: str) -> bool:
        return name in self.marks or name in self.biases

    def _per_channel_axis(self, name: str, default_axis: int, op_type: str | None = None) -> int | None:
        init = self.g.original_initializers.get(name)
        if init is None or self.overrides.per_tensor(name):
            return None
        if not self.o.per_channel and not self.overrides.per_channel(name):
            return None
        axis = self.axes.get(op_type, default_axis) if op_type else default_axis
        if self.overrides.per_channel(name):
            axis = self.overrides.entries[name][0]["axis"]
        rank = len(init.dims)
        axis = axis + rank if axis < 0 else axis
        return axis if 0 <= axis < rank else None

    def _weight(self, name: str, default_axis: int, op_type: str | None = None) -> None:
        axis = self._per_channel_axis(name, default_axis, op_type)
        if axis is not None:
            self._mark_weight_per_channel(name, axis)
        else:
            self._mark(name, WEIGHT)

    def _bias(self, node_name: str, bias: str, input_name: str, weight: str, beta: float = 1.0) -> None:
        init = self.g.initializer(bias)
        if init is None or init.data_type not in FLOAT_TYPES:
            return
        actual = bias
        if bias in self.biases:
            suffix = self.g.largest_suffix(bias) + 1
            copy = TensorProto()
            copy.CopyFrom(init)
            copy.name = f"{bias}{suffix}"
            self.g.add_initializer(copy)
            actual = copy.name
            self.g.replace_input(bias, actual, {node_name})
        self.biases[actual] = _Bias(node_name, input_name, weight, beta)

    def _outputs_kept(self, node) -> bool:
        return node.op_type not in self.exclude_output

    # -- rules -----------------------------------------------------------------------------------
    def rule_base(self, node) -> None:
        names = list(node.input) + (list(node.output) if self._outputs_kept(node) else [])
        for name in names:
            self._mark(name)

    def rule_conv(self, node) -> None:
        self._mark(node.input[0])
        if self._outputs_kept(node):
            self._mark(node.output[0])
        self._weight(node.input[1], CONV_WEIGHT_AXIS[node.op_type])
        if len(node.input) == 3:
            self._bias(node.name, node.input[2], node.input[0], node.input[1])

    def rule_gemm(self, node) -> None:
        self._mark(node.input[0])
        if self._outputs_kept(node):
            self._mark(node.output[0])
        attrs = {a.name: a for a in node.attribute}
        trans_b = "transB" in attrs and helper.get_attribute_value(attrs["transB"]) > 0
        self._weight(node.input[1], 0 if trans_b else 1)
        if len(node.input) == 3:
            if self.g.is_initializer(node.input[2]):
                beta = helper.get_attribute_value(attrs["beta"]) if "beta" in attrs else 1.0
                self._bias(node.name, node.input[2], node.input[0], node.input[1], beta)
                if "beta" in attrs:
                    attrs["beta"].f = 1.0

    def rule_matmul(self, node) -> None:
        names = list(node.input) + (list(node.output) if self._outputs_kept(node) else [])
        for name in names:
            if self.g.is_initializer(name):
                self._weight(name, 1, node.op_type)
            else:
                self._mark(name)

    def rule_removable(self, node) -> None:
        if not self._is_marked(node.input[0]):
            return
        if (not self.o.activation_symmetric and not self.o.opt("QDQKeepRemovableActivations")
                and self._replace_upstream(node.input[0], node.output[0])):
            self.removed.append(node)
        else:
            self._mark(node.input[0])
        if self._outputs_kept(node):
            self._mark(node.output[0])

    def _replace_upstream(self, upstream: str, output: str) -> bool:
        if output not in self.params:
            return False
        if upstream not in self.params:
            raise UnsupportedError("model", "a removable activation whose input has no calibrated range", upstream)
        if (self.g.consumers(upstream) == 1 and not self.g.is_graph_output(upstream)
                and not self.g.is_graph_input(upstream)):
            self.g.replace_output(upstream, output)
            self.marks.pop(upstream, None)
            return True
        return False

    def rule_direct(self, node) -> None:
        if self.o.opt("ForceQuantizeNoInputCheck"):
            self._mark(node.input[0])
            if self._outputs_kept(node):
                self._mark_same_as_input(node.output[0], node.input[0], node.name)
        elif self._is_marked(node.input[0]) and self._outputs_kept(node):
            self._mark_same_as_input(node.output[0], node.input[0], node.name)

    def rule_maxpool(self, node) -> None:
        if self.g.opset is not None and self.g.opset < 12:
            return
        self.rule_direct(node)

    def rule_resize(self, node) -> None:
        if self.g.opset is not None and self.g.opset < 11:
            return
        self.rule_direct(node)

    def rule_pad(self, node) -> None:
        for name in node.input:
            if name:
                self._mark(name)
        if not self._outputs_kept(node):
            return
        if self._pad_keeps_params(node):
            self._mark_same_as_input(node.output[0], node.input[0], node.name)
        else:
            self._mark(node.output[0])

    def _pad_keeps_params(self, node) -> bool:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        mode = attrs.get("mode", b"constant")
        if mode in (b"reflect", b"edge", b"wrap"):
            return True
        if mode != b"constant":
            return False
        elem = self.g.elem_type(node.input[0]) if node.input[0] in self.g.value_infos else None
        if elem is None:
            return False
        if self.g.opset is not None and self.g.opset < 11:
            value = np.array(attrs.get("value", 0), dtype=helper.tensor_dtype_to_np_dtype(elem))
        elif len(node.input) >= 3 and node.input[2]:
            value = self.g.constant_value(node.input[2])
        else:
            value = np.array(0, dtype=helper.tensor_dtype_to_np_dtype(elem))
        return value is not None and value.dtype in (np.float32, np.float16) and float(value.item()) == 0

    def rule_split(self, node) -> None:
        if not self._is_marked(node.input[0]):
            self._mark(node.input[0])
        if self._outputs_kept(node):
            for out in node.output:
                self._mark_same_as_input(out, node.input[0], node.name)

    def rule_gather(self, node) -> None:
        if self.g.is_float_initializer(node.input[0]) or self.o.opt("ForceQuantizeNoInputCheck"):
            self._mark(node.input[0])
            self._mark_same_as_input(node.output[0], node.input[0], node.name)
        elif self._is_marked(node.input[0]):
            self._mark_same_as_input(node.output[0], node.input[0], node.name)

    def rule_where(self, node) -> None:
        if self.o.opt("ForceQuantizeNoInputCheck"):
            for name in node.input[1:3]:
                if not self._is_marked(name):
                    self._mark(name)
            if self._outputs_kept(node):
                for out in node.output:
                    self._mark(out)
        elif self._is_marked(node.input[1]) and self._is_marked(node.input[2]) and self._outputs_kept(node):
            for out in node.output:
                self._mark(out)

    def rule_norm(self, node) -> None:
        self._mark(node.input[0])
        axis = self._per_channel_axis(node.input[1], 1, node.op_type)
        if axis is not None:
            self._mark_weight_per_channel(node.input[1], axis)
        elif self.g.is_initializer(node.input[1]):
            self._mark(node.input[1], WEIGHT)
        else:
            self._mark(node.input[1])
        if len(node.input) > 2 and node.input[2]:
            self._bias(node.name, node.input[2], node.input[0], node.input[1])
        if self._outputs_kept(node):
            for out in node.output:
                self._mark(out)

    # -- parameters of initializers ----------------------------------------------------------------
    def _initializer_params(self) -> None:
        for name, mark in self.marks.items():
            init = self.g.initializer(name)
            if init is None:
                continue
            data = numpy_helper.to_array(init)
            is_weight = mark.kind == WEIGHT
            qtype = self.wt if is_weight else self.act
            if self.overrides.explicit(name):  # explicit scale / zero point, the scale cast to the weight's dtype
                ov = self.overrides
                if ov.per_channel(name):
                    n = len(ov.entries[name])
                    zp = np.array([ov.zero_point(name, qtype, i) for i in range(n)])
                    sc = np.array([ov.scale(name, i, data.dtype) for i in range(n)])
                    axis = ov.axis(name, data.ndim)
                else:
                    zp, sc, axis = ov.zero_point(name, qtype), ov.scale(name, 0, data.dtype), None
                self.init_params[name] = {"zero_point": zp, "scale": sc, "qtype": qtype, "axis": axis}
                continue
            ov = self.overrides
            axis = ov.get(name, "axis", mark.axis)
            if axis is not None:
                rank = data.ndim
                axis = axis + rank if axis < 0 else axis
            symmetric = axis is not None or (self.o.weight_symmetric(qtype) if is_weight
                                             else self.o.activation_symmetric)
            symmetric = ov.get(name, "symmetric", symmetric)
            reduce_range = ov.get(name, "reduce_range", self.o.reduce_range)
            zp, sc = P.weight_params(data, qtype, symmetric, reduce_range, self.min_real_range, axis,
                                     ov.ranges(name))
            self.init_params[name] = {"zero_point": zp, "scale": sc, "qtype": qtype, "axis": axis}

    def _raise_weight_scales(self) -> None:
        if self.o.opt("QDQDisableWeightAdjustForInt32Bias"):
            return
        for bias, info in self.biases.items():
            if info.input not in self.params or info.input not in self.marks or info.weight not in self.init_params:
                continue
            in_type = self.marks[info.input].data_type
            in_scale = np.asarray(self.params[info.input][1], dtype=helper.tensor_dtype_to_np_dtype(in_type))
            wp = self.init_params[info.weight]
            if wp["qtype"] not in ("int8", "int16") or wp["zero_point"].any():
                continue
            new = P.raise_weight_scale_for_bias(self.g.array(bias), in_scale, wp["scale"], wp["axis"] is not None)
            if new is not None:
                wp["scale"] = new

    # -- writing -----------------------------------------------------------------------------------
    def _add_nodes(self, *nodes) -> None:
        self.g.add_nodes(nodes)

    def _qdq(self, q_in, q_out, q_name, dq_in, dq_out, dq_name, scale, zp, axis=None) -> None:
        self._add_nodes(helper.make_node("QuantizeLinear", [q_in, scale, zp], [q_out], q_name, axis=axis,
                                         domain=self.domain),
                        helper.make_node("DequantizeLinear", [dq_in, scale, zp], [dq_out], dq_name, axis=axis,
                                         domain=self.domain))

    def _write_initializer(self, name: str) -> None:
        if name in self.written:
            return
        p = self.init_params[name]
        qtype_num = P.QTYPES[p["qtype"]][1]
        init = self.g.initializer(name)
        sc, zp = scale_zp_initializers(name, p["zero_point"], p["scale"], qtype_num)
        self.g.add_initializer(zp)
        self.g.add_initializer(sc)
        dq_out = name + "_DequantizeLinear_Output"
        self.g.replace_input(name, dq_out)
        q_name = None
        if self.o.opt("AddQDQPairToWeight"):
            q_out = name + "_QuantizeLinear_Output"
            self._qdq(name, q_out, name + "_QuantizeLinear", q_out, dq_out, name + "_DequantizeLinear", sc.name,
                      zp.name, p["axis"])
        else:
            data = numpy_helper.to_array(init)
            codes = P.quantize_weight(data, p["qtype"], p["zero_point"], p["scale"], p["axis"])
            q = numpy_helper.from_array(codes.reshape(tuple(init.dims)), name + "_quantized")
            self.g.add_initializer(q)
            q_name = q.name
            self._add_nodes(helper.make_node("DequantizeLinear", [q.name, sc.name, zp.name], [dq_out],
                                             name + "_DequantizeLinear", axis=p["axis"], domain=self.domain))
        self.written[name] = _Written(q_name, sc.name, zp.name, p["axis"])
        self.report_weights.append(name)

    def _write_activation(self, name: str, scale: str, zp: str) -> None:
        readers = self.receivers.get(name, [])
        if self.o.opt("DedicatedQDQPair") and len(readers) > 1:
            for i, node in enumerate(readers):
                post = f"_{i + 1}"
                q_out = name + "_QuantizeLinear_Output" + post
                dq_out = name + "_DequantizeLinear_Output" + post
                self._qdq(name, q_out, name + "_QuantizeLinear" + post, q_out, dq_out,
                          name + "_DequantizeLinear" + post, scale, zp)
                for j, inp in enumerate(node.input):
                    if inp == name:
                        node.input[j] = dq_out
                if i == 0:
                    self.written[name] = _Written(dq_out, scale, zp)
            return
        q_in, dq_out = name, name + "_DequantizeLinear_Output"
        if self.g.is_graph_output(name):
            q_in, dq_out = name + "_QuantizeLinear_Input", name
            self.g.replace_output(name, q_in)
        else:
            self.g.replace_input(name, dq_out)
        q_out = name + "_QuantizeLinear_Output"
        self._qdq(q_in, q_out, name + "_QuantizeLinear", q_out, dq_out, name + "_DequantizeLinear", scale, zp)
        self.written[name] = _Written(dq_out, scale, zp)

    def _write_normal(self) -> None:
        for name, mark in list(self.marks.items()):
            if name in self.written:
                continue
            if mark.provider is None:
                if self.g.is_initializer(name):
                    self._write_initializer(name)
                else:
                    if name in self.producing_dq:
                        del self.marks[name]
                        continue
                    if name not in self.params:
                        raise UnsupportedError("calibration_data", "gives no range for a tensor that is to be "
                                               "quantized (onnxruntime fails here too)", name)
                    zp, sc = self.params[name]
                    sc_init, zp_init = scale_zp_initializers(name, zp, sc, P.QTYPES[self.act][1])
                    self.g.add_initializer(zp_init)
                    self.g.add_initializer(sc_init)
                    self._write_activation(name, sc_init.name, zp_init.name)
                del self.marks[name]

    def _write_shared(self) -> None:
        while self.marks:
            progressed = False
            for name, mark in list(self.marks.items()):
                provider = mark.provider
                if provider and provider[0] in self.written:
                    del self.marks[name]
                    progressed = True
                    source = self.written[provider[0]]
                    if self.g.is_initializer(name):
                        raise UnsupportedError("model", "an initializer that would share another tensor's "
                                               "quantization parameters", name)
                    if name in self.producing_dq:
                        raise ModelError("model", "a tensor already produced by a DequantizeLinear would share "
                                         "another tensor's quantization parameters", name)
                    self._write_activation(name, source.scale, source.zero_point)
            if not progressed:
                raise UnsupportedError("model", "tensors whose quantization parameters come from a tensor that is "
                                       "never quantized (onnxruntime does not finish on this graph)",
                                       sorted(self.marks))

    def _write_biases(self) -> None:
        for bias, info in self.biases.items():
            if bias in self.written:
                continue
            w = self.written.get(info.weight)
            x = self.written.get(info.input)
            w_scale = self._scale_of(info.weight, w)
            if w_scale is None:
                raise UnsupportedError("model", "a bias whose weight has no quantization scale", bias)
            x_scale = self._scale_of(info.input, x)
            if x_scale is None:
                raise UnsupportedError("model", "a bias whose input has no quantization scale", bias)
            data = self.g.array(bias)
            scale = P.bias_scale(x_scale, w_scale, info.beta)
            q_name, s_name, z_name, axis = write_bias(self.g, bias, P.quantize_bias(data, scale), scale, data.dtype)
            self.written[bias] = _Written(q_name, s_name, z_name, axis)
            self.g.remove_initializer(bias)
            self._add_nodes(helper.make_node("DequantizeLinear", [q_name, q_name + "_scale", q_name + "_zero_point"],
                                             [bias], bias + "_DequantizeLinear", axis=axis, domain=self.domain))
            self.report_weights.append(bias)

    def _scale_of(self, name: str, written: _Written | None):
        if written is not None:
            init = self.g.initializer(written.scale)
        else:
            dq = self.producing_dq.get(name)
            init = self.g.initializer(dq.input[1]) if dq is not None else None
        return None if init is None else numpy_helper.to_array(init)

    # -- driver ------------------------------------------------------------------------------------
    def run(self) -> dict:
        quantized_nodes = []
        for node in list(self.g.graph.node):
            if should_quantize(node, self.o):
                rule = QDQ_RULES.get(node.op_type, "base")
                getattr(self, "rule_" + rule)(node)
                quantized_nodes.append(node.name or node.op_type)
                for name in node.input:
                    self.receivers.setdefault(name, []).append(node)
            if node.op_type == "DequantizeLinear":
                for name in node.output:
                    self.producing_dq[name] = node
        self._initializer_params()
        self._raise_weight_scales()
        self._write_normal()
        self._write_shared()
        if self.o.opt("QuantizeBias"):
            self._write_biases()
        for node in self.removed:
            self.g.remove_node(node)
        if not self.o.opt("AddQDQPairToWeight"):
            self.g.clean_initializers()
        if self.domain:
            for opset in self.g.model.opset_import:
                if opset.domain == self.domain:
                    opset.version = 1
                    break
            else:
                self.g.model.opset_import.append(helper.make_opsetid(self.domain, 1))
        activations = sorted(n for n, w in self.written.items() if n not in self.report_weights)
        return {"nodes": quantized_nodes, "activations": activations, "weights": list(self.report_weights),
                "removed": [n.name or n.op_type for n in self.removed]}


def write_qdq(graph: Graph, ranges: dict[str, Range], options: StaticOptions) -> dict:
    if options.activation_type not in P.QTYPES or options.weight_type not in P.QTYPES:
        raise InvalidArgumentError("activation_type", "must be uint8, int8, uint16 or int16", options.activation_type)
    sixteen = options.activation_type.endswith("16") or options.weight_type.endswith("16")
    if sixteen and graph.opset is not None and graph.opset < 21:
        raise UnsupportedError("model_input", "16-bit types need opset 21 or later (onnxruntime converts the model "
                               "to opset 21 first, which is not reproduced)", graph.opset)
    return QDQWriter(graph, ranges, options).run()
