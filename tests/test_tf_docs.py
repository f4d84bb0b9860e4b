"""docs/tensorflow.md is current (its ```python blocks run in tests/test_docs.py; the blocks that call
TensorFlow assert quantspec's results against it): its oneDNN routing table is the
one quantspec.tf.spec holds, and its divergence table is what quantspec computes -- with the Eigen
column checked against TensorFlow here and the oneDNN column in tests/test_tf_onednn.py (the rows are
part of its corpus)."""

from __future__ import annotations

import re
from pathlib import Path

import tf_oracle as O
from quantspec.tf import spec
from refs import require

DOC = Path(__file__).resolve().parents[1] / "docs" / "tensorflow.md"


def _between(text: str, name: str) -> str:
    m = re.search(rf"<!-- {name}:begin -->\n(.*?)<!-- {name}:end -->", text, re.S)
    assert m, f"docs/tensorflow.md has no {name} markers"
    return m.group(1).strip()


def test_routing_table_is_the_spec_table():
    assert _between(DOC.read_text(), "onednn-routes") == spec.onednn_table_markdown()


def test_divergence_table_is_current():
    assert _between(DOC.read_text(), "divergences") == O.divergence_table_markdown()


def test_divergence_table_eigen_column_is_tensorflows():
    tf = require("tensorflow")
    for what, case in O.DIVERGENCES:
        assert O.compare(case, O.run_tf(tf, case), O.run_qs(case, "eigen")) is None, what
