"""The headline figures of a certificate, each with its provenance tag.

Derived from the certificate alone (no device); the renderers print these and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from afford.core.provenance import Tagged, measured, module, run_label
from afford.fit.stats import median
from afford.schema.cert import Certificate, WorkloadResult


@dataclass(frozen=True)
class WorkloadSummary:
    name: str
    mode: str
    sweep_param: str
    law: str                      # the chosen law in words, or why there is none
    r2: Tagged | None
    loo_max: Tagged | None
    fitted_range: str
    resident: Tagged              # resident points / measured points
    warm_seconds: Tagged | None   # warm median at the largest resident point
    step0_over_warm: Tagged | None
    warnings: tuple[str, ...]



def summarize_workload(cert: Certificate, r: WorkloadResult) -> WorkloadSummary:
    run = run_label(cert)
    timed = [p for p in r.points if p.median_seconds is not None]
    resident = [p for p in timed if p.usable]
    law = r.law
    ratios = [p.step0_over_warm for p in timed if p.step0_over_warm is not None]
    top = max(resident, key=lambda p: p.value) if resident else None
    src = f"{r.name} {r.mode}"
    return WorkloadSummary(
        name=r.name, mode=r.mode, sweep_param=r.sweep_param,
        law=law.formula() if law else (r.refused or "no law (fewer than 2 resident points)"),
        r2=module(round(law.best.r2, 5), "", f"fit_throughput ({law.chosen})") if law else None,
        loo_max=module(law.best.loo_max, "ratio", "leave-one-out relative error, max")
        if law and law.best.loo_max is not None else None,
        fitted_range=f"{law.x_min:g}..{law.x_max:g}" if law else "-",
        resident=measured(f"{len(resident)}/{len(r.points)}", "points",
                          f"{src}: residency over the sweep, {run}"),
        warm_seconds=measured(top.median_seconds, "s",
                              f"{src} {r.sweep_param}={top.value}: median of child medians, {run}")
        if top else None,
        step0_over_warm=module(median(ratios), "x",
                               "median over points of step 0 / warm median") if ratios else None,
        warnings=tuple(r.warnings),
    )


def summarize(cert: Certificate) -> list[WorkloadSummary]:
    return [summarize_workload(cert, r) for r in cert.workloads]
