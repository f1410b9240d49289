"""Reserved memory at a shape nobody ran: the traced histories learned, synthesised at the
target shape and replayed through the caching allocator's policy.

The pieces are :mod:`afford.fit.memory.trace_scaling` (each allocation's size as a law in
(B, s)), :mod:`afford.fit.memory.allocator` (the policy) and :mod:`afford.fit.memory.breakdown`
(where the memory goes); this module joins them over the certificate's raw records
(:class:`~afford.schema.memory_section.AllocTrace`):

- :func:`replay_recorded`: a traced history replayed from the allocator state its process
  had when it began (the recorded segments: workspaces and whatever else was alive). Its
  peaks against the measured ones are the validation: a replay that does not give the
  measured reserved bytes at the shapes it saw is not trusted at shapes it did not see.
- :func:`learn_traces`: the size laws, on the reference (first) trace's structure.
- :func:`predict`: the history written out at (B, s) and replayed from the reference's
  starting state, native or with expandable segments.
- :func:`breakdown_at`: the classes at the peak of the last step.

Pure: no torch, no I/O. A learned model is memoised per tuple of traces (``afford size``
and plans ask for many shapes of the same model).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass

from afford.fit.memory import allocator as al
from afford.fit.memory.breakdown import CLASSES, breakdown
from afford.fit.memory.trace_scaling import OpTrace, TraceModel, learn
from afford.schema.memory_section import (
    AllocTrace,
    MemoryBreakdownRecord,
    MemoryShape,
    ReplayModel,
    SeedSegment,
)

KEY_BASE = 1 << 40  # keys of a replayed history, clear of the seed's (negative) keys
ROLE_ORDER = ("base", "seq", "batch", "corner")  # traced roles, the reference first


def op_trace(t: AllocTrace, B: int, s: int) -> OpTrace:
    sizes, streams, ops = t.unpacked()
    return OpTrace(B=int(B), s=int(s), sizes=tuple(sizes), streams=tuple(streams),
                   ops=tuple(ops), external_frees=t.external_frees)


def seed_segments(t: AllocTrace) -> list[al.SeedSegment]:
    return [al.SeedSegment(g.addr, g.size, g.small, g.stream,
                           tuple((int(b), bool(live)) for b, live in g.blocks))
            for g in t.seed]


def seeded(seed: Sequence[SeedSegment] | Sequence[al.SeedSegment], expandable: bool
           ) -> al.Allocator:
    segs = [g if isinstance(g, al.SeedSegment) else
            al.SeedSegment(g.addr, g.size, g.small, g.stream,
                           tuple((int(b), bool(x)) for b, x in g.blocks)) for g in seed]
    return al.seed(segs, expandable=expandable)


def replay_recorded(t: AllocTrace, B: int, s: int, expandable: bool = False
                    ) -> al.ReplayResult:
    """The recorded history replayed from the state its process had when it began."""
    alloc = seeded(t.seed, expandable)
    res, _ = al.replay(op_trace(t, B, s).events(KEY_BASE), allocator=alloc)
    return res


@functools.lru_cache(maxsize=32)
def _learn(traces: tuple[OpTrace, ...]) -> TraceModel:
    return learn(list(traces), reference=0)


def learn_traces(traces: Sequence[tuple[AllocTrace, int, int]]) -> TraceModel:
    """The size laws learned from ``(trace, B, s)`` triples, the first as the reference
    (its structure is what gets synthesised; choose one from the process state the
    predictions assume)."""
    return _learn(tuple(op_trace(t, B, s) for t, B, s in traces))


_REPLAYED: dict[tuple, tuple[TraceModel, Sequence, al.ReplayResult]] = {}
MAX_REPLAYED = 4096  # memoised replays (a size report asks for the same shapes again)


def predict(model: TraceModel, seed: Sequence, B: int, s: int, expandable: bool = False
            ) -> al.ReplayResult:
    """Peak allocated and reserved of the history synthesised at (B, s), replayed from
    ``seed`` (the reference trace's starting state). Memoised on the model and seed objects
    (kept alive beside their result, so their ids stay theirs): the answer, the largest
    batch and the replay's table of one ``afford size`` replay the same shapes."""
    key = (id(model), id(seed), int(B), int(s), bool(expandable))
    hit = _REPLAYED.get(key)
    if hit is not None and hit[0] is model and hit[1] is seed:
        return hit[2]
    res, _ = al.replay(model.synthesise(B, s, KEY_BASE), allocator=seeded(seed, expandable))
    if len(_REPLAYED) >= MAX_REPLAYED:
        _REPLAYED.clear()
    _REPLAYED[key] = (model, seed, res)
    return res


def breakdown_at(trace: OpTrace, seed: Sequence, expandable: bool = False,
                 source: str = "synthesised") -> MemoryBreakdownRecord:
    """Where the memory goes at the last step's allocated peak of ``trace`` (a recorded or a
    synthesised history), replayed from ``seed``; the seed's live blocks count as
    workspaces."""
    b = breakdown(trace, expandable=expandable, allocator=seeded(seed, expandable))
    return MemoryBreakdownRecord(
        B=b.B, s=b.s, expandable=expandable, source=source, allocated_bytes=b.allocated_bytes,
        reserved_bytes=b.reserved_bytes, peak_reserved_bytes=b.peak_reserved_bytes,
        slack_bytes=b.slack_bytes, **{f"{c}_bytes": getattr(b, f"{c}_bytes") for c in CLASSES})


@dataclass(frozen=True)
class Learned:
    model: TraceModel
    traced: list[MemoryShape]
    seconds: float


def usable(s: MemoryShape) -> bool:
    return s.ok and s.peak("reserved") is not None and s.peak("allocated") is not None


def traced_shapes(shapes: list[MemoryShape]) -> list[MemoryShape]:
    """The shapes with a whole history, the base first (the reference)."""
    got = [s for s in shapes if s.trace is not None and not s.trace.truncated and usable(s)
           and s.role in ROLE_ORDER]
    return sorted(got, key=lambda s: ROLE_ORDER.index(s.role))


def learn_shapes(shapes: list[MemoryShape]) -> Learned | None:
    """The size laws of the traced shapes; ``None`` with fewer than two."""
    traced = traced_shapes(shapes)
    if len(traced) < 2 or traced[0].role != "base":
        return None
    t0 = time.perf_counter()
    model = learn_traces([(s.trace, s.dims["B"], s.dims["s"]) for s in traced])
    return Learned(model, traced, time.perf_counter() - t0)


def use_replay(replay: ReplayModel | None) -> bool:
    """Whether predictions should come from the replay: validated, and at the held-out
    shapes no worse than the law (or nothing held out to judge by):
    :attr:`ReplayModel.answers`."""
    return replay is not None and replay.answers
