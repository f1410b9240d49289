"""Reading a certificate into tagged figures: what plans, ladders and reports read from it,
one tagged figure per function.

This is the contract between the measuring side (certify and its stages) and the planning
and rendering side. Each function returns a :class:`~afford.core.provenance.Tagged` value (or
``None`` when the certificate holds nothing to answer with); callers that need a figure
anyway tag their fallback ASSUMED with the reason. A section a stage did not write
(``cert.probes`` absent, say) gives ``None`` here, never a default dressed as a reading.

Workloads are named as in the certificate (``tinylm``, ``tinylm@q3``, ``pkg.mod:factory``)
and, when a certificate measured several dtype modes, picked by ``mode`` (default: the first).

The modules of this package read one part of a certificate each, for its table or command:
:mod:`~afford.figures.summary` (the certify summary), :mod:`~afford.figures.probes_figures`
(the probes' tables), :mod:`~afford.figures.memory_figures` (``afford size``),
:mod:`~afford.figures.gates_figures` (the gates and the audit),
:mod:`~afford.figures.distributed_figures` (a node's collectives and data-parallel scaling).
"""

from __future__ import annotations

from afford.core.errors import InputError
from afford.core.provenance import (
    NotExecutable,
    Tagged,
    inherited,
    measured,
    module,
    run_label,
)
from afford.figures import memory_figures
from afford.figures.memory_at import MemoryAnswer
from afford.figures.memory_figures import law_or_none
from afford.figures.time_figures import step_at
from afford.fit.memory import sizing
from afford.fit.stats import median
from afford.fit.time import verdicts
from afford.schema.cert import Certificate, WorkloadResult
from afford.schema.datasheet import lookup
from afford.schema.point import Point
from afford.schema.probes_section import (
    CheckpointProbe,
    CopyProbe,
    GemmProbe,
    HostCopyProbe,
    Ladder,
    counted_runs,
)


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


def step_seconds(cert: Certificate, name: str, value: int, mode: str | None = None
                 ) -> Tagged | None:
    """Warm step seconds at sweep value ``value``: the one fallback path,
    :func:`afford.figures.time_figures.step_at`, at the workload's shape there (measured,
    else the step-time model, else the throughput law; a band where the host can bound the
    step); ``None`` where none answers."""
    r = workload(cert, name, mode)
    shape = shape_at(cert, name, value, mode) or {r.sweep_param: int(value)}
    return step_at(cert, r.name, shape, r.mode).step


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


def memory_answer(cert: Certificate, name: str, shape: dict[str, int],
                  mode: str | None = None, alloc_conf: str = "",
                  budget: Tagged | None = None) -> MemoryAnswer | None:
    """Peak memory at ``shape`` as every command reads it (:mod:`afford.figures.memory_at`:
    measured there, else the allocator replay where the certificate trusts it, else the
    memory law; extrapolated with its reasons; ``fits`` judged against ``budget`` bytes
    where given); ``None`` where the certificate can say nothing (no memory law for
    ``name`` and the shape not measured). ``shape`` takes the workload's keys
    (``{"batch": 16, "seq": 2048}``) or the law's (B, s, d, L, H), plus ``params`` when d,
    L or H differ from the certified model; missing keys keep the certified base shape."""
    law = law_or_none(cert, name, mode)
    if law is None:
        return memory_figures.point_answer(cert, name, mode, shape, run_label(cert), budget)
    return memory_figures.for_cert(cert, law, shape, alloc_conf, budget)


def predicted_memory(cert: Certificate, name: str, shape: dict[str, int],
                     mode: str | None = None, alloc_conf: str = ""
                     ) -> tuple[Tagged, Tagged | None] | None:
    """(allocated, reserved) of :func:`memory_answer` at ``shape``; on a CPU (peak RSS,
    None); ``None`` where it has none."""
    got = memory_answer(cert, name, shape, mode, alloc_conf)
    return None if got is None else (got.allocated, got.reserved)


def predicted_params(cert: Certificate, name: str, shape: dict[str, int],
                     mode: str | None = None) -> Tagged | None:
    """Trainable parameters at ``shape`` as the memory law counts them (the fitted count at
    the certified d, L, H; scaled as L*d^2 otherwise, said in the source); ``None`` without
    a law for ``name``."""
    law = law_or_none(cert, name, mode)
    if law is None:
        return None
    return sizing.predict(law, shape, run_label(cert)).params


def max_batch(cert: Certificate, name: str, shape: dict[str, int], budget_bytes: int,
              mode: str | None = None, alloc_conf: str = "") -> Tagged | None:
    """The largest batch whose memory answer fits ``budget_bytes`` at ``shape`` (its batch
    is ignored; ``fits`` yes or likely, :mod:`afford.figures.memory_at`), FITTED;
    ``None`` without a memory law for ``name``."""
    law = law_or_none(cert, name, mode)
    if law is None:
        return None
    return memory_figures.max_batch_for_cert(cert, law, shape, budget_bytes, alloc_conf)


def _probes(cert: Certificate):
    return getattr(cert, "probes", None)


def gemm_rate(cert: Certificate, dtype: str) -> Tagged | None:
    """Measured matmul rate of ``dtype`` (fp32, tf32, bf16, fp16) in FLOP/s: 2 n^3 over the
    median of the timed calls. ``None`` without the probes stage or where the dtype could
    not be probed (the section says why)."""
    pr = _probes(cert)
    g = pr.gemm.get(dtype) if pr else None
    if not isinstance(g, GemmProbe):
        return None
    return measured(g.flops_per_second, "FLOP/s",
                    f"GEMM {dtype} {g.n}^3, median of {len(g.seconds)} calls after "
                    f"{g.warmup_calls} warm-up, max rel. error {g.max_rel_error:.1e}, "
                    f"{run_label(cert)}")


def datasheet_peak(cert: Certificate, dtype: str) -> Tagged | None:
    """The device's datasheet peak for ``dtype`` in FLOP/s, INHERITED with its citation.
    The row stored by the probes stage, else a lookup of the device name; ``None`` for an
    unknown device or a dtype the row does not list."""
    row = _datasheet(cert)
    if row is None or dtype not in row.flops_per_second:
        return None
    return inherited(row.flops_per_second[dtype], "FLOP/s", _citation(row))


def datasheet_bandwidth(cert: Certificate) -> Tagged | None:
    """The device's datasheet memory bandwidth in bytes/s, INHERITED; ``None`` if unknown."""
    row = _datasheet(cert)
    if row is None or row.bandwidth_bytes_per_second is None:
        return None
    return inherited(row.bandwidth_bytes_per_second, "B/s", _citation(row))


def _datasheet(cert: Certificate):
    pr = _probes(cert)
    if pr is not None:
        return pr.datasheet
    return lookup(cert.environment.device_name)[0]


def _citation(row) -> str:
    return f"{row.device}: {row.citation}" + (" (secondary)" if row.secondary else "")


def copy_bandwidth(cert: Certificate) -> Tagged | None:
    """Measured device copy bandwidth (bytes read + written per second)."""
    pr = _probes(cert)
    c = pr.device_copy if pr else None
    if not isinstance(c, CopyProbe):
        return None
    return measured(c.bytes_per_second, "B/s",
                    f"copy of {c.buffer_bytes} B, read + written, median of {len(c.seconds)} "
                    f"calls, {run_label(cert)}")


def host_link(cert: Certificate) -> tuple[Tagged, Tagged] | None:
    """Measured host link bandwidths (host -> device, device -> host; bytes crossing per
    second), or ``None`` where the certificate has no host-copy probe."""
    pr = _probes(cert)
    h = pr.host_copy if pr else None
    if not isinstance(h, HostCopyProbe):
        return None
    src = (f"copy of {h.buffer_bytes} B between pinned host memory and the device, median "
           f"of {len(h.h2d_seconds)} calls, {run_label(cert)}")
    return (measured(h.h2d_bytes_per_second, "B/s", "host -> device " + src),
            measured(h.d2h_bytes_per_second, "B/s", "device -> host " + src))


def workload_probes(cert: Certificate, name: str, mode: str | None = None):
    """The probes section's entry for a workload, or ``None``."""
    pr = _probes(cert)
    if pr is None:
        return None
    return next((w for w in pr.workloads
                 if w.name == name and (mode is None or w.mode == mode)), None)


def checkpoint_write_seconds(cert: Certificate, name: str, mode: str | None = None
                             ) -> Tagged | None:
    """Median seconds of one atomic checkpoint write of the workload's model and optimizer
    state (temp file, fsync, rename), at the shape the probes used (in the source)."""
    w = workload_probes(cert, name, mode)
    c = w.checkpoint if w else None
    if not isinstance(c, CheckpointProbe):
        return None
    return measured(c.median_write_seconds, "s",
                    f"{w.name} {w.mode} {w.sweep_param}={c.value}: median of "
                    f"{len(c.write_seconds)} atomic writes to {c.directory}, {run_label(cert)}")


def checkpoint_bytes(cert: Certificate, name: str, mode: str | None = None) -> Tagged | None:
    """Bytes of one checkpoint (model + optimizer state) of the workload."""
    w = workload_probes(cert, name, mode)
    c = w.checkpoint if w else None
    if not isinstance(c, CheckpointProbe):
        return None
    return measured(c.bytes, "B", f"{w.name} {w.mode} {w.sweep_param}={c.value}: file size, "
                    f"{run_label(cert)}")


def step_flops(cert: Certificate, name: str, value: int, mode: str | None = None
               ) -> Tagged | None:
    """FLOPs of one training step at sweep value ``value``, counted by FlopCounterMode
    (matmuls and attention, forward and backward; MODULE: computed by a named counter)."""
    w = workload_probes(cert, name, mode)
    f = next((f for f in (w.flops if w else []) if getattr(f, "value", None) == value), None)
    if f is None or isinstance(f, NotExecutable):
        return None
    return module(f.flops, "FLOP", f"{f.counter}, {w.name} {w.mode} {w.sweep_param}={value}")


def boundness(cert: Certificate, name: str, mode: str | None = None) -> Tagged | None:
    """launch-bound / compute-bound / memory-bound / undetermined, with the figures that
    decided it in the source."""
    w = workload_probes(cert, name, mode)
    if w is None:
        return None
    v = bound_verdict_of(w)
    return module(v.label, "", f"afford.fit.time.verdicts.bound_verdict at "
                  f"{w.sweep_param}={w.value}: " + "; ".join(v.reasons))


def bound_verdict_of(w):
    """The workload's stored verdict; one stored with a fixed share above 100 % (written
    before such a share was refused) is judged again from its own stored figures and rungs,
    so no certificate quotes a fixed cost larger than the step."""
    v = w.verdict
    if v.fixed_share is None or v.fixed_share <= verdicts.FIXED_SHARE_MAX:
        return v
    growth = None
    if isinstance(w.ladder, Ladder):
        ok = [r for r in w.ladder.rungs if r.median_seconds and r.tokens_per_step]
        growth = verdicts.ladder_growth([r.tokens_per_step for r in ok],
                                        [r.median_seconds for r in ok],
                                        [r.timed_seconds for r in ok])
    return verdicts.bound_verdict(v.fixed_share, v.utilisation_mean, v.utilisation_low_share,
                                  v.arithmetic_share, growth)


def startup_seconds(cert: Certificate) -> dict[str, Tagged]:
    """Measured startup components by name: ``process`` (spawn to imports done, parent's
    clock), ``import_torch``, ``import_transformers`` (when installed), ``cuda_init`` (CUDA
    context, on a GPU), and ``first_step`` (the slowest step 0 of the sweep's largest
    resident points). Each a median over fresh children. Empty without the probes stage."""
    pr = _probes(cert)
    s = pr.startup if pr else None
    if s is None or isinstance(s, NotExecutable):
        return {}
    n = len(counted_runs(s.runs))
    where = f"median of {n} fresh children" + \
        (f" ({len(s.runs) - n} of {len(s.runs)} left out: imports beside the parent's)"
         if n < len(s.runs) else "") + f", {run_label(cert)}"
    out = {"process": measured(s.process_seconds, "s", f"spawn to imports done, {where}"),
           "import_torch": measured(s.import_torch_seconds, "s", f"import torch, {where}")}
    if not isinstance(s.import_transformers_seconds, NotExecutable):
        out["import_transformers"] = measured(s.import_transformers_seconds, "s",
                                              f"import transformers, {where}")
    if not isinstance(s.cuda_init_seconds, NotExecutable):
        out["cuda_init"] = measured(s.cuda_init_seconds, "s",
                                    f"torch.cuda.init + first allocation, {where}")
    first = _first_step(cert)
    if first is not None:
        out["first_step"] = first
    return out


def _first_step(cert: Certificate) -> Tagged | None:
    cands = []
    for r in cert.workloads:
        res = [p for p in r.points if p.usable and p.step0_seconds is not None]
        if res:
            top = max(res, key=lambda p: p.value)
            cands.append((top.step0_seconds, r, top))
    if not cands:
        return None
    secs, r, p = max(cands, key=lambda c: c[0])
    return measured(secs, "s", f"step 0 of {r.name} {r.mode} {r.sweep_param}={p.value} "
                    f"(median over children; the slowest workload's), {run_label(cert)}")



# --- Accessors for the cost model (afford plan / afford preflight) ---------------------------
# Same contract: a figure is Tagged, or None when the certificate holds nothing to answer with.

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


def point_status(cert: Certificate, name: str, value: int, mode: str | None = None
                 ) -> str | None:
    """Why a measured point is not used (not resident, refused, failed); ``None`` when it is
    resident or was not measured."""
    p = point(workload(cert, name, mode), value)
    if p is None or p.usable:
        return None
    return p.excluded_reason or "residency unknown"
