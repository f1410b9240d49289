"""``afford --version`` and typer's shell completion: the version is the installed one, and
completion answers command names (from the lazy listing) and a command's own options."""

from __future__ import annotations

from importlib import metadata

from typer.testing import CliRunner

import afford
from afford.cli import app


def _complete(words: str, shell: str = "bash") -> str:
    """What the shell's completion function would get for the command line ``words``
    (the last word being completed)."""
    env = {"_AFFORD_COMPLETE": f"complete_{shell}"}
    if shell == "bash":
        env |= {"COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1)}
    else:
        env |= {"_TYPER_COMPLETE_ARGS": words}
    r = CliRunner().invoke(app, [], env=env, prog_name="afford")
    assert r.exit_code == 0, r.output
    return r.output


def test_version_prints_the_installed_version_and_exits_0():
    r = CliRunner().invoke(app, ["--version"])
    assert r.exit_code == 0
    assert r.output == f"afford {afford.__version__}\n"
    assert afford.__version__ == metadata.version("afford")


def test_version_wins_over_a_command():
    r = CliRunner().invoke(app, ["--version", "plan"])
    assert r.exit_code == 0 and r.output.startswith("afford ")


def test_completion_of_command_names():
    assert _complete("afford pl").split() == ["plan"]
    assert set(_complete("afford pre").split()) == {"preflight", "predict"}
    assert "history" in _complete("afford h").split()


def test_completion_of_a_commands_options_and_subcommands():
    assert _complete("afford plan --pl").split() == ["--platform"]
    assert _complete("afford history a").split() == ["add"]


def test_the_completion_script_names_afford(monkeypatch):
    """(typer detects the shell from the process's parents: under a test runner started
    from a plain ``sh``, one it has no script for, so the detection is fixed to bash.)"""
    import typer.completion

    monkeypatch.setattr(typer.completion, "_get_shell_name", lambda: "bash")
    r = CliRunner().invoke(app, ["--show-completion"], prog_name="afford")
    assert r.exit_code == 0
    assert "_AFFORD_COMPLETE=complete_" in r.output


def test_zsh_completion_describes_the_commands():
    out = _complete("afford pin", shell="zsh")
    assert '"pin"' in out and "Pin data sources" in out
