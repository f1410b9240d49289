"""The timing protocol under a fake clock: exact, no device."""

import numpy as np
import pytest

from afford.measure.timing import TimingRule, rule_for, time_point
from afford.workloads.clock import FakeClock


def scripted(clock: FakeClock, durations: dict[int, float], default: float):
    calls = []

    def step(i: int) -> None:
        calls.append(i)
        clock.advance(durations.get(i, default))

    return step, calls


def test_step0_and_warmup_kept_apart_with_indices():
    clock = FakeClock()
    step, calls = scripted(clock, {0: 2.0, 1: 0.5, 2: 0.25}, default=0.0078125)  # exact in binary
    rule = TimingRule(warmup_steps=3, warmup_seconds=0.0, min_steps=12, floor_seconds=0.1,
                      max_floor_seconds=0.1)
    t = time_point(step, clock, rule)
    assert t.step0_seconds == 2.0
    assert t.warmup_seconds == (0.5, 0.25, 0.0078125)
    n = len(t.timed_indices)
    assert t.timed_indices[0] == 4 and list(t.timed_indices) == list(range(4, 4 + n))
    assert all(s == 0.0078125 for s in t.timed_seconds)
    assert t.median_seconds == 0.0078125 and len(t.timed_seconds) >= 12
    assert calls == list(range(len(calls)))


def test_min_steps_and_floor_both_required():
    clock = FakeClock()
    step, _ = scripted(clock, {}, default=0.5)  # slow steps: the count decides
    t = time_point(step, clock, TimingRule(warmup_steps=1, warmup_seconds=0.0, min_steps=12,
                                           floor_seconds=0.1, max_floor_seconds=0.1))
    assert len(t.timed_seconds) == 12
    clock = FakeClock()
    step, _ = scripted(clock, {}, default=0.001)  # fast steps: the floor decides
    t = time_point(step, clock, TimingRule(warmup_steps=1, warmup_seconds=0.0, min_steps=12,
                                           floor_seconds=0.5, max_floor_seconds=0.5))
    assert sum(t.timed_seconds) >= 0.5 and len(t.timed_seconds) >= 500


def test_warmup_runs_to_its_time_budget():
    clock = FakeClock()
    step, _ = scripted(clock, {}, default=0.125)  # binary-exact, so 8 x 0.125 == 1.0
    t = time_point(step, clock, TimingRule(warmup_steps=2, warmup_seconds=1.0, min_steps=12,
                                           floor_seconds=0.1, max_floor_seconds=0.1))
    assert len(t.warmup_seconds) == 8


def lognormal_steps(clock, sigma, seed=0):
    rng = np.random.default_rng(seed)
    return scripted(clock, {i: 0.01 * rng.lognormal(0, sigma) for i in range(100000)}, 0.01)


def test_adaptive_stops_before_its_floor_when_already_precise():
    rule = rule_for("adaptive")
    clock = FakeClock()
    step, _ = scripted(clock, {}, default=0.01)
    quiet = time_point(step, clock, rule)
    assert quiet.reached_target and quiet.stopped == "target" and quiet.block_steps == 5
    # blocks of 5: read 10 with 5 queued, 0.1 s >= 0.1 s, at least the rule's 8 steps and
    # known to 0 %: stop
    assert rule.min_steps == 8 and len(quiet.timed_seconds) == 10
    assert rule.precise_seconds - 1e-9 <= sum(quiet.timed_seconds) < rule.floor_seconds


def test_a_slow_precise_step_stops_at_six_and_a_noisy_one_times_its_eight():
    rule = rule_for("adaptive")
    assert (rule.precise_min_steps, rule.min_steps, rule.min_block) == (6, 8, 3)
    clock = FakeClock()
    step, _ = scripted(clock, {}, default=0.0625)  # a device-bound 62.5 ms step, exact
    quiet = time_point(step, clock, rule)
    # blocks of 3: 6 steps are 0.375 s >= 0.1 s and known to 0 %: stop at 6, not 8
    assert quiet.stopped == "target" and len(quiet.timed_seconds) == 6
    clock = FakeClock()
    rng = np.random.default_rng(1)
    noisy = {i: 0.0625 * (1.0 + 0.05 * (-1) ** i * rng.random()) for i in range(200)}
    step, _ = scripted(clock, noisy, default=0.0625)
    t = time_point(step, clock, rule)
    # +-5 % steps: not known to 1 % by the sixth, so the ordinary rule decides (8 at least)
    assert len(t.timed_seconds) >= 8
    # a rule without the precise stop keeps its minimum count
    from dataclasses import replace
    clock = FakeClock()
    step, _ = scripted(clock, {}, default=0.0625)
    plain = time_point(step, clock, replace(rule, precise_min_steps=None))
    assert len(plain.timed_seconds) >= 8


def test_full_never_stops_before_its_floor_however_precise():
    clock = FakeClock()
    step, _ = scripted(clock, {}, default=0.01)
    t = time_point(step, clock, rule_for("full"))
    assert rule_for("full").precise_seconds is None and sum(t.timed_seconds) >= 3.0


def test_adaptive_extends_until_the_median_is_known_to_one_percent():
    rule = rule_for("adaptive")
    clock = FakeClock()
    step, _ = lognormal_steps(clock, sigma=0.04)  # 1 % after ~1.3 s of 10 ms steps
    t = time_point(step, clock, rule)
    assert t.stopped == "target" and t.precision <= 0.01
    assert rule.floor_seconds + 0.1 < sum(t.timed_seconds) < rule.max_floor_seconds


def test_adaptive_does_not_extend_when_the_target_is_out_of_reach():
    rule = rule_for("adaptive")
    clock = FakeClock()
    step, _ = lognormal_steps(clock, sigma=0.5)
    t = time_point(step, clock, rule)
    assert t.stopped == "unreachable" and not t.reached_target
    assert t.precision > rule.target_rel_precision
    assert sum(t.timed_seconds) < rule.floor_seconds + 0.2


def test_full_always_times_its_floor():
    rule = rule_for("full")
    clock = FakeClock()
    step, _ = scripted(clock, {}, default=0.01)
    t = time_point(step, clock, rule)
    assert sum(t.timed_seconds) >= 3.0


def test_check_runs_after_warmup_and_refuses_before_timing():
    clock = FakeClock()
    step, calls = scripted(clock, {}, default=0.01)

    def check():
        raise RuntimeError("no gradient")

    with pytest.raises(RuntimeError):
        time_point(step, clock, TimingRule(warmup_steps=3, warmup_seconds=0.0), check)
    assert calls == [0, 1, 2, 3]  # step 0 and the warm-up only: nothing timed


def test_adaptive_floor_and_cap_and_block():
    rule = rule_for("adaptive")
    assert (rule.floor_seconds, rule.max_floor_seconds, rule.precise_seconds) == \
        (0.25, 1.5, 0.1)
    # blocks of about 0.05 s, 3 to 16 steps (two blocks reach the precise stop's 6)
    from afford.measure.timing import _block_size, synced_count
    assert _block_size(0.01, rule) == 5 and _block_size(0.001, rule) == 16
    assert _block_size(0.2, rule) == 3  # slow steps: the stopping rule is asked per 3 steps
    assert _block_size(5.0, rule) == 3
    assert _block_size(5.0, TimingRule()) == 4  # a rule's own minimum
    from dataclasses import replace
    assert _block_size(5.0, replace(rule, max_block=2)) == 2  # a cap wins over the minimum
    assert [synced_count(t) for t in (0.001, 0.015, 0.05, 0.2)] == [10, 7, 5, 5]


def test_synced_steps_are_timed_on_the_host_clock_with_a_sync_each():
    from afford.measure.timing import time_synced
    clock = FakeClock()
    syncs = []

    def step(i):
        clock.advance(0.01)
        return i

    def sync(result):
        syncs.append(result)
        clock.advance(0.002)  # the host waits for the device

    seconds, idx = time_synced(step, sync, 40, 3, lambda: clock.t)
    assert seconds == pytest.approx([0.012] * 3) and idx == [40, 41, 42] and syncs == idx


def test_unknown_precision():
    with pytest.raises(ValueError):
        rule_for("sloppy")


def test_adaptive_warmup_is_three_steps():
    rule = rule_for("adaptive")
    assert (rule.warmup_steps, rule.warmup_seconds) == (3, 0.0)
    for seconds in (0.001, 0.25):
        clock = FakeClock()
        step, _ = scripted(clock, {}, default=seconds)
        assert len(time_point(step, clock, rule).warmup_seconds) == 3


# ---- the timed run, pipelined as a loop runs it -------------------------------------------


class QueueClock(FakeClock):
    """A fake clock that notes, at each ``wait`` and ``sync``, how many steps were issued."""

    def __init__(self) -> None:
        super().__init__()
        self.issued = 0
        self.events: list[tuple[str, int, float | None]] = []

    def wait(self, mark):
        super().wait(mark)
        self.events.append(("wait", self.issued, mark))

    def sync(self):
        super().sync()
        self.events.append(("sync", self.issued, None))


def test_the_timed_run_never_drains_the_queue_and_syncs_once_at_its_end():
    from afford.measure.timing import timed_run

    clock = QueueClock()
    durations = {i: 0.001 * (1 + i % 3) for i in range(1000)}

    def step(i):
        clock.issued += 1
        clock.advance(durations[i])

    rule = TimingRule(min_steps=12, floor_seconds=0.05, max_floor_seconds=0.05)
    run = timed_run(step, clock, 10, 6, rule, now=lambda: clock.t, estimate=0.002)
    n = len(run.seconds)
    assert run.indices == list(range(10, 10 + n)) and n % 6 == 0 and n >= 12
    assert run.seconds == pytest.approx([durations[i] for i in run.indices])
    # every wait is for the end of a block, with the next block already queued behind it
    waits = [e for e in clock.events if e[0] == "wait"]
    for k, (_, issued, mark) in enumerate(waits):
        read = 6 * (k + 1)  # steps read after this wait
        assert issued == read + 6
        assert mark == pytest.approx(sum(durations[i] for i in range(10, 10 + read)))
    assert [e[0] for e in clock.events].count("sync") == 1 and clock.events[-1][0] == "sync"
    # the per-step values are consecutive marks: they sum to the run, and the host's
    # wall time of the run (on this clock, with nothing between) is the same span
    assert sum(run.seconds) == pytest.approx(run.wall_seconds)
    assert run.stopped == "floor" and sum(run.seconds) >= 0.05


def test_the_protocol_keeps_the_blocks_and_the_runs_wall_beside_each_step():
    clock = FakeClock()
    step, calls = scripted(clock, {0: 1.0}, default=0.02)
    t = time_point(step, clock, rule_for("adaptive"), now=lambda: clock.t)
    assert t.block_steps == 3 and len(t.timed_seconds) % 3 == 0  # 0.05 s: 2.5 steps, at least 3
    assert list(t.timed_indices) == list(range(4, 4 + len(t.timed_seconds)))
    assert t.run_wall_seconds == pytest.approx(sum(t.timed_seconds))
    assert calls == list(range(len(calls)))  # every step run is a kept reading
    assert clock.syncs == 1 + 3 + 1  # step 0, each warm-up step, the run's end


def test_a_run_whose_first_block_meets_the_count_stops_without_a_reading():
    """The determinism audit's rule (exactly N steps, no floor): one block, one sync."""
    from afford.measure.timing import timed_run

    clock = QueueClock()
    step, _ = scripted(clock, {}, default=0.5)
    rule = TimingRule(warmup_steps=2, warmup_seconds=0.0, min_steps=5, floor_seconds=0.0,
                      max_floor_seconds=0.0, max_block=5)
    run = timed_run(step, clock, 3, 5, rule, now=lambda: clock.t, estimate=0.5)
    assert run.indices == [3, 4, 5, 6, 7] and clock.waits == [] and clock.syncs == 1
