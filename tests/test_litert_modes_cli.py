"""``quantspec run --kernels`` and ``--compare-litert --resolver``: each kernel mode against the LiteRT
configuration it reproduces (identical), against another one (the differences reported), and the
option errors (exit 2, one line)."""

from __future__ import annotations

import pytest

from quantspec.cli import main
from refs import require



@pytest.fixture(scope="module")
def model():
    from test_litert_modes_models import _zoo_path

    return str(_zoo_path("mobilenet_v2"))


@pytest.mark.parametrize("kernels,resolver", [("reference", "BUILTIN_REF"), ("optimized", "BUILTIN_WITHOUT_DEFAULT_DELEGATES"),
                                              ("xnnpack", "AUTO")])
def test_each_mode_is_identical_to_its_configuration(model, kernels, resolver, capsys):
    require("ai_edge_litert")
    assert main(["run", model, "--random", "4", "--kernels", kernels, "--compare-litert"]) == 0
    assert f"compared with LiteRT ({resolver}): identical" in capsys.readouterr().out


def test_another_resolver_shows_the_differences(model, capsys):
    """The optimized kernels against BUILTIN_REF: the report says where the outputs differ."""
    require("ai_edge_litert")
    codes = [main(["run", model, "--random", str(seed), "--kernels", "optimized", "--compare-litert",
                   "--resolver", "reference"]) for seed in range(6)]
    out = capsys.readouterr().out
    assert "compared with LiteRT (BUILTIN_REF)" in out
    assert 1 in codes and "DIFFERENT" in out


def test_resolver_without_compare_is_an_error(model, capsys):
    assert main(["run", model, "--random", "1", "--resolver", "default"]) == 2
    err = capsys.readouterr().err
    assert "--resolver" in err and "--compare-litert" in err and len(err.strip().splitlines()) == 1


def test_unknown_kernels_is_an_error(model, capsys):
    assert main(["run", model, "--random", "1", "--kernels", "fast"]) == 2
    assert "--kernels" in capsys.readouterr().err


def test_interpreter_arguments():
    from quantspec.errors import InvalidArgumentError
    from quantspec.litert import Interpreter, example_model

    path = example_model("mlp_softmax")
    for bad in ("fast", None, 1):
        with pytest.raises(InvalidArgumentError, match="kernels"):
            Interpreter(path, kernels=bad)
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(InvalidArgumentError, match="num_threads"):
            Interpreter(path, kernels="optimized", num_threads=bad)
    assert Interpreter(path).engines == ["reference"] * 3
    assert Interpreter(path, kernels="optimized").engines == ["optimized"] * 3
    assert Interpreter(path, "xnnpack").engines == Interpreter(path, kernels="xnnpack").engines   # 2nd argument
