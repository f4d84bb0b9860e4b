"""The docs stay true: generated tables are fresh, and every ```python block runs.

Each Markdown page's ```python blocks run in order in one namespace (a page is one session); the
blocks assert what they claim.  Blocks that are not meant to run use another fence (```text, ```sh).
"""

import re
import sys
from pathlib import Path

import pytest

from refs import require

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_generated_sections_are_fresh():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import gendocs
    finally:
        sys.path.pop(0)
    assert gendocs.stale() == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_python_examples_run(page, tmp_path, monkeypatch):
    text = page.read_text()
    blocks = BLOCK.findall(text)
    for runtime in ("tensorflow", "onnx", "onnxruntime", "ai_edge_litert"):
        if re.search(rf"^\s*(import|from) {runtime}\b", "\n".join(blocks), re.M):
            require(runtime)  # pages whose examples compare with a runtime need it (CI: a failure if missing)
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__doc_example__"}
    for i, code in enumerate(blocks):
        try:
            exec(compile(code, f"{page.name}[block {i}]", "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"{page.name}, python block {i} failed: {type(e).__name__}: {e}\n{code}") from e
