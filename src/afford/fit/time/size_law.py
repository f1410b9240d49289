"""The size law: a training step across model sizes, with the step-time model's physics
(docs/DESIGN.md section 4, the scale ladder; one model at many shapes is
:mod:`afford.fit.time.step_sides`).

The host issues a step's kernels ahead of the device, so a warm step costs
``max(host, device + gap)`` at every size:

- **device busy** = c_kernels x kernels + c_gemm x GEMM FLOPs + c_attn x counted attention
  FLOPs + c_bytes x state bytes. Each coefficient is at least what the certificate's
  measured ceilings allow (:func:`ceilings`): a GEMM FLOP costs at least 1 / the measured
  GEMM rate of the dtype, a counted attention FLOP half that (a causal kernel skips half the
  square the count assumes: ``step_forms.BOUND_SHARE``), a byte of the weights, gradients
  and optimizer moments at least 1 / the measured copy bandwidth (the optimizer step reads
  each at least once). A fit that needs a coefficient below its bound is refitted at the
  bound, and the notes say what the free fit wanted (``step_sides.bound_notes``): such a
  coefficient would let a large size run above the measured GEMM rate.
- **kernels** per step grow with depth, not width: ``k0 + k1 L`` over the profiled sizes.
- **host** = kernels x the issue cost of one kernel, read off host-bound sizes, and **gap**
  per kernel boundary off device-bound ones (``step_sides.host_side`` and ``launch_gap``, the same
  rules as the one-model model).

Profiled sizes (a GPU certificate that profiled its sizes): the device side is fitted to the
busy times, which grow smoothly with the work even where the wall step sits on the launch
floor, so floor-dominated small sizes cannot flatten the extrapolation. Wall times only (an
older certificate, a CPU): ``t = max(h0 + h1 L, busy)``, fitted by trying each split of the
sizes, sorted by their steps, into a host side and a device side: sizes on the floor bound
the launches there and say nothing of the work.

Where the sizes leave the work's split among the columns open (fewer sizes than columns;
GEMM FLOPs and state bytes both grow as L d^2), a small ridge (``step_forms.RIDGE``) pulls
each open coefficient to its bound: the data decide what they can, the ceilings the rest.

Judged by prediction error only: each size's leave-one-out error, and the largest size held
out (fitted on the others, predicted at the factor stated): the extrapolation the ladder
makes, checked once where it can be.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from afford.fit.stats import median
from afford.fit.time.size_work import ReadSize, from_sizes
from afford.fit.time.step_forms import BOUND_SHARE, RIDGE, weights
from afford.fit.time.step_sides import (
    HOST_BOUND,
    SidePoint,
    bound_notes,
    host_side,
    launch_gap,
)
from afford.schema.sizes_section import (
    COLUMN_WORDS,
    WORK_COLUMNS,
    FamilyScaling,
    HeldOut,
    SizeFit,
    SizeLaw,
    SizePoint,
    SizeWork,
)

AT_BOUND = 1e-6  # a coefficient this close (relative) to its bound is at it


@dataclass(frozen=True)
class SizeObs:
    """One measured size: its work, its wall step (median of child medians) and children's
    medians, and where profiled its device busy time and queued gap (its kernels ride in
    ``work``)."""

    label: str
    work: SizeWork
    seconds: float
    child_seconds: tuple[float, ...] = ()
    busy_seconds: float | None = None
    gap_seconds: float | None = None

    @property
    def profiled(self) -> bool:
        return bool(self.busy_seconds and self.work.kernels)


def ceilings(gemm_rate: float | None, bandwidth: float | None) -> dict[str, float]:
    """Each coefficient's lower bound from the measured ceilings (0 where none is measured)."""
    lb = dict.fromkeys(WORK_COLUMNS, 0.0)
    if gemm_rate:
        lb["gemm_flops"] = BOUND_SHARE["gemm_flops"] / gemm_rate
        lb["attn_flops"] = BOUND_SHARE["attn_flops"] / gemm_rate
    if bandwidth:
        lb["state_bytes"] = 1.0 / bandwidth
    return lb


def _columns(obs: Sequence[SizeObs], profiled: bool) -> list[str]:
    return [c for c in WORK_COLUMNS if profiled or c != "kernels"]


def _matrix(works: Sequence[SizeWork], columns: Sequence[str]) -> np.ndarray:
    return np.array([[w.column(c) for c in columns] for w in works], dtype=float)


def fit_device(X: np.ndarray, y: np.ndarray, lb: np.ndarray, w: np.ndarray | None = None,
               carried: Mapping[int, float] | None = None,
               prior: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """argmin sum(w (X c / y - 1))^2 + RIDGE^2 |P c|^2 subject to c >= lb, in columns
    normalised by their largest value, P the prior (:func:`prior_rows`; ``prior``: each
    column's reference cost and group, default its bound, one group); ``carried``: column
    index -> a coefficient fixed from elsewhere. A column zero at every size keeps its bound."""
    from scipy import optimize  # here: reading a stored law needs no scipy

    w = np.ones(len(y)) if w is None else w
    carried = dict(carried or {})
    c = lb.astype(float).copy()
    for j, v in carried.items():
        c[j] = v
    if len(y) == 0:
        return c
    free = [j for j in range(X.shape[1]) if j not in carried and np.max(np.abs(X[:, j])) > 0]
    if not free:
        return c
    rest = X @ np.where([j in free for j in range(X.shape[1])], 0.0, c)
    ys = float(np.max(y))
    scale = np.max(np.abs(X[:, free]), axis=0)
    Xn = X[:, free] / scale
    lbn = lb[free] * scale / ys
    ref, group = prior if prior is not None else (lb, np.zeros(len(lb)))
    P = prior_rows(ref[free] * scale / ys, group[free])
    A = np.vstack([Xn * (w / (y / ys))[:, None], RIDGE * P, 1e-9 * np.eye(len(free))])
    b = np.concatenate([w * (1.0 - rest / y), np.zeros(len(P) + len(free))])
    got = optimize.lsq_linear(A, b, bounds=(lbn, np.full(len(free), np.inf)), method="bvls").x
    c[free] = np.maximum(got * ys / scale, lb[free])
    return c


def prior_rows(ref: np.ndarray, group: np.ndarray) -> np.ndarray:
    """The prior that decides what the sizes leave open, over normalised coefficients: the
    columns of a group run at one multiple of their reference costs (their ceilings' bounds:
    an open split keeps the ceilings' proportions), and a column without a reference cost
    (kernels) is pulled to 0. Rows P, P c = 0 wanted."""
    rows = []
    first: dict[float, int] = {}
    for j in range(len(ref)):
        r = np.zeros(len(ref))
        if ref[j] <= 0:
            r[j] = 1.0
        elif group[j] not in first:
            first[group[j]] = j
            continue
        else:
            k = first[group[j]]
            m = min(ref[j], ref[k])
            r[j], r[k] = m / ref[j], -m / ref[k]
        rows.append(r)
    return np.array(rows).reshape(len(rows), len(ref))


def _prior(cols: Sequence[str], lb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reference costs and groups: the bounds, all one group, where a GEMM rate is measured;
    without one, a counted attention FLOP costs half a GEMM FLOP (one group) and the state
    bytes keep their own."""
    if any(lb[cols.index(c)] > 0 for c in ("gemm_flops", "attn_flops") if c in cols):
        return lb, np.zeros(len(cols))
    ref = np.array([BOUND_SHARE.get(c, lb[i]) for i, c in enumerate(cols)], dtype=float)
    return ref, np.array([0.0 if c in BOUND_SHARE else 1.0 for c in cols])


def _host_line(L: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """h0 + h1 L through host-bound steps, both >= 0, by relative least squares; one depth:
    the median step, h1 = 0."""
    from scipy import optimize

    if len(set(L.tolist())) < 2:
        return float(median(list(y))), 0.0
    A = np.stack([np.ones(len(L)), L], axis=1) / y[:, None]
    h = optimize.lsq_linear(A, np.ones(len(y)), bounds=(0.0, np.inf)).x
    return float(h[0]), float(h[1])


def _kernel_line(obs: Sequence[SizeObs]) -> tuple[float, float]:
    """kernels = k0 + k1 L, both >= 0 (absolute least squares); one depth: the median."""
    from scipy import optimize

    L = np.array([o.work.L for o in obs], dtype=float)
    K = np.array([o.work.kernels for o in obs], dtype=float)
    if len(set(L.tolist())) < 2:
        return float(median(list(K))), 0.0
    k = optimize.lsq_linear(np.stack([np.ones(len(L)), L], axis=1), K,
                            bounds=(0.0, np.inf)).x
    return float(k[0]), float(k[1])


def _sigma(o: SizeObs) -> float:
    """Half the children's relative spread: the step's uncertainty (step_forms.weights)."""
    kids = [k for k in o.child_seconds if k > 0]
    return (max(kids) - min(kids)) / (2 * o.seconds) if len(kids) > 1 else float("nan")


@dataclass(frozen=True)
class _Setup:
    gemm_rate: float | None
    bandwidth: float | None
    bytes_per_param: float
    batch: int
    seq: int
    carried: Mapping[str, float]
    kernel_law: tuple[float, float] | None


def _law(obs: Sequence[SizeObs], st: _Setup) -> SizeLaw:
    """The law over ``obs`` (profiled where every size is), without its checks."""
    profiled = all(o.profiled for o in obs)
    cols = _columns(obs, profiled)
    lb_all = ceilings(st.gemm_rate, st.bandwidth)
    lb = np.array([lb_all[c] for c in cols])
    carried = {cols.index(c): v for c, v in st.carried.items() if c in cols}
    X = _matrix([o.work for o in obs], cols)
    common = dict(bounds={c: lb_all[c] for c in cols}, carried=sorted(c for c in st.carried
                                                                      if c in cols),
                  state_bytes_per_param=st.bytes_per_param, gemm_rate=st.gemm_rate,
                  bandwidth=st.bandwidth, batch=st.batch, seq=st.seq, points=[],
                  params_range=(min(o.work.params for o in obs),
                                max(o.work.params for o in obs)))
    if profiled:
        return _profiled(obs, st, cols, X, lb, carried, common)
    return _wall(obs, cols, X, lb, carried, common)


def _profiled(obs, st: _Setup, cols, X, lb, carried, common) -> SizeLaw:
    busy = np.array([o.busy_seconds for o in obs], dtype=float)
    c = fit_device(X, busy, lb, carried=carried, prior=_prior(cols, lb))
    k0, k1 = st.kernel_law or _kernel_line(obs)
    pts = [SidePoint(batch=st.batch, seq=st.seq, tokens=st.batch * st.seq, seconds=o.seconds,
                     busy_seconds=o.busy_seconds, kernels=o.work.kernels,
                     gap_seconds=o.gap_seconds, child_seconds=o.child_seconds, label=o.label)
           for o in obs]
    gap, gap_source = launch_gap(pts)
    host = host_side(pts, gap)
    notes = [f"gap per kernel boundary: {gap_source}"]
    if host is None:
        notes.append("no size was host-bound (busy + gap above "
                     f"{HOST_BOUND:.0%} of every step): the host side was never seen above "
                     "the device's, so the law is the device side alone")
    return SizeLaw(sides="profiled", coefficients=dict(zip(cols, c.tolist())),
                   at_bound=_at_bound(cols, c, lb), kernels_fixed=k0, kernels_per_layer=k1,
                   issue_seconds=host.issue_seconds if host else None,
                   issue_range=host.issue_range if host else None, gap_seconds=gap,
                   notes=notes, **common)


def _wall(obs, cols, X, lb, carried, common) -> SizeLaw:
    """Each split of the sizes (sorted by step) into host side and device side; the one
    whose max-form predictions miss the steps least (weighted relative errors)."""
    y = np.array([o.seconds for o in obs], dtype=float)
    L = np.array([o.work.L for o in obs], dtype=float)
    w = weights(np.array([_sigma(o) for o in obs]))
    order = list(np.argsort(y))
    best = None
    for k in range(len(y) + 1):
        hi, di = order[:k], order[k:]
        host = _host_line(L[hi], y[hi]) if hi else None
        c = fit_device(X[di], y[di], lb, w[di], carried, _prior(cols, lb))
        pred = X @ c if host is None else np.maximum(host[0] + host[1] * L, X @ c)
        cost = float(np.sum((w * (pred / y - 1.0)) ** 2))
        if best is None or cost < best[0] - 1e-12:  # a near-tie keeps fewer host sizes
            best = (cost, k, host, c)
    _, k, host, c = best
    notes = []
    if k == len(y):
        notes.append("no size left the launch floor: the device side is its ceilings only, "
                     "a lower bound beyond the sizes measured")
    return SizeLaw(sides="wall", coefficients=dict(zip(cols, c.tolist())),
                   at_bound=_at_bound(cols, c, lb), host_fixed=host[0] if host else None,
                   host_per_layer=host[1] if host else None, notes=notes, **common)


def _at_bound(cols: Sequence[str], c: np.ndarray, lb: np.ndarray) -> list[str]:
    return [col for col, v, b in zip(cols, c, lb) if b > 0 and v <= b * (1 + AT_BOUND)]


def _unseen(o: SizeObs) -> SizeWork:
    """A size as the law would see one it never measured: its kernels from the law."""
    return o.work.model_copy(update={"kernels": None})


def _loo(obs: Sequence[SizeObs], st: _Setup) -> list[float | None]:
    if len(obs) < 3:
        return [None] * len(obs)
    out: list[float | None] = []
    for i, o in enumerate(obs):
        sub = _law([x for j, x in enumerate(obs) if j != i], st)
        out.append(sub.predict(_unseen(o)).seconds / o.seconds - 1.0)
    return out


def _held_out(obs: Sequence[SizeObs], st: _Setup) -> HeldOut | None:
    top = max(obs, key=lambda o: o.work.params)
    rest = [o for o in obs if o is not top]
    if len(rest) < 2 or max(o.work.params for o in rest) >= top.work.params:
        return None
    pred = _law(rest, st).predict(_unseen(top)).seconds
    return HeldOut(label=top.label, params=top.work.params,
                   factor=top.work.params / max(o.work.params for o in rest),
                   measured_seconds=top.seconds, predicted_seconds=pred,
                   rel_error=pred / top.seconds - 1.0)


def _refused(obs: Sequence[SizeObs], st: _Setup, law: SizeLaw) -> list[str]:
    """What the fit without the ceilings wanted, where it is impossible."""
    if not law.at_bound:
        return []
    free = _law(obs, replace(st, gemm_rate=None, bandwidth=None)).coefficients
    out = bound_notes({"w_gemm": free.get("gemm_flops", 0.0),
                       "w_attn": free.get("attn_flops", 0.0)}, st.gemm_rate)
    v, floor = free.get("state_bytes", 0.0), law.bounds.get("state_bytes", 0.0)
    if floor and 0 < v < floor * (1 - AT_BOUND):
        out.append(f"the unbounded fit needs a {COLUMN_WORDS['state_bytes']} to cost {v:.3g} "
                   f"s, {floor / v:.3g}x less than the measured bandwidth allows "
                   f"(1 / {st.bandwidth:.3g} B/s): refused, refitted at the bound")
    return out


def fit_size_law(obs: Sequence[SizeObs], *, batch: int, seq: int, gemm_rate: float | None,
                 bandwidth: float | None, bytes_per_param: float,
                 carried: Mapping[str, float] | None = None,
                 kernel_law: tuple[float, float] | None = None) -> SizeLaw:
    """The size law over ``obs`` (module docstring), with each size's leave-one-out error and
    the largest held out. ``carried``: coefficients fixed from another law (a family read at
    one size takes this box's per-kernel and per-byte costs); ``kernel_law``: (k0, k1)
    given rather than fitted. Raises ``ValueError`` with fewer than two sizes or a
    non-positive step."""
    obs = list(obs)
    if len(obs) < 2:
        raise ValueError(f"{len(obs)} size(s): a size law needs at least 2")
    if any(not (o.seconds > 0) for o in obs):
        raise ValueError("every size's step must be positive")
    st = _Setup(gemm_rate, bandwidth, bytes_per_param, batch, seq, dict(carried or {}),
                kernel_law)
    law = _law(obs, st)
    loo = _loo(obs, st)
    points = [_fit_point(law, o, e) for o, e in zip(obs, loo)]
    notes = list(law.notes) + _refused(obs, st, law) + _coverage(obs, law, st)
    return law.model_copy(update={"points": points, "held_out": _held_out(obs, st),
                                  "notes": notes})


def _fit_point(law: SizeLaw, o: SizeObs, loo: float | None) -> SizeFit:
    p = law.predict(o.work)
    return SizeFit(label=o.label, params=o.work.params, measured_seconds=o.seconds,
                   predicted_seconds=p.seconds, loo_rel_error=loo, regime=p.regime,
                   busy_seconds=o.busy_seconds,
                   predicted_busy_seconds=p.busy if o.busy_seconds else None)


def _coverage(obs: Sequence[SizeObs], law: SizeLaw, st: _Setup) -> list[str]:
    out = []
    if not st.gemm_rate:
        out.append("no measured GEMM rate: the GEMM and attention coefficients are bounded "
                   "by 0 only")
    if len({o.work.L for o in obs}) < 2 and law.sides == "profiled" and not st.kernel_law:
        out.append("one depth measured: kernels per step are held at the count measured")
    if len(obs) < 3:
        out.append(f"{len(obs)} sizes: no leave-one-out check and no size held out")
    return out


# ---- a certificate's sizes -------------------------------------------------------------------


def size_observations(sizes: Sequence[SizePoint], scaling: FamilyScaling,
                      bytes_per_param: float) -> list[SizeObs]:
    """The resident sizes as the law sees them: FLOPs counted at each where counted, else
    the family's scaling at its width and depth; the profiled device side where read."""
    out = []
    for z in sizes:
        p = z.point
        if not (p.usable and z.params):
            continue
        f = p.flops
        w = scaling.work(z.d, z.L, bytes_per_param, float(z.params))
        if f is not None and f.gemm:
            w = w.model_copy(update={"gemm_flops": f.gemm, "attn_flops": f.attn or 0.0})
        w = w.model_copy(update={"kernels": p.kernels_per_step})
        out.append(SizeObs(label=z.spec, work=w, seconds=float(p.median_seconds),
                           child_seconds=tuple(p.child_medians),
                           busy_seconds=p.device_busy_seconds,
                           gap_seconds=p.device_gap_seconds))
    return out


def fit_sizes_section(workload: str, sizes: Sequence[SizePoint], *, batch: int, seq: int,
                      gemm_rate: float | None, bandwidth: float | None,
                      bytes_per_param: float
                      ) -> tuple[SizeLaw | None, FamilyScaling | None, list[str]]:
    """The family's scaling and the size law over a certificate's sizes (resident ones;
    each excluded size named with its reason); ``None`` for what cannot be fitted, with
    the reason in the notes."""
    used = [z for z in sizes if z.point.usable and z.params]
    notes = [f"{z.spec} left out: {z.point.excluded_reason or 'not measured'}"
             for z in sizes if z not in used]
    if len(used) < 2:
        return None, None, notes + [f"only {len(used)} resident size(s): no size law"]
    scaling = from_sizes(workload, [ReadSize(z.d, z.L, z.H, float(z.params),
                                             z.point.flops.gemm if z.point.flops else None,
                                             z.point.flops.attn if z.point.flops else None)
                                    for z in used], batch, seq)
    obs = size_observations(used, scaling, bytes_per_param)
    law = fit_size_law(obs, batch=batch, seq=seq, gemm_rate=gemm_rate, bandwidth=bandwidth,
                       bytes_per_param=bytes_per_param)
    return law, scaling, notes
