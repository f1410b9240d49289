"""``afford levers CERT``: measured A/B levers on this box (the certificate's device).

The command parses its flags, calls the library (:mod:`afford.api.levers_command`: the
flags checked, the run resolved on this box, the levers as rows), measures with its progress
on stderr, and renders. What measures (:mod:`afford.certification.stage_levers`,
:mod:`afford.measure`, and torch with them) is imported when the command runs, not when the
command line is built."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from afford.api.levers_command import LeversResult, levers_result, prepare_levers
from afford.cli.common import err, guard, interactive, out, print_json
from afford.report.ladder_tables import batch_lines, batch_table, levers_table
from afford.report.rich_table import labelled

if TYPE_CHECKING:
    from afford.certification.stage_levers import LeverJob

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
        c, job = prepare_levers(cert, workloads=workload, levers=levers, arms=arm, mode=mode,
                                quick=quick, full=full, children=children, out=out_path,
                                force=force, command="afford " + " ".join(sys.argv[1:]))
        section = _measure(job, show=interactive() and not as_json)
        done = levers_result(c, section, out_path, force)
        if as_json:
            print_json(_levers_json(done, cert))
        else:
            _print_levers(done)


def _levers_json(done: LeversResult, cert: Path) -> dict:
    """The --json document (``afford.levers/1``)."""
    return {"schema": LEVERS_SCHEMA, "certificate": str(cert),
            "written": str(done.written) if done.written else None,
            "rows": [r.model_dump(mode="json") for r in done.rows],
            "batch_rungs": [r.model_dump(mode="json") for r in done.rungs],
            "levers": done.section.model_dump(mode="json")}


def _print_levers(done: LeversResult) -> None:
    """The levers table (a lever its children could not resolve without a speedup, and a
    line saying so, with the load), MFU notes, the batch ladder and rungs on stdout, each
    run's warnings on stderr, and where the certificate was written."""
    section = done.section
    shown = [r.model_copy(update={"speedup": None}) if r.unresolved else r for r in done.rows]
    out.print(levers_table(shown, f"levers on {section.device_name}, "
                           f"{section.precision} protocol, {section.children} children"))
    for r in done.rows:
        if r.unresolved:  # its speedup cell is left empty: not a slowdown, nor a gain
            out.print(f"{r.workload}: {r.description}: {r.unresolved}")
    for note in dict.fromkeys(r.mfu_note for r in done.rows if r.mfu_note):
        out.print(f"MFU: {note}", soft_wrap=True)
    for line in batch_lines(section):
        out.print(line, soft_wrap=True)
    if (table := batch_table(done.rungs)) is not None:
        out.print(table)
    for run in section.runs:
        for w in run.warnings:
            err.print(labelled("[yellow]warning:[/]", f"{run.workload}: {w}"), soft_wrap=True)
    if done.written is not None:
        out.print(f"certificate with levers written to {done.written}")


def _measure(job: LeverJob, show: bool):
    from afford.certification.stage_levers import measure_levers

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
