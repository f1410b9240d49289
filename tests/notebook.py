"""docs/api.md as a notebook: its ``python`` blocks are its cells, run in order in one
namespace, as a notebook runs them. conftest's ``api_notebook`` runs the first cell (a real
certify on the CPU, the session's CPU certificate); tests/cli/test_api.py runs the others."""

from __future__ import annotations

import re

from tests.paths import ROOT

#: the notebook
DOC = ROOT / "docs" / "api.md"


def cells() -> list[str]:
    """The notebook's cells, in order: each ``python`` fenced block of docs/api.md."""
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def run_cells(cells: list[str], ns: dict, first: int = 1) -> dict:
    """Execute ``cells`` in order in ``ns`` (tracebacks name each as ``docs/api.md cell N``,
    counting from ``first``); returns ``ns``."""
    for i, cell in enumerate(cells, first):
        exec(compile(cell, f"docs/api.md cell {i}", "exec"), ns)  # noqa: S102
    return ns
