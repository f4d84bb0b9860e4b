"""docs/tensorflow.md is executable and current: its ```python blocks run (in order, in one namespace;
the blocks that call TensorFlow assert quantspec's results against it), its oneDNN routing table is the
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


def test_python_blocks_run():
    require("tensorflow")
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 8
    namespace: dict = {}
    for i, block in enumerate(blocks):
        try:
            exec(compile(block, f"docs/tensorflow.md[python block {i}]", "exec"), namespace)
        except Exception as e:  # pragma: no cover - the message is the point
            raise AssertionError(f"python block {i} of docs/tensorflow.md failed: {e!r}\n{block}") from e


def test_routing_table_is_the_spec_table():
    assert _between(DOC.read_text(), "onednn-routes") == spec.onednn_table_markdown()


def test_divergence_table_is_current():
    assert _between(DOC.read_text(), "divergences") == O.divergence_table_markdown()


def test_divergence_table_eigen_column_is_tensorflows():
    tf = require("tensorflow")
    for what, case in O.DIVERGENCES:
        assert O.compare(case, O.run_tf(tf, case), O.run_qs(case, "eigen")) is None, what
