"""The code examples of the kernels section of the LiteRT docs run and assert what they claim.

The section is ``## Kernels: convolution, fully connected, pooling, resize and data movement`` in
docs/litert.md, or docs/litert-conv-section.md until it is merged there.  Its ```python blocks run
in order in one namespace.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEADING = "## Kernels: convolution, fully connected, pooling, resize and data movement"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def section() -> tuple[str, str]:
    for name in ("litert.md", "litert-conv-section.md"):
        path = ROOT / "docs" / name
        if path.exists() and HEADING in path.read_text():
            text = path.read_text().split(HEADING, 1)[1]
            nxt = re.search(r"^## ", text, re.M)
            return name, text[: nxt.start()] if nxt else text
    pytest.fail(f"no docs page has the section {HEADING!r}")


def test_section_examples_run(tmp_path, monkeypatch):
    name, text = section()
    blocks = BLOCK.findall(text)
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__doc_example__"}
    for i, code in enumerate(blocks):
        try:
            exec(compile(code, f"{name}[kernels block {i}]", "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"{name}, kernels python block {i} failed: {type(e).__name__}: {e}\n{code}") from e
