"""What plans, ladders and reports read from a certificate: one tagged figure per function.

This is the contract between the measuring side (certify and its stages) and the planning
and rendering side. Each function returns a :class:`~afford.provenance.Tagged` value (or
``None`` when the certificate holds nothing to answer with); callers that need a figure
anyway tag their fallback ASSUMED with the reason. A section a stage did not write
(``cert.probes`` absent, say) gives ``None`` here, never a default dressed as a reading.

Workloads are named as in the certificate (``tinylm``, ``tinylm@q3``, ``pkg.mod:factory``)
and, when a certificate measured several dtype modes, picked by ``mode`` (default: the first).
"""

from __future__ import annotations

from afford import sizing
from afford.errors import InputError
from afford.provenance import Tagged, fitted, measured, module
from afford.schema.cert import Certificate, Point, WorkloadResult


def _run(cert: Certificate) -> str:
    e = cert.environment
    return f"{e.device_name}, certify {e.started_at:%Y-%m-%d %H:%M} UTC"


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


def _resident(p: Point | None) -> bool:
    return p is not None and p.resident is True and p.excluded_reason is None


def step_seconds(cert: Certificate, name: str, value: int, mode: str | None = None
                 ) -> Tagged | None:
    """Warm step seconds at sweep value ``value``: MEASURED where the sweep measured a
    resident point, else FITTED from the throughput law (extrapolated outside its range)."""
    r = workload(cert, name, mode)
    p = point(r, value)
    if _resident(p) and p.median_seconds is not None:
        return measured(p.median_seconds, "s", f"{r.name} {r.mode} {r.sweep_param}={value}: "
                        f"median of {len(p.child_medians)} child medians, {_run(cert)}")
    if r.law is None:
        return None
    secs, extra = r.law.predict(value)
    return fitted(secs, "s", f"{r.name} {r.mode}: {r.law.describe()}", extrapolated=extra)


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
    where = f"{r.name} {r.mode} {r.sweep_param}={value}, {_run(cert)}"
    if p.peak_allocated_bytes is not None:
        res = measured(p.peak_reserved_bytes, "B", f"max_memory_reserved, {where}") \
            if p.peak_reserved_bytes is not None else None
        return measured(p.peak_allocated_bytes, "B", f"max_memory_allocated, {where}"), res
    if p.peak_rss_bytes is not None:
        return measured(p.peak_rss_bytes, "B", f"child peak RSS (CPU), {where}"), None
    return None, None


def worst_reserved_ratio(cert: Certificate) -> Tagged | None:
    """The largest reserved / allocated over resident measured points (DESIGN section 3,
    rule 4: plans budget against allocated times this ratio where reserved is not known)."""
    ratios = [(p.peak_reserved_bytes / p.peak_allocated_bytes, r.name, p.value)
              for r in cert.workloads for p in r.points
              if _resident(p) and p.peak_reserved_bytes and p.peak_allocated_bytes]
    if not ratios:
        return None
    worst = max(ratios)
    return module(worst[0], "x", f"max reserved/allocated over {len(ratios)} resident "
                  f"points (worst: {worst[1]} at {worst[2]}), {_run(cert)}")


def predicted_memory(cert: Certificate, name: str, shape: dict[str, int],
                     mode: str | None = None) -> tuple[Tagged, Tagged | None] | None:
    """(allocated, reserved) predicted by the memory law at ``shape``, FITTED (extrapolated
    outside the fitted shapes); ``None`` without a law for ``name``. ``shape`` takes the
    workload's keys (``{"batch": 16, "seq": 2048}``) or the law's (B, s, d, L, H), plus
    ``params`` when d, L or H differ from the certified model; missing keys keep the
    certified base shape. On a CPU: (peak RSS, None)."""
    law = sizing.law_or_none(cert, name, mode)
    if law is None:
        return None
    p = sizing.predict(law, shape, _run(cert))
    return p.allocated, p.reserved


def max_batch(cert: Certificate, name: str, shape: dict[str, int], budget_bytes: int,
              mode: str | None = None) -> Tagged | None:
    """Largest batch whose predicted reserved memory (peak RSS on a CPU) fits
    ``budget_bytes`` at ``shape`` (its batch is ignored), FITTED; ``None`` without a
    memory law for ``name``."""
    law = sizing.law_or_none(cert, name, mode)
    if law is None:
        return None
    return sizing.max_batch(law, shape, budget_bytes, _run(cert))


def gemm_rate(cert: Certificate, dtype: str) -> Tagged | None:
    """Measured matmul rate of ``dtype`` (fp32, tf32, bf16, fp16) in FLOP/s. Probes stage."""
    return None


def datasheet_peak(cert: Certificate, dtype: str) -> Tagged | None:
    """The device's datasheet peak for ``dtype`` in FLOP/s, INHERITED. Probes stage."""
    return None


def copy_bandwidth(cert: Certificate) -> Tagged | None:
    """Measured device copy bandwidth (bytes read + written per second). Probes stage."""
    return None


def checkpoint_write_seconds(cert: Certificate, name: str, mode: str | None = None
                             ) -> Tagged | None:
    """Median seconds of one atomic checkpoint write of the workload. Probes stage."""
    return None


def checkpoint_bytes(cert: Certificate, name: str, mode: str | None = None) -> Tagged | None:
    """Bytes of one checkpoint (model + optimizer state) of the workload. Probes stage."""
    return None


def startup_seconds(cert: Certificate) -> dict[str, Tagged]:
    """Measured startup components by name (``import_torch``, ``import_transformers``,
    ``first_step`` ...). Empty without the probes stage."""
    return {}
