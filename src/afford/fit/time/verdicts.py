"""Is a step launch-bound, compute-bound or memory-bound? Pure functions over probe figures.

The evidence (docs/DESIGN.md section 4, "Batch ladders"):

- the batch ladder: step seconds at batch x1, x2, x4 of one shape, fitted as
  ``t = F + c * tokens`` (:func:`afford.fit.time.throughput.fit_linear_floor`); the fixed share
  ``F / t`` is the part of the step that does not grow with the work: launches, Python,
  synchronisation. A large fixed share means launch-bound.
- NVML utilisation over warm steps: the fraction of each sample period during which a
  kernel was executing (NVML API reference, ``nvmlDeviceGetUtilizationRates``). A device
  idle much of the time is waiting for the host: launch-bound (docs/REFERENCES.md,
  "Compute": a tiny GPT-2-shaped model runs launch-bound at a low mean utilisation).
- the arithmetic share: the step's counted FLOPs at the measured GEMM ceiling of its dtype,
  over the measured step time. It equals MFU against the measured ceiling. When the
  matmul arithmetic accounts for most of the step, the step is compute-bound.

A fixed share is a share: a fit whose F exceeds the step it is part of (F / t > 100 %, the step
time falling as the batch grows, within noise) is a failed fit, reported as such and never
quoted as a measured fixed cost. The verdict then rests on what was measured: utilisation, and
the ladder's own rungs, the largest timed rung against the first (k x the tokens cost r x the
time, with the rungs' spread): the share of the step that grows with the batch,
(r - 1) / (k - 1), judged at its upper end r (1 + spread) so that the claim survives the spread.

What remains (the device is busy, the step grows with the work, and matmul arithmetic
explains little of it) is memory-bound *by elimination*: the time goes to kernels that move
bytes (normalisation, activations, the optimizer) rather than to matmul FLOPs. The verdict
says so; it does not claim a measured byte count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from afford.schema.laws import LawFit
from afford.schema.probes_section import (
    COMPUTE_SHARE,
    LAUNCH_FIXED_SHARE,
    LAUNCH_UTILISATION,
    BoundVerdict,
    Label,
)

LOW_UTILISATION = 0.05     # a sample at or under 5 % counts as idle


class UtilisationStats(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    kept: int
    mean: float | None
    low_share: float | None


def utilisation_stats(t_seconds: Sequence[float], gpu: Sequence[float], settle_seconds: float,
                      low: float = LOW_UTILISATION) -> UtilisationStats:
    """Mean utilisation and the share of samples at or under ``low``, over the samples taken
    at or after ``settle_seconds`` (NVML averages over a past period, so the first samples
    after the sampler starts describe what ran before it)."""
    if len(t_seconds) != len(gpu):
        raise ValueError("t_seconds and gpu must have equal lengths")
    kept = [g for t, g in zip(t_seconds, gpu) if t >= settle_seconds]
    if not kept:
        return UtilisationStats(kept=0, mean=None, low_share=None)
    return UtilisationStats(kept=len(kept), mean=sum(kept) / len(kept),
                            low_share=sum(1 for g in kept if g <= low) / len(kept))


def ladder_fit(tokens: Sequence[float], seconds: Sequence[float]
               ) -> tuple[LawFit, float, float]:
    """Fit ``t = F + c * tokens`` over the rungs; return (fit, F, F / t of the first rung).

    The first rung is the x1 batch: the share is of the step as the sweep measured it.
    F is bounded below by 0 (the fit's constraint); the share may exceed 1 when the step
    time falls with the batch (noise), and is returned as fitted."""
    from afford.fit.time.throughput import fit_linear_floor  # numpy: a fit's, not a reader's

    law = fit_linear_floor(tokens, seconds)
    fixed = law.params["F"]
    return law, fixed, fixed / float(seconds[0])


FIXED_SHARE_MAX = 1.0  # a fixed cost is part of the step: F / t above 1 is a failed fit


def ladder_growth(tokens: Sequence[float], seconds: Sequence[float],
                  timed: Sequence[Sequence[float]]) -> tuple[float, float, float] | None:
    """(tokens ratio, time ratio, spread) of the largest timed rung against the first:
    measured, no fit; spread = the larger of the two rungs' IQR / median of timed steps
    (torch.utils.benchmark's quality measure). None with fewer than two rungs."""
    if len(tokens) < 2 or tokens[-1] <= tokens[0] or seconds[0] <= 0:
        return None
    spreads = [_iqr_share(t) for t in (timed[0], timed[-1])]
    return (tokens[-1] / tokens[0], seconds[-1] / seconds[0],
            max((x for x in spreads if x is not None), default=0.0))


def _iqr_share(samples: Sequence[float]) -> float | None:
    import numpy as np  # here: a command reading a certificate's verdicts needs no numpy

    xs = sorted(samples)
    if len(xs) < 2:
        return None
    q1, med, q3 = (float(np.percentile(xs, q)) for q in (25, 50, 75))
    return (q3 - q1) / med if med > 0 else None


def arithmetic_share(flops: float, gemm_flops_per_second: float, step_seconds: float) -> float:
    """(FLOPs / measured GEMM rate) / measured step time: the share of the step that matmul
    arithmetic at the measured ceiling would take. Equal to MFU against that ceiling."""
    return mfu(flops, step_seconds, gemm_flops_per_second)


def mfu(flops: float, step_seconds: float, peak_flops_per_second: float) -> float:
    """Model FLOP utilisation: achieved FLOP/s over a peak (PaLM, Chowdhery et al. 2022,
    appendix B: MFU = observed throughput / theoretical peak)."""
    if step_seconds <= 0 or peak_flops_per_second <= 0:
        raise ValueError("step seconds and the peak must be positive")
    return flops / step_seconds / peak_flops_per_second


def bound_verdict(fixed_share: float | None = None, utilisation_mean: float | None = None,
                  utilisation_low_share: float | None = None,
                  arithmetic: float | None = None,
                  growth: tuple[float, float, float] | None = None) -> BoundVerdict:
    """Launch-bound when the ladder's fixed share or NVML's idle time says so (or, where the
    fit failed, the ladder's rungs: the step does not grow with the batch beyond their
    spread); else compute-bound when matmul arithmetic explains the step; else memory-bound
    by elimination; undetermined when the figures needed are missing. ``growth``:
    :func:`ladder_growth`."""
    failed = _known(fixed_share) and fixed_share > FIXED_SHARE_MAX
    share = None if failed else fixed_share
    reasons = _reasons(share, utilisation_mean, utilisation_low_share, arithmetic)
    if failed:
        reasons.insert(0, f"the ladder fit failed: F / t = {fixed_share:.0%} > 100% (a fixed "
                       "cost cannot exceed the step it is part of; the step did not grow with "
                       "the batch beyond its noise): not quoted as a fixed cost")
    rungs_say = None
    if growth is not None and (failed or not _known(share)):
        rungs_say, text = _growth(*growth)
        reasons.insert(1 if failed else 0, text)
    launch = (_known(share) and share >= LAUNCH_FIXED_SHARE) or rungs_say is True or \
             (_known(utilisation_mean) and utilisation_mean < LAUNCH_UTILISATION)
    grows = _known(share) or rungs_say is False
    if launch:
        label: Label = "launch-bound"
    elif _known(arithmetic) and arithmetic >= COMPUTE_SHARE:
        label = "compute-bound"
    elif _known(arithmetic) and (grows or _known(utilisation_mean)):
        label = "memory-bound"
        reasons.append("memory-bound by elimination: " + _elimination(grows,
                                                                      utilisation_mean))
    else:
        label = "undetermined"
        reasons.append("undetermined: needs the ladder (or NVML) and the arithmetic share")
    k, r, spread = growth if growth is not None else (None, None, None)
    return BoundVerdict(label=label, reasons=reasons, fixed_share=_or_none(share),
                        failed_fixed_share=fixed_share if failed else None,
                        ladder_tokens_ratio=k, ladder_time_ratio=r, ladder_spread=spread,
                        utilisation_mean=_or_none(utilisation_mean),
                        utilisation_low_share=_or_none(utilisation_low_share),
                        arithmetic_share=_or_none(arithmetic))


def _growth(k: float, r: float, spread: float) -> tuple[bool | None, str]:
    """What the ladder's rungs say: True launch-bound (even at the spread's upper end under
    half the step grows with the batch), False the step grows (its lower end over half),
    None neither, within the spread; and the line that says so."""
    grows_hi = (r * (1 + spread) - 1) / (k - 1)
    grows_lo = (r * (1 - spread) - 1) / (k - 1)
    limit = 1 - LAUNCH_FIXED_SHARE
    says = True if grows_hi <= limit else False if grows_lo > limit else None
    what = {True: "launch", False: "the step grows with the batch",
            None: "inconclusive within the spread"}[says]
    return says, (f"batch ladder, measured: {k:g}x the tokens cost {r:.2f}x the time (rungs' "
                  f"IQR / median up to {spread:.0%}): {max(0.0, (r - 1) / (k - 1)):.0%} of the "
                  f"step grows with the batch, at most {max(0.0, grows_hi):.0%} ({what})")


def _elimination(grows: bool, utilisation_mean: float | None) -> str:
    seen = []
    if grows:
        seen.append("the step grows with the batch")
    if _known(utilisation_mean):
        seen.append("the device is busy")
    else:
        seen.append("device utilisation was not measured")
    return "; ".join(seen) + "; matmul arithmetic explains little of the step"


def _known(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _or_none(x: float | None) -> float | None:
    """A figure as the verdict keeps it: None where it is not known (NaN: not measured)."""
    return x if _known(x) else None


def _reasons(fixed_share, util_mean, util_low, arithmetic) -> list[str]:
    out = []
    if _known(fixed_share):
        side = ">=" if fixed_share >= LAUNCH_FIXED_SHARE else "<"
        out.append(f"fixed share F/t {fixed_share:.0%} {side} {LAUNCH_FIXED_SHARE:.0%} "
                   f"({'launch' if side == '>=' else 'the step grows with the batch'})")
    if _known(util_mean):
        side = "<" if util_mean < LAUNCH_UTILISATION else ">="
        low = f", {util_low:.0%} of samples at or under {LOW_UTILISATION:.0%}" \
            if _known(util_low) else ""
        out.append(f"GPU utilisation {util_mean:.0%} {side} {LAUNCH_UTILISATION:.0%}{low} ("
                   + ("the device waits for the host" if side == "<"
                      else "the device is busy") + ")")
    if _known(arithmetic):
        side = ">=" if arithmetic >= COMPUTE_SHARE else "<"
        out.append(f"arithmetic share {arithmetic:.1%} {side} {COMPUTE_SHARE:.0%} ("
                   + ("matmul FLOPs explain the step" if side == ">="
                      else "matmul FLOPs explain little") + ")")
    return out
