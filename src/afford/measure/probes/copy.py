"""Device memory bandwidth: ``dst.copy_(src)`` of a buffer far larger than the caches.

Bandwidth counts bytes read plus bytes written (2 x the buffer per call), as the copy
ceiling in docs/REFERENCES.md does (4.24 TB/s on an H200 for a 2 GiB device copy counting read
and write). The source is fresh random data, never zeros.
"""

from __future__ import annotations

import torch

from afford.fit.stats import median
from afford.measure.probes.calls import time_calls


def copy_probe(device: torch.device, buffer_bytes: int, warmup: int, reps: int,
               seed: int = 0) -> dict:
    """The fields of :class:`~afford.schema.probes.CopyProbe`."""
    numel = buffer_bytes // 4
    gen = torch.Generator(device=device).manual_seed(seed)
    src = torch.randn(numel, device=device, generator=gen)  # fp32, (numel,)
    dst = torch.empty_like(src)
    secs = time_calls(lambda: dst.copy_(src), device, warmup, reps)
    if not torch.equal(dst[:1024], src[:1024]):
        raise RuntimeError("the copy probe's destination does not match its source")
    moved = 2 * numel * 4
    med = median(secs)
    return {"buffer_bytes": numel * 4, "bytes_per_call": moved, "warmup_calls": warmup,
            "seconds": secs, "median_seconds": med, "bytes_per_second": moved / med}
