"""The ``quantspec bench`` section of the LiteRT kernel modes: per model and per mode, one inference
of quantspec's :class:`~quantspec.litert.Interpreter` (``kernels=`` reference, optimized, xnnpack)
against the LiteRT configuration it reproduces (``BUILTIN_REF``, ``BUILTIN_WITHOUT_DEFAULT_DELEGATES``,
the default resolver with XNNPACK), both with their default thread count (1), outputs compared
byte for byte.

The models: the bundled ``bench_cnn.tflite`` and ``mixed.tflite``, and any ``.tflite`` files named in
``$QUANTSPEC_BENCH_LITERT_MODELS`` (comma-separated paths; ``benchmarks/litert_modes_speed.py``
builds converter-made models and passes them).
"""

from __future__ import annotations

import os

import numpy as np

from ..benchcase import Case, Peer

__all__ = ["mode_cases", "inputs", "MODES"]

#: kernel mode -> the LiteRT op resolver it reproduces
MODES = {"reference": "BUILTIN_REF", "optimized": "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "xnnpack": "AUTO"}
#: kernel mode -> the name of the LiteRT peer in the report
PEERS = {"reference": "LiteRT BUILTIN_REF", "optimized": "LiteRT optimized", "xnnpack": "LiteRT XNNPACK"}


def _models() -> list[str]:
    data = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")
    paths = [os.path.join(data, "bench_cnn.tflite"), os.path.join(data, "mixed.tflite")]
    extra = os.environ.get("QUANTSPEC_BENCH_LITERT_MODELS", "")
    paths += [p for p in extra.split(",") if p]
    return paths


def _index_bound(interp, tensor: int) -> int | None:
    """The number of rows that input ``tensor`` indexes where the model uses it as the positions of
    a GATHER or the ids of an EMBEDDING_LOOKUP (a transformer's token ids), else None."""
    sg = interp.subgraph
    bounds = []
    for op in sg.operators:
        if op.name == "GATHER" and len(op.inputs) > 1 and op.inputs[1] == tensor:
            shape = sg.tensors[op.inputs[0]].shape
            axis = int(op.options.get("axis", 0))
            bounds.append(int(shape[axis % len(shape)]))
        elif op.name == "EMBEDDING_LOOKUP" and op.inputs[0] == tensor:
            bounds.append(int(sg.tensors[op.inputs[1]].shape[0]))
    return min(bounds) if bounds else None


def inputs(interp, seed: int) -> list[np.ndarray]:
    """One random input per model input: normal floats, codes of the type's full range, or valid
    positions for an input that indexes rows (token ids)."""
    rng = np.random.default_rng(seed)
    out = []
    for t in interp.inputs:
        dtype = np.dtype(t.dtype.dtype)
        if dtype.kind == "f":
            out.append(rng.normal(0, 1, t.shape).astype(dtype))
            continue
        bound = _index_bound(interp, t.index)
        if bound is not None:
            out.append(rng.integers(0, bound, t.shape).astype(dtype))
        else:
            info = np.iinfo(dtype)
            out.append(rng.integers(info.min, info.max, t.shape, endpoint=True).astype(dtype))
    return out


def mode_cases(rounds: int, models: list[str] | None = None, seed: int = 0) -> list:
    """One bench case per model and mode, LiteRT's matching configuration as the peer."""
    from .interpreter import Interpreter

    try:
        from ai_edge_litert.interpreter import Interpreter as LiteRT, OpResolverType
    except Exception:
        LiteRT = None
    cases = []
    for path in models or _models():
        name = os.path.basename(path)
        for mode, resolver in MODES.items():
            interp = Interpreter(path, kernels=mode)
            x = inputs(interp, seed)
            box: dict = {}

            def run(interp=interp, x=x, box=box):
                box["y"] = interp.run(x)[0]

            case = Case(f"litert {name} kernels={mode}", 1, 0, run, lambda box=box: box["y"], unit="inferences/s")
            if LiteRT is not None:
                it = LiteRT(model_path=path, num_threads=1,
                            experimental_op_resolver_type=getattr(OpResolverType, resolver))
                it.allocate_tensors()
                ins = [d["index"] for d in it.get_input_details()]
                out = it.get_output_details()[0]["index"]
                rbox: dict = {}

                def run_litert(it=it, ins=ins, out=out, x=x, rbox=rbox):
                    for i, v in zip(ins, x):
                        it.set_tensor(i, v)
                    it.invoke()
                    rbox["y"] = it.get_tensor(out)

                case.peers.append(Peer(PEERS[mode], run_litert, lambda rbox=rbox: rbox["y"]))
            cases.append(case)
    return cases
