"""Collective bandwidths, the alpha-beta model, and the ring all-reduce (pure functions).

Bandwidths follow nccl-tests (NVIDIA, ``doc/PERFORMANCE.md``): the *algorithm bandwidth*
is ``algbw = S / t`` and the *bus bandwidth* ``busbw = algbw * factor(op, n)`` rescales it
so that it is comparable with the hardware's link bandwidth whatever the rank count:

- all-reduce:                           factor ``2 (n - 1) / n``
- reduce-scatter, all-gather, all-to-all: ``(n - 1) / n``
- broadcast, reduce:                    ``1``

``S`` is nccl-tests' size: the all-reduce buffer, the all-gather *output* (n times each
rank's input), the reduce-scatter *input* (n times each rank's output).

The alpha-beta (latency-bandwidth, Hockney 1994) model of one collective is
``t(S) = alpha + S / beta``, fitted by ordinary least squares over the measured sizes, with
R^2 on the seconds. For a ring all-reduce of ``n`` ranks over links of bandwidth ``B`` and
per-hop latency ``a`` (docs/REFERENCES.md, "Collectives"; Patarasuk & Yuan 2009)::

    t = 2 (n - 1) a + 2 ((n - 1) / n) S / B

so a fitted all-reduce gives ``a = alpha / (2 (n - 1))`` and ``B = beta * 2 (n - 1) / n``
(``B`` is then the asymptotic bus bandwidth).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from afford.fit.stats import r2_score
from afford.schema.distributed_section import AlphaBetaFit

Op = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce"]
R2_WARN = 0.98


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor of ``op`` at ``n`` ranks (doc/PERFORMANCE.md)."""
    if n < 1:
        raise ValueError(f"world size {n} < 1")
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if op in ("broadcast", "reduce"):
        return 1.0
    raise ValueError(f"unknown collective {op!r}")


def algbw(size_bytes: float, seconds: float) -> float:
    """Algorithm bandwidth S / t in bytes per second."""
    if seconds <= 0:
        raise ValueError(f"non-positive time {seconds!r}")
    return size_bytes / seconds


def busbw(op: str, n: int, size_bytes: float, seconds: float) -> float:
    """Bus bandwidth: algbw times :func:`busbw_factor` (0 at n = 1: no inter-rank traffic)."""
    return algbw(size_bytes, seconds) * busbw_factor(op, n)


FLAT_RELATIVE = 1e-9  # growth over the measured sizes below this share of the time: none


def fit_alpha_beta(op: str, world_size: int, sizes_bytes: Sequence[float],
                   seconds: Sequence[float]) -> AlphaBetaFit:
    """Least squares of ``t = alpha + S * (1/beta)`` (numpy.linalg.lstsq), R^2 on seconds.

    Needs at least two distinct sizes. A negative intercept is kept as fitted (it says the
    small sizes are not latency-bound the way the model assumes) and flagged."""
    s = np.asarray(sizes_bytes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if s.shape != t.shape or s.ndim != 1 or len(np.unique(s)) < 2:
        raise ValueError("the alpha-beta fit needs at least two distinct sizes, one time each")
    design = np.column_stack([np.ones_like(s), s])  # (k, 2)
    (alpha, slope), *_ = np.linalg.lstsq(design, t, rcond=None)
    pred = alpha + slope * s
    notes = []
    r2 = r2_score(t, pred)
    if r2 < R2_WARN:
        notes.append(f"{op}: R^2 {r2:.4f} < {R2_WARN}: t = alpha + S/beta describes these "
                     "sizes poorly")
    if alpha < 0:
        notes.append(f"{op}: fitted latency alpha is negative ({alpha:.3g} s): small sizes "
                     "do not follow the latency-bandwidth line")
    # growth across the sizes at round-off level is no growth: flat timings give a slope
    # of +-1e-17 from lstsq, and 1/slope would be a bandwidth of 1e16 B/s
    grows = slope * (s.max() - s.min()) > FLAT_RELATIVE * float(np.abs(t).max())
    if not grows:
        notes.append(f"{op}: time does not grow with size here: no bandwidth is fitted")
    return AlphaBetaFit(op=op, world_size=world_size, alpha_seconds=float(alpha),
                        beta_bytes_per_second=float(1.0 / slope) if grows else None,
                        r2=r2, sizes_bytes=[int(v) for v in s], seconds=[float(v) for v in t],
                        residuals=[float(v) for v in pred / t - 1.0], warnings=notes)


def ring_allreduce_seconds(n: int, size_bytes: float, alpha_seconds: float,
                           bandwidth_bytes_per_second: float) -> float:
    """Ring all-reduce time ``2(n-1) alpha + 2((n-1)/n) S / B`` (docs/REFERENCES.md; Patarasuk &
    Yuan 2009, "Bandwidth optimal all-reduce algorithms"). Zero at n = 1."""
    if n < 1 or bandwidth_bytes_per_second <= 0:
        raise ValueError("need n >= 1 and a positive bandwidth")
    return 2 * (n - 1) * alpha_seconds + 2 * ((n - 1) / n) * size_bytes / bandwidth_bytes_per_second


def ring_parameters(fit: AlphaBetaFit) -> tuple[float, float] | None:
    """(per-hop latency a, link bandwidth B) of a fitted all-reduce read as a ring:
    ``a = alpha / (2 (n - 1))``, ``B = beta * 2 (n - 1) / n``. ``None`` at n = 1 (no ring)
    or without a fitted bandwidth."""
    n = fit.world_size
    if fit.op != "all_reduce" or n < 2 or fit.beta_bytes_per_second is None:
        return None
    return fit.alpha_seconds / (2 * (n - 1)), fit.beta_bytes_per_second * busbw_factor(
        "all_reduce", n)
