"""Bounded-memory byte n-gram statistics over a stream of chunks (numpy only; no I/O).

For data larger than memory: the statistics of :mod:`afford.bars.counting` kept in fixed-size
tables instead of sorted arrays. An order whose 256^k grams fit in ``buckets`` slots is
indexed by the gram itself and is **exact**. A higher order is an open-addressing hash table
of ``buckets`` slots: a multiplicative (Fibonacci) hash of the key, linear probing over
:data:`PROBES` slots, and each slot keeps the key of the gram that owns it (the first to
arrive). Until the table is nearly full this is exact too; then:

- a gram that finds no free slot among its probes is **not counted** (its occurrences are
  dropped, and counted as dropped); it reads as unseen, so the model backs off to the orders
  below;
- nothing is ever credited to a gram it did not see: a lookup of a gram that does not own
  its slot returns 0. Collisions lose information, they never invent it.

So every count, continuation count and follower count is exact or an undercount, and the
share of each order's occurrences that were dropped is measured exactly
(:meth:`HashedCounter.hashing_report`). Predictions are scored renormalised over the 256 bytes
(``renormalise=True`` in :mod:`afford.bars.smoothing`): the bar is the code length of a proper
model counted on the training part only.

Memory: per hashed order 32 bytes a slot (the owner's key, an int64 count, four uint32
tables); direct orders have 256^k slots of 24 bytes.

Tables, for the order-N model (g a k-gram, h a context):

- ``raw[k][g]``: occurrences of g (k = 1..N);
- ``cont[k][g]``: distinct (k+1)-grams ending in g (k = 1..N-1);
- ``follow[k][h]``: distinct (k+1)-grams starting with h (k = 0..N-1; k = 0 is one slot);
- ``middle[k][h]``: distinct (k+2)-grams with h in the middle = sum_w cont[k+1][hw];
- ``cfollow[k][h]``: distinct (k+1)-grams hw with cont[k+1][hw] > 0 (k = 0..N-2).

The total of a raw context, sum_w c(hw), is raw[k][h] less the grams h that end a segment
(kept in ``tails``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from afford.bars.counting import MAX_ORDER, gram_keys, mask

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio (Knuth, TAOCP 6.4)
_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)   # no gram of order <= 7 has this key
PROBES = 16  # linear probing: slots tried before a gram is dropped
_U8 = np.uint64(8)


@dataclass(frozen=True)
class OrderHashing:
    """How one order was stored, and how much of it was dropped for want of a slot."""

    order: int
    slots: int
    direct: bool
    occupied: int
    occurrences: int
    dropped: int

    @property
    def dropped_share(self) -> float:
        return self.dropped / self.occurrences if self.occurrences else 0.0


class _Index:
    """Key -> slot for one order: the key itself (direct), or a Fibonacci hash with linear
    probing over an owner table (the key of the gram holding each slot): a key lives in the
    first of its :data:`PROBES` slots that was free when it came."""

    def __init__(self, order: int, buckets: int):
        self.order = order
        self.direct = 256 ** order <= buckets
        self.slots = 256 ** order if self.direct else buckets
        self.shift = None if self.direct else np.uint64(64 - int(math.log2(buckets)))
        self.owner = None if self.direct else np.full(buckets, _EMPTY, np.uint64)

    def _home(self, keys: np.ndarray) -> np.ndarray:
        return ((keys * _GOLDEN) >> self.shift).astype(np.intp)

    def find(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(slots, found) of ``keys`` (any shape); a key not in the table has found False
        (and slot 0, not to be used)."""
        if self.direct:
            return keys.astype(np.intp), np.ones(np.shape(keys), bool)
        flat = np.ravel(keys)
        slot = np.zeros(len(flat), np.intp)
        found = np.zeros(len(flat), bool)
        active = np.arange(len(flat))
        home = self._home(flat)
        for r in range(PROBES):
            s = (home[active] + r) & (self.slots - 1)
            own = self.owner[s]
            hit = own == flat[active]
            slot[active[hit]], found[active[hit]] = s[hit], True
            active = active[~hit & (own != _EMPTY)]
            if len(active) == 0:
                break
        return slot.reshape(np.shape(keys)), found.reshape(np.shape(keys))

    def claim(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """For distinct ``keys``: (slots, kept, new). A key takes the first free slot of its
        probe sequence (the smallest key wins a slot two of them reach in the same round);
        kept: it is in the table; new: it has just been placed (None: direct, see raw)."""
        n = len(keys)
        if self.direct:
            return keys.astype(np.intp), np.ones(n, bool), None
        slot = np.zeros(n, np.intp)
        kept, new = np.zeros(n, bool), np.zeros(n, bool)
        active, home = np.arange(n), self._home(keys)
        for r in range(PROBES):
            s = (home[active] + r) & (self.slots - 1)
            own = self.owner[s]
            hit = own == keys[active]
            free = np.flatnonzero(own == _EMPTY)
            _, first = np.unique(s[free], return_index=True)
            win = free[first]
            self.owner[s[win]] = keys[active[win]]
            new[active[win]] = True
            placed = hit.copy()
            placed[win] = True
            slot[active[placed]], kept[active[placed]] = s[placed], True
            active = active[~placed]
            if len(active) == 0:
                break
        return slot, kept, new

    @property
    def nbytes(self) -> int:
        return 0 if self.owner is None else int(self.owner.nbytes)


class HashedCounter:
    """Statistics of orders 1..``max_order`` in tables of at most ``buckets`` slots each
    (``buckets`` a power of two); feed it with :meth:`add` chunk by chunk."""

    def __init__(self, max_order: int, buckets: int = 1 << 22):
        if not 1 <= max_order <= MAX_ORDER:
            raise ValueError(f"order {max_order}: byte n-grams of order 1 to {MAX_ORDER}")
        if buckets < 256 or buckets & (buckets - 1):
            raise ValueError(f"buckets {buckets}: a power of two, at least 256")
        self.max_order, self.buckets = max_order, buckets
        n = max_order
        self.index = {k: _Index(k, buckets) for k in range(0, n + 1)}
        size = {k: ix.slots for k, ix in self.index.items()}
        self.raw = {k: np.zeros(size[k], np.int64) for k in range(1, n + 1)}
        self.cont = {k: np.zeros(size[k], np.uint32) for k in range(1, n)}
        self.follow = {k: np.zeros(size[k], np.uint32) for k in range(0, n)}
        self.middle = {k: np.zeros(size[k], np.uint32) for k in range(0, n - 1)}
        self.cfollow = {k: np.zeros(size[k], np.uint32) for k in range(0, n - 1)}
        self.occurrences = {k: 0 for k in range(1, n + 1)}
        self.dropped = {k: 0 for k in range(1, n + 1)}
        self.positions = 0
        self.tails: dict[int, list[int]] = {k: [] for k in range(1, n)}

    @property
    def nbytes(self) -> int:
        tables = (*self.raw.values(), *self.cont.values(), *self.follow.values(),
                  *self.middle.values(), *self.cfollow.values())
        return int(sum(t.nbytes for t in tables) + sum(ix.nbytes for ix in self.index.values()))

    def add(self, buf: np.ndarray, new_from: int = 0) -> None:
        """Count the grams of ``buf`` (uint8) that end at or after ``buf[new_from]``: the
        first ``new_from`` bytes are the previous chunk's last bytes (at most max_order-1),
        carried so grams across the chunk boundary are counted once."""
        self.positions += len(buf) - new_from
        for k in range(1, self.max_order + 1):
            keys = gram_keys(buf, k)[max(new_from - k + 1, 0):]
            if len(keys):
                self._add_order(k, keys)

    def end_segment(self, tail: np.ndarray) -> None:
        """Mark the end of a segment (``tail``: its last bytes, at least max_order-1 when the
        segment holds them): its last k-gram has no follower, so it is taken out of the raw
        context totals of order k+1."""
        for k in range(1, self.max_order):
            if len(tail) >= k:
                self.tails[k].append(int(gram_keys(tail[len(tail) - k:], k)[0]))

    def _add_order(self, k: int, keys: np.ndarray) -> None:
        uk, cnt = np.unique(keys, return_counts=True)
        ix = self.index[k]
        slot, kept, claimed = ix.claim(uk)
        new = (self.raw[k][slot] == 0) & kept if claimed is None else claimed
        self.occurrences[k] += len(keys)
        self.dropped[k] += int(cnt[~kept].sum())
        self.raw[k][slot[kept]] += cnt[kept]
        g = uk[new]
        if len(g) == 0:
            return
        self._bump(self.follow[k - 1], k - 1, g >> _U8)
        if k >= 2:
            self._add_continuations(k, g)

    def _bump(self, table: np.ndarray, order: int, keys: np.ndarray) -> np.ndarray:
        """+1 at each key's slot where the key owns it; returns the owning mask."""
        slot, owns = self.index[order].find(keys)
        np.add.at(table, slot[owns], 1)
        return owns

    def _add_continuations(self, k: int, g: np.ndarray) -> None:
        """New k-grams g = x h w: cont[k-1][hw] += 1; middle[k-2][h] += 1; and where hw had
        no continuation yet, cfollow[k-2][h] += 1."""
        suffix = g & mask(k - 1)
        us, cnt = np.unique(suffix, return_counts=True)
        slot, owns = self.index[k - 1].find(us)
        was_zero = (self.cont[k - 1][slot] == 0) & owns
        self.cont[k - 1][slot[owns]] += cnt[owns].astype(np.uint32)
        mid = (g >> _U8) & mask(k - 2) if k > 2 else np.zeros(len(g), np.uint64)
        self._bump(self.middle[k - 2], k - 2, mid)
        self._bump(self.cfollow[k - 2], k - 2, us[was_zero] >> _U8)

    def hashing_report(self) -> list[OrderHashing]:
        return [OrderHashing(k, self.index[k].slots, self.index[k].direct,
                             int(np.count_nonzero(self.raw[k])), self.occurrences[k],
                             self.dropped[k])
                for k in range(1, self.max_order + 1)]

    def stats(self) -> "HashedStats":
        return HashedStats(self)


class HashedLevel:
    """One level read from the tables (the interface of :class:`~afford.bars.counting.Level`):
    a gram or context that does not own its slot reads as 0."""

    def __init__(self, order: int, values: np.ndarray, index: _Index, ctx_index: _Index,
                 totals: np.ndarray, distinct: np.ndarray, tails: list[int] | None = None):
        self.order, self._values, self._index = order, values, index
        self._ctx_index, self._totals, self._distinct = ctx_index, totals, distinct
        self._tails = np.unique(np.array(tails or [], np.uint64), return_counts=True)
        nz = values[values > 0]
        self.n1, self.n2 = int(np.count_nonzero(nz == 1)), int(np.count_nonzero(nz == 2))

    def values(self, grams: np.ndarray) -> np.ndarray:
        slot, owns = self._index.find(grams)
        return np.where(owns, self._values[slot], 0).astype(np.int64)

    def context(self, ctx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        slot, owns = self._ctx_index.find(ctx)
        totals = np.where(owns, self._totals[slot], 0).astype(np.int64)
        for t, n in zip(*self._tails):
            totals = totals - n * ((ctx == t) & owns)
        return totals, np.where(owns, self._distinct[slot], 0).astype(np.int64)


class HashedStats:
    """Levels over a :class:`HashedCounter`, shaped like :class:`~afford.bars.counting.Stats`."""

    def __init__(self, c: HashedCounter):
        self.max_order, self.positions = c.max_order, c.positions
        total = np.array([c.positions], np.int64)
        self.raw, self.cont = {}, {}
        for k in range(1, c.max_order + 1):
            totals = total if k == 1 else c.raw[k - 1]
            self.raw[k] = HashedLevel(k, c.raw[k], c.index[k], c.index[k - 1], totals,
                                      c.follow[k - 1], c.tails.get(k - 1) if k > 1 else None)
        for k in range(1, c.max_order):
            self.cont[k] = HashedLevel(k, c.cont[k], c.index[k], c.index[k - 1],
                                       c.middle[k - 1], c.cfollow[k - 1])
