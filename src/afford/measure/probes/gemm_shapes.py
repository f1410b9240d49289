"""GEMM probes at the workload's own shapes (e.g. 5120 x 2048 x 8192, not only squares).

One whole training step of the built workload runs under a dispatch mode that records every
matmul the step issues (``mm``, ``addmm``, ``bmm``, ``baddbmm``; forward and backward) as
(batch, m, n, k, dtype). The shapes that carry the most matmul arithmetic of the step
(``top`` of them, by FLOPs x calls) are then timed alone, as the square probes are: fresh
random operands in the recorded dtype, warm-up calls first, CUDA events per call. The ratio
of a shape's rate to the square probe's rate of the same dtype says how much of the ceiling
the workload's own matmuls can reach (a thin or small GEMM does not fill the device).
"""

from __future__ import annotations

from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from afford.core.provenance import CannotRunHere
from afford.fit.stats import median
from afford.measure.probes.calls import time_calls
from afford.workloads.base import Built, train_step

_MM = {torch.ops.aten.mm.default: "mm", torch.ops.aten.addmm.default: "addmm",
       torch.ops.aten.bmm.default: "bmm", torch.ops.aten.baddbmm.default: "baddbmm"}
_DTYPES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


class _Recorder(TorchDispatchMode):
    """Counts (batch, m, n, k, dtype) of every matmul dispatched while active."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = _MM.get(func)
        if name is not None:
            a, b = (args[1], args[2]) if name in ("addmm", "baddbmm") else (args[0], args[1])
            if name in ("mm", "addmm"):
                key = (1, a.shape[0], b.shape[1], a.shape[1], _DTYPES.get(a.dtype, str(a.dtype)))
            else:
                key = (a.shape[0], a.shape[1], b.shape[2], a.shape[2],
                       _DTYPES.get(a.dtype, str(a.dtype)))
            self.calls[tuple(int(x) if isinstance(x, int) else x for x in key)] += 1
        return func(*args, **(kwargs or {}))


def record_gemm_shapes(built: Built, mode: str, device: torch.device) -> list[dict]:
    """Every distinct matmul of one training step: batch, m, n, k, dtype, calls and FLOPs
    (2 batch m n k per call), largest total first."""
    rec = _Recorder()
    with rec:
        train_step(built, mode, device)
    rows = [{"batch": b, "m": m, "n": n, "k": k, "dtype": dt, "calls": c,
             "flops_per_call": 2 * b * m * n * k} for (b, m, n, k, dt), c in rec.calls.items()]
    return sorted(rows, key=lambda r: -r["flops_per_call"] * r["calls"])


def time_gemm_shape(row: dict, device: torch.device, warmup: int, reps: int,
                    seed: int = 0) -> dict:
    """Median seconds and FLOP/s of one recorded shape, timed alone."""
    dtype = {v: k for k, v in _DTYPES.items()}.get(row["dtype"])
    if dtype is None:
        raise CannotRunHere(f"matmuls in {row['dtype']} are not probed")
    gen = torch.Generator(device=device).manual_seed(seed)
    b, m, n, k = row["batch"], row["m"], row["n"], row["k"]
    lead = (b,) if b > 1 else ()
    x = torch.randn(*lead, m, k, device=device, generator=gen).to(dtype)
    y = torch.randn(*lead, k, n, device=device, generator=gen).to(dtype)
    secs = time_calls(lambda: torch.matmul(x, y), device, warmup, reps)
    med = median(secs)
    return {**row, "seconds": secs, "median_seconds": med,
            "flops_per_second": row["flops_per_call"] / med}


def gemm_shape_probe(built: Built, mode: str, device: torch.device, top: int, warmup: int,
                     reps: int, seed: int = 0) -> dict:
    """The fields of :class:`~afford.schema.probes_section.ShapeGemms`: the step's matmul shapes,
    and the ``top`` of them by arithmetic timed alone."""
    rows = record_gemm_shapes(built, mode, device)
    total = sum(r["flops_per_call"] * r["calls"] for r in rows)
    timed = [time_gemm_shape(r, device, warmup, reps, seed) for r in rows[:top]]
    for r in timed:
        r["share_of_step_matmul_flops"] = r["flops_per_call"] * r["calls"] / total if total else 0.0
    return {"distinct_shapes": len(rows), "matmul_flops_per_step": float(total), "timed": timed}
