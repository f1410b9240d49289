"""A certificate's workloads, their measured points and its environment: the lookups every
reader of a certificate starts from, and the figures read straight off a measured point
(its step 0, tokens, parameters and memory peaks), each tagged.

Workloads are named as in the certificate (``tinylm``, ``tinylm@q3``, ``pkg.mod:factory``)
and, when a certificate measured several dtype modes, picked by ``mode`` (default: the
first). A run file's name for a workload (an ``hf:`` spec whose shape option differs) is
resolved by :func:`afford.figures.time_figures.find_workload`. A figure the certificate does
not hold is ``None``, never a default dressed as a reading.
"""

from __future__ import annotations

from afford.core.errors import InputError
from afford.core.provenance import Tagged, measured, module, run_label
from afford.fit.stats import median
from afford.schema.cert import Certificate, WorkloadResult
from afford.schema.point import Point


def workload(cert: Certificate, name: str, mode: str | None = None) -> WorkloadResult:
    """The certificate's result for ``name`` (and ``mode``); InputError listing the choices."""
    for r in cert.workloads:
        if r.name == name and (mode is None or r.mode == mode):
            return r
    have = ", ".join(f"{r.name} ({r.mode})" for r in cert.workloads) or "none"
    raise InputError(f"the certificate has no workload {name!r}"
                     f"{f' in mode {mode}' if mode else ''}; it has: {have}")


def point(r: WorkloadResult, value: int) -> Point | None:
    return next((p for p in r.points if p.value == value), None)


def probes_section(cert: Certificate):
    """The certificate's probes section, or ``None`` where the probes stage did not run."""
    return getattr(cert, "probes", None)


def workload_probes(cert: Certificate, name: str, mode: str | None = None):
    """The probes section's entry for a workload, or ``None``."""
    pr = probes_section(cert)
    if pr is None:
        return None
    return next((w for w in pr.workloads
                 if w.name == name and (mode is None or w.mode == mode)), None)


def workload_keys(cert: Certificate) -> list[tuple[str, str, str]]:
    """(name, mode, sweep parameter) of every workload result, in certificate order."""
    return [(r.name, r.mode, r.sweep_param) for r in cert.workloads]


def sweep_values(cert: Certificate, name: str, mode: str | None = None) -> list[int]:
    return [p.value for p in workload(cert, name, mode).points]


def sweep_param(cert: Certificate, name: str, mode: str | None = None) -> str:
    return workload(cert, name, mode).sweep_param


def shape_at(cert: Certificate, name: str, value: int, mode: str | None = None
             ) -> dict[str, int] | None:
    """The workload's shape at sweep value ``value``: the measured point's shape, or the
    family's shape (any measured point's) with the sweep parameter set to ``value``."""
    r = workload(cert, name, mode)
    p = point(r, value)
    if p is not None and p.shape:
        return dict(p.shape)
    family = next((q.shape for q in r.points if q.shape), None)
    if family is None:
        return None
    return {**family, r.sweep_param: int(value)}


def point_status(cert: Certificate, name: str, value: int, mode: str | None = None
                 ) -> str | None:
    """Why a measured point is not used (not resident, refused, failed); ``None`` when it is
    resident or was not measured."""
    p = point(workload(cert, name, mode), value)
    if p is None or p.usable:
        return None
    return p.excluded_reason or "residency unknown"


def step0_seconds(cert: Certificate, name: str, value: int, mode: str | None = None
                  ) -> Tagged | None:
    """Seconds of step 0 (cold: allocation, autotuning, compilation) at a measured point,
    median over children; ``None`` where the point was not measured."""
    r = workload(cert, name, mode)
    p = point(r, value)
    if p is None or p.step0_seconds is None:
        return None
    return measured(p.step0_seconds, "s", f"{r.name} {r.mode} {r.sweep_param}={value}: step 0, "
                    f"median over children, {run_label(cert)}")


def step0_over_warm(cert: Certificate, name: str, mode: str | None = None) -> Tagged | None:
    """Median over measured points of step 0 / warm median: scales a predicted warm step
    to a step 0 where none was measured."""
    r = workload(cert, name, mode)
    ratios = [p.step0_over_warm for p in r.points if p.step0_over_warm is not None]
    if not ratios:
        return None
    return module(median(ratios), "x", f"{r.name} {r.mode}: median over {len(ratios)} points "
                  f"of step 0 / warm, {run_label(cert)}")


def tokens_per_step(cert: Certificate, name: str, value: int, mode: str | None = None
                    ) -> Tagged | None:
    """Tokens one step consumes, as the workload reported it at a measured point."""
    r = workload(cert, name, mode)
    p = point(r, value)
    if p is None or p.tokens_per_step is None:
        return None
    return module(p.tokens_per_step, "tokens", f"{r.name} {r.mode} {r.sweep_param}={value}: "
                  f"the workload's tokens per step, {run_label(cert)}")


def params(cert: Certificate, name: str, value: int, mode: str | None = None) -> Tagged | None:
    """Trainable parameters counted at a measured point."""
    r = workload(cert, name, mode)
    p = point(r, value)
    if p is None or p.params is None:
        return None
    return module(p.params, "params", f"{r.name} {r.mode} {r.sweep_param}={value}: trainable "
                  f"parameters counted, {run_label(cert)}")


def peak_bytes(cert: Certificate, name: str, value: int, mode: str | None = None
               ) -> tuple[Tagged | None, Tagged | None]:
    """(peak allocated, peak reserved) at a measured point, MEASURED; ``(None, None)``
    where the point was not measured (the memory law answers for other shapes:
    :func:`predicted_memory`). On CPU, reserved is ``None`` and allocated is the child's
    peak RSS, labelled so in its source."""
    r = workload(cert, name, mode)
    p = point(r, value)
    if p is None:
        return None, None
    return point_peaks(p, f"{r.name} {r.mode} {r.sweep_param}={value}, {run_label(cert)}")


def point_peaks(p: Point, where: str) -> tuple[Tagged | None, Tagged | None]:
    """(peak allocated, peak reserved) of a measured point, MEASURED (``where`` names it);
    on CPU (peak RSS, None)."""
    if p.peak_allocated_bytes is not None:
        res = measured(p.peak_reserved_bytes, "B", f"max_memory_reserved, {where}") \
            if p.peak_reserved_bytes is not None else None
        return measured(p.peak_allocated_bytes, "B", f"max_memory_allocated, {where}"), res
    if p.peak_rss_bytes is not None:
        return measured(p.peak_rss_bytes, "B", f"child peak RSS (CPU), {where}"), None
    return None, None


def device_name(cert: Certificate) -> str:
    return cert.environment.device_name


def device_type(cert: Certificate) -> str:
    return cert.environment.device_type


def device_memory(cert: Certificate) -> Tagged | None:
    """Total memory of the card (CUDA) or of the host (CPU), MEASURED."""
    e = cert.environment
    if e.device_memory_bytes is None:
        return None
    what = "total memory of the card" if e.device_type == "cuda" else "MemTotal of the host"
    return measured(e.device_memory_bytes, "B", f"{what}, {run_label(cert)}")


def torch_version(cert: Certificate) -> str:
    return cert.environment.torch_version


def certified_at(cert: Certificate):
    """When the certificate's measurement started (a timezone-aware datetime)."""
    return cert.environment.started_at
