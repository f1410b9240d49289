"""A certificate's ``distributed`` section read into tagged figures: the node's collectives
and the data-parallel scaling of the tinylm step on it.

Answers come from ``cert.distributed`` (written by ``torchrun ... afford certify
--distributed``); ``None`` when the certificate has no such section. On the node that was
measured (``1 <= N <=`` the largest world size measured) the scaling is MEASURED where that
world size was run, FITTED from the world-size law ``t(w) = A + B * 2(w-1)/w``
(:mod:`afford.fit.nodes.dp_scaling`) where it was not. Projections beyond the measured node are
plans (:mod:`afford.planning.scaling`): they need a stated inter-node bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from afford.core.errors import InputError
from afford.core.provenance import Tag, Tagged, fitted, measured, run_label
from afford.fit.nodes.dp_scaling import efficiency
from afford.schema.cert import Certificate
from afford.schema.distributed_section import DistributedSection, DPRun, DPStrategy


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


def run_at(s: DPStrategy, w: int) -> DPRun | None:
    return next((r for r in s.runs if r.world_size == w), None)


def measured_devices(section: DistributedSection, strategy: str = "ddp") -> int:
    """The largest world size whose step was measured on this node (0 if none)."""
    return max((r.world_size for r in strategy_result(section, strategy).runs), default=0)


def where(section: DistributedSection, s: DPStrategy, w: int) -> str:
    r = run_at(s, w) or s.runs[0]
    shape = ",".join(f"{k}{v}" for k, v in r.shape.items())
    return (f"tinylm {shape} {r.mode} under {s.strategy} at world size {w} "
            f"({section.backend}, max over ranks of each rank's median step)")


def _step_at(section: DistributedSection, s: DPStrategy, w: int) -> Tagged:
    run = run_at(s, w)
    if run is not None:
        return measured(run.step_seconds, "s", where(section, s, w))
    if s.law is None:
        raise InputError(f"{s.strategy}: world size {w} was not measured and no world-size "
                         "law was fitted (fewer than two world sizes ran)")
    top = max(s.law.world_sizes)
    return fitted(s.law.predict(w), "s", f"{s.strategy} world-size law {s.law.describe()}",
                  extrapolated=not (min(s.law.world_sizes) <= w <= top))


def derived(n: int, strategy: str, scope, t1: Tagged, tn: Tagged, assumptions=(), notes=()
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
    if run_at(s, 1) is None:
        raise InputError(f"{strategy}: the one-device step was not measured; no scaling")
    t1, tn = _step_at(section, s, 1), _step_at(section, s, n)
    scope = "measured" if tn.tag == Tag.MEASURED else "fitted"
    notes = [] if section.status == "complete" else [
        f"the distributed run was partial: {section.error}"]
    return derived(n, strategy, scope, t1, tn, notes=notes)


def _dist(cert: Certificate):
    return cert.distributed


def dp_scaling(cert: Certificate, n: int, strategy: str = "ddp") -> Tagged | None:
    """Throughput multiplier at ``n`` devices on this node, ``n t(1) / t(n)`` of the tinylm
    step under ``strategy`` (weak scaling). From MEASURED steps where ``n`` ran, FITTED from
    the world-size law otherwise; ``None`` without a distributed section."""
    d = _dist(cert)
    if d is None:
        return None
    return on_node(d, n, strategy).throughput_multiplier


def busbw_peak(cert: Certificate, op: str = "all_reduce") -> Tagged | None:
    """The largest bus bandwidth of ``op`` over the measured sizes (nccl-tests' busbw),
    MEASURED; ``None`` at world size 1 (no bus traffic)."""
    d = _dist(cert)
    c = d.collectives if d else None
    pts = [p for p in (c.points if c else []) if p.op == op and p.busbw_bytes_per_second]
    if not pts:
        return None
    best = max(pts, key=lambda p: p.busbw_bytes_per_second)
    return measured(best.busbw_bytes_per_second, "B/s", f"{op} busbw at {best.bytes} B on "
                    f"{c.world_size} ranks ({c.backend}), {run_label(cert)}")
