"""The step-time model as ``afford certify`` prints it: the chosen form and why, the held-out
table (shape, measured, predicted, error; the old law beside it) and the time verdict.
Renders :mod:`afford.figures.time_summary`; computes nothing."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from afford.figures.time_summary import TimeSummary
from afford.report.terminal import LEGEND, fmt


def _pct(x) -> str:
    return "-" if x is None else f"{x.value:+.1%}"


def held_out_table(s: TimeSummary) -> Table:
    table = Table(title=f"{s.name} ({s.mode}): held-out shapes, never fitted",
                  title_justify="left")
    for col in ("shape", "role", "measured", "predicted", "error", "old law", "error",
                "judged"):
        table.add_column(col, overflow="fold")
    for h in s.held_out:
        table.add_row(h.shape, h.role.removeprefix("held_out_"), fmt(h.measured),
                      fmt(h.predicted), _pct(h.error), fmt(h.old_law), _pct(h.old_error),
                      "yes" if h.judged else "no (floor)")
    table.caption = (LEGEND + "; judged: in the work regime, against the tolerance; the old "
                     "law is one axis, scaled by batch off its base batch")
    return table


def model_lines(s: TimeSummary) -> list[str]:
    """The chosen form and its reason, what the features are, the floor, the verdict."""
    if s.form is None:
        return [f"{escape(s.name)} ({s.mode}): no step-time model: {escape(s.reason)}"]
    lines = [f"{escape(s.name)} ({s.mode}) step time: {escape(s.formula or '')}",
             f"  chosen: {escape(s.reason)}", f"  features: {escape(s.features)}"]
    if s.floor is not None:
        spread = f", floor points' children spread up to {s.floor_spread.value:.0%}" \
            if s.floor_spread is not None else ""
        lines.append(f"  floor: {fmt(s.floor)}{spread}")
    if s.verdict:
        lines.append(f"  time verdict: {s.verdict}" +
                     (": " + escape("; ".join(s.reasons)) if s.reasons else ""))
    lines += [f"  note: {escape(n)}" for n in s.notes]
    return lines
