"""Checkpoint cadence under an overhead budget (docs/DESIGN.md section 4).

One definition of the write share, the lab's COSTS file's (section 3.4): write seconds over
the training seconds they interrupt. With a chunk of n steps in C seconds (the whole run when
there is no session cap), periodic writes land at steps k, 2k, ...: floor(n / k) of them, and
the share is floor(n / k) x write / C; save_every is the smallest k that keeps it within the
budget b:

    floor(n / k) <= M = floor(b C / write)   <=>   k = floor(n / (M + 1)) + 1

(no periodic write at all, k = n + 1, when b C < write: one write would already exceed it).
Without a chunk the share of one interval, write / (k x step), is bounded instead:
k = ceil(write / (b x step)); since a chunk holds at most C / step steps, the chunk's k is
never larger. COSTS's inputs (write 0.609 s, step 0.299025 s, 132,430 steps in 39,600 s,
b = 1 %) give 204 steps, 649 periodic writes, 395.2 s = 0.998 % of the chunk (COSTS prints 650
writes: its count includes the final save, which its 395.2 s does not; afford counts the final
save in the startup). A larger budget never gives a larger k.
"""

from __future__ import annotations

from afford.core.provenance import Tagged
from afford.planning.derive import ceil_div, derive, floor_div, num
from afford.planning.result import Cadence

CHUNK_RULE = ("the smallest k with floor(steps / k) x write / chunk seconds <= budget "
              "(COSTS 3.4: write seconds over the chunk)")
INTERVAL_RULE = "ceil(write / (budget x step)): write / (k x step) <= budget (COSTS 3.4)"


def _check(budget: float, step_seconds: float) -> None:
    if not 0.0 < budget < 1.0:
        raise ValueError(f"overhead budget must lie in (0, 1), got {budget}")
    if step_seconds <= 0:
        raise ValueError(f"step seconds must be positive, got {step_seconds}")


def save_every(write_seconds: float, step_seconds: float, budget: float,
               steps: int | None = None, chunk_seconds: float | None = None) -> int:
    """Smallest k whose writes stay within ``budget`` of the training seconds: over a chunk of
    ``steps`` steps in ``chunk_seconds`` when both are given (``steps + 1``: no periodic write
    fits), else over one interval, write / (k x step) (0 < budget < 1)."""
    _check(budget, step_seconds)
    if steps is None or chunk_seconds is None:
        return max(1, ceil_div(write_seconds, budget * step_seconds))
    if write_seconds <= 0:
        return 1
    allowed = floor_div(budget * chunk_seconds, write_seconds)  # M: writes the budget holds
    return steps // (allowed + 1) + 1


def min_budget(write_seconds: float, chunk_seconds: float) -> float:
    """The smallest budget that holds one periodic write in the chunk: write / chunk."""
    return write_seconds / chunk_seconds


def _interval_only(write: Tagged, step: Tagged, budget: Tagged) -> Cadence:
    w, t, b = num(write), num(step), num(budget)
    k = save_every(w, t, b)
    k_t = derive(k, "steps", INTERVAL_RULE, write, step, budget)
    interval_t = derive(k * t + w, "s", "save_every x step + write", k_t, step, write)
    share = derive(w / (k * t), "ratio", "write / (save_every x step)", write, k_t, step)
    return Cadence(write_seconds=write, overhead_budget=budget, save_every=k_t,
                   interval_seconds=interval_t, overhead_share=share)


def cadence(write: Tagged, step: Tagged, budget: Tagged,
            steps_per_chunk: Tagged | None = None,
            chunk_seconds: Tagged | None = None) -> Cadence:
    """save_every solved from the budget, its interval; writes per chunk, their seconds and
    their share of the chunk (the share the budget bounds: ``overhead_share`` is that share,
    never above the budget)."""
    if steps_per_chunk is None or chunk_seconds is None:
        return _interval_only(write, step, budget)
    w, t, b = num(write), num(step), num(budget)
    n, c = int(num(steps_per_chunk)), num(chunk_seconds)
    k = save_every(w, t, b, n, c)
    k_t = derive(k, "steps", CHUNK_RULE, write, budget, steps_per_chunk, chunk_seconds)
    interval_t = derive(k * t + w, "s", "save_every x step + write", k_t, step, write)
    writes = floor_div(n, k)
    writes_t = derive(writes, "writes", "floor(steps per chunk / save_every) periodic writes "
                      "(the final save is counted in the startup)", steps_per_chunk, k_t)
    total_t = derive(writes * w, "s", "writes per chunk x write", writes_t, write)
    share = derive(writes * w / c, "ratio", "write seconds / chunk", total_t, chunk_seconds)
    need = None
    if k > n > 0 and w < c:
        need = derive(min_budget(w, c), "ratio", "write / chunk seconds: one periodic write",
                      write, chunk_seconds)
    return Cadence(write_seconds=write, overhead_budget=budget, save_every=k_t,
                   interval_seconds=interval_t, overhead_share=share, writes_per_chunk=writes_t,
                   write_seconds_per_chunk=total_t, share_of_chunk=share,
                   reaches_checkpoint=k <= n, min_budget_to_reach=need)  # k >= 1
