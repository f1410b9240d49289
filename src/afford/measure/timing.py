"""The timing protocol of one sweep point inside one child (docs/DESIGN.md section 3, rules 1-2).

Step 0 is timed alone and kept apart; then warm-up steps, each timed and kept, until both a
count and a time budget are spent (budgets, as in ``triton.testing.do_bench``); then timed
warm steps, at least ``min_steps`` of them and ``floor_seconds`` of timed work. The adaptive
rule stops before the floor when the median is already known to ``target_rel_precision``
(half-width of its distribution-free 95 % interval) after ``precise_seconds``, and otherwise
keeps going, up to ``max_floor_seconds``, while that target is in reach. Every timed step
keeps its step index.

The timed steps run as a training loop runs them (:func:`timed_run`): the host issues them
in blocks with a clock mark between consecutive steps and never waits for the device to
drain. It reads a block only once the next block is issued (it waits for the block's last
mark, with the next block queued behind it), and syncs once, at the run's end. Each step's
time is the interval between its two marks: on CUDA two events on the device's timeline,
which is what a loop that never syncs sees, the host's issue time where the host bounds the
step, the device's where the device does. A block ended by a full sync instead would start
the next block on an idle device, which no loop does: on the H200 the step after such a
sync read a median 2-7 % slower than the steps between (2026-12-03/06 certificates).

The clock is injected (:mod:`afford.workloads.clock`), so tests run the protocol on a fake
clock and get exact results.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
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
    precise_seconds: float | None = None  # stop before the floor once precise, after this
    precise_min_steps: int | None = None  # and before min_steps once precise, from this many
    min_block: int = 4  # steps a block of the timed run, at the least (MIN_BLOCK)


def rule_for(precision: str) -> TimingRule:
    """``full``: 3.0 s floor always; ``adaptive``: 0.25 s extended to 1.5 s until the median
    is known to 1 %, or stopped at 0.1 s when it is known to 1 % by then, after 3 warm-up
    steps (the warm-up steps are kept, so a point still warming up shows in them);
    ``quick``: a small fixed floor for a first look.

    Why 0.25 s and 1.5 s rather than twice those: stopping by this rule moves a work-regime
    point's median by less than its children disagree, and a launch-floor point's by far
    less than its children disagree (the floor differs from process to process):
    extending a floor point to 3 s buys within-child precision that the next process does
    not reproduce. The timed seconds it saves per certificate are what the time design's
    extra shapes (:mod:`afford.fit.time.time_design`) need.

    Why stop at 0.1 s when precise, and warm up 3 steps with no time budget: this rule's
    timed run replayed on the raw samples of four default H200 certificates (2026-12-03,
    about 90 child points each; ``benches/stop_rule_replay.py``) moves no work-regime child
    median by more than 0.6 % (90th percentile 0.05 %) and launch-floor ones by a median
    0.0 % (90th percentile 0.5 %, at most 8 %, where children disagree by 5-40 %), and saves
    6.6-7.9 s of timed steps per certificate; the third warm-up step already reads the level
    of the later ones (median ratio 1.00, 90th percentile 1.07, over the 43 points per
    certificate that warmed up 8 steps or more), and the warm-up's time budget beyond 3
    steps cost 4.9 s per certificate.

    Why 8 timed steps at the least, not 12: a device-bound step of 40-80 ms meets the 1 %
    target by its eighth step, and the minimum then only held the point (12 steps and the
    block queued behind them: 16). This rule replayed with 8 on the raw samples of five H100
    certificates of 2026-12-06 (two default, GPT-NeoX, Llama + LoRA, Gemma;
    ``benches/stop_rule_replay.py``) saves 2.1-8.7 s of timed steps per certificate and moves
    work-regime child medians by a median 0.00 % (90th percentile at most 0.14 %; 2.5 % for
    one child), launch-floor ones by a median 0.00-0.41 % (90th percentile at most 5.5 %,
    where those certificates' children disagree by up to 16 %). A median of 8 steps still has
    a distribution-free 95 % interval (it takes 6).

    Why a precise median may stop at 6 steps, in blocks of 3: a long device-bound step (25-90
    ms on an H200) knows its median to the 1 % target by its sixth step, and the eight only
    held it. Replayed on the raw samples of the four default H200 certificates of
    2026-12-06 (``benches/stop_rule_replay.py``), this saves 2.4-3.4 s of timed steps per
    certificate and moves work-regime child medians by a median 0.00-0.01 % (90th
    percentile at most 0.13 %, at most 1.0 %); floor points, which rarely reach the target,
    by a median 0.00 %. Six is the fewest steps whose median has a distribution-free 95 %
    interval (the range of six covers it with probability 1 - 2 x 0.5^6 = 97 %), so the
    precision that stops it is still a computed one."""
    if precision == "full":
        return TimingRule(warmup_seconds=1.0, floor_seconds=3.0, max_floor_seconds=3.0)
    if precision == "adaptive":
        return TimingRule(warmup_seconds=0.0, floor_seconds=0.25, max_floor_seconds=1.5,
                          precise_seconds=0.1, min_steps=ADAPTIVE_MIN_STEPS,
                          precise_min_steps=PRECISE_MIN_STEPS, min_block=PRECISE_MIN_STEPS // 2)
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
    block_steps: int = 0  # steps issued per block of the run (timed_run)
    run_wall_seconds: float | None = None  # host seconds from the run's start to its sync

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
               check: Callable[[], None] | None = None,
               now: Callable[[], float] = time.perf_counter) -> PointTiming:
    """Run the protocol. ``step(i)`` runs training step ``i``; ``check()`` runs once after the
    warm-up (the finite-gradient check) and raises to refuse the point before timing;
    ``now``: the host clock of the run's wall time (a test's fake clock)."""
    step0 = _timed_one(step, clock, 0)
    i, warm = 1, []
    while len(warm) < rule.warmup_steps or sum(warm) < rule.warmup_seconds:
        warm.append(_timed_one(step, clock, i))
        i += 1
        if len(warm) >= rule.max_warmup_steps:
            break
    if check is not None:
        check()
    run = timed_run(step, clock, i, _block_size(median(warm), rule), rule, now,
                    estimate=median(warm))
    precision = median_precision(run.seconds)
    cpu, waits = zip(*run.usage) if run.usage else ((), ())
    return PointTiming(step0_seconds=step0, warmup_seconds=tuple(warm),
                       timed_seconds=tuple(run.seconds), timed_indices=tuple(run.indices),
                       precision=precision,
                       reached_target=precision <= rule.target_rel_precision,
                       stopped=run.stopped, timed_cpu_seconds=tuple(cpu),
                       timed_wait_seconds=() if None in waits else tuple(waits),
                       block_steps=run.block, run_wall_seconds=run.wall_seconds)


ADAPTIVE_MIN_STEPS = 8  # rule_for("adaptive"): see its docstring
PRECISE_MIN_STEPS = 6  # rule_for("adaptive"): a median known to the target may stop here
UNREACHABLE_SLACK = 1.5  # "about 1 %": give up extending when 1.5 x target is out of reach


def _stop_reason(precision: float, total: float, n: int, rule: TimingRule) -> str | None:
    """Why timing stops now, or ``None`` to extend (``n`` >= the rule's minimum count).
    Before the floor: stop only when the median is known to the target and at least
    ``precise_seconds`` are timed (a rule without it always times its floor). Once the floor
    is met: stop when the median is known to the target; when the cap is spent; or when even
    the cap could not bring it to about the target (precision shrinks as 1/sqrt(steps);
    extending then buys little, and the precision reached is reported instead)."""
    if total < rule.floor_seconds:
        early = rule.precise_seconds is not None and total >= rule.precise_seconds
        return "target" if early and precision <= rule.target_rel_precision else None
    if precision <= rule.target_rel_precision:
        return "target" if rule.max_floor_seconds > rule.floor_seconds else "floor"
    if total >= rule.max_floor_seconds:
        return "cap" if rule.max_floor_seconds > rule.floor_seconds else "floor"
    projected = precision * (total / rule.max_floor_seconds) ** 0.5
    if projected > UNREACHABLE_SLACK * rule.target_rel_precision:
        return "unreachable"
    return None


@dataclass
class TimedRun:
    """The timed steps of one point as :func:`timed_run` ran them."""

    block: int
    seconds: list[float] = field(default_factory=list)
    indices: list[int] = field(default_factory=list)
    usage: list[tuple[float, float | None]] = field(default_factory=list)
    stopped: str = "floor"
    wall_seconds: float | None = None


def timed_run(step: Callable[[int], Any], clock: Clock, start: int, block: int,
              rule: TimingRule, now: Callable[[], float] = time.perf_counter,
              estimate: float = 0.0) -> TimedRun:
    """The timed steps from index ``start``, pipelined as a training loop runs them (module
    docstring): blocks of ``block`` steps with a mark between consecutive steps; once a block
    is issued, the host waits for the previous block's last mark and reads its steps; one
    sync at the end. Whether to issue another block is decided with the block in flight
    counted (its steps at the median so far): its steps are run and kept whatever the
    decision, so the run ends as the rule says, at most a block later than a synced reading
    would (``estimate``: a step's seconds before any is read, the warm-up's median).
    ``wall_seconds``: host time from before the first mark to after the final sync, the
    synced witness of the steps' sum (which it exceeds by the device's latencies)."""
    run = TimedRun(block=block)
    marks: list[Any] = []
    reads = hasattr(clock, "usage_between")

    def issue() -> None:
        for _ in range(block):
            step(start + len(marks) - 1)
            marks.append(clock.mark())

    def read(upto: int) -> None:
        for k in range(len(run.seconds), upto):
            run.seconds.append(clock.between(marks[k], marks[k + 1]))
            run.indices.append(start + k)
            if reads:
                run.usage.append(clock.usage_between(marks[k], marks[k + 1]))

    t0 = now()
    marks.append(clock.mark())
    issue()
    while True:
        stop = _decide(run.seconds, len(marks) - 1 - len(run.seconds), rule, estimate)
        if stop is not None:
            run.stopped = stop
            break
        issue()
        done = len(marks) - 1 - block
        clock.wait(marks[done])
        read(done)
    clock.sync()
    read(len(marks) - 1)
    run.wall_seconds = now() - t0
    return run


def _decide(seconds: list[float], pending: int, rule: TimingRule,
            estimate: float) -> str | None:
    """Whether the run may end once its ``pending`` steps in flight are read: the stop
    reason, or None to issue another block. The steps in flight count at the median so far
    (``estimate`` before any is read); the precision is that of the steps read (none known
    with fewer than two), computed only once it can decide (it costs the host ~0.1-0.5 ms
    at hundreds of steps)."""
    n = len(seconds) + pending
    if n < min(rule.min_steps, rule.precise_min_steps or rule.min_steps):
        return None
    total = sum(seconds) + pending * (median(seconds) if seconds else estimate)
    if total < min(rule.floor_seconds, rule.precise_seconds or rule.floor_seconds):
        return None
    precision = median_precision(seconds) if len(seconds) >= 2 else float("inf")
    if n < rule.min_steps:  # only a median already known to the target stops this early
        precise = rule.precise_seconds is not None and total >= rule.precise_seconds
        return "target" if precise and precision <= rule.target_rel_precision else None
    return _stop_reason(precision, total, n, rule)


def timed_block(step: Callable[[int], Any], clock: Clock, start: int, count: int,
                usage: list | None = None) -> tuple[list[float], list[int]]:
    """``count`` steps from index ``start`` with a mark between consecutive steps and one
    sync at the end: each step's seconds and its index. ``usage``: a list that gets each
    step's ``clock.usage_between`` (a clock that reads the child's usage). (The data-parallel
    timing's blocks: its ranks sync together.)"""
    marks = [clock.mark()]
    for i in range(start, start + count):
        step(i)
        marks.append(clock.mark())
    clock.sync()
    if usage is not None:
        usage.extend(clock.usage_between(marks[k], marks[k + 1])
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
    """Steps per block of the run (:func:`timed_run`): about ``BLOCK_SECONDS`` of them, at
    least the rule's ``min_block`` and at most ``max_block`` (which wins: a rule that caps
    its blocks, as the determinism audit's, keeps its cap).

    The run is read a block behind what is queued, so it ends one or two blocks after the
    rule is met: blocks of 0.05 s let the adaptive rule stop at its 0.1 s when the median is
    already known. A block is never one step: the stopping rule is asked once a block, and
    each asking costs the host's bookkeeping (when blocks still ended with a sync, a step
    synced on its own also paid the device's tail that a loop overlaps with the next step's
    issue: a full-AdamW model read 110-150 ms a step that way on the H200, 88-108 ms
    pipelined)."""
    if warm_median <= 0:
        return rule.max_block
    return int(min(rule.max_block, max(rule.min_block, BLOCK_SECONDS / warm_median)))


BLOCK_SECONDS = 0.05
MIN_BLOCK = 4  # steps a block, at the least (also the data-parallel timing's, whose blocks sync)
