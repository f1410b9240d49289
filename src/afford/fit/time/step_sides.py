"""A GPU step as its two sides: the host's issue time and the device's busy time.

The host enqueues a step's kernels asynchronously, so a pipelined warm step costs

    t = max(host, device + gap)

- **device**: the busy time a profiler reads per step (:mod:`afford.measure.device_time`),
  smooth in the shape even where the wall step sits on the launch floor. It is fitted with
  the forms of :mod:`afford.fit.time.step_forms` over the counted work (GEMM and attention FLOPs,
  or the shape), each coefficient bounded by the certificate's measured ceilings (a GEMM
  FLOP costs at least ``1 / gemm_rate``, a counted attention FLOP half that: a causal kernel
  skips the masked half of the square the count assumes): a fit that needs a coefficient
  beyond a bound is refitted at the bound and says so, never used as it was. Its floor is the
  device's own (small kernels that do not fill the card), and the leave-one-out error on the
  busy times chooses the form. A point certify did not profile (its first two children
  settled it in the work regime) enters with the busy time its wall implies
  (:func:`derive_busy`).
- **gap**: what a device-bound step pays beyond its busy time, per kernel boundary: read
  off device-bound points (``(wall - busy) / kernels``, where busy is at least
  ``DEVICE_BOUND`` of the wall) when the certificate has them, else off the trace (the
  median gap between kernels that were queued before the device freed).
- **host**: kernels per step x the issue cost of one kernel, read off the wall time of
  host-bound points (the device busy at most ``HOST_BOUND`` of the step). The floor differs
  from process to process, so a host-bound shape is predicted in a band: where a fresh
  process's issue cost lands 19 times in 20, the prediction interval over those points'
  children (:func:`afford.fit.stats.process_band`), their spread between processes
  moderated by what recorded certificates showed (three children say little of their own
  spread: ``data/process_spread.toml``), never narrower than their lowest and highest.

On a CPU the device is the host: there is no second side, and the model stays one-sided
(:mod:`afford.fit.time.time_fit`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from afford.fit.stats import PROCESS_BAND_LEVEL, SpreadPrior, median, process_band
from afford.fit.time.step_features import FeatureScaling
from afford.fit.time.step_forms import BOUND_SHARE, StepPoint, candidates, choose_form, feature_rows
from afford.schema.time_law import (
    FORMS,
    CandidateFit,
    DeviceLaw,
    HostSide,
    KernelCount,
    SidesModel,
    nearest_kernels,
)

DEVICE_BOUND = 0.9  # busy >= 90 % of the wall step: the device bounds it (gap readable)
HOST_BOUND = 0.9  # busy + gap <= 90 % of the wall step: the host bounds it
BOUND_SLACK = 1e-6  # a coefficient this close to its bound is at it


class SidePoint(StepPoint):
    """A measured GPU shape: its wall step (median of child medians) and the children's
    medians, its device busy time, kernels per step and queued gap (per boundary).
    ``busy_derived``: the busy time was not profiled but read off the wall of a
    device-bound step (:func:`derive_busy`); it is fitted, never judged, and no gap or
    kernel count is read off it."""

    busy_seconds: float
    kernels: float
    gap_seconds: float | None = None
    child_seconds: tuple[float, ...] = ()
    busy_derived: bool = False


def profiled_busy(p: StepPoint) -> float | None:
    """The busy time profiled at a point, or None (a one-sided point, or a derived one)."""
    return None if not isinstance(p, SidePoint) or p.busy_derived else p.busy_seconds


def derive_busy(points: Sequence[StepPoint], work: Sequence[bool]) -> list[StepPoint]:
    """The points with a device side wherever one can be had: a profiled point as it is; an
    unprofiled one in the work regime (``work``: the wall step at least ``WORK_OVER_FLOOR``
    times the workload's floor) with the busy time its wall implies, ``wall - kernels x
    gap``: the device bounds such a step, so its wall is its busy time and the device's cost
    per kernel boundary (:func:`launch_gap` over the profiled points; the kernels of the
    profiled point nearest in tokens, then sequence, as :meth:`SidesModel.kernels_at`).
    Certify profiles no point that its first two children settled in the work regime
    (their medians within 1 %: ``stage_time.settled_by_two``), where a profiled busy time
    reads the wall less the gap to within about 1 % (busy / wall 0.97-1.01 over the
    H200 certificates of 2026-12-06), and a profile of a shape the last child never ran
    needs a longer warm-up than the timing did. Unprofiled floor points stay as they are
    (the two-sided model then needs them all profiled, and is not fitted)."""
    profiled = [p for p in points if profiled_busy(p)]
    if not profiled or len(profiled) == len(points):
        return list(points)
    gap, _ = launch_gap(profiled)
    counts = _kernels(profiled)
    out: list[StepPoint] = []
    for p, w in zip(points, work):
        if isinstance(p, SidePoint) or not w:
            out.append(p)
            continue
        k = nearest_kernels(counts, float(p.tokens), p.seq)
        busy = p.seconds - k * gap
        if busy <= 0:
            out.append(p)
            continue
        out.append(SidePoint(**p.model_dump(), busy_seconds=busy, kernels=k,
                             busy_derived=True))
    return out


def _device_candidates(rows: Sequence[dict], busy: np.ndarray, gemm_rate: float | None,
                       forms: Sequence[str] = FORMS, with_loo: bool = True
                       ) -> dict[str, CandidateFit]:
    sigma = np.full(len(busy), np.nan)  # profiled busy times agree within ~1 % by process
    return candidates(forms, rows, busy, sigma, gemm_rate, with_loo)


def bound_notes(params: dict[str, float], gemm_rate: float | None) -> list[str]:
    """Which coefficients of an unbounded fit are physically impossible: a GEMM or attention
    FLOP cheaper than the measured matrix ceiling allows."""
    if not gemm_rate:
        return []
    out = []
    for key, what, col in (("w_gemm", "GEMM", "gemm_flops"),
                           ("w_attn", "counted attention", "attn_flops")):
        floor = BOUND_SHARE[col] / gemm_rate
        v = params.get(key, 0.0)
        if 0 < v < floor * (1 - BOUND_SLACK):
            out.append(f"the unbounded fit needs a {what} FLOP to cost {v:.3g} s, "
                       f"{floor / v:.3g}x less than the measured ceiling allows "
                       f"({BOUND_SHARE[col]:g} / {gemm_rate:.3g} FLOP/s = {floor:.3g} s): "
                       "refused, refitted at the bound")
    return out


def fit_device(points: Sequence[SidePoint], rows: Sequence[dict],
               gemm_rate: float | None, form: str | None = None) -> DeviceLaw:
    """The busy-time law: each form fitted over the busy times, the one with the smallest
    worst leave-one-out error chosen (``form``: fit that one only, without the check); with
    a ceiling, the bounded fit, and what the unbounded one would have needed."""
    busy = np.array([p.busy_seconds for p in points], dtype=float)
    if form is not None:
        c = _device_candidates(rows, busy, gemm_rate, (form,), with_loo=False)[form]
        return DeviceLaw(form=form, params=c.params, reason="refit", candidates=[c])
    bounds = []
    if gemm_rate:
        free = _device_candidates(rows, busy, None, with_loo=False)
        for c in free.values():
            bounds += [f"{c.form}: {b}" for b in bound_notes(c.params, gemm_rate)]
        bounds.insert(0, f"a GEMM FLOP costs at least 1 / {gemm_rate:.3g} FLOP/s (the "
                         "certificate's measured matrix ceiling), a counted attention FLOP "
                         "half that (a causal kernel skips half the square)")
    cands = _device_candidates(rows, busy, gemm_rate)
    chosen, reason = choose_form(list(cands.values()))
    return DeviceLaw(form=chosen, params=cands[chosen].params, reason=reason,
                     candidates=list(cands.values()), bounds=bounds)


def launch_gap(points: Sequence[SidePoint]) -> tuple[float, str]:
    points = _profiled_first(points)  # a derived busy time implies its gap
    bound = [p for p in points if p.busy_seconds >= DEVICE_BOUND * p.seconds]
    if bound:
        g = median([max(0.0, p.seconds - p.busy_seconds) / p.kernels for p in bound])
        return g, (f"(wall - busy) / kernels at the {len(bound)} device-bound point(s) "
                   f"(busy >= {DEVICE_BOUND:.0%} of the step): "
                   + ", ".join(p.label or "?" for p in bound))
    gaps = [p.gap_seconds for p in points if p.gap_seconds is not None]
    if gaps:
        return median(gaps), ("the profiled trace: the median gap between kernels queued "
                              "before the device freed (no measured point was device-bound)")
    return 0.0, "none measured (no device-bound point, no queued kernel in any trace): 0 s"


def host_side(points: Sequence[SidePoint], gap: float) -> HostSide | None:
    hb = [p for p in points if p.busy_seconds + p.kernels * gap <= HOST_BOUND * p.seconds]
    if not hb:
        return None
    per = [p.seconds / p.kernels for p in hb]
    groups = [[c / p.kernels for c in (p.child_seconds or (p.seconds,))] for p in hb]
    prior = floor_prior()
    return HostSide(issue_seconds=median(per),
                    issue_range=process_band(groups, PROCESS_BAND_LEVEL, prior),
                    band_level=PROCESS_BAND_LEVEL, band_prior=prior.words(),
                    points=[p.label or "?" for p in hb])


def floor_prior() -> SpreadPrior:
    """The spread between processes that recorded certificates' host-bound points showed
    (data/process_spread.toml): three children say little of their own spread."""
    from afford.core.published_constants import load_process_spread

    sd, dof, session = load_process_spread()
    return SpreadPrior(sd=sd, dof=dof, session_sd=session)


def _profiled_first(points: Sequence[SidePoint]) -> list[SidePoint]:
    """The profiled points; where none is (a leave-one-out fit without the only profiled
    one), the derived ones, which carry the profiled neighbour's kernels and gap."""
    return [p for p in points if not p.busy_derived] or list(points)


def _kernels(points: Sequence[SidePoint]) -> list[KernelCount]:
    """The kernel counts profiled (a derived point's count is its neighbour's)."""
    return [KernelCount(tokens=float(p.tokens), seq=p.seq, kernels=float(p.kernels))
            for p in _profiled_first(points)]


def _assemble(points: Sequence[SidePoint], rows: Sequence[dict], gemm_rate: float | None,
              form: str | None = None) -> SidesModel:
    device = fit_device(points, rows, gemm_rate, form)
    gap, gap_source = launch_gap(points)
    host = host_side(points, gap)
    notes = [] if host else ["no measured step was host-bound: the host side was never seen "
                             "above the device's, so the model is the device side alone"]
    return SidesModel(device=device, host=host, kernels=_kernels(points), gap_seconds=gap,
                      gap_source=gap_source, notes=notes)


def _wall_at(m: SidesModel, p: StepPoint, row: dict) -> float:
    return m.predict(row, float(p.tokens), p.seq).seconds


def fit_sides(points: Sequence[SidePoint], scaling: FeatureScaling,
              gemm_rate: float | None = None) -> SidesModel:
    """The two-sided model over measured GPU shapes (module docstring), with its wall-time
    leave-one-out errors (each point predicted by the model refitted without it). Raises
    ``ValueError`` with fewer than three points or a non-positive reading."""
    points = list(points)
    if len(points) < 3:
        raise ValueError(f"{len(points)} point(s): the two-sided model needs at least 3")
    for p in points:
        if not (p.busy_seconds > 0 and p.kernels > 0 and p.seconds > 0) or not all(
                math.isfinite(v) for v in (p.busy_seconds, p.kernels, p.seconds)):
            raise ValueError(f"{p.label}: busy, kernels and seconds must be positive")
    rows = feature_rows(points, scaling)
    model = _assemble(points, rows, gemm_rate)
    loo = []
    for i, p in enumerate(points):
        keep = [j for j in range(len(points)) if j != i]
        sub = _assemble([points[j] for j in keep], [rows[j] for j in keep], gemm_rate,
                        model.device.form)
        loo.append(_wall_at(sub, p, rows[i]) / p.seconds - 1.0)
    return model.model_copy(update={"loo_rel_errors": loo})


def refit_sides(judged: SidesModel, points: Sequence[SidePoint], rows: Sequence[dict],
                gemm_rate: float | None) -> SidesModel:
    """The judged two-sided model over more measured points (its held-out shapes, once they
    have judged it): the device's chosen form refitted, the gap and the host side read again
    over them (more readings of the floor for the band); the form's choice, its
    leave-one-out errors (the device side's uncertainty) and the wall's are the judged
    model's, not computed again."""
    again = _assemble(points, rows, gemm_rate, judged.device.form)
    device = judged.device.model_copy(update={
        "params": again.device.params,
        "reason": f"{judged.device.reason}; refitted over {len(points)} points"})
    return again.model_copy(update={"device": device, "loo_rel_errors": judged.loo_rel_errors,
                                    "notes": judged.notes + again.notes})
