"""The probes stage as tables, one definition for the terminal (``afford certify``) and the
report (Markdown, HTML): device ceilings and start-up, launch-boundness with FLOPs and MFU,
step 0 against warm with checkpoint writes, every batch-ladder rung, every timed start-up
and the protocol (designed tables, never a schema dump). Renders the tagged figures of
:mod:`afford.figures.probes_figures` and :mod:`afford.figures.probes_detail`; computes
nothing.
"""

from __future__ import annotations

from afford.core.provenance import NotExecutable
from afford.figures.probes_detail import ladder_rows, protocol_rows, startup_rows
from afford.figures.probes_figures import ProbesSummary, summarize_probes
from afford.report.model import Section, Table
from afford.report.terminal import LEGEND, drawn, fmt_list, not_executable_caption
from afford.schema.cert import Certificate

DEVICE_COLUMNS = ("figure", "measured", "datasheet", "measured / datasheet", "max rel. error")
WORKLOAD_COLUMNS = ("workload", "mode", "probed at", "verdict", "fixed share", "GPU util",
                    "idle <=5%", "FLOP/step", "at", "MFU ceiling", "MFU datasheet",
                    "own GEMM / square")
WARMUP_COLUMNS = ("workload", "mode", "at", "first steps (0, 1, ...)", "warm median",
                  "step0/warm, at this point", "until warm (5 %)", "ckpt write", "ckpt size")
WARMUP_NOTE = ("step0/warm here is at the point under 'at' (the largest resident one; median "
               "over its children's steps); the summary's step0/warm is the median over every "
               "point of the sweep")


def _short(row: tuple) -> tuple:
    """A probe that could not run, or failed, said in a word: the section's notes give each
    reason once (the report; the terminal lists them under its table)."""
    return tuple(("FAILED" if c.failed else "NOT EXECUTABLE") if isinstance(c, NotExecutable)
                 else c for c in row)


def device_table(s: ProbesSummary) -> Table:
    rows = [(r.figure, r.measured, r.datasheet, r.of_datasheet, r.max_rel_error)
            for r in s.device]
    if s.wall_seconds is not None:
        rows.append(("probes stage (wall)", s.wall_seconds, None, None, None))
    return Table(DEVICE_COLUMNS, tuple(rows))


def workload_table(s: ProbesSummary) -> Table:
    return Table(WORKLOAD_COLUMNS, tuple(
        (r.name, r.mode, r.at, r.verdict, r.fixed_share, r.utilisation, r.idle_share, r.flops,
         r.flops_at, r.mfu_ceiling, r.mfu_datasheet, r.own_gemm) for r in s.workloads))


def warmup_table(s: ProbesSummary) -> Table:
    return Table(WARMUP_COLUMNS, tuple(
        (r.name, r.mode, r.at, fmt_list(r.first), r.warm, r.ratio, r.until_warm,
         r.checkpoint_seconds, r.checkpoint_bytes) for r in s.warmup), WARMUP_NOTE)


def probes_device_table(s: ProbesSummary, title: str):
    """The device table for the terminal (``afford certify``)."""
    return drawn(device_table(s), title, not_executable_caption(s.not_executable))


def probes_workload_table(s: ProbesSummary, title: str):
    return drawn(workload_table(s), title, LEGEND)


def probes_warmup_table(s: ProbesSummary, title: str):
    return drawn(warmup_table(s), title)


def ladder_table(cert: Certificate) -> Table | None:
    rows = ladder_rows(cert)
    if not rows:
        return None
    return Table(("workload", "mode", "rung", "shape", "tokens / step", "step 0", "warm step",
                  "timed steps"), tuple(
        (r.name, r.mode, r.multiplier, r.shape, r.tokens, r.step0, r.warm, r.steps)
        for r in rows), "the batch ladder: the probed shape with its batch multiplied; "
        "t = F + c tokens is fitted over the rungs (fixed share above)")


def startup_table(cert: Certificate) -> Table | None:
    rows = startup_rows(cert)
    if not rows:
        return None
    return Table(("process", "spawn to ready", "import torch", "import transformers",
                  "CUDA context", "in the medians"), tuple(
        (r.role, r.process, r.import_torch, r.import_transformers, r.cuda_init, r.counted)
        for r in rows), "every fresh process whose start-up was timed (the device table's "
        "start-up figures are medians over those counted)")


def protocol_table(cert: Certificate) -> Table | None:
    rows = protocol_rows(cert)
    return Table(("setting", "value"), tuple(rows), "the probes' protocol") if rows else None


def probes_section(cert: Certificate, plots: tuple[str, ...] = ()) -> Section:
    """The report's Probes section (the certificate has a probes section)."""
    s = summarize_probes(cert)
    pr = cert.probes
    notes = list(s.warnings) + [f"NOT EXECUTABLE: {n.what}: {n.reason}" for n in
                                s.not_executable]
    if pr.datasheet is not None:
        d = pr.datasheet
        notes.append(f"Datasheet: {d.device} ({d.citation})" + (f"; {d.note}" if d.note else "")
                     + ("; a secondary source" if d.secondary else ""))
    tables = [Table(t.columns, tuple(_short(r) for r in t.rows), t.caption)
              for t in (device_table(s), workload_table(s), warmup_table(s))]
    tables += [t for t in (ladder_table(cert), startup_table(cert), protocol_table(cert))
               if t is not None]
    return Section("Probes", notes=tuple(notes), tables=tuple(tables), plots=plots)
