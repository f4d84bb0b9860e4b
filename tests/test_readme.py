"""Every code block of the README runs on its own.

The ```python blocks are one script (tests/test_docs.py runs them so, in order); the first holds every
import.  Here each later block also runs on its own after the first one, in a fresh namespace (a
reader copies the imports and one example, not the page).  Each ```sh block whose lines are ``quantspec`` commands runs line by line in an empty
directory, with ``quantspec`` being this checkout's command line; every command must exit 0.  The
``./dev`` lines (which make a virtual environment) and ``quantspec bench`` (tests/test_bench.py runs
it) are left out.  The commands use only files that ship with quantspec or that ``quantspec
example`` writes.
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from refs import require

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PYTHON = re.findall(r"^```python\n(.*?)^```", README, re.S | re.M)
SHELL = re.findall(r"^```sh\n(.*?)^```", README, re.S | re.M)


def test_the_readme_has_examples():
    assert len(PYTHON) >= 3 and any("quantspec example" in block for block in SHELL)


@pytest.mark.parametrize("index", range(len(PYTHON)))
def test_python_block_runs_after_the_first_alone(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__readme__"}
    for i in dict.fromkeys([0, index]):  # the first block (the imports), then this one
        exec(compile(PYTHON[i], f"README.md[python block {i}]", "exec"), namespace)


def _commands():
    for block in SHELL:
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("quantspec ") and not line.startswith("quantspec bench"):
                yield line


def test_shell_commands_run(tmp_path):
    commands = list(_commands())
    assert any(c.startswith("quantspec example") for c in commands)
    if any("--compare-litert" in c for c in commands):
        require("ai_edge_litert")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for command in commands:
        argv = [sys.executable, "-m", "quantspec", *shlex.split(command)[1:]]
        proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{command}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, f"{command}:\n{proc.stderr}"
