"""Fuzzing of the tensor file readers and writers and of the model loader, checker and interpreter.

- Writers: hypothesis draws tensors (every type quantspec knows, 0-d, empty, every layout) and names;
  ``write_tensors`` writes them or raises a quantspec error, and what it wrote reads back, mapped or
  not, as the same values and types -- and as the same bytes through numpy (.npy/.npz) and the
  safetensors package.
- Readers: seeded mutations (fuzz_files.mutate) of valid files of each format in
  :data:`fuzz_files.FORMATS`; reading either works or raises the format's quantspec error; a mapped
  read (in a worker process: a page past the end of a file would be a SIGBUS) agrees with the plain
  read; where numpy / safetensors also read the file, the bytes agree.
- Models (:data:`fuzz_files.MODEL_FORMATS`): mutated .tflite files are loaded and checked (a
  ModelError or a report); LiteRT (in the worker) is the oracle: quantspec refuses, with a message
  naming LiteRT's flatbuffer verifier, exactly the files LiteRT's verifier refuses; a file quantspec
  calls conformant LiteRT loads; and where both interpreters run the model, the outputs are the same
  bytes -- with the reference kernels against LiteRT's BUILTIN_REF resolver, and on half of the
  conformant models also ``kernels="optimized"`` against BUILTIN_WITHOUT_DEFAULT_DELEGATES or
  ``kernels="xnnpack"`` against the default resolver with XNNPACK.

``QUANTSPEC_FUZZ_EXAMPLES`` scales every count (fuzz_support)."""

from __future__ import annotations

import random
import string

import numpy as np
import pytest
from hypothesis import given, seed
from hypothesis import strategies as st

import fuzz_files
import fuzz_support as F
import refs
from fuzz_worker import Worker, _digest
from quantspec.errors import ModelError, QuantSpecError


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()


def _litert(worker, task, what) -> dict:
    """LiteRT's verdict (the oracle); LiteRT itself crashing on a damaged file is a verdict too."""
    answer = worker.ask(task, timeout=120)
    if "crash" in answer:
        return {"stage": "crash", "error": f"LiteRT crashed its process (exit {answer['crash']})"}
    return _ask(worker, task, what, answer)["ok"]


def _ask(worker, task, what, answer=None):
    answer = answer or worker.ask(task, timeout=120)
    assert "crash" not in answer, f"the worker crashed (exit {answer['crash']}): {what}"
    assert "timeout" not in answer, f"a hang (no answer in {answer['timeout']} s): {what}"
    assert "other" not in answer, f"{answer['other']}: {what}"
    return answer


# -- writers: round trips ----------------------------------------------------------------------

_TYPES = ("float", "float16", "bfloat16", "double", "int8", "uint8", "int16", "uint16", "int32", "int64",
          "int4", "uint4", "int2", "uint2", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz",
          "float8e8m0", "float4e2m1", "float6e2m3", "float6e3m2", "bool")
_NAMES = st.text(alphabet=string.ascii_letters + string.digits + "._-/ éß\u4e2d\0\ud800", min_size=0, max_size=12)


@st.composite
def _tensors(draw):
    from quantspec.dtypes import qtype

    out = {}
    for _ in range(draw(st.integers(1, 4))):
        name = draw(_NAMES)
        t = qtype(draw(st.sampled_from(_TYPES)))
        shape = draw(F.shapes(max_rank=3, max_side=5))
        rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
        n = int(np.prod(shape, dtype=np.int64))
        if t.dtype == np.bool_:
            a = rng.integers(0, 2, n).astype(bool).reshape(shape)
        elif t.kind == "int":
            a = rng.integers(int(t.qmin), int(t.qmax) + 1, n).astype(t.storage).astype(t.dtype).reshape(shape)
        elif t.bits <= 8:
            a = rng.integers(0, 1 << t.bits, n).astype(np.uint8).view(t.dtype).reshape(shape)
        else:
            a = F.values(rng, shape, t.dtype)
        out[name] = F.layout(a, draw(st.sampled_from(F.LAYOUTS)))
    return out


def _stored(a: np.ndarray):
    """The values a file holds for ``a`` (native byte order, C order)."""
    from quantspec._semantics.arrays import native

    return np.array(native(np.asarray(a)), order="C")


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".safetensors"])
def test_fuzz_write_then_read(suffix, tmp_path_factory):
    refs.require("safetensors")
    from quantspec._tensorfiles.tensorio import read_tensors, to_storage, write_tensors

    d = tmp_path_factory.mktemp("rt")

    @F.fuzz_settings(2.0)
    @seed(F.SEED)
    @given(_tensors())
    def run(tensors):
        if suffix == ".npy":
            tensors = dict(list(tensors.items())[:1])
        path = d / f"t{suffix}"
        what = f"write_tensors({path.name}, {[(k, v.dtype, v.shape, v.strides) for k, v in tensors.items()]})"
        out = F.outcome(lambda: write_tensors(path, tensors), what)
        if not out.ok:
            return
        for mapped in (False, True):
            back = F.outcome(lambda: read_tensors(path, mapped=mapped), what + f" read mapped={mapped}").value
            assert back is not None, what
            if suffix == ".npy":
                ((_, a),) = tensors.items()
                (b,) = back.values()
                assert to_storage(_stored(a)).tobytes() == _stored(b).tobytes() or \
                    np.array_equal(to_storage(_stored(a)), _stored(b)), what
                continue
            assert set(back) == set(tensors), what
            for k, a in tensors.items():
                b = back[k]
                # the same type (a big-endian array may stay big-endian: the file records it)
                assert b.dtype.newbyteorder("=") == a.dtype.newbyteorder("=") and b.shape == a.shape, (what, k, b.dtype)
                assert to_storage(_stored(a)).tobytes() == to_storage(_stored(b)).tobytes() or \
                    np.array_equal(to_storage(_stored(a)), to_storage(_stored(b))), (what, k)
        # the other readers of the format
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as f:
                for k, a in tensors.items():
                    assert to_storage(_stored(a)).tobytes() == _stored(f[k]).tobytes(), (what, k)
        elif suffix == ".npy":
            ((_, a),) = tensors.items()
            assert to_storage(_stored(a)).tobytes() == _stored(np.load(path)).tobytes(), what
        else:
            from safetensors.numpy import load_file

            from quantspec.dtypes import qtype
            plain = all(qtype(a.dtype.newbyteorder("=")).name in _SAFETENSORS_CODES for a in tensors.values())
            if plain:
                loaded = load_file(str(path))
                for k, a in tensors.items():
                    assert _stored(a).tobytes() == _stored(loaded[k]).tobytes(), (what, k)

    run()


#: the types the safetensors package reads itself (the others carry quantspec's metadata)
_SAFETENSORS_CODES = {"bool", "uint8", "int8", "uint16", "int16", "int32", "int64", "float16", "float", "double"}


# -- readers: damaged files ---------------------------------------------------------------------

def _mutants(fmt: fuzz_files.Format, count: int):
    seeds = sorted(fmt.seeds().items())
    rng = random.Random(f"{F.SEED}-{fmt.name}")
    for i in range(count):
        name, data = seeds[i % len(seeds)]
        yield name, fuzz_files.mutate(data, rng) if i >= len(seeds) else data


@pytest.mark.parametrize("name", sorted(fuzz_files.FORMATS))
def test_fuzz_damaged_tensor_files(name, tmp_path, worker):
    refs.require("safetensors")
    fmt = fuzz_files.FORMATS[name]
    path = tmp_path / f"damaged{fmt.suffix}"
    disagreements = read = 0
    count = max(20, int(150 * F.SCALE))
    for seed_name, data in _mutants(fmt, count):
        path.write_bytes(data)
        what = f"{fmt.name} mutant of {seed_name}: {data[:64]!r}... ({len(data)} bytes)"
        out = F.outcome(lambda: fmt.read(path, False), what)
        if not out.ok:
            assert isinstance(out.error, fmt.error), (what, out)
        mapped = _ask(worker, {"kind": "read", "format": fmt.name, "path": str(path), "mapped": True}, what)
        if out.ok and "ok" in mapped:
            assert mapped["ok"] == _digest(out.value), f"mapped and plain reads differ: {what}"
        read += out.ok
        if out.ok and fmt.oracle is not None:
            try:
                with F.quiet():
                    want = fmt.oracle(path)
            except Exception:  # noqa: BLE001 - the other reader refuses: nothing to compare
                disagreements += 1
                continue
            assert fmt.same(want, out.value), f"quantspec reads other values than {fmt.name}'s own reader: {what}"
    print(f"{fmt.name}: {count} files, {read} read, {count - read} refused; {disagreements} read by quantspec "
          f"and refused by the other reader")


# -- models ---------------------------------------------------------------------------------------

def _model_mutants(fmt, count):
    yield from _mutants(fmt, count)


@pytest.mark.parametrize("name", sorted(fuzz_files.MODEL_FORMATS))
def test_fuzz_damaged_models_against_litert(name, tmp_path, worker, monkeypatch):
    refs.require("ai_edge_litert.interpreter")
    from litert_models import random_inputs

    from quantspec._semantics import arrays

    # quantspec's interpreter in this process sees a machine of RUN_MEMORY: a damaged model whose
    # run-time data (PAD's paddings, ...) grow a tensor far past what it declares is refused (the
    # interpreter's working-memory check) instead of filling the machine beside the other fuzzers
    monkeypatch.setattr(arrays, "_MEMORY_LIMIT", [RUN_MEMORY])

    from quantspec.litert import Interpreter

    fmt = fuzz_files.MODEL_FORMATS[name]
    path = tmp_path / f"damaged{fmt.suffix}"
    stats = {"refused": 0, "verifier": 0, "conformant": 0, "ran": 0}
    stats["files"] = max(20, int(200 * F.SCALE))
    for mode in MODE_RESOLVER:
        stats.update({mode: 0, f"{mode} refused": 0, f"{mode} not run by LiteRT": 0})
    mode_rng = random.Random(f"{F.SEED}-{name}-modes")
    for i, (seed_name, data) in enumerate(_model_mutants(fmt, stats["files"])):
        if i < F.FROM:        # a resumed run: made, not checked (the kernel modes drawn from here on differ)
            continue
        path.write_bytes(data)
        what = f"mutant {i} of {seed_name} ({len(data)} bytes)"
        out = F.outcome(lambda: fmt.read(path, False), what)
        litert = _litert(worker, {"kind": "litert", "path": str(path)}, what)
        refused_by_verifier = litert["stage"] == "load" and "not a valid Flatbuffer" in litert["error"]
        if not out.ok:
            assert isinstance(out.error, ModelError), (what, out)
            stats["refused"] += 1
            ours_verifier = "flatbuffer verifier" in str(out.error)
            stats["verifier"] += ours_verifier
            assert refused_by_verifier or not ours_verifier, \
                f"quantspec names LiteRT's verifier ({out.error}) but LiteRT's verifier accepts the file: {what}"
            continue
        assert not refused_by_verifier, f"quantspec reads a file LiteRT's flatbuffer verifier refuses: {what}"
        model, report = out.value
        if not report.ok:
            continue
        stats["conformant"] += 1
        assert litert["stage"] not in ("load", "crash"), f"quantspec calls conformant a model LiteRT cannot load " \
                                                     f"({litert['error']}): {what}"
        if _declared_bytes(model) > RUN_BUDGET:
            # a damaged shape under the memory ceiling one tensor at a time, but not all of them
            # together (the kernel's out-of-memory killer ended a 20000-example run): not run here
            stats["too large to run here"] = stats.get("too large to run here", 0) + 1
            continue
        # both interpreters on the same inputs
        inputs = random_inputs(model, i)
        mode = mode_rng.choice(("optimized", "xnnpack", None, None))
        if mode is not None:      # a share of the models also in another kernel mode, against its resolver
            _check_mode(worker, model, path, inputs, mode, tmp_path, what, stats)
        ours = F.outcome(lambda: Interpreter(model, sum_semantics="reference").run(inputs), what + " run")
        if not ours.ok:
            continue
        np.savez(tmp_path / "in.npz", *inputs)
        theirs = _litert(worker, {"kind": "litert", "path": str(path), "run": True,
                                  "inputs": str(tmp_path / "in.npz"), "outputs": str(tmp_path / "out.npz")}, what)
        if theirs["stage"] != "ran":
            continue
        stats["ran"] += 1
        assert theirs["outputs"] == _digest(list(ours.value)), f"outputs differ from LiteRT's: {what}"
    print(f"{fmt.name}: {stats}" + (f" (checked from mutant {F.FROM})" if F.FROM else ""))
    assert stats["refused"] and stats["conformant"], stats   # both kinds of file occur
    if stats["files"] >= 200:
        assert all(stats[m] for m in MODE_RESOLVER), f"a kernel mode was never compared with LiteRT: {stats}"


#: the most bytes a damaged model's tensors may declare in all for the fuzzer to run it (both
#: interpreters, and the random inputs in float64 first; the reference kernels' working arrays take
#: up to about 32 bytes an element, so 1 GiB declared could fill the machine: the 20000-example run
#: was killed by the out-of-memory killer at that budget)
RUN_BUDGET = 64 << 20
#: the memory quantspec's interpreter may count on while the model fuzzer runs it (see the test)
RUN_MEMORY = 2 << 30


def _declared_bytes(model) -> int:
    """The bytes of every tensor the model declares (8 a value where the type is unknown), as
    Python integers (no overflow)."""
    total = 0
    for t in model.tensors:
        n = 1
        for d in (t.shape or ()):
            n *= max(int(d), 1)
        total += n * max(8, t.dtype.dtype.itemsize if t.dtype is not None else 8)
    return total


#: quantspec's kernel modes besides the reference one -> the LiteRT resolver that runs them
MODE_RESOLVER = {"optimized": "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "xnnpack": "AUTO"}


def _check_mode(worker, model, path, inputs, mode, tmp_path, what, stats):
    """``Interpreter(model, kernels=mode)`` against LiteRT's resolver of that mode (single-threaded): a
    quantspec error, or outputs of the same bytes where LiteRT runs the model (the rule of the
    reference run above: a model LiteRT's resolver does not run is not compared)."""
    from quantspec.litert import Interpreter

    what = f"{what} (kernels={mode!r} against LiteRT's {MODE_RESOLVER[mode]})"
    ours = F.outcome(lambda: Interpreter(model, kernels=mode).run(inputs), what)
    if not ours.ok:
        stats[f"{mode} refused"] += 1
        return
    np.savez(tmp_path / "in.npz", *inputs)
    theirs = _litert(worker, {"kind": "litert", "path": str(path), "run": True, "resolver": MODE_RESOLVER[mode],
                              "inputs": str(tmp_path / "in.npz"), "outputs": str(tmp_path / "out.npz")}, what)
    if theirs["stage"] != "ran":
        stats[f"{mode} not run by LiteRT"] += 1
        return
    stats[mode] += 1
    assert theirs["outputs"] == _digest(list(ours.value)), f"outputs differ from LiteRT's: {what}"
