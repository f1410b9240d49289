"""Speedup of a measured A/B pair, paired within each child process (pure).

A and B are timed by the same child, in one process, in that child's shuffled order
(docs/DESIGN.md section 3, rule 2), so the ratio inside a child cancels what the child shares
(process placement, clocks, thermal state at that moment). The lever's figure is the median
of the per-child ratios; its spread is their range (min, max), as the sweep reports the
children's disagreement. Nothing here is predicted: a lever is measured or absent
(docs/DESIGN.md section 4, "Levers").
"""

from __future__ import annotations

from afford.fit.stats import median


def per_child_speedups(a: dict[int, float], b: dict[int, float], metric: str,
                       tokens_a: int | None = None, tokens_b: int | None = None
                       ) -> list[float]:
    """Ratios for the children that timed both sides (child index -> median seconds).

    ``step_seconds``: t_A / t_B. ``tokens_per_second``: (tok_B / t_B) / (tok_A / t_A).
    """
    if metric == "tokens_per_second" and not (tokens_a and tokens_b):
        raise ValueError("tokens_per_second needs the tokens per step of both sides")
    out = []
    for c in sorted(set(a) & set(b)):
        ta, tb = a[c], b[c]
        if ta <= 0 or tb <= 0:
            continue
        ratio = ta / tb
        if metric == "tokens_per_second":
            ratio *= tokens_b / tokens_a
        out.append(ratio)
    return out


def summarize(ratios: list[float]) -> tuple[float | None, float | None, float | None]:
    """(median, min, max) of the per-child ratios; Nones when there are none."""
    if not ratios:
        return None, None, None
    return median(ratios), min(ratios), max(ratios)
