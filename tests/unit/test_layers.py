"""The import graph of the package follows its layers (docs/DESIGN.md section 2).

Every module under src/afford belongs to one layer; an import may stay in its layer or go
down, never up, and no two modules import each other through any chain. The commands that
do not measure import no torch: neither their modules nor ``afford --help``.
Every import counts, also one inside a function or under ``if TYPE_CHECKING``.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import SRC

# Lowest first: each layer is a folder of src/afford; the package root's own modules (the
# facade ``afford/__init__.py``, ``__main__`` and the console script's ``_entry``) stand
# above every folder. A module's layer is its folder's, with no exceptions.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("core",)),
    ("schema", ("schema",)),
    ("fit", ("fit",)),
    ("workloads", ("workloads",)),
    ("measure", ("measure",)),
    ("certification", ("certification",)),
    ("figures", ("figures",)),
    ("planning", ("planning",)),
    ("wings", ("bars", "track")),  # docs/DESIGN.md section 2: the bars and the loop guard
    ("api", ("api",)),
    ("report", ("report",)),
    ("cli", ("cli",)),
    ("root", ("",)),
]
FAST = ("plan", "preflight", "size", "predict", "compare", "report", "history", "pin", "schema")


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / "afford").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def layer(name: str) -> int:
    """The layer of module ``name``: its folder's (``afford.fit.time.warmup`` -> fit); a
    module of the package root, or the root itself, is the root's."""
    parts = name.split(".")
    in_folder = len(parts) > 2 or (len(parts) == 2 and (SRC / "afford" / parts[1]).is_dir())
    folder = parts[1] if in_folder else ""
    found = [i for i, (_, folders) in enumerate(LAYERS) if folder in folders]
    assert found, f"{name}: its folder {folder!r} is in no layer: add it to LAYERS"
    return found[0]


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The afford modules ``name`` imports (a name imported from a package that is itself
    a module counts as that module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "afford"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            if base.split(".")[0] != "afford":
                continue
            for a in node.names:
                out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base)
    return out - {name}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def test_every_module_has_a_layer(graph):
    for name in graph:
        layer(name)


def test_no_import_runs_up_a_layer(graph):
    up = [f"{a} ({LAYERS[layer(a)][0]}) imports {b} ({LAYERS[layer(b)][0]})"
          for a, targets in graph.items() for b in sorted(targets) if layer(b) > layer(a)]
    assert up == []


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_circle(graph):
    assert circles(graph) == []


def test_the_checks_can_fail():
    """A circle through three modules is found; an import from fit up to plan is up."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer("afford.fit.time.throughput") < layer("afford.planning.scale_ladder")
    assert layer("afford.cli.plan") == len(LAYERS) - 2 and layer("afford.core.errors") == 0
    assert layer("afford") == layer("afford._entry") == len(LAYERS) - 1
    assert layer("afford.fit") == layer("afford.fit.memory.sizing") == 2


def test_every_folder_is_a_layer_and_no_file_name_repeats():
    """The tree says what LAYERS says: every folder of the package is one layer's, and a
    file's name says which file it is (``__init__.py`` aside, no name twice)."""
    folders = {p.name for p in (SRC / "afford").iterdir() if (p / "__init__.py").exists()}
    assert folders == {f for _, fs in LAYERS for f in fs if f}
    names = [p.name for p in (SRC / "afford").rglob("*.py") if p.name != "__init__.py"]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


def _torch_loaded(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code + "\nimport sys\n"
                           "print('torch' in sys.modules, file=sys.stderr)"],
                          capture_output=True, text=True, timeout=120)
    return done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("command", FAST)
def test_a_command_that_does_not_measure_imports_no_torch(command):
    assert _torch_loaded(f"import afford.cli.{command}") == "False"


@pytest.mark.parametrize("argv", [["--help"], ["plan", "--help"]])
def test_help_imports_no_torch(argv):
    code = ("import sys\nfrom afford._entry import main\n"
            f"sys.argv = ['afford', *{argv!r}]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass")
    assert _torch_loaded(code) == "False"


def test_the_fit_families_import_nothing_from_one_another(graph):
    """fit/memory, fit/time and fit/nodes stand side by side; what they share (stats,
    gates) is beside them in fit/."""
    families = ("memory", "time", "nodes")

    def family(name: str) -> str | None:
        parts = name.split(".")
        return parts[2] if len(parts) > 3 and parts[1] == "fit" and parts[2] in families \
            else None

    across = [f"{a} imports {b}" for a, targets in graph.items() for b in sorted(targets)
              if family(a) and family(b) and family(a) != family(b)]
    assert across == []
    assert family("afford.fit.time.warmup") == "time" and family("afford.fit.stats") is None


def test_the_design_names_every_folder_of_the_package():
    """docs/DESIGN.md section 2 draws the layout: every folder of the package is in it."""
    design = (SRC.parent / "docs/DESIGN.md").read_text(encoding="utf-8")
    layout = design[design.index("## 2."):design.index("## 3.")]
    folders = sorted(p.name for p in (SRC / "afford").iterdir()
                     if (p / "__init__.py").exists())
    assert [f for f in folders if f"\n{f}/ " not in layout] == []
    assert len(folders) == 13


# ---- guardrails that keep names pointing where they say (issue 42) --------------------


def _import_froms(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("afford"):
            yield node


def private_imports(known: dict[str, Path]) -> list[str]:
    """``from afford.x import _name`` where ``_name`` is not a module: a private name read
    across modules (a module's ``_helper`` is its own; make it public or move it)."""
    out = []
    for name, path in known.items():
        for node in _import_froms(path):
            for a in node.names:
                dunder = a.name.startswith("__") and a.name.endswith("__")
                if a.name.startswith("_") and not dunder and \
                        f"{node.module}.{a.name}" not in known:
                    out.append(f"{name}: from {node.module} import {a.name}")
    return out


def misleading_aliases(known: dict[str, Path]) -> list[str]:
    """``import a.b as c`` / ``from a import b as c`` where ``c`` is the last part of
    another afford module's name than the one imported: the reader looks in the wrong file."""
    stems = {n.rsplit(".", 1)[-1] for n in known}
    out = []
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    target = a.name if isinstance(node, ast.Import) else \
                        f"{node.module}.{a.name}"
                    if a.asname and a.asname in stems and target.startswith("afford") and \
                            target.rsplit(".", 1)[-1] != a.asname:
                        out.append(f"{name}: {target} as {a.asname} (another module's name)")
    return out


IO_CALLS = {"open", "read_text", "write_text", "read_bytes", "write_bytes", "mkdir",
            "unlink", "rename"}


def file_io(path: Path) -> list[str]:
    """Calls that touch files (``open``, a Path's reads and writes) or imports of ``os`` /
    ``pathlib`` / ``shutil`` / ``io``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) \
                else ""
            if name in IO_CALLS:
                out.append(f"{path.name}:{node.lineno} {name}()")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""]
            out += [f"{path.name}:{node.lineno} import {m}" for m in mods
                    if m.split(".")[0] in ("os", "pathlib", "shutil", "io")]
    return out


def test_no_private_name_is_imported_across_modules():
    assert private_imports(modules()) == []


def test_no_import_alias_is_another_modules_name():
    assert misleading_aliases(modules()) == []


def test_fit_does_no_file_io():
    """fit/ is pure (docs/DESIGN.md section 2): arrays in, frozen results out."""
    got = [x for name, path in modules().items() if name.startswith("afford.fit")
           for x in file_io(path)]
    assert got == []


def test_the_guardrails_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from afford.fit.memory.sizing import _with_default\n"
                   "from afford.fit.memory import sizing as replay_fit\n"
                   "import os\nopen('x')\n")
    known = {"afford.fit.memory.sizing": bad, "afford.fit.memory.replay_fit": bad,
             "afford.x": bad}
    assert any("_with_default" in x for x in private_imports(known))
    assert any("as replay_fit" in x for x in misleading_aliases(known))
    assert len(file_io(bad)) == 2


def module_classes(known: dict[str, Path]) -> list[str]:
    """Classes deriving from ``ModuleType``: the only classes a module object's ``__class__``
    may be swapped for, which is how a module is made callable. A name of the package is a
    module or a function, never both."""
    out = []
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                    (b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")) ==
                    "ModuleType" for b in node.bases):
                out.append(f"{name}:{node.lineno} class {node.name}(ModuleType)")
    return out


def test_no_module_is_made_callable(tmp_path):
    """The API's functions are plain functions (issue 42): no module object gets a callable
    class, and no folder shares its name with a function of the API (importing the folder's
    package would rebind the name)."""
    import afford

    assert module_classes(modules()) == []
    folders = {p.name for p in (SRC / "afford").iterdir() if (p / "__init__.py").exists()}
    assert folders & set(afford.__all__) == set()
    bad = tmp_path / "bad.py"
    bad.write_text("import types\nclass Callable(types.ModuleType):\n    pass\n")
    assert module_classes({"afford.x": bad}) == ["afford.x:2 class Callable(ModuleType)"]


def test_the_design_names_every_command():
    """docs/DESIGN.md section 5 lists the commands: every command module of cli/ (one file
    per command; certify_distributed is certify's, common is shared) is named there."""
    design = (SRC.parent / "docs/DESIGN.md").read_text(encoding="utf-8")
    interfaces = design[design.index("## 5."):]
    commands = sorted(p.stem for p in (SRC / "afford" / "cli").glob("*.py")
                      if p.stem not in ("__init__", "common", "certify_distributed"))
    assert len(commands) == 15
    assert [c for c in commands if f"`{c}`" not in interfaces] == []
