"""The QOperator writer: quantized operators (QLinearConv, QLinearMatMul, com.microsoft QGemm,
QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearGlobalAveragePool,
QLinearAveragePool, QLinearSoftmax, QLinearConcat, QLinearWhere), 8-bit pass-through of the
data-movement ops (MaxPool, Reshape, Squeeze, Unsqueeze, Flatten, Transpose, Split, Pad, Resize,
Gather, ArgMax), QuantizeLinear where
a float tensor enters a quantized operator and DequantizeLinear where a quantized tensor leaves one,
as onnxruntime 1.31.1's ``ONNXQuantizer`` (QLinearOps mode) writes them.

The nodes are visited in order; each quantized node's rule (:data:`registry.QOPERATOR_RULES`) emits
its replacement, a node that is not quantized is kept with DequantizeLinear nodes in front of its
quantized inputs.  Quantized values are named ``{tensor}_quantized`` with ``{tensor}_scale`` /
``{tensor}_zero_point``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import helper, numpy_helper

from ...errors import UnsupportedError
from . import params as P
from .graph import Graph, scale_zp_initializers, write_bias
from .options import StaticOptions
from .overrides import Overrides
from .registry import QOPERATOR_RULES
from .selection import Range, adjust_ranges, should_quantize

MS = "com.microsoft"


@dataclass
class _Value:
    q_name: str
    scale: str
    zero_point: str
    axis: int | None = None
    initializer: bool = False


def _flat(values) -> list:
    """An array, or a list of 0-d arrays, as a flat list of Python numbers."""
    return (np.hstack(values) if isinstance(values, list) else np.asarray(values)).reshape(-1).tolist()


def _attrs(node, skip=()) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name not in skip}


class QOperatorWriter:
    def __init__(self, graph: Graph, ranges: dict[str, Range], options: StaticOptions):
        self.g = graph
        self.o = options
        self.act = options.activation_type
        self.wt = options.weight_type
        self.act_num = P.QTYPES[self.act][1]
        self.min_real_range = options.opt("MinimumRealRange")
        adjust_ranges(graph, ranges, options)
        self.params = P.activation_table(ranges, options)
        self.values: dict[str, _Value] = {}
        self.new_nodes: list = []
        self.tensor_names = {o.name for o in graph.graph.output} | {i.name for i in graph.graph.input}
        self.tensor_names |= {o for n in graph.graph.node for o in n.output}
        inits = {t.name for t in graph.graph.initializer}
        self.generated = {i.name for i in graph.graph.input if i.name not in inits}
        self.quantized_nodes: list[str] = []
        self.weights: list[str] = []
        self._by_name: dict | None = None
        self.overrides = Overrides(options.opt("TensorQuantOverrides") or {}, graph, P.full_range)
        self._indexed = 0

    # -- parameters --------------------------------------------------------------------------------
    def _output_params(self, name: str, use_scale=None, use_zero_point=None):
        """Write ``{name}_scale`` / ``{name}_zero_point`` from the calibrated range (or the given pair);
        None when the tensor has no range."""
        if name not in self.params:
            return None
        zp, sc = self.params[name]
        zp_type = self.act_num
        if use_scale is None or use_zero_point is None:
            zp_values = np.array([zp])
            sc_values = np.array([sc])
        else:
            zp_values = np.array([use_zero_point])
            sc_values = np.array([use_scale]).astype(sc.dtype)
        sc_init, zp_init = scale_zp_initializers(name, zp_values, sc_values, zp_type, shape=[])
        self.g.add_initializer(zp_init)
        self.g.add_initializer(sc_init)
        return sc_init.name, zp_init.name

    def _weight_symmetric(self, qtype: str) -> bool:
        return self.o.weight_symmetric(qtype) if qtype == self.wt else self.o.activation_symmetric

    def _quantize_initializer(self, name: str, qtype: str, reduce_range: bool) -> _Value:
        if name in self.values:
            return self.values[name]
        init = self.g.initializer(name)
        data = numpy_helper.to_array(init)
        ov = self.overrides
        if ov.per_channel(name):
            raise UnsupportedError("extra_options['TensorQuantOverrides']", "per-channel overrides of a tensor "
                                   "quantized per tensor here (onnxruntime fails on them)", name)
        if ov.explicit(name):
            # onnxruntime keeps the explicit scale as a float64 array: the codes divide in float64
            zp, sc = ov.zero_point(name, qtype), ov.scale(name)
        else:
            lo, hi = ov.ranges(name) or (None, None)
            zp, sc = P.data_params(data.reshape(-1), qtype, ov.get(name, "symmetric", self._weight_symmetric(qtype)),
                                   ov.get(name, "reduce_range", self.o.reduce_range and reduce_range),
                                   self.min_real_range, lo, hi)
        self._write_weight(init, data, qtype, zp, sc, None)
        self.values[name] = _Value(name + "_quantized", name + "_scale", name + "_zero_point", None, True)
        return self.values[name]

    def _quantize_per_channel(self, name: str, qtype: str, axis: int, reduce_range: bool = True) -> _Value:
        if name in self.values:
            return self.values[name]
        init = self.g.initializer(name)
        data = numpy_helper.to_array(init)
        rank = data.ndim
        norm = axis + rank if axis < 0 else axis
        if not 0 <= norm < rank:
            raise UnsupportedError("per_channel", f"the channel axis {axis} is outside the weight's rank {rank}", name)
        ov = self.overrides
        if name in ov and (not ov.per_channel(name) or ov.axis(name, rank) != norm):
            raise UnsupportedError("extra_options['TensorQuantOverrides']", f"needs per-channel overrides on "
                                   f"axis {norm} for this weight (onnxruntime fails on others)", name)
        if ov.explicit(name):
            zp = [ov.zero_point(name, qtype, i) for i in range(data.shape[norm])]
            sc = [ov.scale(name, i) for i in range(data.shape[norm])]
        else:
            zp, sc = P.weight_params(data, qtype, ov.get(name, "symmetric", self.o.weight_symmetric(qtype)),
                                     ov.get(name, "reduce_range", self.o.reduce_range and reduce_range),
                                     self.min_real_range, norm, ov.ranges(name))
        self._write_weight(init, data, qtype, zp, sc, norm)
        self.values[name] = _Value(name + "_quantized", name + "_scale", name + "_zero_point", norm, True)
        return self.values[name]

    def _write_weight(self, init, data, qtype, zp, sc, axis) -> None:
        """``sc`` / ``zp``: arrays, or per channel lists of 0-d arrays (explicit float64 scales kept apart)."""
        shape = [] if axis is None else [init.dims[axis]]
        sc_init = helper.make_tensor(init.name + "_scale", init.data_type, shape, _flat(sc))
        zp_init = helper.make_tensor(init.name + "_zero_point", P.QTYPES[qtype][1], shape, _flat(zp))
        self.g.append_initializer(sc_init)
        self.g.append_initializer(zp_init)
        codes = P.quantize_weight(data, qtype, zp, sc, axis)
        self.g.append_initializer(numpy_helper.from_array(codes.reshape(tuple(init.dims)),
                                                                init.name + "_quantized"))
        self.weights.append(init.name)

    def _find_node(self, name: str):
        """The first node of that name among the model's nodes, then the nodes written so far."""
        if self._by_name is None:
            self._by_name = {}
            for node in self.g.graph.node:
                self._by_name.setdefault(node.name, node)
        for node in self.new_nodes[self._indexed:]:
            self._by_name.setdefault(node.name, node)
        self._indexed = len(self.new_nodes)
        return self._by_name.get(name)

    def _quantize_inputs(self, node, indices, weight: bool = False, reduce_range: bool = False,
                         per_channel_here: bool = False, axis: int = -1):
        """(quantized names, zero points, scales, new nodes), or None when an input has no range."""
        names, zps, scales, nodes = [], [], [], []
        for index in indices:
            tensor = node.input[index]
            if tensor in self.values:
                v = self.values[tensor]
                names.append(v.q_name)
                zps.append(v.zero_point)
                scales.append(v.scale)
                continue
            if not tensor:
                names.append("")
                zps.append("")
                scales.append("")
                continue
            init = self.g.initializer(tensor)
            if init is not None:
                qtype = self.wt if weight else self.act
                if self.o.per_channel and per_channel_here:
                    v = self._quantize_per_channel(tensor, qtype, axis, reduce_range)
                else:
                    v = self._quantize_initializer(tensor, qtype, reduce_range)
                names.append(v.q_name)
                zps.append(v.zero_point)
                scales.append(v.scale)
            elif tensor in self.g.value_infos or tensor in self.tensor_names or tensor in self.generated:
                q_node = self._find_node(tensor + "_QuantizeLinear")
                if q_node is None:
                    written = self._output_params(tensor)
                    if written is None:
                        return None
                    sc_name, zp_name = written
                    q_node = helper.make_node("QuantizeLinear", [tensor, sc_name, zp_name], [tensor + "_quantized"],
                                              tensor + "_QuantizeLinear")
                    self.values[tensor] = _Value(tensor + "_quantized", sc_name, zp_name)
                    nodes.append(q_node)
                names.append(q_node.output[0])
                scales.append(q_node.input[1])
                zps.append(q_node.input[2])
            else:
                raise UnsupportedError("model", "a node input that is neither an initializer nor a tensor of the "
                                       "graph", tensor)
        return names, zps, scales, nodes

    def _dequantize(self, name: str):
        if name in self.values and name not in self.generated:
            v = self.values[name]
            dq_name = name + "_DequantizeLinear"
            if self._find_node(dq_name) is None:
                return helper.make_node("DequantizeLinear", [v.q_name, v.scale, v.zero_point], [name], dq_name,
                                        axis=v.axis)
        return None

    def _emit(self, nodes) -> None:
        self.new_nodes.extend(nodes)

    # -- rules -------------------------------------------------------------------------------------
    def keep(self, node) -> None:
        for name in node.input:
            dq = self._dequantize(name)
            if dq is not None:
                self.new_nodes.append(dq)
        self.new_nodes.append(node)

    def _should(self, node, rule: str) -> bool:
        if rule in ("matmul", "gemm"):
            if not (self.g.is_float(node.input[1]) or self.g.is_float(node.input[0])):
                return False
            if self.o.opt("MatMulConstBOnly") and not self.g.is_initializer(node.input[1]):
                return False
            return True
        if rule == "gather":
            return self.g.is_float_initializer(node.input[0])
        return self.g.is_float(node.input[0])

    def _result(self, node, op_type, inputs, out_params, nodes, domain=None, attrs=None) -> None:
        q_out = node.output[0] + "_quantized"
        name = node.name + "_quant" if node.name else ""
        kwargs = dict(attrs or {})
        if domain:
            kwargs["domain"] = domain
        nodes.append(helper.make_node(op_type, inputs, [q_out], name, **kwargs))
        self.values[node.output[0]] = _Value(q_out, out_params[0], out_params[1])
        self._emit(nodes)
        self.quantized_nodes.append(node.name or node.op_type)

    def rule_conv(self, node) -> None:
        out = self._output_params(node.output[0])
        if self.g.is_initializer(node.input[1]) and self.o.per_channel:
            got = self._quantize_inputs(node, [0])
            if got is not None:
                w = self._quantize_per_channel(node.input[1], "int8", 0)
                got[0].append(w.q_name)
                got[1].append(w.zero_point)
                got[2].append(w.scale)
        else:
            got = self._combine(self._quantize_inputs(node, [0]),
                                lambda: self._quantize_inputs(node, [1], weight=True, reduce_range=self.o.reduce_range))
        if out is None or got is None:
            return self.keep(node)
        names, zps, scales, nodes = got
        inputs = [names[0], scales[0], zps[0], names[1], scales[1], zps[1], out[0], out[1]]
        if len(node.input) == 3:
            inputs.append(self._quantize_bias(node.input[2], node.input[0], node.input[1]))
        self._result(node, "QLinearConv", inputs, out, nodes, attrs=_attrs(node))

    def _combine(self, first, second_fn):
        if first is None:
            return None
        second = second_fn()
        if second is None:
            return None
        return (first[0] + second[0], first[1] + second[1], first[2] + second[2], first[3] + second[3])

    def rule_matmul(self, node) -> None:
        got = self._combine(self._quantize_inputs(node, [0]),
                            lambda: self._quantize_inputs(node, [1], weight=True, reduce_range=True,
                                                          per_channel_here=True))
        out = self._output_params(node.output[0])
        if out is None or got is None:
            return self.keep(node)
        names, zps, scales, nodes = got
        inputs = [names[0], scales[0], zps[0], names[1], scales[1], zps[1], out[0], out[1]]
        self._result(node, "QLinearMatMul", inputs, out, nodes)

    def rule_gemm(self, node) -> None:
        out = self._output_params(node.output[0])
        attrs = _attrs(node)
        trans_b = attrs.get("transB", 0) > 0
        if self.g.is_initializer(node.input[1]) and self.o.per_channel:
            got = self._quantize_inputs(node, [0])
            if got is not None:
                w = self._quantize_per_channel(node.input[1], self.wt, 0 if trans_b else 1)
                got[0].append(w.q_name)
                got[1].append(w.zero_point)
                got[2].append(w.scale)
        else:
            got = self._combine(self._quantize_inputs(node, [0]),
                                lambda: self._quantize_inputs(node, [1], weight=True, reduce_range=self.o.reduce_range))
        if out is None or got is None:
            return self.keep(node)
        bias = ""
        if len(node.input) == 3:
            if not self.g.is_initializer(node.input[2]):
                return self.keep(node)
            bias = self._quantize_bias(node.input[2], node.input[0], node.input[1], attrs.get("beta", 1.0))
        names, zps, scales, nodes = got
        inputs = [names[0], scales[0], zps[0], names[1], scales[1], zps[1], bias, out[0], out[1]]
        self._result(node, "QGemm", inputs, out, nodes, MS, _attrs(node, skip=("beta",)))

    def _quantize_bias(self, bias: str, input_name: str, weight: str, beta: float = 1.0) -> str:
        if bias in self.values:
            return self.values[bias].q_name
        wv = self.values[weight]
        w_scale = numpy_helper.to_array(self.g.initializer(wv.scale))
        if input_name in self.values:
            in_scale_name = self.values[input_name].scale
        elif input_name in self.params:
            in_scale_name = self._output_params(input_name)[0]
        else:
            raise UnsupportedError("model", "a bias whose input has no quantization parameters", bias)
        in_scale = numpy_helper.to_array(self.g.initializer(in_scale_name))
        zp_init = self.g.initializer(wv.zero_point)
        w_zp = numpy_helper.to_array(zp_init) if zp_init is not None else None
        if w_zp is not None and w_zp.size and not w_zp.any() and self.wt == "int8":
            new = P.raise_weight_scale_for_bias(self.g.array(bias), in_scale, w_scale, self.o.per_channel)
            if new is not None:
                self._requantize(weight, new)
                w_scale = new
        data = self.g.array(bias)
        scale = P.bias_scale(in_scale, w_scale, beta)
        q_name, s_name, z_name, axis = write_bias(self.g, bias, P.quantize_bias(data, scale), scale, data.dtype)
        self.values[bias] = _Value(q_name, s_name, z_name, axis, True)
        self.weights.append(bias)
        return q_name

    def _requantize(self, weight: str, new_scale: np.ndarray) -> None:
        v = self.values[weight]
        init = self.g.initializer(weight)
        sc_init = self.g.initializer(v.scale)
        zp_init = self.g.initializer(v.zero_point)
        if init is None or sc_init is None or zp_init is None or self.g.initializer(v.q_name) is None:
            return
        dims = list(sc_init.dims)
        self.g.remove_initializer(v.scale)
        self.g.remove_initializer(v.q_name)
        zp = numpy_helper.to_array(zp_init)
        scale = np.asarray(new_scale, dtype=helper.tensor_dtype_to_np_dtype(init.data_type))
        self.g.add_initializer(numpy_helper.from_array(scale.reshape(dims), v.scale))
        data = numpy_helper.to_array(init)
        codes = P.quantize_weight(data, self.wt, zp, scale, v.axis)
        self.g.add_initializer(numpy_helper.from_array(codes.reshape(tuple(init.dims)), v.q_name))

    def rule_binary(self, node) -> None:
        out = self._output_params(node.output[0])
        got = self._quantize_inputs(node, [0, 1])
        if out is None or got is None:
            return self.keep(node)
        names, zps, scales, nodes = got
        inputs = [names[0], scales[0], zps[0], names[1], scales[1], zps[1], out[0], out[1]]
        self._result(node, "QLinear" + node.op_type, inputs, out, nodes, MS, _attrs(node))

    def rule_clip_relu(self, node) -> None:
        if node.input[0] not in self.values or self.o.activation_symmetric:
            return self.keep(node)
        self.values[node.output[0]] = self.values[node.input[0]]
        self.quantized_nodes.append(node.name or node.op_type)

    def rule_activation(self, node) -> None:
        nnapi = node.op_type == "Sigmoid" and self.o.opt("extra.Sigmoid.nnapi")
        out = self._output_params(node.output[0], 1 / 256.0 if nnapi else None, 0 if nnapi else None)
        got = self._quantize_inputs(node, [0])
        if out is None or got is None:
            return self.keep(node)
        names, zps, scales, nodes = got
        inputs = [names[0], scales[0], zps[0], out[0], out[1]]
        self._result(node, "QLinear" + node.op_type, inputs, out, nodes, MS, _attrs(node))

    def rule_softmax(self, node) -> None:
        zero = 0 if self.act == "uint8" else -128
        out = self._output_params(node.output[0], 1 / 256.0, zero)
        got = self._quantize_inputs(node, [0])
        if out is None or got is None:
            return self.keep(node)
        names, zps, scales, nodes = got
        attrs = _attrs(node)
        attrs["opset"] = self.g.opset
        inputs = [names[0], scales[0], zps[0], out[0], out[1]]
        self._result(node, "QLinearSoftmax", inputs, out, nodes, MS, attrs)

    def rule_pool(self, node) -> None:
        out = self._output_params(node.output[0])
        got = self._quantize_inputs(node, [0])
        if out is None or got is None:
            return self.keep(node)
        names, zps, scales, nodes = got
        inputs = [names[0], scales[0], zps[0], out[0], out[1]]
        self._result(node, "QLinear" + node.op_type, inputs, out, nodes, MS, _attrs(node))

    def rule_global_average_pool(self, node) -> None:
        if node.input[0] not in self.values:
            return self.keep(node)
        v = self.values[node.input[0]]
        out = self._output_params(node.output[0]) or (v.scale, v.zero_point)
        attrs = _attrs(node)
        attrs["channels_last"] = 0
        inputs = [v.q_name, v.scale, v.zero_point, out[0], out[1]]
        self._result(node, "QLinearGlobalAveragePool", inputs, out, [], MS, attrs)

    def rule_direct(self, node) -> None:
        if self.o.opt("ForceQuantizeNoInputCheck"):
            if not self.g.is_float_initializer(node.input[0]):
                return self.keep(node)
            got = self._quantize_inputs(node, [0])
            if got is None:
                return self.keep(node)
            names, zps, scales, nodes = got
            source = _Value(names[0], scales[0], zps[0])
        else:
            v = self.values.get(node.input[0])
            if v is None:
                self.new_nodes.append(node)
                return
            source, nodes = v, []
        q_out = node.output[0] + "_quantized"
        self.values[node.output[0]] = _Value(q_out, source.scale, source.zero_point)
        node.input[0] = source.q_name
        node.output[0] = q_out
        nodes.append(node)
        self._emit(nodes)
        self.quantized_nodes.append(node.name or node.op_type)

    def rule_maxpool(self, node) -> None:
        if self.g.opset is not None and self.g.opset < 12:
            return self.keep(node)
        return self.rule_direct(node)

    def rule_gather(self, node) -> None:
        got = self._quantize_inputs(node, [0])
        if got is None:
            return self.keep(node)
        names, zps, scales, nodes = got
        q_out = node.output[0] + "_quantized"
        self.values[node.output[0]] = _Value(q_out, scales[0], zps[0])
        node.output[0] = q_out
        node.input[0] = names[0]
        nodes.append(node)
        self._emit(nodes)
        self.quantized_nodes.append(node.name or node.op_type)

    def rule_concat(self, node) -> None:
        out = self._output_params(node.output[0])
        got = self._quantize_inputs(node, list(range(len(node.input))))
        if out is None or got is None:
            return self.keep(node)
        names, zps, scales, nodes = got
        inputs = [out[0], out[1]]
        for i in range(len(names)):
            inputs += [names[i], scales[i], zps[i]]
        self._result(node, "QLinearConcat", inputs, out, nodes, MS, _attrs(node))

    def rule_split(self, node) -> None:
        got = self._quantize_inputs(node, [0])
        if got is None:
            return self.keep(node)
        names, zps, scales, nodes = got
        outputs = []
        for out in node.output:
            q_out = out + "quantized"  # onnxruntime's name for Split outputs has no underscore
            outputs.append(q_out)
            self.values[out] = _Value(q_out, scales[0], zps[0])
        inputs = [names[0]] + list(node.input[1:])
        nodes.append(helper.make_node(node.op_type, inputs, outputs, node.name + "_quant" if node.name else "",
                                      **_attrs(node)))
        self._emit(nodes)
        self.quantized_nodes.append(node.name or node.op_type)

    def rule_argmax(self, node) -> None:
        v = self.values.get(node.input[0])
        if v is not None:
            node.input[0] = v.q_name
            self.quantized_nodes.append(node.name or node.op_type)
        self.new_nodes.append(node)

    def rule_resize(self, node) -> None:
        if self.g.opset is not None and self.g.opset < 11:
            return self.keep(node)
        return self.rule_direct(node)

    def rule_where(self, node) -> None:
        """onnxruntime takes every Where here (excluded or not, whatever its op type list): without
        ForceQuantizeNoInputCheck the node is kept as it is, with no DequantizeLinear in front."""
        if not self.o.opt("ForceQuantizeNoInputCheck"):
            self.new_nodes.append(node)
            return
        out = self._output_params(node.output[0])
        got = self._quantize_inputs(node, [1, 2])
        if out is None or got is None:
            return self.keep(node)
        names, zps, scales, nodes = got
        inputs = [node.input[0], names[0], scales[0], zps[0], names[1], scales[1], zps[1], out[0], out[1]]
        self._result(node, "QLinearWhere", inputs, out, nodes, MS, _attrs(node))

    def rule_pad(self, node) -> None:
        if (self.g.opset is not None and self.g.opset < 11) or node.input[0] not in self.values:
            return self.keep(node)
        v = self.values[node.input[0]]
        attrs = _attrs(node)
        if attrs.get("mode", b"constant") == b"constant":
            if len(node.input) > 2 and node.input[2] != "":
                zp_init, sc_init = self.g.initializer(v.zero_point), self.g.initializer(v.scale)
                if zp_init is None or sc_init is None:
                    return self.keep(node)
                const = self.g.initializer(node.input[2])
                if const is not None:
                    zp_arr, sc_arr = numpy_helper.to_array(zp_init), numpy_helper.to_array(sc_init)
                    zp_value = zp_arr.item() if zp_arr.ndim == 0 else zp_arr[0]
                    sc_value = sc_arr.item() if sc_arr.ndim == 0 else sc_arr[0]
                    codes = P.quantize_values(numpy_helper.to_array(const), self.act, sc_value, zp_value)
                    q_name = node.input[2] + "_quantized"
                    self.g.remove_initializer(node.input[2])
                    self.g.add_initializer(numpy_helper.from_array(codes, q_name))
                    node.input[2] = q_name
                else:
                    tensor = node.input[2]
                    q_node = helper.make_node("QuantizeLinear", [tensor, v.scale, v.zero_point],
                                              [tensor + "_quantized"], tensor + "_QuantizeLinear")
                    self.values[tensor] = _Value(tensor + "_quantized", v.scale, v.zero_point)
                    self.new_nodes.append(q_node)
                    node.input[2] = q_node.output[0]
            elif len(node.input) == 2:
                node.input.append(v.zero_point)
            else:
                node.input[2] = v.zero_point
        q_out = node.output[0] + "_quantized"
        self.values[node.output[0]] = _Value(q_out, v.scale, v.zero_point)
        node.input[0] = v.q_name
        node.output[0] = q_out
        self.new_nodes.append(node)
        self.quantized_nodes.append(node.name or node.op_type)

    def rule_unsupported(self, node) -> None:
        raise UnsupportedError("op_types_to_quantize", f"onnxruntime quantizes {node.op_type} in the QOperator "
                               "format, which is not reproduced; exclude the node (nodes_to_exclude) or its op type",
                               f"{node.op_type} node {node.name!r}")

    # -- driver ------------------------------------------------------------------------------------
    def run(self) -> dict:
        for node in list(self.g.graph.node):
            before = len(self.new_nodes)
            rule = QOPERATOR_RULES.get(node.op_type)
            if rule == "where" or (rule is not None and should_quantize(node, self.o) and self._should(node, rule)):
                getattr(self, "rule_" + rule)(node)
            else:
                self.keep(node)
            for new in self.new_nodes[before:]:
                self.generated.update(new.output)
        for out in self.g.graph.output:
            dq = self._dequantize(out.name)
            if dq is not None:
                self.new_nodes.append(dq)
        self.g.graph.ClearField("node")
        self.g.graph.node.extend(self.new_nodes)
        has_ms = any(o.domain == MS for o in self.g.model.opset_import)
        if not has_ms and any(n.domain == MS for n in self.new_nodes):
            self.g.model.opset_import.append(helper.make_opsetid(MS, 1))
        missing = self.g.clean_initializers()
        if missing:
            raise UnsupportedError("model", "onnxruntime's QOperator writer leaves these tensors without a producer "
                                   "(a node it keeps reads a float tensor whose producer it quantized) and refuses "
                                   "the model", sorted(missing))
        activations = sorted(n for n, v in self.values.items() if not v.initializer)
        return {"nodes": self.quantized_nodes, "activations": activations, "weights": list(self.weights),
                "removed": []}


def write_qoperator(graph: Graph, ranges: dict[str, Range], options: StaticOptions) -> dict:
    return QOperatorWriter(graph, ranges, options).run()
