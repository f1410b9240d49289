"""What every command shares: error handling, consoles, JSON output."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator

import typer
from rich.console import Console

from afford.core.errors import AffordError
from afford.report.rich_table import labelled

# Markup off: whatever a string printed here holds (a user's workload named "[/]", a reason
# with brackets) is shown as written; afford's own styling is a rich Text
# (afford.report.rich_table: styled, labelled).
out = Console(highlight=False, soft_wrap=False, markup=False)
err = Console(stderr=True, highlight=False, markup=False)


@contextlib.contextmanager
def guard() -> Iterator[None]:
    """Turn afford's errors into a one-paragraph message on stderr and the exit code."""
    try:
        yield
    except AffordError as exc:
        err.print(labelled("[bold red]error:[/]", str(exc)), soft_wrap=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(130) from None


def print_json(doc: object) -> None:
    """One JSON document on stdout, nothing else."""
    sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")
    sys.stdout.flush()


def interactive() -> bool:
    return sys.stdout.isatty()
