"""Checkpoints on the platform's disk (docs/DESIGN.md section 4).

copies that fit = floor(disk / checkpoint bytes); steady-state share = live copies x bytes
/ disk. An atomic write (temp file in the same folder, fsync, rename: afford.core.io) holds one
more copy until its rename, so the peak is live copies + 1, and that is what must fit.
"""

from __future__ import annotations

from afford.core.provenance import Tagged
from afford.planning.derive import derive, floor_div, num
from afford.planning.result import Disk


def disk_plan(disk: Tagged, checkpoint: Tagged | None, live_copies: Tagged) -> Disk:
    """How many checkpoints fit, and the share the run's live copies (and the write) hold."""
    if checkpoint is None or disk.value is None or num(checkpoint) <= 0:
        return Disk(disk_bytes=disk, checkpoint_bytes=checkpoint, copies_fit=None,
                    live_copies=live_copies, steady_share=None, peak_share=None, fits=None)
    dsk, b, k = num(disk), num(checkpoint), int(num(live_copies))
    fit = derive(floor_div(dsk, b), "copies", "floor(disk / checkpoint bytes)", disk, checkpoint)
    steady = derive(k * b / dsk, "ratio", "live copies x checkpoint bytes / disk", live_copies,
                    checkpoint, disk)
    peak = derive((k + 1) * b / dsk, "ratio", "(live copies + 1) x checkpoint bytes / disk",
                  live_copies, checkpoint, disk)
    return Disk(disk_bytes=disk, checkpoint_bytes=checkpoint, copies_fit=fit,
                live_copies=live_copies, steady_share=steady, peak_share=peak,
                fits=k + 1 <= int(num(fit)))
