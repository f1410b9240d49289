"""Step 0 against warm steps: how long a run takes to get warm (docs/DESIGN.md section 3, rule 1).

Pure functions over the raw samples the certificate already keeps for every child of every
sweep point (step 0, each warm-up step in order, the timed warm steps with their indices):
nothing is stored twice. The figures:

- the first steps one by one (step 0, then the warm-up steps);
- the warm median (the child's median of timed warm steps) and step 0 / warm;
- steps until warm: the index of the first step within ``tol`` (5 %) of the warm median,
  counting step 0 as index 0. Warm-up steps are searched first, then the timed steps by
  their recorded indices; ``None`` when no recorded step comes that close (a step whose
  spread exceeds the tolerance, as launch-bound steps often do).

Across children a point reports the median of step 0, the median of each early step, the
point's warm median, and the median over children of steps-until-warm (a child that never
came within the tolerance counts as infinitely many; the median is ``None`` when most
children never did).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from afford.fit.stats import median

WARM_TOLERANCE = 0.05


class WarmupProfile(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    step0_seconds: float
    first_seconds: list[float]    # step 0, then each warm-up step, in order
    warm_seconds: float
    step0_over_warm: float
    steps_until_warm: int | None  # index of the first step within tol of warm; None: never
    tolerance: float = WARM_TOLERANCE
    children: int = 1


def steps_until_warm(step0: float, warmup: Sequence[float], timed: Sequence[float],
                     timed_indices: Sequence[int], warm: float,
                     tol: float = WARM_TOLERANCE) -> int | None:
    """Index of the first recorded step within ``tol`` of ``warm`` (step 0 is index 0)."""
    early = [step0, *warmup]
    for i, t in enumerate(early):
        if abs(t / warm - 1.0) <= tol:
            return i
    for i, t in zip(timed_indices, timed):
        if abs(t / warm - 1.0) <= tol:
            return int(i)
    return None


def warmup_profile(step0: float, warmup: Sequence[float], timed: Sequence[float],
                   timed_indices: Sequence[int], tol: float = WARM_TOLERANCE) -> WarmupProfile:
    """One child's profile of one point."""
    if not timed or len(timed) != len(timed_indices):
        raise ValueError("need timed steps with their indices")
    warm = median(timed)
    if warm <= 0:
        raise ValueError("the warm median must be positive")
    return WarmupProfile(step0_seconds=step0, first_seconds=[step0, *warmup],
                         warm_seconds=warm, step0_over_warm=step0 / warm,
                         steps_until_warm=steps_until_warm(step0, warmup, timed,
                                                           timed_indices, warm, tol),
                         tolerance=tol)


def combine_profiles(profiles: Sequence[WarmupProfile], warm_seconds: float) -> WarmupProfile:
    """Across children: medians of step 0 and of each early step (over the children that
    recorded it), the point's warm median, and the median steps-until-warm (a child that
    never got within the tolerance counts as infinity; ``None`` if the median is that)."""
    if not profiles:
        raise ValueError("no profiles to combine")
    depth = max(len(p.first_seconds) for p in profiles)
    firsts = [median([p.first_seconds[i] for p in profiles if len(p.first_seconds) > i])
              for i in range(depth)]
    step0 = median([p.step0_seconds for p in profiles])
    counts = sorted(math.inf if p.steps_until_warm is None else p.steps_until_warm
                    for p in profiles)
    mid = median(counts)
    return WarmupProfile(step0_seconds=step0, first_seconds=firsts, warm_seconds=warm_seconds,
                         step0_over_warm=step0 / warm_seconds,
                         steps_until_warm=None if math.isinf(mid) else int(math.ceil(mid)),
                         tolerance=profiles[0].tolerance, children=len(profiles))
