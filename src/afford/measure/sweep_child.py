"""One independent child process: times every sweep point it is given, in the order given.

Run as ``python -m afford.measure.sweep_child [--prewarm cuda:N]`` with a JSON job on stdin.
Results go out as JSON lines on the process's original stdout, one per point as soon as it
is done (so a crash loses only the point in flight); anything a workload prints is sent to
stderr instead.

First thing, before anything imports torch, the child times its own imports
(:func:`afford.measure.probes.startup.measure_imports`), so every sweep child is also a
fresh-process startup run: its ``start`` event carries the import times and the wall-clock
time (``time.time()``) at which it was ready; the parent, which noted the wall-clock time of
the spawn, gets the process time from the two. Hence this module imports torch (and the
afford modules that import torch or numpy) inside functions only.

``--early`` (the child the console script spawns as ``afford certify`` begins: its imports
overlap the parent's, so its startup run is contended and counts towards no figure) skips
the transformers import unless a ``--warm`` workload needs it.

``--describe`` (the early child, when a workload is a transformers model): its first line,
before it reads its job, describes each ``hf:`` spec's config (:func:`describe`), which the
parent plans from instead of importing transformers itself.

``--prewarm cuda:N`` (given to children the parent spawns ahead, while the previous child
measures; ``auto``, given to the first child that the console script spawns before it knows
the device, means CUDA when present): before reading its job, the child creates the CUDA
context (timed like the startup runs: ``torch.cuda.init()`` and a first allocation) and a
cuBLAS handle (one tiny matmul), so step 0 of its first point no longer includes
process-level CUDA start-up.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any, TextIO

from afford.measure.probes.startup import measure_imports

if TYPE_CHECKING:
    import torch

    from afford.measure.timing import TimingRule
    from afford.workloads.base import Workload


def _emit(out: TextIO, event: dict[str, Any]) -> None:
    out.write(json.dumps(event) + "\n")
    out.flush()


def point_shape(workload: Workload, item: dict) -> dict[str, int]:
    """The shape of one item: the workload's shape at the sweep value, with the item's
    ``batch`` in its ``batch_key`` when the time design gives one; checked."""
    from afford.workloads.base import validate_shape

    shape = validate_shape(workload, int(item["value"]))
    if item.get("batch") is not None:
        key = item["batch_key"]
        if key not in shape:
            raise ValueError(f"shape {shape} has no batch key {key!r}")
        batch = int(item["batch"])
        if batch <= 0:
            raise ValueError(f"batch {batch} is not a positive integer")
        shape = {**shape, key: batch}
    return shape


def _capped(rule: TimingRule, cap: float | None) -> TimingRule:
    """The rule with its extension capped at ``cap`` seconds of timed steps (an item's
    ``cap``: the step-time design's shapes), never below its floor."""
    if not cap:
        return rule
    from dataclasses import replace

    return replace(rule, max_floor_seconds=max(rule.floor_seconds,
                                               min(rule.max_floor_seconds, float(cap))))


def _usage() -> tuple[float, int]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime, ru.ru_nivcsw


def run_point(workload: Workload, item: dict, device: torch.device, rule: TimingRule,
              seed: int) -> dict:
    """Time one point; return the ChildPoint fields plus shape, params and tokens. With
    ``item["synced"]`` also a short run of steps with a host sync after each; with
    ``item["count_flops"]`` the FLOPs of one step, counted after the timing; ``item["cap"]``
    caps the adaptive timing's extension (seconds of timed steps)."""
    import torch

    from afford.measure.host_load import UsageClock
    from afford.measure.memory_peaks import MemoryWindow, is_oom
    from afford.measure.timing import synced_count, time_point, time_synced
    from afford.workloads.base import (
        WorkloadRefused,
        check_gradients,
        count_frozen,
        count_params,
        train_step,
    )
    from afford.workloads.clock import clock_for

    clock = clock_for(device.type) if device.type == "cuda" else UsageClock()
    window = MemoryWindow(device)
    window.open()
    record: dict[str, Any] = {"child": item["child"], "order_position": item["position"]}
    if item.get("round"):
        record["round"] = item["round"]
    extra: dict[str, Any] = {}
    built = None
    t0 = time.perf_counter()
    try:
        shape = point_shape(workload, item)
        extra["shape"] = shape
        built = workload.build(shape, device, seed)
        extra["params"] = count_params(built.model)
        extra["frozen_params"] = count_frozen(built.model)
        extra["tokens_per_step"] = int(built.tokens_per_step)
        extra["vocab"] = None if built.vocab is None else int(built.vocab)
        losses: dict[int, Any] = {}
        checked: dict[str, int] = {}

        def step(i: int) -> Any:
            loss = train_step(built, item["mode"], device)
            if i == 0:
                losses[0] = loss
            return loss

        def check() -> None:
            checked["n"] = check_gradients(built.model)

        cpu0, switches0 = _usage()
        timing = time_point(step, clock, _capped(rule, item.get("cap")), check)
        cpu1, switches1 = _usage()
        record.update(
            step0_seconds=timing.step0_seconds, warmup_seconds=list(timing.warmup_seconds),
            timed_seconds=list(timing.timed_seconds),
            timed_step_indices=list(timing.timed_indices),
            timed_block_steps=timing.block_steps, timed_run_seconds=timing.run_wall_seconds,
            median_seconds=timing.median_seconds, precision=_finite_or_none(timing.precision),
            reached_target=timing.reached_target, stopped=timing.stopped,
            first_loss=float(losses[0]),
            grads_checked=checked["n"], cpu_seconds=cpu1 - cpu0,
            involuntary_switches=switches1 - switches0)
        if timing.timed_cpu_seconds:  # a CPU: each step's own accounting beside its wall
            record.update(timed_cpu_seconds=list(timing.timed_cpu_seconds),
                          timed_wait_seconds=list(timing.timed_wait_seconds),
                          threads=torch.get_num_threads())
        if item.get("synced") and device.type == "cuda":
            secs, idx = time_synced(step, lambda loss: float(loss), timing.timed_indices[-1] + 1,
                                    synced_count(timing.median_seconds), time.perf_counter)
            record.update(synced_seconds=secs, synced_step_indices=idx)
        record.update(window.close())
        if item.get("count_flops"):
            from afford.measure.probes.flops import count_flops_or_why

            record["flops"] = count_flops_or_why(built, item["mode"], device)
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
        built = None
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        if isinstance(clock, UsageClock):
            clock.close()
    record["wall_seconds"] = time.perf_counter() - t0
    return {"record": record, **extra}


# warm steps profiled per point for the device side (after one unrecorded), and the steps of
# a rebuilt point before those: step 0 only (its optimizer state is made; the profiler's own
# unrecorded step is the second). The device's busy time varies 0.2-0.7 % over a point's
# profiled steps, and the median of two moved it at most 0.3 % from that of three (H100/H200,
# 2026-12-06 certificates); each step less saves a step a point in the certify's last child.
# A child profiles only the shapes it timed: a shape the process never ran read 5-10 % more
# busy time in the first steps after step 0 in two of about 60 such profiles on an H100
# (2026-12-06), and warming it longer cost the certify more than the profile was worth (a
# point the first two children settled in the work regime has its busy time read off its
# wall instead: afford.fit.time.step_sides.derive_busy)
PROFILED_STEPS = 2
PROFILE_WARMUP = 1


def profile_point(workload: Workload, item: dict, device: torch.device, seed: int,
                  warmup: int = PROFILE_WARMUP) -> dict:
    """The device side of a point (:func:`afford.measure.device_time.profile_steps`): the
    shape built again, ``warmup`` steps (:data:`PROFILE_WARMUP`), then ``PROFILED_STEPS``
    under the profiler.

    A child profiles only after it has timed every point of its job: once the profiler
    has run in a process, CUDA's profiling interface stays attached (Kineto does not
    finalise CUPTI by default; pytorch/pytorch#144455) and every later kernel launch costs
    more, so a host-bound step timed after a profile reads slower than the user's loop
    runs it. A failure is recorded, never fatal: the timing stands."""
    import torch

    from afford.measure.device_time import profile_steps
    from afford.workloads.base import train_step

    record: dict[str, Any] = {}
    built = None
    try:
        built = workload.build(point_shape(workload, item), device, seed)

        def step(i: int) -> Any:
            return train_step(built, item["mode"], device)

        for i in range(warmup):
            step(i)
        record["device_steps"] = profile_steps(step, warmup, PROFILED_STEPS)
    except Exception as exc:  # the profiler is optional equipment: the timing stands
        record["device_error"] = error_text(exc)
    finally:
        built = None
        gc.collect()
        torch.cuda.empty_cache()
    return record


def _finite_or_none(x: float) -> float | None:
    return x if x == x and x not in (float("inf"), float("-inf")) else None


def error_text(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {tb[-1].filename.rsplit(os.sep, 1)[-1]}:{tb[-1].lineno})" if tb else ""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}{where}"[:2000]


def prewarm(device: str) -> dict:
    """Do a process's one-time CUDA start-up now, not in step 0 of the first point.
    ``cuda_init_seconds`` is timed as in the startup runs (``torch.cuda.init()``, a first
    allocation, a sync); ``prewarm_seconds`` is the rest: a first tiny matmul in fp32 and in
    bf16 with a bias (the cuBLAS handle; cuBLAS/cuBLASLt load lazily on first use) and one
    fused AdamW step on one parameter (the optimizer's first construction imports
    ``torch._dynamo``, ~1-2 s)."""
    import torch

    t0 = time.perf_counter()
    torch.cuda.init()
    x = torch.ones(8, 8, device=device)
    torch.cuda.synchronize(device)
    out = {"cuda_init_seconds": time.perf_counter() - t0}
    t0 = time.perf_counter()
    y = x @ x
    if torch.cuda.is_bf16_supported():
        xb = x.to(torch.bfloat16)
        y = y + torch.nn.functional.linear(xb, xb, xb[0]).float()
    p = torch.nn.Parameter(y.sum().reshape(1))
    p.grad = torch.ones_like(p)
    torch.optim.AdamW([p], fused=True).step()
    float(p.sum())
    out["prewarm_seconds"] = time.perf_counter() - t0
    return out


def warm(args: list[str]) -> None:
    """Resolve the workloads named by ``--warm SPEC`` arguments now, while the process waits
    for its job: their imports and configs (transformers: seconds a process) are then
    loaded when the job's own resolve runs. Failures are left to that resolve to report."""
    specs = _warm_specs(args)
    if not specs:
        return
    from afford.workloads import resolve

    for spec in specs:
        try:
            resolve(spec, "large-gpu")
        except Exception:  # the job's resolve reports it, as an input error or a failed point
            pass


def describe(args: list[str]) -> dict[str, dict]:
    """``--describe``: the configs of the ``hf:`` specs named by ``--warm`` arguments, by
    spec (:func:`afford.workloads.hf_models.describe`), sent as this process's first line
    so certify's parent plans without importing transformers."""
    from afford.workloads.hf_models import describe as one

    return {s: one(s) for s in _warm_specs(args) if s.startswith("hf:")}


def _warm_specs(args: list[str]) -> list[str]:
    """The workload specs named by ``--warm SPEC`` arguments."""
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--warm"]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # workload (and import) prints go to stderr; stdout carries our JSON lines
    sys.stdout = sys.stderr
    # first thing: torch is not imported yet; the early child (contended: its run counts
    # towards no startup figure) imports transformers only for a workload that needs it
    imports = measure_imports(None, transformers="--early" not in args or "--warm" in args)
    ready = time.time()  # wall clock: the parent noted the spawn on the same clock
    from afford.core.bytecode import in_use

    start: dict[str, Any] = {"event": "start", "pid": os.getpid(), **imports,
                             "ready_wall": ready, "prewarmed": False,
                             "bytecode_cache": in_use()}
    target = args[args.index("--prewarm") + 1] if "--prewarm" in args else None
    if target == "auto":  # spawned before the parent knew its device: CUDA when present
        import torch

        target = "cuda" if torch.cuda.is_available() else None
    if "--describe" in args:  # before the CUDA warm-up: the parent waits on this line
        _emit(out, {"event": "described", "configs": describe(args)})
    if target:
        start.update(prewarm(target), prewarmed=True)
        start["ready_wall"] = time.time()  # the process time then includes cuda_init_seconds
    warm(args)
    import torch

    from afford.measure.timing import TimingRule
    from afford.workloads import resolve

    gc.freeze()  # the imports' objects are no garbage: each point's gc pass skips them
    job = json.load(sys.stdin)
    device = torch.device(job["device"])
    rule = TimingRule(**job["rule"])
    _emit(out, {**start, "child": job["child"]})
    workloads: dict[str, Workload] = {}
    options = {k: job[k] for k in ("synced", "count_flops", "round", "profile") if job.get(k)}
    for item in job["items"]:
        spec = item["workload"]
        if spec not in workloads:
            workloads[spec] = resolve(spec, job["device_class"])
        _emit(out, {"event": "begin", "key": item["key"]})
        result = run_point(workloads[spec], {**options, **item}, device, rule, int(job["seed"]))
        _emit(out, {"event": "point", "key": item["key"], **result})
    if options.get("profile") and device.type == "cuda":  # after every timing (profile_point)
        for item in job["items"]:
            rec = profile_point(workloads[item["workload"]], {**options, **item}, device,
                                int(job["seed"]))
            _emit(out, {"event": "device", "key": item["key"], "record": rec})
    _emit(out, {"event": "done", "child": job["child"]})
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
