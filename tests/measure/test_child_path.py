"""Children start without the working folder on ``sys.path`` (issue 33, item 5): a
``numpy.py`` or ``torch.py`` left in the folder where ``afford certify`` runs is never
imported by a measuring child (``python -m`` put the folder first). ``PYTHONPATH`` is still
honoured; only a user workload ``pkg.mod:factory`` adds the working folder, at the end of
``sys.path``, and the certificate records that it did. A user's module that fails (any
exception, ``SystemExit`` too) is one line naming it."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from afford.core import user_code
from afford.core.errors import InputError
from afford.measure.children import _BOOTSTRAP, child_env, python_command
from tests.paths import SRC

PLANT = ("import os\n"
         "open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'PLANTED-{name}'), "
         "'w').close()\n"
         "raise SystemExit('the planted {name}.py ran')\n")


def plant(folder: Path) -> None:
    for name in ("numpy", "torch"):
        (folder / f"{name}.py").write_text(PLANT.format(name=name))


def planted_runs(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("PLANTED-*"))


def _startup_child(cmd: list[str], folder: Path) -> subprocess.CompletedProcess:
    """The startup probe's child (it imports torch, numpy and transformers) run in
    ``folder`` with the environment certify gives its children."""
    return subprocess.run(cmd, cwd=folder, env=child_env(), capture_output=True, text=True,
                          timeout=600)


def test_every_child_is_spawned_through_python_command():
    """No function of afford reads ``sys.executable`` but :func:`python_command`: every
    child starts as it does."""
    found = set()
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)] + [tree]:
            body = fn.body if fn is not tree else [n for n in tree.body
                                                   if not isinstance(n, ast.FunctionDef)]
            for node in (x for b in body for x in ast.walk(b)):
                if isinstance(node, ast.Attribute) and node.attr == "executable" and \
                        isinstance(node.value, ast.Name) and node.value.id == "sys":
                    found.add((str(path.relative_to(SRC)), getattr(fn, "name", "<module>")))
    assert found == {("afford/measure/children.py", "python_command")}, found


@pytest.mark.parametrize("how", ["python_command", "bootstrap (Python 3.10)"])
def test_a_child_imports_nothing_from_the_working_folder(tmp_path, monkeypatch, how):
    plant(tmp_path)
    monkeypatch.chdir(tmp_path)
    module = "afford.measure.probes.startup"
    cmd = python_command(module) if how == "python_command" else \
        [sys.executable, "-c", _BOOTSTRAP, module]
    r = _startup_child(cmd, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.splitlines()[0])["import_torch_seconds"] > 0
    assert planted_runs(tmp_path) == []


def test_the_planted_modules_run_under_a_plain_dash_m(tmp_path, monkeypatch):
    """What the test above guards against: ``python -m`` imports them (the check can
    fail)."""
    plant(tmp_path)
    monkeypatch.chdir(tmp_path)
    r = _startup_child([sys.executable, "-m", "afford.measure.probes.startup"], tmp_path)
    assert r.returncode != 0 and "planted" in r.stderr
    assert planted_runs(tmp_path) in (["PLANTED-torch"], ["PLANTED-numpy"])


@pytest.mark.parametrize("bootstrap", [False, True])
def test_pythonpath_is_honoured(tmp_path, monkeypatch, bootstrap):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "given_on_pythonpath.py").write_text("print('from PYTHONPATH')\n")
    monkeypatch.setenv("PYTHONPATH", str(lib))
    cmd = [sys.executable, "-c", _BOOTSTRAP, "given_on_pythonpath"] if bootstrap else \
        python_command("given_on_pythonpath")
    r = subprocess.run(cmd, cwd=tmp_path, env=child_env(), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "from PYTHONPATH", r.stderr


def test_child_env_leaves_out_the_working_folder_and_keeps_pythonpath(tmp_path,
                                                                      monkeypatch):
    """The parent's own start may have put the working folder on its path (``python -m
    afford``): it is not passed on; the user's PYTHONPATH is, whole."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), "", *sys.path])
    monkeypatch.setenv("PYTHONPATH", "/opt/given")
    parts = child_env()["PYTHONPATH"].split(":")
    assert str(tmp_path) not in parts and "" not in parts and parts[-1] == "/opt/given"
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # given explicitly: honoured
    assert child_env()["PYTHONPATH"].split(":")[-1] == str(tmp_path)


# ---------------------------------------------------------------- the user's code


@pytest.fixture
def user_folder(tmp_path, monkeypatch):
    """A working folder of the user's, left as it was: sys.path and its modules."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.split(".")[0] in ("usermod", "badmod", "exitmod", "mywl"):
            del sys.modules[name]


def test_a_user_module_is_imported_from_the_working_folder_at_the_end(user_folder):
    (user_folder / "usermod.py").write_text("def f():\n    return 7\n")
    assert user_code.import_attr("usermod:f", "--generator")() == 7
    assert sys.path[-1] == str(user_folder) and user_code.added_folder("usermod:f") == \
        str(user_folder)
    assert user_code.added_folder("json:loads") is None
    assert user_code.import_attr("json:loads", "x") is json.loads  # installed: nothing added


@pytest.mark.parametrize("body,match", [
    ("raise ValueError('boom at import')", r"importing badmod failed: it raised ValueError: "
     "boom at import$"),
    ("import sys\nsys.exit(7)", r"importing badmod failed: it called sys.exit\(7\)$"),
    ("import no_such_dependency_xyz", r"importing badmod failed: it raised "
     "ModuleNotFoundError"),
    ("def f(:", r"importing badmod failed: it raised SyntaxError"),
])
def test_a_user_module_that_fails_is_one_line_naming_it(user_folder, body, match):
    (user_folder / "badmod.py").write_text(body + "\n")
    with pytest.raises(InputError, match=match) as info:
        user_code.import_attr("badmod:f", "--generator")
    assert "\n" not in str(info.value) and not isinstance(info.value,
                                                          user_code.UserCodeMissing)


def test_a_missing_module_or_name_is_user_code_missing(user_folder):
    (user_folder / "usermod.py").write_text("x = 1\n")
    with pytest.raises(user_code.UserCodeMissing, match="cannot import no_such_xyz"):
        user_code.import_attr("no_such_xyz.mod:f", "workload")
    with pytest.raises(user_code.UserCodeMissing, match="has no 'g'"):
        user_code.import_attr("usermod:g", "workload")
    assert str(user_folder) in sys.path  # usermod lives here
    assert user_code.added_folder("no_such_xyz:f") is None


def test_a_factory_that_exits_is_one_line(user_folder):
    with pytest.raises(InputError, match=r"^workload 'm:f': it called sys.exit\(3\)$"):
        user_code.call(lambda: sys.exit(3), "m:f", "workload")


@pytest.mark.slow
def test_certify_among_planted_modules_records_the_user_workloads_folder(planted_user_certify):
    """A real certify of a user workload in a folder holding numpy.py and torch.py: every
    child measures, nothing planted runs, the certificate names the folder it added. The
    run is conftest's planted_user_certify (``mywl.wl:factory``, every default stage, so the
    probe and memory children start in that folder too), shared with tests/cli/test_cli.py's
    end to end."""
    from afford.cli import app

    r, user_folder, out = planted_user_certify(lambda *args: CliRunner().invoke(app, args))
    assert r.exit_code == 0, r.output  # NOISY on a busy host too: written and usable
    cert = json.loads(out.read_text())
    assert cert["workloads"][0]["import_folder"] == str(user_folder)
    assert cert["status"] == "complete"
    assert planted_runs(user_folder) == []
    assert sorted(p.name for p in user_folder.glob("*.py")) == ["numpy.py", "torch.py"]
