"""One independent child process: times every sweep point it is given, in the order given.

Run as ``python -m afford.measure.child`` with a JSON job on stdin. Results go out as JSON
lines on the process's original stdout, one per point as soon as it is done (so a crash
loses only the point in flight); anything a workload prints is sent to stderr instead.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import traceback
from typing import Any, TextIO

import torch

from afford.measure.memory import MemoryWindow, is_oom
from afford.measure.timing import CudaClock, HostClock, TimingRule, time_point
from afford.workloads import resolve
from afford.workloads.base import (Workload, WorkloadRefused, check_gradients, count_params,
                                   train_step, validate_shape)


def _emit(out: TextIO, event: dict[str, Any]) -> None:
    out.write(json.dumps(event) + "\n")
    out.flush()


def run_point(workload: Workload, item: dict, device: torch.device, rule: TimingRule,
              seed: int) -> dict:
    """Time one point; return the ChildPoint fields plus shape, params and tokens."""
    clock = CudaClock() if device.type == "cuda" else HostClock()
    window = MemoryWindow(device)
    window.open()
    record: dict[str, Any] = {"child": item["child"], "order_position": item["position"]}
    extra: dict[str, Any] = {}
    built = None
    t0 = time.perf_counter()
    try:
        shape = validate_shape(workload, int(item["value"]))
        extra["shape"] = shape
        built = workload.build(shape, device, seed)
        extra["params"] = count_params(built.model)
        extra["tokens_per_step"] = int(built.tokens_per_step)
        losses: dict[int, torch.Tensor] = {}
        checked: dict[str, int] = {}

        def step(i: int) -> None:
            loss = train_step(built, item["mode"], device)
            if i == 0:
                losses[0] = loss

        def check() -> None:
            checked["n"] = check_gradients(built.model)

        timing = time_point(step, clock, rule, check)
        record.update(
            step0_seconds=timing.step0_seconds, warmup_seconds=list(timing.warmup_seconds),
            timed_seconds=list(timing.timed_seconds),
            timed_step_indices=list(timing.timed_indices),
            median_seconds=timing.median_seconds, precision=_finite_or_none(timing.precision),
            reached_target=timing.reached_target, stopped=timing.stopped, first_loss=float(losses[0]),
            grads_checked=checked["n"])
        record.update(window.close())
        if built.report is not None:
            extra["report"] = built.report()
    except WorkloadRefused as exc:
        record["refused"] = str(exc)
    except Exception as exc:  # a point that fails is recorded and the sweep goes on
        record["oom"] = is_oom(exc)
        record["error"] = error_text(exc)
        if record["oom"] and device.type == "cuda":
            record["peak_reserved_bytes"] = int(torch.cuda.max_memory_reserved(device))
            record["peak_allocated_bytes"] = int(torch.cuda.max_memory_allocated(device))
    finally:
        del built
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    record["wall_seconds"] = time.perf_counter() - t0
    return {"record": record, **extra}


def _finite_or_none(x: float) -> float | None:
    return x if x == x and x not in (float("inf"), float("-inf")) else None


def error_text(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {tb[-1].filename.rsplit(os.sep, 1)[-1]}:{tb[-1].lineno})" if tb else ""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}{where}"[:2000]


def main() -> int:
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # workload prints go to stderr; stdout carries only our JSON lines
    sys.stdout = sys.stderr
    job = json.load(sys.stdin)
    device = torch.device(job["device"])
    rule = TimingRule(**job["rule"])
    _emit(out, {"event": "start", "child": job["child"], "pid": os.getpid()})
    workloads: dict[str, Workload] = {}
    for item in job["items"]:
        spec = item["workload"]
        if spec not in workloads:
            workloads[spec] = resolve(spec, job["device_class"])
        _emit(out, {"event": "begin", "key": item["key"]})
        result = run_point(workloads[spec], item, device, rule, int(job["seed"]))
        _emit(out, {"event": "point", "key": item["key"], **result})
    _emit(out, {"event": "done", "child": job["child"]})
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
