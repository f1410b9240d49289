"""``afford ladder CERT``: which model sizes this box can train in a budget, two columns."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from afford.cli.common import err, guard, out, print_json
from afford.core.errors import InputError
from afford.core.published_constants import MEMORY_FRACTION, MODES, load_scaling
from afford.core.units import MAX_SECONDS, MIN_FRACTION, UnitError, flag_number, parse_duration
from afford.planning.ladder_steps import parse_entries
from afford.planning.scale_ladder import DEFAULT_PARAMS, build_ladder
from afford.report.ladder_tables import (
    ladder_notes,
    ladder_table,
    lever_figures_table,
    offload_table,
    references_table,
)
from afford.report.rich_table import labelled
from afford.schema.cert import load_certificate

MIN_RATIO = 1e-3  # tokens per parameter: below, a model sees less than a token per 1000 weights


def command(
    cert: Annotated[Path, typer.Argument(help="A certificate (a GPU's default certify, or "
                                          "--sizes).")],
    params: Annotated[str, typer.Option(
        help="Parameter counts, comma-separated; a shape may follow a colon, e.g. "
        "1B:d2048L16 (else one is chosen at the family's measured aspect).")] = DEFAULT_PARAMS,
    workload: Annotated[Optional[str], typer.Option(
        "--workload", "-w", help="The family to scale: a workload the certificate measured "
        "(hf:llama, pkg.mod:factory) whose shape names d and L. Default: tinylm's sizes.")]
    = None,
    budget: Annotated[str, typer.Option(help="Wall-clock budget, e.g. 7d, 36h.")] = "7d",
    ratio: Annotated[Optional[float], typer.Option(
        help="Training tokens per parameter. Default: 20 (Chinchilla).")] = None,
    mode: Annotated[Optional[str], typer.Option(
        help="dtype mode (fp32, bf16, fp16). Default: the sizes' mode.")] = None,
    memory_fraction: Annotated[float, typer.Option(
        help="Share of device memory a run may use.")] = MEMORY_FRACTION,
    as_json: Annotated[bool, typer.Option("--json", help="Print the ladder as JSON.")] = False,
) -> None:
    """Which model sizes this box can train within a budget (two columns, never pooled).

    Per size: tokens, FLOPs, wall clock (a) from the size law measured on this box (its step,
    its stated error, how far beyond the sizes measured) and (b) the roofline floor from the
    measured GEMM rate, memory, and whether it is affordable within the budget (yes, no, or
    unknown with the reason). Exit codes: 0 shown, 2 bad input.
    """
    with guard():
        if mode is not None and mode not in MODES:
            raise InputError(f"--mode {mode!r}: choose one of {', '.join(MODES)}")
        try:
            seconds = parse_duration(budget)
        except UnitError as exc:
            raise InputError(f"--budget: {exc}") from None
        flag_number(f"--budget {budget!r}", seconds, high=MAX_SECONDS)
        flag_number("--ratio", ratio, low=MIN_RATIO, low_open=False, high=1e6)
        flag_number("--memory-fraction", memory_fraction, low=MIN_FRACTION, low_open=False,
                    high=1.0)
        entries = parse_entries(params)
        c = load_certificate(cert)
        lad = build_ladder(c, entries, budget_seconds=seconds, constants=load_scaling(),
                           ratio=ratio, mode=mode, memory_fraction=memory_fraction,
                           workload=workload)
        if as_json:
            print_json(lad.model_dump(mode="json", by_alias=True))
            return
        out.print(ladder_table(lad))
        for n in ladder_notes(lad):
            out.print(n, soft_wrap=True)
        for table in (offload_table(lad), references_table(lad), lever_figures_table(lad)):
            if table is not None:
                out.print(table)
        for w in lad.warnings:
            err.print(labelled("[yellow]warning:[/]", w), soft_wrap=True)
