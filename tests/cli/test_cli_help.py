"""Every command's ``--help`` at 80 columns (issue 40, item 5): no line past 80 columns,
every paragraph filled greedily (no word left alone on a line because the docstring broke
there), no ``<bool>`` metavar on a flag, and a plain usage line
(``afford plan [OPTIONS] CERT``, not ``{cert}``)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from afford.cli import COMMANDS, app, load

WIDTH = 80
FILL = WIDTH - 2  # click's help formatter leaves two columns


def _help(args: list[str]) -> str:
    r = CliRunner().invoke(app, [*args, "--help"], terminal_width=WIDTH,
                           env={"COLUMNS": str(WIDTH)})
    assert r.exit_code == 0, r.output
    return r.output


def _verbatim(args: list[str]) -> set[str]:
    """The lines of the help's ``\\b`` paragraphs (kept as written, never refilled)."""
    cmd = load(args[0])
    for sub in args[1:]:
        cmd = cmd.commands[sub]
    paragraphs = (cmd.help or "").split("\n\n")
    return {ln.strip() for p in paragraphs if p.startswith("\b")
            for ln in p.splitlines()[1:] if ln.strip()}


def _unfilled(text: str, verbatim: set[str]) -> list[str]:
    """Lines followed, in the same paragraph (same indent), by a word that would have fit."""
    lines = text.splitlines()
    bad = []
    for line, nxt in zip(lines, lines[1:]):
        if not line.strip() or not nxt.strip() or line.strip() in verbatim:
            continue
        indent = len(nxt) - len(nxt.lstrip())
        if indent != len(line) - len(line.lstrip()) or indent == 0:
            continue  # a new option, section or paragraph begins
        if nxt.lstrip().startswith(("-", "[")) or re.search(r"\S {2,}\S", nxt.strip()):
            continue  # the next row of a list of options or commands
        word = nxt.split()[0]
        if len(line.rstrip()) + 1 + len(word) <= FILL:
            bad.append(f"{line.rstrip()!r} / {word!r}")
    return bad


def _every_help() -> list[list[str]]:
    out = [[name] for name in COMMANDS]
    history = load("history")
    out += [["history", sub] for sub in history.commands]
    return out


@pytest.mark.parametrize("args", _every_help(), ids=" ".join)
def test_help_fits_80_columns_and_wraps_cleanly(args):
    text = _help(args)
    assert [ln for ln in text.splitlines() if len(ln) > WIDTH] == []
    assert _unfilled(text, _verbatim(args)) == []
    assert "<bool>" not in text
    usage = text.splitlines()[0]
    assert usage.startswith(f"Usage: afford {' '.join(args)} [OPTIONS]") and "{" not in usage


def test_the_usage_line_names_arguments_as_a_man_page_does():
    assert _help(["plan"]).splitlines()[0] == "Usage: afford plan [OPTIONS] CERT"
    assert _help(["compare"]).splitlines()[0] == "Usage: afford compare [OPTIONS] A.JSON B.JSON"
    assert _help(["pin"]).splitlines()[0] == "Usage: afford pin [OPTIONS] [PATHS...]"


def test_the_top_help_fits_80_columns():
    text = _help([])
    assert [ln for ln in text.splitlines() if len(ln) > WIDTH] == []
    assert _unfilled(text, set()) == []
