"""Rich tables for the terminal. Every number passes :func:`fmt`, which refuses a bare one."""

from __future__ import annotations

import math

from rich.table import Table

from afford.provenance import Tag, Tagged, require_tagged
from afford.summary import WorkloadSummary
from afford.units import format_bytes, format_count, format_duration

ABBREV = {Tag.MEASURED: "M", Tag.FITTED: "F", Tag.MODULE: "C", Tag.INHERITED: "I",
          Tag.ASSUMED: "A"}
LEGEND = ("tags: M measured, F fitted, C computed (module), I inherited, A assumed; "
          "* extrapolated beyond the fitted range")


def value_text(t: Tagged) -> str:
    """The value in its unit, human-formatted."""
    v, unit = t.value, t.unit
    if v is None:
        return "-"
    if isinstance(v, (str, bool)):
        return f"{v} {unit}".strip() if unit not in ("", "points") else str(v)
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if unit == "s":
        return format_duration(v)
    if unit == "B":
        return format_bytes(v)
    if unit == "x":
        return f"{v:.1f}x"
    if unit == "ratio":
        return f"{v:.2%}"
    if unit in ("params", "tokens", "steps", "FLOP"):
        return format_count(v)
    if isinstance(v, int):
        return f"{v:d} {unit}".strip()
    return f"{v:.4g} {unit}".strip()


def fmt(x: object, where: str = "") -> str:
    """``12.30 ms M``: value, unit and tag letter; TypeError for an untagged number."""
    if x is None:
        return "-"
    t = require_tagged(x, where)
    star = "*" if t.extrapolated else ""
    prov = "?" if t.provisional else ""
    return f"{value_text(t)} {ABBREV[t.tag]}{star}{prov}"


def certificate_table(rows: list[WorkloadSummary], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("workload", "mode", "law", "R^2", "LOO max", "range", "resident",
                "warm step (largest)", "step0/warm"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r.name, r.mode, r.law, fmt(r.r2), fmt(r.loo_max), r.fitted_range,
                      fmt(r.resident), fmt(r.warm_seconds), fmt(r.step0_over_warm))
    table.caption = LEGEND
    return table
