"""The CUDA caching allocator's history of one shape, for the replay.

:func:`start` reads the segments the allocator holds (``torch.cuda.memory._snapshot``: what
the process keeps across shapes; not its cuBLAS workspaces, which
:func:`afford.measure.memory_peaks.fresh_state` freed, so the history holds them where the
shape's first GEMM makes them, as a fresh process's does) and starts recording every
allocation and free (``_record_memory_history``, no stack frames: the replay needs sizes and
order only); :func:`stop` takes the history, stops recording and returns it in the
canonical form of :func:`afford.fit.memory.trace_scaling.from_history`, packed for the
certificate (:class:`afford.schema.memory_section.AllocTrace`).
"""

from __future__ import annotations

import os

import torch

from afford.fit.memory.trace_scaling import from_history
from afford.schema.memory_section import pack_ints

MAX_ENTRIES = 2_000_000


def alloc_conf() -> str:
    """The allocator's configuration of this process: ``PYTORCH_CUDA_ALLOC_CONF`` (or the
    newer ``PYTORCH_ALLOC_CONF``), '' when unset."""
    return os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or os.environ.get("PYTORCH_ALLOC_CONF") \
        or ""


def _segments(device: torch.device) -> list[dict]:
    index = device.index if device.index is not None else torch.cuda.current_device()
    out = []
    for g in torch.cuda.memory._snapshot()["segments"]:
        if g.get("device", index) != index:
            continue
        blocks = sorted(g["blocks"], key=lambda b: b["address"])
        out.append({"addr": int(g["address"]), "size": int(g["total_size"]),
                    "small": g.get("segment_type") == "small", "stream": int(g.get("stream", 0)),
                    "blocks": [[int(b["size"]), b["state"] != "inactive"] for b in blocks]})
    return sorted(out, key=lambda g: g["addr"])


def start(device: torch.device) -> list[dict]:
    """The segments held now (the replay's starting state); recording starts."""
    torch.cuda.synchronize(device)
    seed = _segments(device)
    kw = dict(enabled="all", context=None, stacks="python", max_entries=MAX_ENTRIES)
    try:
        torch.cuda.memory._record_memory_history(clear_history=True, **kw)
    except TypeError:  # an older torch without clear_history
        torch.cuda.memory._record_memory_history(**kw)
    return seed


def stop(device: torch.device, B: int, s: int, seed: list[dict]) -> dict:
    """The history since :func:`start`, canonical and packed; recording stops."""
    torch.cuda.synchronize(device)
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    index = device.index if device.index is not None else torch.cuda.current_device()
    traces = snap.get("device_traces", [])
    events = traces[index] if index < len(traces) else []
    rows = [(e["action"], e["addr"], e["size"], e.get("stream", 0)) for e in events]
    t = from_history(B, s, rows)
    return {"n_allocs": t.n_allocs, "n_ops": len(t.ops), "sizes": pack_ints(t.sizes),
            "streams": pack_ints(t.streams), "ops": pack_ints(t.ops),
            "external_frees": t.external_frees, "seed": seed, "alloc_conf": alloc_conf(),
            "truncated": len(events) >= MAX_ENTRIES}
