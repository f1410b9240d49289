"""``afford plan CERT --platform P [--run RUN]``: the cost model, every figure tagged."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from afford import api
from afford.cli.common import guard, out, print_json
from afford.core.io import atomic_write_text, check_writable

PLATFORM_HELP = ("A preset (kaggle-p100, kaggle-t4x2, colab-free, local, spot) or the path "
                 "to a platform TOML file.")
MANIFEST_HELP = ("A data manifest (afford pin) that pins the run's data sources; without one "
                 "every source is unpinned and counts derived from it are provisional. Each "
                 "pinned source is re-checked here: one changed since it was pinned counts "
                 "as unpinned.")


def command(
    cert: Annotated[Path, typer.Argument(help="A device certificate (afford certify).")],
    platform: Annotated[str, typer.Option("--platform", "-p", help=PLATFORM_HELP)],
    run: Annotated[Optional[Path], typer.Option(
        "--run", "-r", help="A run file (TOML): workload, shape, target, checkpoints.")] = None,
    manifest: Annotated[Optional[Path], typer.Option("--manifest", help=MANIFEST_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan (afford.plan/1) "
                                          "as JSON on stdout.")] = False,
    out_path: Annotated[Optional[Path], typer.Option(
        "--out", "-o", help="Also write the plan (afford.plan/1 JSON, what afford.track and "
        "afford report read) to this file, atomically: nothing is written on an error.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Every warning and note in full (by default at most three "
        "lines of what matters for the answer; --json holds them all).")] = False,
) -> None:
    """Plan training on a platform from a certificate: the chunk and its margin, steps per
    chunk and memory fit for every measured shape, the weekly quota with startup charged
    (beside the naive figure, marked wrong), checkpoint cadence, the failure ledger and disk.

    The run file may name any shape of a certified workload (value, batch, or the full
    shape): the step time is then the certificate's step-time model at that (batch, seq),
    FITTED and marked * beyond the shapes it measured, and memory its memory law. A
    certificate whose step times are NOISY says so first; its warnings follow.
    Exit codes: 0 planned, 2 bad input (no --out file is written)."""
    with guard():
        from afford.report.plan_tables import render_plan

        if out_path is not None:
            check_writable(out_path, overwrite=force)
        result = api.plan(cert, platform, run, manifest=manifest)
        if out_path is not None:
            atomic_write_text(out_path, result.to_json(), overwrite=force)
        if as_json:
            print_json(result.model_dump(mode="json", by_alias=True))
            return
        out.print(render_plan(result, verbose))
        if out_path is not None:
            out.print(f"plan written to {out_path}")
