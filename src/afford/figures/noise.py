"""Why a certificate is noisy, in a few lines: the host's recorded load against its cores
(the usual cause, and its fix), then per workload its worst point. The point-by-point
precision warnings stay in the certificate; ``afford certify --verbose`` prints them.

On a CPU, :func:`load_costs` says per workload what the load cost its steps, from the
children's own accounting: how much of their threads' time was spent waiting for a CPU, at how
many points the step on an idle box could be read from the steps that ran free of the load, and
at the point where the load cost most, the idle step beside the measured one.

For plans, :func:`children_slow_end` reads a point's children's spread as a factor on the
step (how much slower than the median the slowest child ran), which preflight weighs against
its decision.

Derived from the certificate alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from afford.core.provenance import Tagged, measured, module, run_label
from afford.core.units import format_bytes
from afford.figures.cert_lookup import point, workload
from afford.fit.time.time_noise import LOADED_WAIT
from afford.schema.cert import Certificate
from afford.schema.point import Point

#: a 1-minute load average at or above this share of the cores is a busy host, where the
#: children's own waits were not recorded (a GPU; a kernel without schedstat)
BUSY_SHARE = 0.5
#: a run whose children's threads waited for a CPU this share of their time was delayed by
#: other work; where the waits were recorded they decide, not the load average
BUSY_WAIT = LOADED_WAIT


@dataclass(frozen=True)
class NoiseSummary:
    load: str | None                 # the host's load and the fix, one line; None: not read
    busy: bool                       # the load is a likely cause
    worst: tuple[str, ...]           # per workload, its worst point, one line each
    point_notes: frozenset[str]      # the per-point warnings as cert.warnings holds them


def load_line(cert: Certificate) -> tuple[str | None, bool]:
    """(one line on the recorded host load against the core count, whether the load is the
    likely cause). Where the children recorded how long their threads waited for a CPU (a
    CPU device), that decides: the load average counts certify's own children too (two
    torch threads on a 2-core box read as a full load), so it is the cause only when the
    children were measurably delayed; the line never names a cause its figures deny."""
    loads = [h for h in cert.host_load or [] if h.load_average is not None]
    if not loads:
        return None, False
    cores = next((h.cpu_count for h in loads if h.cpu_count), None)
    one_minute = {h.at: h.load_average[0] for h in loads}
    worst = max(one_minute.values())
    text = ", ".join(f"{v:.1f} {at}" for at, v in one_minute.items())
    if cores is None:
        return f"host load average {text} measuring (core count unknown)", False
    waited = [p.wait_share for r in cert.workloads for p in r.points + r.design_points
              if p.usable and p.wait_share is not None]
    loaded = worst >= BUSY_SHARE * cores
    busy = max(waited) >= BUSY_WAIT if waited else loaded
    line = f"host load average {text} measuring, on {cores} core(s)"
    if waited:
        line += (f"; the children's threads waited for a CPU {_share(min(waited))} to "
                 f"{_share(max(waited))} of their time")
    if busy:
        line += (": other work shared the CPU with the timed steps; re-run on an idle machine, "
                 "or with more independent children (--children 5) so that a median outvotes "
                 "the disturbed ones")
    elif loaded:
        line += (": the load average counts certify's own children, and their waits show "
                 "that other work did not delay the timed steps, so the spread is not the "
                 "load's")
    else:
        line += ": the host was not busy, so the spread is the workload's own (a launch-bound "
        line += "step varies from process to process)"
    return line + _outlier_clause(cert), busy


def _share(x: float) -> str:
    """A share as the line prints it: whole per cents, tenths below 1 % (so that 0.4 % does
    not read as 0 %)."""
    return f"{x:.1%}" if x < 0.01 else f"{x:.0%}"


def _outlier_clause(cert: Certificate) -> str:
    """Where children were outliers by far, how many points had one (their notes say what
    was done)."""
    n = sum(1 for r in cert.workloads for p in r.points + r.design_points
            if p.outlier_children)
    return "" if not n else (f"; at {n} point(s) one child's median lay far from the others' "
                             "(re-measured or outvoted: --verbose)")


def worst_points(cert: Certificate) -> tuple[str, ...]:
    """Per workload with a point whose children disagree beyond the warning threshold: that
    worst point, and how many such points there are."""
    out = []
    for r in cert.workloads:
        noisy = [p for p in r.points + r.design_points
                 if p.usable and p.child_spread is not None and p.quality_notes(r.sweep_param)]
        if not noisy:
            continue
        top = max(noisy, key=lambda p: p.child_spread)
        shape = f"{top.batch} x {top.seq}" if top.batch and top.seq else \
            f"{r.sweep_param}={top.value}"
        fresh = [k.child for k in top.children if k.round == "remeasure"]
        sided = bool(fresh) and fresh[0] not in top.outlier_children
        odd = (f" (child {', '.join(str(c) for c in top.outlier_children)} an outlier by far, "
               f"{'re-measured and outvoted' if sided else 'outvoted'})"
               if top.outlier_children else "")
        out.append(f"{r.name} ({r.mode}): worst point {shape}, children "
                   f"{top.child_spread:.0%} apart{odd}; {len(noisy)} of "
                   f"{sum(1 for p in r.points + r.design_points if p.usable)} points warned")
    return tuple(out)


def point_notes(cert: Certificate) -> frozenset[str]:
    """The point-by-point warnings, spelt as the certificate's ``warnings`` holds them."""
    return frozenset(f"{r.name} ({r.mode}): {n}" for r in cert.workloads for p in r.points
                     if p.usable for n in p.quality_notes(r.sweep_param))


def summarize_noise(cert: Certificate) -> NoiseSummary:
    load, busy = load_line(cert)
    return NoiseSummary(load=load, busy=busy, worst=worst_points(cert),
                        point_notes=point_notes(cert))


@dataclass(frozen=True)
class LoadCost:
    """What the load cost one workload's steps on a CPU (module docstring)."""

    name: str                        # "tinylm (fp32)"
    points: int                      # usable points with the children's accounting
    free: int                        # of them, those with a step on an idle box
    wait_low: float | None           # the points' wait shares: lowest and highest
    wait_high: float | None
    worst: Point | None              # the point the load cost most, relative to its idle
    worst_label: str = ""


def load_costs(cert: Certificate) -> list[LoadCost]:
    """Per workload measured with the children's accounting (a CPU), its :class:`LoadCost`."""
    out = []
    for r in cert.workloads:
        pts = [p for p in r.points + r.design_points if p.usable and p.cpu_step_seconds]
        if not pts:
            continue
        shares = [p.wait_share for p in pts if p.wait_share is not None]
        idle = [p for p in pts if p.idle_seconds]
        worst = max(idle, key=lambda p: p.median_seconds / p.idle_seconds, default=None)
        label = "" if worst is None else f"{worst.batch} x {worst.seq}" \
            if worst.batch and worst.seq else f"{r.sweep_param}={worst.value}"
        out.append(LoadCost(name=f"{r.name} ({r.mode})", points=len(pts), free=len(idle),
                            wait_low=min(shares, default=None),
                            wait_high=max(shares, default=None), worst=worst,
                            worst_label=label))
    return out


@dataclass(frozen=True)
class LoadRow:
    """The host's load at one moment of a certify, tagged (the report's host load table)."""

    at: str
    one: Tagged | None          # 1-minute load average
    five: Tagged | None
    fifteen: Tagged | None
    cores: Tagged | None
    per_core: Tagged | None     # 1-minute load / cores
    busy: str                   # yes / no / unknown, against BUSY_SHARE
    device: str                 # other processes on the device, or why not read


def host_load_rows(cert: Certificate) -> list[LoadRow]:
    """One row per recorded moment (before and after measuring)."""
    run, out = run_label(cert), []
    for h in cert.host_load or []:
        src = f"os.getloadavg() {h.at} measuring, {run}"
        la = h.load_average
        avg = [measured(v, "", f"{m}-minute load average, {src}") for m, v in
               zip((1, 5, 15), la)] if la is not None else [None, None, None]
        cores = measured(h.cpu_count, "", f"os.cpu_count(), {run}") if h.cpu_count else None
        share = module(la[0] / h.cpu_count, "ratio", f"1-minute load / cores, {src}") \
            if la is not None and h.cpu_count else None
        busy = "unknown" if share is None else ("yes" if share.value >= BUSY_SHARE else "no")
        others = [g for g in h.gpu_processes or [] if g.get("own") is not True]
        gpu = h.gpu_processes_error or ("not read" if h.gpu_processes is None else "; ".join(
            f"pid {g.get('pid')} holding {_held(g.get('used_memory_bytes'))}"
            for g in others) or "none")
        out.append(LoadRow(h.at, *avg, cores, share, busy, gpu))
    return out


def _held(n) -> str:
    return format_bytes(n) if isinstance(n, (int, float)) and n >= 0 else "memory not read"


# --- the spread of a point's children, as plans read it ---------------------------------


def children_slow_end(cert: Certificate, name: str, value: int | None = None,
                      mode: str | None = None) -> Tagged | None:
    """How much slower than the median the slowest child ran, as a factor on the step
    (slowest child median / median of the child medians), from the children's spread the
    certificate keeps: at the sweep point ``value`` where the sweep measured it with two
    children or more; else, for a shape no point measured, the workload's typical factor
    (the median over its usable points, sweep and step-time design: the widest would let
    one launch-floor point, or one child a stray process stalled, speak for every shape).
    An outlier child by far, which the others outvote (:attr:`Point.outlier_children`),
    is not the slow end. ``None`` where no point has two children."""
    r = workload(cert, name, mode)
    at = point(r, value) if value is not None else None
    own = at is not None and at.usable and len(at.child_medians) > 1
    pts = [at] if own else [p for p in r.points + r.design_points if p.usable]
    spread = sorted(((max(agreeing(p)) / p.median_seconds, p) for p in pts
                     if len(agreeing(p)) > 1 and p.median_seconds), key=lambda x: x[0])
    if not spread:
        return None
    factor, p = spread[(len(spread) - 1) // 2]  # the lower median: a factor a point measured
    where = f"{r.sweep_param}={p.value}" if p.role == "sweep" else f"{p.batch} x {p.seq}"
    typical = "" if own else f" (the median of its {len(spread)} points' factors)"
    return module(factor, "x", f"{r.name} {r.mode} at {where}: the slowest of "
                  f"{len(agreeing(p))} child medians over their median{typical}, "
                  f"{run_label(cert)}")


def agreeing(p: Point) -> list[float]:
    """A point's child medians less the outliers by far the others outvote."""
    if not p.outlier_children:
        return list(p.child_medians)
    return [k.median_seconds for k in p.children
            if k.median_seconds is not None and k.child not in p.outlier_children]
