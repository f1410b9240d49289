"""The warm step taken apart: forward, backward, optimizer at two model sizes (pure).

Why: the size law ``t = F + c N^b`` (or ``exp(a) N^b``) is extrapolated by the scale ladder
on the premise that the per-step cost which does not scale with the tokens of a step stays
put as N grows. Of the three phases, the optimizer step is that cost: it touches every
parameter once per step whatever the batch (AdamW reads and writes weights, gradients and
two moments: memory-bound, O(N)), while forward and backward scale with tokens x N (Kaplan
et al. 2020, section 2.1: 2N and 4N FLOPs per token). So the premise is tested, not
assumed: it *holds* when the optimizer's seconds grow no faster than ``N^FLAT_EXPONENT``
between the smallest and the largest size, and *fails* otherwise.

Each phase's value at a size is the median over children of each child's median over its
timed warm steps (the same rule as a sweep point, docs/DESIGN.md section 3 rule 2).
"""

from __future__ import annotations

import math

from afford.fit.stats import median
from afford.schema.sizes_section import PHASES, PhaseChild, PhaseGrowth, PhaseSplit

FLAT_EXPONENT = 0.1  # t ~ N^b with b below this over the measured range counts as flat


def phase_child(child: int, phases: dict, timed_indices: list[int]) -> PhaseChild:
    """The child's phase seconds at its timed warm steps only (step 0 and warm-up dropped)."""
    keep = set(timed_indices)
    rows = [k for k, i in enumerate(phases["step_index"]) if i in keep]
    return PhaseChild(child=child, step_indices=[phases["step_index"][k] for k in rows],
                      **{f"{p}_seconds": [float(phases[f"{p}_seconds"][k]) for k in rows]
                         for p in PHASES})


def phase_split(spec: str, params: int | None, children: list[PhaseChild],
                step_medians: list[float], error: str | None = None) -> PhaseSplit:
    """Medians of child medians per phase; ``error`` when no child gave phases."""
    kids = [c for c in children if c.step_indices]
    if not kids:
        return PhaseSplit(spec=spec, params=params, children=children,
                          error=error or "no child returned phase timings")
    meds = {f"{p}_seconds": median([median(getattr(c, f"{p}_seconds")) for c in kids])
            for p in PHASES}
    return PhaseSplit(spec=spec, params=params, children=children,
                      step_seconds=median(step_medians) if step_medians else None,
                      error=error, **meds)


def growth(small: PhaseSplit, large: PhaseSplit) -> list[PhaseGrowth]:
    """Each phase (and the whole step) from ``small`` to ``large``: ratio, exponent vs N,
    share of the step. Empty when either split or either parameter count is missing."""
    if small.params is None or large.params is None or large.params <= small.params:
        return []
    if small.step_seconds is None or large.step_seconds is None or \
            small.forward_seconds is None or large.forward_seconds is None:
        return []
    log_n = math.log(large.params / small.params)
    out = []
    for p in (*PHASES, "step"):
        a = getattr(small, f"{p}_seconds")
        b = getattr(large, f"{p}_seconds")
        if a is None or b is None or a <= 0 or b <= 0:
            continue
        out.append(PhaseGrowth(phase=p, small_seconds=a, large_seconds=b, ratio=b / a,
                               exponent=math.log(b / a) / log_n,
                               share_small=a / small.step_seconds,
                               share_large=b / large.step_seconds))
    return out


def premise(rows: list[PhaseGrowth], small_params: int | None, large_params: int | None
            ) -> tuple[str, str]:
    """``("holds" | "fails" | "untested", finding in words)``."""
    opt = next((g for g in rows if g.phase == "optimizer"), None)
    if opt is None or not small_params or not large_params:
        return "untested", "the step could not be split at two sizes"
    verdict = "holds" if opt.exponent <= FLAT_EXPONENT else "fails"
    others = ", ".join(f"{g.phase} x{g.ratio:.2f} (N^{g.exponent:.2f})" for g in rows
                       if g.phase != "optimizer")
    how = "stays flat" if verdict == "holds" else "grows with N"
    return verdict, (
        f"from N={small_params:,} to N={large_params:,} (x{large_params / small_params:.0f}) "
        f"the optimizer step went x{opt.ratio:.2f} (N^{opt.exponent:.2f}; flat means "
        f"<= N^{FLAT_EXPONENT}): the per-step cost that does not depend on tokens {how}; "
        f"its share of the step {opt.share_small:.0%} -> {opt.share_large:.0%}; {others}")
