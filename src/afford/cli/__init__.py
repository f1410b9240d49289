"""The command line: one small file per command; each parses, calls the library, renders,
and sets the exit code (0 success / GO, 1 NO-GO or failed gate, 2 bad input, 3 measurement
failed)."""

from __future__ import annotations

import typer

from afford.cli import (bars, certify, compare, gate, history, ladder, levers, milestones, pin,
                        plan, predict, preflight, report, schema, size)


app = typer.Typer(
    name="afford", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    help="What can this box afford to train, and may this run start?\n\n"
         "Start with `afford certify`: it measures this machine and writes a certificate that "
         "the other commands read.")

app.command("certify")(certify.command)
app.command("schema")(schema.command)
app.command("plan")(plan.command)
app.command("preflight")(preflight.command)
app.add_typer(history.app, name="history")
app.command("pin")(pin.command)
app.command("compare")(compare.command)
app.command("report")(report.command)
app.command("gate")(gate.command)
app.command("ladder")(ladder.command)
app.command("levers")(levers.command)
app.command("size")(size.command)
app.command("predict")(predict.command)
app.command("bars")(bars.command)
app.command("milestones")(milestones.command)


def main() -> None:
    app()
