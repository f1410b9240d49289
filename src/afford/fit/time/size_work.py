"""A transformer family's work per step at any width and depth, read off measured sizes
(pure): the features the size law (:mod:`afford.fit.time.size_law`) is evaluated at.

A layer of a transformer does matmuls whose weights grow as d^2 at a fixed ratio of its
projections and MLP to d (Kaplan et al. 2020, section 2.1: 12 d^2 weights a layer with a 4d
MLP), so its GEMM FLOPs per step grow as L d^2 (6 FLOPs per weight per token, forward and
backward) and its attention products as L d at a fixed sequence (PaLM, Chowdhery et al.
2022, appendix B: 12 L d s per token, the full square, as a FLOP counter counts it). What
lies outside the layers (the embeddings and the head) grows as d. Hence, at one batch x seq::

    GEMM FLOPs = a L d^2 + b d       attention FLOPs = c L d       params = p L d^2 + q d

- :func:`from_sizes`: a, b, c, p, q by relative least squares over several measured sizes
  of one family (tinylm's sizes), from FLOPs counted at each size where counted, else from
  6 N per token and 12 L d s (the ladder's own count); the worst misfit is reported.
- :func:`from_one_size`: a family measured at one size (``hf:llama`` at its certified shape):
  the head's GEMM FLOPs are 6 B s V d (V the vocabulary the child read), the rest split
  evenly among the L layers; a layer's parameters are its GEMM FLOPs over 6 B s; the other
  parameters (embeddings, an untied head, norms) scale as d. Exact at that size, unchecked
  at any other, and said so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from afford.fit.stats import median
from afford.schema.sizes_section import FamilyScaling


@dataclass(frozen=True)
class ReadSize:
    """A measured size of one family: its shape, its parameters and, where counted, the
    GEMM and attention FLOPs of one step at the family's batch x seq."""

    d: int
    L: int
    H: int
    params: float
    gemm_flops: float | None = None
    attn_flops: float | None = None


def _pair(u: np.ndarray, v: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """y = a u + b v with a > 0, b >= 0, by relative least squares; one distinct ratio of
    u to v: all on u."""
    from scipy import optimize  # here: reading a stored scaling needs no scipy

    if len({round(float(x), 12) for x in u / v}) < 2:
        return float(median(list(y / u))), 0.0
    A = np.stack([u, v], axis=1) / y[:, None]
    a, b = optimize.lsq_linear(A, np.ones(len(y)), bounds=(0.0, np.inf)).x
    return float(a), float(b)


def _worst(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.max(np.abs(pred / y - 1.0)))


def from_sizes(workload: str, sizes: Sequence[ReadSize], batch: int, seq: int) -> FamilyScaling:
    """The family's scaling over ``sizes`` (at least two; module docstring). Raises
    ``ValueError`` with fewer than two sizes or a non-positive count."""
    if len(sizes) < 2:
        raise ValueError(f"{len(sizes)} size(s): the scaling needs at least 2")
    if any(s.params <= 0 for s in sizes):
        raise ValueError("every size needs a positive parameter count")
    counted = all(s.gemm_flops and s.attn_flops is not None for s in sizes)
    tokens = batch * seq
    d = np.array([s.d for s in sizes], dtype=float)
    L = np.array([s.L for s in sizes], dtype=float)
    n = np.array([s.params for s in sizes], dtype=float)
    g = np.array([s.gemm_flops for s in sizes] if counted else 6.0 * tokens * n, dtype=float)
    at = np.array([s.attn_flops for s in sizes] if counted else 12.0 * batch * seq * seq * L * d,
                  dtype=float)
    a, b = _pair(L * d * d, d, g)
    p, q = _pair(L * d * d, d, n)
    c = float(median(list(at / (L * d))))
    errs = [_worst(a * L * d * d + b * d, g), _worst(p * L * d * d + q * d, n)]
    if np.all(at > 0):
        errs.append(_worst(c * L * d, at))
    top = max(sizes, key=lambda s: s.params)
    return FamilyScaling(
        workload=workload, batch=batch, seq=seq, layer_gemm=a, outer_gemm=b, layer_attn=c,
        layer_params=p, outer_params=q, head_dim=max(1, top.d // top.H), aspect=top.d / top.L,
        read_at=", ".join(f"d{s.d}L{s.L}" for s in sizes),
        source=("FLOPs counted at each size (FlopCounterMode)" if counted else
                "FLOPs not counted at these sizes: 6 N per token and 12 L d s (Kaplan et al. "
                "2020; PaLM appendix B), the ladder's own count"),
        max_rel_error=max(errs))


def from_one_size(workload: str, size: ReadSize, vocab: int, batch: int, seq: int
                  ) -> FamilyScaling:
    """The family's scaling from one measured size with counted FLOPs (module docstring).
    Raises ``ValueError`` where the counts cannot be split so (no counted GEMM FLOPs, a
    head larger than the whole count, fewer parameters than the layers' weights)."""
    if not size.gemm_flops:
        raise ValueError("no GEMM FLOPs counted at the family's measured size")
    head = 6.0 * batch * seq * vocab  # per unit width
    layers = size.gemm_flops - head * size.d
    if layers <= 0:
        raise ValueError(f"the head's 6 B s V d = {head * size.d:.3g} FLOPs is not below the "
                         f"{size.gemm_flops:.3g} counted: the count cannot be split into "
                         "layers and head")
    a = layers / (size.L * size.d ** 2)
    p = a / (6.0 * batch * seq)
    q = (size.params - p * size.L * size.d ** 2) / size.d
    if q < 0:
        raise ValueError(f"{size.params:.4g} parameters are fewer than the layers' weights "
                         f"the counted FLOPs imply ({p * size.L * size.d ** 2:.4g})")
    return FamilyScaling(
        workload=workload, batch=batch, seq=seq, layer_gemm=a, outer_gemm=head,
        layer_attn=(size.attn_flops or 0.0) / (size.L * size.d), layer_params=p,
        outer_params=q, head_dim=max(1, size.d // size.H), aspect=size.d / size.L,
        read_at=f"d{size.d}L{size.L} only", source=(
            f"FLOPs counted at one size: the head 6 B s V d (V={vocab}), the rest shared by "
            "the layers; unchecked at any other size"), max_rel_error=0.0)
