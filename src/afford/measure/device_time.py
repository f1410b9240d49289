"""The two sides of a warm step on a GPU: the device's busy time and the host's issue time.

The host enqueues a step's kernels asynchronously, so a pipelined warm step costs about the
larger of the host's time to issue them and the device's time to run them. On a fast card
a mid-size model's step at short sequences is bound by the host (about 2,000 kernel
launches a step for a 12-layer transformer), and its wall time then says nothing about how
the work grows; the device's own busy time does, smooth in the shape even under the floor
(docs/DESIGN.md section 4).

:func:`profile_steps` runs a few warm steps under ``torch.profiler`` with CUDA activity
only (no host-side op recording, so the host is barely slowed), a marker kernel
(``torch.cuda._sleep``, a spin of a few cycles) launched before each step, exports the
Chrome trace and reads it with :func:`sides_from_trace`, which is pure and runs on a CPU on
a recorded or synthetic trace. The device runs a step's work in launch order on its stream,
so the activity between two markers is one step's. For each step:

- ``busy_seconds``: the union of the intervals of the step's device activity (kernels,
  memcpy, memset; the marker itself left out);
- ``kernels``: the step's kernel count;
- ``span_seconds``: its first device start to its last device end;
- ``queued_gap_seconds``: the median idle time between two consecutive device activities of
  the step where the second had been launched before the first ended (the device was not
  waiting on the host): the device's own gap per kernel boundary, which a device-bound step
  pays on top of its busy time;
- ``host_seconds``: from the launch of the step's marker to the next one's, on the host (a
  reading under the profiler, kept beside the unprofiled wall times).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

MARKER_NAMES = ("spin_kernel", "_sleep")  # torch.cuda._sleep's kernel
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")


@dataclass(frozen=True)
class StepSides:
    """One profiled step's readings (seconds)."""

    index: int
    busy_seconds: float
    kernels: int
    span_seconds: float
    queued_gap_seconds: float | None
    queued_gaps: int
    host_seconds: float | None  # None for the last step (no next marker)


def _launches(events: Sequence[dict]) -> dict[int, tuple[float, float]]:
    """correlation id -> (host start us, host end us) of its launch call."""
    out = {}
    for e in events:
        if e.get("cat") in LAUNCH_CATEGORIES and e.get("ph") == "X":
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                ts = float(e["ts"])
                out[int(corr)] = (ts, ts + float(e.get("dur", 0.0)))
    return out


def _is_marker(e: dict) -> bool:
    return e.get("cat") == "kernel" and any(m in str(e.get("name", "")) for m in MARKER_NAMES)


def _union(intervals: Iterable[tuple[float, float]]) -> float:
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def sides_from_trace(events: Sequence[dict], first_index: int = 0) -> list[StepSides]:
    """Per step its device busy time, kernel count, span, queued gap and host time, from a
    Chrome trace's events (torch.profiler's ``traceEvents``; microseconds). Steps are the
    device activity between consecutive marker kernels, numbered from ``first_index``; the
    activity after the last marker is the last step."""
    launches = _launches(events)
    acts = []  # (start, end, launch end or None, is kernel, is marker, launch start)
    for e in events:
        if e.get("cat") not in DEVICE_CATEGORIES or e.get("ph") != "X":
            continue
        corr = (e.get("args") or {}).get("correlation")
        launch = launches.get(int(corr)) if corr is not None else None
        ts = float(e["ts"])
        acts.append((ts, ts + float(e.get("dur", 0.0)), launch, e.get("cat") == "kernel",
                     _is_marker(e)))
    acts.sort(key=lambda a: a[0])
    marks = [i for i, a in enumerate(acts) if a[4]]
    out = []
    for j, m in enumerate(marks):
        stop = marks[j + 1] if j + 1 < len(marks) else len(acts)
        step = acts[m + 1:stop]
        if not step:
            continue
        nxt_launch = acts[stop][2] if stop < len(acts) else None
        here = acts[m][2]
        host = (nxt_launch[0] - here[0]) / 1e6 if here and nxt_launch else None
        gaps = [b[0] - a[1] for a, b in zip(step, step[1:])
                if b[2] is not None and b[2][1] < a[1] and b[0] >= a[1]]
        out.append(StepSides(
            index=first_index + j, busy_seconds=_union((a[0], a[1]) for a in step) / 1e6,
            kernels=sum(1 for a in step if a[3]),
            span_seconds=(max(a[1] for a in step) - step[0][0]) / 1e6,
            queued_gap_seconds=statistics.median(gaps) / 1e6 if gaps else None,
            queued_gaps=len(gaps), host_seconds=host))
    return out


def profile_steps(step: Callable[[int], Any], start: int, count: int) -> list[dict]:
    """Run steps ``start .. start + count`` under the profiler (CUDA activity), a marker
    kernel before each and after the last, a sync at the end; the :class:`StepSides` of
    steps ``start + 1 ..`` as dicts. The first step under a fresh profiler pays its
    start-up, so step ``start`` runs before the recording, unrecorded."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    step(start)  # the profiler's first-use costs stay outside the recorded steps
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(start + 1, start + 1 + count):
            torch.cuda._sleep(MARKER_CYCLES)
            step(i)
        torch.cuda._sleep(MARKER_CYCLES)
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json", prefix="afford-trace-")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            events = json.load(f).get("traceEvents", [])
    finally:
        os.unlink(path)
    return [asdict(s) for s in sides_from_trace(events, first_index=start + 1)]


MARKER_CYCLES = 64  # a spin of a few dozen cycles: the marker costs the device ~0.05 us
