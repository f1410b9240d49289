"""Rich tables for the terminal. Every number passes :func:`fmt`, which refuses a bare one."""

from __future__ import annotations

from afford.core.provenance import (  # noqa: F401 (band_text: the renderers' import)
    NotExecutable,
    Tag,
    Tagged,
    band_text,
    fitted,
    impossible,
    require_tagged,
    value_text,
)
from afford.figures.summary import WorkloadSummary
from afford.figures.time_figures import TimeSummary
from afford.report.rich_table import Table

ABBREV = {Tag.MEASURED: "M", Tag.FITTED: "F", Tag.MODULE: "C", Tag.INHERITED: "I",
          Tag.ASSUMED: "A"}
LEGEND = ("tags: M measured, F fitted, C computed (module), I inherited, A assumed; "
          "* extrapolated beyond the fitted range; (lo..hi) the band a process may see")


FAILED = "FAILED"


def refused(t: Tagged, why: str) -> str:
    """An impossible figure as the failed measurement it is: its cause, then where it came
    from (the source names the inputs), never the figure itself."""
    return f"{FAILED}: {why}; from {t.source}"


def fmt(x: object, where: str = "") -> str:
    """``12.30 ms M``: value, unit and tag letter; TypeError for an untagged number; an
    impossible one (:func:`afford.core.provenance.impossible`) as ``FAILED: <cause>; from ...``."""
    if x is None:
        return "-"
    t = require_tagged(x, where)
    why = impossible(t)
    if why is not None:
        return refused(t, why)
    star = "*" if t.extrapolated else ""
    prov = "?" if t.provisional else ""
    return f"{value_text(t)}{band_text(t)} {ABBREV[t.tag]}{star}{prov}"


def certificate_table(rows: list[WorkloadSummary], title: str,
                      times: dict[tuple[str, str], TimeSummary] | None = None) -> Table:
    """The certificate's headline, one row per workload: the law plans read (the step-time
    model where the certificate has one, with its held-out error; else the sweep's
    throughput law with its R^2 and leave-one-out error), never a law that fits worse than
    the mean of its points (R^2 < 0); then the sweep's range, residency, the largest warm
    step and step 0 over warm."""
    table = Table(title=title, title_justify="left")
    for col in ("workload", "mode", "law (what plans read)", "its error", "range",
                "resident", "warm step (largest)", "step0/warm, median of points"):
        table.add_column(col, overflow="fold")
    for r in rows:
        law, error = headline_law(r, (times or {}).get((r.name, r.mode)))
        table.add_row(r.name, r.mode, law, error, r.fitted_range, fmt(r.resident),
                      fmt(r.warm_seconds), fmt(r.step0_over_warm))
    table.caption = LEGEND
    return table


def headline_law(r: WorkloadSummary, t: TimeSummary | None) -> tuple[str, str]:
    """(the law, its error) a workload's headline shows: its step-time model, or its
    throughput law, or why neither is headlined."""
    if t is not None and t.form is not None and t.formula:
        law = fmt(fitted(t.formula, "", f"{t.name} ({t.mode}) step-time model"))
        if t.held_out_worst is None:
            return f"step-time model: {law}", "no held-out shape"
        return (f"step-time model: {law}", f"held-out median {fmt(t.held_out_median)}, "
                f"worst {fmt(t.held_out_worst)}")
    if r.r2 is not None and isinstance(r.r2.value, (int, float)) and r.r2.value < 0:
        return (f"not headlined: its R^2 {fmt(r.r2)} is below 0 (the mean of the points fits "
                "them better)", "-")
    loo = f", LOO max {fmt(r.loo_max)}" if r.loo_max is not None else ""
    return r.law, (f"R^2 {fmt(r.r2)}{loo}" if r.r2 is not None else "-")


NOT_EXECUTABLE = "NOT EXECUTABLE"


def cell(x: object, where: str = "") -> str:
    """:func:`fmt`, or ``NOT EXECUTABLE`` for a probe that could not run (the reasons are
    listed under the table)."""
    if isinstance(x, NotExecutable):
        return NOT_EXECUTABLE
    return fmt(x, where)


def fmt_list(xs: tuple[Tagged, ...] | list[Tagged], where: str = "") -> str:
    """Several values of one tag: ``2.31 s, 45.0 ms, 12.1 ms M``."""
    ts = [require_tagged(x, where) for x in xs]
    if not ts:
        return "-"
    if any(impossible(t) for t in ts):
        return "; ".join(fmt(t) for t in ts)
    tags = {ABBREV[t.tag] for t in ts}
    return ", ".join(value_text(t) for t in ts) + " " + "/".join(sorted(tags))


def not_executable_caption(items) -> str:
    lines = [f"{NOT_EXECUTABLE}: {n.what}: {n.reason}" for n in items]
    return "\n".join([LEGEND, *lines])


def drawn(t, title: str, caption: str | None = None) -> Table:
    """A report table (:class:`afford.report.model.Table`) for the terminal: the same rows,
    a probe that could not run as ``NOT EXECUTABLE`` (its reason goes in the caption)."""
    table = Table(title=title, title_justify="left")
    for col in t.columns:
        table.add_column(col, overflow="fold")
    for row in t.rows:
        table.add_row(*(c if isinstance(c, str) else cell(c, f"{title}: {col}")
                        for c, col in zip(row, t.columns)))
    table.caption = caption if caption is not None else LEGEND + (
        f". {t.caption}" if t.caption else "")
    return table
