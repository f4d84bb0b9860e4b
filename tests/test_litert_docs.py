"""docs/litert.md: its code examples run, and its op table is the one OP_TABLE generates."""

from __future__ import annotations

import re
from pathlib import Path

from quantspec.litert.optable import markdown_table

DOC = Path(__file__).resolve().parent.parent / "docs" / "litert.md"


def test_code_examples_run():
    text = DOC.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 5
    namespace: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/litert.md example {i + 1}", "exec"), namespace)


def test_op_table_is_generated_from_op_table():
    text = DOC.read_text()
    m = re.search(r"<!-- op-table:begin -->\n(.*?)\n<!-- op-table:end -->", text, re.S)
    assert m, "op table markers missing"
    assert m.group(1) == markdown_table(), (
        "docs/litert.md's op table is stale: regenerate it with "
        "python -c 'from quantspec.litert.optable import markdown_table; print(markdown_table())'")


def test_conv_section_heading_is_present():
    assert "\n## Kernels: convolution, fully connected, pooling, resize and data movement\n" in DOC.read_text()
