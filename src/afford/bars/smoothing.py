"""Smoothed byte n-gram models and their code length on a held-out window (numpy only).

**Interpolated Kneser-Ney** (Kneser & Ney 1995; the interpolated form of Chen & Goodman 1998,
"An Empirical Study of Smoothing Techniques for Language Modeling", section 2.7, eq. 26 with
one discount per order). For the model of order N, at level k with context h (k-1 bytes):

    p_k(w | h) = ( max(a_k(hw) - D_k, 0) + D_k * N_k(h) * p_{k-1}(w | h') ) / T_k(h)

where h' drops h's first byte, T_k(h) = sum_w a_k(hw), N_k(h) = #{w : a_k(hw) > 0}, and
p_k = p_{k-1} where T_k(h) = 0 (an unseen context). a_N is the raw count c(hw); a_k for k < N
is the continuation count N1+(. hw), the number of distinct bytes seen before hw. Below
order 1 is the uniform 1/256, so no byte ever has probability 0. The discount of each level
is Ney's estimate D = n1 / (n1 + 2 n2) from the count-of-counts of the values that level uses
(Ney, Essen & Kneser 1994); where it is not in (0, 1) (no singletons) 0.5 is used and said.

**Add-k** (Lidstone; k = 1 is Laplace): p(w | h) = (c(hw) + k) / (c(h.) + 256 k), order N
only. Shown for comparison: it has no backoff, so it is a poor bar at high orders.

**The window.** Every byte of the window is predicted from the bytes before it *in the
window*: byte i with context min(N-1, i), the first N-1 bytes by the model of order i+1
(its top level on raw counts). Bits per byte = -sum log2 p / window length.

A level is anything with ``values(grams)``, ``context(ctx) -> (totals, distinct)``, ``n1``,
``n2`` (:class:`afford.bars.counting.Level` exactly, :class:`afford.bars.hashed.HashedLevel`
approximately). ``renormalise=True`` divides each prediction by its sum over the 256 bytes
(the hashed levels need it: colliding counts do not sum to one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from afford.bars.counting import gram_keys

ALPHABET = 256
FALLBACK_DISCOUNT = 0.5
BLOCK = 2048  # positions per block when predicting all 256 bytes (memory: BLOCK x 256)
_U8 = np.uint64(8)


@dataclass(frozen=True)
class Score:
    """The code length of a window under one model."""

    order: int
    smoothing: str
    bits: float
    bytes: int
    discounts: tuple[float, ...] = ()  # per level 1..order (Kneser-Ney)
    k: float | None = None              # add-k
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def bpb(self) -> float:
        return self.bits / self.bytes


def ney_discount(n1: int, n2: int) -> float | None:
    """D = n1 / (n1 + 2 n2) (Ney, Essen & Kneser 1994); None when it is not in (0, 1)."""
    if n1 + 2 * n2 == 0:
        return None
    d = n1 / (n1 + 2 * n2)
    return d if 0.0 < d < 1.0 else None


def kn_levels(stats, order: int) -> list:
    """The levels of the order-``order`` model: continuation counts below, raw on top."""
    return [stats.cont[k] for k in range(1, order)] + [stats.raw[order]]


def discounts(levels: Sequence, fixed: float | None = None) -> tuple[tuple[float, ...], list[str]]:
    """One discount per level (``fixed`` for all, or Ney's estimate), with warnings."""
    if fixed is not None:
        if not 0.0 < fixed <= 1.0:
            raise ValueError(f"discount {fixed}: choose one in (0, 1]")
        return tuple(fixed for _ in levels), []
    out, warn = [], []
    for j, lev in enumerate(levels):
        d = ney_discount(lev.n1, lev.n2)
        if d is None:
            warn.append(f"level {j + 1}: n1={lev.n1}, n2={lev.n2} give no discount in (0, 1); "
                        f"D = {FALLBACK_DISCOUNT} used")
            d = FALLBACK_DISCOUNT
        out.append(d)
    return tuple(out), warn


def kn_chain(levels: Sequence, ds: Sequence[float], grams: Sequence[np.ndarray]) -> np.ndarray:
    """p(w | context) by interpolated Kneser-Ney; ``grams[j]`` holds the (j+1)-gram keys that
    end in w (any shape, the same for every level)."""
    p = np.full(np.shape(grams[0]), 1.0 / ALPHABET)
    for lev, d, g in zip(levels, ds, grams):
        a = lev.values(g).astype(np.float64)
        tot, n = lev.context(g >> _U8)
        seen = tot > 0
        safe = np.where(seen, tot, 1).astype(np.float64)
        n = np.maximum(n, 1)  # exact: n >= 1 wherever tot > 0; hashed: collisions can lose it
        p = np.where(seen, (np.maximum(a - d, 0.0) + d * n * p) / safe, p)
    return p


def add_k_prob(level, k: float, grams: np.ndarray) -> np.ndarray:
    """(c(hw) + k) / (c(h.) + 256 k) on one raw level."""
    c = level.values(grams).astype(np.float64)
    tot, _ = level.context(grams >> _U8)
    return (c + k) / (tot + ALPHABET * k)


def _window_grams(window: np.ndarray, order: int) -> list[np.ndarray]:
    """For positions order-1..L-1: the (j+1)-gram keys ending there, j = 0..order-1."""
    n = len(window)
    return [gram_keys(window, k)[order - k:n - k + 1] for k in range(1, order + 1)]


def _with_all_bytes(grams: list[np.ndarray]) -> list[np.ndarray]:
    """Replace the last byte of each gram by every byte: shape (P,) -> (P, 256)."""
    w = np.arange(ALPHABET, dtype=np.uint64)
    return [((g >> _U8) << _U8)[:, None] | w[None, :] for g in grams]


def _log2_probs(prob: Callable[[list[np.ndarray]], np.ndarray], grams: list[np.ndarray],
                renormalise: bool) -> float:
    """-sum log2 p over positions; with ``renormalise``, p / sum over the 256 bytes."""
    if not renormalise:
        return float(-np.log2(prob(grams)).sum())
    bits = 0.0
    for s in range(0, len(grams[0]), BLOCK):
        block = [g[s:s + BLOCK] for g in grams]
        full = prob(_with_all_bytes(block))                       # (P, 256)
        last = (block[-1] & np.uint64(0xFF)).astype(np.intp)
        picked = full[np.arange(len(last)), last]
        bits += float(-np.log2(picked / full.sum(axis=1)).sum())
    return bits


def _score(window: np.ndarray, order: int, model: Callable[[int], Callable],
           renormalise: bool) -> float:
    """Bits of the window: full-context positions by the order-``order`` model, the first
    order-1 positions each by the model of the order its context allows."""
    bits = 0.0
    for m in range(1, min(order, len(window) + 1)):  # position m-1 has context m-1
        bits += _log2_probs(model(m), [g[:1] for g in _window_grams(window[:m], m)],
                            renormalise)
    if len(window) >= order:
        bits += _log2_probs(model(order), _window_grams(window, order), renormalise)
    return bits


def kneser_ney(stats, order: int, window: np.ndarray, *, discount: float | None = None,
               renormalise: bool = False) -> Score:
    """Bits of ``window`` under interpolated Kneser-Ney of ``order`` on ``stats``."""
    ds_all, warn = {}, []
    for m in range(1, order + 1):
        ds_all[m], w = discounts(kn_levels(stats, m), discount)
        if m == order:
            warn = w

    def model(m: int) -> Callable:
        levels = kn_levels(stats, m)
        return lambda grams: kn_chain(levels, ds_all[m], grams)

    bits = _score(window, order, model, renormalise)
    return Score(order, "kneser-ney", bits, len(window), discounts=ds_all[order],
                 warnings=tuple(warn))


def add_k(stats, order: int, window: np.ndarray, *, k: float = 1.0,
          renormalise: bool = False) -> Score:
    """Bits of ``window`` under add-k of ``order`` on ``stats``'s raw counts."""
    if not k > 0:
        raise ValueError(f"add-k: k = {k}; choose k > 0")

    def model(m: int) -> Callable:
        return lambda grams: add_k_prob(stats.raw[m], k, grams[-1])

    return Score(order, "add-k", _score(window, order, model, renormalise), len(window), k=k)


def distribution(stats, order: int, context: bytes, *, discount: float | None = None,
                 smoothing: str = "kneser-ney", k: float = 1.0) -> np.ndarray:
    """p(. | context) over the 256 bytes (for checks: it sums to 1 for exact statistics)."""
    ctx = np.frombuffer(bytes(context), np.uint8)[-(order - 1):] if order > 1 else \
        np.empty(0, np.uint8)
    m = len(ctx) + 1
    seq = np.concatenate((ctx, np.zeros(1, np.uint8)))
    grams = _with_all_bytes([g[-1:] for g in (gram_keys(seq, j) for j in range(1, m + 1))])
    if smoothing == "add-k":
        return add_k_prob(stats.raw[m], k, grams[-1])[0]
    levels = kn_levels(stats, m)
    ds, _ = discounts(levels, discount)
    return kn_chain(levels, ds, grams)[0]
