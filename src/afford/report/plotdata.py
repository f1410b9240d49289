"""What each plot draws, as typed series (no drawing here; :mod:`afford.report.plots`
draws them): the throughput law in log-log with its fit and residuals, memory against the
sweep (with the memory law where a stage wrote one), residency bars against the card, and
the scale ladder where a plan or section holds one.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from afford.core.provenance import Tag, Tagged, run_label
from afford.figures import cert_lookup
from afford.figures.memory_figures import law_points
from afford.figures.memory_figures import laws as memory_laws
from afford.report.generic import as_leaf, find_key, items_of
from afford.report.model import Plot, Series
from afford.schema.cert import Certificate, WorkloadResult

GIB = float(2**30)
CURVE_POINTS = 60


def slug(*parts: str) -> str:
    text = "-".join(parts).lower()
    return "-".join(p for p in re.split(r"[^a-z0-9]+", text) if p)[:80]


def throughput(cert: Certificate, r: WorkloadResult) -> Plot | None:
    law = r.law
    if law is None:
        return None
    used = [p for p in r.points if p.usable]
    out = [p for p in r.points if not p.usable and p.median_seconds is not None]
    xs = np.geomspace(law.x_min, law.x_max, CURVE_POINTS)
    series = [Series("measured: median of child medians", Tag.MEASURED,
                     tuple(float(p.value) for p in used),
                     tuple(float(p.median_seconds) for p in used))]
    if out:
        series.append(Series("measured, excluded from the fit", Tag.MEASURED,
                             tuple(float(p.value) for p in out),
                             tuple(float(p.median_seconds) for p in out), "excluded"))
    for form in ("power", "floor_power"):
        f = law.power if form == "power" else law.floor_power
        if f is None:
            continue
        chosen = form == law.chosen
        series.append(Series(f"{form} law ({'chosen' if chosen else 'kept, not chosen'})",
                             Tag.FITTED, tuple(float(x) for x in xs),
                             tuple(float(y) for y in f.predict(xs)),
                             "line" if chosen else "dashed"))
    residuals = (Series(f"{law.chosen} law / measured - 1", Tag.MODULE, tuple(law.x),
                        tuple(100.0 * v for v in law.best.residuals)),)
    e = cert.environment
    return Plot(id=slug(e.device_name, r.name, r.mode, "throughput"), kind="throughput",
                title=f"{r.name} ({r.mode}) on {e.device_name}: warm step time",
                x_label=r.sweep_param, y_label="seconds per step", series=tuple(series),
                residuals=residuals,
                caption=f"{r.name} ({r.mode}): measured points, both law forms over the "
                "resident points, and the chosen law's residuals in percent.")


def _memory_series(cert: Certificate, r: WorkloadResult) -> list[Series]:
    """The sweep's measured peaks (a workload without a memory law)."""
    rows = [(p, *cert_lookup.peak_bytes(cert, r.name, p.value, r.mode)) for p in r.points]
    out = []
    for i, label in ((2, "peak reserved"), (1, "peak allocated (or RSS)")):
        pts = [(float(row[0].value), row[i].value / GIB) for row in rows if row[i] is not None]
        if pts:
            out.append(Series(label, Tag.MEASURED, *map(tuple, zip(*pts))))
    return out


def memory(cert: Certificate, r: WorkloadResult) -> Plot | None:
    """The sweep's peaks of a workload the memory stage has no law for."""
    series = _memory_series(cert, r)
    if not series:
        return None
    e = cert.environment
    card = ((e.device_memory_bytes / GIB, "device memory"),) if e.device_memory_bytes else ()
    return Plot(id=slug(e.device_name, r.name, r.mode, "memory"), kind="memory",
                title=f"{r.name} ({r.mode}) on {e.device_name}: peak memory",
                x_label=r.sweep_param, y_label="GiB", series=tuple(series), limits=card,
                caption=f"{r.name} ({r.mode}): peak memory of one training step at each "
                "sweep point, against the device's memory.")


def memory_law(cert: Certificate, law) -> Plot | None:
    """The memory law at the shapes the memory stage measured, beside what it measured
    there: the figures of the memory tables (the held-out ones are the held-out table's),
    in the law's own quantity (peak RSS increment on a CPU, allocated and reserved on CUDA),
    against tokens per step."""
    pts = law_points(law, run_label(cert))
    if not pts:
        return None
    scale, unit = (GIB, "GiB") if max(p.measured.value for p in pts) >= GIB else \
        (float(2**20), "MiB")
    series = []
    for q in dict.fromkeys(p.quantity for p in pts):
        mine = sorted((p for p in pts if p.quantity == q), key=lambda p: p.tokens)
        for held, style in ((False, "points"), (True, "heldout")):
            got = [p for p in mine if p.held_out == held]
            if got:
                series.append(Series(f"{q}, measured ({'held out' if held else 'fitted'})",
                                     Tag.MEASURED, tuple(float(p.tokens) for p in got),
                                     tuple(p.measured.value / scale for p in got), style))
        series.append(Series(f"{q}, memory law at each shape", Tag.FITTED,
                             tuple(float(p.tokens) for p in mine),
                             tuple(p.law.value / scale for p in mine), "predicted"))
    e = cert.environment
    return Plot(id=slug(e.device_name, law.workload, law.mode, "memory"), kind="memory",
                title=f"{law.workload} ({law.mode}) on {e.device_name}: peak memory and its "
                "law", x_label="tokens per step (B x s)", y_label=unit, series=tuple(series),
                caption=f"{law.workload} ({law.mode}): each shape the memory stage measured "
                "(circles fitted, squares held out) and the law at that shape (x), in the "
                "law's quantity; the same figures as the memory tables.")


def residency(cert: Certificate) -> Plot | None:
    card = cert.environment.device_memory_bytes
    if not card:
        return None
    bars = []
    for r in cert.workloads:
        for p in r.points:
            alloc, reserved = cert_lookup.peak_bytes(cert, r.name, p.value, r.mode)
            held = reserved or alloc
            if held is not None:
                bars.append((f"{r.name} {r.mode} {r.sweep_param}={p.value}",
                             100.0 * held.value / card))
    if not bars:
        return None
    e = cert.environment
    return Plot(id=slug(e.device_name, "residency"), kind="residency",
                title=f"Residency on {e.device_name}: peak held memory, % of the card",
                x_label="% of device memory", y_label="", bars=tuple(bars),
                limits=((100.0, "device memory"),), log_x=False, log_y=False,
                caption="Peak reserved memory (allocated where reserved is not recorded) of "
                "each sweep point as a share of the device's memory; beyond 100 % a point "
                "is not resident.")


def breakdown(cert: Certificate) -> Plot | None:
    """Where the memory goes at the peak, one stacked bar per workload and mode (the memory
    stage's breakdown at its base shape, GiB)."""
    mem = getattr(cert, "memory", None)
    stacks = []
    for law in (mem.laws if mem is not None else []):
        b = law.replay.breakdown if law.replay else None
        if b is not None:
            stacks.append((f"{law.workload} {law.mode}\n{b.B}x{b.s}",
                           tuple((k, v / GIB) for k, v in b.classes().items())))
    if not stacks:
        return None
    e = cert.environment
    return Plot(id=slug(e.device_name, "memory-breakdown"), kind="breakdown",
                title=f"Where the memory goes at the peak on {e.device_name}",
                x_label="", y_label="GiB (reserved at the peak)", stacks=tuple(stacks),
                log_x=False, log_y=False,
                caption="Each bar: the live blocks at the allocated peak of the base shape's "
                "recorded step, classed by lifetime, and the allocator's slack on top "
                "(reserved - allocated).")


def certificate_plots(cert: Certificate) -> dict[str, list[Plot]]:
    """Plots of one certificate, keyed by the subsection that shows them."""
    out: dict[str, list[Plot]] = {"laws": [], "memory": [], "residency": []}
    laws = memory_laws(cert)
    with_law = {(law.workload, law.mode) for law in laws}
    for r in cert.workloads:
        if (p := throughput(cert, r)) is not None:
            out["laws"].append(p)
        if (r.name, r.mode) not in with_law and (p := memory(cert, r)) is not None:
            out["memory"].append(p)
    out["memory"].extend(p for law in laws if (p := memory_law(cert, law)) is not None)
    if (p := breakdown(cert)) is not None:
        out["memory"].append(p)
    if (p := residency(cert)) is not None:
        out["residency"].append(p)
    return out


def _ladder_rows(doc: Any) -> list:
    rows = []
    for found in find_key(doc, "ladder", depth=2):
        if isinstance(found, (list, tuple)):
            rows.extend(found)
        else:
            rows.extend(r for v in find_key(found, "rows", depth=1)
                        if isinstance(v, (list, tuple)) for r in v)
    return rows


def ladder(doc: Any, name: str) -> Plot | None:
    """The scale ladder of a plan or section: wall clock against parameter count, one series
    per field in seconds (the measured-law and roofline columns stay apart). Rows are read
    from a ``ladder`` list (or ``ladder.rows``) whose records hold a Tagged figure in unit
    ``params`` and Tagged figures in ``s``."""
    columns: dict[str, list[tuple[float, float, Tag]]] = {}
    for row in _ladder_rows(doc):
        leaves = {k: as_leaf(v) for k, v in items_of(row)}
        tagged = {k: v for k, v in leaves.items() if isinstance(v, Tagged)}
        n = next((v for v in tagged.values() if v.unit == "params"), None)
        if n is None or not isinstance(n.value, (int, float)):
            continue
        for k, v in tagged.items():
            if v.unit == "s" and isinstance(v.value, (int, float)) and v.value > 0:
                columns.setdefault(k, []).append((float(n.value), float(v.value), v.tag))
    if not columns:
        return None
    series = tuple(Series(k, pts[0][2], tuple(p[0] for p in pts), tuple(p[1] for p in pts),
                          "linepoints") for k, pts in columns.items())
    return Plot(id=slug(name, "ladder"), kind="ladder", title=f"Scale ladder: {name}",
                x_label="parameters", y_label="wall-clock seconds", series=series,
                caption="Wall clock per model size, one line per column (never pooled).")
