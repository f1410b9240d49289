"""Checkpoint cadence under an overhead budget (docs/DESIGN.md section 4).

save_every = the smallest number of steps k whose checkpoint write stays within the overhead
budget b of wall clock: write / (k x step + write) <= b (the write charged inside the interval;
the lab's COSTS file, section 3.4, charges it outside, write / (k x step) <= b, which gives 204
where afford gives 202 at its inputs), i.e.
``k = ceil(write x (1 - b) / (b x step))`` and at least 1. A larger budget never gives a
larger k. Periodic writes land at steps k, 2k, ...: floor(steps per chunk / k) of them per
chunk; the final save at the end of a chunk is counted in the startup, not here.
"""

from __future__ import annotations

from afford.plan.derive import ceil_div, derive, floor_div, num
from afford.plan.result import Cadence
from afford.provenance import Tagged


def save_every(write_seconds: float, step_seconds: float, budget: float) -> int:
    """Smallest k with write / (k * step + write) <= budget (0 < budget < 1)."""
    if not 0.0 < budget < 1.0:
        raise ValueError(f"overhead budget must lie in (0, 1), got {budget}")
    if step_seconds <= 0:
        raise ValueError(f"step seconds must be positive, got {step_seconds}")
    return max(1, ceil_div(write_seconds * (1.0 - budget), budget * step_seconds))


def min_budget(write_seconds: float, step_seconds: float, steps: int) -> float:
    """The smallest budget whose save_every is at most ``steps``: write / (steps x step + write)."""
    return write_seconds / (steps * step_seconds + write_seconds)


def cadence(write: Tagged, step: Tagged, budget: Tagged,
            steps_per_chunk: Tagged | None = None,
            chunk_seconds: Tagged | None = None) -> Cadence:
    """save_every, its interval and overhead; writes per chunk and their share of the chunk."""
    w, t, b = num(write), num(step), num(budget)
    k = save_every(w, t, b)
    k_t = derive(k, "steps", "ceil(write x (1 - budget) / (budget x step)): the write counted "
                 "inside the interval (COSTS 3.4 counts it outside, write / (k x step) <= "
                 "budget, one or two steps more)", write, step, budget)
    interval = k * t + w
    interval_t = derive(interval, "s", "save_every x step + write", k_t, step, write)
    share = derive(w / interval, "ratio", "write / (save_every x step + write)", write,
                   interval_t)
    if steps_per_chunk is None or chunk_seconds is None:
        return Cadence(write_seconds=write, overhead_budget=budget, save_every=k_t,
                       interval_seconds=interval_t, overhead_share=share)
    n = int(num(steps_per_chunk))
    writes = floor_div(n, k)
    writes_t = derive(writes, "writes", "floor(steps per chunk / save_every)", steps_per_chunk,
                      k_t)
    total_t = derive(writes * w, "s", "writes per chunk x write", writes_t, write)
    chunk_share = derive(writes * w / num(chunk_seconds), "ratio", "write seconds / chunk",
                         total_t, chunk_seconds)
    need = None
    if k > n and n > 0:
        need = derive(min_budget(w, t, n), "ratio", "write / (steps per chunk x step + write)",
                      write, step, steps_per_chunk)
    return Cadence(write_seconds=write, overhead_budget=budget, save_every=k_t,
                   interval_seconds=interval_t, overhead_share=share, writes_per_chunk=writes_t,
                   write_seconds_per_chunk=total_t, share_of_chunk=chunk_share,
                   reaches_checkpoint=k <= n, min_budget_to_reach=need)  # k >= 1
