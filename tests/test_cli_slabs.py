"""``quantspec quantize|dequantize`` on large files: inputs mapped, tensors computed a slab of rows at a
time while the output is written (quantspec._tensorfiles.slabs).

The slab size and the mapping threshold are lowered so that small tensors take the slab path; every
result is compared byte for byte with one call of the public function on the whole tensor, and each
case checks that it did (or, where the parameters cannot be cut, did not) go a slab at a time."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import quantspec.litert as ql
import quantspec.onnx as qo
import quantspec.tf as qt
from quantspec._tensorfiles import slabs, tensorio
from quantspec._tensorfiles.tensorio import read_tensors
from quantspec.cli import main
from quantspec.errors import ShapeError

FORMATS = [".npy", ".npz", ".safetensors"]


@pytest.fixture
def slabbed(monkeypatch):
    """Slabs of 40 elements, every file mapped; returns the names written as streams."""
    monkeypatch.setattr(slabs, "SLAB", 40)
    monkeypatch.setattr(tensorio, "MAP_FROM", 1)
    streamed: list[str] = []
    calls: list[tuple[int, int]] = []
    real_outputs = slabs.outputs

    def spy(jobs):
        def counted(job):
            def compute(lo, hi):
                calls.append((lo, hi))
                return job.compute(lo, hi)
            return slabs.Job(job.name, job.x, job.step, compute)

        out = real_outputs([counted(j) for j in jobs])
        streamed.extend(n for n, v in out.items() if isinstance(v, tensorio.Stream))
        return out

    monkeypatch.setattr(slabs, "outputs", spy)
    return streamed, calls


def _activations(shape, seed=0):
    """Grid values with ties at the scales used below, specials and large values."""
    rng = np.random.default_rng(seed)
    x = (rng.integers(-400, 400, size=shape) * np.float32(0.025)).astype(np.float32)
    flat = x.reshape(-1)
    flat[:8] = [np.nan, np.inf, -np.inf, -0.0, 1e-42, 3e38, -3e38, 0.0125]
    return x


def _weights(shape, seed=1):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _save(path, arrays: dict):
    tensorio.write_tensors(path, arrays)
    return path


def _numbers(values) -> str:
    return ",".join(repr(float(v)) for v in values)


def _cli(direction, src, dst, *flags):
    assert main([direction, str(src), str(dst), *map(str, flags)]) == 0
    return read_tensors(dst)


def _out(tmp_path, name, fmt):
    """An output file holding tensor ``name`` (a .npy file's one tensor is named after the file)."""
    (tmp_path / "o").mkdir(exist_ok=True)
    return tmp_path / "o" / f"{name}{fmt}"


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


# -- ONNX ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS)
def test_onnx_per_tensor(tmp_path, slabbed, fmt):
    streamed, calls = slabbed
    x = _activations((37, 5))
    out = _cli("quantize", _save(tmp_path / "x.npy", {"x": x}), _out(tmp_path, "x", fmt), "--spec", "onnx",
               "--scale", "0.05", "--zero-point", "3", "--output-dtype", "int8")
    _same(out["x"], qo.quantize_linear(x, np.float32(0.05), np.int8(3)))
    assert streamed == ["x"] and len(calls) > 4


@pytest.mark.parametrize("fmt", FORMATS)
def test_onnx_per_axis_along_axis_0_cuts_the_parameters(tmp_path, slabbed, fmt):
    streamed, calls = slabbed
    x = _activations((37, 5))
    s = (np.arange(37, dtype=np.float32) + 1) * np.float32(0.0125)
    z = (np.arange(37) % 7 - 3).astype(np.int8)
    out = _cli("quantize", _save(tmp_path / "x.npy", {"x": x}), _out(tmp_path, "x", fmt), "--spec", "onnx",
               "--scale", _numbers(s), f"--zero-point={_numbers(z)}", "--output-dtype", "int8", "--axis", "0")
    _same(out["x"], qo.quantize_linear(x, s, z, axis=0))
    assert streamed == ["x"] and (8, 16) in calls


def test_onnx_per_axis_along_another_axis_and_rows_larger_than_a_slab(tmp_path, slabbed):
    streamed, calls = slabbed
    x = _activations((4, 7, 9))  # 63 elements a row: one row a slab
    s = np.linspace(0.01, 0.09, 9, dtype=np.float32)
    out = _cli("quantize", _save(tmp_path / "x.npy", {"x": x}), tmp_path / "q.npz", "--spec", "onnx",
               "--scale", _numbers(s), "--output-dtype", "uint8", "--zero-point", _numbers([128] * 9), "--axis", "-1")
    _same(out["x"], qo.quantize_linear(x, s, np.full(9, 128, np.uint8), axis=-1))
    assert streamed == ["x"] and (3, 4) in calls


@pytest.mark.parametrize("fmt", FORMATS)
def test_onnx_blocked_along_axis_0_int4_and_back(tmp_path, slabbed, fmt):
    streamed, calls = slabbed
    w = _weights((37, 5))  # blocks of 4 rows; the last block is partial
    s = np.random.default_rng(2).uniform(0.05, 0.3, size=(10, 5)).astype(np.float32)
    _save(tmp_path / "s.npy", {"s": s})
    out = _cli("quantize", _save(tmp_path / "w.npy", {"w": w}), _out(tmp_path, "w", fmt), "--spec", "onnx",
               "--scale", f"@{tmp_path / 's.npy'}", "--axis", "0", "--block-size", "4", "--output-dtype", "int4")
    want = qo.quantize_linear(w, s, axis=0, block_size=4, output_dtype="int4")
    if fmt == ".npy":
        assert out["w"].dtype == np.int8
        out = {"w": tensorio.from_storage(out["w"], tensorio.qtype("int4"))}
    _same(out["w"], want)
    assert streamed == ["w"] and all(lo % 4 == 0 for lo, _ in calls)
    streamed.clear()
    src = _out(tmp_path, "w", fmt)
    extra = ["--input-dtype", "int4"] if fmt == ".npy" else []
    back = _cli("dequantize", src, tmp_path / "d.safetensors", "--spec", "onnx", "--scale",
                f"@{tmp_path / 's.npy'}", "--axis", "0", "--block-size", "4", *extra)
    _same(next(iter(back.values())), qo.dequantize_linear(want, s, axis=0, block_size=4))
    assert len(streamed) == 1


def test_onnx_blocked_along_axis_1_and_a_last_slab_that_absorbs(tmp_path, slabbed):
    streamed, calls = slabbed
    w = _weights((33, 6))  # 6 rows a slab; blocks of 2 along axis 1: the scale's rows are cut
    s = np.random.default_rng(3).uniform(0.05, 0.3, size=(33, 3)).astype(np.float16)
    z = np.random.default_rng(4).integers(-2, 3, size=(33, 3)).astype(ml_dtypes.int4)
    _save(tmp_path / "s.npy", {"s": s})
    _save(tmp_path / "z.npz", {"z": z})
    out = _cli("quantize", _save(tmp_path / "w.npy", {"w": w}), tmp_path / "q.npz", "--spec", "onnx",
               "--scale", f"@{tmp_path / 's.npy'}", "--zero-point", f"@{tmp_path / 'z.npz'}", "--axis", "1",
               "--block-size", "2", "--output-dtype", "int4")
    _same(out["w"], qo.quantize_linear(w, s, z, axis=1, block_size=2))
    assert streamed == ["w"] and calls[-1][1] == 33


def test_onnx_float8_and_dequantize_from_safetensors(tmp_path, slabbed):
    streamed, _ = slabbed
    x = _activations((50,))
    out = _cli("quantize", _save(tmp_path / "x.npy", {"x": x}), tmp_path / "q.safetensors", "--spec", "onnx",
               "--scale", "0.5", "--output-dtype", "float8e4m3fn", "--saturate", "0")
    want = qo.quantize_linear(x, np.float32(0.5), output_dtype="float8e4m3fn", saturate=False)
    _same(out["x"], want)
    back = _cli("dequantize", tmp_path / "q.safetensors", tmp_path / "d.npy", "--spec", "onnx", "--scale", "0.5")
    _same(back["d"], qo.dequantize_linear(want, np.float32(0.5)))
    assert streamed == ["x", "x"]


def test_onnx_parameters_that_cannot_be_cut_compute_whole(tmp_path, slabbed):
    """onnx.reference accepts a blocked scale longer than the blocked axis needs: the tensor is then
    computed in one call."""
    streamed, _ = slabbed
    w = _weights((12, 5))
    s = np.full((4, 5), 0.1, np.float32)  # blocks of 4 along axis 0 need 3 rows; 4 given
    _save(tmp_path / "s.npy", {"s": s})
    out = _cli("quantize", _save(tmp_path / "w.npy", {"w": w}), tmp_path / "q.npz", "--spec", "onnx",
               "--scale", f"@{tmp_path / 's.npy'}", "--axis", "0", "--block-size", "4", "--output-dtype", "int8",
               "--compat", "reference")
    _same(out["w"], qo.quantize_linear(w, s, axis=0, block_size=4, output_dtype="int8", compat="reference"))
    assert streamed == []


# -- TensorFlow ------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", [".npz", ".safetensors"])
def test_tf_per_axis_along_axis_0_keeps_the_whole_output_range(tmp_path, slabbed, fmt):
    streamed, _ = slabbed
    x = _activations((37, 5))
    lo = -np.linspace(0.5, 9, 37).astype(np.float32)
    hi = np.linspace(0.25, 7, 37).astype(np.float32)
    out = _cli("quantize", _save(tmp_path / "x.npy", {"x": x}), tmp_path / f"q{fmt}", "--spec", "tf",
               "--T", "quint8", f"--min-range={_numbers(lo)}", "--max-range", _numbers(hi), "--axis", "0",
               "--mode", "SCALED")
    codes, omin, omax = qt.quantize(x, lo, hi, "quint8", axis=0, mode="SCALED")
    _same(out["x"], codes)
    _same(out["x.output_min"], omin)
    _same(out["x.output_max"], omax)
    assert streamed == ["x"]
    streamed.clear()
    back = _cli("dequantize", tmp_path / f"q{fmt}", tmp_path / "d.npz", "--spec", "tf", "--axis", "0",
                "--mode", "SCALED")
    _same(back["x"], qt.dequantize(codes, omin, omax, axis=0, mode="SCALED"))
    assert streamed == ["x"]


@pytest.mark.parametrize("mode", ["MIN_COMBINED", "MIN_FIRST", "SCALED"])
def test_tf_per_tensor_every_mode(tmp_path, slabbed, mode, capsys):
    streamed, _ = slabbed
    x = _activations((9, 11))
    out = _cli("quantize", _save(tmp_path / "x.npy", {"x": x}), _out(tmp_path, "x", ".npy"), "--spec", "tf",
               "--T", "qint8", "--min-range", "-3", "--max-range", "2.5", "--mode", mode)
    codes, omin, omax = qt.quantize(x, -3.0, 2.5, "qint8", mode=mode)
    _same(out["x"], codes)
    assert f"output_min={float(omin)!r} output_max={float(omax)!r}" in capsys.readouterr().err
    assert streamed == ["x"]


# -- LiteRT ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS)
def test_litert_weights_per_axis_from_the_data(tmp_path, slabbed, fmt):
    streamed, calls = slabbed
    w = _weights((33, 5))  # 8 rows a slab: 32 + 1, and a slab of one row would be per-tensor
    out = _cli("quantize", _save(tmp_path / "w.npy", {"w": w}), _out(tmp_path, "w", fmt), "--spec", "litert",
               "--weights")
    p = ql.weight_params(w, 0)
    got = next(iter(out.values()))
    _same(got, ql.quantize_weights(w, p))
    assert streamed == ["w"] and calls[-1] == (24, 33) and all(hi - lo >= 2 for lo, hi in calls)


def test_litert_per_tensor_weights_are_computed_whole(tmp_path, slabbed):
    """The converter recomputes max |w| over the whole tensor: not a slab at a time."""
    streamed, _ = slabbed
    w = _weights((33, 5))
    w[30] *= 10  # the largest values in the last slab
    out = _cli("quantize", _save(tmp_path / "w.npy", {"w": w}), tmp_path / "q.npz", "--spec", "litert",
               "--weights", "--per-tensor")
    _same(out["w"], ql.quantize_weights(w, ql.weight_params(w, None)))
    assert streamed == []


@pytest.mark.parametrize("how", [["--range", "-2", "3"], ["--from-data"], ["--scale", "0.03", "--zero-point", "-5"]])
def test_litert_activations(tmp_path, slabbed, how):
    streamed, _ = slabbed
    x = _activations((21, 4))
    x.reshape(-1)[1:7] = 0.5  # --from-data needs a range float32 can hold (NaN is left out)
    out = _cli("quantize", _save(tmp_path / "x.npy", {"x": x}), tmp_path / "q.npz", "--spec", "litert", *how)
    if how[0] == "--range":
        p = ql.activation_params(-2.0, 3.0)
    elif how[0] == "--from-data":
        p = ql.activation_params(float(np.nanmin(x)), float(np.nanmax(x)))
    else:
        p = ql.QuantParams(np.float32(0.03), -5)
    _same(out["x"], ql.quantize(x, p))
    assert streamed == ["x"]


def test_litert_bias_and_per_axis_dequantize(tmp_path, slabbed):
    streamed, _ = slabbed
    b = _weights((45,)) * np.float32(100)
    s = np.linspace(0.001, 0.01, 45).astype(np.float32)
    out = _cli("quantize", _save(tmp_path / "b.npy", {"b": b}), tmp_path / "q.npz", "--spec", "litert", "--bias",
               "--scale", _numbers(s))
    p = ql.QuantParams(s, 0, 0)
    _same(out["b"], ql.quantize_bias(b, p))
    q = np.random.default_rng(5).integers(-128, 128, size=(45, 3)).astype(np.int8)
    zp = (np.arange(45) % 9 - 4)
    back = _cli("dequantize", _save(tmp_path / "q.npy", {"q": q}), tmp_path / "d.npz", "--spec", "litert",
                "--scale", _numbers(s), f"--zero-point={','.join(map(str, zp))}", "--axis", "0")
    _same(back["q"], ql.dequantize(q, ql.QuantParams(s, zp, 0)))
    assert streamed == ["b", "q"]


# -- failures --------------------------------------------------------------------------------------
def test_an_error_in_a_later_slab_leaves_no_output(tmp_path, slabbed, capsys):
    _, calls = slabbed
    w = _weights((40, 5))
    w[35, 2] = np.nan
    assert main(["quantize", str(_save(tmp_path / "w.npy", {"w": w})), str(tmp_path / "q.npz"), "--spec", "litert",
                 "--weights", "--scale", _numbers(np.full(40, 0.01))]) == 2
    assert "RangeError: w: must be finite" in capsys.readouterr().err
    assert len(calls) > 2  # it failed in a later slab, after earlier ones were written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.npy"]


def test_onnx_rules_are_checked_on_the_whole_tensor(tmp_path, slabbed, capsys):
    """A per-axis scale longer than axis 0 is refused as the whole call refuses it, not cut."""
    x = _activations((37, 5))
    assert main(["quantize", str(_save(tmp_path / "x.npy", {"x": x})), str(tmp_path / "q.npz"), "--spec", "onnx",
                 "--scale", _numbers(np.full(40, 0.1)), "--axis", "0", "--output-dtype", "int8"]) == 2
    with pytest.raises(ShapeError) as direct:
        qo.quantize_linear(x, np.full(40, 0.1, np.float32), axis=0, output_dtype="int8")
    assert f"ShapeError: {direct.value}" in capsys.readouterr().err


# -- memory ----------------------------------------------------------------------------------------
_PEAK = textwrap.dedent("""
    import sys
    from quantspec.cli import main

    def status(key):
        return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(key)) // 1024

    warm, big = sys.argv[1].split("|"), sys.argv[2].split("|")
    assert main(warm) == 0                     # loads and compiles what the big call needs
    open("/proc/self/clear_refs", "w").write("5")  # Linux: the peak (VmHWM) starts again from here
    before = status("VmRSS:")
    assert main(big) == 0
    print(status("VmHWM:") - before)
""")


def _growth_mib(warm: list, big: list) -> int:
    """How much the resident memory of one process grows at its peak while it runs ``big``, after
    ``warm`` loaded and compiled everything."""
    r = subprocess.run([sys.executable, "-c", _PEAK, "|".join(map(str, warm)), "|".join(map(str, big))],
                       capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="2"), timeout=300)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.split()[-1])


@pytest.mark.skipif(sys.platform != "linux", reason="measures with /proc/self (Linux)")
@pytest.mark.parametrize("middle, codes", [(".safetensors", "int8"), (".npz", "int4"), (".npy", "int4")])
def test_memory_holds_a_slab_not_the_tensors(tmp_path, middle, codes):
    """A 192 MiB float32 tensor quantized (.npy, mapped) to 48 MiB of codes, and the codes
    dequantized (.safetensors, .npz or .npy, mapped): the peak resident memory grows by about a slab
    (64 MiB of float32 and 16 MiB of codes), not by the 240 MiB of input and output held whole.
    int4 codes are stored a byte each (as int8 values in .npy); they are not converted whole either."""
    rows = 48 * 1024
    x = np.lib.format.open_memmap(tmp_path / "big.npy", mode="w+", dtype=np.float32, shape=(rows, 1024))
    rng = np.random.default_rng(0)
    for i in range(0, rows, 8192):
        x[i:i + 8192] = rng.standard_normal((8192, 1024), dtype=np.float32)
    x.flush()
    del x
    flags = ["--spec", "onnx", "--scale", "0.02" if codes == "int8" else "0.5", "--zero-point", "0"]
    q = ["quantize", "--output-dtype", codes, *flags]
    d = ["dequantize", *flags] + (["--input-dtype", codes] if middle == ".npy" else [])
    # the warm run is the same work into another file: it compiles (or loads) every kernel the
    # measured run needs, so the peak is the data's, not the compiler's (a cold numba cache adds ~50 MiB)
    grown_q = _growth_mib(q + [tmp_path / "big.npy", tmp_path / f"warm_q{middle}"],
                          q + [tmp_path / "big.npy", tmp_path / f"big_q{middle}"])
    grown_d = _growth_mib(d + [tmp_path / f"big_q{middle}", tmp_path / "warm_d.npy"],
                          d + [tmp_path / f"big_q{middle}", tmp_path / "big_d.npy"])
    # measured here: quantize 81 MiB (int8) / 97 (int4, whose slabs are converted to int8 values for
    # the file); dequantize 82.  int4 codes converted whole when read took dequantize to 113 (.npz) / 160
    assert grown_q < 150 and grown_d < 105, (grown_q, grown_d)
    big = np.load(tmp_path / "big.npy", mmap_mode="r")
    (got,) = read_tensors(tmp_path / f"big_q{middle}", mapped=True).values()
    if middle == ".npy":
        got = tensorio.from_storage(got, tensorio.qtype(codes))
    back = np.load(tmp_path / "big_d.npy", mmap_mode="r")
    scale, zero = (np.float32(0.02), np.int8(0)) if codes == "int8" else (np.float32(0.5), ml_dtypes.int4(0))
    for i in range(0, rows, 8192):
        want = qo.quantize_linear(big[i:i + 8192], scale, zero)
        # values: a mapped int4 file is read as a view of its bytes, whose high bits may be set
        assert got[i:i + 8192].astype(np.int8).tobytes() == want.astype(np.int8).tobytes()
        assert back[i:i + 8192].tobytes() == qo.dequantize_linear(want, scale, zero).tobytes()


def test_onnx_one_scale_array_per_tensor_by_name(tmp_path, slabbed, capsys):
    """A model's weights in one file, their blocked scales (and zero points) in another, by name: each
    tensor takes its own, a slab at a time."""
    streamed, _ = slabbed
    w = {"w1": _weights((37, 64), 4), "w2": _weights((16, 32), 5)}
    rng = np.random.default_rng(6)
    s = {n: rng.uniform(0.05, 0.3, size=(a.shape[0], a.shape[1] // 32)).astype(np.float32) for n, a in w.items()}
    z = {n: rng.integers(-3, 4, size=v.shape).astype(ml_dtypes.int4) for n, v in s.items()}
    _save(tmp_path / "w.safetensors", w)
    _save(tmp_path / "s.safetensors", s)
    _save(tmp_path / "z.npz", z)
    out = _cli("quantize", tmp_path / "w.safetensors", tmp_path / "q.safetensors", "--spec", "onnx",
               "--scale", f"@{tmp_path / 's.safetensors'}", "--zero-point", f"@{tmp_path / 'z.npz'}",
               "--axis", "1", "--block-size", "32")
    for n, a in w.items():
        _same(out[n], qo.quantize_linear(a, s[n], z[n], axis=1, block_size=32))
    assert streamed == ["w1", "w2"]
    back = _cli("dequantize", tmp_path / "q.safetensors", tmp_path / "d.npz", "--spec", "onnx",
                "--scale", f"@{tmp_path / 's.safetensors'}", "--zero-point", f"@{tmp_path / 'z.npz'}",
                "--axis", "1", "--block-size", "32")
    for n in w:
        _same(back[n], qo.dequantize_linear(out[n], s[n], z[n], axis=1, block_size=32))
    _save(tmp_path / "s_w1.safetensors", {"w1": s["w1"], "other": s["w2"]})
    assert main(["quantize", str(tmp_path / "w.safetensors"), str(tmp_path / "q2.npz"), "--spec", "onnx",
                 "--scale", f"@{tmp_path / 's_w1.safetensors'}", "--axis", "1", "--block-size", "32",
                 "--output-dtype", "int4"]) == 2
    assert "--scale: @FILE holds several arrays, one per input tensor, and none is named 'w2'" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", FORMATS)
def test_onnx_big_endian_files(tmp_path, slabbed, fmt):
    """A big-endian .npy input, scale and zero point (np.save of a '>f4' array): the same bytes as the
    public functions on the same values.  The command used to refuse them ("is a dtype no
    quantization spec uses (got '>f4')") while onnx.quantize_linear accepts a big-endian x; mapped
    big-endian tensors are converted a slab at a time, not copied whole."""
    streamed, calls = slabbed
    x = _activations((37, 5))
    s = (np.arange(37, dtype=np.float32) + 1) * np.float32(0.0125)
    z = (np.arange(37) * 1000).astype(np.uint16)
    np.save(tmp_path / "x.npy", x.astype(">f4"))
    np.save(tmp_path / "s.npy", s.astype(">f4"))
    np.save(tmp_path / "z.npy", z.astype(">u2"))
    out = _cli("quantize", tmp_path / "x.npy", _out(tmp_path, "x", fmt), "--spec", "onnx", "--scale",
               f"@{tmp_path / 's.npy'}", "--zero-point", f"@{tmp_path / 'z.npy'}", "--axis", "0")
    want = qo.quantize_linear(x, s, z, axis=0)
    _same(out["x"], want)
    assert streamed == ["x"] and (8, 16) in calls
    np.save(tmp_path / "q.npy", want.astype(">u2"))
    back = _cli("dequantize", tmp_path / "q.npy", _out(tmp_path, "q", fmt), "--spec", "onnx", "--scale",
                f"@{tmp_path / 's.npy'}", "--zero-point", f"@{tmp_path / 'z.npy'}", "--axis", "0")
    _same(back["q"], qo.dequantize_linear(want, s, z, axis=0))
