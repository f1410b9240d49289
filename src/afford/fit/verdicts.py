"""Is a step launch-bound, compute-bound or memory-bound? Pure functions over probe figures.

The evidence (docs/DESIGN.md section 4, "Batch ladders"; issue 4):

- the batch ladder: step seconds at batch x1, x2, x4 of one shape, fitted as
  ``t = F + c * tokens`` (:func:`afford.fit.throughput.fit_linear_floor`); the fixed share
  ``F / t`` is the part of the step that does not grow with the work: launches, Python,
  synchronisation. A large fixed share means launch-bound.
- NVML utilisation over warm steps: the fraction of each sample period during which a
  kernel was executing (NVML API reference, ``nvmlDeviceGetUtilizationRates``). A device
  idle much of the time is waiting for the host: launch-bound. (docs/REFERENCES.md: a GPT-2-shaped
  d=64, L=2 model at batch 4 x 256 ran at 15 % mean utilisation on an H200.)
- the arithmetic share: the step's counted FLOPs at the measured GEMM ceiling of its dtype,
  over the measured step time. It equals MFU against the measured ceiling. When the
  matmul arithmetic accounts for most of the step, the step is compute-bound.

What remains (the device is busy, the step grows with the work, and matmul arithmetic
explains little of it) is memory-bound *by elimination*: the time goes to kernels that move
bytes (normalisation, activations, the optimizer) rather than to matmul FLOPs. The verdict
says so; it does not claim a measured byte count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from afford.fit.throughput import fit_linear_floor
from afford.schema.laws import LawFit
from afford.schema.probes import (COMPUTE_SHARE, LAUNCH_FIXED_SHARE, LAUNCH_UTILISATION,
                                  BoundVerdict, Label)

LOW_UTILISATION = 0.05     # a sample at or under 5 % counts as idle


class UtilisationStats(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

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
    law = fit_linear_floor(tokens, seconds)
    fixed = law.params["F"]
    return law, fixed, fixed / float(seconds[0])


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
                  arithmetic: float | None = None) -> BoundVerdict:
    """Launch-bound when the ladder's fixed share or NVML's idle time says so; else
    compute-bound when matmul arithmetic explains the step; else memory-bound by elimination;
    undetermined when the figures needed are missing."""
    reasons = _reasons(fixed_share, utilisation_mean, utilisation_low_share, arithmetic)
    launch = (_known(fixed_share) and fixed_share >= LAUNCH_FIXED_SHARE) or \
             (_known(utilisation_mean) and utilisation_mean < LAUNCH_UTILISATION)
    if launch:
        label: Label = "launch-bound"
    elif _known(arithmetic) and arithmetic >= COMPUTE_SHARE:
        label = "compute-bound"
    elif _known(arithmetic) and (_known(fixed_share) or _known(utilisation_mean)):
        label = "memory-bound"
        reasons.append("memory-bound by elimination: " + _elimination(fixed_share,
                                                                      utilisation_mean))
    else:
        label = "undetermined"
        reasons.append("undetermined: needs the ladder (or NVML) and the arithmetic share")
    return BoundVerdict(label=label, reasons=reasons, fixed_share=fixed_share,
                   utilisation_mean=utilisation_mean,
                   utilisation_low_share=utilisation_low_share, arithmetic_share=arithmetic)


def _elimination(fixed_share: float | None, utilisation_mean: float | None) -> str:
    seen = []
    if _known(fixed_share):
        seen.append("the step grows with the batch")
    if _known(utilisation_mean):
        seen.append("the device is busy")
    else:
        seen.append("device utilisation was not measured")
    return "; ".join(seen) + "; matmul arithmetic explains little of the step"


def _known(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


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
        out.append(f"GPU utilisation {util_mean:.0%} {side} {LAUNCH_UTILISATION:.0%}{low} "
                   f"({'the device waits for the host' if side == '<' else 'the device is busy'})")
    if _known(arithmetic):
        side = ">=" if arithmetic >= COMPUTE_SHARE else "<"
        out.append(f"arithmetic share {arithmetic:.1%} {side} {COMPUTE_SHARE:.0%} "
                   f"({'matmul FLOPs explain the step' if side == '>=' else 'matmul FLOPs explain little'})")
    return out
