"""The matmul ceiling per dtype: C = A @ B, n x n x n, fresh random inputs.

FLOPs per call are 2 n^3 (one multiply and one add per term of each of the n^2 dot
products of length n). The rate is 2 n^3 over the median of the timed calls after warm-up
(CUDA events; see :mod:`afford.measure.probes.calls`). Inputs are standard normal, never
zeros (a GEMM on zeros can run at a different rate and says nothing about accuracy).

Accuracy: a sample of rows of C is recomputed in fp64 from the same inputs (already rounded
to the probe's dtype), and the error is ``max |C - C_ref| / max |C_ref|`` over them:
relative to the largest entry, because an element-wise relative error is unbounded where
``C_ref`` is near 0.

TF32 is a CUDA tensor-core mode for fp32 matmuls (compute capability 8.0 or newer): the
tf32 probe turns it on for itself alone (``allow_tf32``, or ``fp32_precision = "tf32"`` on
torch >= 2.9), the fp32 probe turns it off, and both restore the settings they found.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import torch

from afford.core.provenance import NotExecutable
from afford.fit.stats import median
from afford.measure.probes.calls import time_calls

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
          "fp16": torch.float16}
CPU_DTYPES = ("fp32", "bf16")


def not_executable_reason(dtype: str, device: torch.device) -> str | None:
    """Why ``dtype`` cannot be probed on ``device``, or ``None`` when it can."""
    if device.type != "cuda":
        if dtype == "tf32":
            return "TF32 is a CUDA tensor-core mode for fp32 matmuls; a CPU has no TF32"
        if dtype not in CPU_DTYPES:
            return (f"{dtype} is not probed on the CPU: the CPU probes are fp32 and bf16 "
                    "(CPU fp16 matmul has no fast kernel on most CPUs)")
        return None
    major, minor = torch.cuda.get_device_capability(device)
    if dtype == "tf32" and major < 8:
        return f"TF32 needs compute capability 8.0 or newer; this device is {major}.{minor}"
    if dtype == "bf16" and not torch.cuda.is_bf16_supported():
        return f"torch reports no bf16 support on this device (compute capability {major}.{minor})"
    return None


@contextlib.contextmanager
def matmul_settings(dtype: str, device: torch.device) -> Iterator[dict[str, str]]:
    """TF32 on for the tf32 probe, off (IEEE fp32) for the fp32 probe; restored afterwards.

    torch >= 2.9 has ``torch.backends.cuda.matmul.fp32_precision`` ("tf32" / "ieee") and
    raises when it is mixed with the legacy ``allow_tf32`` flag, so the new setting is used
    where it exists and ``allow_tf32`` (with the float32 matmul precision) otherwise."""
    if device.type != "cuda" or dtype not in ("fp32", "tf32"):
        yield {}
        return
    matmul = torch.backends.cuda.matmul
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if hasattr(matmul, "fp32_precision"):
            before = matmul.fp32_precision
            try:
                matmul.fp32_precision = "tf32" if dtype == "tf32" else "ieee"
                yield {"torch.backends.cuda.matmul.fp32_precision": matmul.fp32_precision}
            finally:
                matmul.fp32_precision = before
            return
        allow, precision = matmul.allow_tf32, torch.get_float32_matmul_precision()
        try:
            matmul.allow_tf32 = dtype == "tf32"
            yield {"torch.backends.cuda.matmul.allow_tf32": str(matmul.allow_tf32)}
        finally:
            torch.set_float32_matmul_precision(precision)
            matmul.allow_tf32 = allow


def max_rel_error(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, rows: torch.Tensor
                  ) -> float:
    """``max |C - C_ref| / max |C_ref|`` over ``rows``, C_ref in fp64 from the same inputs."""
    ref = a[rows].double() @ b.double()  # (k, n)
    err = (c[rows].double() - ref).abs().max()
    return float(err / ref.abs().max())


def gemm_probe(dtype: str, device: torch.device, n: int, warmup: int, reps: int,
               reference_rows: int, seed: int = 0) -> dict | NotExecutable:
    """Run one GEMM probe; the fields of :class:`~afford.schema.probes_section.GemmProbe`."""
    reason = not_executable_reason(dtype, device)
    if reason:
        return NotExecutable(what=f"GEMM {dtype}", reason=reason)
    gen = torch.Generator(device=device).manual_seed(seed)
    dt = DTYPES[dtype]
    a = torch.randn(n, n, device=device, generator=gen).to(dt)  # (n, n)
    b = torch.randn(n, n, device=device, generator=gen).to(dt)  # (n, n)
    c = torch.empty(n, n, device=device, dtype=dt)
    with matmul_settings(dtype, device) as settings:
        secs = time_calls(lambda: torch.matmul(a, b, out=c), device, warmup, reps)
    rows = torch.randperm(n, device=device, generator=gen)[:reference_rows]
    err = max_rel_error(a, b, c, rows)
    med = median(secs)
    flop = 2.0 * n**3
    return {"dtype": dtype, "n": n, "flop_per_call": flop, "warmup_calls": warmup,
            "seconds": secs, "median_seconds": med, "flops_per_second": flop / med,
            "max_rel_error": err,
            "reference": f"fp64 on {min(reference_rows, n)} random rows, same rounded inputs",
            "settings": settings}
