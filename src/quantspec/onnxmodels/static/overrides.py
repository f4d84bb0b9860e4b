"""``extra_options["TensorQuantOverrides"]``: the part reproduced, overrides of initializers, checked
against the model.

Accepted: ``{initializer: [dict]}`` (per tensor) or one dict per channel with ``"axis"`` in the first
(per channel; as many dicts as the weight has channels along the axis), each dict either an explicit
``"scale"`` and ``"zero_point"``, or any of ``"symmetric"``, ``"reduce_range"`` (bools, in the first
dict) and ``"rmin"`` with ``"rmax"`` (the range the parameters are computed from, per channel).
Refused (:class:`quantspec.errors.UnsupportedError`): the keys quant_type and convert, overrides of
activations or of biases.

onnxruntime reads the two formats' explicit scales differently, and the codes follow:

- QDQ (``qdq_quantizer._calc_initializer_quant_params``) casts the scale to the weight's dtype first,
  so the codes are ``round(float32(w) / float32(s))``, a float32 division;
- QOperator (``base_quantizer.quantize_initializer_impl`` and ``quantize_weight_per_channel_impl``)
  keeps the Python float as a float64 array, so the codes are ``round(float64(float32(w)) / s)``, a
  float64 division, while the scale written to the model is ``float32(s)``.

At a tie of the float32 quotient the two differ: ``w / s = -3.4999998`` in float64 is ``-3.5`` in
float32, so QOperator writes -3 and QDQ writes -4 (half to even).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import DTypeError, InvalidArgumentError, UnsupportedError

_KEYS = {"scale", "zero_point", "axis", "symmetric", "reduce_range", "rmin", "rmax"}
_NOT_WITH_SCALE = {"symmetric", "reduce_range", "rmin", "rmax"}
_BIAS_ROLES = {"Conv", "ConvTranspose", "Gemm", "InstanceNormalization", "LayerNormalization",
               "BatchNormalization"}


def check_structure(raw: Any) -> dict[str, list[dict]]:
    """The overrides' shape, without the model."""
    where = "extra_options['TensorQuantOverrides']"
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise DTypeError(where, "must be a dict tensor name -> list of dicts", raw)
    out = {}
    for name, entries in raw.items():
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise DTypeError(f"{where}[{name!r}]", "must be a list of dicts", entries)
        if not entries or not entries[0]:
            raise InvalidArgumentError(f"{where}[{name!r}]", "must hold at least one non-empty dict", entries)
        explicit = "scale" in entries[0] or "zero_point" in entries[0]
        ranged = "rmin" in entries[0] or "rmax" in entries[0]
        for i, entry in enumerate(entries):
            at = f"{where}[{name!r}][{i}]"
            extra = sorted(set(entry) - _KEYS)
            if extra:
                raise UnsupportedError(at, "only 'scale', 'zero_point', 'axis', 'symmetric', 'reduce_range', "
                                       "'rmin' and 'rmax' are reproduced", extra)
            if ("scale" in entry or "zero_point" in entry) != explicit:
                raise InvalidArgumentError(at, "every dict gives 'scale' and 'zero_point', or none does", entry)
            if explicit:
                if "scale" not in entry or "zero_point" not in entry:
                    raise InvalidArgumentError(at, "must give both 'scale' and 'zero_point'", entry)
                both = sorted(_NOT_WITH_SCALE & set(entry))
                if both:
                    raise InvalidArgumentError(at, "'scale' and 'zero_point' exclude these keys", both)
                if not isinstance(entry["scale"], (int, float)) or isinstance(entry["scale"], bool):
                    raise DTypeError(f"{at}['scale']", "must be a number", entry["scale"])
                if not isinstance(entry["zero_point"], (int, np.integer)) or isinstance(entry["zero_point"], bool):
                    raise DTypeError(f"{at}['zero_point']", "must be an integer", entry["zero_point"])
            if ("rmin" in entry or "rmax" in entry) != ranged or ranged and not ("rmin" in entry and "rmax" in entry):
                raise InvalidArgumentError(at, "every dict gives 'rmin' and 'rmax', or none does", entry)
            for key in ("rmin", "rmax"):
                if key in entry and (not isinstance(entry[key], (int, float)) or isinstance(entry[key], bool)):
                    raise DTypeError(f"{at}[{key!r}]", "must be a number", entry[key])
            for key in ("symmetric", "reduce_range"):
                if key in entry and not isinstance(entry[key], bool):
                    raise DTypeError(f"{at}[{key!r}]", "must be a bool", entry[key])
                if i and key in entry and entry[key] != entries[0].get(key):
                    raise InvalidArgumentError(at, f"'{key}' must be the first dict's", entry[key])
        axes = {e["axis"] for e in entries if "axis" in e}
        if len(entries) > 1 and "axis" not in entries[0]:
            raise InvalidArgumentError(f"{where}[{name!r}]", "per-channel overrides need 'axis' in the first dict",
                                       entries[0])
        if len(axes) > 1:
            raise InvalidArgumentError(f"{where}[{name!r}]", "must give one axis", sorted(axes))
        out[name] = entries
    return out


class Overrides:
    """The checked overrides of one model."""

    def __init__(self, raw: dict[str, list[dict]], graph, qtype_range):
        self.entries = raw
        where = "extra_options['TensorQuantOverrides']"
        for name, entries in raw.items():
            init = graph.original_initializers.get(name)
            if init is None:
                raise UnsupportedError(f"{where}[{name!r}]", "overrides of activations (tensors that are not "
                                       "initializers) are not reproduced", name)
            for node in graph.graph.node:
                if node.op_type in _BIAS_ROLES and len(node.input) > 2 and node.input[2] == name:
                    raise UnsupportedError(f"{where}[{name!r}]", "overrides of a bias are not reproduced "
                                           f"(the bias of {node.op_type} node {node.name!r})", name)
            if "axis" in entries[0]:
                rank = len(init.dims)
                axis = entries[0]["axis"]
                norm = axis + rank if axis < 0 else axis
                if not 0 <= norm < rank:
                    raise InvalidArgumentError(f"{where}[{name!r}][0]['axis']", f"must be in [-{rank}, {rank - 1}]",
                                               axis)
                if len(entries) != init.dims[norm]:
                    raise UnsupportedError(f"{where}[{name!r}]", f"needs one dict per channel ({init.dims[norm]} "
                                           f"along axis {axis})", len(entries))
            elif len(entries) != 1:
                raise InvalidArgumentError(f"{where}[{name!r}]", "per-tensor overrides are one dict", len(entries))
        self._range = qtype_range

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    def per_channel(self, name: str) -> bool:
        return name in self.entries and "axis" in self.entries[name][0]

    def per_tensor(self, name: str) -> bool:
        return name in self.entries and "axis" not in self.entries[name][0]

    def axis(self, name: str, rank: int) -> int:
        axis = self.entries[name][0]["axis"]
        return axis + rank if axis < 0 else axis

    def explicit(self, name: str) -> bool:
        """Explicit scales and zero points (else symmetric / reduce_range / rmin-rmax options)."""
        return name in self.entries and "scale" in self.entries[name][0]

    def get(self, name: str, key: str, default=None):
        """A key of the first dict (the tensor-wide options)."""
        return self.entries[name][0].get(key, default) if name in self.entries else default

    def ranges(self, name: str):
        """``(rmin, rmax)`` per tensor, a list of them per channel, or None."""
        entries = self.entries.get(name)
        if not entries or "rmin" not in entries[0]:
            return None
        pairs = [(e["rmin"], e["rmax"]) for e in entries]
        return pairs if "axis" in entries[0] else pairs[0]

    def zero_point(self, name: str, qtype: str, index: int = 0) -> np.ndarray:
        value = self.entries[name][index]["zero_point"]
        lo, hi, dtype = self._range(qtype)
        if not lo <= int(value) <= hi:
            raise InvalidArgumentError(f"extra_options['TensorQuantOverrides'][{name!r}][{index}]['zero_point']",
                                       f"must be in [{lo}, {hi}] for {qtype}", value)
        return np.array(value, dtype=dtype)

    def scale(self, name: str, index: int = 0, dtype=None) -> np.ndarray:
        """The scale as onnxruntime holds it: cast to ``dtype`` (QDQ), or a float64 array (QOperator)."""
        value = self.entries[name][index]["scale"]
        return np.array(value) if dtype is None else np.array(value, dtype=dtype)
