"""``afford compare A.json B.json --tol 5%``: does A's law describe B?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from afford.cli.common import guard, out, print_json
from afford.core.errors import InputError
from afford.core.units import UnitError, flag_number, parse_fraction
from afford.planning.compare_laws import NOT_COMPARED, REPRODUCES, compare_files
from afford.report.compare_tables import comparison_tables, footer, header


def command(
    a: Annotated[Path, typer.Argument(
        metavar="A.json", help="Certificate A: its laws are the prediction.")],
    b: Annotated[Path, typer.Argument(
        metavar="B.json", help="Certificate B: its measured points are judged.")],
    tol: Annotated[str, typer.Option(
        help="Tolerance, stated up front (required): 5% or 0.05.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Does box A's law describe box B, within a tolerance stated before B is read?

    A's laws predict B's measured points; the error per point and a verdict per law
    (REPRODUCES / DOES NOT REPRODUCE / NOT COMPARED); a NOISY certificate is named beside
    the verdict. A and B are never pooled. Exit codes: 0 REPRODUCES, 1 DOES NOT REPRODUCE,
    2 bad input or NOT COMPARED (nothing comparable).
    """
    with guard():
        try:
            flag_number(f"--tol {tol!r}", parse_fraction(tol), high=1.0)  # finite, in (0, 1]
        except UnitError as exc:
            raise InputError(f"--tol {tol!r}: {exc}") from None
        result = compare_files(a, b, tol)  # states it (and refuses 100 %) before B is read
        if as_json:
            print_json(result.model_dump(mode="json", by_alias=True))
        else:
            out.print(header(result))
            for table in comparison_tables(result):
                out.print(table)
            out.print(footer(result))
        if result.verdict == NOT_COMPARED:
            raise InputError("no law of A could be checked against B: "
                             + "; ".join(f"{c.workload} ({c.mode}): {c.note}"
                                         for c in result.checks))
        if result.verdict != REPRODUCES:
            raise typer.Exit(1)
