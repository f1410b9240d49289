"""A model of PyTorch's CUDA caching allocator, to replay a step's allocations.

Why: what decides an out-of-memory is *reserved* memory, the bytes the caching allocator
holds from the driver, and reserved is not a smooth function of the shape: it is what a
policy of rounding, pooling, best fit, splitting and caching makes of the step's sequence
of allocations and frees. A least-squares law over a few peaks misses it by several per
cent; replaying the sequence through the policy need not.

The policy is that of ``c10/cuda/CUDACachingAllocator.cpp`` (``DeviceCachingAllocator``:
``malloc``, ``get_free_block``, ``should_split``, ``alloc_found_block``, ``free_block``,
``try_merge_blocks``, ``release_blocks``; ``try_allocate_expandable_block`` and
``map_block`` for expandable segments), with its default configuration:

- a request is rounded up to a multiple of 512 B (``round_size``; no
  ``roundup_power2_divisions``);
- rounded sizes <= 1 MiB go to the small pool, larger ones to the large pool; pools are
  per stream (a free block is reused only on the stream that allocated it);
- a request is served by the smallest free block of its pool that fits, ties to the lower
  address (``BlockComparatorSize``: stream, size, address);
- if none fits, a new segment is allocated from the driver: 2 MiB for a small request,
  20 MiB for a large one under 10 MiB, else the request rounded up to 2 MiB
  (``get_allocation_size``);
- the block found is split, the request taking its low end, when the remainder is >= 512 B
  in the small pool or > 1 MiB in the large pool (``should_split``); otherwise the whole
  block is handed out, and *counted as allocated* (``allocated_bytes`` counts block sizes);
- a freed block merges with free neighbours of its segment (``free_block``);
- nothing returns to the driver during a step (``release_cached_blocks`` runs only on
  ``empty_cache`` or when ``cudaMalloc`` fails), so reserved only grows; ``empty_cache``
  releases whole free segments only: a segment with one live block stays, holes and all.

``max_split_size_mb`` (default unlimited) and ``roundup_power2_divisions`` are not modelled;
nor are out-of-memory retries (the replay assumes the device has room) or cross-stream
uses (``record_stream``): a trace with more than one stream is replayed per stream's pools,
with every free taking effect at once.

Expandable segments (``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``): one segment
per pool and stream, a reserved virtual range mapped on demand in pages of 2 MiB (small
pool) or 20 MiB (large pool), at the lowest address where the free blocks next to the
unmapped range make room (``find_expandable_block``); blocks split whenever the remainder
is >= 512 B; best fit among mapped free blocks, where a free block touching the unmapped
tail counts as big as it could grow (so it is chosen last); ``empty_cache`` unmaps the
whole free pages.

Contract: a recorded history, replayed in process order from the state its process had,
gives the measured peak allocated and reserved to the byte, the same segments, and every
block at the address PyTorch gave it; under expandable segments, the peaks of a run with
expandable segments. A replay that does not is not trusted
(:func:`afford.fit.memory.replay_fit.replay_recorded`).

Pure: no torch, no I/O. Addresses of new segments come from an :class:`AddressSource`
(the recorded ones when validating a recorded trace; a descending sequence, the order in
which the CUDA driver has been seen to hand them out, when replaying a synthesised one).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

KIB = 1024
MIB = 1024 * KIB
MIN_BLOCK = 512                 # kMinBlockSize: every request rounded up to this
SMALL_SIZE = 1 * MIB            # kSmallSize: largest request of the small pool
SMALL_BUFFER = 2 * MIB          # kSmallBuffer: segment of the small pool
LARGE_BUFFER = 20 * MIB         # kLargeBuffer: segment for large requests under 10 MiB
MIN_LARGE_ALLOC = 10 * MIB      # kMinLargeAlloc
ROUND_LARGE = 2 * MIB           # kRoundLarge: larger requests rounded up to this
EXPANDABLE_SPAN = 1 << 44       # virtual range of one expandable segment (16 TiB)

class AllocEvent(NamedTuple):
    """One request to the allocator: ``alloc`` of ``size`` bytes under ``key``, or ``free``
    of the block allocated under ``key`` (size ignored). Keys are unique among live blocks."""

    op: str
    key: int
    size: int = 0
    stream: int = 0


def round_size(size: int) -> int:
    """``round_size``: up to a multiple of 512 B, at least 512 B."""
    return MIN_BLOCK if size < MIN_BLOCK else MIN_BLOCK * -(-size // MIN_BLOCK)


def is_small(rounded: int) -> bool:
    """``get_pool``: the small pool takes rounded sizes up to 1 MiB."""
    return rounded <= SMALL_SIZE


def segment_size(rounded: int) -> int:
    """``get_allocation_size``: the segment cudaMalloc'd for a request no free block fits."""
    if rounded <= SMALL_SIZE:
        return SMALL_BUFFER
    if rounded < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return ROUND_LARGE * -(-rounded // ROUND_LARGE)


def page_size(small: bool) -> int:
    """Expandable segments map physical memory in 2 MiB pages (small pool) or 20 MiB pages
    (large pool)."""
    return SMALL_BUFFER if small else LARGE_BUFFER


class AddressSource:
    """Where the driver puts the next segment: the recorded addresses in order while they
    last (one that would overlap a live segment is skipped), then descending below the
    lowest segment held (the CUDA driver has been seen to give each new cudaMalloc a lower
    address than the last). Only ties of best fit between equal free blocks depend on it."""

    def __init__(self, recorded: Iterable[int] = ()) -> None:
        self._recorded: Iterator[int] = iter(recorded)

    def next(self, size: int, held: Sequence[Segment]) -> int:
        addr = next(self._recorded, None)
        if addr is not None and not any(addr < g.addr + g.extent and
                                        g.addr < addr + size for g in held):
            return addr
        low = min((g.addr for g in held), default=1 << 47)
        return (low - size) // ROUND_LARGE * ROUND_LARGE


@dataclass(eq=False, slots=True)
class Block:
    """A block of a segment: ``prev``/``next`` are its neighbours in the segment."""

    addr: int
    size: int
    small: bool
    stream: int
    segment: Segment
    allocated: bool = False
    mapped: bool = True
    prev: Block | None = None
    next: Block | None = None

    @property
    def pool(self) -> tuple[bool, int]:
        return (self.small, self.stream)


@dataclass(eq=False, slots=True)
class Segment:
    """One cudaMalloc (or one expandable virtual range): ``size`` is what it reserves."""

    addr: int
    size: int
    small: bool
    stream: int
    expandable: bool = False
    head: Block | None = None

    @property
    def extent(self) -> int:
        """The address range it holds: an expandable segment its whole virtual range
        (``size`` counts only its mapped pages), any other its size."""
        return EXPANDABLE_SPAN if self.expandable else self.size


class SegmentDecision(NamedTuple):
    """A segment the model allocated (or pages it mapped): at which event, how many bytes."""

    event: int
    size: int
    addr: int


class Allocator:
    """The caching allocator's state and policy (see the module docstring).

    ``malloc``/``free`` take keys, not addresses, so a synthesised trace can be replayed;
    ``allocated``/``reserved`` and their peaks follow the allocator's own statistics
    (``allocated_bytes`` counts whole blocks, ``reserved_bytes`` whole segments or mapped
    pages)."""

    def __init__(self, expandable: bool = False, addresses: AddressSource | None = None) -> None:
        self.expandable = expandable
        self.addresses = addresses or AddressSource()
        self._free: dict[tuple[bool, int], list[tuple[int, int]]] = {}  # pool -> (size, addr)
        self._by_addr: dict[int, Block] = {}     # every free mapped block, by address
        self._live: dict[int, Block] = {}        # key -> allocated block
        self._unmapped: dict[tuple[bool, int], list[Block]] = {}
        self.segments: list[Segment] = []
        self.allocated = 0
        self.reserved = 0
        self.peak_allocated = 0
        self.peak_reserved = 0
        self.decisions: list[SegmentDecision] = []
        self.n_events = 0  # events applied so far

    # ------------------------------------------------------------------ public
    def malloc(self, key: int, size: int, stream: int = 0) -> Block:
        if key in self._live:
            raise ValueError(f"key {key} is already allocated")
        rounded = round_size(int(size))
        small = is_small(rounded)
        block = self._get_free_block((small, stream), rounded)
        if block is None:
            block = self._new_block(small, stream, rounded)
        if self._should_split(block, rounded):
            block = self._split(block, rounded)
        block.allocated = True
        self._live[key] = block
        self.allocated += block.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return block

    def free(self, key: int) -> None:
        block = self._live.pop(key, None)
        if block is None:
            raise ValueError(f"free of key {key}, which is not allocated")
        block.allocated = False
        self.allocated -= block.size
        for other in (block.prev, block.next):
            self._merge(block, other)
        self._insert(block)

    def apply(self, event: AllocEvent) -> None:
        if event.op == "alloc":
            self.malloc(event.key, event.size, event.stream)
        elif event.op == "free":
            self.free(event.key)
        else:
            raise ValueError(f"unknown allocator event {event.op!r}")
        self.n_events += 1

    def empty_cache(self) -> None:
        """``release_cached_blocks``: whole free segments back to the driver; for expandable
        segments, every whole free page."""
        for seg in list(self.segments):
            if seg.expandable:
                self._unmap_free_pages(seg)
            elif seg.head is not None and seg.head.next is None and not seg.head.allocated:
                self._remove_free(seg.head)
                self.segments.remove(seg)
                self.reserved -= seg.size

    def teardown(self, keep: Iterable[int] = ()) -> None:
        """What a process does between two shapes: free every live block but those keyed in
        ``keep`` (library workspaces live as long as the process), then ``empty_cache``."""
        kept = set(keep)
        for key in [k for k in self._live if k not in kept]:
            self.free(key)
        self.empty_cache()

    def reset_peaks(self) -> None:
        self.peak_allocated, self.peak_reserved = self.allocated, self.reserved

    def live_keys(self) -> list[int]:
        return list(self._live)

    def block_of(self, key: int) -> Block:
        return self._live[key]

    # ------------------------------------------------------------ free lists
    def _insert(self, block: Block) -> None:
        if not block.mapped:
            bisect.insort(self._unmapped.setdefault(block.pool, []), block,
                          key=lambda b: b.addr)
            return
        bisect.insort(self._free.setdefault(block.pool, []), (block.size, block.addr))
        self._by_addr[block.addr] = block

    def _remove_free(self, block: Block) -> None:
        if not block.mapped:
            self._unmapped[block.pool].remove(block)
            return
        lst = self._free[block.pool]
        i = bisect.bisect_left(lst, (block.size, block.addr))
        if i == len(lst) or lst[i] != (block.size, block.addr):
            raise AssertionError("free block missing from its pool")
        del lst[i]
        del self._by_addr[block.addr]

    # ---------------------------------------------------------------- policy
    def _get_free_block(self, pool: tuple[bool, int], size: int) -> Block | None:
        """``get_free_block``: the smallest free block >= size, lowest address at a tie; in
        an expandable segment a block touching unmapped space counts as big as it can grow."""
        lst = self._free.get(pool, [])
        i = bisect.bisect_left(lst, (size,))  # (size,) sorts before (size, any address)
        if i == len(lst):
            return None
        block = self._by_addr[lst[i][1]]
        if block.segment.expandable:
            j = i + 1
            while j < len(lst) and block.segment.expandable:
                nxt = self._by_addr[lst[j][1]]
                if _expandable_size(nxt) >= _expandable_size(block):
                    break
                block, j = nxt, j + 1
        self._remove_free(block)
        return block

    def _should_split(self, block: Block, size: int) -> bool:
        remaining = block.size - size
        if block.small or self.expandable:
            return remaining >= MIN_BLOCK
        return remaining > SMALL_SIZE

    def _split(self, block: Block, size: int) -> Block:
        """``alloc_found_block``: the request takes the low end, the rest stays free."""
        head = Block(block.addr, size, block.small, block.stream, block.segment,
                     prev=block.prev, next=block)
        if block.prev is not None:
            block.prev.next = head
        elif block.segment.head is block:
            block.segment.head = head
        block.prev = head
        block.addr += size
        block.size -= size
        self._insert(block)
        return head

    def _merge(self, dst: Block, src: Block | None) -> None:
        """``try_merge_blocks``: ``src`` (a free neighbour, same mapping) joins ``dst``."""
        if src is None or src.allocated or src.mapped != dst.mapped:
            return
        self._remove_free(src)
        if dst.prev is src:
            dst.addr = src.addr
            dst.prev = src.prev
            if dst.prev is not None:
                dst.prev.next = dst
            if dst.segment.head is src:
                dst.segment.head = dst
        else:
            dst.next = src.next
            if dst.next is not None:
                dst.next.prev = dst
        dst.size += src.size

    def _new_block(self, small: bool, stream: int, size: int) -> Block:
        if self.expandable:
            return self._expand(small, stream, size)
        nbytes = segment_size(size)
        seg = Segment(self.addresses.next(nbytes, self.segments), nbytes, small, stream)
        seg.head = Block(seg.addr, nbytes, small, stream, seg)
        self.segments.append(seg)
        self._grow(nbytes, seg.addr)
        return seg.head

    def _grow(self, nbytes: int, addr: int) -> None:
        self.reserved += nbytes
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        self.decisions.append(SegmentDecision(self.n_events, nbytes, addr))

    # ----------------------------------------------------- expandable segments
    def _expand(self, small: bool, stream: int, size: int) -> Block:
        """``try_allocate_expandable_block``: map pages where free space next to unmapped
        space makes room for ``size``, and return that whole free block."""
        cand = self._find_expandable(small, stream, size)
        if not cand.mapped:
            cand = self._map(cand, min(cand.size, size))
        while cand.size < size:
            cand = self._map(cand.next, min(size - cand.size, cand.next.size))
        self._remove_free(cand)
        return cand

    def _find_expandable(self, small: bool, stream: int, size: int) -> Block:
        for c in self._unmapped.get((small, stream), []):
            if c.prev is not None and not c.prev.allocated and c.prev.mapped:
                c = c.prev
            room, b = 0, c
            while room < size and b is not None and not b.allocated:
                room, b = room + b.size, b.next
            if room >= size:
                return c
        seg = Segment(self.addresses.next(EXPANDABLE_SPAN, self.segments), 0, small, stream,
                      expandable=True)
        seg.head = Block(seg.addr, EXPANDABLE_SPAN, small, stream, seg, mapped=False)
        self.segments.append(seg)
        self._insert(seg.head)
        return seg.head

    def _map(self, block: Block, size: int) -> Block:
        """``map_block``: whole pages from the start of the unmapped ``block``; the mapped
        part merges with its free mapped neighbours and joins the free blocks."""
        page = page_size(block.small)
        nbytes = min(block.size, -(-size // page) * page)
        self._remove_free(block)
        if nbytes < block.size:
            rest = Block(block.addr + nbytes, block.size - nbytes, block.small, block.stream,
                         block.segment, mapped=False, prev=block, next=block.next)
            if block.next is not None:
                block.next.prev = rest
            block.next = rest
            block.size = nbytes
            self._insert(rest)
        block.mapped = True
        block.segment.size += nbytes
        self._grow(nbytes, block.addr)
        self._merge(block, block.prev)
        self._merge(block, block.next)
        self._insert(block)
        return block

    def _unmap_free_pages(self, seg: Segment) -> None:
        page = page_size(seg.small)
        b = seg.head
        while b is not None:
            nxt = b.next
            if b.mapped and not b.allocated:
                lo = -(-(b.addr - seg.addr) // page) * page + seg.addr
                hi = (b.addr + b.size - seg.addr) // page * page + seg.addr
                if hi > lo:
                    self._unmap(b, lo, hi)
            b = nxt

    def _unmap(self, b: Block, lo: int, hi: int) -> None:
        self._remove_free(b)
        pieces = [(b.addr, lo - b.addr, True), (lo, hi - lo, False), (hi, b.addr + b.size - hi,
                                                                       True)]
        prev, after = b.prev, b.next
        made = []
        for addr, size, mapped in pieces:
            if size > 0:
                made.append(Block(addr, size, b.small, b.stream, b.segment, mapped=mapped))
        for x, y in zip([prev, *made], [*made, after]):
            if x is not None:
                x.next = y
            if y is not None:
                y.prev = x
        if b.segment.head is b:
            b.segment.head = made[0]
        for m in made:
            self._insert(m)
        self.reserved -= hi - lo
        b.segment.size -= hi - lo
        hole = next(m for m in made if not m.mapped)
        for other in (hole.prev, hole.next):
            if other is not None and not other.allocated and not other.mapped:
                self._remove_free(hole)
                self._merge(hole, other)
                self._insert(hole)


def parse_alloc_conf(text: str | None) -> tuple[bool, list[str]]:
    """``PYTORCH_CUDA_ALLOC_CONF`` (or ``PYTORCH_ALLOC_CONF``): whether expandable segments
    are on, and the options set that this model does not follow (``max_split_size_mb``,
    ``roundup_power2_divisions``, ``garbage_collection_threshold``, ...). Options are
    ``key:value`` pairs separated by commas (c10's ``CUDAAllocatorConfig::parseArgs``);
    ``backend:native`` is the default and changes nothing."""
    expandable, other = False, []
    for item in (text or "").split(","):
        key, _, value = item.strip().partition(":")
        key, value = key.strip(), value.strip()
        if not key:
            continue
        if key == "expandable_segments":
            expandable = value.lower() in ("true", "1")
        elif key == "backend" and value == "native":
            continue
        else:
            other.append(f"{key}:{value}")
    return expandable, other


def seed(segments: Sequence[SeedSegment], expandable: bool = False) -> Allocator:
    """An allocator holding what a process held when a history began (from
    ``torch.cuda.memory._snapshot()["segments"]``: each segment with its blocks in address
    order). Native: the segments and blocks as they were (live blocks keyed ``-1, -2, ...``);
    expandable: the live blocks allocated afresh in address order (their layout in the
    process's own segments is not rebuilt)."""
    alloc = Allocator(expandable=expandable)
    key = -1
    if expandable:
        for seg in segments:
            for size, live in seg.blocks:
                if live:
                    alloc.malloc(key, size, seg.stream)
                    key -= 1
        alloc.decisions.clear()
        return alloc
    for sg in segments:
        seg = Segment(sg.addr, sg.size, sg.small, sg.stream)
        prev, addr = None, sg.addr
        for size, live in sg.blocks:
            b = Block(addr, size, sg.small, sg.stream, seg, allocated=live, prev=prev)
            if prev is None:
                seg.head = b
            else:
                prev.next = b
            if live:
                alloc._live[key] = b
                alloc.allocated += size
                key -= 1
            else:
                alloc._insert(b)
            prev, addr = b, addr + size
        if addr != sg.addr + sg.size:
            raise ValueError(f"segment at {sg.addr:#x}: blocks sum to {addr - sg.addr} B, "
                             f"not its {sg.size} B")
        alloc.segments.append(seg)
        alloc.reserved += sg.size
    alloc.peak_allocated, alloc.peak_reserved = alloc.allocated, alloc.reserved
    return alloc


class SeedSegment(NamedTuple):
    """A segment held when a history began: blocks as (bytes, allocated?) in address order."""

    addr: int
    size: int
    small: bool
    stream: int
    blocks: tuple[tuple[int, bool], ...]


def _expandable_size(b: Block) -> int:
    return b.size + (b.next.size if b.next is not None and not b.next.mapped else 0)


class ReplayResult(BaseModel):
    """What one replay gave: the allocator's peaks and the segments it allocated."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    expandable: bool
    events: int
    peak_allocated_bytes: int = Field(description="max of allocated (whole blocks)")
    peak_reserved_bytes: int = Field(description="max of reserved (segments or mapped pages)")
    end_allocated_bytes: int
    end_reserved_bytes: int
    peak_event: int = Field(description="index of the event at which allocated first "
                            "peaked; -1 when it never rose above the starting state")
    segments: list[tuple[int, int]] = Field(
        description="(event index, bytes) of every segment allocated or pages mapped")


def replay(events: Sequence[AllocEvent], expandable: bool = False,
           allocator: Allocator | None = None,
           on_alloc: Callable[[AllocEvent, Block], None] | None = None
           ) -> tuple[ReplayResult, Allocator]:
    """Replay ``events`` through ``allocator`` (a fresh one by default; pass one to start
    from an earlier state: its live blocks stay, its peaks restart from where it is).
    ``on_alloc`` sees each allocation's event and the block it got (e.g. to compare its
    address with a recorded one)."""
    alloc = allocator or Allocator(expandable=expandable)
    alloc.reset_peaks()
    start, first = alloc.n_events, len(alloc.decisions)
    peak_event, peak = -1, alloc.allocated
    for i, ev in enumerate(events):
        alloc.apply(ev)
        if on_alloc is not None and ev.op == "alloc":
            on_alloc(ev, alloc.block_of(ev.key))
        if alloc.allocated > peak:
            peak, peak_event = alloc.allocated, i
    res = ReplayResult(expandable=alloc.expandable, events=len(events),
                       peak_allocated_bytes=alloc.peak_allocated,
                       peak_reserved_bytes=alloc.peak_reserved,
                       end_allocated_bytes=alloc.allocated, end_reserved_bytes=alloc.reserved,
                       peak_event=peak_event,
                       segments=[(d.event - start, d.size) for d in alloc.decisions[first:]])
    return res, alloc
