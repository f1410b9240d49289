"""Rich tables of the gates, the determinism audit and the noise floor. They format the
tagged lines of :mod:`afford.figures.gates_figures`; every number passes :func:`fmt`."""

from __future__ import annotations

from afford.figures.gates_figures import (
    DeterminismLine,
    GateLine,
    NoiseLine,
    determinism_lines,
    gate_lines,
    noise_lines,
    row_lines,
)
from afford.report import model
from afford.report.rich_table import Table, escape, styled
from afford.report.terminal import LEGEND, fmt, fmt_list
from afford.schema.determinism_section import QUANTITIES, DeterminismSection, GatesSection

STATUS_STYLE = {"PASS": "green", "FAIL": "bold red", "NOT EXECUTABLE": "yellow"}
SHORT = {"forward output": "forward", "loss": "loss", "gradients": "gradients",
         "parameters after step": "optimizer step"}


def _status(s: str):
    return styled(f"[{STATUS_STYLE.get(s, '')}]{escape(s)}[/]")


def _cells(ln: GateLine) -> str:
    """``30, 30, 30 C``: cells, reachable, passing (COSTS 1.5)."""
    return fmt_list([t for t in (ln.cells, ln.checked, ln.passing) if t is not None])


def _status_cell(ln: GateLine):
    if ln.status == "PASS" and ln.clears is False:
        return styled("[yellow]PASS, above the line[/]")
    return _status(ln.status)


def gate_table(lines: list[GateLine], title: str, verdict: str) -> Table:
    """COSTS 1.4 and 1.5 per gate: cells reachable and passing, the worst row's delta/tol,
    the line it must clear, headroom = line / (delta/tol), the worst margin in tolerances."""
    table = Table(title=title, title_justify="left")
    table.add_column("gate", no_wrap=True)
    for col in ("cells, reachable, passing", "worst row", "delta", "tolerance", "delta/tol",
                "line", "headroom", "worst margin"):
        table.add_column(col, overflow="fold")
    table.add_column("status", no_wrap=True)
    for ln in lines:
        table.add_row(ln.name, _cells(ln), ln.worst, fmt(ln.delta), fmt(ln.tolerance),
                      fmt(ln.delta_over_tol), fmt(ln.line), fmt(ln.headroom), fmt(ln.margin),
                      _status_cell(ln))
    style = "bold red" if verdict == "HALT" else "bold green"
    table.caption = styled(f"verdict: [{style}]{escape(verdict)}[/] (any FAIL halts; a gate "
                           "above its line passes its tolerance with headroom under 1x). "
                           f"{escape(LEGEND)}")
    return table


def _cell(ln: DeterminismLine, quantity: str):
    c = ln.cells.get(quantity)
    if c is None:
        return "-"
    if c.bitwise:
        return styled("[green]bitwise[/]")
    return styled(f"[red]differs[/] {escape(fmt(c.differing))}, "
                  f"max {escape(fmt(c.max_delta))}")


def determinism_table(lines: list[DeterminismLine], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("workload", "deterministic", *(SHORT[q] for q in QUANTITIES), "warm step",
                "cost on/off"):
        table.add_column(col, overflow="fold")
    reasons = []
    for ln in lines:
        if ln.not_executable:
            reasons.append(f"{ln.workload}, flag {ln.flag}: {ln.not_executable}")
        table.add_row(ln.workload, ln.flag, *(_quantity(ln, q) for q in QUANTITIES),
                      fmt(ln.median_step), fmt(ln.cost))
    table.caption = "\n".join([LEGEND, *reasons])
    return table


def _quantity(ln: DeterminismLine, quantity: str):
    """The quantity's comparison where it ran, NOT EXECUTABLE where its stage could not run
    (COSTS 1.6: forward bitwise beside a gradient NOT EXECUTABLE)."""
    if quantity in ln.cells or not ln.not_executable:
        return _cell(ln, quantity)
    return styled("[yellow]NOT EXECUTABLE[/]")


def noise_table(lines: list[NoiseLine], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("workload", "steps", "final loss", "same seed |delta|", "bitwise",
                "between seeds |delta|"):
        table.add_column(col, overflow="fold")
    for ln in lines:
        table.add_row(ln.workload, fmt(ln.steps), fmt(ln.final_loss), fmt(ln.same_seed),
                      "yes" if ln.bitwise else styled("[red]no[/]"), fmt(ln.between_seeds))
    table.caption = LEGEND
    return table


def gates_report_table(section: GatesSection) -> model.Table:
    """The gate table of the report (Markdown, HTML): the lines :func:`gate_table` prints,
    every figure tagged (COSTS 1.4 and 1.5: cells, delta/tol, line, headroom, margin)."""
    rows = tuple((ln.name, ln.cells, ln.checked, ln.passing, ln.worst, ln.delta, ln.tolerance,
                  ln.delta_over_tol, ln.line, ln.headroom, ln.margin,
                  "PASS, above the line" if ln.status == "PASS" and ln.clears is False
                  else ln.status) for ln in gate_lines(section))
    return model.Table(columns=("gate", "cells", "reachable", "passing", "worst row", "delta",
                                "tolerance", "delta/tol", "line", "headroom", "worst margin",
                                "status"), rows=rows,
                       caption=f"gates on {section.device_name}: verdict {section.verdict} "
                       "(any FAIL halts); headroom = line / worst delta-over-tolerance")


def gate_rows_report_table(section: GatesSection) -> model.Table:
    """Every row of every gate, each delta against its tolerance (the table above shows the
    worst of each)."""
    return model.Table(("gate", "row", "delta", "tolerance", "status", "detail"), tuple(
        (r.gate, r.label, r.delta, r.tolerance, r.status, r.detail)
        for r in row_lines(section)), "every checked case; a gate passes when every row does")


def noise_report_table(section: GatesSection) -> model.Table | None:
    lines = noise_lines(section)
    if not lines:
        return None
    return model.Table(("workload", "steps", "final loss", "same seed |delta|", "bitwise",
                        "between seeds |delta|"), tuple(
        (ln.workload, ln.steps, ln.final_loss, ln.same_seed, "yes" if ln.bitwise else "no",
         ln.between_seeds) for ln in lines), "training noise floor: one seed twice, another "
        "once")


def _quantity_text(ln: DeterminismLine, quantity: str) -> str:
    c = ln.cells.get(quantity)
    if c is None:
        return "NOT EXECUTABLE" if ln.not_executable else "-"
    return "bitwise" if c.bitwise else f"differs {fmt(c.differing)}, max {fmt(c.max_delta)}"


def determinism_report_table(d: DeterminismSection) -> model.Table:
    lines = determinism_lines(d)
    reasons = "; ".join(f"{ln.workload}, flag {ln.flag}: {ln.not_executable}"
                        for ln in lines if ln.not_executable)
    return model.Table(("workload", "deterministic", *(SHORT[q] for q in QUANTITIES),
                        "warm step", "cost on/off"), tuple(
        (ln.workload, ln.flag, *(_quantity_text(ln, q) for q in QUANTITIES), ln.median_step,
         ln.cost) for ln in lines),
        f"determinism audit: {d.repeats} repeats of one step" + (f"; {reasons}" if reasons
                                                                  else ""))
