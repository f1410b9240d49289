"""The caching allocator model (afford.fit.memory.allocator): cases worked by hand from the policy
of c10/cuda/CUDACachingAllocator.cpp, and a real H200 history replayed block for block."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from afford.fit.memory.allocator import (
    LARGE_BUFFER,
    MIB,
    AddressSource,
    Allocator,
    AllocEvent,
    SeedSegment,
    Segment,
    is_small,
    parse_alloc_conf,
    replay,
    round_size,
    seed,
    segment_size,
)
from tests.paths import DATA


def test_round_size_is_512_byte_granular():
    assert round_size(1) == 512
    assert round_size(512) == 512
    assert round_size(513) == 1024
    assert round_size(3 * MIB + 1) == 3 * MIB + 512


def test_pools_and_segment_sizes():
    assert is_small(round_size(MIB)) and not is_small(round_size(MIB + 1))
    assert segment_size(512) == 2 * MIB                   # small pool: 2 MiB segments
    assert segment_size(round_size(MIB + 1)) == 20 * MIB  # 1..10 MiB: a 20 MiB segment
    assert segment_size(9 * MIB) == 20 * MIB
    assert segment_size(10 * MIB) == 10 * MIB             # >= 10 MiB: rounded up to 2 MiB
    assert segment_size(10 * MIB + 512) == 12 * MIB


def test_small_request_splits_a_2mib_segment():
    a = Allocator()
    b = a.malloc(1, 100)
    assert (b.size, a.allocated, a.reserved) == (512, 512, 2 * MIB)
    c = a.malloc(2, 1000)  # the remainder of the same segment, right after the first block
    assert (c.addr - b.addr, c.size, a.reserved) == (512, 1024, 2 * MIB)


def test_mid_size_requests_share_one_20mib_segment():
    a = Allocator()
    x = a.malloc(1, 2 * MIB)
    y = a.malloc(2, 2 * MIB)
    assert a.reserved == 20 * MIB and len(a.segments) == 1
    assert y.addr == x.addr + 2 * MIB
    assert a.allocated == 4 * MIB


def test_large_remainder_up_to_1mib_is_not_split_and_counts_as_allocated():
    a = Allocator()
    b = a.malloc(1, 19 * MIB + 200 * 1024)  # segment 20 MiB, remainder 0.8 MiB <= 1 MiB
    assert a.reserved == 20 * MIB
    assert b.size == 20 * MIB and a.allocated == 20 * MIB
    a2 = Allocator()
    b2 = a2.malloc(1, 9 * MIB)  # 20 MiB segment, remainder 11 MiB > 1 MiB: split
    assert b2.size == 9 * MIB and a2.allocated == 9 * MIB


def test_best_fit_takes_the_smallest_free_block_that_fits():
    a = Allocator()
    a.malloc(1, 30 * MIB)
    a.malloc(2, 24 * MIB)
    a.free(1)
    a.free(2)
    assert a.reserved == 54 * MIB
    b = a.malloc(3, 22 * MIB)
    assert b.segment.size == 24 * MIB  # not the 30 MiB one
    assert a.reserved == 54 * MIB      # no new segment


def test_freed_neighbours_merge_and_serve_a_larger_request():
    a = Allocator()
    x = a.malloc(1, 2 * MIB)
    a.malloc(2, 2 * MIB)
    a.malloc(3, 2 * MIB)
    a.free(1)
    a.free(2)  # merges with the free block before it: 4 MiB at x's address
    z = a.malloc(4, 4 * MIB)
    assert z.addr == x.addr and a.reserved == 20 * MIB


def test_blocks_are_reused_only_on_their_stream():
    a = Allocator()
    a.malloc(1, 2 * MIB, stream=0)
    a.free(1)
    a.malloc(2, 2 * MIB, stream=7)
    assert a.reserved == 40 * MIB
    a.malloc(3, 2 * MIB)  # no stream given: the default stream 0, whose free block serves it
    assert a.reserved == 40 * MIB


def test_reserved_never_decreases_until_empty_cache():
    a = Allocator()
    events = [AllocEvent("alloc", 1, 50 * MIB), AllocEvent("alloc", 2, 3 * MIB),
              AllocEvent("free", 1), AllocEvent("alloc", 3, 60 * MIB), AllocEvent("free", 3)]
    res, _ = replay(events, allocator=a)
    assert res.peak_reserved_bytes == res.end_reserved_bytes == (50 + 20 + 60) * MIB
    assert res.peak_allocated_bytes == 63 * MIB
    assert res.segments == [(0, 50 * MIB), (1, 20 * MIB), (3, 60 * MIB)]
    a.empty_cache()  # the 20 MiB segment holds a live block: it stays
    assert a.reserved == 20 * MIB
    a.teardown()
    assert a.reserved == 0 and a.allocated == 0


def test_expandable_segments_map_pages_where_the_free_tail_grows():
    # native: a 2 MiB request takes a 20 MiB segment; a 30 MiB one a new 30 MiB segment
    events = [AllocEvent("alloc", 1, 2 * MIB), AllocEvent("alloc", 2, 30 * MIB)]
    native, _ = replay(events)
    assert native.peak_reserved_bytes == 50 * MIB
    # expandable: one 20 MiB page, then the 18 MiB free tail grows by one more page
    exp, a = replay(events, expandable=True)
    assert exp.peak_reserved_bytes == 2 * LARGE_BUFFER
    assert a.block_of(2).addr == a.block_of(1).addr + 2 * MIB
    assert exp.peak_allocated_bytes == 32 * MIB  # blocks always split: no whole-block slack


def test_expandable_small_pool_pages_are_2mib_and_empty_cache_unmaps_free_pages():
    a = Allocator(expandable=True)
    for k in range(5):
        a.malloc(k, MIB)
    assert a.reserved == 6 * MIB  # 5 MiB rounded up to 2 MiB pages
    for k in range(1, 5):
        a.free(k)
    a.empty_cache()  # block 0 keeps its page mapped
    assert a.reserved == 2 * MIB


def test_a_hole_unmapped_by_empty_cache_is_mapped_whole_and_rejoins_its_neighbours():
    """Three 20 MiB blocks, one large page each; the middle one freed and its page unmapped
    by empty_cache leaves a one-page hole. A 20 MiB request maps the hole exactly (one page,
    nothing left over), and once it and its right neighbour are freed they are one 40 MiB
    free block: a 40 MiB request is served from the cache at the hole's address, mapping
    nothing (c10's map_block splits off an unmapped rest only when one is left)."""
    a = Allocator(expandable=True)
    for k in (1, 2, 3):
        a.malloc(k, 20 * MIB)
    base = a.block_of(1).addr
    a.free(2)
    a.empty_cache()
    assert a.reserved == 40 * MIB
    res, _ = replay([AllocEvent("alloc", 4, 20 * MIB)], allocator=a)
    assert res.segments == [(0, 20 * MIB)] and a.block_of(4).addr == base + 20 * MIB
    # the segment tiles as three live pages and the unmapped tail: no empty block between
    layout, b = [], a.segments[0].head
    while b is not None:
        layout.append((b.addr - base, b.size > 0, b.allocated, b.mapped))
        b = b.next
    assert layout == [(0, True, True, True), (20 * MIB, True, True, True),
                      (40 * MIB, True, True, True), (60 * MIB, True, False, False)]
    res, _ = replay([AllocEvent("free", 4), AllocEvent("free", 3),
                     AllocEvent("alloc", 5, 40 * MIB)], allocator=a)
    assert res.segments == [] and res.peak_reserved_bytes == 60 * MIB
    assert a.block_of(5).addr == base + 20 * MIB


def test_a_two_page_hole_refills_page_by_page_and_then_is_full():
    """Four 20 MiB blocks, the middle two freed and unmapped: a 40 MiB hole. Two 20 MiB
    requests map it a page at a time, in address order; then it is full, and a 40 MiB
    request maps fresh pages after the last block (80 MiB), never over a live one."""
    a = Allocator(expandable=True)
    for k in (1, 2, 3, 4):
        a.malloc(k, 20 * MIB)
    base = a.block_of(1).addr
    a.free(2)
    a.free(3)
    a.empty_cache()
    assert a.reserved == 40 * MIB
    assert a.malloc(5, 20 * MIB).addr - base == 20 * MIB
    assert a.malloc(6, 20 * MIB).addr - base == 40 * MIB and a.reserved == 80 * MIB
    assert a.malloc(7, 40 * MIB).addr - base == 80 * MIB and a.reserved == 120 * MIB


def test_empty_cache_unmaps_only_whole_free_pages():
    """Small pool, expandable: 1 MiB + 1 MiB fill the first 2 MiB page, 512 KiB takes the
    start of a second. With the first 1 MiB freed, no whole page is free (each holds a live
    block), so empty_cache unmaps nothing; with both halves of the first page freed, it
    unmaps that page and only it."""
    a = Allocator(expandable=True)
    a.malloc(1, MIB)
    a.malloc(2, MIB)
    a.malloc(3, 512 * 1024)
    assert a.reserved == 4 * MIB
    a.free(1)
    a.empty_cache()
    assert a.reserved == 4 * MIB
    a.free(2)
    a.empty_cache()
    assert a.reserved == 2 * MIB


def test_pages_unmapped_at_a_segments_start_are_unmapped_again_after_reuse():
    """Large pool, expandable: 30 MiB then 10 MiB fill two 20 MiB pages. With the 30 MiB
    block freed, empty_cache unmaps the first page (the second still holds the 10 MiB
    block, and keeps the freed 10 MiB before it cached); a 20 MiB request maps the first
    page again, and once freed, empty_cache unmaps it again: the cycle leaves the allocator
    where it was."""
    a = Allocator(expandable=True)
    a.malloc(1, 30 * MIB)
    a.malloc(2, 10 * MIB)
    assert a.reserved == 40 * MIB
    a.free(1)
    a.empty_cache()
    assert a.reserved == 20 * MIB
    # the 10 MiB left mapped past the unmapped page (20..30 MiB) still serves a request
    assert a.malloc(4, 10 * MIB).addr == a.segments[0].addr + 20 * MIB
    a.free(4)
    assert a.malloc(3, 20 * MIB).addr == a.segments[0].addr and a.reserved == 40 * MIB
    a.free(3)
    a.empty_cache()
    assert a.reserved == 20 * MIB


def test_expandable_best_fit_counts_a_block_next_to_unmapped_space_as_big_as_it_can_grow():
    """Large pool, expandable, five 20 MiB pages (MiB offsets). Free blocks: 4 MiB at 96
    touching the unmapped tail (as big as the span), 5 MiB at 15 touching a one-page hole
    (counts 25 MiB), 6 MiB at 54 between live blocks (counts 6 MiB). A 4 MiB request takes
    the 6 MiB block: the smallest once growth room is counted, leaving both ends to grow."""
    a = Allocator(expandable=True)
    for k in range(5):
        a.malloc(k, 20 * MIB)
    base = a.block_of(0).addr
    for old, new, size in ((0, 10, 15), (2, 12, 14), (4, 14, 16)):
        a.free(old)
        a.malloc(new, size * MIB)  # the low end of the freed page; the rest stays free
    a.free(1)
    a.empty_cache()  # 15..40 free: its whole page 20..40 is unmapped, 15..20 stays
    assert a.reserved == 80 * MIB
    assert a.malloc(20, 4 * MIB).addr - base == 54 * MIB and a.reserved == 80 * MIB


def test_the_peak_event_is_the_first_to_reach_the_peak():
    """Allocated peaks at 2 MiB twice (events 0 and 2): the peak event is the first one, as
    the result documents; a later equal value is not a new peak."""
    events = [AllocEvent("alloc", 1, 2 * MIB), AllocEvent("free", 1),
              AllocEvent("alloc", 2, 2 * MIB)]
    res, _ = replay(events)
    assert res.peak_allocated_bytes == 2 * MIB and res.peak_event == 0


def test_alloc_conf_reports_every_option_the_model_does_not_follow():
    """expandable_segments is modelled and backend:native is the default; any other backend
    (cudaMallocAsync is a different allocator altogether) or option is reported."""
    assert parse_alloc_conf(None) == (False, [])
    assert parse_alloc_conf("expandable_segments:True, backend:native") == (True, [])
    assert parse_alloc_conf("backend:cudaMallocAsync") == (False, ["backend:cudaMallocAsync"])
    assert parse_alloc_conf("max_split_size_mb:native,expandable_segments:false") == \
        (False, ["max_split_size_mb:native"])


def test_an_empty_history_reserves_nothing():
    fresh = Allocator()  # holds and has held nothing
    assert (fresh.allocated, fresh.reserved, fresh.peak_allocated, fresh.peak_reserved) == \
        (0, 0, 0, 0)
    res, a = replay([])
    assert (res.peak_allocated_bytes, res.peak_reserved_bytes) == (0, 0)
    assert res.segments == [] and a.reserved == a.allocated == 0


def test_replay_starts_from_a_given_state():
    a = Allocator()
    a.malloc(100, 32 * MIB)
    a.malloc(101, 8 * MIB)
    a.teardown(keep=[100])
    res, _ = replay([AllocEvent("alloc", 1, 5 * MIB)], allocator=a)
    assert res.peak_reserved_bytes == 32 * MIB + 20 * MIB
    assert res.peak_allocated_bytes == 37 * MIB


def test_a_seeded_snapshot_keeps_clear_of_the_history_keys_and_serves_stream_zero():
    """A snapshot's live blocks are keyed -1, -2, ..., so a history's own keys (0, 1, ...)
    never collide with them; an event without a stream is on the default stream 0, where the
    snapshot's cached block serves it without a new segment."""
    snap = [SeedSegment(addr=0, size=20 * MIB, small=False, stream=0,
                        blocks=((4 * MIB, True), (16 * MIB, False)))]
    for expandable in (False, True):
        a = seed(snap, expandable=expandable)
        assert a.live_keys() == [-1] and a.allocated == 4 * MIB
    a = seed(snap)
    res, _ = replay([AllocEvent("alloc", 0, 10 * MIB), AllocEvent("free", 0)], allocator=a)
    assert res.peak_reserved_bytes == 20 * MIB and res.segments == []
    assert res.peak_allocated_bytes == 14 * MIB


def test_every_live_block_of_a_seeded_snapshot_has_its_own_key():
    """Two live blocks in a native snapshot are keyed -1 and -2: each can be freed on its
    own, so a teardown frees both and returns the whole segment to the driver."""
    snap = [SeedSegment(addr=0, size=20 * MIB, small=False, stream=0,
                        blocks=((4 * MIB, True), (6 * MIB, True), (10 * MIB, False)))]
    a = seed(snap)
    assert a.live_keys() == [-1, -2] and a.allocated == 10 * MIB
    assert a.block_of(-2).addr == 4 * MIB
    a.teardown()
    assert a.reserved == a.allocated == 0


def test_a_replay_that_never_rises_above_its_start_has_no_peak_event():
    """The peak event is -1 when allocated never rises above where the replay began: an
    empty history, or one that only frees a block held before it."""
    assert replay([])[0].peak_event == -1
    a = Allocator()
    a.malloc(1, 2 * MIB)
    res, _ = replay([AllocEvent("free", 1)], allocator=a)
    assert res.peak_event == -1 and res.peak_allocated_bytes == 2 * MIB


def test_unknown_free_and_double_alloc_are_errors():
    a = Allocator()
    with pytest.raises(ValueError, match="not allocated"):
        a.free(1)
    a.malloc(1, 10)
    with pytest.raises(ValueError, match="already allocated"):
        a.malloc(1, 10)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 40 * MIB)), min_size=1, max_size=60),
       st.booleans())
def test_accounting_invariants(ops, expandable):
    """Random alloc/free sequences: reserved never drops, allocated never exceeds it, and
    the live blocks of one segment never overlap."""
    a = Allocator(expandable=expandable)
    live, last_reserved = [], 0
    for k, (free, size) in enumerate(ops):
        if free and live:
            a.free(live.pop(size % len(live)))
        else:
            a.malloc(k, size)
            live.append(k)
        assert a.reserved >= last_reserved and a.allocated <= a.reserved
        last_reserved = a.reserved
        spans = sorted((a.block_of(x).addr, a.block_of(x).size) for x in live)
        assert all(p + s <= q for (p, s), (q, _) in zip(spans, spans[1:]))
    assert a.allocated == sum(a.block_of(x).size for x in live)


def test_a_recorded_h200_history_replays_block_for_block():
    """The first 700 events of a real history (tinylm, fp32, 4 x 1024, fresh process):
    given the driver's segment addresses, every block lands where PyTorch put it and the
    same segments are allocated."""
    doc = json.loads((DATA / "allocator_trace_excerpt.json").read_text())
    rows = doc["events"]
    seg_addrs = [addr for op, addr, _ in rows if op == "s"]
    recorded_segments = [size for op, _, size in rows if op == "s"]
    a = Allocator(addresses=AddressSource(seg_addrs))
    misplaced = 0
    for op, addr, size in rows:
        if op == "a":
            misplaced += a.malloc(addr, size).addr != addr
        elif op == "f":
            a.free(addr)
    assert misplaced == 0
    assert [d.size for d in a.decisions] == recorded_segments
    assert a.reserved == doc["reserved_bytes_after"]


def test_a_recorded_address_is_used_unless_it_overlaps_a_held_segment():
    """Segments are half-open ranges [addr, addr + extent): a recorded address whose segment
    would end exactly where a held one starts is used as recorded; one whose segment would
    run into a held one above it is skipped for the address below the lowest held
    segment (rounded down to 2 MiB)."""
    held = [Segment(10 * LARGE_BUFFER, LARGE_BUFFER, False, 0),
            Segment(2 * LARGE_BUFFER, LARGE_BUFFER, False, 0)]
    touching = AddressSource([9 * LARGE_BUFFER])
    assert touching.next(LARGE_BUFFER, held) == 9 * LARGE_BUFFER
    overlapping = AddressSource([9 * LARGE_BUFFER + 2 * MIB])
    assert overlapping.next(LARGE_BUFFER, held) == LARGE_BUFFER
    # and one lying wholly inside a held segment is skipped too
    inside = AddressSource([10 * LARGE_BUFFER + 2 * MIB])
    assert inside.next(2 * MIB, held) == 2 * LARGE_BUFFER - 2 * MIB


def test_best_fit_reuses_an_exact_size_hole_whatever_its_address():
    """Past recorded addresses, segments are placed descending from 2^47, and an expandable
    one spans 16 TiB, so the ninth expandable segment (nine pools: one per stream) lies
    below address 0. A 20 MiB hole between two live blocks there still serves a 20 MiB
    request, reserving nothing more, as it does in the eighth segment (at address 0)."""
    for n in (8, 9):
        a = Allocator(expandable=True)
        for stream in range(n):
            a.malloc(stream, 20 * MIB, stream)
        last = n - 1
        a.malloc(100, 20 * MIB, last)
        a.malloc(101, 20 * MIB, last)
        hole = a.block_of(100).addr
        a.free(100)
        reserved = a.reserved
        assert a.malloc(102, 20 * MIB, last).addr == hole and a.reserved == reserved
        assert (hole < 0) == (n == 9)
