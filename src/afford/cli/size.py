"""``afford size CERT --seq S``: will it fit, and what is the largest batch that does?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from afford.cli.common import (
    alloc_conf_here,
    err,
    fraction_flag,
    guard,
    out,
    positive_int,
    print_json,
)
from afford.core.errors import InputError
from afford.core.provenance import run_label
from afford.core.published_constants import MEMORY_FRACTION, MODES
from afford.figures.memory_figures import SizeReport, size
from afford.report.memory_tables import replay_tables, size_tables, tagged_json
from afford.report.rich_table import labelled
from afford.schema.cert import load_certificate
from afford.schema.user_constants import load_constants


def command(
    cert_path: Annotated[Path, typer.Argument(
        metavar="CERT", help="A certificate written by `afford certify` (with its memory "
        "section).")],
    seq: Annotated[str, typer.Option(
        "--seq", help="Sequence length: 2048, 4Ki (= 4096, binary) or 4k (= 4000, decimal); "
        "the parsed value is echoed in the title.")],
    batch: Annotated[Optional[str], typer.Option(
        "--batch", help="Batch size. Default: the largest that fits.")] = None,
    mode: Annotated[Optional[str], typer.Option(
        "--mode", help="dtype mode of the law: fp32, bf16 or fp16. Default: the mode the "
        "certificate timed the workload in, else the first its memory stage measured.")
    ] = None,
    workload: Annotated[Optional[str], typer.Option(
        "--workload", "-w", help="Workload as named in the certificate. Default: its one "
        "workload (of several: tinylm where it is one of them).")] = None,
    memory_fraction: Annotated[str, typer.Option(
        "--memory-fraction", help="Share of the device memory a run may use (0.90 or "
        "90%).")] = f"{MEMORY_FRACTION:.2f}",
    budget: Annotated[Optional[str], typer.Option(
        "--budget", hidden=True, help="Deprecated name of --memory-fraction.")] = None,
    constants: Annotated[Optional[Path], typer.Option(
        "--constants", help="Your own sizing constants (TOML, schema afford.constants/1: "
        "name, value, unit, what it multiplies, mode; `afford schema constants`), judged "
        "CONFIRMED or WRONG against the certificate's law like the built-in defaults.")
    ] = None,
    alloc_conf: Annotated[Optional[str], typer.Option(
        "--alloc-conf", help="PYTORCH_CUDA_ALLOC_CONF of the run to size (e.g. "
        "expandable_segments:True). Default: this shell's PYTORCH_CUDA_ALLOC_CONF. The "
        "allocator replay predicts reserved memory under it, and names the other setting "
        "as a lever when that changes whether the shape fits.")] = None,
    measure: Annotated[bool, typer.Option(
        "--measure", help="Measure this shape on this machine (one memory child, a few "
        "training steps; it must be the certificate's device) and keep the reading in the "
        "certificate, which is rewritten in place: it then answers there as measured. "
        "Settles a figure marked extrapolated (fits: likely or uncertain). Needs --batch.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Predicted peak allocated and reserved memory at (batch, seq) from the certificate's
    memory law, whether it fits the budget, and the largest batch that does. (The step time,
    tokens/s and steps per chunk at a shape: `afford predict CERT --batch B --seq S`.)

    Exit codes: 0 it fits (yes, or likely where the figure is extrapolated); 1 it does not,
    or it is uncertain (extrapolated, the margin inside the plausible error: --measure
    settles it); 2 bad input (no such certificate, workload or mode; a bad
    --seq, --batch or --memory-fraction).
    """
    with guard():
        s = positive_int(seq, "--seq")
        b = positive_int(batch, "--batch") if batch is not None else None
        flag, text = "--memory-fraction", memory_fraction
        if budget is not None:  # the old name, kept working for scripts
            err.print("note: --budget is deprecated; use --memory-fraction (a share of the "
                      "device memory; afford ladder's --budget is wall-clock time)",
                      soft_wrap=True)
            flag, text = "--budget", budget
        fraction = fraction_flag(text, flag)
        if mode is not None and mode not in MODES:
            raise InputError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
        mine = load_constants(constants) if constants is not None else None
        cert = load_certificate(cert_path)
        if measure:
            cert = _measured(cert, cert_path, workload, mode, b, s)
        report = size(cert, workload, s, b, mode, fraction, run_label(cert), mine,
                      alloc_conf=alloc_conf_here(alloc_conf))
        if as_json:
            print_json({**report_json(report, cert_path), **replay_json(report)})
        else:
            for table in size_tables(report) + replay_tables(report):
                out.print(table)
            for w in report.warnings:
                err.print(labelled("[yellow]warning:[/]", w), soft_wrap=True)
        if report.memory.fits in ("no", "uncertain"):  # the --batch given (or one sequence)
            raise typer.Exit(1)                      # does not fit, or cannot be vouched for


def _measured(cert, cert_path: Path, workload: str | None, mode: str | None,
              batch: int | None, seq: int):
    """The certificate with the asked shape measured here and kept (rewritten in place,
    atomically; ``-`` for standard input is refused: there is no file to keep it in)."""
    if batch is None:
        raise InputError("--measure needs --batch: the shape to measure")
    if str(cert_path) == "-":
        raise InputError("--measure keeps the reading in the certificate: give its file, "
                         "not standard input")
    from afford.certification import asked
    from afford.figures.memory_figures import find_law
    from afford.measure.env import capture, choose_device
    from afford.schema.cert import save_measured

    env = capture(choose_device(), "afford size --measure")
    asked.check_device(cert, env.device_name, env.device_type)
    law = find_law(cert, workload, mode)
    keys = law.dim_keys
    err.print(f"measuring {law.workload} ({law.mode}) at batch {batch} x seq {seq} in one "
              "memory child ...", soft_wrap=True)
    reading = asked.measure(cert, law, {keys.get("B", "B"): batch, keys.get("s", "s"): seq})
    cert = asked.with_reading(cert, law, reading)
    save_measured(cert, cert_path, overwrite=True)
    err.print(f"kept the reading in {cert_path}", soft_wrap=True)
    return cert


def report_json(r: SizeReport, cert_path: Path) -> dict:
    """``peak_allocated`` and ``peak_reserved`` are the one memory answer's (measured there,
    else the replay where trusted, else the law: ``memory.source``), as every command prints
    them; the law's own figures under ``law``."""
    m, law = r.memory, r.law
    return {
        "schema": "afford.size/1", "certificate": str(cert_path), "workload": r.workload,
        "mode": r.mode, "device": r.device, "dims": m.shape, "batch_given": r.batch_given,
        "extrapolated": m.extrapolated, "params": tagged_json(law.params),
        "states": tagged_json(law.states), "peak_allocated": tagged_json(m.allocated),
        "peak_reserved": tagged_json(m.reserved), "memory": m.model_dump(mode="json"),
        "law": {"peak_allocated": tagged_json(law.allocated),
                "peak_reserved": tagged_json(law.reserved),
                "reserved_over_allocated": tagged_json(law.ratio),
                "extrapolated": law.extrapolated},
        "device_memory": tagged_json(r.device_memory), "budget": tagged_json(r.budget),
        "budget_share": tagged_json(r.budget_share), "fits": m.fits_bool,
        "fits_level": m.fits,
        "over_device_memory": r.over_device, "note": r.note,
        "max_batch": tagged_json(r.max_batch),
        "heldout_max_error": {"allocated": tagged_json(r.heldout_allocated),
                              "reserved": tagged_json(r.heldout_reserved)},
        "comparisons": [{"key": c.key, "name": c.name, "peak": tagged_json(c.peak),
                         "max_batch": tagged_json(c.max_batch)} for c in r.comparisons],
        "verdicts": [v.model_dump(mode="json") for v in r.verdicts],
        "warnings": r.warnings,
    }


# ---- the allocator replay ------------------------------------------------------------


def replay_json(r: SizeReport) -> dict:
    """The replay's answer for ``--json``: both allocator settings, the lever and the
    breakdown at the peak; ``{"replay": None}`` without one."""
    rp = r.replay
    if rp is None:
        return {"replay": None}
    return {"replay": {
        "used": rp.used, "why": rp.why, "alloc_conf": rp.alloc_conf,
        "expandable_segments": rp.expandable, "peak_allocated": tagged_json(rp.allocated),
        "peak_reserved_native": tagged_json(rp.reserved_native),
        "peak_reserved_expandable": tagged_json(rp.reserved_expandable),
        "fits_native": rp.fits_native, "fits_expandable": rp.fits_expandable,
        "max_batch_native": tagged_json(rp.max_batch_native),
        "max_batch_expandable": tagged_json(rp.max_batch_expandable),
        "lever": rp.lever,
        "breakdown": rp.breakdown.model_dump(mode="json") if rp.breakdown else None}}
