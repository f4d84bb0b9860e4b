"""Running a .tflite model on quantspec's kernels: :class:`Interpreter`.

The interpreter does what LiteRT's does with the reference kernels (``OpResolverType.BUILTIN_REF``,
the oracle of the tests), in the same two phases:

- **prepare**, once, when the interpreter is made: every operator of the main subgraph gets its
  kernel from :data:`quantspec.litert.OPS` and the kernel's ``prepare`` sees each tensor's shape,
  type, quantization parameters and, for constants, data (a
  :class:`~quantspec.litert.kernels.base.TensorSpec`), and the operator's options as the loader
  reads them (a snake_case mapping, :class:`~quantspec.litert.model.Operator`);
- **run**, per call: operators execute in the order the model lists them (LiteRT's execution plan
  is that order; the converter writes it topologically), each ``compute`` a function of the
  prepared record and the input arrays.

Models with float inputs or outputs run as LiteRT runs them: the QUANTIZE and DEQUANTIZE operators
the converter puts at the edges are kernels like any other.  The interpreter runs the main subgraph
(subgraph 0), each operator prepared with the tensor shapes stored in the model.  LiteRT computes
the shapes itself; so where an operator computes another shape or type for its output than the model
stores (a wrong stored shape, a shape from a run-time tensor such as RESHAPE's shape or PAD's
paddings, ARG_MAX's ``output_type``), the output takes the computed one and the operators that read
it are prepared again for it.  An operator without a kernel, a variable or sparse tensor, an input
of the wrong shape or type, or a missing input is a clear :mod:`quantspec.errors` error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._core import fast as core
from .._core import jit
from .._core.arrays import from_foreign
from .._core.threads import blas_on_caller
from ..errors import InvalidArgumentError, ModelError, QuantSpecError, ShapeError, DTypeError, UnsupportedError
from .model import Model, Operator, Tensor, load_model

__all__ = ["Interpreter", "SUM_SEMANTICS"]

#: the two behaviours of int8 SUM: the correct integer result, or LiteRT's
#: reference kernel, which reads int8 data as uint8
SUM_SEMANTICS = ("correct", "reference")


def _kernels():
    from .kernels import OPS

    return OPS


def _with_context(e: QuantSpecError, where: str) -> QuantSpecError:
    """The same error class, its argument prefixed with where it happened."""
    arg = f"{where}: {e.argument}" if e.argument else where
    try:
        new = type(e)(arg, e.rule, e.value if e.value is not None else ...)
    except Exception:  # pragma: no cover - every quantspec error takes (argument, rule, value)
        return e
    return new


def _too_big(e: Exception, op: Operator, specs: Sequence[Any]) -> None:
    """A kernel that could not get the memory its tensors ask for (a damaged or hostile model that
    declares huge shapes, sizes or paddings): a ModelError naming the operator and its shapes.
    Returns for any other error (the caller re-raises it)."""
    if isinstance(e, ValueError) and "too big" not in str(e) and "maximum supported dimension" not in str(e):
        return
    shapes = [list(t.shape) for t in specs if t is not None]
    raise ModelError(f"operator {op.index} ({op.name})", "needs more memory than this machine can give it: the "
                     "model's shapes, sizes or paddings ask for tensors that large (a damaged model?)", shapes,
                     detail=f"{type(e).__name__}: {e}") from None


#: inside a model, the fast kernels run in parallel from this many elements (a tensor of a mobile
#: model is far smaller: measured on a busy 2-core machine, a converter-made MobileNetV2 ran 6x
#: faster with its kernels serial than with the thread pool woken for each of its larger tensors)
SERIAL_IN_MODELS = 1 << 20
#: ... and take the numpy reference path (the same bytes) below this many elements: a model's
#: smallest tensors (its input of a few thousand values, its output of ten) would each compile a
#: kernel (about a second, once per machine) to save a few microseconds a run
REFERENCE_IN_MODELS = 1 << 12


class Interpreter:
    """Run a LiteRT model on quantspec's int8 kernels, byte-identical to LiteRT ``BUILTIN_REF``.

    ``Interpreter(model)`` accepts a path, the model's bytes or a loaded
    :class:`~quantspec.litert.model.Model`, and prepares every operator.  ``sum_semantics``
    chooses the int8 SUM behaviour: ``"correct"`` (default) or ``"reference"`` (the LiteRT
    reference kernel's uint8 reading, to reproduce BUILTIN_REF exactly).

    ``run(inputs)`` takes the inputs as a list in the model's input order, a dict keyed by input
    tensor name (or by signature input name), or a single array for a one-input model, and returns
    the list of output arrays in the model's output order.
    """

    def __init__(self, model: Any, *, sum_semantics: str = "correct"):
        if sum_semantics not in SUM_SEMANTICS:
            raise InvalidArgumentError("sum_semantics", "must be one of " + ", ".join(map(repr, SUM_SEMANTICS)),
                                       sum_semantics)
        self.model: Model = load_model(model)
        self.sum_semantics = sum_semantics
        sg = self.model.main
        ops = _kernels()
        missing = sorted({op.name for op in sg.operators if op.name not in ops})
        if missing:
            raise UnsupportedError("model", "uses operators that quantspec has no kernel for", missing,
                                   detail="kernels exist for: " + ", ".join(sorted(ops)))
        for t in sg.tensors:
            self._check_tensor(t)
        self._specs = [self._spec(t) for t in sg.tensors]
        # every operator input must exist before the operator runs: a model input, a constant, or
        # the output of an earlier operator (LiteRT runs the operators in the order listed)
        available = set(sg.inputs) | {t.index for t in sg.tensors if t.data is not None}
        for op in sg.operators:
            for i in op.inputs:
                if i >= 0 and i not in available:
                    raise ModelError(f"operator {op.index} ({op.name}) input tensor {i} ({sg.tensors[i].name!r})",
                                     "is neither a model input, a constant nor the output of an earlier operator")
            available.update(op.outputs)
        for i in sg.outputs:
            if i not in available:
                raise ModelError(f"model output tensor {i} ({sg.tensors[i].name!r})",
                                 "is neither a model input, a constant nor the output of an operator")
        self._prepared: list[tuple[Operator, Any, Any]] = []
        self._options: list[dict] = []
        # operators prepared again for tensors whose shape or type a run found different from the
        # model's (see run), keyed by operator and those tensors' shapes and types
        self._again: dict[tuple, Any] = {}
        for op in sg.operators:
            kernel = ops[op.name]
            options = dict(op.options)
            if op.name == "SUM":
                options["quantspec_sum_semantics"] = sum_semantics
            where = f"operator {op.index} ({op.name})"
            for i in (*op.inputs, *op.outputs):
                if i >= 0 and self._specs[i] is None:
                    t = sg.tensors[i]
                    raise UnsupportedError(f"{where} tensor {i} ({t.name!r})",
                                           "has a type quantspec's kernels do not compute with", t.type_name)
            self._options.append(options)
            self._prepared.append((op, kernel, self._prepare(op, kernel, options, self._specs)))
        # after its last use, an intermediate tensor's array is dropped
        last_use: dict[int, int] = {}
        for k, op in enumerate(sg.operators):
            for i in op.inputs:
                if i >= 0:
                    last_use[i] = k
        keep = set(sg.outputs) | set(sg.inputs)
        self._release = [[i for i in set(op.inputs) if i >= 0 and last_use.get(i) == k and i not in keep
                          and sg.tensors[i].data is None] for k, op in enumerate(sg.operators)]

    # -- model description ---------------------------------------------------------------------
    @property
    def inputs(self) -> list[Tensor]:
        """The model's input tensors, in order."""
        return [self.model.tensors[i] for i in self.model.inputs]

    @property
    def outputs(self) -> list[Tensor]:
        """The model's output tensors, in order."""
        return [self.model.tensors[i] for i in self.model.outputs]

    def __repr__(self) -> str:
        ins = ", ".join(f"{t.name}: {t.type_name.lower()}{list(t.shape)}" for t in self.inputs)
        outs = ", ".join(f"{t.name}: {t.type_name.lower()}{list(t.shape)}" for t in self.outputs)
        return f"<quantspec LiteRT Interpreter: {len(self._prepared)} operators; inputs ({ins}) -> outputs ({outs})>"

    # -- preparation helpers -------------------------------------------------------------------
    @staticmethod
    def _prepare(op: Operator, kernel: Any, options: dict, specs: Any) -> Any:
        """``kernel.prepare`` for ``op`` with the tensor specs ``specs`` (indexable by tensor)."""
        inputs = [None if i < 0 else specs[i] for i in op.inputs]
        outputs = [specs[i] for i in op.outputs]
        try:
            return kernel.prepare(inputs, outputs, options)
        except QuantSpecError as e:
            raise _with_context(e, f"operator {op.index} ({op.name})") from None
        except (MemoryError, ValueError) as e:
            _too_big(e, op, inputs + outputs)
            raise

    @staticmethod
    def _check_tensor(t: Tensor) -> None:
        where = f"tensor {t.index} ({t.name!r})"
        if t.is_variable:
            raise UnsupportedError(where, "is a variable tensor; quantspec's interpreter runs stateless models only")
        if t.sparse:
            raise UnsupportedError(where, "is a sparse tensor; quantspec's interpreter reads dense tensors only")
        if t.quantization is not None and t.quantization.scale.size and t.params is None:
            raise ModelError(where, "has quantization parameters LiteRT refuses to load "
                             "(run quantspec.litert.check_model for the details)")

    @staticmethod
    def _spec(t: Tensor):
        from .kernels.base import TensorSpec

        if t.dtype is None:
            return None
        return TensorSpec(shape=tuple(t.shape), dtype=t.dtype, params=t.params, data=t.data, name=t.name)

    # -- running -------------------------------------------------------------------------------
    def _input_list(self, inputs: Any) -> list[np.ndarray]:
        model = self.model
        n = len(model.inputs)
        if isinstance(inputs, np.ndarray):
            if n != 1:
                raise InvalidArgumentError("inputs", f"must hold {n} arrays (the model has {n} inputs), "
                                           "as a list or a dict by name; got one array")
            return [inputs]
        if isinstance(inputs, Mapping):
            names: dict[str, int] = {}
            for pos, i in enumerate(model.inputs):
                names[model.tensors[i].name] = pos
            for sd in model.signature_defs:
                if sd.subgraph_index == 0:
                    for name, i in sd.inputs.items():
                        if i in model.inputs:
                            names.setdefault(name, list(model.inputs).index(i))
            unknown = [k for k in inputs if k not in names]
            if unknown:
                raise InvalidArgumentError("inputs", "names no input of the model", unknown[0],
                                           detail="inputs: " + ", ".join(repr(t.name) for t in self.inputs))
            out: list[np.ndarray | None] = [None] * n
            for k, v in inputs.items():
                pos = names[k]
                if out[pos] is not None:
                    raise InvalidArgumentError("inputs", "gives the same input twice (by two names)", k)
                out[pos] = v
            missing = [self.inputs[p].name for p in range(n) if out[p] is None]
            if missing:
                raise InvalidArgumentError("inputs", "lacks an input of the model", missing[0],
                                           detail="inputs: " + ", ".join(repr(t.name) for t in self.inputs))
            return out  # type: ignore[return-value]
        if isinstance(inputs, Sequence) and not isinstance(inputs, (str, bytes)):
            if len(inputs) != n:
                raise InvalidArgumentError("inputs", f"must hold {n} arrays, one per model input", len(inputs),
                                           detail="inputs: " + ", ".join(repr(t.name) for t in self.inputs))
            return list(inputs)
        raise InvalidArgumentError("inputs", "must be a list of arrays in model order, a dict by input name, "
                                   "or one array", type(inputs).__name__)

    def run(self, inputs: Any) -> list[np.ndarray]:
        """Run the model; return its outputs (fresh arrays) in the model's output order."""
        if not jit.enabled():
            return self._run(inputs)
        # one busy thread: the int8 GEMMs on BLAS's calling thread (BLAS's idle workers would spin
        # against the fast kernels' threads: quantspec._core.threads), and the fast kernels serial
        # below SERIAL_IN_MODELS elements
        with blas_on_caller(), core.serial_below(SERIAL_IN_MODELS), core.reference_below(REFERENCE_IN_MODELS):
            return self._run(inputs)

    def _run(self, inputs: Any) -> list[np.ndarray]:
        inputs = from_foreign(inputs)        # one torch / JAX array (a list or dict: each entry, below)
        model = self.model
        sg = model.main
        arrays: dict[int, np.ndarray] = {}
        for t in sg.tensors:
            if t.data is not None:
                arrays[t.index] = t.data
        for pos, (i, x) in enumerate(zip(model.inputs, self._input_list(inputs))):
            x = from_foreign(x)
            t = sg.tensors[i]
            where = f"inputs[{pos}] ({t.name!r})"
            if not isinstance(x, np.ndarray):
                if np.isscalar(x) or isinstance(x, (list, tuple)):
                    raise DTypeError(where, f"must be a numpy array of dtype {t.dtype.dtype}", type(x).__name__)
                raise DTypeError(where, "must be a numpy array", type(x).__name__)
            if x.dtype != t.dtype.dtype:
                raise DTypeError(where, f"must have dtype {t.dtype.dtype}, the type of model input {t.index}",
                                 str(x.dtype))
            if tuple(x.shape) != tuple(t.shape):
                raise ShapeError(where, f"must have shape {list(t.shape)}, the shape of model input {t.index}",
                                 list(x.shape))
            arrays[i] = x
        # tensors whose shape or type differs from the model's in this run: LiteRT computes every
        # output's shape (and, for ops such as ARG_MAX, its type) itself, when it prepares the op or,
        # where the shape depends on a run-time tensor (RESHAPE's shape, PAD's paddings, ...), when
        # it runs it, and prepares the ops that read it again; so does this interpreter
        changed: dict[int, Any] = {}
        for k, (op, kernel, prepared) in enumerate(self._prepared):
            if changed and any(i in changed for i in op.inputs):
                prepared = self._prepared_again(k, changed)
            ins = [None if i < 0 else arrays[i] for i in op.inputs]
            try:
                outs = kernel.compute(prepared, ins)
            except QuantSpecError as e:
                raise _with_context(e, f"operator {op.index} ({op.name})") from None
            except (MemoryError, ValueError) as e:
                _too_big(e, op, [None if i < 0 else self._specs[i] for i in (*op.inputs, *op.outputs)])
                raise
            if len(outs) != len(op.outputs):  # pragma: no cover - a kernel bug
                raise RuntimeError(f"quantspec kernel {op.name} returned {len(outs)} outputs for operator {op.index}, "
                                   f"which has {len(op.outputs)}")
            for i, y in zip(op.outputs, outs):
                t = sg.tensors[i]
                y = np.asarray(y)
                if y.shape != tuple(t.shape) or (t.dtype is not None and y.dtype != t.dtype.dtype):
                    changed[i] = self._actual(t, y)
                else:
                    changed.pop(i, None)
                arrays[i] = y
            for i in self._release[k]:
                arrays.pop(i, None)
        return [np.array(arrays[i], copy=True) for i in model.outputs]

    __call__ = run

    def _actual(self, t: Tensor, y: np.ndarray):
        """The spec of tensor ``t`` as an operator computed it (``y``): its shape and type."""
        from ..dtypes import qtype
        from .kernels.base import TensorSpec

        dtype = t.dtype if t.dtype is not None and y.dtype == t.dtype.dtype else qtype(y.dtype)
        return TensorSpec(shape=tuple(y.shape), dtype=dtype, params=t.params, data=None, name=t.name)

    def _prepared_again(self, k: int, changed: dict[int, Any]) -> Any:
        """Operator ``k`` prepared for the changed specs of its inputs (kept for the next run)."""
        op, kernel, _ = self._prepared[k]
        key = (k, *((i, changed[i].shape, changed[i].dtype.name) for i in op.inputs if i in changed))
        hit = self._again.get(key)
        if hit is None:
            specs = {i: changed.get(i, self._specs[i]) for i in (*op.inputs, *op.outputs) if i >= 0}
            hit = self._again[key] = self._prepare(op, kernel, self._options[k], specs)
        return hit
