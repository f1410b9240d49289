"""``afford levers CERT``: measured A/B levers on this box (the certificate's device).

What measures (:mod:`afford.certify.stage_levers`, :mod:`afford.measure`, and torch with them) is
imported when the command runs, not when the command line is built."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from afford.cli.common import err, guard, interactive, out, print_json
from afford.core.errors import InputError
from afford.core.io import check_writable
from afford.core.provenance import run_label
from afford.core.published_constants import MODES
from afford.plan.lever_rows import batch_rungs, lever_rows
from afford.report.ladder_tables import batch_lines, batch_table, levers_table
from afford.report.rich_table import labelled
from afford.schema.cert import Certificate, load_certificate, save_measured
from afford.workloads.names import check as check_names

if TYPE_CHECKING:
    from afford.certify.stage_levers import LeverJob

LEVERS_SCHEMA = "afford.levers/1"


def command(
    cert: Annotated[Path, typer.Argument(help="The certificate of this box.")],
    workload: Annotated[Optional[list[str]], typer.Option(
        "--workload", "-w", help="Workload to pull the levers on (repeatable), e.g. tinylm@q3, "
        "tinylm@d64L2H2b4s256. Default: tinylm@q3 on a large GPU, else tinylm.")] = None,
    levers: Annotated[Optional[str], typer.Option(
        help="Levers, comma-separated: bf16, fused, compile, cudagraphs, batch2, batch4. "
        "Default: all.")] = None,
    arm: Annotated[Optional[list[str]], typer.Option(
        "--arm", help="A user arm, NAME=SPEC (repeatable): B is the workload SPEC (e.g. "
        "mypkg.model:without_kda, your model with one part removed) built at the same shape, "
        "timed in the same children as A; an arm whose backward did not run is NOT "
        "EXECUTABLE. With --arm and no --levers, only the arms are measured.")] = None,
    mode: Annotated[Optional[str], typer.Option(
        help="Base dtype mode. Default: the certificate's.")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="A small fixed floor per point.")] = False,
    full: Annotated[bool, typer.Option("--full", help="3.0 s per point per child.")] = False,
    children: Annotated[int, typer.Option(help="Independent child processes (>= 3).")] = 3,
    out_path: Annotated[Optional[Path], typer.Option(
        "--out", "-o", help="Write the certificate with the levers section to this path.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the levers as JSON.")] = False,
) -> None:
    """Measure the levers on this box: A/B pairs on one workload, in one run.

    Each pair is timed in independent child processes; the speedup comes with its spread,
    and MFU before and after where the certificate holds a measured GEMM rate. A lever that
    cannot apply here is NOT EXECUTABLE with the reason. Exit codes: 0 measured, 2 bad
    input, 3 nothing could be measured.
    """
    with guard():
        if quick and full:
            raise InputError("--quick and --full contradict each other; choose one")
        from afford.certify.request import check_children

        check_children(children)
        if mode is not None and mode not in MODES:
            raise InputError(f"--mode {mode!r}: choose one of {', '.join(MODES)}")
        check_names(workload)  # torch-free: a typo is answered before torch loads
        from afford.certify.stage_levers import check_arms, parse_arms, parse_levers

        arms = parse_arms(arm)
        chosen = parse_levers(levers) if levers or not arms else ()
        c = load_certificate(cert)
        check_arms(arms, c.environment.device_class)
        if out_path is not None:
            check_writable(out_path, overwrite=force)
        job = _job(c, list(workload or []), chosen, mode,
                   "quick" if quick else "full" if full else "adaptive", children, arms)
        section = _measure(job, show=interactive() and not as_json)
        rows = lever_rows(c, section)
        if out_path is not None:
            save_measured(c.model_copy(update={"levers": section}), out_path,
                          overwrite=force)
        if as_json:
            print_json({"schema": LEVERS_SCHEMA, "certificate": str(cert),
                        "written": str(out_path) if out_path else None,
                        "rows": [r.model_dump(mode="json") for r in rows],
                        "batch_rungs": [r.model_dump(mode="json") for run in section.runs
                                        for r in batch_rungs(run, run_label(section, "levers"))],
                        "levers": section.model_dump(mode="json")})
            return
        out.print(levers_table(rows, f"levers on {section.device_name}, "
                               f"{section.precision} protocol, {section.children} children"))
        for note in dict.fromkeys(r.mfu_note for r in rows if r.mfu_note):
            out.print(f"MFU: {note}", soft_wrap=True)
        for line in batch_lines(section):
            out.print(line, soft_wrap=True)
        rungs = [r for run in section.runs
                 for r in batch_rungs(run, run_label(section, "levers"))]
        if (table := batch_table(rungs)) is not None:
            out.print(table)
        for run in section.runs:
            for w in run.warnings:
                err.print(labelled("[yellow]warning:[/]", f"{run.workload}: {w}"), soft_wrap=True)
        if out_path is not None:
            out.print(f"certificate with levers written to {out_path}")


def _job(c: Certificate, workloads: list[str], chosen: tuple[str, ...], mode: str | None,
         precision: str, children: int, arms: tuple = ()) -> LeverJob:
    """Resolve the run on this box; InputError when this box is not the certificate's."""
    from afford.certify.stage_levers import LeverJob, default_workloads
    from afford.measure import env as envmod
    from afford.measure.timing import rule_for
    from afford.workloads.clock import clock_name

    e = c.environment
    device = envmod.choose_device("cuda" if e.device_type == "cuda" else "cpu")
    if device.type == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InputError(f"the certificate is of {e.device_name} (cuda) but no CUDA "
                             "device is visible here; levers are measured on the box itself")
    here = envmod.capture(device, "afford " + " ".join(sys.argv[1:]))
    if here.device_name != e.device_name:
        raise InputError(f"this box is {here.device_name}, the certificate is of "
                         f"{e.device_name}: devices are not pooled; certify this box first")
    return LeverJob(workloads=workloads or default_workloads(e.device_class), levers=chosen,
                    mode=mode or (c.workloads[0].mode if c.workloads else "fp32"),
                    device=str(device), device_type=device.type,
                    device_class=here.device_class, device_name=here.device_name,
                    device_memory=here.device_memory_bytes, rule=rule_for(precision),
                    precision=precision, children=children, seed=c.protocol.seed,
                    clock=clock_name(device.type), torch_version=here.torch_version,
                    command=here.command, arms=arms)


def _measure(job: LeverJob, show: bool):
    from afford.certify.stage_levers import measure_levers

    if not show:
        return measure_levers(job)
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                        console=err, transient=True)
    with progress:
        task = progress.add_task("levers", total=None)

        def on_event(event) -> None:
            if event["event"] == "begin":
                progress.update(task, description=f"child {event['child']}: {event['key']}")

        return measure_levers(job, on_event)
