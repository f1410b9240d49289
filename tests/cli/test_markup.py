"""Issue 14: rich markup in a user's names is shown as written by every command, never read
as markup (a name ``[/]`` raised MarkupError; ``[bold red]x`` restyled the output)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from afford.cli import app
from tests import fuzz_inputs as fz

runner = CliRunner()
STYLE = "[bold red]zz"  # shown as markup, the brackets would vanish
CLOSE = "[/]"  # read as markup, a MarkupError


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("markup")
    doc = fz.cert_doc()
    doc["environment"]["device_name"] = f"dev {STYLE} {CLOSE}"
    doc["environment"]["command"] = f"cmd {STYLE} {CLOSE}"
    doc["warnings"] = [f"warn {STYLE} {CLOSE}"]
    doc["workloads"][0]["warnings"] = [f"w {STYLE} {CLOSE}"]
    plat = fz.platform_doc()
    plat["name"] = f"plat {STYLE} {CLOSE}"
    run = fz.run_doc()
    run["name"] = f"run {STYLE} {CLOSE}"
    ledger = d / f"l {STYLE}.tsv"  # a reading whose names carry markup, for history show
    r = runner.invoke(app, ["history", "add", "-f", str(ledger), *_reading("y")])
    assert r.exit_code == 0 and ledger.is_file(), r.output
    return {"dir": d, "cert": fz.write(d, "cert.json", json.dumps(doc)),
            "platform": fz.write(d, "platform.toml", fz.to_toml(plat)),
            "run": fz.write(d, "run.toml", fz.to_toml(run)), "ledger": ledger}


def _reading(name: str) -> list[str]:
    """A reading's flags, its names marked up (a quantity is one word: no space in it)."""
    return ["--quantity", f"{name}{CLOSE}[red]zz/loss", "--value", "1", "--device",
            f"d {STYLE} {CLOSE}", "--command", f"c {CLOSE}", "--torch", "2.0", "--commit", "abc"]


def _commands(f):
    """Each command with the exit code it gives on these files: plan, ladder, compare and
    history 0, preflight NO-GO (1), a refused quantity (a space in it) and a missing file 2;
    every one prints a marked-up name."""
    d = f["dir"]
    return [(["plan", f["cert"], "-p", f["platform"], "--run", f["run"]], 0),
            (["preflight", f["cert"], "-p", f["platform"], "--run", f["run"]], 1),
            (["ladder", f["cert"], "--params", "1M,10M"], 0),
            (["compare", f["cert"], f["cert"], "--tol", "5%"], 0),
            (["history", "add", "-f", f["ledger"], *_reading("x")], 0),
            (["history", "show", "-f", f["ledger"]], 0),
            (["history", "add", "-f", d / "l.tsv", "--quantity", f"x{CLOSE}{STYLE}/loss",
              "--value", "1", "--device", "d", "--command", "c"], 2),
            (["size", d / f"no {STYLE} {CLOSE}.json", "--seq", "8"], 2)]


@pytest.mark.parametrize("k", range(8))
def test_user_markup_is_shown_as_written(files, k):
    args, code = _commands(files)[k]
    r = runner.invoke(app, [str(a) for a in args], catch_exceptions=True)
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert r.exit_code == code, r.output
    text = " ".join(r.output.split())
    assert STYLE in text, text[-2000:]  # the name is shown, its brackets too


def test_afford_own_styles_still_apply():
    from rich.console import Console

    from afford.report.rich_table import Table, labelled, styled

    c = Console(force_terminal=True, markup=False, width=60)
    t = Table(title="[/] t")
    t.add_column("[bold]h")
    t.add_row("[red]user[/]", styled("[green]PASS[/]"))
    with c.capture() as cap:
        c.print(t)
        c.print(labelled("[yellow]warning:[/]", "[/] literal"))
    out = cap.get()
    assert "[red]user[/]" in out and "[/] t" in out and "[bold]h" in out
    assert "\x1b[32mPASS" in out and "[green]" not in out  # afford's markup styled
    assert "[/] literal" in out and "[yellow]" not in out
