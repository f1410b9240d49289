"""The certificate's optional stages beyond the ones every certify runs, as report sections
(designed tables, never "not shown"): the size law's sizes and phase split
(``certify --sizes``), the levers' A/B pairs and batch rungs (``--levers``) and the
distributed stage (``--distributed``). The levers and distributed tables are the terminal's
own (``afford levers``, ``certify --distributed``), their figures tagged where they were
built; the sizes table tags the section's raw fields. Computes nothing.
"""

from __future__ import annotations

from afford.core.provenance import measured, run_label
from afford.planning.lever_rows import batch_rungs, lever_rows
from afford.report.distributed_tables import collectives_table, scaling_table, status_line
from afford.report.ladder_tables import batch_lines, batch_table, levers_table
from afford.report.model import Section, Table
from afford.report.rich_table import Table as RichTable
from afford.schema.cert import Certificate


def from_terminal(t: RichTable) -> Table:
    """A terminal table as a report table: the same rows, its title in the caption."""
    title, columns, rows, caption = t.plain()
    return Table(columns, rows, ". ".join(x for x in (title, caption) if x))


def sizes_section(cert: Certificate) -> Section:
    s, run = cert.sizes, run_label(cert)
    rows = []
    for z in s.sizes:
        src = f"{s.workload} {z.spec} ({s.mode}, batch {s.batch} x seq {s.seq}), {run}"
        p = z.point
        rows.append((z.spec, f"d{z.d} L{z.L} H{z.H}",
                     measured(z.params, "params", f"counted, {src}") if z.params else "-",
                     measured(p.median_seconds, "s", f"median of child medians, {src}")
                     if p.median_seconds is not None else p.excluded_reason or "-",
                     measured(p.step0_seconds, "s", f"step 0, {src}")
                     if p.step0_seconds is not None else "-"))
    tables = [Table(("size", "shape", "parameters", "warm step", "step 0"), tuple(rows),
                    f"{s.workload} at batch {s.batch} x seq {s.seq}, {s.mode}")]
    phases = [ph for ph in s.phases if ph.error is None]
    if phases:
        def m(v, what, spec):
            return measured(v, "s", f"{what}, {spec}, median of child medians, {run}") \
                if v is not None else "-"
        tables.append(Table(("size", "step", "forward", "backward", "optimizer"), tuple(
            (ph.spec, m(ph.step_seconds, "step", ph.spec), m(ph.forward_seconds, "forward",
                                                                ph.spec),
             m(ph.backward_seconds, "backward", ph.spec),
             m(ph.optimizer_seconds, "optimizer step", ph.spec)) for ph in phases),
            "the warm step split into its phases"))
    law = s.size_law or s.law
    notes = [f"Size law, fitted (F) over the sizes measured: {law.describe()}" if law
             else "No size law: fewer than two resident sizes."]
    if s.size_law is not None and s.size_law.held_out is not None:
        h = s.size_law.held_out
        notes.append(f"Largest size held out ({h.label}): predicted {h.rel_error:+.1%} at "
                     f"x{h.factor:.2g} beyond the others (the law's extrapolation, checked).")
    notes += [x for x in (s.finding, s.phase_note) if x] + list(s.warnings)
    notes += [f"{ph.spec}: phase split not measured: {ph.error}" for ph in s.phases if ph.error]
    return Section("Sizes", notes=tuple(notes), tables=tuple(tables))


def levers_section(cert: Certificate) -> Section:
    sec = cert.levers
    title = (f"levers on {sec.device_name}, {sec.precision} protocol, {sec.children} "
             "children")
    tables = [from_terminal(levers_table(lever_rows(cert, sec), title))]
    rungs = [r for run in sec.runs for r in batch_rungs(run, run_label(sec, "levers"))]
    if (t := batch_table(rungs)) is not None:
        tables.append(from_terminal(t))
    notes = tuple(batch_lines(sec)) + tuple(f"{run.workload}: {w}" for run in sec.runs
                                            for w in run.warnings)
    return Section("Levers", notes=notes, tables=tuple(tables))


def distributed_section(cert: Certificate) -> Section:
    d, run = cert.distributed, run_label(cert)
    tables = [from_terminal(t) for t in (collectives_table(d, run),) if t is not None]
    if d.data_parallel:
        tables.append(from_terminal(scaling_table(d, run)))
    return Section("Distributed", notes=(status_line(d),), tables=tuple(tables))


SECTIONS = {"sizes": sizes_section, "levers": levers_section,
            "distributed": distributed_section}
