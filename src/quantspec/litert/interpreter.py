"""Running a .tflite model on quantspec's kernels: :class:`Interpreter`.

The interpreter does what LiteRT's does with the reference kernels (``OpResolverType.BUILTIN_REF``,
the oracle of the tests), in the same two phases:

- **prepare**, once, when the interpreter is made: every operator of the subgraph it runs gets its
  kernel from :data:`quantspec.litert.OPS` and the kernel's ``prepare`` sees each tensor's shape,
  type, quantization parameters and, for constants, data (a
  :class:`~quantspec.litert.kernels.base.TensorSpec`), and the operator's options as the loader
  reads them (a snake_case mapping, :class:`~quantspec.litert.model.Operator`);
- **run**, per call: operators execute in the order the model lists them (LiteRT's execution plan
  is that order; the converter writes it topologically), each ``compute`` a function of the
  prepared record and the input arrays.

Models with float inputs or outputs run as LiteRT runs them: the QUANTIZE and DEQUANTIZE operators
the converter puts at the edges are kernels like any other.  The interpreter runs subgraph 0, or
the subgraph of the signature it is given (``signature=``); the control-flow operators (WHILE, IF,
CALL_ONCE) run the subgraphs they name, each prepared once, when the operator is.  Each operator is
prepared with the tensor shapes stored in the model.  LiteRT computes the shapes itself; so where an
operator computes another shape or type for its output than the model stores (a wrong stored shape,
a shape from a run-time tensor such as RESHAPE's shape or PAD's paddings, ARG_MAX's
``output_type``), the output takes the computed one and the operators that read it are prepared
again for it.  An operator without a kernel, a variable or sparse tensor, an input of the wrong
shape or type, or a missing input is a clear :mod:`quantspec.errors` error.

Like LiteRT's ``InterpreterBuilder``, the interpreter resolves every operator code of the model
before it prepares anything, against the operator versions the chosen mode's LiteRT resolver
registers (:mod:`quantspec.litert._opversions`: ``REFERENCE_VERSIONS`` for the reference kernels,
``VERSIONS`` for the optimized kernels and the XNNPACK mode, whose delegate takes operators only
after the builtin resolver has resolved them all): a code whose version that resolver has no kernel
for (TILE version 3 under ``BUILTIN_REF``), an operator LiteRT has no kernel for, or a custom
operator is refused with the rule ``litert-load``, even where no operator uses the code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._fastpath import runner as core
from .._fastpath import jit
from .._semantics.arrays import from_foreign
from .._fastpath import threads
from ..errors import AxisError, DTypeError, InvalidArgumentError, ModelError, QuantSpecError, ShapeError, UnsupportedError
from ..versions import note_reproducing
from .model import Model, Operator, SignatureDef, Subgraph, Tensor, load_model
from .regions import Deopt

__all__ = ["Interpreter", "SUM_SEMANTICS", "CONTROL_FLOW"]

#: the two behaviours of int8 SUM: the correct integer result, or LiteRT's
#: reference kernel, which reads int8 data as uint8
SUM_SEMANTICS = ("correct", "reference")


def _jitted():
    from .kernels import OPS

    return OPS


def _with_context(e: QuantSpecError, where: str) -> QuantSpecError:
    """The same error class, its argument prefixed with where it happened."""
    arg = f"{where}: {e.argument}" if e.argument else where
    try:
        new = type(e)(arg, e.rule, e.value if e.value is not None else ...)
    except Exception:  # pragma: no cover - every quantspec error takes (argument, rule, value)
        return e
    if getattr(e, "limit", None) is not None:     # the LiteRT limit the error reports (optable.LIMITS)
        new.limit = e.limit
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
#: on the fast path, operators run their run plans (:mod:`quantspec.litert.plans`) where they have
#: one; False runs every kernel's own compute (the same bytes; for comparisons)
PLANS = True
#: ... and take the numpy reference path (the same bytes) below this many elements: a model's
#: smallest tensors (its input of a few thousand values, its output of ten) would each compile a
#: kernel (about a second, once per machine) to save a few microseconds a run
REFERENCE_IN_MODELS = 1 << 12
#: on the fast path, runs of operators on one-byte codes run as fused regions
#: (:mod:`quantspec.litert.regions`) where intermediate tensors need not be kept; False keeps one
#: program entry per plan (the same bytes; for comparisons)
REGIONS = True


class _Graph:
    """One subgraph, prepared: its operators' kernels and prepared records, and how to run it."""

    def __init__(self, interp: "Interpreter", sg: Subgraph):
        self.sg = sg
        self.where = "" if sg.index == interp._entry else f"subgraph {sg.index} ({sg.name!r}) "
        ops = interp._kernel_table()
        missing = sorted({op.name for op in sg.operators if op.name not in ops})
        if missing:
            raise UnsupportedError(f"{self.where}model".strip(), "uses operators that quantspec has no kernel for",
                                   missing, detail="kernels exist for: " + ", ".join(sorted(ops)))
        for t in sg.tensors:
            _check_tensor(t)
        _check_memory(sg, self.where)
        self.specs = [tensor_spec(t) for t in sg.tensors]
        # every operator input must exist before the operator runs: a subgraph input, a constant, or
        # the output of an earlier operator (LiteRT runs the operators in the order listed)
        available = set(sg.inputs) | {t.index for t in sg.tensors if t.data is not None}
        for op in sg.operators:
            for i in op.inputs:
                if i >= 0 and i not in available:
                    raise ModelError(f"{self.where}operator {op.index} ({op.name}) input tensor {i} "
                                     f"({sg.tensors[i].name!r})",
                                     "is neither a model input, a constant nor the output of an earlier operator")
            available.update(op.outputs)
        for i in sg.outputs:
            if i not in available:
                raise ModelError(f"{self.where}model output tensor {i} ({sg.tensors[i].name!r})",
                                 "is neither a model input, a constant nor the output of an operator")
        self.prepared: list[tuple[Operator, Any, Any]] = []
        self.options: list[dict] = []
        self.engines: list[str] = []
        # operators prepared again for tensors whose shape or type a run found different from the
        # model's (see run), keyed by operator and those tensors' shapes and types
        self.again: dict[tuple, Any] = {}
        from .kernels.modes import kernel_options, select

        for op in sg.operators:
            options = dict(op.options)
            try:
                kernel, engine = select(interp.kernels, op.name, [None if i < 0 else self.specs[i] for i in op.inputs],
                                        [self.specs[i] for i in op.outputs], options)
            except QuantSpecError as e:
                raise _with_context(e, f"{self.where}operator {op.index} ({op.name})") from None
            if engine != "reference":
                options.update(kernel_options(op.name, interp.num_threads))
            self.engines.append(engine)
            if op.name == "SUM" and engine == "reference":
                options["quantspec_sum_semantics"] = interp.sum_semantics
            if op.name in CONTROL_FLOW:
                options["quantspec_subgraph"] = interp._graph
            if op.name in STATEFUL:
                options["quantspec_state"] = interp._state
            where = f"{self.where}operator {op.index} ({op.name})"
            for i in (*op.inputs, *op.outputs):
                if i >= 0 and self.specs[i] is None:
                    t = sg.tensors[i]
                    raise UnsupportedError(f"{where} tensor {i} ({t.name!r})",
                                           "has a type quantspec's kernels do not compute with", t.type_name)
            self.options.append(options)
            try:
                prepared = prepare_operator(op, kernel, options, self.specs, self.where)
            except (ShapeError, AxisError) as e:
                # a model with dynamic dimensions stores 1 for each of them (shape_signature -1), so
                # the stored shapes of the tensors computed from them need not agree with each other
                # (a [-1] concatenation of three [-1] tensors is stored [1]); LiteRT computes every
                # shape when it prepares, and so does a run here: the operator is prepared on the
                # shapes the run gives it, and the error stands where they agree with the stored ones
                if not any(i >= 0 and _dynamic(sg.tensors[i]) for i in (*op.inputs, *op.outputs)):
                    raise
                prepared = Deferred(e)
                self.programmable = False
            self.prepared.append((op, kernel, prepared))
        # after its last use, an intermediate tensor's array is dropped (unless all are kept)
        last_use: dict[int, int] = {}
        for k, op in enumerate(sg.operators):
            for i in op.inputs:
                if i >= 0:
                    last_use[i] = k
        keep = set(sg.outputs) | set(sg.inputs)
        self.release = [[i for i in set(op.inputs) if i >= 0 and last_use.get(i) == k and i not in keep
                         and sg.tensors[i].data is None] for k, op in enumerate(sg.operators)]
        self.constants = {t.index: t.data for t in sg.tensors if t.data is not None}
        # per operator, what run needs without attribute lookups: its inputs, and its outputs with the
        # shape and numpy type the model stores for them
        self.steps = [(k, op, kernel, prepared, tuple(op.inputs),
                       tuple((i, tuple(sg.tensors[i].shape),
                              None if sg.tensors[i].dtype is None else sg.tensors[i].dtype.dtype) for i in op.outputs),
                       self.release[k], -1)
                      for k, (op, kernel, prepared) in enumerate(self.prepared)]
        self.planned: list | None = None          # the steps with their run plans (made on first use)
        # a program of one region over the graph's inputs: (its compute, its outputs' order in the
        # graph's, the graph's input and output tensors); Interpreter.run calls it directly
        self.solo: tuple | None = None
        # ... and where it reads one input and makes one output, its direct call (regions.Direct)
        self.direct = None
        # the run loop of the fast path (:meth:`_run_program`), made from the planned steps once a run
        # has checked the plans' outputs; never for a graph whose operators keep state or run other
        # subgraphs (the program may run a graph a second time, on the loop above, when it finds a
        # tensor whose shape or type differs from the model's), nor for one holding a tensor of a
        # type without a numpy one
        self.program: list | None = None
        self.blas = True        # whether a run of the program may call BLAS (see Interpreter.run)
        self.program_ops: list[int] = []
        self.fold = not interp.preserve_all_tensors       # tables folded into one (see _make_program)
        self.programmable = not any(op.name in CONTROL_FLOW or op.name in STATEFUL for op in sg.operators) \
            and all(t.dtype is not None for t in sg.tensors) \
            and not any(isinstance(p, Deferred) for _, _, p in self.prepared)
        # the program's tensor slots before a run: the constants in place, one slot more at the end,
        # always None, for the absent optional inputs (tensor index -1)
        self.template: list = [None] * (len(sg.tensors) + 1)
        for i, data in self.constants.items():
            self.template[i] = data

    def plan_steps(self) -> list:
        """The steps with each operator's run plan in place of its kernel where it has one
        (:mod:`quantspec.litert.plans`: the same bytes, less work per call); made once."""
        if self.planned is None:
            from . import plans
            from .kernels.base import REGISTRY

            steps = []
            for step in self.steps:
                k, op, kernel, prepared = step[:4]
                plan = None
                if kernel is REGISTRY.get(op.name) and not isinstance(prepared, Deferred):   # plans: the reference kernels
                    plan = plans.make(op.name, kernel, prepared, [None if i < 0 else self.specs[i] for i in op.inputs],
                                      [self.specs[i] for i in op.outputs], self.options[k])
                    if plan is not None:                 # a 1x1 convolution of few pixels: modeplans.few_rows
                        from . import modeplans

                        plan = modeplans.few_rows(plan)
                elif self.engines[k] != "reference" and not isinstance(prepared, Deferred):   # the modes' kernels
                    from . import modeplans

                    plan = modeplans.make(op.name, kernel, prepared,
                                          [None if i < 0 else self.specs[i] for i in op.inputs],
                                          [self.specs[i] for i in op.outputs], self.options[k])
                steps.append(step if plan is None else (k, op, plan, None, *step[4:]))
            self.planned = steps
        return self.planned

    def run(self, inputs: Sequence[np.ndarray], keep_all: bool = False, fast: bool | None = None
            ) -> tuple[list[np.ndarray], Any]:
        """Run on ``inputs`` (arrays in the subgraph's input order, already checked); returns the
        output arrays (not copied) and the arrays of the tensors still held (a dict by tensor index,
        or a list indexed by it whose entry is None for a tensor not held).  ``fast``: whether the
        fast path is on, where the caller has just asked (:func:`quantspec._fastpath.jit.enabled`)."""
        if self.program is not None:
            if PLANS and (jit.enabled() if fast is None else fast):
                done = self._run_program(inputs, keep_all)
                if done is not None:
                    return done
        elif self.programmable and self.planned is not None and PLANS and jit.enabled():
            self.program = self._make_program()
            done = self._run_program(inputs, keep_all)
            if done is not None:
                return done
        return self._run_steps(inputs, keep_all)

    def _make_program(self) -> list:
        """The planned steps as the fast run loop takes them, one tuple per operator: the function to
        call, its prepared record, its input tensors, and either the one output tensor of a plan whose
        output a run has seen with the model's shape and type (known: a plan computes the same shapes
        on every run) and None, or -1 and the outputs' indices, shapes and numpy types to check; and
        the tensors to release after it."""
        from . import plans

        program: list = []
        kernels: list = []
        names: list = []
        where: list = []                            # per entry, the operator it runs (errors name it)
        producer: dict[int, int] = {}               # tensor -> the program entry that writes it
        readers: dict[int, int] = {}
        for op in self.sg.operators:
            for i in set(op.inputs):
                readers[i] = readers.get(i, 0) + 1
        ends = set(self.sg.outputs)
        for k, op, kernel, prepared, op_inputs, op_outputs, release, known in self.planned:
            if known >= 0:
                # a table after a table, the tensor between them read by nothing else: one table
                # (plans.fold; not where every tensor is kept)
                t = op_inputs[0] if len(op_inputs) == 1 else -1
                j = producer.get(t)
                if j is not None and self.fold and readers.get(t) == 1 and t not in ends:
                    fused = plans.fold(kernels[j], kernel)
                    if fused is not None:
                        _, _, inputs_j, _, _, release_j = program[j]
                        program[j] = (fused.compute, None, inputs_j, known, None,
                                      tuple(i for i in (*release_j, *release) if i != t))
                        kernels[j] = fused
                        producer[known] = j
                        if getattr(fused, "second", None) is not None:
                            where[j] = k            # only the folded operator can fail: errors name it
                        continue
                # a pair table whose input is the output of a pair table read by nothing else: one
                # pass over the three inputs, here (plans.chain; the first's entry is dropped)
                if len(op_inputs) == 2 and op_inputs[0] != op_inputs[1] and self.fold:
                    for tpos in (0, 1):
                        t, z = op_inputs[tpos], op_inputs[1 - tpos]
                        j = producer.get(t)
                        if j is None or readers.get(t) != 1 or t in ends or z < 0:
                            continue
                        _, _, inputs_j, _, _, release_j = program[j]
                        # the first's inputs must still be held here: none released in between
                        if any(i in entry[5] for entry in program[j + 1:] if entry is not None for i in inputs_j):
                            continue
                        shapes = [tuple(self.specs[i].shape) for i in (*inputs_j, z)]
                        fused = plans.chain(kernels[j], kernel, tpos, shapes)
                        both = (*inputs_j, z)
                        if fused is None and tuple(inputs_j) == (z,) and len(set(shapes)) == 1:
                            # x and a table of x (a swish): one table of x (modeplans.self_pair)
                            from . import modeplans

                            fused, both = modeplans.self_pair(kernels[j], kernel, tpos), (z,)
                        if fused is None:
                            continue
                        program[j] = None
                        del producer[t]
                        kernel, prepared = fused, None
                        op_inputs = both
                        release = tuple(i for i in (*release_j, *release) if i != t)
                        break
                producer[known] = len(program)
                program.append((kernel.compute, prepared, op_inputs, known, None, tuple(release)))
            else:
                program.append((kernel.compute, prepared, op_inputs, -1, op_outputs, tuple(release)))
            kernels.append(kernel)
            names.append(op.name)
            where.append(k)
        kept = [n for n, entry in enumerate(program) if entry is not None]
        self.blas = not all(isinstance(kernels[n], plans.NO_BLAS) or names[n] in MOVES for n in kept)
        program, kernels, where = [program[n] for n in kept], [kernels[n] for n in kept], [where[n] for n in kept]
        if self.fold and REGIONS:
            # runs of plans on one-byte codes: one compiled call each (regions; the same bytes)
            from . import regions

            program, kernels, where = regions.fuse(program, kernels, where, self.specs, self.template,
                                                   set(self.sg.outputs))
            self.blas = not all(isinstance(kernel, (*plans.NO_BLAS, regions.RegionPlan))
                                or self.sg.operators[k].name in MOVES for kernel, k in zip(kernels, where))
        self.program_ops = where
        # a program that is one region reading the model's inputs and making all its outputs: the
        # interpreter's run calls the region itself (Interpreter._run_solo)
        self.solo = self.direct = None
        if len(program) == 1 and self.fold and REGIONS:
            from . import regions

            region = kernels[0]
            ext, outs = (region.ops if isinstance(region, regions.RegionPlan) else ((), ()))
            sg = self.sg
            if tuple(ext) == tuple(sg.inputs) and len(set(sg.inputs)) == len(sg.inputs) \
                    and len(set(sg.outputs)) == len(sg.outputs) and set(outs) == set(sg.outputs):
                self.solo = (region.compute, tuple(list(outs).index(i) for i in sg.outputs), tuple(sg.inputs),
                             tuple(sg.outputs))
                if len(sg.inputs) == 1 and len(sg.outputs) == 1:
                    self.direct = regions.direct(region, sg.inputs[0], sg.outputs[0])
        return program

    def _run_program(self, inputs: Sequence[np.ndarray], keep_all: bool):
        """The fast run loop: the program's operators one after the other on a list of tensor slots,
        no check where the program knows the output.  None where an operator's output differs from
        the model's shape or type (the program is dropped; the caller runs the graph on the loop that
        prepares operators again for such tensors)."""
        slots = self.template.copy()
        for i, x in zip(self.sg.inputs, inputs):
            slots[i] = x
        k = 0
        try:
            for compute, prepared, op_inputs, out, checks, release in self.program:
                outs = compute(prepared, [slots[i] for i in op_inputs])
                if checks is None:
                    slots[out] = outs[0]
                else:
                    if len(outs) != len(checks):
                        self.program = self.solo = self.direct = None
                        self.programmable = False
                        self.blas = True
                        return None
                    for (i, shape, dtype), y in zip(checks, outs):
                        if type(y) is not np.ndarray or y.shape != shape or y.dtype != dtype:
                            self.program = self.solo = self.direct = None
                            self.programmable = False
                            self.blas = True
                            return None
                        slots[i] = y
                if release and not keep_all:
                    for i in release:
                        slots[i] = None
                k += 1
        except Deopt:
            # a fused region met a case one of its operators leaves to its kernel (which raises as
            # LiteRT fails): this call runs operator by operator
            return self._run_steps(inputs, keep_all)
        except QuantSpecError as e:
            op = self.sg.operators[self.program_ops[k]]
            raise _with_context(e, f"{self.where}operator {op.index} ({op.name})") from None
        except (MemoryError, ValueError) as e:
            op = self.sg.operators[self.program_ops[k]]
            _too_big(e, op, [None if i < 0 else self.specs[i] for i in (*op.inputs, *op.outputs)])
            raise
        return [slots[i] for i in self.sg.outputs], slots

    def _run_steps(self, inputs: Sequence[np.ndarray], keep_all: bool = False,
                   changed: dict[int, Any] | None = None) -> tuple[list[np.ndarray], dict]:
        """The run loop of the reference path, and of the fast path until a run has checked the plans'
        outputs or where an operator's input differs from the model's shape or type."""
        sg = self.sg
        arrays: dict[int, Any] = dict(self.constants)
        arrays[-1] = None                             # an absent optional input
        for i, x in zip(sg.inputs, inputs):
            arrays[i] = x
        # tensors whose shape or type differs from the model's in this run: LiteRT computes every
        # output's shape (and, for ops such as ARG_MAX, its type) itself, when it prepares the op or,
        # where the shape depends on a run-time tensor (RESHAPE's shape, PAD's paddings, ...), when
        # it runs it, and prepares the ops that read it again; so does this interpreter
        changed = dict(changed or {})
        planned = PLANS and jit.enabled()
        steps = self.plan_steps() if planned else self.steps
        for k, op, kernel, prepared, op_inputs, op_outputs, release, known in steps:
            ins = [arrays[i] for i in op_inputs]
            if (changed and any(i in changed for i in op_inputs)) or type(prepared) is Deferred:
                _check_working_memory(op, ins, self.where)
                kernel = self.prepared[k][1]              # the kernel itself: a plan is for the model's shapes
                prepared = self._prepared_again(k, changed)
                known = -1
            try:
                outs = kernel.compute(prepared, ins)
            except QuantSpecError as e:
                raise _with_context(e, f"{self.where}operator {op.index} ({op.name})") from None
            except (MemoryError, ValueError) as e:
                _too_big(e, op, [None if i < 0 else self.specs[i] for i in (*op.inputs, *op.outputs)])
                raise
            if known >= 0:
                # a plan whose one output was seen with the model's shape and type: a plan computes the
                # same shapes on every run (it runs only on the inputs' model shapes)
                arrays[known] = outs[0]
                if changed:
                    changed.pop(known, None)
            else:
                self._outputs(k, op, outs, op_outputs, arrays, changed, planned and prepared is None)
            if release and not keep_all:
                for i in release:
                    arrays.pop(i, None)
            if changed:
                _check_live_memory(op, arrays, self.constants, self.where)
        del arrays[-1]
        return [arrays[i] for i in sg.outputs], arrays

    def _outputs(self, k: int, op: Operator, outs, op_outputs, arrays: dict, changed: dict, plan: bool) -> None:
        """Store an operator's outputs, noting those whose shape or type differs from the model's; a
        plan's step whose one output has the model's shape and type is marked so (``known``)."""
        if len(outs) != len(op_outputs):  # pragma: no cover - a kernel bug
            raise RuntimeError(f"quantspec kernel {op.name} returned {len(outs)} outputs for operator {op.index}, "
                               f"which has {len(op_outputs)}")
        same = True
        for (i, shape, dtype), y in zip(op_outputs, outs):
            if type(y) is not np.ndarray:
                y = np.asarray(y)
                same = False
            if y.shape != shape or (dtype is not None and y.dtype != dtype):
                changed[i] = _actual(self.sg.tensors[i], y)
                same = False
            elif changed:
                changed.pop(i, None)
            arrays[i] = y
        if plan and same and len(op_outputs) == 1 and self.planned is not None and self.planned[k][3] is None:
            self.planned[k] = (*self.planned[k][:7], op_outputs[0][0])

    def _prepared_again(self, k: int, changed: dict[int, Any]) -> Any:
        """Operator ``k`` prepared for the changed specs of its inputs (kept for the next run)."""
        op, kernel, _ = self.prepared[k]
        key = (k, *((i, changed[i].shape, changed[i].dtype.name) for i in op.inputs if i in changed))
        hit = self.again.get(key)
        if hit is None:
            specs = {i: changed.get(i, self.specs[i]) for i in (*op.inputs, *op.outputs) if i >= 0}
            hit = self.again[key] = prepare_operator(op, kernel, self.options[k], specs, self.where)
        return hit


#: operators whose reference kernels only move or copy data (no BLAS call)
MOVES = frozenset({"CONCATENATION", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE", "GATHER", "PAD", "PADV2",
                   "SLICE", "STRIDED_SLICE", "SPLIT", "SPLIT_V", "PACK", "UNPACK", "SHAPE"})
#: operators that run other subgraphs (their kernels get ``options["quantspec_subgraph"]``, a
#: function from a subgraph index to its prepared graph)
CONTROL_FLOW = frozenset({"WHILE", "IF", "CALL_ONCE"})
#: operators that use the interpreter's resource variables (``options["quantspec_state"]``)
STATEFUL = frozenset({"CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"})


class Deferred:
    """The prepared record of an operator whose stored tensor shapes (of a model with dynamic
    dimensions) do not agree: every run prepares it on the shapes it computes."""

    __slots__ = ("error",)

    def __init__(self, error: Exception):
        self.error = error


def _dynamic(t: Tensor) -> bool:
    return t.shape_signature is not None and -1 in t.shape_signature


def prepare_operator(op: Operator, kernel: Any, options: dict, specs: Any, where: str = "") -> Any:
    """``kernel.prepare`` for ``op`` with the tensor specs ``specs`` (indexable by tensor)."""
    inputs = [None if i < 0 else specs[i] for i in op.inputs]
    outputs = [specs[i] for i in op.outputs]
    try:
        return kernel.prepare(inputs, outputs, options)
    except QuantSpecError as e:
        raise _with_context(e, f"{where}operator {op.index} ({op.name})") from None
    except (MemoryError, ValueError) as e:
        _too_big(e, op, inputs + outputs)
        raise


#: bytes of working memory the reference kernels may take per element of an operator's inputs (their
#: int64 working arrays: a few of 8 bytes per element)
WORK_BYTES = 32


def _check_working_memory(op: Operator, ins: Sequence[Any], where: str) -> None:
    """An operator whose inputs a run made larger than the model declares (shapes computed from
    run-time data: PAD's paddings, RESHAPE's shape, ... of a damaged model) is refused before it runs
    where its working arrays would pass this machine's memory, which the system would answer by
    killing the process rather than by an error."""
    from .._semantics.arrays import human_bytes, memory_limit

    elements = sum(int(a.size) for a in ins if isinstance(a, np.ndarray))
    need = elements * WORK_BYTES
    if need > memory_limit():
        raise ModelError(f"{where}operator {op.index} ({op.name})", f"needs about {need} bytes ({human_bytes(need)}) of "
                         f"working memory for inputs of {elements} elements that this run's data made larger than "
                         f"the model declares, more than this machine's memory ({human_bytes(memory_limit())})",
                         [list(a.shape) for a in ins if isinstance(a, np.ndarray)])


def _check_live_memory(op: Operator, arrays: Mapping[int, Any], constants: Mapping[int, Any], where: str) -> None:
    """After an operator of a run whose data grew tensors past the model's shapes: the tensors this
    run computed and still holds (not the model's constants, which the file holds) must fit in half
    this machine's memory, leaving room for the next operator's working arrays (a chain of operators
    each growing a tensor would otherwise fill it)."""
    from .._semantics.arrays import human_bytes, memory_limit

    live = sum(a.nbytes for i, a in arrays.items() if isinstance(a, np.ndarray) and i not in constants)
    if live * 2 > memory_limit():
        raise ModelError(f"{where}operator {op.index} ({op.name})", f"leaves this run holding {live} bytes "
                         f"({human_bytes(live)}) of tensors that the run's data made larger than the model declares, more "
                         f"than half this machine's memory ({human_bytes(memory_limit())})", live)


def _check_operator_codes(model: Model, mode: str) -> None:
    """Refuse an operator code ``mode``'s LiteRT resolver cannot resolve, as LiteRT's
    ``InterpreterBuilder`` does when it loads the model ("Didn't find op for builtin opcode 'TILE'
    version '3'"): every code counts, used or not."""
    from ._opversions import REFERENCE_VERSIONS, VERSIONS

    table = REFERENCE_VERSIONS if mode == "reference" else VERSIONS
    resolver = "BUILTIN_REF" if mode == "reference" else "the builtin op resolver"
    for k, (name, version) in enumerate(model.operator_codes):
        where = f"operator code {k} ({name} version {version})"
        if name.startswith("CUSTOM"):
            raise UnsupportedError(where, "is a custom operator LiteRT has no kernel for unless an application "
                                   "registers one: LiteRT refuses to load the model (rule litert-load)")
        span = table.get(name)
        if span is None:
            raise UnsupportedError(where, "names an operator LiteRT has no kernel for: LiteRT refuses to load "
                                   "the model (rule litert-load)")
        if not span[0] <= version <= span[1]:
            raise UnsupportedError(where, f"has a version {resolver} ({mode} kernels) registers no kernel for: "
                                   "LiteRT refuses to load the model (rule litert-load)", version,
                                   detail=f"{name} versions {span[0]} to {span[1]}")


def _check_tensor(t: Tensor) -> None:
    where = f"tensor {t.index} ({t.name!r})"
    if t.is_variable:
        raise UnsupportedError(where, "is a variable tensor; quantspec's interpreter runs stateless models only")
    if t.sparse:
        raise UnsupportedError(where, "is a sparse tensor; quantspec's interpreter reads dense tensors only")
    if t.quantization is not None and t.quantization.scale.size and t.params is None:
        raise ModelError(where, "has quantization parameters LiteRT refuses to load "
                         "(run quantspec.litert.check_model for the details)")


def _check_memory(sg: Subgraph, where: str) -> None:
    """Refuse a subgraph whose tensors computed at run time (not its constants) declare more bytes in
    all than this machine's memory (physical plus swap, or the container's limit): a run that kept
    them all would be killed by the system rather than fail, as a damaged model's shapes can ask
    (each tensor alone may fit).  An upper bound of what a run holds at once; a model made by a
    converter declares a tiny fraction of any memory."""
    from .._semantics.arrays import human_bytes, memory_limit

    total = 0
    for t in sg.tensors:
        if t.data is None and t.dtype is not None:
            total += math.prod(max(int(d), 0) for d in t.shape) * t.dtype.dtype.itemsize
    limit = memory_limit()
    if total > limit:
        raise ModelError(f"{where}model".strip(), f"declares tensors of {total} bytes ({human_bytes(total)}) in all, more "
                         f"than this machine's memory ({human_bytes(limit)}): a run would be killed by the system "
                         "(a damaged model?)", total)


def tensor_spec(t: Tensor):
    """The spec a kernel's prepare sees for the model's tensor ``t`` (None for a tensor without a type)."""
    from ..dtypes import qtype
    from .kernels.base import TensorSpec

    if t.type_name == "RESOURCE":       # a resource handle: LiteRT keeps the variable's id in it as int32
        return TensorSpec(shape=tuple(t.shape), dtype=qtype("int32"), params=None, data=None, name=t.name)
    if t.dtype is None:
        return None
    return TensorSpec(shape=tuple(t.shape), dtype=t.dtype, params=t.params, data=t.data, name=t.name)


def _fits_signature(t: Tensor, shape: tuple[int, ...]) -> bool:
    """Whether ``shape`` is one the model input ``t`` may take: its ``shape_signature`` has -1 (a
    dynamic dimension) where ``shape`` differs from the stored shape, and the same rank."""
    sig = t.shape_signature
    if sig is None or len(sig) != len(t.shape) or len(shape) != len(t.shape):
        return False
    return all(s == d or (g == -1 and s >= 0) for s, d, g in zip(shape, t.shape, sig))


def _actual(t: Tensor, y: np.ndarray):
    """The spec of tensor ``t`` as an operator computed it (``y``): its shape and type."""
    from ..dtypes import qtype
    from .kernels.base import TensorSpec

    dtype = t.dtype if t.dtype is not None and y.dtype == t.dtype.dtype else qtype(y.dtype)
    return TensorSpec(shape=tuple(y.shape), dtype=dtype, params=t.params, data=None, name=t.name)


class Interpreter:
    """Run a LiteRT model on quantspec's kernels, byte-identical to LiteRT ``BUILTIN_REF``.

    ``Interpreter(model)`` accepts a path, the model's bytes or a loaded
    :class:`~quantspec.litert.model.Model`, and prepares every operator.

    - ``signature``: the key of one of the model's signatures (``model.signature_defs``): the
      interpreter runs that signature's subgraph and accepts its input names (LiteRT's
      ``get_signature_runner(key)``).  None (default) runs subgraph 0, as LiteRT's ``invoke``.
    - ``sum_semantics`` chooses the int8 SUM behaviour: ``"correct"`` (default) or ``"reference"``
      (the LiteRT reference kernel's uint8 reading, to reproduce BUILTIN_REF exactly).
    - ``preserve_all_tensors``: keep every intermediate tensor of the last run for
      :meth:`get_tensor` (LiteRT's ``experimental_preserve_all_tensors``); otherwise an
      intermediate tensor's array is dropped after its last use.

    ``run(inputs)`` takes the inputs as a list in the subgraph's input order, a dict keyed by input
    tensor name or by signature input name, or a single array for a one-input model, and returns
    the list of output arrays in the subgraph's output order (:attr:`output_names` names them).
    """

    def __init__(self, model: Any, kernels: str = "reference", *, sum_semantics: str = "correct",
                 signature: str | None = None, preserve_all_tensors: bool = False, num_threads: int = 1):
        if sum_semantics not in SUM_SEMANTICS:
            raise InvalidArgumentError("sum_semantics", "must be one of " + ", ".join(map(repr, SUM_SEMANTICS)),
                                       sum_semantics)
        from .kernels.modes import check_mode, check_threads

        self.kernels = check_mode(kernels)
        self.num_threads = check_threads(num_threads)
        note_reproducing("ai-edge-litert")
        self.model: Model = load_model(model)
        _check_operator_codes(self.model, self.kernels)
        self.sum_semantics = sum_semantics
        self.preserve_all_tensors = bool(preserve_all_tensors)
        self.signature: SignatureDef | None = None
        if signature is not None:
            keys = [sd.key for sd in self.model.signature_defs]
            if not isinstance(signature, str) or signature not in keys:
                raise InvalidArgumentError("signature", "must be the key of one of the model's signatures", signature,
                                           detail="signatures: " + (", ".join(map(repr, keys)) or "none"))
            self.signature = next(sd for sd in self.model.signature_defs if sd.key == signature)
        self._entry = self.signature.subgraph_index if self.signature is not None else 0
        self._graphs: dict[int, _Graph] = {}
        self._preparing: list[int] = []
        from .kernels.control_flow import State

        self._state = State()
        self._main = self._graph(self._entry)
        self._last: dict[int, np.ndarray] = {}
        # per input, the numpy type and shape run accepts without further checks
        self._simple = tuple((t.dtype.dtype, tuple(t.shape)) if t.dtype is not None else (None, None)
                             for t in self.inputs)

    @property
    def engines(self) -> list[str]:
        """Per operator of the subgraph run, the LiteRT engine its kernel reproduces."""
        return list(self._main.engines)

    # -- kernels and subgraphs -----------------------------------------------------------------
    def _kernel_table(self) -> Mapping[str, Any]:
        """The kernels this interpreter runs (builtin operator name -> kernel)."""
        return _jitted()

    def _graph(self, index: int) -> _Graph:
        """Subgraph ``index``, prepared (once)."""
        hit = self._graphs.get(index)
        if hit is not None:
            return hit
        if not isinstance(index, (int, np.integer)) or not 0 <= index < len(self.model.subgraphs):
            raise ModelError("subgraph index", f"must lie in [0, {len(self.model.subgraphs)})", index)
        if index in self._preparing:
            raise ModelError(f"subgraph {index}", "calls itself through control-flow operators (a recursion "
                             "quantspec refuses)", list(self._preparing))
        self._preparing.append(int(index))
        try:
            graph = _Graph(self, self.model.subgraphs[index])
        finally:
            self._preparing.pop()
        self._graphs[int(index)] = graph
        return graph

    # -- model description ---------------------------------------------------------------------
    @property
    def subgraph(self) -> Subgraph:
        """The subgraph this interpreter runs."""
        return self.model.subgraphs[self._entry]

    @property
    def inputs(self) -> list[Tensor]:
        """The input tensors of the subgraph run, in order."""
        sg = self.subgraph
        return [sg.tensors[i] for i in sg.inputs]

    @property
    def outputs(self) -> list[Tensor]:
        """The output tensors of the subgraph run, in order."""
        sg = self.subgraph
        return [sg.tensors[i] for i in sg.outputs]

    @property
    def output_names(self) -> list[str]:
        """The outputs' names, in :meth:`run`'s order: the signature's names where there is one."""
        names = {i: k for k, i in self.signature.outputs.items()} if self.signature is not None else {}
        return [names.get(t.index, t.name) for t in self.outputs]

    def __repr__(self) -> str:
        ins = ", ".join(f"{t.name}: {t.type_name.lower()}{list(t.shape)}" for t in self.inputs)
        outs = ", ".join(f"{t.name}: {t.type_name.lower()}{list(t.shape)}" for t in self.outputs)
        sig = f" signature {self.signature.key!r};" if self.signature is not None else ""
        return (f"<quantspec LiteRT Interpreter:{sig} {len(self._main.prepared)} operators; inputs ({ins}) -> "
                f"outputs ({outs})>")

    # -- running -------------------------------------------------------------------------------
    def _input_list(self, inputs: Any) -> list[np.ndarray]:
        sg = self.subgraph
        n = len(sg.inputs)
        if isinstance(inputs, np.ndarray):
            if n != 1:
                raise InvalidArgumentError("inputs", f"must hold {n} arrays (the model has {n} inputs), "
                                           "as a list or a dict by name; got one array")
            return [inputs]
        if isinstance(inputs, Mapping):
            names: dict[str, int] = {}
            for pos, i in enumerate(sg.inputs):
                names[sg.tensors[i].name] = pos
            signatures = [self.signature] if self.signature is not None else [
                sd for sd in self.model.signature_defs if sd.subgraph_index == self._entry]
            for sd in signatures:
                for name, i in sd.inputs.items():
                    if i in sg.inputs:
                        names.setdefault(name, list(sg.inputs).index(i))
            unknown = [k for k in inputs if k not in names]
            if unknown:
                raise InvalidArgumentError("inputs", "names no input of the model", unknown[0],
                                           detail="inputs: " + ", ".join(repr(k) for k in names))
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
        """Run the model; return its outputs (fresh arrays) in the subgraph's output order."""
        graph = self._main
        solo = graph.solo
        direct = graph.direct
        if direct is not None and type(inputs) is list and len(inputs) == 1 and PLANS and jit.enabled():
            # a program of one region over one input and one output (regions.Direct): where the input
            # is a plain array of the model's type and shape and no other thread is inside the region,
            # its kernel copies the caller's array in and fills a fresh output array; nothing else
            x = inputs[0]
            if type(x) is np.ndarray and (x.dtype is direct.dtype or x.dtype == direct.dtype) \
                    and x.shape == direct.shape and direct.lock.acquire(False):
                try:
                    f = direct.flip ^ 1                 # the arena the previous run's record does not read
                    direct.flip = f
                    y = np.empty(direct.oshape, direct.odtype)
                    xf, yf = x.ravel(), y.ravel()      # C-contiguous: views (x's, where it is)
                    if direct.xcast:
                        xf = xf.view(np.int8)
                    if direct.ycast:
                        yf = yf.view(np.int8)
                    if not direct.entry(direct.code, direct.arenas[f], direct.consts, xf, yf):
                        self._last = direct.lasts[f]
                        return [y]
                    # a step met a case its plan leaves to its operator's kernel: the usual path,
                    # which raises as the kernel does
                    solo = None
                except BaseException:
                    self._last = {}
                    raise
                finally:
                    direct.lock.release()
        if solo is not None and type(inputs) is list and PLANS and jit.enabled():
            done = self._run_solo(solo, inputs)
            if done is not None:
                return done
        if not jit.enabled():
            return self._run(inputs, False)
        if not self._main.blas:
            # a graph whose program calls no BLAS (tables, reductions, data movement): the thresholds
            # alone (blas_on_caller's two calls into the BLAS library cost a few microseconds)
            before = core.set_thresholds(SERIAL_IN_MODELS, REFERENCE_IN_MODELS)
            try:
                return self._run(inputs, True)
            finally:
                core.restore_thresholds(before)
        # one busy thread: the int8 GEMMs on BLAS's calling thread (BLAS's idle workers would spin
        # against the fast kernels' threads: quantspec._fastpath.threads), and the fast kernels serial
        # below SERIAL_IN_MODELS elements (blas_on_caller, serial_below and reference_below, without
        # the with statements: a small model's run takes tens of microseconds)
        entered = threads.enter()
        try:
            before = core.set_thresholds(SERIAL_IN_MODELS, REFERENCE_IN_MODELS)
            try:
                return self._run(inputs, True)
            finally:
                core.restore_thresholds(before)
        finally:
            threads.leave(entered)

    def _run_solo(self, solo, inputs: list) -> list[np.ndarray] | None:
        """A model whose fast program is one region over its inputs (a small model of operators on
        one-byte codes): the region called directly, without the program loop or the thread
        settings (its kernel calls no BLAS and no thread pool).  None where the inputs are not plain
        arrays of the model's types and shapes, or where the region leaves the call to the
        operators' kernels (the caller runs it on the usual path, which raises as they do)."""
        simple = self._simple
        if len(inputs) != len(simple):
            return None
        for x, (dtype, shape) in zip(inputs, simple):
            if type(x) is not np.ndarray or x.dtype != dtype or x.shape != shape:
                return None
        compute, order, input_ids, output_ids = solo
        self._last = {}
        try:
            outs = compute(None, inputs)
        except Deopt:
            return None
        outputs = [outs[k] for k in order]
        last = dict(zip(input_ids, inputs))
        last.update(zip(output_ids, outputs))
        self._last = last
        return [y.copy() for y in outputs]

    def _run(self, inputs: Any, fast: bool | None = None) -> list[np.ndarray]:
        sg = self.subgraph
        simple = self._simple
        if type(inputs) is list and len(inputs) == len(simple):
            # the common call: a list of numpy arrays of the model's types and shapes
            for x, (dtype, shape) in zip(inputs, simple):
                if type(x) is not np.ndarray or x.dtype != dtype or x.shape != shape:
                    break
            else:
                return self._finish(inputs, fast)
        inputs = from_foreign(inputs)        # one torch / JAX array (a list or dict: each entry, below)
        checked = []
        for pos, (i, x) in enumerate(zip(sg.inputs, self._input_list(inputs))):
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
            if tuple(x.shape) != tuple(t.shape) and not _fits_signature(t, x.shape):
                raise ShapeError(where, f"must have shape {list(t.shape)}, the shape of model input {t.index}"
                                 + ("" if t.shape_signature is None or -1 not in t.shape_signature else
                                    f" (or of its signature {list(t.shape_signature)}, -1 = any size)"),
                                 list(x.shape))
            checked.append(x)
        return self._finish(checked, fast)

    def _finish(self, checked: list[np.ndarray], fast: bool | None = None) -> list[np.ndarray]:
        self._last = {}
        sg = self._main.sg
        resized = {i: _actual(sg.tensors[i], x) for i, x in zip(sg.inputs, checked)
                   if tuple(x.shape) != tuple(sg.tensors[i].shape)}
        if resized:
            # an input resized along a dynamic dimension (LiteRT's resize_tensor_input): the operators
            # that read it are prepared again for its shape, on the loop that does so
            outputs, arrays = self._main._run_steps(checked, keep_all=self.preserve_all_tensors, changed=resized)
            self._last = arrays
            return [np.array(y, copy=True) for y in outputs]
        outputs, arrays = self._main.run(checked, keep_all=self.preserve_all_tensors, fast=fast)
        self._last = arrays
        return [np.array(y, copy=True) for y in outputs]

    __call__ = run

    def get_tensor(self, index: int) -> np.ndarray:
        """A copy of tensor ``index`` of the subgraph run, as the last :meth:`run` left it: inputs,
        outputs and constants always, intermediate tensors with ``preserve_all_tensors=True``
        (LiteRT's ``get_tensor`` with ``experimental_preserve_all_tensors``)."""
        sg = self.subgraph
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)) \
                or not 0 <= index < len(sg.tensors):
            raise InvalidArgumentError("index", f"must be a tensor index in [0, {len(sg.tensors)})", index)
        last = self._last
        a = last[int(index)] if type(last) is list else last.get(int(index))
        if a is None:
            if sg.tensors[index].data is not None:
                return np.array(sg.tensors[index].data, copy=True)
            if not self._last:
                raise InvalidArgumentError("index", "names a tensor with no value yet: run the model first", index)
            raise InvalidArgumentError("index", "names an intermediate tensor the last run did not keep: make the "
                                       "Interpreter with preserve_all_tensors=True", index)
        return np.array(a, copy=True)
