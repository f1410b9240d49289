"""The step-time model of a certificate, rendered: per workload the form chosen and why, and
the held-out shapes (measured, never fitted) with measured, predicted and the error, the sweep's
one-axis throughput law beside them; the certificate's time verdict.

Renders :mod:`afford.figures.time_figures` (``summarize_times``); computes nothing. Two forms:
report sections (:func:`time_section`, Markdown and HTML) and Rich tables for the terminal
(:func:`held_out_table`, :func:`model_lines`).
"""

from __future__ import annotations

from afford.core.provenance import fitted
from afford.figures.time_figures import TimeSummary, summarize_times
from afford.report.host_load_tables import host_load_notes, host_load_table
from afford.report.model import Cell, Section, Table
from afford.report.prose import prose
from afford.report.rich_table import Table as RichTable
from afford.report.terminal import LEGEND, fmt
from afford.schema.cert import Certificate

NO_MODEL = ("No step-time model: this certificate predates it (or its time stage did not "
            "run). Plans read step times off the measured points and the one-axis throughput "
            "law, which does not predict other batches; re-certify to plan at any (batch, "
            "seq).")
HELD_OUT_COLUMNS = ("shape", "role", "measured", "predicted", "error", "throughput law",
                    "its error", "judged")
THROUGHPUT_NOTE = ("the throughput law is the sweep's one axis, scaled by batch off its base "
                   "batch (what a plan without the model would read)")


def _role(role: str) -> str:
    return role.removeprefix("held_out_")


def _judged(judged: bool) -> str:
    return "yes" if judged else "no (floor)"


def model_table(summaries: list[TimeSummary]) -> Table:
    """One row per workload: the form chosen, its formula, why, the held-out errors."""
    rows: list[tuple[Cell, ...]] = []
    for s in summaries:
        rows.append((f"{s.name} ({s.mode})", s.form or "none", s.formula or "-", s.reason,
                     s.held_out_median, s.held_out_worst, s.verdict or "-"))
    return Table(columns=("workload", "form", "model", "why this form", "held-out median",
                          "held-out worst", "verdict"), rows=tuple(rows),
                 caption="forms are chosen by prediction error (leave-one-out), never by "
                 "R^2; held-out errors are |predicted / measured - 1| at shapes measured and "
                 "never fitted")


def held_out_rows(s: TimeSummary) -> Table:
    rows = tuple((h.shape, _role(h.role), h.measured, h.predicted, h.error, h.throughput_law,
                  h.throughput_error, _judged(h.judged)) for h in s.held_out)
    return Table(columns=HELD_OUT_COLUMNS, rows=rows,
                 caption=f"{s.name} ({s.mode}): held-out shapes, never fitted. judged: in "
                 "the work regime, against the tolerance; " + THROUGHPUT_NOTE)


def _notes(s: TimeSummary) -> tuple[str, ...]:
    out = [f"{s.name} ({s.mode}) features: {s.features}"]
    if s.floor is not None:
        spread = f", floor points' children spread up to {fmt(s.floor_spread)}" \
            if s.floor_spread is not None else ""
        out.append(f"{s.name} ({s.mode}) launch floor: {fmt(s.floor)}{spread}")
    if s.verdict and s.verdict != "OK":
        out.append(f"{s.name} ({s.mode}) time verdict {s.verdict}: " + "; ".join(s.reasons))
    out.extend(f"{s.name} ({s.mode}): {n}" for n in s.notes if n)
    return tuple(out)


def time_section(cert: Certificate) -> Section:
    """The certificate's step-time model as one report section (a note where it has none)."""
    summaries = summarize_times(cert)
    if not summaries:
        return Section("Step-time model", notes=(NO_MODEL,))
    notes: list[str] = []
    v = cert.time_verdict
    load = host_load_table(cert) if v is not None and v.label == "NOISY" else None
    if v is not None:
        notes.append(f"Time verdict: {v.label}" + (": " + "; ".join(v.reasons) if v.reasons
                                                   else "") + f". Rule: {v.rule}.")
        if v.label == "NOISY":  # the host load beside it: the usual cause
            notes.extend(host_load_notes(cert) or ("Host load: not recorded by this "
                                                   "certificate.",))
    semantics = cert.protocol.step_semantics
    if semantics:
        notes.append(f"A timed step: {semantics}")
    tables = ([load] if load is not None else []) + [model_table(summaries)] + \
        [held_out_rows(s) for s in summaries if s.held_out]
    for s in summaries:
        notes.extend(_notes(s))
    return Section("Step-time model", notes=tuple(notes), tables=tuple(tables))


# --- the terminal ------------------------------------------------------------------------


def held_out_table(s: TimeSummary) -> RichTable:
    table = RichTable(title=f"{s.name} ({s.mode}): held-out shapes, never fitted",
                      title_justify="left")
    for col in HELD_OUT_COLUMNS:
        table.add_column(col, overflow="fold")
    for h in s.held_out:
        table.add_row(h.shape, _role(h.role), fmt(h.measured), fmt(h.predicted), fmt(h.error),
                      fmt(h.throughput_law), fmt(h.throughput_error), _judged(h.judged))
    table.caption = (LEGEND + "; judged: in the work regime, against the tolerance; "
                     + THROUGHPUT_NOTE)
    return table


def model_lines(s: TimeSummary) -> list[str]:
    """The chosen form and its reason, what the features are, the floor, the verdict."""
    if s.form is None:
        return [f"{s.name} ({s.mode}): no step-time model: {s.reason}"]
    formula = fitted(s.formula, "", f"{s.name} ({s.mode}) step-time model, fitted") \
        if s.formula else "-"
    lines = [prose("{} ({}) step time: {}", s.name, s.mode, formula),
             f"  chosen: {s.reason}", f"  features: {s.features}"]
    if s.held_out_worst is not None:
        lines.append(f"  held-out error: median {fmt(s.held_out_median)}, worst "
                     f"{fmt(s.held_out_worst)}")
    if s.floor is not None:
        spread = f", floor points' children spread up to {fmt(s.floor_spread)}" \
            if s.floor_spread is not None else ""
        lines.append(f"  floor: {fmt(s.floor)}{spread}")
    if s.verdict:
        lines.append(f"  time verdict: {s.verdict}" +
                     (": " + "; ".join(s.reasons) if s.reasons else ""))
    lines += [f"  note: {n}" for n in s.notes if n]
    return lines
