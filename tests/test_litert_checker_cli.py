"""``quantspec check MODEL [--json]``, in-process through quantspec.cli.main: exit 0 conformant,
1 violations, 2 unreadable input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from litert_models import EXAMPLES, edit, example_bytes
from quantspec.cli import main


def broken(tmp_path):
    def softmax_scale(obj):
        obj.subgraphs[0].tensors[7].quantization.scale = [1 / 255]

    path = tmp_path / "broken.tflite"
    path.write_bytes(edit(example_bytes("mlp_softmax"), softmax_scale))
    return path


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_conformant_models_exit_0(name, capsys):
    assert main(["check", EXAMPLES[name]]) == 0
    out = capsys.readouterr().out
    assert "conformant" in out and EXAMPLES[name] in out


def test_violations_exit_1_with_a_table(tmp_path, capsys):
    assert main(["check", str(broken(tmp_path))]) == 1
    out = capsys.readouterr().out
    header, blank, columns, rule, row = out.splitlines()[:5]
    assert "1 violation" in header and "1 LiteRT rejects" in header
    assert columns.split() == ["rule", "op", "tensor", "expected", "found", "LiteRT"]
    assert row.split()[:5] == ["fixed-scale", "2", "SOFTMAX", "7", "Identity"]
    assert "0.00390625" in row and "0.00392156" in row and "rejects at prepare" in row


def test_json(tmp_path, capsys):
    assert main(["check", str(broken(tmp_path)), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and data["model"].endswith("broken.tflite")
    (v,) = data["violations"]
    assert (v["rule"], v["op_index"], v["op_name"], v["tensor_index"], v["tensor_name"]) == \
        ("fixed-scale", 2, "SOFTMAX", 7, "Identity")
    assert v["litert"] == "rejects" and v["litert_stage"] == "prepare" and v["litert_rejects"] is True
    assert main(["check", EXAMPLES["cnn"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["violations"] == []


def test_unreadable_input_exits_2(tmp_path, capsys):
    assert main(["check", str(tmp_path / "missing.tflite")]) == 2
    assert "cannot be read" in capsys.readouterr().err
    junk = tmp_path / "junk.tflite"
    junk.write_bytes(b"\x00" * 64)
    assert main(["check", str(junk)]) == 2
    assert "ModelError" in capsys.readouterr().err
    truncated = tmp_path / "truncated.tflite"
    truncated.write_bytes(example_bytes("mlp_softmax")[:1000])
    assert main(["check", str(truncated), "--json"]) == 2


def test_usage(capsys):
    assert main(["check", "--help"]) == 0
    assert "Exit status" in capsys.readouterr().out
    assert main(["check"]) == 2


# --- --kernels: the LiteRT op resolvers the exit status speaks for --------------------------------------

def _softmax_abort(tmp_path):
    """A SOFTMAX with beta * input scale * 2^26 <= 1: BUILTIN_REF aborts, the other resolvers run it."""
    from litert_build import T, build

    path = tmp_path / "softmax.tflite"
    path.write_bytes(build("SOFTMAX", [T((1, 4), "int8", 0.01, 0)], [T((1, 4), "int8", 1 / 256, -128)],
                           {"beta": 1e-9}, 2))
    return str(path)


def _add_abort(tmp_path):
    """An ADD whose output multiplier is 1 or more: every resolver aborts."""
    from litert_build import T, build

    path = tmp_path / "add.tflite"
    path.write_bytes(build("ADD", [T((4,), "int8", 1.0, 0), T((4,), "int8", 1.0, 0)], [T((4,), "int8", 1e-7, 0)],
                           {}, 2))
    return str(path)


def test_kernels_default_is_all_and_names_each_resolver(tmp_path, capsys):
    assert main(["check", _softmax_abort(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "kernels: reference, optimized, xnnpack" in out
    assert "aborts at prepare (reference); runs (optimized, xnnpack)" in out
    assert main(["check", "--kernels", "reference", _softmax_abort(tmp_path)]) == 1
    assert "aborts at prepare (reference)" in capsys.readouterr().out


@pytest.mark.parametrize("kernels", ["optimized", "xnnpack"])
def test_a_limit_of_other_kernels_exits_0(tmp_path, capsys, kernels):
    path = _softmax_abort(tmp_path)
    assert main(["check", path, f"--kernels={kernels}"]) == 0
    out = capsys.readouterr().out
    assert "conformant" in out and f"kernels: {kernels}" in out and "softmax-input-multiplier" in out
    assert main(["check", "--kernels", kernels, path, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and data["kernels"] == [kernels] and data["violations"] == []
    (v,) = data["other_kernels"]
    assert v["rule"] == "softmax-input-multiplier" and v["rejected_by"] == ["reference"]
    assert {r: v["verdicts"][r]["action"] for r in ("reference", "optimized", "xnnpack")} == \
        {"reference": "aborts", "optimized": "runs", "xnnpack": "runs"}


@pytest.mark.parametrize("kernels", ["reference", "optimized", "xnnpack", "all"])
def test_what_every_resolver_aborts_on_exits_1(tmp_path, capsys, kernels):
    assert main(["check", _add_abort(tmp_path), "--kernels", kernels, "--json"]) == 1
    (v,) = json.loads(capsys.readouterr().out)["violations"]
    assert v["rule"] == "add-output-multiplier"
    assert v["rejected_by"] == ["reference", "optimized", "xnnpack"]


def test_a_spec_violation_exits_1_whatever_the_kernels(tmp_path, capsys):
    for kernels in ("reference", "optimized", "xnnpack"):
        assert main(["check", str(broken(tmp_path)), "--kernels", kernels]) == 1
        assert "fixed-scale" in capsys.readouterr().out


def test_bad_kernels_exit_2(tmp_path, capsys):
    assert main(["check", EXAMPLES["cnn"], "--kernels", "gpu"]) == 2
    assert "--kernels" in capsys.readouterr().err


def test_kernels_on_an_onnx_model_is_refused_in_one_line(capsys):
    from quantspec.litert.model import example_model

    onnx_model = str(Path(example_model("cnn.tflite")).with_name("mlp_float.onnx"))
    for argv in (["check", onnx_model, "--kernels", "reference"], ["check", "--kernels", "xnnpack", onnx_model],
                 ["check", onnx_model, "--kernels=all"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "--kernels" in err and "ONNX" in err, err
