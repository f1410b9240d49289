"""The device side of a step read off a profiler trace: busy time as the union of the step's
device intervals, kernels per step, the gap the device pays between queued kernels, the
steps split by marker kernels (synthetic Chrome traces; the real profiler behind the
``cuda`` marker)."""

from __future__ import annotations

import pytest

from afford.measure.device_time import sides_from_trace


def _launch(corr, ts, dur=2.0):
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": dur,
            "args": {"correlation": corr}}


def _kernel(corr, ts, dur, cat="kernel", name=None):
    return {"ph": "X", "cat": cat, "name": name or f"k{corr}", "ts": ts, "dur": dur,
            "args": {"correlation": corr}}


def _marker(corr, launch_ts, ts):
    return [_launch(corr, launch_ts), _kernel(corr, ts, 0.05, name="spin_kernel(long)")]


def test_busy_is_the_union_and_steps_lie_between_markers():
    ev = [*_marker(100, 0, 40),
          _launch(1, 10), _launch(2, 20), _launch(3, 30),
          # step 5: kernels 1 and 2 overlap (another stream), then a memset
          _kernel(1, 50, 40), _kernel(2, 70, 40), _kernel(3, 130, 10, cat="gpu_memset"),
          *_marker(101, 100, 141),
          _launch(4, 150), _kernel(4, 300, 20),          # step 6
          *_marker(102, 200, 400),
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 900}]
    s5, s6 = sides_from_trace(ev, first_index=5)
    assert (s5.index, s6.index) == (5, 6)
    assert s5.busy_seconds == pytest.approx((110 - 50 + 10) / 1e6)  # [50,110] U [130,140]
    assert s5.kernels == 2  # the memset is device activity, not a kernel
    assert s5.span_seconds == pytest.approx(90 / 1e6)
    assert s5.host_seconds == pytest.approx(100 / 1e6)  # marker launch to marker launch
    assert (s6.busy_seconds, s6.kernels) == (pytest.approx(20 / 1e6), 1)
    assert s6.host_seconds == pytest.approx(100 / 1e6)


def test_the_queued_gap_counts_only_kernels_launched_before_the_device_freed():
    ev = [*_marker(100, 0, 5),
          _launch(1, 1), _kernel(1, 10, 100),     # ends at 110
          _launch(2, 20), _kernel(2, 112, 50),    # queued (launch ended 22 < 110): gap 2
          _launch(3, 30), _kernel(3, 165, 50),    # queued (32 < 162): gap 3
          _launch(4, 400), _kernel(4, 410, 10)]   # launched after 3 ended: host-bound gap
    (s,) = sides_from_trace(ev)
    assert s.queued_gaps == 2 and s.queued_gap_seconds == pytest.approx(2.5e-6)
    assert s.kernels == 4 and s.busy_seconds == pytest.approx(210e-6)
    assert s.host_seconds is None  # no marker after the last step


def test_no_marker_no_step():
    assert sides_from_trace([_launch(1, 0), _kernel(1, 5, 5)]) == []
    assert sides_from_trace([*_marker(1, 0, 5)]) == []  # a marker with nothing after it


@pytest.mark.cuda
def test_profiled_steps_of_a_real_workload_on_cuda():
    import torch

    from afford.measure.device_time import profile_steps
    from afford.workloads import resolve
    from afford.workloads.base import train_step

    device = torch.device("cuda")
    w = resolve("tinylm", "large-gpu")
    built = w.build(w.shape(256), device, 0)
    sides = profile_steps(lambda i: train_step(built, "bf16", device), 3, 3)
    assert [s["index"] for s in sides] == [4, 5, 6]
    kernels = {s["kernels"] for s in sides}
    assert min(kernels) > 20 and max(kernels) - min(kernels) <= 0.1 * min(kernels)
    for s in sides:
        assert 0 < s["busy_seconds"] <= s["span_seconds"]
    assert all(s["host_seconds"] > 0 for s in sides[:-1])


@pytest.mark.cuda
def test_a_child_profiles_after_it_has_timed_every_point():
    """The profiler slows every later launch of its process, so a child times all its
    points first, then profiles each once more (rebuilt), and the parent merges the device
    side into the point's record."""
    from afford.measure.children import run_child
    from afford.measure.timing import rule_for

    items = [{"key": f"tinylm|bf16|{s}", "workload": "tinylm", "mode": "bf16", "value": s}
             for s in (128, 256)]
    events = []
    got = run_child(2, items, device="cuda", device_class="large-gpu",
                    rule=rule_for("quick"), seed=0, on_event=events.append,
                    options={"profile": True})
    kinds = [e["event"] for e in events]
    assert kinds.count("point") == 2 and "device" not in kinds  # merged, never passed on
    for it in items:
        rec = got[it["key"]]["record"]
        assert rec.get("median_seconds") and rec.get("device_error") is None
        assert [d["index"] for d in rec["device_steps"]] == [2, 3]  # step 0, one unrecorded
        assert all(0 < d["busy_seconds"] <= d["span_seconds"] for d in rec["device_steps"])


@pytest.mark.cuda
def test_a_profiling_child_profiles_only_the_points_it_timed():
    """A point the first two children settled is neither timed nor profiled by the last
    child (the fit reads its busy time off its wall: step_sides.derive_busy); the points it
    timed are profiled after every timing, step 0 and one more step first."""
    from afford.measure.children import run_child
    from afford.measure.timing import rule_for

    items = [{"key": "tinylm|bf16|128", "workload": "tinylm", "mode": "bf16", "value": 128}]
    skip = [{"key": "tinylm|bf16|256", "workload": "tinylm", "mode": "bf16", "value": 256,
             "skipped": "settled by children 0 and 1"}]
    got = run_child(2, items, device="cuda", device_class="large-gpu",
                    rule=rule_for("quick"), seed=0, on_event=lambda e: None,
                    options={"profile": True}, skipped=skip)
    timed, settled = got["tinylm|bf16|128"]["record"], got["tinylm|bf16|256"]["record"]
    assert timed.get("median_seconds") and timed.get("device_error") is None
    assert [d["index"] for d in timed["device_steps"]] == [2, 3]
    assert all(0 < d["busy_seconds"] <= d["span_seconds"] for d in timed["device_steps"])
    assert settled == {"child": 2, "order_position": 1, "skipped": skip[0]["skipped"]}
