"""``afford gate``: run the gates and the determinism audit; exit 1 on any FAIL.

What measures (:mod:`afford.certification.stage_gates`, and torch with it) is imported when
the command runs, not when the command line is built: ``afford --help`` stays fast."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from afford.cli.common import err, guard, interactive, out, print_json
from afford.core.errors import InputError
from afford.figures.gates_figures import cost_summary, determinism_lines, gate_lines, noise_lines
from afford.fit.gates import (
    GateSettings,
    headroom,
    margin,
    parse_line,
    parse_tolerances,
    ratio,
    worst_margin,
    worst_row,
)
from afford.report.gates_tables import determinism_table, gate_table, noise_table
from afford.report.rich_table import labelled
from afford.report.terminal import fmt
from afford.schema.determinism_section import DeterminismSection, GatesSection
from afford.workloads.names import check as check_names

if TYPE_CHECKING:
    from afford.certification.stage_gates import GateOutcome, GateRequest


def command(
    workload: Annotated[Optional[list[str]], typer.Option(
        "--workload", "-w", help="Workload to check (repeatable): softmax, scan, tinylm, "
        "tinylm@q3, or pkg.module:factory. Default: softmax, scan and tinylm.")] = None,
    sweep: Annotated[Optional[list[str]], typer.Option(
        "--sweep", help="Sweep values as NAME=V1,V2,... (as in certify): the init-loss gate "
        "covers them all; the smallest is the shape of the audit and the noise floor. "
        "Default: the workload's default sweep for this device.")] = None,
    device: Annotated[Optional[str], typer.Option(
        help="cpu or cuda (cuda:1 ...). Default: cuda when present.")] = None,
    pair: Annotated[Optional[list[str]], typer.Option(
        "--pair", help="Two workloads compared as equals, as A,B (repeatable): the "
        "matched-parameters gate checks their parameter counts.")] = None,
    tol: Annotated[Optional[list[str]], typer.Option(
        "--tol", help="A built-in gate's tolerance as NAME=VALUE (repeatable): init-loss, "
        "parity-fp32, parity-bf16, parity-fp16, noise-floor, matched-params. init-loss "
        "defaults to 0.02, looser than a 1e-3 gate: a healthy step-0 loss can sit 3e-3 "
        "below ln V (0.997 at CPU widths), a leaked target ~10 %.")] = None,
    line: Annotated[Optional[str], typer.Option(
        "--line", help="The share of its tolerance a gate's worst delta must clear (COSTS "
        "1.4's 50%, the default): headroom = line / worst delta-over-tolerance.")] = None,
    repeats: Annotated[int, typer.Option(help="K repeats of the determinism audit.")] = 8,
    steps: Annotated[int, typer.Option(help="k steps per noise-floor run.")] = 16,
    audit: Annotated[bool, typer.Option(
        "--audit/--no-audit", help="Run the determinism audit (two child processes).")] = True,
    seed: Annotated[int, typer.Option(help="Seed of the runs (the noise floor's second run "
                                      "uses seed + 1).")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Run the gates (init loss at chance, CPU/CUDA parity, training noise floor,
    deterministic mode, matched parameters, user gates from the entry-point group
    afford.fit.gates) and the determinism audit. Exit codes: 0 every gate passed or could not
    run here (GO), 1 a gate failed (HALT), 2 bad input, 3 the measurement failed."""
    with guard():
        check_names([*(workload or []), *(w for p in pair or [] for w in _parse_pair(p))])
        from afford.certification.request import parse_sweep
        from afford.certification.stage_gates import GateRequest

        settings = parse_line(line, parse_tolerances(
            tol or [], GateSettings(repeats=repeats, noise_steps=steps)))
        req = GateRequest(workloads=list(workload or []), device=device,
                          sweeps=dict(parse_sweep(s) for s in sweep or []),
                          pairs=[_parse_pair(p) for p in pair or []], settings=settings,
                          audit=audit, seed=seed)
        outcome = _run(req, show=interactive() and not as_json)
        if as_json:
            print_json(report_document(outcome))
            print_problems(outcome.gates)
        else:
            render_sections(outcome.determinism, outcome.gates)
        if outcome.gates.verdict == "HALT":
            raise typer.Exit(1)


def _parse_pair(text: str) -> tuple[str, str]:
    a, sep, b = text.partition(",")
    if not sep or not a.strip() or not b.strip() or "," in b:
        raise InputError(f"--pair {text!r}: write two workloads as A,B (e.g. softmax,scan)")
    return a.strip(), b.strip()


def _run(req: GateRequest, show: bool) -> GateOutcome:
    from afford.certification.stage_gates import run_gates

    if not show:
        return run_gates(req)
    with err.status("gates") as status:
        def on_event(e: dict) -> None:
            if e["event"] == "gate":
                status.update(f"gate: {e['what']}")
            elif e["event"] == "audit-child":
                status.update(f"determinism audit, flag {'on' if e['deterministic'] else 'off'}")
        return run_gates(req, on_event)


def render_sections(d: DeterminismSection | None, g: GatesSection) -> None:
    """The determinism table, the noise floor and the gate table on stdout; failures, NOT
    EXECUTABLE reasons and notes on stderr."""
    where = f"{g.device_name} ({g.device}), torch {g.torch_version}"
    if d is not None:
        lines = determinism_lines(d)
        out.print(determinism_table(lines, f"determinism audit: {d.repeats} repeats of one "
                                    f"step, {where}"))
        cost = cost_summary(lines)
        if cost is not None:
            out.print(f"deterministic mode costs {fmt(cost)} of the warm step (median)")
        for w in d.warnings:
            err.print(labelled("[yellow]warning:[/]", w), soft_wrap=True)
        for run in d.runs:  # flag on: the deterministic-mode gate says it below
            if run.not_executable is not None and not run.deterministic:
                err.print(labelled("[yellow]NOT EXECUTABLE[/]", f"{run.not_executable.what}: "
                                   f"{run.not_executable.reason}"), soft_wrap=True)
    noise = noise_lines(g)
    if noise:
        out.print(noise_table(noise, f"training noise floor, {where}"))
    out.print(gate_table(gate_lines(g), f"gates, {where}", g.verdict))
    print_problems(g)


def print_problems(g: GatesSection) -> None:
    """Every failing row, every NOT EXECUTABLE reason and every note, on stderr."""
    for gate, ln in zip(g.gates, gate_lines(g)):
        for row in ln.failing:
            err.print(labelled("[bold red]FAIL[/]", f"{gate.name}: {row}"), soft_wrap=True)
        for row in gate.rows:
            if row.not_executable is not None:
                err.print(labelled("[yellow]NOT EXECUTABLE[/]", f"{gate.name}: {row.label}: "
                                   f"{row.not_executable.reason}"), soft_wrap=True)
        for note in gate.notes:
            err.print(f"note: {gate.name}: {note}", soft_wrap=True)


def _num(x: float | None) -> float | str | None:
    if x is None or math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def report_document(outcome: GateOutcome) -> dict:
    """The ``--json`` document: verdict, a summary line per gate, then both sections."""
    g = outcome.gates
    summary = []
    for gate in g.gates:
        worst, near = worst_row(gate), worst_margin(gate)
        summary.append({
            "name": gate.name, "status": gate.status, "source": gate.source,
            "cells": len(gate.rows), "reachable": sum(r.delta is not None for r in gate.rows),
            "passing": sum(r.status == "PASS" for r in gate.rows),
            "worst_row": worst.label if worst else None,
            "delta": _num(worst.delta) if worst else None,
            "tolerance": worst.tolerance if worst else None,
            "delta_over_tolerance": _num(ratio(worst)) if worst else None,
            "line": gate.line,
            "headroom": _num(headroom(worst, gate.line)) if worst else None,
            "worst_margin_in_tolerances": _num(margin(near) / near.tolerance)
            if near is not None and near.tolerance > 0 else None})
    return {"schema": "afford.gate-report/1", "verdict": g.verdict, "device": g.device,
            "device_name": g.device_name, "gates": summary,
            "sections": {"gates": json.loads(g.model_dump_json()),
                         "determinism": json.loads(outcome.determinism.model_dump_json())
                         if outcome.determinism else None}}
