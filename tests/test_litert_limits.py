"""LiteRT's limits beyond the spec's rules (``quantspec.litert.optable.LIMITS``): each a rule with its own
id, raised by the kernel that checks it, reported by ``check_model``, and what LiteRT does measured in a
child process (LiteRT aborts on some).  check == run: the checker reports a rule LiteRT fails on
exactly when LiteRT fails, and the interpreter refuses the same models with the same rule."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from litert_build import T, build
from litert_kernel_check import litert_outcome
from quantspec.errors import QuantSpecError
from quantspec.litert import Interpreter, check_model, optable

KERNELS = Path(__file__).resolve().parents[1] / "src" / "quantspec" / "litert" / "kernels"


def test_every_tagged_rule_is_in_the_table():
    tagged = set()
    for path in KERNELS.glob("*.py"):
        tagged |= set(re.findall(r'limit\(\s*"([a-z0-9-]+)"', path.read_text()))
    tagged |= set(re.findall(r'"(sub-output-multiplier-above-one|comparison-large-scale)"',
                             (KERNELS / "_common.py").read_text()))
    assert tagged, "no tagged rule found"
    unknown = sorted(r for r in tagged if r not in optable.LIMITS and r not in optable.RULES)
    assert not unknown, unknown
    # and every limit of the table is raised somewhere
    assert set(optable.LIMITS) - tagged - {"activation-range"} == set()      # base.py tags that one itself


def test_the_table_is_well_formed():
    for rule, lim in optable.LIMITS.items():
        assert lim.rule == rule and lim.ops and lim.requires and lim.source
        assert lim.action in (optable.REJECTS, optable.ABORTS, optable.UNDEFINED)
        assert lim.stage in ("prepare", "eval")
    for op in optable.OP_TABLE.values():
        assert all(lim in optable.LIMITS for lim in op.limits), op.name


S = 1 / 256
CASES = {
    # rule: (op, inputs, outputs, options, feeds)
    "softmax-input-multiplier": ("SOFTMAX", [T((1, 4), "int8", 1e-9, 0)], [T((1, 4), "int8", S, -128)],
                                 {"beta": 1.0}, [np.zeros((1, 4), np.int8)]),
    "add-output-multiplier": ("ADD", [T((4,), "int8", 1.0, 0), T((4,), "int8", 1.0, 0)], [T((4,), "int8", 1e-7, 0)],
                              {}, [np.zeros(4, np.int8)] * 2),
    "sub-output-multiplier": ("SUB", [T((4,), "int8", 2 ** -20, 0), T((4,), "int8", 2 ** -20, 0)],
                              [T((4,), "int8", 2 ** -20 * 2 / 2 ** 20, 0)], {}, [np.zeros(4, np.int8)] * 2),
    "comparison-scale-one": ("LESS", [T((4,), "int8", 1.0, 0), T((4,), "int8", 0.5, 0)], [T((4,), "bool")], {},
                             [np.zeros(4, np.int8)] * 2),
    "hard-swish-output-multiplier": ("HARD_SWISH", [T((4,), "int8", 1.0, 0)], [T((4,), "int8", 1 / 256, 0)], {},
                                     [np.zeros(4, np.int8)]),
    "int16-zero-point": ("ADD", [T((4,), "int16", 0.01, 3), T((4,), "int16", 0.01, 0)], [T((4,), "int16", 0.02, 0)],
                         {}, [np.zeros(4, np.int16)] * 2),
    "int16-output-scale": ("LOGISTIC", [T((4,), "int16", 0.001, 0)], [T((4,), "int16", 1 / 256, 0)], {},
                           [np.zeros(4, np.int16)]),
    "no-int16-kernel": ("SQUARED_DIFFERENCE", [T((4,), "int16", 0.01, 0), T((4,), "int16", 0.01, 0)],
                        [T((4,), "int16", 0.02, 0)], {}, [np.zeros(4, np.int16)] * 2),
    "batch-matmul-shape": ("BATCH_MATMUL", [T((2, 3), "int8", 0.1, 0), T((4, 2), "int8", 0.1, 0)],
                           [T((2, 2), "int8", 0.1, 0)], {}, [np.zeros((2, 3), np.int8), np.zeros((4, 2), np.int8)]),
    "prelu-shape": ("PRELU", [T((1, 3), "int8", 0.1, 0), T((2, 3), "int8", 0.1, 0)], [T((1, 3), "int8", 0.1, 0)], {},
                    [np.zeros((1, 3), np.int8), np.zeros((2, 3), np.int8)]),
    "l2norm-activation": ("L2_NORMALIZATION", [T((1, 4), "int8", 0.1, 0)], [T((1, 4), "int8", 1 / 128, 0)],
                          {"fused_activation_function": "RELU"}, [np.zeros((1, 4), np.int8)]),
    "int16-pot-broadcast": ("ADD", [T((2, 3), "int16", 2 ** -10, 0), T((1, 3), "int16", 2 ** -10, 0)],
                            [T((2, 3), "int16", 2 ** -10, 0)], {}, [np.zeros((2, 3), np.int16), np.zeros((1, 3), np.int16)]),
}
VERSION1 = {"HARD_SWISH", "BATCH_MATMUL", "PRELU", "SQUARED_DIFFERENCE", "LOGISTIC", "L2_NORMALIZATION"}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_check_and_run_agree_with_litert_on_each_limit(rule):
    op, inputs, outputs, options, feeds = CASES[rule]
    version = 1 if op in VERSION1 or any(t.dtype == "int16" for t in inputs) else 2
    lim = optable.LIMITS[rule]
    outcome = litert_outcome(op, inputs, outputs, options, feeds, version)
    assert outcome == ("abort" if lim.action == optable.ABORTS else "error"), (rule, outcome)
    model = build(op, inputs, outputs, options, version)
    report = check_model(model)
    found = {v.rule: v for v in report.rejected_by_litert}
    assert rule in found, report.render()
    assert found[rule].litert == lim.action and found[rule].litert_stage == lim.stage
    with pytest.raises(QuantSpecError) as caught:
        Interpreter(model).run(feeds)
    assert getattr(caught.value, "limit", None) == rule


def test_an_undefined_behaviour_limit_is_reported_but_not_as_a_failure():
    """An int16 CONV_2D whose int32 bias LiteRT reads as int64: LiteRT runs (reading past the bias),
    quantspec refuses, the checker reports the rule as undefined behaviour, not as a LiteRT failure."""
    inputs = [T((1, 2, 2, 1), "int16", 0.01, 0), T((2, 1, 1, 1), "int8", [0.1, 0.1], 0, 0, np.ones((2, 1, 1, 1), np.int8)),
              T((2,), "int32", [0.001, 0.001], 0, 0, np.array([5, 7], np.int32))]
    outputs = [T((1, 2, 2, 2), "int16", 0.01, 0)]
    options = {"padding": "VALID", "stride_h": 1, "stride_w": 1}
    assert litert_outcome("CONV_2D", inputs, outputs, options, [np.zeros((1, 2, 2, 1), np.int16)], 1) == "ok"
    report = check_model(build("CONV_2D", inputs, outputs, options, 1))
    (v,) = [v for v in report.violations if v.rule == "int16-bias-read-as-int64"]
    assert v.litert == optable.UNDEFINED and not v.litert_rejects and not report.rejected_by_litert


def test_limits_render_in_the_docs():
    md = optable.limits_markdown()
    for rule in optable.LIMITS:
        assert f"`{rule}`" in md
