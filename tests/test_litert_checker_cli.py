"""``quantspec check MODEL [--json]``, in-process through quantspec.cli.main: exit 0 conformant,
1 violations, 2 unreadable input."""

from __future__ import annotations

import json

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
