"""The live warm window of the loop guard: the last ``size`` warm step times, kept in arrival
order and sorted side by side, so that the median and the slowest are read in O(1) after
every step and an insertion costs a bisection and a short memmove (``size`` = 101: a few
hundred nanoseconds).

Why every step: the guard judges drift against the certificate's prediction after each warm
step. An earlier guard recomputed the median every few steps and gated its drift check on
that counter; reading the figures for a logger recomputed the median too and reset the
counter, so a loop that logged every step never had its drift checked. Here nothing that
reads the window changes it.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import deque


class WarmWindow:
    """The last ``size`` warm step times (seconds)."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a window of {size} steps: give at least 1")
        self._arrived: deque[float] = deque(maxlen=size)
        self._sorted: list[float] = []

    def add(self, seconds: float) -> None:
        """One more warm step; the oldest leaves a full window."""
        if len(self._arrived) == self._arrived.maxlen:
            del self._sorted[bisect_left(self._sorted, self._arrived[0])]
        self._arrived.append(seconds)
        insort(self._sorted, seconds)

    def __len__(self) -> int:
        return len(self._sorted)

    @property
    def median(self) -> float | None:
        """The median of the window (the mean of the middle two for an even count); None
        while it is empty."""
        xs, k = self._sorted, len(self._sorted)
        if not k:
            return None
        return xs[k // 2] if k % 2 else 0.5 * (xs[k // 2 - 1] + xs[k // 2])

    @property
    def slowest(self) -> float:
        """The slowest step of the window; 0 while it is empty."""
        return self._sorted[-1] if self._sorted else 0.0
