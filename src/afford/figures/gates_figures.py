"""The figures of the gate table, the determinism table and the noise floor, each tagged.

Derived from the sections alone (no device); the renderers (:mod:`afford.report.gates_tables`)
print these and nothing else. Deltas are MODULE (computed by the named gate from MEASURED
readings), or MEASURED where the reading is the delta itself (max |delta| between repeats);
tolerances ASSUMED with their reason, or MODULE where derived from a reading (the noise floor's
tolerance is a fraction of a measured spread).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from afford.core.provenance import Tagged, assumed, measured, module
from afford.fit.gates import (
    LINE_REASON,
    headroom,
    margin,
    noise_floor,
    ratio,
    worst_margin,
    worst_row,
)
from afford.fit.stats import median
from afford.schema.determinism_section import (
    QUANTITIES,
    AuditRun,
    DeterminismSection,
    Gate,
    GatesSection,
)


@dataclass(frozen=True)
class GateLine:
    """One gate as COSTS 1.4 and 1.5 quote one: its cells (reachable, passing), the worst
    row's delta against its tolerance, the line that delta/tol must clear and the headroom
    line / (delta/tol), and the worst margin in tolerances."""

    name: str
    status: str
    checked: Tagged            # rows checked (reachable: executed)
    worst: str                 # label of the worst row, or why none
    delta: Tagged | None
    tolerance: Tagged | None
    delta_over_tol: Tagged | None
    headroom: Tagged | None    # line / worst delta-over-tolerance
    detail: str
    failing: tuple[str, ...]   # "label: detail" of every failing row
    cells: Tagged | None = None      # rows of the gate, executed or not
    passing: Tagged | None = None    # rows that pass
    line: Tagged | None = None       # the share of the tolerance delta/tol must clear
    clears: bool | None = None       # worst delta/tol <= line
    margin: Tagged | None = None     # the worst margin, in tolerances ("1.96x the tolerance")
    margin_row: str = ""


@dataclass(frozen=True)
class Cell:
    bitwise: bool
    differing: Tagged          # repeats that differ from repeat 0
    max_delta: Tagged


@dataclass(frozen=True)
class DeterminismLine:
    workload: str
    flag: str                  # "off" / "on"
    cells: dict[str, Cell]     # by quantity; empty when not executable
    not_executable: str | None
    median_step: Tagged | None
    cost: Tagged | None        # on / off median step (the "on" line)


@dataclass(frozen=True)
class NoiseLine:
    workload: str
    steps: Tagged
    same_seed: Tagged
    bitwise: bool
    between_seeds: Tagged
    final_loss: Tagged


def _where(device_name: str) -> str:
    return f"on {device_name}"


def _counts(g: Gate) -> dict:
    """Cells, reachable (executed) and passing rows (COSTS 1.5: 30 / 30 / 30)."""
    reach = sum(r.delta is not None for r in g.rows)
    return dict(cells=module(len(g.rows), "", f"{g.name}: rows of the gate"),
                checked=module(reach, "", f"{g.name}: rows executed of {len(g.rows)}"),
                passing=module(sum(r.status == "PASS" for r in g.rows), "",
                               f"{g.name}: rows passing of {len(g.rows)}"))


def _margin(g: Gate, src: str) -> dict:
    row = worst_margin(g)
    if row is None or row.tolerance <= 0:
        return {}
    return dict(margin=module(margin(row) / row.tolerance, "tolerances",
                              f"worst margin / tolerance, {g.name}, row {row.label}; {src}"),
                margin_row=row.label)


def gate_line(g: Gate, device_name: str) -> GateLine:
    worst = worst_row(g)
    failing = tuple(f"{r.label}: {r.detail}".rstrip(": ") for r in g.rows if r.status == "FAIL")
    line = assumed(g.line, "ratio", g.line_source or LINE_REASON)
    if worst is None:
        return GateLine(g.name, g.status, worst="-", delta=None, tolerance=None,
                        delta_over_tol=None, headroom=None, detail="", failing=failing,
                        line=line, **_counts(g))
    src = f"{g.name} ({g.source}), worst row {worst.label}, {_where(device_name)}"
    tag_tol = module if g.name == "noise-floor" else assumed
    q = ratio(worst)
    return GateLine(
        name=g.name, status=g.status, worst=worst.label,
        delta=(measured if g.name == "deterministic-mode" else module)(worst.delta, "", src),
        tolerance=tag_tol(worst.tolerance, "", g.tolerance_source),
        delta_over_tol=module(q, "ratio", f"delta / tolerance, {g.name}"),
        headroom=_headroom(worst, g.line, g.name),
        detail=worst.detail, failing=failing, line=line,
        clears=None if math.isnan(q) else q <= g.line * (1 + 1e-9), **_counts(g), **_margin(g, src))


def _headroom(worst, line: float, name: str) -> Tagged:
    """line / worst delta-over-tolerance; a delta of 0 leaves it unbounded, said in words
    (inf is no figure)."""
    h = headroom(worst, line)
    src = f"line / worst delta-over-tolerance, {name}"
    if h == math.inf:
        return module("unbounded (the worst delta is 0)", "", src)
    return module(h, "x", src)


def gate_lines(section: GatesSection) -> list[GateLine]:
    return [gate_line(g, section.device_name) for g in section.gates]


@dataclass(frozen=True)
class RowLine:
    """One checked case of a gate: its delta against its tolerance (the gate table shows
    only the worst)."""

    gate: str
    label: str
    delta: Tagged | str          # the delta, or NOT EXECUTABLE with why
    tolerance: Tagged
    status: str
    detail: str


def row_lines(section: GatesSection) -> list[RowLine]:
    """Every row of every gate, tagged as :func:`gate_line` tags its worst."""
    out = []
    for g in section.gates:
        tol = module if g.name == "noise-floor" else assumed
        kind = measured if g.name == "deterministic-mode" else module
        for r in g.rows:
            src = f"{g.name} ({g.source}), row {r.label}, {_where(section.device_name)}"
            delta = kind(r.delta, "", src) if r.delta is not None else \
                f"NOT EXECUTABLE: {r.not_executable.reason if r.not_executable else ''}"
            out.append(RowLine(g.name, r.label, delta, tol(r.tolerance, "", g.tolerance_source),
                               r.status, r.detail))
    return out


def _cell(run: AuditRun, quantity: str, src: str) -> Cell | None:
    c = next((c for c in run.comparisons if c.quantity == quantity), None)
    if c is None:
        return None
    return Cell(bitwise=c.bitwise_equal,
                differing=measured(c.repeats_differing, "", f"{src}: {quantity}, repeats "
                                   f"differing from repeat 0 of {run.repeats}"),
                max_delta=measured(c.max_abs_delta, "", f"{src}: {quantity}, max |delta|"))


def determinism_lines(section: DeterminismSection) -> list[DeterminismLine]:
    """One line per workload and flag; the cost of deterministic mode on the "on" line."""
    off = {(r.workload, r.value): r for r in section.runs if not r.deterministic}
    lines = []
    for run in section.runs:
        flag = "on" if run.deterministic else "off"
        src = (f"determinism audit of {run.workload} at {run.value} ({run.mode}), flag {flag}, "
               f"{_where(section.device_name)}, torch {section.torch_version}")
        cells = {q: c for q in QUANTITIES if (c := _cell(run, q, src)) is not None}
        ne = None
        if run.not_executable is not None:
            op = f" (op: {run.op})" if run.op else ""
            why = _first_sentence(run.not_executable.reason)
            ne = f"NOT EXECUTABLE at {run.stage}{op}: {why}"
        med = measured(run.timing.median_seconds, "s",
                       f"{src}: median of {len(run.timing.timed_seconds)} warm steps") \
            if run.timing else None
        base = off.get((run.workload, run.value))
        cost = None
        if run.deterministic and run.timing and base is not None and base.timing:
            cost = module(run.timing.median_seconds / base.timing.median_seconds, "x",
                          f"median warm step, flag on / flag off, {run.workload}, "
                          "two child processes")
        lines.append(DeterminismLine(run.workload, flag, cells, ne, med, cost))
    return lines


def _first_sentence(text: str, limit: int = 100) -> str:
    head = text.split(". ")[0]
    return head if len(head) <= limit else head[: limit - 3] + "..."


def noise_lines(section: GatesSection) -> list[NoiseLine]:
    lines = []
    for r in section.readings.noise_floor:
        if r.error is not None or not r.losses_a:
            continue
        same, spread = noise_floor(r)
        src = (f"noise floor of {r.workload} at {r.value} ({r.mode}), {r.steps} steps, "
               f"seeds {r.seed_a}, {r.seed_a}, {r.seed_b}, {_where(section.device_name)}")
        lines.append(NoiseLine(
            workload=r.workload, steps=module(r.steps, "steps", "noise-floor run length"),
            same_seed=measured(same, "", f"{src}: |delta final loss|, same seed"),
            bitwise=bool(r.params_bitwise_equal and r.losses_a == r.losses_a_again),
            between_seeds=measured(spread, "", f"{src}: |delta final loss|, two seeds"),
            final_loss=measured(r.losses_a[-1], "", f"{src}: final loss, seed {r.seed_a}")))
    return lines


def cost_summary(lines: list[DeterminismLine]) -> Tagged | None:
    """Median over workloads of the deterministic-mode step-time ratio."""
    costs = [ln.cost.value for ln in lines if ln.cost is not None
             and isinstance(ln.cost.value, float) and math.isfinite(ln.cost.value)]
    if not costs:
        return None
    return module(median(costs), "x", f"median over {len(costs)} workloads of flag on / off")
