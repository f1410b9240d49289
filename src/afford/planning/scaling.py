"""Plans with N devices: how a step and its throughput change with the number of devices.

Pure functions of a certificate's ``distributed`` section (no I/O, no device work). No
command plans with N devices yet; ``afford certify --distributed`` shows the scaling on
the measured node.

On the node that was measured (``1 <= N <=`` the largest world size measured), the answer
is read off the certificate (:func:`afford.figures.distributed_figures.on_node`): the measured
data-parallel scaling of the tinylm step (weak scaling: each device keeps its batch),
MEASURED where that world size was run, FITTED from the world-size law
``t(w) = A + B * 2(w-1)/w`` (:mod:`afford.fit.nodes.dp_scaling`) where it was not.

Beyond the node there is nothing measured. The projection is the ring model (docs/REFERENCES.md,
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

from afford.core.errors import InputError
from afford.core.provenance import Tagged, assumed, measured, module
from afford.figures.distributed_figures import (
    DeviceScaling,
    derived,
    measured_devices,
    on_node,
    run_at,
    strategy_result,
    where,
)
from afford.fit.nodes.collectives_fit import ring_allreduce_seconds, ring_parameters
from afford.schema.distributed_section import DistributedSection


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
    one = run_at(s, 1)
    if one is None:
        raise InputError(f"{strategy}: the one-device step was not measured; no projection")
    bw = assumed(inter_node_bytes_per_second, "B/s", "inter-node bandwidth as stated")
    lat = _latency(section, inter_node_latency_seconds)
    compute = one.nosync_step_seconds if one.nosync_step_seconds is not None else one.step_seconds
    what = "no_sync step" if one.nosync_step_seconds is not None else "synced step"
    comm = ring_allreduce_seconds(n, one.grad_bytes, float(lat.value), inter_node_bytes_per_second)
    tn = module(compute + comm, "s", f"plan.scaling.beyond_node: measured one-device "
                f"{what} {compute:.4g} s + ring all-reduce of {one.grad_bytes} B over {n} "
                f"devices at {inter_node_bytes_per_second:.3g} B/s (ASSUMED), no overlap")
    t1 = measured(one.step_seconds, "s", where(section, s, 1))
    notes = ("projection beyond the measured node: ring model, inter-node bandwidth stated, "
             "not measured; an upper bound on the step (no overlap with backward)",)
    return derived(n, strategy, "projected", t1, tn, assumptions=(bw, lat), notes=notes)


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
