"""CPU timing that survives a busy machine (issue 32, item 0): every timed step on a CPU keeps
the child's CPU time and its threads' wait for a CPU beside its wall time; a point states
the step on an idle box (its free steps) and what the load cost; the noise verdict compares
what the load does not explain. Exact values by hand for the pure part, a fake usage clock
for the protocol, and real children under a bounded burner started by the test itself."""

from __future__ import annotations

import os
import time

import pytest

from afford.certification.stage_time import judged_children, step_seconds
from afford.certification.sweep import assemble_point
from afford.fit.time.contention import (
    child_free_median,
    free_steps,
    idle_step,
    judged_medians,
    wait_share,
)
from afford.fit.time.time_noise import time_verdict
from afford.measure.host_load import UsageClock
from afford.measure.timing import TimingRule, time_point
from afford.workloads.clock import FakeClock
from tests.burners import EVERY_CORE_RULE, FREE_RULE, measure_at_load, tinylm_items


def _ms(seconds: float | None) -> float:
    return seconds * 1e3 if seconds is not None else float("nan")

def test_a_step_is_free_when_its_threads_waited_under_two_percent_of_it():
    walls = [0.010, 0.010, 0.040, 0.012]
    waits = [0.0, 0.0001, 0.060, 0.0003]  # 0 %, 1 %, 150 %, 2.5 %
    assert free_steps(walls, waits) == [0.010, 0.010]
    assert free_steps(walls, waits[:2]) == []  # misaligned records tell nothing


def test_the_idle_step_pools_free_steps_and_needs_five():
    a = ([0.010, 0.011, 0.050], [0.0, 0.0, 0.08])
    b = ([0.012, 0.013, 0.014, 0.090], [0.0, 0.0, 0.0, 0.2])
    assert idle_step([a, b]) == 0.012  # median of 0.010, 0.011, 0.012, 0.013, 0.014
    assert idle_step([a]) is None
    assert child_free_median(*b) == 0.013 and child_free_median(*a) is None


def test_the_wait_share_is_of_the_threads_time():
    assert wait_share([0.1, 0.1], [0.1, 0.1], threads=2) == pytest.approx(0.5)
    assert wait_share([0.1], [], threads=2) is None


def test_the_verdict_compares_free_medians_only_where_every_child_has_one():
    assert judged_medians([0.01, 0.05], [0.010, 0.011]) == [0.010, 0.011]
    assert judged_medians([0.01, 0.05], [0.010, None]) == [0.01, 0.05]
    assert judged_medians([0.01, 0.05], []) == [0.01, 0.05]


def _child(child: int, walls: list[float], waits: list[float]) -> dict:
    return {"record": {"child": child, "order_position": 0, "timed_seconds": walls,
                       "timed_step_indices": list(range(3, 3 + len(walls))),
                       "median_seconds": sorted(walls)[len(walls) // 2],
                       "timed_cpu_seconds": [2 * w for w in walls],
                       "timed_wait_seconds": waits, "threads": 2},
            "shape": {"n": 1}}


def test_a_loaded_child_is_told_apart_and_the_point_is_not_noisy():
    """Child 1 ran at a load that tripled most of its steps (its threads waited), but its
    free steps took what child 0's did: the point's idle step is 10 ms, the load's cost is
    stated, and the children's disagreement that the verdict judges is the free steps'."""
    quiet = _child(0, [0.010] * 12, [0.0] * 12)
    loaded = _child(1, [0.010] * 4 + [0.030] * 8, [0.0] * 4 + [0.040] * 8)
    also = _child(2, [0.0102] * 12, [0.0] * 12)
    p = assemble_point(1, [quiet, loaded, also], None)
    assert p.median_seconds == 0.0102 and p.child_spread > 1.0  # the walls: 200 % apart
    assert p.idle_seconds == 0.010 and p.load_seconds == pytest.approx(0.0002)
    assert p.threads == 2 and p.cpu_step_seconds == pytest.approx(0.0204)
    assert step_seconds(p) == 0.010
    judged = judged_children(p)
    assert judged == [0.010, 0.010, 0.0102]
    assert time_verdict([p.child_medians], []).label != "OK"  # walls: REMEASURE
    assert time_verdict([judged], []).label == "UNJUDGED"  # nothing noisy left to judge


def test_a_point_without_free_steps_keeps_its_walls():
    loaded = [_child(c, [0.03] * 12, [0.04] * 12) for c in range(3)]
    p = assemble_point(1, loaded, None)
    assert p.idle_seconds is None and p.load_seconds is None
    assert p.wait_share == pytest.approx(0.04 / (2 * 0.03))
    assert step_seconds(p) == p.median_seconds and judged_children(p) == p.child_medians


class FakeUsageClock(FakeClock):
    """The fake clock with usage: the CPU time advances with the wall, the wait as told."""

    def __init__(self) -> None:
        super().__init__()
        self.waited = 0.0

    def mark(self):
        return (self.t, self.waited)

    def between(self, a, b) -> float:
        return b[0] - a[0]

    def usage_between(self, a, b):
        return 2 * (b[0] - a[0]), b[1] - a[1]


def test_the_protocol_keeps_each_steps_usage_beside_its_wall():
    clock = FakeUsageClock()

    def step(i: int) -> None:
        clock.advance(0.125 if i % 2 else 0.25)
        clock.waited += 0.0625 if i % 2 == 0 else 0.0

    t = time_point(step, clock, TimingRule(warmup_steps=1, warmup_seconds=0.0, min_steps=12,
                                           floor_seconds=0.1, max_floor_seconds=0.1))
    assert len(t.timed_cpu_seconds) == len(t.timed_wait_seconds) == len(t.timed_seconds)
    for i, wall, cpu, wait in zip(t.timed_indices, t.timed_seconds, t.timed_cpu_seconds,
                                  t.timed_wait_seconds):
        assert cpu == 2 * wall and wait == (0.0625 if i % 2 == 0 else 0.0)


def test_the_usage_clock_reads_outside_the_timed_interval_and_sees_cpu_and_sleep():
    clock = UsageClock()
    a = clock.mark()
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    b = clock.mark()
    time.sleep(0.05)
    c = clock.mark()
    clock.close()
    cpu_busy, wait_busy = clock.usage_between(a, b)
    cpu_sleep, _ = clock.usage_between(b, c)
    assert cpu_busy >= 0.05 and cpu_sleep < 0.02
    assert clock.between(a, c) >= 0.1
    assert b[0] <= b[2]  # the usage is read between the step's end and the next start
    if os.path.exists("/proc/self/task"):
        assert wait_busy is not None and wait_busy >= 0.0


# ---------------------------------------------------------------- real children under load


@pytest.mark.slow
def test_under_busy_loops_every_step_keeps_its_wait_and_the_point_states_its_free_steps():
    """tinylm at 4 x 32 and 4 x 128 in a real child with no busy loop and with one on every
    core beside it (on top of whatever else runs on this box; each figure printed with the
    load average). Every timed step carries its CPU time and its threads' wait; with a busy
    loop on every core the threads wait at least a quarter of their time; and the point
    assembled from the child's records states as its idle step the median of exactly the
    steps that did not wait, and as the load's cost the rest of its median.

    Whether the idle steps of different loads agree is a property of the box, not of this
    code (a thread that never waits still runs slower beside a busy loop on a core that
    shares its cache or its physical core): ``benches/contention_idle.py`` measures it.

    30 timed steps with no busy loop; with a busy loop on every core, the protocol's own 12:
    a step there always waits, and its wait share is a ratio of each step's own times."""
    cores = os.cpu_count() or 1
    seen = {}
    for n in (0, cores):
        got, load = measure_at_load(n, tinylm_items(), EVERY_CORE_RULE if n else FREE_RULE)
        assert set(got) == {"tinylm|fp32|32", "tinylm|fp32|128"}
        for key, ev in got.items():
            p = assemble_point(int(key.rsplit("|", 1)[1]), [ev], None)
            rec = ev["record"]
            print(f"busy loops {n} load {load:5.2f} {key}: wall {_ms(p.median_seconds):7.2f} "
                  f"ms, wait share {p.wait_share if p.wait_share is not None else float('nan'):.2f}"
                  f", free steps {len(free_steps(rec['timed_seconds'], rec['timed_wait_seconds']))}"
                  f"/{len(rec['timed_seconds'])}, idle {_ms(p.idle_seconds):7.2f} ms")
            assert len(rec["timed_cpu_seconds"]) == len(rec["timed_seconds"])
            assert rec["threads"] >= 1
            if not os.path.exists("/proc/self/task/"):
                continue  # no per-thread schedstat here: the waits are not recorded
            assert len(rec["timed_wait_seconds"]) == len(rec["timed_seconds"])
            idle = idle_step([(rec["timed_seconds"], rec["timed_wait_seconds"])])
            assert p.idle_seconds == idle
            if idle is not None:
                assert p.load_seconds == pytest.approx(max(0.0, p.median_seconds - idle))
            seen[(n, key)] = p
    if cores <= 2 and seen:  # a busy loop on every core and the child's own threads
        for key in ("tinylm|fp32|32", "tinylm|fp32|128"):
            assert seen[(cores, key)].wait_share >= 0.25, key


def test_the_certificate_states_the_idle_step_and_what_the_load_cost():
    """The summary's line per workload, every figure tagged: the range of the wait shares,
    and at the point the load cost most, its idle step beside the measured one."""
    from afford.cli.certify import load_lines
    from afford.figures.noise import load_line
    from afford.schema.time_section import HostLoad
    from tests.synthetic import make_cert

    cert = make_cert()
    tiny = cert.workloads[1]
    pts = [p.model_copy(update={"cpu_step_seconds": 2 * p.median_seconds, "threads": 2,
                                "wait_share": share})
           for p, share in zip(tiny.points, (0.05, 0.5, 0.25, 0.1))]
    top = pts[1]
    pts[1] = top.model_copy(update={"idle_seconds": top.median_seconds / 4,
                                    "load_seconds": top.median_seconds * 3 / 4})
    cert.workloads[1] = tiny.model_copy(update={"points": pts})
    (line,) = load_lines(cert)
    assert line.startswith(f"tinylm ({tiny.mode}): its children's threads waited for a CPU "
                           "5.00% M to 50.00% M of their time")
    assert f"free steps at 1 of {len(pts)} points" in line
    assert " idle, " in line and " measured, the load " in line and line.endswith(" C")
    cert.workloads[1] = tiny.model_copy(update={"points": [
        p.model_copy(update={"idle_seconds": None, "load_seconds": None}) for p in pts]})
    assert "could not be told from it" in load_lines(cert)[0]
    quiet = HostLoad(at="before", load_average=(0.2, 0.2, 0.2), cpu_count=2)
    text, busy = load_line(cert.model_copy(update={"host_load": [quiet]}))
    assert busy and "waited for a CPU 5% to 50% of their time" in text
