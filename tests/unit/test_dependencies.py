"""Every package ``src/`` imports is declared in pyproject.toml: a fresh install has nothing
else. The core's imports are core dependencies; an optional package (an extra) is imported
only inside a function or a ``try``, so that the core never needs it, and it is declared in
the extra whose error message names it."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from tests.paths import ROOT

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

#: import name -> distribution name, where the two differ
DISTRIBUTION = {"pynvml": "nvidia-ml-py", "pytorch_lightning": "lightning", "yaml": "pyyaml",
                "sklearn": "scikit-learn", "PIL": "pillow"}


def declared(pyproject: dict) -> tuple[set[str], dict[str, set[str]]]:
    """(core distributions, extra -> its distributions), names normalised."""
    project = pyproject["project"]
    core = {_dist(d) for d in project.get("dependencies", [])}
    extras = {k: {_dist(d) for d in v}
              for k, v in project.get("optional-dependencies", {}).items()}
    return core, extras


def _dist(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def imports(root: Path) -> list[tuple[str, Path, bool]]:
    """(top-level module, file, at module level outside any try) for every absolute import
    of a third-party module under ``root``."""
    own = {p.name for p in root.iterdir()}
    out = []
    for f in sorted(root.rglob("*.py")):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        for node, eager in _walk(tree.body, eager=True):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if node.level == 0 and node.module else [])
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in own and top != "__future__":
                    out.append((top, f, eager))
    return out


def _walk(body, eager: bool):
    """Import nodes with whether they run when the module is imported, unguarded."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, eager
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _walk(node.body, False)
        elif isinstance(node, ast.Try):
            for part in (node.body, *(h.body for h in node.handlers), node.orelse,
                         node.finalbody):
                yield from _walk(part, False)
        elif isinstance(node, ast.If) and _type_checking(node.test):
            yield from _walk(node.body, False)
            yield from _walk(node.orelse, eager)
        else:
            for field in ("body", "orelse", "finalbody"):
                if isinstance(getattr(node, field, None), list):
                    yield from _walk(getattr(node, field), eager)


def _type_checking(test) -> bool:
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"


def undeclared(pyproject: dict, root: Path) -> list[str]:
    """What a fresh install of ``root`` under ``pyproject`` would lack, one line each."""
    core, extras = declared(pyproject)
    problems = set()
    for top, f, eager in imports(root):
        dist = DISTRIBUTION.get(top, top).lower().replace("_", "-")
        rel = f.relative_to(root.parent)
        in_extras = sorted(k for k, v in extras.items() if dist in v)
        if dist in core:
            continue
        if not in_extras:
            problems.add(f"{rel}: imports {top}, which pyproject does not declare ({dist})")
        elif eager:
            problems.add(f"{rel}: imports {top} when the module loads, but it is only in the "
                         f"extra(s) {', '.join(in_extras)}: guard it or import it where used")
    return sorted(problems)


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_import_of_src_is_declared():
    assert undeclared(_pyproject(), ROOT / "src") == []


def test_the_check_fails_when_a_direct_import_is_removed_from_pyproject():
    """The test can fail: drop typer (imported by every command) from the dependencies, and
    the lines name the files that import it."""
    py = _pyproject()
    py["project"]["dependencies"] = [d for d in py["project"]["dependencies"]
                                     if _dist(d) != "typer"]
    lines = undeclared(py, ROOT / "src")
    assert lines and all("typer" in line for line in lines)
    assert any("cli/__init__.py" in line for line in lines)


def test_an_extra_imported_at_module_level_is_named(tmp_path):
    pkg = tmp_path / "src" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "eager.py").write_text("import transformers\n")
    (pkg / "lazy.py").write_text("def f():\n    import transformers\n")
    (pkg / "guarded.py").write_text("try:\n    import peft\nexcept ImportError:\n    peft = None\n")
    (pkg / "typing_only.py").write_text("from typing import TYPE_CHECKING\n"
                                        "if TYPE_CHECKING:\n    import transformers\n")
    (pkg / "stdlib.py").write_text("import json, os.path\nfrom collections import abc\n")
    py = {"project": {"dependencies": ["numpy"],
                      "optional-dependencies": {"hf": ["transformers>=4"], "lora": ["peft"]}}}
    lines = undeclared(py, tmp_path / "src")
    assert len(lines) == 1 and "eager.py" in lines[0] and "extra(s) hf" in lines[0]
    (pkg / "other.py").write_text("import click\n")
    assert any("click, which pyproject does not declare" in x
               for x in undeclared(py, tmp_path / "src"))
