"""Plans with N devices: how a step and its throughput change with the number of devices.

Pure functions of a certificate's ``distributed`` section (no I/O, no device work), for
``afford plan --devices N`` and ``afford ladder --devices N``.

On the node that was measured (``1 <= N <=`` the largest world size measured), the answer
comes from the measured data-parallel scaling of the tinylm step (weak scaling: each
device keeps its batch): MEASURED where that world size was run, FITTED from the world-size
law ``t(w) = A + B * 2(w-1)/w`` (:mod:`afford.fit.dp_scaling`) where it was not.

Beyond the node there is nothing measured. The projection is the ring model (REFERENCES.md,
"Collectives"; Patarasuk & Yuan 2009)::

    t(N) = t_compute + 2 (N-1) a + 2 ((N-1)/N) G / B

with ``t_compute`` the measured one-device step without the gradient all-reduce (DDP's
``no_sync()`` step; the synced step if that is missing), ``G`` the gradient bytes of one
replica, ``B`` a *stated* inter-node bandwidth and ``a`` a per-hop latency. A ring over
several nodes runs at the speed of its slowest link, the inter-node one; no overlap of the
all-reduce with backward is assumed, so the projection is an upper bound on the step. It is
tagged MODULE, its inputs ASSUMED, and it is never presented as measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from afford.errors import InputError
from afford.fit.collectives import ring_allreduce_seconds, ring_parameters
from afford.fit.dp_scaling import efficiency
from afford.provenance import Tag, Tagged, assumed, fitted, measured, module
from afford.schema.distributed import DistributedSection, DPRun, DPStrategy


@dataclass(frozen=True)
class DeviceScaling:
    """The measured workload at ``devices`` devices, every figure tagged."""

    devices: int
    strategy: str
    scope: Literal["measured", "fitted", "projected"]
    step_seconds: Tagged
    step_ratio: Tagged             # t(N) / t(1): multiply a one-device step time by this
    throughput_multiplier: Tagged  # N t(1) / t(N): multiply one-device tokens/s by this
    efficiency: Tagged             # t(1) / t(N)
    assumptions: tuple[Tagged, ...] = ()
    notes: tuple[str, ...] = ()


def strategy_result(section: DistributedSection, strategy: str = "ddp") -> DPStrategy:
    for s in section.data_parallel:
        if s.strategy == strategy:
            return s
    have = ", ".join(s.strategy for s in section.data_parallel) or "none"
    raise InputError(f"the certificate's distributed section has no {strategy} scaling "
                     f"(it has: {have})")


def _run_at(s: DPStrategy, w: int) -> DPRun | None:
    return next((r for r in s.runs if r.world_size == w), None)


def measured_devices(section: DistributedSection, strategy: str = "ddp") -> int:
    """The largest world size whose step was measured on this node (0 if none)."""
    return max((r.world_size for r in strategy_result(section, strategy).runs), default=0)


def _where(section: DistributedSection, s: DPStrategy, w: int) -> str:
    r = _run_at(s, w) or s.runs[0]
    shape = ",".join(f"{k}{v}" for k, v in r.shape.items())
    return (f"tinylm {shape} {r.mode} under {s.strategy} at world size {w} "
            f"({section.backend}, max over ranks of each rank's median step)")


def _step_at(section: DistributedSection, s: DPStrategy, w: int) -> Tagged:
    run = _run_at(s, w)
    if run is not None:
        return measured(run.step_seconds, "s", _where(section, s, w))
    if s.law is None:
        raise InputError(f"{s.strategy}: world size {w} was not measured and no world-size "
                         "law was fitted (fewer than two world sizes ran)")
    top = max(s.law.world_sizes)
    return fitted(s.law.predict(w), "s", f"{s.strategy} world-size law {s.law.describe()}",
                  extrapolated=not (min(s.law.world_sizes) <= w <= top))


def _derived(n: int, strategy: str, scope, t1: Tagged, tn: Tagged, assumptions=(), notes=()
             ) -> DeviceScaling:
    # a ratio of two measured steps is a measured property of the node; a fitted or
    # projected step carries its own tag through
    tag = Tag.MEASURED if t1.tag == tn.tag == Tag.MEASURED else tn.tag
    src = f"from t(1) [{t1.tag.value}] and t({n}) [{tn.tag.value}]"
    extra = tn.extrapolated

    def make(v: float, unit: str, what: str) -> Tagged:
        return Tagged(value=v, unit=unit, tag=tag, source=f"{what} {src}", extrapolated=extra)

    eff = efficiency(float(t1.value), float(tn.value))
    return DeviceScaling(
        devices=n, strategy=strategy, scope=scope, step_seconds=tn,
        step_ratio=make(float(tn.value) / float(t1.value), "x", "t(N)/t(1)"),
        throughput_multiplier=make(n * eff, "x", "N t(1)/t(N)"),
        efficiency=make(eff, "ratio", "t(1)/t(N)"), assumptions=tuple(assumptions),
        notes=tuple(notes))


def on_node(section: DistributedSection, n: int, strategy: str = "ddp") -> DeviceScaling:
    """The measured scaling at ``n`` devices on the measured node (MEASURED or FITTED)."""
    s = strategy_result(section, strategy)
    top = measured_devices(section, strategy)
    if not 1 <= n <= max(top, section.local_world_size):
        raise InputError(f"--devices {n}: this node measured {strategy} at 1..{top} devices; "
                         "beyond the node a projection needs a stated inter-node bandwidth")
    if _run_at(s, 1) is None:
        raise InputError(f"{strategy}: the one-device step was not measured; no scaling")
    t1, tn = _step_at(section, s, 1), _step_at(section, s, n)
    scope = "measured" if tn.tag == Tag.MEASURED else "fitted"
    notes = [] if section.status == "complete" else [
        f"the distributed run was partial: {section.error}"]
    return _derived(n, strategy, scope, t1, tn, notes=notes)


def _latency(section: DistributedSection, given: float | None) -> Tagged:
    if given is not None:
        return assumed(given, "s", "inter-node per-hop latency as stated by the user")
    fit = next((f for f in (section.collectives.fits if section.collectives else [])
                if f.op == "all_reduce"), None)
    ring = ring_parameters(fit) if fit else None
    if ring is not None:
        return assumed(max(ring[0], 0.0), "s", "inter-node per-hop latency taken as the "
                       "intra-node one fitted here (optimistic: network hops are slower)")
    return assumed(0.0, "s", "no per-hop latency measured (world size 1) or stated: 0 "
                   "assumed, which is optimistic")


def beyond_node(section: DistributedSection, n: int, *, inter_node_bytes_per_second: float,
                inter_node_latency_seconds: float | None = None, strategy: str = "ddp"
                ) -> DeviceScaling:
    """The ring-model projection at ``n`` devices (MODULE from ASSUMED inputs)."""
    if n < 1 or not inter_node_bytes_per_second > 0:
        raise InputError("a projection needs n >= 1 and a positive inter-node bandwidth")
    s = strategy_result(section, strategy)
    one = _run_at(s, 1)
    if one is None:
        raise InputError(f"{strategy}: the one-device step was not measured; no projection")
    bw = assumed(inter_node_bytes_per_second, "B/s", "inter-node bandwidth as stated")
    lat = _latency(section, inter_node_latency_seconds)
    compute = one.nosync_step_seconds if one.nosync_step_seconds is not None else one.step_seconds
    what = "no_sync step" if one.nosync_step_seconds is not None else "synced step"
    comm = ring_allreduce_seconds(n, one.grad_bytes, float(lat.value), inter_node_bytes_per_second)
    tn = module(compute + comm, "s", f"plan.devices.beyond_node: measured one-device "
                f"{what} {compute:.4g} s + ring all-reduce of {one.grad_bytes} B over {n} "
                f"devices at {inter_node_bytes_per_second:.3g} B/s (ASSUMED), no overlap")
    t1 = measured(one.step_seconds, "s", _where(section, s, 1))
    notes = ("projection beyond the measured node: ring model, inter-node bandwidth stated, "
             "not measured; an upper bound on the step (no overlap with backward)",)
    return _derived(n, strategy, "projected", t1, tn, assumptions=(bw, lat), notes=notes)


def scaling(section: DistributedSection, n: int, *, strategy: str = "ddp",
            inter_node_bytes_per_second: float | None = None,
            inter_node_latency_seconds: float | None = None) -> DeviceScaling:
    """On the node when ``n`` fits it, else the projection (which then needs a bandwidth)."""
    if n <= max(measured_devices(section, strategy), section.local_world_size):
        return on_node(section, n, strategy)
    if inter_node_bytes_per_second is None:
        raise InputError(f"--devices {n} is beyond the measured node "
                         f"({measured_devices(section, strategy)} devices): state the "
                         "inter-node bandwidth (e.g. 25GB/s) to project with the ring model")
    return beyond_node(section, n, inter_node_bytes_per_second=inter_node_bytes_per_second,
                       inter_node_latency_seconds=inter_node_latency_seconds,
                       strategy=strategy)


def scale_step(single_step: Tagged, s: DeviceScaling) -> Tagged:
    """A one-device step time of any workload, carried to ``s.devices`` devices with the
    measured step ratio (MODULE). The ratio was measured on tinylm: a model whose
    communication-to-compute ratio differs scales differently; the source says so."""
    return module(float(single_step.value) * float(s.step_ratio.value), "s",
                  f"one-device step [{single_step.tag.value}] x step ratio at {s.devices} "
                  f"devices [{s.step_ratio.tag.value}, {s.scope}, measured on tinylm]")


def ring_step_seconds(compute_seconds: Tagged, grad_bytes: int, n: int, *,
                      latency_seconds: float, bandwidth_bytes_per_second: float,
                      bandwidth_source: str) -> Tagged:
    """Any model's step at ``n`` devices by the ring model with no overlap:
    ``t_compute + 2(n-1) a + 2((n-1)/n) G / B`` (MODULE; an upper bound)."""
    comm = ring_allreduce_seconds(n, grad_bytes, latency_seconds, bandwidth_bytes_per_second)
    return module(float(compute_seconds.value) + comm, "s",
                  f"ring model: compute [{compute_seconds.tag.value}] + all-reduce of "
                  f"{grad_bytes} B over {n} devices at {bandwidth_bytes_per_second:.3g} B/s "
                  f"({bandwidth_source}), no overlap")
