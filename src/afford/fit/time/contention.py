"""The step on an idle box, told from the load, from each timed step's own accounting.

On a CPU every timed step records beside its wall time the child's CPU time and the time
its threads waited, runnable, for a CPU (:class:`afford.measure.host_load.UsageClock`).
The wait is what other processes cost that step; a step whose threads waited less than
``FREE_WAIT_SHARE`` of its wall time ran as on an idle box. The step on an idle box is the
median of such steps (``idle_step``), and the load's cost is the measured median less it.

Why not CPU time over threads: torch's OpenMP threads spin while a sibling waits for a CPU, so
on a busy box the child's CPU time grows with the load as well (a step can use several times its
wall time in process CPU time): CPU time measures the load's cost together with the work and
cannot subtract it. The wait is the kernel's own count (``/proc/<pid>/task/<tid>/schedstat``),
so a step it calls free was free. Where too few steps were free (a long step on a box whose load
stays above its cores), there is no idle figure: the load could not be told from the work, and
the noise verdict judges the wall times as before.

Pure: numbers in, numbers out.
"""

from __future__ import annotations

from collections.abc import Sequence

from afford.fit.stats import median

FREE_WAIT_SHARE = 0.02  # a step whose threads waited less than this share of it ran free
MIN_FREE_CHILD = 3  # free steps a child needs for a median of its own
MIN_FREE_POINT = 5  # free steps, over all children, a point needs for its idle step


def free_steps(walls: Sequence[float], waits: Sequence[float]) -> list[float]:
    """The wall times of the steps whose threads waited for a CPU less than
    ``FREE_WAIT_SHARE`` of the step (summed over threads: any wait counts)."""
    if len(waits) != len(walls):
        return []
    return [w for w, q in zip(walls, waits) if q < FREE_WAIT_SHARE * w]


def child_free_median(walls: Sequence[float], waits: Sequence[float]) -> float | None:
    """A child's median over its free steps, or None with fewer than ``MIN_FREE_CHILD``."""
    free = free_steps(walls, waits)
    return median(free) if len(free) >= MIN_FREE_CHILD else None


def idle_step(children: Sequence[tuple[Sequence[float], Sequence[float]]]) -> float | None:
    """The step on an idle box: the median of every child's free steps pooled, or None with
    fewer than ``MIN_FREE_POINT`` (``children``: per child its steps' walls and waits)."""
    free = [w for walls, waits in children for w in free_steps(walls, waits)]
    return median(free) if len(free) >= MIN_FREE_POINT else None


def wait_share(walls: Sequence[float], waits: Sequence[float], threads: int) -> float | None:
    """The share of a child's thread time its threads spent waiting for a CPU over its timed
    steps: total wait / (threads x total wall); 0 on an idle box, None without waits."""
    if not waits or len(waits) != len(walls) or threads < 1 or sum(walls) <= 0:
        return None
    return sum(waits) / (threads * sum(walls))


def judged_medians(child_medians: Sequence[float],
                   free_medians: Sequence[float | None]) -> list[float]:
    """The children's figures the noise verdict compares: their free-step medians where
    every child has one (the load told apart from the work, so what spread is left is not
    the load's), else their wall medians as measured."""
    if free_medians and len(free_medians) == len(child_medians) and \
            all(m is not None for m in free_medians):
        return [float(m) for m in free_medians]
    return list(child_medians)
