"""Refresh the generated sections of the docs from the spec tables.

A generated section sits between ``<!-- BEGIN generated: module.function -->`` and
``<!-- END generated -->``; its content is the function's return value.  ``python tools/gendocs.py``
rewrites them in place; ``--check`` exits 1 when any is stale (the tests run the check).
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATTERN = re.compile(r"(<!-- BEGIN generated: ([\w.]+) -->\n)(.*?)(<!-- END generated -->)", re.S)


def render(text: str) -> str:
    def sub(m: re.Match) -> str:
        module, _, func = m.group(2).rpartition(".")
        content = getattr(importlib.import_module(module), func)()
        return m.group(1) + content + ("" if content.endswith("\n") else "\n") + m.group(4)

    return PATTERN.sub(sub, text)


def stale() -> list[Path]:
    out = []
    for path in sorted((ROOT / "docs").glob("*.md")):
        text = path.read_text()
        if PATTERN.search(text) and render(text) != text:
            out.append(path)
    return out


def main(argv: list[str]) -> int:
    if "--check" in argv:
        bad = stale()
        for p in bad:
            print(f"{p.relative_to(ROOT)}: generated sections are stale; run python tools/gendocs.py")
        return 1 if bad else 0
    for path in sorted((ROOT / "docs").glob("*.md")):
        text = path.read_text()
        new = render(text)
        if new != text:
            path.write_text(new)
            print(f"updated {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
