"""Exact byte n-gram statistics, by sorting (numpy only; no I/O).

A k-gram is packed into one ``uint64`` key, first byte most significant (k <= 7), so a sort of
the keys groups every k-gram with its equals *and* every context (its first k-1 bytes, ``key
>> 8``) with its followers. From one sort of the highest order's keys everything interpolated
Kneser-Ney needs (Chen & Goodman 1998, section 2.7) follows without another pass over the
data:

- raw counts c(g) of every order: the (k+1)-gram table grouped by prefix, plus the one k-gram
  at each segment's end that no (k+1)-gram starts with;
- continuation counts N1+(. g), the number of distinct bytes seen before g: the (k+1)-gram
  table's suffixes (``key & mask``), sorted and counted;
- per context h of a table: the total sum_w a(hw) and the number of distinct followers
  #{w : a(hw) > 0} (contiguous groups of the sorted table, :func:`context_stats`);
- count-of-counts n1, n2 (for the discount).

Segments (the training part around a held-out window) are counted separately and summed: no
n-gram spans the hole.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_ORDER = 7  # a key is 7 bytes at most: all-ones (2^64 - 1) is never a key
_U8 = np.uint64(8)


def mask(k: int) -> np.uint64:
    """The low ``k`` bytes of a key (the last k bytes of a gram)."""
    return np.uint64((1 << (8 * k)) - 1)


def gram_keys(seg: np.ndarray, k: int) -> np.ndarray:
    """The k-gram keys at every start of ``seg`` (uint8): ``len(seg) - k + 1`` of them."""
    if not 1 <= k <= MAX_ORDER:
        raise ValueError(f"order {k}: byte n-grams of order 1 to {MAX_ORDER}")
    n = len(seg) - k + 1
    if n <= 0:
        return np.empty(0, np.uint64)
    keys = seg[:n].astype(np.uint64)
    for j in range(1, k):
        keys <<= _U8
        keys |= seg[j:n + j]
    return keys


@dataclass(frozen=True)
class Table:
    """One statistic of k-grams: sorted unique keys and their values (all > 0)."""

    order: int
    keys: np.ndarray    # (U,) uint64, ascending
    values: np.ndarray  # (U,) int64

    def lookup(self, query: np.ndarray) -> np.ndarray:
        """Values of the grams ``query`` (any shape), 0 where absent."""
        return _lookup(self.keys, self.values, query)


@dataclass(frozen=True)
class Level:
    """A table with what a smoothing needs of it: per-context totals and distinct followers
    (contexts are ``key >> 8``; the empty context of unigrams is key 0), count-of-counts."""

    table: Table
    ctx_keys: np.ndarray      # (C,) uint64, ascending
    ctx_totals: np.ndarray    # (C,) int64: sum_w a(hw)
    ctx_distinct: np.ndarray  # (C,) int64: #{w : a(hw) > 0}
    n1: int                   # grams with value 1
    n2: int                   # grams with value 2

    @property
    def order(self) -> int:
        return self.table.order

    def values(self, grams: np.ndarray) -> np.ndarray:
        return self.table.lookup(grams)

    def context(self, ctx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(totals, distinct followers) of the contexts ``ctx``; zeros where unseen."""
        return (_lookup(self.ctx_keys, self.ctx_totals, ctx),
                _lookup(self.ctx_keys, self.ctx_distinct, ctx))


@dataclass(frozen=True)
class Stats:
    """Raw levels of orders 1..max and continuation levels of orders 1..max-1."""

    max_order: int
    positions: int  # bytes counted (the training part)
    raw: dict[int, Level]
    cont: dict[int, Level]


def _lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    if len(keys) == 0:
        return np.zeros(np.shape(query), np.int64)
    idx = np.searchsorted(keys, query)
    idx = np.minimum(idx, len(keys) - 1)
    return np.where(keys[idx] == query, values[idx], 0)


def unique_counts(keys: np.ndarray) -> Table:
    """Sort ``keys`` (in place) and count equal runs."""
    keys.sort()
    if len(keys) == 0:
        return Table(0, keys, np.empty(0, np.int64))
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    counts = np.diff(np.append(starts, len(keys))).astype(np.int64)
    return Table(0, keys[starts], counts)


def _groups(keys: np.ndarray) -> np.ndarray:
    """Start index of each run of equal values in a sorted array."""
    return np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))


def context_stats(table: Table) -> Level:
    """Group a sorted table by context (``key >> 8``): totals and distinct followers."""
    if len(table.keys) == 0:
        empty = np.empty(0, np.int64)
        return Level(table, np.empty(0, np.uint64), empty, empty, 0, 0)
    ctx = table.keys >> _U8
    starts = _groups(ctx)
    totals = np.add.reduceat(table.values, starts)
    distinct = np.diff(np.append(starts, len(ctx))).astype(np.int64)
    return Level(table, ctx[starts], totals, distinct, int(np.count_nonzero(table.values == 1)),
                 int(np.count_nonzero(table.values == 2)))


def _prefix_counts(upper: Table, tails: np.ndarray, order: int) -> Table:
    """Raw counts of ``order``-grams: the (order+1)-gram table grouped by prefix, plus
    ``tails`` (the one ``order``-gram at the end of each segment)."""
    if len(upper.keys):
        pre = upper.keys >> _U8
        starts = _groups(pre)
        keys, values = pre[starts], np.add.reduceat(upper.values, starts)
    else:
        keys, values = np.empty(0, np.uint64), np.empty(0, np.int64)
    if len(tails):
        t = unique_counts(np.array(tails, np.uint64))
        merged = np.concatenate((keys, t.keys))
        vals = np.concatenate((values, t.values))
        order_idx = np.argsort(merged, kind="stable")
        merged, vals = merged[order_idx], vals[order_idx]
        starts = _groups(merged)
        keys, values = merged[starts], np.add.reduceat(vals, starts)
    return Table(order, keys, values)


def _continuation(upper: Table, order: int) -> Table:
    """N1+(. g) for ``order``-grams g: distinct (order+1)-grams ending in g."""
    t = unique_counts(upper.keys & mask(order))
    return Table(order, t.keys, t.values)


def count_exact(segments: list[np.ndarray], max_order: int) -> Stats:
    """Exact statistics of orders 1..``max_order`` over byte ``segments`` (uint8 arrays)."""
    if not 1 <= max_order <= MAX_ORDER:
        raise ValueError(f"order {max_order}: byte n-grams of order 1 to {MAX_ORDER}")
    top_keys = [gram_keys(s, max_order) for s in segments]
    top = unique_counts(np.concatenate(top_keys) if top_keys else np.empty(0, np.uint64))
    del top_keys
    raw = {max_order: Table(max_order, top.keys, top.values)}
    for k in range(max_order - 1, 0, -1):
        tails = [gram_keys(s[len(s) - k:], k) for s in segments if len(s) >= k]
        tails_arr = np.concatenate(tails) if tails else np.empty(0, np.uint64)
        raw[k] = _prefix_counts(raw[k + 1], tails_arr, k)
    cont = {k: _continuation(raw[k + 1], k) for k in range(1, max_order)}
    return Stats(max_order=max_order, positions=int(sum(len(s) for s in segments)),
                 raw={k: context_stats(t) for k, t in raw.items()},
                 cont={k: context_stats(t) for k, t in cont.items()})
