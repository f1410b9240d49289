"""The probes section of a certificate read into tagged figures: the device's ceilings
(matmul rates, copy and host-link bandwidth, beside the datasheet's), each workload's FLOPs
per step and boundness, and the rows of the certify summary built from them.

Derived from the certificate alone (no device): MFU from :func:`afford.fit.time.verdicts.mfu`,
and step 0 against warm from :mod:`afford.fit.time.warmup` over the sweep's raw samples. A
probe that could not run is ``None`` as a figure (the section says why) and is carried as its
:class:`~afford.core.provenance.NotExecutable` in a row; the renderer prints it as such.
What a session pays for start-up and checkpoints is :mod:`afford.figures.session_costs`; the
report's detail (every rung, every start-up) is :mod:`afford.figures.probes_detail`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass

from afford.core.provenance import (
    SHARE,
    NotExecutable,
    Tagged,
    inherited,
    measured,
    module,
    run_label,
)
from afford.figures.cert_lookup import probes_section, workload_probes
from afford.figures.session_costs import checkpoint_bytes, checkpoint_write_seconds, startup_seconds
from afford.fit.time.verdicts import FIXED_SHARE_MAX, bound_verdict, ladder_growth, mfu
from afford.fit.time.warmup import WarmupProfile, combine_profiles, warmup_profile
from afford.schema.cert import Certificate, WorkloadResult
from afford.schema.datasheet import lookup
from afford.schema.probes_section import (
    GEMM_DTYPES,
    CheckpointProbe,
    CopyProbe,
    FlopCount,
    GemmProbe,
    HostCopyProbe,
    Ladder,
    UtilisationTrace,
    WorkloadProbes,
)

Cell = Tagged | NotExecutable | None


# --- one figure each --------------------------------------------------------------------


def gemm_rate(cert: Certificate, dtype: str) -> Tagged | None:
    """Measured matmul rate of ``dtype`` (fp32, tf32, bf16, fp16) in FLOP/s: 2 n^3 over the
    median of the timed calls. ``None`` without the probes stage or where the dtype could
    not be probed (the section says why)."""
    pr = probes_section(cert)
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
    pr = probes_section(cert)
    if pr is not None:
        return pr.datasheet
    return lookup(cert.environment.device_name)[0]


def _citation(row) -> str:
    return f"{row.device}: {row.citation}" + (" (secondary)" if row.secondary else "")


def copy_bandwidth(cert: Certificate) -> Tagged | None:
    """Measured device copy bandwidth (bytes read + written per second)."""
    pr = probes_section(cert)
    c = pr.device_copy if pr else None
    if not isinstance(c, CopyProbe):
        return None
    return measured(c.bytes_per_second, "B/s",
                    f"copy of {c.buffer_bytes} B, read + written, median of {len(c.seconds)} "
                    f"calls, {run_label(cert)}")


def host_link(cert: Certificate) -> tuple[Tagged, Tagged] | None:
    """Measured host link bandwidths (host -> device, device -> host; bytes crossing per
    second), or ``None`` where the certificate has no host-copy probe."""
    pr = probes_section(cert)
    h = pr.host_copy if pr else None
    if not isinstance(h, HostCopyProbe):
        return None
    src = (f"copy of {h.buffer_bytes} B between pinned host memory and the device, median "
           f"of {len(h.h2d_seconds)} calls, {run_label(cert)}")
    return (measured(h.h2d_bytes_per_second, "B/s", "host -> device " + src),
            measured(h.d2h_bytes_per_second, "B/s", "device -> host " + src))


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
    if v.fixed_share is None or v.fixed_share <= FIXED_SHARE_MAX:
        return v
    growth = None
    if isinstance(w.ladder, Ladder):
        ok = [r for r in w.ladder.rungs if r.median_seconds and r.tokens_per_step]
        growth = ladder_growth([r.tokens_per_step for r in ok],
                               [r.median_seconds for r in ok],
                               [r.timed_seconds for r in ok])
    return bound_verdict(v.fixed_share, v.utilisation_mean, v.utilisation_low_share,
                         v.arithmetic_share, growth)


# --- the certify summary's rows ----------------------------------------------------------


@dataclass(frozen=True)
class DeviceRow:
    figure: str
    measured: Cell
    datasheet: Tagged | None
    of_datasheet: Tagged | None
    max_rel_error: Cell = None


@dataclass(frozen=True)
class WorkloadProbeRow:
    name: str
    mode: str
    at: str                    # where the ladder / checkpoint ran, e.g. "seq=512"
    verdict: Tagged | None
    fixed_share: Cell
    utilisation: Cell
    idle_share: Cell
    flops_at: str              # where MFU is shown (the largest resident point)
    flops: Cell
    mfu_ceiling: Tagged | None
    mfu_datasheet: Tagged | None
    own_gemm: Cell = None      # the step's largest matmul shape, timed alone, / the square


@dataclass(frozen=True)
class WarmupRow:
    name: str
    mode: str
    at: str
    step0: Tagged
    first: tuple[Tagged, ...]  # step 0, then the warm-up steps, one by one
    warm: Tagged
    ratio: Tagged
    until_warm: Tagged
    checkpoint_seconds: Cell = None  # one atomic write of model + optimizer state
    checkpoint_bytes: Cell = None


@dataclass(frozen=True)
class ProbesSummary:
    device: tuple[DeviceRow, ...]
    workloads: tuple[WorkloadProbeRow, ...]
    warmup: tuple[WarmupRow, ...]
    not_executable: tuple[NotExecutable, ...]
    warnings: tuple[str, ...]
    wall_seconds: Tagged | None



def _ratio(num: Tagged | None, den: Tagged | None, what: str) -> Tagged | None:
    if num is None or den is None or not den.value:
        return None
    return module(num.value / den.value, "ratio", f"{what}: measured / datasheet")


def device_rows(cert: Certificate) -> list[DeviceRow]:
    pr = cert.probes
    rows = []
    for d in GEMM_DTYPES:
        g = pr.gemm.get(d) if pr else None
        rate, peak = gemm_rate(cert, d), datasheet_peak(cert, d)
        err = measured(g.max_rel_error, "", f"max |C - C_ref| / max |C_ref|, {g.reference}") \
            if isinstance(g, GemmProbe) else None
        n = f" {g.n}^3" if isinstance(g, GemmProbe) else ""
        rows.append(DeviceRow(f"GEMM {d}{n}", rate if rate else g, peak,
                              _ratio(rate, peak, f"GEMM {d}"), err))
    bw, ds = copy_bandwidth(cert), datasheet_bandwidth(cert)
    rows.append(DeviceRow("copy (read + write)", bw if bw else (pr.device_copy if pr else None),
                          ds, _ratio(bw, ds, "copy")))
    link = host_link(cert)
    host = pr.host_copy if pr else None
    for k, label in ((0, "host -> device (pinned)"), (1, "device -> host (pinned)")):
        if link is not None or isinstance(host, NotExecutable):
            rows.append(DeviceRow(label, link[k] if link else host, None, None))
    starts = startup_seconds(cert)
    for key, label in (("import_torch", "import torch"),
                       ("import_transformers", "import transformers"),
                       ("cuda_init", "CUDA context"), ("process", "child start to ready"),
                       ("first_step", "first step (slowest)")):
        rows.append(DeviceRow(label, starts.get(key) or _startup_gap(pr, key), None, None))
    return rows


def _startup_gap(pr, key: str) -> NotExecutable | None:
    """Why a startup component is missing, when the section says."""
    s = pr.startup if pr else None
    if isinstance(s, NotExecutable):
        return s
    gap = getattr(s, f"{key}_seconds", None)
    return gap if isinstance(gap, NotExecutable) else None


def _mfu(cert: Certificate, w: WorkloadProbes, f: FlopCount | None):
    if f is None or not f.step_seconds or w.gemm_dtype is None:
        return None, None
    rate, peak = gemm_rate(cert, w.gemm_dtype), datasheet_peak(cert, w.gemm_dtype)
    where = (f"{w.name} {w.mode} {w.sweep_param}={f.value}: counted FLOPs {f.flops:.4g} / "
             f"warm step {f.step_seconds:.4g} s")
    ceil = module(mfu(f.flops, f.step_seconds, rate.value), SHARE,
                  f"{where} / measured GEMM {w.gemm_dtype} {rate.value:.4g} FLOP/s "
                  f"({rate.source})") if rate else None
    data = module(mfu(f.flops, f.step_seconds, peak.value), SHARE,
                  f"{where} / datasheet {w.gemm_dtype} {peak.value:.4g} FLOP/s") if peak else None
    return ceil, data


def _fixed_share(lad: Ladder) -> Cell:
    """F / t of the ladder's fit; a share above 100 % is a failed fit, shown as a failed
    measurement with its cause, never as a figure (the ladder note: "do not quote it as a
    measured fixed cost")."""
    if lad.law is None or lad.fixed_share is None:
        return None
    if lad.fixed_share > FIXED_SHARE_MAX:
        return NotExecutable(what="fixed share F / t", failed=True, reason=(
            f"failed fit: F / t = {lad.fixed_share:.0%} > 100% over {len(lad.law.residuals)} "
            "rungs (the step did not grow with the batch beyond its noise); the verdict rests "
            "on the rungs and the utilisation"))
    return module(lad.fixed_share, SHARE, f"ladder t = F + c tokens, R^2 "
                  f"{lad.law.r2:.3f}: F / t(x1)")


def workload_row(cert: Certificate, w: WorkloadProbes) -> WorkloadProbeRow:
    at = f"{w.sweep_param}={w.value}" if w.value is not None else "-"
    lad = w.ladder
    share: Cell = lad
    if isinstance(lad, Ladder):
        share = _fixed_share(lad)
    util, idle = _utilisation_cells(w.utilisation)
    counted = [f for f in w.flops if isinstance(f, FlopCount)]
    top = max(counted, key=lambda f: f.value) if counted else None
    flops: Cell = step_flops(cert, w.name, top.value, w.mode) if top else \
        next((f for f in w.flops if isinstance(f, NotExecutable)), None)
    ceil, data = _mfu(cert, w, top)
    return WorkloadProbeRow(
        name=w.name, mode=w.mode, at=at, verdict=boundness(cert, w.name, w.mode),
        fixed_share=share, utilisation=util, idle_share=idle,
        flops_at=f"{w.sweep_param}={top.value}" if top else "-", flops=flops,
        mfu_ceiling=ceil, mfu_datasheet=data, own_gemm=_own_gemm(cert, w))


def _own_gemm(cert: Certificate, w: WorkloadProbes) -> Cell:
    """The rate of the step's heaviest matmul shape timed alone, as a fraction of the square
    probe of its dtype (the workload's own shapes are timed, not only squares)."""
    g = w.gemm_shapes
    if g is None or isinstance(g, NotExecutable):
        return g
    top = next((r for r in g.timed if r.fraction_of_square is not None), None)
    if top is None:
        return None
    shape = f"{top.batch} x " if top.batch > 1 else ""
    return measured(top.fraction_of_square, "ratio",
                    f"{w.name} {w.mode}: {shape}{top.m} x {top.n} x {top.k} {top.dtype} "
                    f"({top.share_of_step_matmul_flops:.0%} of the step's matmul FLOPs) at "
                    f"{top.flops_per_second:.4g} FLOP/s alone / the square probe, "
                    f"{run_label(cert)}")


def checkpoint_cells(cert: Certificate, name: str, mode: str) -> tuple[Cell, Cell]:
    """(write seconds, bytes), the NotExecutable when the probe could not run, or Nones."""
    w = workload_probes(cert, name, mode)
    if w is None:
        return None, None
    if not isinstance(w.checkpoint, CheckpointProbe):
        return w.checkpoint, w.checkpoint
    return (checkpoint_write_seconds(cert, name, mode),
            checkpoint_bytes(cert, name, mode))


def _utilisation_cells(u) -> tuple[Cell, Cell]:
    if not isinstance(u, UtilisationTrace):
        return u, u
    src = f"{u.source}, {u.kept} samples at {u.hz:g} Hz over warm steps"
    mean = measured(u.mean, SHARE, f"mean, {src}") if u.mean is not None else None
    low = measured(u.low_share, SHARE, f"share at or under 5 %, {src}") \
        if u.low_share is not None else None
    return mean, low


def warmup_row(cert: Certificate, r: WorkloadResult) -> WarmupRow | None:
    """Step 0 against warm at the workload's largest resident point."""
    res = [p for p in r.points if p.usable]
    if not res:
        return None
    p = max(res, key=lambda p: p.value)
    profs = [warmup_profile(k.step0_seconds, k.warmup_seconds, k.timed_seconds,
                            k.timed_step_indices)
             for k in p.children if k.step0_seconds is not None and k.timed_seconds]
    if not profs:
        return None
    prof: WarmupProfile = combine_profiles(profs, p.median_seconds)
    at = f"{r.sweep_param}={p.value}"
    src = f"{r.name} {r.mode} {at}, {prof.children} children, {run_label(cert)}"
    first = tuple(measured(t, "s", f"step {i} (median over children), {src}")
                  for i, t in enumerate(prof.first_seconds[:4]))
    never = prof.steps_until_warm is None
    until: Tagged = module(f"none within {prof.tolerance:.0%}" if never else
                           prof.steps_until_warm, "" if never else "steps",
                           f"afford.fit.time.warmup: first step within {prof.tolerance:.0%} of the "
                           f"warm median (step 0 = 0), median over children, {src}")
    return WarmupRow(
        name=r.name, mode=r.mode, at=at, step0=first[0], first=first,
        warm=measured(prof.warm_seconds, "s", f"warm median, {src}"),
        ratio=module(prof.step0_over_warm, "x", f"step 0 / warm median, {src}"),
        until_warm=until, **dict(zip(("checkpoint_seconds", "checkpoint_bytes"),
                                     checkpoint_cells(cert, r.name, r.mode))))


def summarize_probes(cert: Certificate) -> ProbesSummary:
    pr = cert.probes
    warm = tuple(row for r in cert.workloads if (row := warmup_row(cert, r)) is not None)
    if pr is None:
        return ProbesSummary(device=(), workloads=(), warmup=warm, not_executable=(),
                             warnings=(), wall_seconds=None)
    rows = device_rows(cert)
    wrows = [workload_row(cert, w) for w in pr.workloads]
    cells = [c for r in rows for c in (r.measured, r.max_rel_error)] + \
        [c for r in wrows for c in (r.fixed_share, r.utilisation, r.flops)] + \
        [r.checkpoint_seconds for r in warm]
    ne = tuple({(c.what, c.reason): c for c in cells if isinstance(c, NotExecutable)}.values())
    return ProbesSummary(device=tuple(rows), workloads=tuple(wrows), warmup=warm,
                         not_executable=ne, warnings=tuple(pr.warnings),
                         wall_seconds=measured(pr.wall_seconds, "s", "wall time of the probes "
                                               f"stage, {run_label(cert)}"))


def _jsonable(x):
    """Tagged -> {value, unit, tag}; NotExecutable -> its fields; dataclasses and tuples
    recursively (the ``--json`` document carries provenance too)."""
    if isinstance(x, Tagged):
        return {"value": x.value, "unit": x.unit, "tag": x.tag.value}
    if isinstance(x, NotExecutable):
        return x.model_dump()
    if is_dataclass(x):
        return {f.name: _jsonable(getattr(x, f.name)) for f in fields(x)}
    if isinstance(x, (tuple, list)):
        return [_jsonable(v) for v in x]
    return x


def probes_json(cert: Certificate) -> dict:
    """The summary as one JSON-able document."""
    return _jsonable(summarize_probes(cert))
