"""Rich tables of the gates, the determinism audit and the noise floor. They format the
tagged lines of :mod:`afford.figures.gates`; every number passes :func:`fmt`."""

from __future__ import annotations

from afford.figures.gates import DeterminismLine, GateLine, NoiseLine
from afford.report.rich_table import Table, escape, styled
from afford.report.terminal import LEGEND, fmt
from afford.schema.determinism import QUANTITIES

STATUS_STYLE = {"PASS": "green", "FAIL": "bold red", "NOT EXECUTABLE": "yellow"}
SHORT = {"forward output": "forward", "loss": "loss", "gradients": "gradients",
         "parameters after step": "optimizer step"}


def _status(s: str):
    return styled(f"[{STATUS_STYLE.get(s, '')}]{escape(s)}[/]")


def gate_table(lines: list[GateLine], title: str, verdict: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("gate", no_wrap=True)
    for col in ("rows", "worst row", "delta", "tolerance", "delta/tol", "headroom"):
        table.add_column(col, overflow="fold")
    table.add_column("status", no_wrap=True)
    for ln in lines:
        table.add_row(ln.name, fmt(ln.checked), ln.worst, fmt(ln.delta), fmt(ln.tolerance),
                      fmt(ln.delta_over_tol), fmt(ln.headroom), _status(ln.status))
    style = "bold red" if verdict == "HALT" else "bold green"
    table.caption = styled(f"verdict: [{style}]{escape(verdict)}[/] (any FAIL halts). "
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
    for ln in lines:
        if ln.not_executable:
            reason = styled(f"[yellow]{escape(ln.not_executable)}[/]")
            table.add_row(ln.workload, ln.flag, reason, "", "", "", fmt(ln.median_step),
                          fmt(ln.cost))
            continue
        table.add_row(ln.workload, ln.flag, *(_cell(ln, q) for q in QUANTITIES),
                      fmt(ln.median_step), fmt(ln.cost))
    table.caption = LEGEND
    return table


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
