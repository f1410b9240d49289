"""The memory stage's one child process: peak memory of a short training loop per shape.

Run as ``python -m afford.measure.memory_sweep`` with a JSON job on stdin (the same style
as :mod:`afford.measure.sweep_child`): JSON lines out, one per shape as soon as it is done; the
parent never touches the device. For each shape the child opens a
:class:`~afford.measure.memory_peaks.MemoryWindow` (peak stats reset after ``empty_cache`` on
CUDA; ``VmHWM`` reset on Linux CPUs), builds the workload, runs ``steps`` whole training
steps (the optimizer state appears at the end of step 0, so step 0 alone is *not* a
training loop) and reads the cumulative peak after every step. After the loop it counts
the states tensor by tensor (weights, gradients, optimizer state; shared storages once).

On a CPU the parent starts the child with glibc's ``MALLOC_MMAP_THRESHOLD_`` fixed at
64 KiB, which also switches off glibc's sliding threshold, so every large tensor is its own
``mmap`` returned to the system when freed (mallopt(3)); otherwise freed blocks stay in the
heap and one shape's leftovers inflate the next shape's peak RSS. On a CPU the child also
runs one intra-op thread: it measures memory, not time, and idle OpenMP threads spinning on
a busy machine cost ten times the work.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, TextIO

CPU_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "131072"}
CHILD_TIMEOUT_SECONDS = 600.0


def states_bytes(model, optimizer) -> int:
    """Bytes of parameters, their gradients and every optimizer-state tensor, each storage
    counted once."""
    import torch

    seen: set[tuple[int, str]] = set()
    total = 0

    def add(t: object) -> None:
        nonlocal total
        if not isinstance(t, torch.Tensor):
            return
        st = t.untyped_storage()
        key = (st.data_ptr(), str(t.device))
        if key in seen and st.data_ptr() != 0:
            return
        seen.add(key)
        total += st.nbytes()

    for p in model.parameters():
        add(p)
        add(p.grad)
    for state in optimizer.state.values():
        for v in state.values():
            add(v)
    return total


def frozen_bytes(model) -> int:
    """Bytes of the frozen parameters' weights (``requires_grad`` off), each storage once:
    the part of the states that has no gradient and no optimizer state."""
    seen: set[int] = set()
    total = 0
    for p in model.parameters():
        st = p.untyped_storage()
        if not p.requires_grad and st.data_ptr() not in seen:
            seen.add(st.data_ptr())
            total += st.nbytes()
    return total


def measure_shape(workload, item: dict, device, seed: int) -> dict:
    """Peaks after each of ``item['steps']`` training steps of one shape."""
    import torch

    from afford.measure.memory_peaks import MemoryWindow

    cuda = device.type == "cuda"
    window = MemoryWindow(device)
    window.open()
    rec: dict[str, Any] = {"allocated_by_step": [], "reserved_by_step": [], "rss_by_step": []}
    traced = cuda and bool(item.get("trace"))
    if traced:
        from afford.measure import alloc_trace

        seed_segments = alloc_trace.start(device)
    try:
        built = _steps(workload, item, device, seed, window, rec, cuda)
    finally:
        if traced:
            rec["trace"] = alloc_trace.stop(device, item["dims"]["B"], item["dims"]["s"],
                                            seed_segments)
    rec["states_bytes"] = states_bytes(built.model, built.optimizer)
    rec["frozen_bytes"] = frozen_bytes(built.model)
    rec["steps"] = int(item["steps"])
    rec["baseline_rss_bytes"] = window.baseline_rss_bytes
    if cuda:
        rec["fresh_state"] = window.fresh
        torch.cuda.synchronize(device)
        rec["resting_allocated_bytes"] = int(torch.cuda.memory_allocated(device))
    del built
    return rec


def _steps(workload, item: dict, device, seed: int, window, rec: dict, cuda: bool):
    """Build the shape and run its training steps, reading the cumulative peaks after each."""
    from afford.workloads.base import count_frozen, count_params, train_step

    built = workload.build(item["shape"], device, seed)
    rec["params"] = count_params(built.model)
    rec["frozen_params"] = count_frozen(built.model)
    for _ in range(int(item["steps"])):
        train_step(built, item["mode"], device)
        peak = window.close()  # cumulative peak so far; reading it changes nothing
        if cuda:
            rec["allocated_by_step"].append(peak["peak_allocated_bytes"])
            rec["reserved_by_step"].append(peak["peak_reserved_bytes"])
        else:
            rec["rss_by_step"].append(peak["peak_rss_bytes"])
            rec["swap_bytes"] = peak.get("swap_bytes")
        rec["memory_source"] = peak["memory_source"]
    return built


def run_item(workloads: dict, item: dict, device, seed: int) -> dict:
    """One shape; a failure (out of memory included) is recorded and the sweep goes on."""
    import torch

    from afford.measure.memory_peaks import is_oom

    t0 = time.perf_counter()
    rec: dict[str, Any] = {}
    try:
        rec = measure_shape(workloads[item["workload"]], item, device, seed)
    except Exception as exc:  # recorded with its text, never dropped
        rec = {"oom": is_oom(exc), "error": error_text(exc)}
    finally:
        gc.collect()
        gc.freeze()  # what lazy imports of the first steps left stays out of later collections
        if device.type == "cuda":
            torch.cuda.empty_cache()
    rec["wall_seconds"] = time.perf_counter() - t0
    return rec


def error_text(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {tb[-1].filename.rsplit(os.sep, 1)[-1]}:{tb[-1].lineno})" if tb else ""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}{where}"[:2000]


def _emit(out: TextIO, event: dict[str, Any]) -> None:
    out.write(json.dumps(event) + "\n")
    out.flush()


def main() -> int:
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # workload prints go to stderr; stdout carries only our JSON lines
    sys.stdout = sys.stderr
    args = sys.argv[1:]
    if "--stagger" in args:  # spawned beside another child's timed import: let it finish
        time.sleep(float(args[args.index("--stagger") + 1]))
    if "--prewarm" in args:  # spawned ahead on CUDA: the one-time start-up before the job
        from afford.measure.sweep_child import prewarm

        prewarm(args[args.index("--prewarm") + 1])
    from afford.measure.sweep_child import warm

    warm(args)
    job = json.load(sys.stdin)
    import torch

    from afford.workloads import resolve

    device = torch.device(job["device"])
    if device.type == "cpu":
        torch.set_num_threads(1)  # memory, not time, is measured here: no spinning threads
    workloads = {it["workload"]: resolve(it["workload"], job["device_class"])
                 for it in job["items"]}
    gc.freeze()  # torch's own objects out of every collection: gc.collect() takes ms, not 0.2 s
    _emit(out, {"event": "start", "pid": os.getpid()})
    for item in job["items"]:
        _emit(out, {"event": "begin", "key": item["key"]})
        rec = run_item(workloads, item, device, int(job["seed"]))
        _emit(out, {"event": "shape", "key": item["key"], "record": rec})
    _emit(out, {"event": "done"})
    out.close()
    return 0


def child_env(device: str) -> dict[str, str]:
    """The environment of the child: the parent's import path; on a CPU, fixed malloc
    thresholds (see the module docstring)."""
    from afford.measure.children import child_env

    env = child_env()
    if not device.startswith("cuda"):
        for k, v in CPU_MALLOC_ENV.items():
            env.setdefault(k, v)
    return env


STAGGER_SECONDS = 8.0


def spawn_memory_child(device: str, overlapped: bool = False, stagger: float = 0.0,
                       warm: tuple[str, ...] = ()):
    """Start the child; on CUDA it imports torch, creates its context and pre-warms
    (cuBLAS, the fused optimizer) while it waits for its job. A
    :class:`~afford.measure.children.Spawned`. ``stagger``: seconds the child sleeps
    before it imports anything (certify spawns it beside the probe child, whose import is
    a startup reading: two imports at once slow each other down); ``warm``: workloads it
    resolves while it waits (:func:`afford.measure.children.warm_specs`)."""
    from afford.measure.children import Spawned, warm_args

    args = (["--prewarm", device] if device.startswith("cuda") else []) + warm_args(warm)
    if stagger > 0:
        args += ["--stagger", f"{stagger:g}"]
    return Spawned("afford.measure.memory_sweep", args, env=child_env(device),
                   overlapped=overlapped)


def run_memory_child(items: list[dict], *, device: str, device_class: str, seed: int,
                     on_event: Callable[[dict], None] = lambda e: None,
                     timeout: float | None = None, spawned=None,
                     failures: list[str] | None = None) -> dict[str, dict]:
    """Run the child over ``items`` (each with key, workload, mode, shape, steps); return
    each item's record by key. Items the child did not finish get an error record, and
    ``failures`` (when given) the line saying how the child ended (it died, or the watchdog
    stopped it after ``timeout``, default :func:`~afford.measure.children.child_timeout`
    with :data:`CHILD_TIMEOUT_SECONDS`). ``spawned``: the child started ahead
    (:func:`spawn_memory_child`); else started now."""
    job = {"device": device, "device_class": device_class, "seed": seed, "items": items}
    from afford.measure.children import child_timeout, exchange, failure_text

    timeout = child_timeout(CHILD_TIMEOUT_SECONDS) if timeout is None else timeout

    records: dict[str, dict] = {}

    def take(event: dict) -> None:
        if event["event"] == "shape":
            records[event["key"]] = event["record"]
        on_event({**event, "child": "memory"})

    rc, tail, timed_out = exchange(spawned or spawn_memory_child(device), job, take, timeout,
                                   idle=True)
    if rc != 0 or any(it["key"] not in records for it in items):
        why = failure_text("the memory child", rc, tail, timed_out, timeout)
        for it in items:
            records.setdefault(it["key"], {"error": why})
        if failures is not None:
            failures.append(why)
    return records


if __name__ == "__main__":
    sys.exit(main())
