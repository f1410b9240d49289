"""Time repeated calls of one function: CUDA events per call on the device, or the host
clock on the CPU. Warm-up calls first and untimed; the timed calls run back to back with a
single sync at the end on CUDA (launch overlap as in a loop), as ``triton.testing.do_bench``
times kernels."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def time_calls(fn: Callable[[], object], device: torch.device, warmup: int,
               reps: int) -> list[float]:
    """Seconds of each of ``reps`` timed calls of ``fn`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
        marks[0].record()
        for k in range(reps):
            fn()
            marks[k + 1].record()
        torch.cuda.synchronize(device)
        return [marks[k].elapsed_time(marks[k + 1]) / 1e3 for k in range(reps)]
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out
