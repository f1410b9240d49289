"""Byte-level n-gram baselines in bits per byte: the bars a model must beat.

Counts on the training part, bits per byte on a held-out window (the scale-ladder note's
milestone bars: "What BPB must my model beat to say it learned anything"). The pieces, each
pure and numpy-only:

- :mod:`~afford.bars.window`: the held-out spec, where the window lies, its SHA-256;
- :mod:`~afford.bars.counting`: exact statistics by sorting packed keys;
- :mod:`~afford.bars.hashed`: bounded-memory statistics for data larger than memory;
- :mod:`~afford.bars.smoothing`: interpolated Kneser-Ney and add-k, scored on the window.

:mod:`~afford.bars.source` is the one module here that reads files. No torch anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from afford.bars.counting import MAX_ORDER, count_exact
from afford.bars.hashed import HashedCounter
from afford.bars.smoothing import Score, add_k, kneser_ney

SMOOTHINGS = ("kneser-ney", "add-k")


def parse_orders(text: str) -> tuple[int, ...]:
    """``"1..5"`` -> (1, 2, 3, 4, 5); ``"1,3,5"``; ``"5"``. ValueError when malformed."""
    out: set[int] = set()
    for part in str(text).replace(" ", "").split(","):
        lo, sep, hi = part.partition("..")
        try:
            a, b = int(lo), int(hi if sep else lo)
        except ValueError:
            raise ValueError(f"--order {text!r}: write 1..5, 1,3,5 or 5") from None
        if not 1 <= a <= b <= MAX_ORDER:
            raise ValueError(f"--order {text!r}: orders from 1 to {MAX_ORDER}, ascending "
                             "ranges")
        out.update(range(a, b + 1))
    return tuple(sorted(out))


def count_streaming(segments: Iterable[Iterable[np.ndarray]], max_order: int,
                    buckets: int) -> HashedCounter:
    """Feed a :class:`HashedCounter` segment by segment, chunk by chunk (uint8 arrays),
    carrying max_order-1 bytes across chunk boundaries (never across segments)."""
    counter = HashedCounter(max_order, buckets)
    keep = max_order - 1
    for chunks in segments:
        carry = np.empty(0, np.uint8)
        for chunk in chunks:
            buf = np.concatenate((carry, np.asarray(chunk, np.uint8)))
            counter.add(buf, len(carry))
            carry = buf[len(buf) - keep:] if keep else np.empty(0, np.uint8)
        counter.end_segment(carry)
    return counter


def score(stats, window: np.ndarray, orders: Sequence[int],
          smoothings: Sequence[str] = SMOOTHINGS, *, k: float = 1.0,
          discount: float | None = None, renormalise: bool = False) -> list[Score]:
    """Every (order, smoothing) score of ``window`` on ``stats`` (exact or hashed)."""
    out = []
    for n in orders:
        for s in smoothings:
            if s == "kneser-ney":
                out.append(kneser_ney(stats, n, window, discount=discount,
                                      renormalise=renormalise))
            elif s == "add-k":
                out.append(add_k(stats, n, window, k=k, renormalise=renormalise))
            else:
                raise ValueError(f"smoothing {s!r}: choose from {', '.join(SMOOTHINGS)}")
    return out


__all__ = ["SMOOTHINGS", "Score", "count_exact", "count_streaming", "parse_orders", "score"]
