"""``afford preflight CERT --platform P --run RUN``: GO (exit 0) or NO-GO (exit 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from afford import api
from afford.cli.common import guard, out, print_json
from afford.cli.plan import MANIFEST_HELP, PLATFORM_HELP
from afford.report.plan_tables import render_verdict


def command(
    cert: Annotated[Path, typer.Argument(help="A device certificate (afford certify).")],
    platform: Annotated[str, typer.Option("--platform", "-p", help=PLATFORM_HELP)],
    run: Annotated[Path, typer.Option("--run", "-r", help="The run file (TOML).")],
    manifest: Annotated[Optional[Path], typer.Option("--manifest", help=MANIFEST_HELP)] = None,
    accept_noisy: Annotated[bool, typer.Option(
        "--accept-noisy", help="Go on a certificate whose step times are NOISY (its time "
        "verdict, or a workload's) even where the slow end of their measured spread flips "
        "the decision: GO stays possible on the step as measured, the NOISY reasons stay "
        "among the warnings. Without it such a certificate is NO-GO.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict "
                                          "(afford.preflight/1) as JSON on stdout.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Every warning and note in full (by default at most three "
        "lines of what matters for the answer; --json holds them all).")] = False,
) -> None:
    """May this run start? GO, or NO-GO with every reason: the shape not resident within the
    budget, startup not covered by the margin, checkpoints not fitting on disk, a chunk that
    cannot reach one checkpoint, a target out of reach within max_weeks, a certificate from
    another device.

    A certificate whose step times are NOISY is planned again at the slow end of their
    measured spread: NO-GO only where that flips the decision (unless --accept-noisy),
    otherwise GO with the spread stated. Warns for an old certificate, another torch
    version, unpinned data, a step time extrapolated beyond the measured shapes, and (with
    -v) every warning the certificate carries.

    Exit codes: 0 GO, 1 NO-GO, 2 bad input."""
    with guard():
        v = api.preflight(cert, platform, run, manifest=manifest, accept_noisy=accept_noisy)
        if as_json:
            print_json(v.model_dump(mode="json", by_alias=True))
        else:
            out.print(render_verdict(v, verbose))
    if not v.go:
        raise typer.Exit(1)
