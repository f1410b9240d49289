"""docs/api.md as a notebook: its ``python`` blocks are its cells, run in order, as a notebook
runs them. The first cell (a real certify on the CPU: the session's CPU certificate) runs in
a Python process of its own, as a notebook's kernel is (:class:`FirstCell`, started by
conftest as the session begins, so that it measures while the pure lanes run); the others
run in the test process (tests/cli/test_api.py), on what the first one left.

    python -m tests.notebook FOLDER     # the first cell, in FOLDER (what FirstCell starts)
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
from pathlib import Path

from tests.beside import Beside
from tests.paths import ROOT

#: the notebook
DOC = ROOT / "docs" / "api.md"
#: what the first cell's process leaves beside its certificate (``tiny-cert.json``)
DONE = "first-cell.json"


def cells() -> list[str]:
    """The notebook's cells, in order: each ``python`` fenced block of docs/api.md."""
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def run_cells(cells: list[str], ns: dict, first: int = 1) -> dict:
    """Execute ``cells`` in order in ``ns`` (tracebacks name each as ``docs/api.md cell N``,
    counting from ``first``); returns ``ns``."""
    for i, cell in enumerate(cells, first):
        exec(compile(cell, f"docs/api.md cell {i}", "exec"), ns)  # noqa: S102
    return ns


def imports_of(cell: str) -> str:
    """A cell's import statements alone (the names it binds besides its results)."""
    tree = ast.parse(cell)
    return "\n".join(ast.unparse(n) for n in tree.body
                     if isinstance(n, (ast.Import, ast.ImportFrom)))


def first_cell(folder: Path) -> dict:
    """Run the first cell as written with ``folder`` as the working folder, and say what
    it returned: its certificate's status, and whether the file it wrote reads back as
    exactly that certificate. The cell names no device; ``afford.certify`` is given
    ``device="cpu"`` beside its arguments, so that on a box with a GPU the certificate is
    still the CPU's."""
    import afford
    from afford.certification import run
    from afford.schema.cert import load_certificate

    def on_the_cpu(*args, **kwargs):
        assert "device" not in kwargs, "the notebook's cell names a device"
        return run(*args, device="cpu", **kwargs)

    os.chdir(folder)
    afford.certify = on_the_cpu
    cert = run_cells(cells()[:1], {})["cert"]
    return {"status": cert.status,
            "round_trip": load_certificate(folder / "tiny-cert.json") == cert}


class FirstCell(Beside):
    """The first cell in a process of its own, in a fresh folder (its own afford cache
    there too), its output in ``first-cell.log``; :meth:`result` waits for it."""

    def __init__(self) -> None:
        super().__init__("afford-notebook-", "first-cell.log")
        env = {**os.environ, "AFFORD_CACHE_DIR": str(self.folder / "afford-cache"),
               "PYTHONPATH": os.pathsep.join(
                   [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH")
                                  else []))}
        self.spawn([sys.executable, "-m", "tests.notebook", str(self.folder)], env=env,
                   cwd=self.folder)

    def result(self, timeout: float = 1800.0) -> dict:
        """What :func:`first_cell` said; AssertionError with the log's tail if it failed
        (or ran past ``timeout`` seconds, and was stopped)."""
        rc = self.wait(timeout)
        assert rc == 0 and (self.folder / DONE).is_file(), \
            f"the first cell failed ({'stopped' if rc is None else f'exit {rc}'}):\n{self.tail()}"
        return json.loads((self.folder / DONE).read_text())


if __name__ == "__main__":
    out = Path(sys.argv[1])
    said = first_cell(out)
    print(json.dumps(said))
    (out / DONE).write_text(json.dumps(said))
