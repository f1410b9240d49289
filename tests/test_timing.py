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


def test_adaptive_stops_at_floor_when_already_precise():
    rule = rule_for("adaptive")
    clock = FakeClock()
    step, _ = scripted(clock, {}, default=0.01)
    quiet = time_point(step, clock, rule)
    assert quiet.reached_target and quiet.stopped == "target"
    assert rule.floor_seconds <= sum(quiet.timed_seconds) < rule.floor_seconds + 0.2


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
    assert (rule.floor_seconds, rule.max_floor_seconds) == (0.25, 1.5)
    # blocks stay about 0.125 s long (16 steps at most), as before the floor moved
    from afford.measure.timing import _block_size, synced_count
    assert _block_size(0.01, rule) == 12 and _block_size(0.001, rule) == 16
    assert _block_size(0.2, rule) == 4  # slow steps still pipeline: never synced alone
    assert _block_size(5.0, rule) == 4
    from dataclasses import replace
    assert _block_size(5.0, replace(rule, max_block=3)) == 3  # a cap wins over the minimum
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


def test_adaptive_warmup_is_three_steps_and_a_tenth_of_a_second():
    rule = rule_for("adaptive")
    assert (rule.warmup_steps, rule.warmup_seconds) == (3, 0.1)
    clock = FakeClock()
    step, _ = scripted(clock, {}, default=0.015625)  # 7 x 1/64 = 0.109 >= 0.1 > 6 x 1/64
    assert len(time_point(step, clock, rule).warmup_seconds) == 7
    clock = FakeClock()
    step, _ = scripted(clock, {}, default=0.25)  # slow steps: the count decides
    assert len(time_point(step, clock, rule).warmup_seconds) == 3
