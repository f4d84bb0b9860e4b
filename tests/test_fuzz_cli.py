"""Fuzzing of the ``quantspec`` command: hypothesis draws a command (quantize / dequantize of each
spec, check of a .tflite or .onnx, run -- with --kernels reference | optimized | xnnpack and --resolver,
with and without --compare-litert --, audit, convert and verify of a checkpoint, equiv --from / --to
over float16 or bfloat16 inputs (never the default float32 domain: a minute), example DIR, and warmup
with bad arguments only, which must fail at once) with options from a vocabulary of valid and
invalid values, and input files that are valid, damaged, missing or of the wrong kind.  The outcome rule for a command line:

- the exit status is 0, 1 (``check`` found violations, ``run --compare-litert`` found a difference)
  or 2 (bad input); never a traceback;
- on status 2 exactly one ``quantspec CMD: error:`` line (argparse's usage lines may precede it for
  a malformed command line; one-line warnings may precede it too);
- on status 0 of quantize / dequantize the output file reads back, and nothing else is left beside it
  (no temporary file).

``QUANTSPEC_FUZZ_EXAMPLES`` scales it (fuzz_support).  A new command joins :func:`command_lines` (and its
input files :func:`_files`)."""

from __future__ import annotations

import contextlib
import io
import os
import random
import shutil
import traceback

import numpy as np
import pytest
from hypothesis import given, seed
from hypothesis import strategies as st

import fuzz_files
import fuzz_support as F
import refs
import test_fuzz_checkpoints as ckf
import test_fuzz_onnx_models as oxf
from quantspec.cli import main

_SCALES = ["0.1", "0.05", "1", "0", "-0.5", "1e-45", "1e400", "nan", "inf", "0.1,0.2,0.3", "0.1,0.2", "abc", "",
           "@scale.npy", "@missing.npy", "@x.npz"]
_ZPS = ["0", "3", "-3", "128", "-129", "2.5", "1e30", "0,1,2", "x", "@zp.npy"]
_TYPES = ["int8", "uint8", "int4", "uint4", "int16", "float8e4m3fn", "float8e5m2", "float4e2m1", "float6e3m2",
          "uint2", "float", "int64", "nonsense"]
_INTS = ["0", "1", "-1", "2", "7", "-9", "99999999999999999999", "1.5", "x"]


def _option(draw, name, values):
    return [name, draw(st.sampled_from(values))]


def _onnx_options(draw, direction):
    opts = _option(draw, "--scale", _SCALES)
    for name, values, p in (("--zero-point", _ZPS, 0.4), ("--output-dtype", _TYPES if direction == "quantize" else
                                                            ["float", "float16", "bfloat16", "int8"], 0.6),
                            ("--axis", _INTS, 0.3), ("--block-size", _INTS, 0.2),
                            ("--opset", ["10", "13", "19", "21", "23", "25", "28", "7", "x"], 0.2),
                            ("--compat", ["spec", "reference", "onnxruntime", "x"], 0.3),
                            ("--scale-dtype", ["float", "float16", "bfloat16", "float8e8m0", "int32", "x"], 0.15),
                            ("--saturate", ["0", "1", "2"], 0.1), ("--precision", ["float16", "float", "x"], 0.1),
                            ("--input-dtype", ["int4", "float8e4m3fn", "x"], 0.15)):
        if F.chance(draw, p):
            opts += _option(draw, name, values)
    return opts


def _tf_options(draw, direction):
    opts = []
    T = ["qint8", "quint8", "qint16", "quint16", "qint32", "int8"]
    if direction == "quantize" or draw(st.booleans()):
        opts += _option(draw, "--T", T)
    for name, values, p in (("--min-range", ["-1", "0", "-6", "1", "nan", "-1e400", "x"], 0.9),
                            ("--max-range", ["1", "6", "0", "-1", "inf", "1e39", "x"], 0.9),
                            ("--mode", ["MIN_COMBINED", "MIN_FIRST", "SCALED", "x"], 0.4),
                            ("--round-mode", ["HALF_AWAY_FROM_ZERO", "HALF_TO_EVEN"], 0.2),
                            ("--ensure-minimum-range", ["0", "0.01", "-1", "nan", "1e400"], 0.2),
                            ("--axis", _INTS, 0.3), ("--kernel", ["eigen", "onednn", "x"], 0.2),
                            ("--dtype", ["float32", "bfloat16"], 0.2)):
        if F.chance(draw, p):
            opts += _option(draw, name, values)
    if draw(st.booleans()):
        opts.append("--narrow-range")
    return opts


def _litert_options(draw, direction):
    opts = []
    for name, values, p in (("--scale", _SCALES, 0.7), ("--zero-point", _ZPS, 0.4), ("--axis", _INTS, 0.3)):
        if F.chance(draw, p):
            opts += _option(draw, name, values)
    if direction == "quantize":
        how = draw(st.sampled_from([None, "--range", "--from-data", "--weights", "--bias"]))
        if how == "--range":
            opts += ["--range", draw(st.sampled_from(["-1", "0", "nan", "x"])), draw(st.sampled_from(["1", "-1", "inf"]))]
        elif how:
            opts.append(how)
        if F.chance(draw, 0.15):
            opts.append("--per-tensor")
    return opts


_OPTIONS = {"onnx": _onnx_options, "tf": _tf_options, "litert": _litert_options}
_INPUTS = ["x.npy", "q.npy", "x.npz", "x.safetensors", "big.npy", "q4.npy", "empty.npy", "scalar.npy",
           "damaged.npy", "damaged.safetensors", "missing.npy", "x.txt", "model.tflite"]
_OUTPUTS = ["y.npy", "y.npz", "y.safetensors", "y.txt", "nodir/y.npy", "x.npy", "y"]


def _files(d, rng):
    """The input files of one example (rng: its seed), written into the directory ``d``."""
    from quantspec._tensorfiles.tensorio import write_tensors

    x = F.values(rng, (4, 3), np.float32, 0.05)
    np.save(d / "x.npy", x)
    np.save(d / "q.npy", rng.integers(-128, 128, (4, 3)).astype(np.int8))
    np.save(d / "q4.npy", rng.integers(-8, 8, (3, 4)).astype(np.int8))
    np.save(d / "big.npy", F.values(rng, (300, 7), np.float32, 0.02))
    np.save(d / "empty.npy", np.zeros((0, 3), np.float32))
    np.save(d / "scalar.npy", np.float32(rng.normal()))
    np.save(d / "scale.npy", np.array([0.1, 0.2, 0.3], np.float32))
    np.save(d / "zp.npy", np.array([0, 1, 2], np.int8))
    np.savez(d / "x.npz", a=x, b=np.float32([1.5, -2.5]), c=rng.integers(-3, 3, (2, 2)).astype(np.int8))
    write_tensors(d / "x.safetensors", {"w": x, "v": F.values(rng, (3,), np.float32)})
    raw = (d / "x.npy").read_bytes()
    (d / "damaged.npy").write_bytes(raw[:60] + b"\xff" + raw[61:-5])
    st_raw = (d / "x.safetensors").read_bytes()
    (d / "damaged.safetensors").write_bytes(st_raw[:20] + b"9999" + st_raw[24:])
    (d / "x.txt").write_text("hello")
    seeds = fuzz_files.MODEL_FORMATS[".tflite"].seeds()
    name = sorted(seeds)[int(rng.integers(len(seeds)))]
    data = seeds[name] if rng.random() < 0.7 else fuzz_files.mutate(seeds[name], random.Random(int(
        rng.integers(1 << 30))))
    (d / "model.tflite").write_bytes(data)
    # an .onnx model (sometimes damaged) and a small sharded checkpoint (sometimes damaged)
    r = random.Random(int(rng.integers(1 << 30)))
    onnx_seeds = _onnx_seeds()
    data = onnx_seeds[sorted(onnx_seeds)[r.randrange(len(onnx_seeds))]][0]
    (d / "model.onnx").write_bytes(data if r.random() < 0.7 else fuzz_files.mutate(data, r))
    ckf.write_sharded(d / "ckpt", ckf.seed_shards(np.random.default_rng(int(rng.integers(1 << 30)))))
    if r.random() < 0.3:
        victim = r.choice(sorted((d / "ckpt").iterdir()))
        victim.write_bytes(fuzz_files.mutate(victim.read_bytes(), r))


_ONNX_SEEDS: list = []


def _onnx_seeds():
    if not _ONNX_SEEDS:
        _ONNX_SEEDS.append(oxf._seeds())
    return _ONNX_SEEDS[0]


@st.composite
def command_lines(draw):
    cmd = draw(st.sampled_from(["quantize", "dequantize", "check", "run", "convert", "verify", "audit", "run",
                                "equiv", "equiv", "example", "warmup"]))
    if cmd in ("quantize", "dequantize"):
        spec = draw(st.sampled_from(["onnx", "tf", "litert"]))
        argv = [cmd, draw(st.sampled_from(_INPUTS)), draw(st.sampled_from(_OUTPUTS)), "--spec", spec]
        argv += _OPTIONS[spec](draw, cmd)
        if F.chance(draw, 0.1):
            argv += ["--tensor", draw(st.sampled_from(["a", "w", "zz"]))]
    elif cmd == "check":
        argv = ["check", draw(st.sampled_from(["model.tflite", "model.tflite", "model.onnx", "x.npy",
                                               "missing.tflite"]))]
        if draw(st.booleans()):
            argv.append("--json")
    elif cmd == "audit":
        argv = ["audit", draw(st.sampled_from(["model.onnx", "model.onnx", "model.tflite", "x.npy"]))]
        if F.chance(draw, 0.3):
            argv.append("--json")
        if F.chance(draw, 0.3):
            argv.append("--static")
    elif cmd == "convert":
        argv = ["convert", draw(st.sampled_from(["ckpt", "ckpt", "x.safetensors", "x.npz", "x.npy", "model.onnx",
                                                 "damaged.safetensors", "missing"])),
                draw(st.sampled_from(["out", "out", "out.onnx", "x.npy"]))]
        if F.chance(draw, 0.9):
            argv += ["--scheme", draw(st.sampled_from(["int8", "int4-b16", "fp8-e4m3", "mxfp4", "uint8-asym", "x",
                                                      ""]))]
        if F.chance(draw, 0.3):
            argv += ["--format", draw(st.sampled_from(["quantspec", "compressed-tensors", "x"]))]
        if F.chance(draw, 0.2):
            argv += ["--max-shard-size", draw(st.sampled_from(["1000", "2GB", "0", "-1", "x"]))]
        if F.chance(draw, 0.1):
            argv += ["--exclude", draw(st.sampled_from(["*", "layer.0.*", "["]))]
        argv.append("--quiet")
    elif cmd == "verify":
        argv = ["verify", draw(st.sampled_from(["ckpt", "ckpt", "x.safetensors", "missing"])),
                draw(st.sampled_from(["ckpt", "out", "x.npy", "missing"]))]
        if F.chance(draw, 0.3):
            argv.append("--params-from-dst")
        if F.chance(draw, 0.3):
            argv.append("--json")
    elif cmd == "run":
        argv = ["run", draw(st.sampled_from(["model.tflite", "model.tflite", "x.npy"]))]
        if F.chance(draw, 0.8):
            argv += ["--random", draw(st.sampled_from(["0", "7", "-1", "x"]))]
        else:
            argv += ["--input", draw(st.sampled_from(_INPUTS))]
        if F.chance(draw, 0.3):
            argv.append("--compare-litert")
        if F.chance(draw, 0.2):
            argv += ["--output", draw(st.sampled_from(_OUTPUTS))]
        if F.chance(draw, 0.2):
            argv += ["--sum-semantics", draw(st.sampled_from(["correct", "reference", "x"]))]
        if F.chance(draw, 0.4):
            argv += ["--kernels", draw(st.sampled_from(["reference", "optimized", "xnnpack", "optimized", "xnnpack",
                                                        "x"]))]
        if F.chance(draw, 0.3):
            argv += ["--resolver", draw(st.sampled_from(["reference", "optimized", "default", "x"]))]
    elif cmd == "equiv":
        argv = ["equiv", "--from", _equiv_source(draw), "--to", _equiv_target(draw)]
        argv += ["--inputs", draw(st.sampled_from(["float16", "bfloat16", "float16", "x"]))]   # never float32: minutes
        if F.chance(draw, 0.4):
            argv.append("--json")
        if F.chance(draw, 0.05):
            argv.remove(draw(st.sampled_from(["--from", "--to"])))
    elif cmd == "example":
        argv = ["example"] + draw(st.sampled_from([["out"], ["out"], ["."], ["x.npy"], ["nodir/deeper"], []]))
    else:   # warmup: only with bad arguments (it must fail at once; a real warmup takes minutes)
        argv = ["warmup"] + draw(st.sampled_from([["--spec", "x"], ["--processes", "x"], ["--processes", "0"],
                                                  ["--processes", "-1"], ["--processes", "1.5"], ["--spec"],
                                                  ["--spec", "onnx", "--processes", "x"], ["--bogus"]]))
    if F.chance(draw, 0.03) and cmd != "warmup":
        argv.insert(draw(st.integers(1, len(argv))), draw(st.sampled_from(["--bogus", "-h", "--help", "--", "-"])))
    return argv, draw(st.integers(0, 2 ** 32 - 1))


def _equiv_source(draw) -> str:
    """A drawn ``--from`` string (fuzz_equiv's records, sometimes broken), never one whose translation
    or comparison is slow: codes wider than 8 bits are translated in seconds, every 32-bit code of a
    dequantizer compared in minutes."""
    import fuzz_api  # noqa: F401 - imported first: it imports fuzz_equiv to register its recipes
    import fuzz_equiv

    text = fuzz_equiv.spec_string(draw, wild=0.5)
    rec = fuzz_equiv._parsed(text)
    if rec is not None and fuzz_equiv._bits(rec) > 8:
        text = fuzz_equiv._break(draw, text)
        rec = fuzz_equiv._parsed(text)
        if rec is not None and fuzz_equiv._bits(rec) > 8:
            text = "tf:QuantizeV2 min=-1 max=1 T=" + draw(st.sampled_from(["x", "qint32"]))
    elif F.chance(draw, 0.2):
        text = fuzz_equiv._break(draw, text)
        rec = fuzz_equiv._parsed(text)
        if rec is not None and fuzz_equiv._bits(rec) > 8:
            text = "onnx:QuantizeLinear scale=x"
    return text


def _equiv_target(draw) -> str:
    """A drawn ``--to``: a spec or SPEC:OP with fixed fields (a translation), or a complete 8-bit record
    (a comparison)."""
    import fuzz_api  # noqa: F401 - imported first: it imports fuzz_equiv to register its recipes
    import fuzz_equiv

    if F.chance(draw, 0.3):
        for _ in range(3):
            text = fuzz_equiv.spec_string(draw, wild=0.3)
            rec = fuzz_equiv._parsed(text)
            if rec is None or fuzz_equiv._bits(rec) <= 8:
                return text
    return draw(st.sampled_from([t for t in fuzz_equiv._TARGETS] + ["x", "onnx:Foo", "onnx opset=x", ""]))


def run_cli(argv, d):
    """(exit status, stdout, stderr) of ``quantspec ARGV`` run in the directory ``d``, in-process."""
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(d)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as e:           # argparse: --help (0) and usage errors (2)
                code = e.code if isinstance(e.code, int) else 2
            except BaseException:
                code = "raised"
                err.write(traceback.format_exc())
    finally:
        os.chdir(cwd)
    return code, out.getvalue(), err.getvalue()


def test_fuzz_command_line(tmp_path_factory):
    refs.require("ai_edge_litert.interpreter")
    from quantspec._tensorfiles.tensorio import read_tensors

    base = tmp_path_factory.mktemp("cli")
    counts = {0: 0, 1: 0, 2: 0}

    @F.fuzz_settings(7.0)   # 350 in CI: the commands added later (equiv, example, warmup) keep the others at ~300
    @seed(F.SEED)
    @given(command_lines())
    def run(example):
        argv, file_seed = example
        d = base / "work"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
        _files(d, np.random.default_rng(file_seed))
        before = set(os.listdir(d))
        code, out, err = run_cli(argv, d)
        what = f"quantspec {' '.join(argv)}\n--- stdout:\n{out[-2000:]}\n--- stderr:\n{err[-3000:]}"
        assert code in (0, 1, 2), f"exit status {code!r}: {what}"
        assert "Traceback" not in err and "Traceback" not in out, f"a traceback: {what}"
        counts[code] += 1
        lines = [ln for ln in err.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ": error:" in ln]
        if code == 2:
            assert len(errors) == 1, f"status 2 with {len(errors)} error lines: {what}"
            assert errors[0].startswith(f"quantspec {argv[0]}: error:"), what
        if code == 1:
            assert argv[0] in ("check", "run", "verify", "audit", "equiv"), what
        if argv[0] == "warmup":
            assert code == 2, f"warmup with a bad argument did not fail: {what}"
        if code == 0 and argv[0] == "example" and "-h" not in argv and "--help" not in argv:
            named, after = [], False           # positional: "-", a word, anything after "--"
            for a in argv[1:]:
                if a == "--" and not after:
                    after = True
                elif after or a == "-" or not a.startswith("-"):
                    named.append(a)
            where = d / (named[-1] if named else ".")
            assert (where / "model.tflite").is_file() and (where / "weights.npy").is_file(), what
        left = set(os.listdir(d)) - before
        assert not any(n.endswith(".tmp") for n in left), f"a temporary file is left: {left}: {what}"
        if code == 0 and argv[0] in ("quantize", "dequantize") and "-h" not in argv and "--help" not in argv:
            target = d / argv[2]
            F.outcome(lambda: read_tensors(target), what)
            assert read_tensors(target), what

    run()
    print(f"command lines: exit status counts {counts}")
    assert counts[0] and counts[2], counts     # both successes and refusals occur
