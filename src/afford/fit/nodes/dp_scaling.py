"""Data-parallel scaling on one node: the step-time law against world size (pure functions).

Weak scaling (each rank keeps its own batch; the global batch grows with ``w``), as DDP is
used. Throughput is ``w * tokens_per_rank / t(w)`` and the scaling efficiency is
``E(w) = t(1) / t(w)`` (1.0 = perfect; Amdahl/Gustafson bookkeeping).

The law: each step adds a gradient all-reduce to the single-rank step. With a ring
all-reduce of ``G`` gradient bytes (docs/REFERENCES.md, "Collectives") the non-overlapped part
grows as ``2 (w - 1) / w``, so::

    t(w) = A + B * 2 (w - 1) / w

``A`` is the one-rank step, ``B`` the exposed all-reduce cost at the bandwidth limit. It is
fitted by least squares; with two world sizes it is an exact interpolation (no check), and
with one there is no law.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from afford.schema.distributed_section import WorldSizeLaw, ring_term


def fit_world_size_law(world_sizes: Sequence[int], seconds: Sequence[float]) -> WorldSizeLaw:
    """Least squares (numpy.linalg.lstsq) of ``t = A + B * 2(w-1)/w``; R^2 on seconds."""
    w = np.asarray(world_sizes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if w.shape != t.shape or len(np.unique(w)) < 2:
        raise ValueError("the world-size law needs at least two distinct world sizes")
    x = np.array([ring_term(v) for v in w])
    (a, b), *_ = np.linalg.lstsq(np.column_stack([np.ones_like(x), x]), t, rcond=None)
    pred = a + b * x
    ss_res, ss_tot = float(np.sum((t - pred) ** 2)), float(np.sum((t - t.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    exact = len(np.unique(w)) == 2
    notes = []
    if exact:
        notes.append("two world sizes: the law interpolates them exactly; no check of its form")
    if b < 0:
        notes.append("the step got faster with more ranks (B < 0): noise or a shape effect, "
                     "not a communication cost")
    return WorldSizeLaw(A_seconds=float(a), B_seconds=float(b), r2=r2,
                        world_sizes=[int(v) for v in w], seconds=[float(v) for v in t],
                        residuals=[float(v) for v in pred / t - 1.0], exact=exact,
                        warnings=notes)


def efficiency(t1_seconds: float, tw_seconds: float) -> float:
    """Weak-scaling efficiency ``t(1) / t(w)`` (per-rank batch fixed)."""
    if t1_seconds <= 0 or tw_seconds <= 0:
        raise ValueError("step times must be positive")
    return t1_seconds / tw_seconds


def throughput_multiplier(w: int, t1_seconds: float, tw_seconds: float) -> float:
    """Tokens per second at ``w`` ranks over one rank: ``w * t(1) / t(w)``."""
    return w * efficiency(t1_seconds, tw_seconds)


def exposed_comm_share(sync_seconds: float, nosync_seconds: float) -> float:
    """Share of a DDP step spent in the gradient all-reduce that backward did not hide:
    ``(t_sync - t_no_sync) / t_sync`` (``no_sync()`` skips the all-reduce; PyTorch DDP docs).
    Negative values (noise) are kept, not clipped."""
    if sync_seconds <= 0:
        raise ValueError("step time must be positive")
    return (sync_seconds - nosync_seconds) / sync_seconds
