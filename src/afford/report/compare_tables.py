"""``afford compare`` in the terminal: one table per law of A, the verdict per law and
overall. Every number passes :func:`~afford.report.terminal.fmt`."""

from __future__ import annotations

from afford.planning.compare_laws import (
    NOT_COMPARED,
    NOT_REPRODUCED,
    REPRODUCES,
    Comparison,
    LawCheck,
)
from afford.report.rich_table import Table
from afford.report.terminal import LEGEND, fmt


def law_table(c: LawCheck, tolerance_text: str) -> Table:
    title = f"{c.workload} ({c.mode}): {c.verdict}"
    table = Table(title=title, title_justify="left", caption=c.note or None)
    shapes = any(p.shape for p in c.points)
    stated = "A states (M measured, F its model)" if shapes else "A's law predicts"
    for col in ("shape" if shapes else "x", "B measured", stated, "error",
                f"within {tolerance_text}"):
        table.add_column(col)
    for p in c.points:
        table.add_row(p.shape if shapes else f"{p.x:g}", fmt(p.measured), fmt(p.predicted),
                      fmt(p.error), ("yes" if p.within else "NO") + (" (floor)" if p.floor
                                                                      else ""))
    return table


def header(c: Comparison) -> str:
    return (f"tolerance {c.tolerance_text}, stated before B was read\n"
            f"A: {c.a.device} ({c.a.path}, {c.a.started_at:%Y-%m-%d %H:%M} UTC)\n"
            f"B: {c.b.device} ({c.b.path}, {c.b.started_at:%Y-%m-%d %H:%M} UTC)")


def comparison_tables(c: Comparison) -> list[Table]:
    return [law_table(check, c.tolerance_text) for check in c.checks]


VERDICT_WORDS = {
    REPRODUCES: "A's laws describe B within {tol}",
    NOT_REPRODUCED: "A's laws do not describe B within {tol}",
    NOT_COMPARED: "no law of A could be checked against B, so nothing is said of {tol}",
}


def noisy_lines(c: Comparison) -> list[str]:
    """A NOISY certificate named beside the verdict, with its reasons."""
    out = [f"{which} is NOISY ({'; '.join(why)}): its step times are not to be trusted to "
           f"{c.tolerance_text}, whatever the verdict" for which, why in
           (("A", c.a_noisy), ("B", c.b_noisy)) if why]
    return out


def footer(c: Comparison) -> str:
    """The verdict and what it says, one sentence that agrees with the word; then a NOISY
    certificate, if either is."""
    said = VERDICT_WORDS[c.verdict].format(tol=c.tolerance_text)
    lines = [f"{c.verdict}: {said} (laws never pooled: A's law, B's measured points)",
             *(f"NOISY: {line}" for line in noisy_lines(c)), LEGEND]
    return "\n".join(lines)
