"""``quantspec quantize|dequantize --spec tf``, run in-process through quantspec.cli.main."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import quantspec.tf as qt
from quantspec._tensorfiles.tensorio import read_tensors
from quantspec.cli import main
from refs import require

X = np.linspace(-2.5, 2.5, 21, dtype=np.float32)
X2 = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)


@pytest.fixture()
def files(tmp_path):
    np.save(tmp_path / "x.npy", X)
    np.savez(tmp_path / "two.npz", x=X, y=X2)
    return tmp_path


def test_quantize_writes_codes_and_range(files):
    out = files / "q.npz"
    assert main(["quantize", str(files / "x.npy"), str(out), "--spec", "tf", "--T", "qint8", "--min-range", "-1",
                 "--max-range", "2", "--mode", "SCALED", "--round-mode", "HALF_TO_EVEN", "--narrow-range"]) == 0
    z = np.load(out)
    assert sorted(z.files) == ["x", "x.output_max", "x.output_min"]
    codes, omin, omax = qt.quantize(X, -1.0, 2.0, "qint8", mode="SCALED", round_mode="HALF_TO_EVEN", narrow_range=True)
    assert z["x"].dtype == np.int8 and z["x"].tobytes() == codes.tobytes()
    assert z["x.output_min"].tobytes() == omin.tobytes() and z["x.output_max"].tobytes() == omax.tobytes()


def test_quantize_matches_tensorflow(files):
    tf = require("tensorflow")
    out = files / "q.npz"
    assert main(["quantize", str(files / "two.npz"), str(out), "--spec", "tf", "--type", "quint16",
                 "--min-range=-1,-2,-3,-4", "--max-range", "1,2,3,4", "--axis", "0", "--ensure-minimum-range", "0.5",
                 "--tensor", "y"]) == 0
    z = np.load(out)
    r = tf.raw_ops.QuantizeV2(input=X2, min_range=np.array([-1, -2, -3, -4], np.float32),
                              max_range=np.array([1, 2, 3, 4], np.float32), T=tf.quint16, axis=0,
                              ensure_minimum_range=0.5)
    assert z["y"].tobytes() == np.asarray(r.output.numpy()).view(np.uint16).tobytes()
    assert z["y.output_min"].tobytes() == r.output_min.numpy().tobytes()
    assert z["y.output_max"].tobytes() == r.output_max.numpy().tobytes()


def test_npy_output_holds_codes_and_prints_range(files, capsys):
    out = files / "q.npy"
    assert main(["quantize", str(files / "x.npy"), str(out), "--spec", "tf", "--T", "quint8", "--min-range", "0",
                 "--max-range", "6", "--mode", "MIN_FIRST", "--kernel", "onednn"]) == 0
    codes, omin, omax = qt.quantize(X, 0.0, 6.0, "quint8", mode="MIN_FIRST", kernel="onednn")
    assert np.load(out).tobytes() == codes.tobytes()
    err = capsys.readouterr().err
    assert f"output_min={float(omin)!r}" in err and f"output_max={float(omax)!r}" in err


def test_npy_output_refused_for_several_tensors(files, capsys):
    assert main(["quantize", str(files / "two.npz"), str(files / "q.npy"), "--spec", "tf", "--T", "qint8",
                 "--min-range", "-1", "--max-range", "1"]) == 2
    err = capsys.readouterr().err
    assert "TensorFileError" in err and ".npy file holds one tensor" in err
    assert not (files / "q.npy").exists()


def test_dequantize_round_trip_reads_range_from_file(files):
    q, back = files / "q.npz", files / "back.npz"
    assert main(["quantize", str(files / "two.npz"), str(q), "--spec", "tf", "--T", "qint16", "--min-range", "-3",
                 "--max-range", "3", "--mode", "MIN_FIRST"]) == 0
    assert main(["dequantize", str(q), str(back), "--spec", "tf", "--mode", "MIN_FIRST"]) == 0
    z, b = np.load(q), np.load(back)
    assert sorted(b.files) == ["x", "y"]
    for name, src in (("x", X), ("y", X2)):
        want = qt.dequantize(z[name], z[name + ".output_min"], z[name + ".output_max"], mode="MIN_FIRST")
        assert b[name].tobytes() == want.tobytes()
        assert np.abs(b[name] - src).max() < 1e-3


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_dequantize_tensor_filter_still_reads_the_stored_range(files, suffix, capsys):
    """--tensor NAME selects the codes; NAME.output_min / NAME.output_max stay readable from the file
    (they used to be dropped with the unselected tensors: exit 2, '--min-range/--max-range are required')."""
    tf = require("tensorflow")
    q, back = files / f"q{suffix}", files / f"back{suffix}"
    assert main(["quantize", str(files / "two.npz"), str(q), "--spec", "tf", "--T", "quint8", "--min-range", "-3",
                 "--max-range", "3", "--mode", "SCALED"]) == 0
    assert main(["dequantize", str(q), str(back), "--spec", "tf", "--mode", "SCALED", "--tensor", "y"]) == 0, \
        capsys.readouterr().err
    z, b = read_tensors(q), read_tensors(back)
    assert sorted(b) == ["y"]
    want = tf.raw_ops.Dequantize(input=tf.bitcast(tf.constant(z["y"]), tf.quint8), min_range=z["y.output_min"],
                                 max_range=z["y.output_max"], mode="SCALED").numpy()
    assert b["y"].tobytes() == want.tobytes()
    # the range given on the command line still wins over the stored one
    assert main(["dequantize", str(q), str(back), "--spec", "tf", "--mode", "SCALED", "--tensor", "x",
                 "--min-range", "0", "--max-range", "255"]) == 0
    assert read_tensors(back)["x"].tobytes() == z["x"].astype(np.float32).tobytes()
    # a tensor whose range the file does not hold is still refused
    assert main(["dequantize", str(q), str(back), "--spec", "tf", "--tensor", "x.output_min", "--T", "qint32"]) == 2
    assert "are required" in capsys.readouterr().err


def test_dequantize_flags(files):
    codes = np.arange(-128, 128, dtype=np.int8).reshape(4, 64)
    np.save(files / "c.npy", codes)
    out = files / "y.npz"
    assert main(["dequantize", str(files / "c.npy"), str(out), "--spec", "tf", "--min-range", "-1", "--max-range",
                 "1", "--dtype", "bfloat16", "--axis", "-1"]) == 2  # per-axis needs one value per slice
    assert main(["dequantize", str(files / "c.npy"), str(out), "--spec", "tf", "--type", "qint8",
                 "--min-range=-1,-2,-3,-4", "--max-range=1,2,3,4", "--axis", "0", "--dtype", "bfloat16"]) == 0
    got = read_tensors(out)["c"]  # quantspec's .npz files keep bfloat16
    want = qt.dequantize(codes, np.array([-1, -2, -3, -4], np.float32), np.array([1, 2, 3, 4], np.float32), axis=0,
                         dtype="bfloat16")
    assert got.dtype == ml_dtypes.bfloat16 and got.tobytes() == want.tobytes()
    assert main(["dequantize", str(files / "c.npy"), str(out), "--spec", "tf", "--mode", "SCALED",
                 "--narrow-range"]) == 2  # no range given and none in the file


def test_bad_combination_is_exit_2(files, capsys):
    assert main(["quantize", str(files / "x.npy"), str(files / "q.npz"), "--spec", "tf", "--T", "qint8",
                 "--min-range", "-1", "--max-range", "1", "--round-mode", "HALF_TO_EVEN"]) == 2
    assert "HALF_TO_EVEN needs mode 'SCALED'" in capsys.readouterr().err
    assert main(["quantize", str(files / "x.npy"), str(files / "q.npz"), "--spec", "tf", "--T", "qint32",
                 "--min-range", "-1", "--max-range", "1", "--mode", "SCALED", "--round-mode", "HALF_TO_EVEN",
                 "--kernel", "onednn"]) == 2
    assert "RuntimeUnsupportedError" in capsys.readouterr().err


@pytest.mark.parametrize("direction,flags", [
    ("quantize", ["--T", "--type", "--min-range", "--max-range", "--mode", "--round-mode", "--narrow-range", "--axis",
                  "--ensure-minimum-range", "--kernel", "output_min"]),
    ("dequantize", ["--T", "--type", "--min-range", "--max-range", "--mode", "--narrow-range", "--axis", "--dtype",
                    "--kernel", "NAME.output_min"]),
])
def test_help_lists_every_attribute(direction, flags, capsys):
    with pytest.raises(SystemExit) as e:
        main([direction, "--spec", "tf", "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for flag in flags:
        assert flag in text, flag


@pytest.mark.parametrize("fmt", [".npz", ".safetensors"])
def test_an_input_tensor_named_like_a_written_range_is_refused(tmp_path, fmt, capsys):
    """Input tensors 'x' and 'x.output_min': quantize writes x's range as 'x.output_min' and the codes of
    the second tensor under the same name.  The file used to keep one of them silently (the codes),
    losing x's range; the call is refused and nothing is written."""
    np.savez(tmp_path / "clash.npz", **{"x": X, "x.output_min": X})
    out = tmp_path / f"q{fmt}"
    assert main(["quantize", str(tmp_path / "clash.npz"), str(out), "--spec", "tf", "--T", "qint8",
                 "--min-range", "-1", "--max-range", "2"]) == 2
    assert "two tensors named 'x.output_min'" in capsys.readouterr().err
    assert not out.exists()
    # one of them alone is fine
    assert main(["quantize", str(tmp_path / "clash.npz"), str(out), "--spec", "tf", "--T", "qint8",
                 "--min-range", "-1", "--max-range", "2", "--tensor", "x"]) == 0
    assert read_tensors(out)["x.output_min"].tobytes() == qt.quantize(X, -1.0, 2.0, "qint8")[1].tobytes()
