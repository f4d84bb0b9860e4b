"""The ``quantspec bench`` section of the LiteRT kernel modes: per model, per mode and per thread
setting, one inference of quantspec's :class:`~quantspec.litert.Interpreter` (``kernels=``
reference, optimized, xnnpack) against the LiteRT configuration it reproduces (``BUILTIN_REF``,
``BUILTIN_WITHOUT_DEFAULT_DELEGATES``, the default resolver with XNNPACK), outputs compared byte for
byte.  Thread settings (:data:`THREADS`): ``num_threads=1`` on both sides, and each side's default
(no ``num_threads`` given: 1 for both interpreters of ai-edge-litert 2.3.0 and for quantspec's).

The models: the bundled ``bench_cnn.tflite`` and ``mixed.tflite``; converter-made int8
EfficientNetB0, MobileNetV3Small and the small transformer encoder of ``benchmarks/litert_zoo.py``
(:data:`ZOO`, built with TensorFlow on first use and cached; skipped where the checkout has no such
script or it cannot build them, and with ``--quick``); and any ``.tflite`` files named in
``$QUANTSPEC_BENCH_LITERT_MODELS`` (comma-separated paths; ``benchmarks/litert_modes_speed.py``
passes more models, such as EfficientNetB0 on 224x224 images).
"""

from __future__ import annotations

import os

import numpy as np

from ..benchcase import Case, Peer

__all__ = ["mode_cases", "inputs", "zoo_model", "MODES", "THREADS", "ZOO"]

#: kernel mode -> the LiteRT op resolver it reproduces
MODES = {"reference": "BUILTIN_REF", "optimized": "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "xnnpack": "AUTO"}
#: kernel mode -> the name of the LiteRT peer in the report
PEERS = {"reference": "LiteRT BUILTIN_REF", "optimized": "LiteRT optimized", "xnnpack": "LiteRT XNNPACK"}


#: thread settings: label -> ``num_threads`` given to both interpreters (None: neither is given one)
THREADS = {"1 thread": 1, "default threads": None}
#: converter-made architectures of ``benchmarks/litert_zoo.py`` in the bench
ZOO = ("efficientnet_b0", "mobilenet_v3_small", "transformer")


def zoo_model(arch: str, **build) -> tuple[str | None, str]:
    """(path, "") of the int8 ``arch`` built by the checkout's ``benchmarks/litert_zoo.py`` (cached),
    or (None, why not)."""
    script = os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks", "litert_zoo.py")
    if not os.path.exists(script):
        return None, "benchmarks/litert_zoo.py, which builds it, is not in this checkout"
    import importlib.util

    try:
        spec = importlib.util.spec_from_file_location("quantspec_bench_litert_zoo", script)
        zoo = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(zoo)
        return str(zoo.build(arch, quant="int8", **build)), ""
    except Exception as e:          # TensorFlow missing, a conversion that fails, ...
        return None, f"benchmarks/litert_zoo.py could not build it ({type(e).__name__}: {e})"


def _models(zoo: bool = False) -> list[str]:
    data = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")
    paths = [os.path.join(data, "bench_cnn.tflite"), os.path.join(data, "mixed.tflite")]
    for arch in ZOO if zoo else ():
        path, why = zoo_model(arch)
        if path:
            paths.append(path)
        else:
            print(f"(litert kernel modes: {arch} skipped: {why})", flush=True)
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


def mode_cases(rounds: int, models: list[str] | None = None, seed: int = 0, zoo: bool = True,
               threads: dict | None = None) -> list:
    """One bench case per model, mode and thread setting, LiteRT's matching configuration as the peer
    (``zoo``: with the converter-made models of :data:`ZOO`)."""
    from .interpreter import Interpreter

    try:
        from ai_edge_litert.interpreter import Interpreter as LiteRT, OpResolverType
    except Exception:
        LiteRT = None
    cases = []
    for path in models or _models(zoo):
        name = os.path.basename(path).removesuffix(".tflite")
        for label, count in (threads or THREADS).items():
            for mode, resolver in MODES.items():
                kw = {} if count is None else {"num_threads": count}
                interp = Interpreter(path, kernels=mode, **kw)
                x = inputs(interp, seed)
                box: dict = {}

                def run(interp=interp, x=x, box=box):
                    box["y"] = interp.run(x)[0]

                case = Case(f"litert {name} {mode}, {label}", 1, 0, run, lambda box=box: box["y"],
                            unit="inferences/s")
                if LiteRT is not None:
                    it = LiteRT(model_path=path, experimental_op_resolver_type=getattr(OpResolverType, resolver), **kw)
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
