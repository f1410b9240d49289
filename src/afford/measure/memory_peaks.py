"""Peak memory of one sweep point: the CUDA caching allocator, or the child's peak RSS.

CUDA: ``max_memory_allocated`` counts tensors, ``max_memory_reserved`` what the allocator
holds from the driver (PyTorch docs, notes/cuda); both are reset before the point is built,
after the previous point's blocks were returned with ``empty_cache`` and the process's cuBLAS
workspaces were freed (:func:`fresh_state`): each point then starts as a fresh process does,
with the workspaces made by its own first GEMM, wherever that falls. A child that kept them
from its pre-warm or an earlier point had them in segments of their own, where a fresh
process makes one inside the model's build when the build runs a GEMM (peft's LoRA
initialisation does) and the weights then fill the segment around it: Llama d1024 L16 with
LoRA reserved 211 MB more at 8 x 256 in a fresh process than in a pre-warmed child (5.5 %;
lab/device-runs/2026-12-06-h100-final/lora-trace-compare.md).
CPU: Linux keeps a process's peak RSS in ``VmHWM``; writing ``5`` to
``/proc/self/clear_refs`` resets it (proc(5)), so each point gets its own peak. Where that
is not possible the lifetime peak (``ru_maxrss``) is used and labelled so.
"""

from __future__ import annotations

import gc
import resource
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

CUDA_SOURCE = "cuda caching allocator (max_memory_allocated / max_memory_reserved)"
RSS_SOURCE = "child peak RSS (VmHWM, reset per point), includes the interpreter and torch"
RSS_LIFETIME_SOURCE = "child peak RSS over the process lifetime (ru_maxrss): an upper bound"


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def fresh_state(device: torch.device) -> bool:
    """Give the allocator's cached blocks back and free the cuBLAS (and cuBLASLt) workspaces
    (``torch._C._cuda_clearCublasWorkspaces``, what torch's own CUDA leak check calls before
    it compares the allocator's figures, ``torch.testing._internal.common_utils``), so that
    the next point's history and peaks begin as a fresh process's do. Whether the
    workspaces were freed: an older torch without the call keeps them."""
    torch.cuda.synchronize(device)
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        clear()
    torch.cuda.empty_cache()
    return clear is not None


@dataclass
class MemoryWindow:
    """Open before building a point, close after timing it."""

    device: torch.device
    per_point_rss: bool = False
    baseline_rss_bytes: int | None = None
    fresh: bool | None = None  # CUDA: the point began with the cuBLAS workspaces freed

    def open(self) -> None:
        gc.collect()
        if self.device.type == "cuda":
            self.fresh = fresh_state(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            return
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self.per_point_rss = True
        except OSError:
            self.per_point_rss = False
        rss = _status_kib("VmRSS")
        self.baseline_rss_bytes = rss * 1024 if rss is not None else None

    def close(self) -> dict:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            return {"peak_allocated_bytes": int(torch.cuda.max_memory_allocated(self.device)),
                    "peak_reserved_bytes": int(torch.cuda.max_memory_reserved(self.device)),
                    "memory_source": CUDA_SOURCE}
        hwm = _status_kib("VmHWM") if self.per_point_rss else None
        swap = _status_kib("VmSwap")
        if hwm is not None:
            peak, source = hwm * 1024, RSS_SOURCE
        else:
            ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            peak = ru if sys.platform == "darwin" else ru * 1024
            source = RSS_LIFETIME_SOURCE
        return {"peak_rss_bytes": int(peak), "baseline_rss_bytes": self.baseline_rss_bytes,
                "swap_bytes": swap * 1024 if swap is not None else None,
                "memory_source": source}


def is_oom(exc: BaseException) -> bool:
    if isinstance(exc, (MemoryError, torch.cuda.OutOfMemoryError)):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text
                                              or "can't allocate memory" in text
                                              or "failed to allocate" in text)
