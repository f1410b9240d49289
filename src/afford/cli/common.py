"""What every command shares: error handling, consoles, JSON output."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator

import typer
from rich.console import Console

from afford.core.errors import AffordError, InputError
from afford.core.units import MAX_DIM, MIN_FRACTION, UnitError, flag_number, parse_fraction, whole
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


def positive_int(text: str, flag: str) -> int:
    """A flag's whole number (``4Ki`` reads as 4096) in 1..2^40; InputError naming it."""
    try:
        return whole(text, f"{flag} {text!r}", high=MAX_DIM)
    except UnitError as exc:
        raise InputError(f"{exc} (give a positive whole number)") from None


def fraction_flag(text: str, flag: str) -> float:
    """A flag's share of device memory (``0.9`` or ``90%``), above 0, at most 1."""
    try:
        value = parse_fraction(text)
    except UnitError as exc:
        raise InputError(f"{flag} {text!r}: {exc}") from None
    return flag_number(f"{flag} {text!r}", value, low=MIN_FRACTION, low_open=False, high=1.0)


def alloc_conf_here(given: str | None) -> str:
    """``--alloc-conf``, else this shell's ``PYTORCH_CUDA_ALLOC_CONF`` (or the newer
    ``PYTORCH_ALLOC_CONF``), else '' (the native allocator)."""
    if given is not None:
        return given
    return os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or os.environ.get("PYTORCH_ALLOC_CONF") \
        or ""
