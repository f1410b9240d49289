"""``afford levers`` in the library: the command's flags checked, the certificate loaded and
the run resolved on this box (:func:`prepare_levers`); after the measuring, the levers as
rows against the certificate, written into it on request (:func:`levers_result`).

The command line (:mod:`afford.cli.levers`) parses the flags, calls :func:`prepare_levers`,
measures the job with its progress (:func:`afford.certification.stage_levers.measure_levers`),
calls :func:`levers_result`, and renders the :class:`LeversResult`. Nothing here prints.
What measures (:mod:`afford.certification`, and torch with it) is imported inside the functions,
after the check that needs no torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from afford.core.errors import InputError
from afford.core.io import check_writable
from afford.core.provenance import run_label
from afford.core.published_constants import MODES
from afford.planning.lever_rows import BatchRung, LeverRow, batch_rungs, lever_rows
from afford.schema.cert import Certificate, load_certificate, save_measured
from afford.workloads.names import check as check_names

if TYPE_CHECKING:
    from afford.certification.stage_levers import LeverJob
    from afford.schema.levers_section import LeversSection


def prepare_levers(cert: Path, *, workloads: list[str] | None = None,
                   levers: str | None = None, arms: list[str] | None = None,
                   mode: str | None = None, quick: bool = False, full: bool = False,
                   children: int = 3, out: Path | None = None, force: bool = False,
                   command: str = "afford levers") -> tuple[Certificate, LeverJob]:
    """The certificate at ``cert`` and the :class:`~afford.certification.stage_levers.LeverJob` of
    the ``afford levers`` flags (each argument is the flag of its name, ``None`` or ``False``
    where not given) on this box, checked before anything is measured.

    The checks run in this order and the first that fails is an InputError (exit 2): not
    both ``quick`` and ``full``; ``children`` in range; a known ``mode``; every workload
    name reads; every ``arms`` entry reads as ``NAME=SPEC`` with a free name; every lever
    of ``levers`` is known; the certificate loads; every arm names a workload afford can
    build; ``out`` can be written (an existing file only with ``force``); this box is the
    certificate's (:func:`afford.certification.stage_levers.lever_job`).

    The levers: those of ``levers``, all of them when it is empty, none when it is empty
    and ``arms`` are given (only the arms are measured). The precision: quick, full, else
    adaptive. ``command`` is the command line the levers section records."""
    if quick and full:
        raise InputError("--quick and --full contradict each other; choose one")
    from afford.certification.request import check_children

    check_children(children)
    if mode is not None and mode not in MODES:
        raise InputError(f"--mode {mode!r}: choose one of {', '.join(MODES)}")
    check_names(workloads)
    from afford.certification import stage_levers as jobs
    from afford.certification.stage_levers import check_arms, parse_arms, parse_levers

    parsed = parse_arms(arms)
    chosen = parse_levers(levers) if levers or not parsed else ()
    c = load_certificate(cert)
    check_arms(parsed, c.environment.device_class)
    if out is not None:
        check_writable(out, overwrite=force)
    precision = "quick" if quick else "full" if full else "adaptive"
    return c, jobs.lever_job(c, list(workloads or []), chosen, mode, precision, children,
                             parsed, command)


def host_load() -> str:
    """This host's 1-minute load average against its cores, read once the levers were
    measured (what a row the children could not resolve names as the cause); "" where the
    OS has none."""
    try:
        one = os.getloadavg()[0]
    except (AttributeError, OSError):
        return ""
    return f"load {one:.1f} on {os.cpu_count()} core(s) after measuring"


@dataclass(frozen=True)
class LeversResult:
    """A levers run measured: its section, the section's rows against the certificate (the
    speedups, and MFU where the certificate holds a measured GEMM rate), the batch rungs of
    every run, and where the certificate with the section was written (None: it was not)."""

    section: LeversSection
    rows: list[LeverRow]
    rungs: list[BatchRung]
    written: Path | None


def levers_result(c: Certificate, section: LeversSection, out: Path | None = None,
                  force: bool = False) -> LeversResult:
    """The levers ``section`` measured for certificate ``c`` as rows and batch rungs; with
    ``out``, ``c`` with the section is written there (an existing file only with
    ``force``; a failed write saves it beside and names where:
    :func:`afford.schema.cert.save_measured`)."""
    rows = lever_rows(c, section, host_load())
    if out is not None:
        save_measured(c.model_copy(update={"levers": section}), out, overwrite=force)
    where = run_label(section, "levers")
    rungs = [r for run in section.runs for r in batch_rungs(run, where)]
    return LeversResult(section=section, rows=rows, rungs=rungs, written=out)
