"""The timing protocol of one sweep point inside one child (docs/DESIGN.md section 3, rules 1-2).

Step 0 is timed alone and kept apart; then warm-up steps, each timed and kept, until both a
count and a time budget are spent (budgets, as in ``triton.testing.do_bench``); then timed
warm steps in blocks until at least ``min_steps`` steps and ``floor_seconds`` of timed work
are done. The adaptive rule keeps going, up to ``max_floor_seconds``, until the median is
known to ``target_rel_precision`` (half-width of its distribution-free 95 % interval). Every
timed step keeps its step index.

The clock is injected (:mod:`afford.workloads.clock`), so tests run the protocol on a fake
clock and get exact results. ``CudaClock`` records CUDA events on the stream around each
step (no host sync between the steps of a block, so launch overlap is as in a training
loop) and synchronises once a block.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from afford.fit.stats import median, median_precision
from afford.workloads.clock import Clock


@dataclass(frozen=True)
class TimingRule:
    """How long to time one point. The three presets are :func:`rule_for`."""

    warmup_steps: int = 3
    warmup_seconds: float = 0.3
    min_steps: int = 12
    floor_seconds: float = 0.5
    max_floor_seconds: float = 3.0
    target_rel_precision: float = 0.01
    max_block: int = 16
    max_warmup_steps: int = 200


def rule_for(precision: str) -> TimingRule:
    """``full``: 3.0 s floor always; ``adaptive``: 0.25 s extended to 1.5 s until the median
    is known to 1 %, after 3 warm-up steps and at least 0.1 s of them (the warm-up steps are
    kept, so a point still warming up shows in them; a longer warm-up buys nothing and costs
    seconds per certify); ``quick``: a small fixed floor for a first look.

    Why 0.25 s and 1.5 s rather than twice those: stopping by this rule moves a work-regime
    point's median by less than its children disagree, and a launch-floor point's by far
    less than its children disagree (the floor differs from process to process):
    extending a floor point to 3 s buys within-child precision that the next process does
    not reproduce. The timed seconds it saves per certificate are what the time design's
    extra shapes (:mod:`afford.fit.time.time_design`) need."""
    if precision == "full":
        return TimingRule(warmup_seconds=1.0, floor_seconds=3.0, max_floor_seconds=3.0)
    if precision == "adaptive":
        return TimingRule(warmup_seconds=0.1, floor_seconds=0.25, max_floor_seconds=1.5)
    if precision == "quick":
        return TimingRule(warmup_steps=2, warmup_seconds=0.05, floor_seconds=0.1,
                          max_floor_seconds=0.1)
    raise ValueError(f"unknown precision {precision!r} (full, adaptive, quick)")


@dataclass(frozen=True)
class PointTiming:
    step0_seconds: float
    warmup_seconds: tuple[float, ...]
    timed_seconds: tuple[float, ...]
    timed_indices: tuple[int, ...]
    precision: float
    reached_target: bool
    stopped: str = "floor"  # floor | target | cap | unreachable
    # beside each timed step, where the clock reads the child's usage (a CPU's UsageClock):
    timed_cpu_seconds: tuple[float, ...] = ()  # the process's CPU seconds, all threads
    timed_wait_seconds: tuple[float, ...] = ()  # its threads' seconds waiting for a CPU

    @property
    def median_seconds(self) -> float:
        return median(self.timed_seconds)


def _timed_one(step: Callable[[int], Any], clock: Clock, i: int) -> float:
    a = clock.mark()
    step(i)
    b = clock.mark()
    clock.sync()
    return clock.between(a, b)


def time_point(step: Callable[[int], Any], clock: Clock, rule: TimingRule,
               check: Callable[[], None] | None = None) -> PointTiming:
    """Run the protocol. ``step(i)`` runs training step ``i``; ``check()`` runs once after the
    warm-up (the finite-gradient check) and raises to refuse the point before timing."""
    step0 = _timed_one(step, clock, 0)
    i, warm = 1, []
    while len(warm) < rule.warmup_steps or sum(warm) < rule.warmup_seconds:
        warm.append(_timed_one(step, clock, i))
        i += 1
        if len(warm) >= rule.max_warmup_steps:
            break
    if check is not None:
        check()
    block = _block_size(median(warm), rule)
    timed: list[float] = []
    indices: list[int] = []
    usage: list[tuple[float, float | None]] | None = \
        [] if hasattr(clock, "usage_between") else None
    precision = float("inf")
    while True:
        secs, idx = timed_block(step, clock, i, block, usage)
        timed.extend(secs)
        indices.extend(idx)
        i += block
        total = sum(timed)
        if len(timed) < rule.min_steps or total < rule.floor_seconds:
            continue
        precision = median_precision(timed)
        stopped = _stop_reason(precision, total, len(timed), rule)
        if stopped:
            break
    cpu, waits = zip(*usage) if usage else ((), ())
    return PointTiming(step0_seconds=step0, warmup_seconds=tuple(warm),
                       timed_seconds=tuple(timed), timed_indices=tuple(indices),
                       precision=precision,
                       reached_target=precision <= rule.target_rel_precision, stopped=stopped,
                       timed_cpu_seconds=tuple(cpu),
                       timed_wait_seconds=() if None in waits else tuple(waits))


UNREACHABLE_SLACK = 1.5  # "about 1 %": give up extending when 1.5 x target is out of reach


def _stop_reason(precision: float, total: float, n: int, rule: TimingRule) -> str | None:
    """Why timing stops now, or ``None`` to extend. Once the floor is met: stop when the
    median is known to the target; when the cap is spent; or when even the cap could not
    bring it to about the target (precision shrinks as 1/sqrt(steps); extending then buys
    little, and the precision reached is reported instead)."""
    if precision <= rule.target_rel_precision:
        return "target" if rule.max_floor_seconds > rule.floor_seconds else "floor"
    if total >= rule.max_floor_seconds:
        return "cap" if rule.max_floor_seconds > rule.floor_seconds else "floor"
    projected = precision * (total / rule.max_floor_seconds) ** 0.5
    if projected > UNREACHABLE_SLACK * rule.target_rel_precision:
        return "unreachable"
    return None


def timed_block(step: Callable[[int], Any], clock: Clock, start: int, count: int,
                usage: list | None = None) -> tuple[list[float], list[int]]:
    """``count`` steps from index ``start`` with a mark between consecutive steps and one
    sync at the end: each step's seconds and its index. ``usage``: a list that gets each
    step's ``clock.usage_between`` (a clock that reads the child's usage)."""
    marks = [clock.mark()]
    for i in range(start, start + count):
        step(i)
        marks.append(clock.mark())
    clock.sync()
    if usage is not None:
        usage.extend(clock.usage_between(marks[k], marks[k + 1])  # type: ignore[attr-defined]
                     for k in range(count))
    return ([clock.between(marks[k], marks[k + 1]) for k in range(count)],
            list(range(start, start + count)))


SYNCED_SECONDS = 0.1  # the synced run: about this long, within [SYNCED_MIN, SYNCED_MAX] steps
SYNCED_MIN, SYNCED_MAX = 5, 10


def synced_count(warm_median: float) -> int:
    """Steps in the synced run: about ``SYNCED_SECONDS`` of them, 5 to 10."""
    if warm_median <= 0:
        return SYNCED_MAX
    return int(max(SYNCED_MIN, min(SYNCED_MAX, round(SYNCED_SECONDS / warm_median))))


def time_synced(step: Callable[[int], Any], sync: Callable[[Any], None], start: int,
                count: int, now: Callable[[], float]) -> tuple[list[float], list[int]]:
    """``count`` steps from index ``start``, each timed on the host clock ``now`` from before
    the step to after ``sync(result of the step)`` (``float(loss)`` in a child: the host
    waits for the device every step, as a training loop that logs ``loss.item()`` each step
    does). Each step's seconds and its index."""
    seconds = []
    for i in range(start, start + count):
        t0 = now()
        sync(step(i))
        seconds.append(now() - t0)
    return seconds, list(range(start, start + count))


def _block_size(warm_median: float, rule: TimingRule) -> int:
    """Steps between host syncs: about ``BLOCK_SECONDS`` (a quarter of 0.5 s, fixed apart from
    the adaptive rule's floor, so the async figure keeps its meaning as the floor moves), or a
    quarter of a larger floor, at least ``MIN_BLOCK`` and at most ``max_block`` (which wins:
    a rule that caps its blocks, as the determinism audit's, keeps its cap).

    Never one step a block: a step synced on its own pays the device's tail (the work still
    queued when the host has issued its last kernel) that a training loop overlaps with the
    next step's issue. A model with much optimizer work at the tail (full AdamW) reads a
    slower step synced one a block than pipelined several a block; one with almost none
    (LoRA) reads the same either way."""
    if warm_median <= 0:
        return rule.max_block
    per_block = max(BLOCK_SECONDS, rule.floor_seconds / 4.0)
    return int(min(rule.max_block, max(MIN_BLOCK, per_block / warm_median)))


BLOCK_SECONDS = 0.125
MIN_BLOCK = 4  # steps pipelined between two syncs, at the least (a block's last step pays the tail)
