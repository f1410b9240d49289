"""Time torch.distributed's collectives over message sizes, on every rank.

What nccl-tests does (``all_reduce_perf`` and friends), through torch.distributed: for each
collective and size, a few warm-up calls, then ``samples`` samples of ``iters`` back-to-back
calls each, after a barrier (the gloo control group, once the device is idle); CUDA events on
the current stream around each sample on a GPU (the NCCL stream is joined to it, so the events
bracket the work), ``perf_counter`` on the CPU (gloo calls block). ``iters`` comes from the
slowest rank's warm-up estimate so every rank issues the same calls (a rank that issued fewer
would leave the others waiting).

Buffers are zeros (sums stay zero: no overflow, no denormals on a CPU) of float32, the
nccl-tests default. Sizes are nccl-tests' ``S`` (:mod:`afford.fit.nodes.collectives_fit`), rounded
down to a multiple of ``world_size * 4`` bytes so each rank's share is whole.

The raw per-sample seconds of this rank go back to rank 0; nothing is reduced here.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from afford.measure.distributed.runtime import Runtime, agree_max, wait_all, wait_device

OPS = ("all_reduce", "all_gather", "reduce_scatter")
KiB, MiB, GiB = 2**10, 2**20, 2**30
CUDA_CLOCK = "CUDA events around each sample of back-to-back calls, after a barrier"
HOST_CLOCK = "host perf_counter around each sample of back-to-back blocking calls, after a barrier"


@dataclass(frozen=True)
class CollectiveConfig:
    """One sweep. ``sample_seconds`` is a budget turned into a call count (do_bench habit)."""

    min_bytes: int
    max_bytes: int
    factor: int = 4          # sizes min, min*factor, ... up to max
    warmup_calls: int = 3
    samples: int = 10
    sample_seconds: float = 0.01
    max_iters: int = 50
    ops: tuple[str, ...] = OPS


def config_for(device_type: str, precision: str) -> CollectiveConfig:
    """1 MiB..1 GiB on a GPU (nccl-tests' usual range); 4 KiB..4 MiB on a CPU (gloo over
    loopback). ``quick`` takes fewer samples and smaller budgets; ``full`` more."""
    samples = {"quick": 5, "adaptive": 10, "full": 20}[precision]
    budget = {"quick": 0.002, "adaptive": 0.01, "full": 0.05}[precision]
    if device_type == "cuda":
        return CollectiveConfig(MiB, GiB, samples=samples, sample_seconds=budget)
    top = MiB if precision == "quick" else 4 * MiB
    return CollectiveConfig(4 * KiB, top, samples=samples, sample_seconds=budget)


def sizes(cfg: CollectiveConfig, world_size: int) -> list[int]:
    """The sweep's sizes in bytes, each a multiple of ``world_size * 4``."""
    out, s = [], cfg.min_bytes
    while s <= cfg.max_bytes:
        whole = (s // (world_size * 4)) * world_size * 4
        if whole > 0 and whole not in out:
            out.append(whole)
        s *= cfg.factor
    return out


def _single(name: str, legacy: str) -> Callable:
    """torch >= 2.13 names these ``*_single``; older versions ``*_into_tensor``/``_tensor``."""
    return getattr(dist, name, None) or getattr(dist, legacy)


def make_call(op: str, size_bytes: int, world_size: int, device: torch.device):
    """A zero-argument function issuing one ``op`` of ``size_bytes`` (nccl-tests' S)."""
    per_rank = size_bytes // (world_size * 4)
    full = torch.zeros(per_rank * world_size, dtype=torch.float32, device=device)
    part = torch.zeros(per_rank, dtype=torch.float32, device=device)
    if op == "all_reduce":
        return lambda: dist.all_reduce(full)
    if op == "all_gather":
        fn = _single("all_gather_single", "all_gather_into_tensor")
        return lambda: fn(full, part)
    if op == "reduce_scatter":
        fn = _single("reduce_scatter_single", "reduce_scatter_tensor")
        return lambda: fn(part, full)
    raise ValueError(f"unknown collective {op!r}")


def time_calls(call: Callable[[], object], iters: int, device: torch.device) -> float:
    """Seconds for ``iters`` back-to-back calls."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            call()
        end.record()
        wait_device(device, end)
        return start.elapsed_time(end) / 1e3
    t0 = time.perf_counter()
    for _ in range(iters):
        call()
    return time.perf_counter() - t0


def _probe(rt: Runtime, op: str) -> str | None:
    """Run ``op`` once on a tiny buffer; the error text if this backend cannot. A barrier
    after it tells a dead peer (raises) from an unsupported op (recorded)."""
    try:
        make_call(op, 4 * rt.world_size, rt.world_size, rt.device)()
        error = None
    except (RuntimeError, NotImplementedError, ValueError) as exc:
        error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"
    wait_all(rt)
    return error


def _align(rt: Runtime) -> None:
    """Start a sample together: this rank's device idle, then a (gloo) barrier."""
    wait_device(rt.device)
    wait_all(rt)


def time_point(rt: Runtime, cfg: CollectiveConfig, op: str, size: int) -> dict:
    call = make_call(op, size, rt.world_size, rt.device)
    _align(rt)
    warm = time_calls(call, cfg.warmup_calls, rt.device) / cfg.warmup_calls
    est = agree_max(warm, None, rt.device)
    iters = int(min(cfg.max_iters, max(1, math.ceil(cfg.sample_seconds / max(est, 1e-9)))))
    seconds = []
    for _ in range(cfg.samples):
        _align(rt)
        seconds.append(time_calls(call, iters, rt.device) / iters)
    return {"op": op, "bytes": size, "iters": iters, "seconds": seconds}


def sweep(rt: Runtime, cfg: CollectiveConfig) -> dict:
    """This rank's raw samples of every op at every size, and the ops it could not run."""
    points, not_exec = [], []
    for op in cfg.ops:
        error = _probe(rt, op)
        if error:
            not_exec.append({"what": f"{op} on {rt.backend}", "reason": error})
            continue
        for size in sizes(cfg, rt.world_size):
            points.append(time_point(rt, cfg, op, size))
    if rt.device.type == "cuda":
        torch.cuda.empty_cache()
    return {"points": points, "not_executable": not_exec,
            "clock": CUDA_CLOCK if rt.device.type == "cuda" else HOST_CLOCK,
            "sizes": sizes(cfg, rt.world_size)}
