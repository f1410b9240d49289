"""Device memory bandwidth: ``dst.copy_(src)`` of a buffer far larger than the caches; and
the host link: pinned host memory to the device and back.

Device bandwidth counts bytes read plus bytes written (2 x the buffer per call), as the copy
ceiling in docs/REFERENCES.md, "Compute", does (a 2 GiB device copy counting read and
write). The host link counts the bytes that cross it once per call (one buffer), in each
direction apart: that is what prices optimizer-state offload (the ladder's offload variant).
The source is fresh random data, never zeros.
"""

from __future__ import annotations

import torch

from afford.core.provenance import CannotRunHere
from afford.fit.stats import median
from afford.measure.probes.calls import time_calls


def copy_probe(device: torch.device, buffer_bytes: int, warmup: int, reps: int,
               seed: int = 0) -> dict:
    """The fields of :class:`~afford.schema.probes_section.CopyProbe`."""
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


def host_copy_probe(device: torch.device, buffer_bytes: int, warmup: int, reps: int,
                    seed: int = 0) -> dict:
    """The fields of :class:`~afford.schema.probes_section.HostCopyProbe`: pinned host -> device and
    device -> pinned host, each timed on its own."""
    if device.type != "cuda":
        raise CannotRunHere(f"a {device.type} device has no host link to time (host and "
                            "device memory are one)")
    numel = buffer_bytes // 4
    gen = torch.Generator().manual_seed(seed)
    host = torch.randn(numel, generator=gen).pin_memory()  # fp32, (numel,)
    dev = torch.empty(numel, device=device)
    back = torch.empty(numel).pin_memory()
    up = time_calls(lambda: dev.copy_(host, non_blocking=True), device, warmup, reps)
    down = time_calls(lambda: back.copy_(dev, non_blocking=True), device, warmup, reps)
    torch.cuda.synchronize(device)
    if not torch.equal(back[:1024], host[:1024]):
        raise RuntimeError("the host copy probe's round trip does not match its source")
    moved = numel * 4
    up_med, down_med = median(up), median(down)
    return {"buffer_bytes": moved, "warmup_calls": warmup, "h2d_seconds": up,
            "h2d_bytes_per_second": moved / up_med, "d2h_seconds": down,
            "d2h_bytes_per_second": moved / down_med}
