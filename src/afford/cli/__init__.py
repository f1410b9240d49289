"""The command line: one small file per command; each parses, calls the library, renders,
and sets the exit code (0 success / GO, 1 NO-GO or failed gate, 2 bad input, 3 measurement
failed).

Commands load lazily: ``afford plan ...`` imports ``afford.cli.plan`` and nothing of the
other commands (certify's stage modules pull in numpy, scipy and pydantic schema classes,
a noticeable share of a second of start-up), so a command that does not measure starts fast.
``afford --help`` lists the commands from :data:`COMMANDS` without importing any of them.

Help is click's plain help, not typer's rich panels: click rewraps a docstring's paragraphs
to the terminal (at most 80 columns), so no word is left alone on a line, flags show no
``<bool>`` metavar, and a usage line reads ``afford plan [OPTIONS] CERT``
(:class:`PlainUsage`).

``afford --version`` prints the version; ``afford --install-completion`` (or
``--show-completion``) sets up typer's shell completion for bash, zsh, fish or PowerShell:
command names complete from :data:`COMMANDS` without importing a command, a command's options
from its own module.
"""

from __future__ import annotations

import importlib
from typing import Annotated

import typer
from typer.core import TyperCommand, TyperGroup

#: name -> (module under afford.cli, attribute, one line for ``afford --help``). The
#: attribute is the command function, or a ``typer.Typer`` for a command with subcommands.
#: The one-liners are checked against each command's own help by tests/cli/test_cli_lazy.py.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "certify": ("certify", "command", "Measure this box and write a device certificate."),
    "schema": ("schema", "command", "Print the JSON Schema of an afford file kind."),
    "plan": ("plan", "command", "Plan training on a platform from a certificate."),
    "preflight": ("preflight", "command", "May this run start? GO, or NO-GO with every reason."),
    "pin": ("pin", "command", "Pin data sources by SHA-256 into a manifest."),
    "compare": ("compare", "command",
                "Does box A's law describe box B, within a tolerance stated before B is read?"),
    "report": ("report", "command", "Render certificates (and plans, a manifest, a ledger)."),
    "gate": ("gate", "command", "Run the gates and the determinism audit."),
    "ladder": ("ladder", "command", "Which model sizes this box can train within a budget."),
    "levers": ("levers", "command", "Measure the levers on this box: A/B pairs on one workload."),
    "size": ("size", "command", "Predicted peak allocated and reserved memory at (batch, seq)."),
    "predict": ("predict", "command",
                "Predicted warm step time, tokens/s and memory at (batch, seq)."),
    "bars": ("bars", "command", "Byte-level n-gram baselines (bits per byte): the bars to beat."),
    "milestones": ("milestones", "command",
                   "Judge a ladder of milestones against runs' eval readings."),
    "history": ("history", "app", "The history ledger: add readings, strike them, show them."),
}


class PlainUsage(TyperCommand):
    """A command whose usage line names its arguments as a man page does: ``CERT`` when
    required, ``[CERT]`` when not, ``...`` when repeated (typer writes ``{cert}``)."""

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name != "argument":
                continue
            name = (param.metavar or param.name or "").upper().removesuffix("...")
            name += "..." if param.nargs != 1 else ""
            pieces.append(name if param.required else f"[{name}]")
        return pieces


def load(name: str) -> TyperCommand:
    """The command for ``name``, importing only its module."""
    module, attr, _ = COMMANDS[name]
    target = getattr(importlib.import_module(f"afford.cli.{module}"), attr)
    if isinstance(target, typer.Typer):
        command = typer.main.get_command(target)
        for sub in getattr(command, "commands", {}).values():
            if type(sub) is TyperCommand:
                sub.__class__ = PlainUsage
    else:
        single = typer.Typer(add_completion=False, rich_markup_mode=None)
        single.command(name, cls=PlainUsage)(target)
        command = typer.main.get_command(single)
    command.name = name
    return command


class LazyGroup(TyperGroup):
    """A Typer group whose commands are imported when one is invoked; listing them (the
    group's own help) shows the one-liners of :data:`COMMANDS` instead."""

    _listing = False

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: typer.Context, cmd_name: str) -> TyperCommand | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        if cmd_name not in COMMANDS:
            return None
        if self._listing:
            line = COMMANDS[cmd_name][2]
            return TyperCommand(cmd_name, help=line, short_help=line)
        self.commands[cmd_name] = load(cmd_name)
        return self.commands[cmd_name]

    def format_help(self, ctx: typer.Context, formatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    name="afford", cls=LazyGroup, no_args_is_help=True, add_completion=True,
    pretty_exceptions_enable=False, rich_markup_mode=None,
    help="What can this box afford to train, and may this run start?\n\n"
         "Start with `afford certify`: it measures this machine and writes a certificate that "
         "the other commands read. `afford COMMAND --help` teaches each command. Where a "
         "command reads a certificate, plan, platform, run or manifest file, `-` reads it "
         "from standard input.")


def _print_version(given: bool) -> None:
    if given:
        from afford.core.version import __version__

        typer.echo(f"afford {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print afford's version and exit.")] = False) -> None:
    pass


def main() -> None:
    app()
