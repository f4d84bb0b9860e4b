"""The docs stay true: generated tables are fresh, and every page's ```python blocks run as one script.

A page's ```python blocks, in order and separated by blank lines, are one script: pasted into a file
and run with ``python page.py`` (so ``__name__ == "__main__"``, and code that starts worker processes
sits under ``if __name__ == "__main__":``), in an empty directory.  The blocks assert what they claim.
Every import the page uses is in its first ```python block.  Blocks that are not meant to run use
another fence (```text, ```sh).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from refs import require

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
#: the pages with python examples (every page has some today; one without is left out, not skipped)
EXAMPLE_PAGES = [p for p in PAGES if BLOCK.search(p.read_text())]
IMPORT = re.compile(r"^[ \t]*(?:import\s+\w|from\s+[\w.]+\s+import\b)", re.M)
RUNTIMES = ("tensorflow", "onnx", "onnxruntime", "ai_edge_litert")


def script(page: Path) -> str:
    """The page's ```python blocks as one script, in order, separated by blank lines."""
    return "\n\n".join(BLOCK.findall(page.read_text()))


def test_generated_sections_are_fresh():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import gendocs
    finally:
        sys.path.pop(0)
    assert gendocs.stale() == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_imports_are_at_the_top(page):
    """Every ``import`` / ``from ... import`` line of a page is in its first ```python block."""
    blocks = BLOCK.findall(page.read_text())
    late = [(i, line.strip()) for i, code in enumerate(blocks) if i > 0
            for line in code.splitlines() if IMPORT.match(line)]
    assert late == [], f"{page.name}: imports outside the first python block (move them to the top): {late}"


@pytest.mark.parametrize("page", EXAMPLE_PAGES, ids=lambda p: p.name)
def test_python_examples_run(page, tmp_path):
    code = script(page)
    for runtime in RUNTIMES:
        if re.search(rf"^\s*(import|from) {runtime}\b", code, re.M):
            require(runtime)  # pages whose examples compare with a runtime need it (CI: a failure if missing)
    (tmp_path / "page.py").write_text(code)
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0")
    proc = subprocess.run([sys.executable, "page.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, (
        f"{page.name}, run as one script (python page.py): exit {proc.returncode}\n"
        f"--- stderr (tail) ---\n{proc.stderr[-6000:]}\n--- stdout (tail) ---\n{proc.stdout[-2000:]}")
