"""Rich tables for the terminal. Every number passes :func:`fmt`, which refuses a bare one."""

from __future__ import annotations

from afford.core.provenance import (
    NotExecutable,
    Tag,
    Tagged,
    impossible,
    require_tagged,
    value_text,
)
from afford.figures.summary import WorkloadSummary
from afford.report.rich_table import Table

ABBREV = {Tag.MEASURED: "M", Tag.FITTED: "F", Tag.MODULE: "C", Tag.INHERITED: "I",
          Tag.ASSUMED: "A"}
LEGEND = ("tags: M measured, F fitted, C computed (module), I inherited, A assumed; "
          "* extrapolated beyond the fitted range")


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
    return f"{value_text(t)} {ABBREV[t.tag]}{star}{prov}"


def certificate_table(rows: list[WorkloadSummary], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("workload", "mode", "law", "R^2", "LOO max", "range", "resident",
                "warm step (largest)", "step0/warm, median of points"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r.name, r.mode, r.law, fmt(r.r2), fmt(r.loo_max), r.fitted_range,
                      fmt(r.resident), fmt(r.warm_seconds), fmt(r.step0_over_warm))
    table.caption = LEGEND
    return table


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
