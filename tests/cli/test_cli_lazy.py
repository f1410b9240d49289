"""The command line loads lazily: ``afford --help`` lists every command without importing
one, ``afford plan --help`` imports the plan command and no other, and every command module
in ``afford/cli`` is registered."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import afford.cli as cli
from afford.cli import COMMANDS, app, load

HELPERS = {"__init__", "common"}


def _loaded_commands(argv: list[str], prefix: str = "afford.cli.") -> set[str]:
    code = ("import sys\nfrom afford._entry import main\n"
            f"sys.argv = ['afford', *{argv!r}]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            f"print('loaded:', *sorted(m for m in sys.modules if m.startswith({prefix!r})),"
            " file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    last = done.stderr.strip().splitlines()[-1].split()
    assert last[0] == "loaded:", done.stderr
    return set(last[1:])


def test_every_command_module_is_registered():
    folder = Path(cli.__file__).parent
    modules = {p.stem for p in folder.glob("*.py")} - HELPERS
    registered = {module for module, _, _ in COMMANDS.values()}
    # certify_distributed is certify's helper, reached through certify --distributed
    assert modules - registered == {"certify_distributed"}
    assert registered <= modules


def test_top_help_lists_every_command_and_imports_none():
    assert _loaded_commands(["--help"]) <= {"afford.cli.common"}
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for name, (_, _, line) in COMMANDS.items():
        assert name in result.output
        assert line.split()[0] in result.output


def test_a_command_imports_itself_only():
    loaded = _loaded_commands(["plan", "--help"])
    assert "afford.cli.plan" in loaded
    assert not loaded & {"afford.cli.certify", "afford.cli.size", "afford.cli.report"}


def test_plan_help_builds_no_certificate_schema():
    """Its schema and planner modules load when a plan is made, not for --help (building the
    pydantic classes was most of its start-up)."""
    loaded = _loaded_commands(["plan", "--help"], prefix="afford.")
    assert not loaded & {"afford.schema.cert", "afford.planning.planner", "afford.schema.manifest"}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_loads_with_its_own_help(name):
    command = load(name)
    assert command.name == name
    assert command.help and len(command.help) > len(COMMANDS[name][2]) // 2
    result = CliRunner().invoke(app, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert f"afford {name}" in result.output


def test_an_unknown_command_is_exit_2_naming_it():
    result = CliRunner().invoke(app, ["plna"])
    assert result.exit_code == 2
    assert "plna" in result.output


def test_help_keeps_the_extras_names():
    """Rich markup would read ``[hf]`` as a style tag and drop it (issue 29, item 5)."""
    got = CliRunner().invoke(app, ["certify", "--help"], env={"COLUMNS": "200"})
    assert got.exit_code == 0
    assert "afford[hf]" in got.output and "afford[lora]" in got.output
